"""The hand-written sample ring (core/chain/sample_ring.py) against iceoryx2's publish-subscribe
over shared memory (issue 39), carrying the same joint sample from the chain's process to a
reader: the writer's µs per sample, the reader's µs per sample taking 1 or 20 at a time (the
feed takes every 5 ms: 5 at 1 kHz, 20 after a 20 ms stall), and the latency from a write in
one process to its take in another (the reader polling every `--poll` s, 0.1 ms by default:
near the transport's floor; the suite's 5 ms poll adds to either alike). Each latency run is
repeated `--rounds` times, the two transports in turn, so that a change of the machine's load
falls on both.

iceoryx2 is not a dependency of the suite; install it apart to measure:

    pip install --target /tmp/iox iceoryx2
    PYTHONPATH=$PWD:/tmp/iox python benchmarks/ring_vs_iceoryx2.py [--samples 2000] [--joints 7]
        [--poll 1e-4] [--rounds 2]

Both ends build what the suite's do: the writer a slot from a JointSample, the reader a
JointSample (numpy arrays of its own) from a slot.
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import multiprocessing
import os
import time
import uuid

import numpy as np

from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.sample_ring import (FRAME_BYTES, SampleRingReader,
                                                       SampleRingWriter, slot_dtype)
from contact_estimation.core.chain.stamps import sec_nanosec

SETTLE = 0.3  # s: both ends up before the first timed sample
PER_TAKE = (1, 20)


@functools.cache
def payload_type(n: int):
    """The ring's slot without its sequence numbers (iceoryx2 keeps its own), as ctypes."""
    array = ctypes.c_double * n
    fields = [('t', ctypes.c_double), ('stamp_ns', ctypes.c_int64), ('has_tau', ctypes.c_int64),
              ('q', array), ('v', array), ('tau', array), ('tau_ext', array),
              ('frame_id', ctypes.c_char * FRAME_BYTES)]
    return type(f'JointSlot{n}', (ctypes.Structure,), {
        '_fields_': fields, 'type_name': staticmethod(lambda: f'JointSlot{n}')})


@functools.cache
def payload_dtype(n: int) -> np.dtype:
    """The ring's slot less its sequence numbers (iceoryx2 keeps its own), as numpy sees it."""
    names = [name for name in slot_dtype(n).names if not name.startswith('seq')]
    dtype = np.dtype([(name, slot_dtype(n).fields[name][0]) for name in names], align=True)
    assert dtype.itemsize == ctypes.sizeof(payload_type(n))
    return dtype


def slot_view(pointer: int, n: int):
    """One payload at `pointer`, as a numpy record (its fields write through)."""
    dtype = payload_dtype(n)
    return np.ndarray((1,), dtype, (ctypes.c_char * dtype.itemsize).from_address(pointer))[0]


def _open_service(name: str, n: int, depth: int):
    """(node, service): the publish-subscribe service `name` of n-joint payloads, opened or
    created alike by its writer and its reader."""
    import iceoryx2 as iox2
    node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
    service = (node.service_builder(iox2.ServiceName.new(name))
               .publish_subscribe(payload_type(n)).subscriber_max_buffer_size(depth)
               .history_size(0).max_publishers(1).open_or_create())
    return node, service


class Iceoryx2Writer:
    def __init__(self, name: str, n: int, depth: int):
        self.node, service = _open_service(name, n, depth)
        self.publisher = service.publisher_builder().create()
        self.n = n

    def write(self, sample: JointSample) -> None:
        loan = self.publisher.loan_uninit()
        slot = slot_view(loan.payload_ptr, self.n)
        slot['t'], slot['stamp_ns'] = sample.t, round(sample.t * 1e9)
        slot['has_tau'] = sample.tau is not None
        slot['q'], slot['v'], slot['tau'], slot['tau_ext'] = (
            sample.q, sample.v, sample.tau, sample.tau_ext)
        slot['frame_id'] = sample.frame_id.encode()[:FRAME_BYTES]
        loan.assume_init().send()

    def close(self) -> None:
        del self.publisher, self.node


class Iceoryx2Reader:
    def __init__(self, name: str, n: int, depth: int):
        self.node, service = _open_service(name, n, depth)
        self.subscriber = service.subscriber_builder().create()
        self.n = n

    def take(self) -> list[JointSample]:
        samples = []
        while (received := self.subscriber.receive()) is not None:
            slot = slot_view(received.payload_ptr, self.n)
            samples.append(JointSample(
                float(slot['t']), slot['q'].copy(), slot['v'].copy(),
                slot['tau'].copy() if slot['has_tau'] else None, slot['tau_ext'].copy(),
                sec_nanosec(int(slot['stamp_ns'])), slot['frame_id'].decode(errors='replace')))
            del received  # the slot goes back to the publisher
        return samples

    def close(self) -> None:
        del self.subscriber, self.node


def make(kind: str, end: str, name: str, n: int, depth: int):
    if kind == 'ring':
        return SampleRingWriter(name, n, depth) if end == 'writer' else SampleRingReader(name)
    return (Iceoryx2Writer if end == 'writer' else Iceoryx2Reader)(name, n, depth)


def samples(n: int, count: int) -> list[JointSample]:
    ones = np.ones(n)
    return [JointSample(k * 1e-3, ones, ones, ones, ones, None, 'base') for k in range(count)]


def costs(kind: str, n: int, count: int, per_take: int) -> tuple[float, float]:
    """µs per sample (medians over takes) of the write and of the take, one process."""
    name = f'ce_bench_{uuid.uuid4().hex[:8]}'
    writer = make(kind, 'writer', name, n, 2048)
    reader = make(kind, 'reader', name, n, 2048)
    reader.take()
    writes, takes = [], []
    try:
        batch = samples(n, per_take)
        for _ in range(count // per_take):
            started = time.perf_counter()
            for sample in batch:
                writer.write(sample)
            writes.append((time.perf_counter() - started) / per_take)
            started = time.perf_counter()
            taken = reader.take()
            takes.append((time.perf_counter() - started) / per_take)
            assert len(taken) == per_take, (kind, len(taken))
    finally:
        reader.close()
        writer.close()
    return float(np.median(writes)) * 1e6, float(np.median(takes)) * 1e6


def _read_latencies(kind, name, n, count, poll, ready, results) -> None:
    """The reader's process: takes every `poll` s, each sample's write-to-take time."""
    reader = make(kind, 'reader', name, n, 2048)
    reader.take()
    ready.set()
    latencies, deadline = [], time.monotonic() + count * 2e-3 + 5.0
    while len(latencies) < count and time.monotonic() < deadline:
        for sample in reader.take():
            latencies.append(time.monotonic() - sample.t)
        time.sleep(poll)
    reader.close()
    results.put(latencies)


def latency(kind: str, n: int, count: int, poll: float) -> list[float]:
    """µs from the write in one process to the take in another, a sample every 1 ms."""
    name = f'ce_bench_{uuid.uuid4().hex[:8]}'
    context = multiprocessing.get_context('spawn')
    writer = make(kind, 'writer', name, n, 2048)
    ready, results = context.Event(), context.Queue()
    process = context.Process(target=_read_latencies, args=(kind, name, n, count, poll, ready,
                                                                  results))
    process.start()
    ready.wait(30.0)
    time.sleep(SETTLE)
    ones = np.ones(n)
    try:
        for _ in range(count):
            writer.write(JointSample(time.monotonic(), ones, ones, ones, ones, None, 'base'))
            time.sleep(1e-3)
        latencies = results.get(timeout=30.0)
    finally:
        process.join(10.0)
        writer.close()
    return [x * 1e6 for x in latencies]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--samples', type=int, default=2000)
    parser.add_argument('--joints', type=int, default=7)
    parser.add_argument('--poll', type=float, default=1e-4, help="the reader's poll period, s")
    parser.add_argument('--rounds', type=int, default=2)
    args = parser.parse_args()
    import iceoryx2
    print(f'{args.joints} joints, {args.samples} samples a row; iceoryx2 '
          f'{getattr(iceoryx2, "__version__", "")}\n')
    print('| transport | samples a take | write µs/sample | take µs/sample |\n|---|---|---|---|')
    for kind in ('ring', 'iceoryx2'):
        for per_take in PER_TAKE:
            write, take = costs(kind, args.joints, args.samples, per_take)
            print(f'| {kind} | {per_take} | {write:.2f} | {take:.2f} |')
    print(f'\n| transport, round | latency to another process p50 / p99 / max µs (polled every '
          f'{args.poll * 1e3:g} ms) | load average |\n|---|---|---|')
    for round_ in range(args.rounds):
        for kind in ('ring', 'iceoryx2'):
            values = latency(kind, args.joints, args.samples, args.poll)
            print(f'| {kind}, {round_ + 1} | {np.percentile(values, 50):.0f} / '
                  f'{np.percentile(values, 99):.0f} / {max(values):.0f} ({len(values)} of '
                  f'{args.samples}) | {os.getloadavg()[0]:.1f} |')


if __name__ == '__main__':
    main()
