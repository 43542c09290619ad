"""The estimation process's Python per sample, its nodes as `up` builds them, without DDS
(issue 35).

The estimation process (ft_contact_estimator + contact_localizer, composed, reading the
shared samples: composed.build with their config/ files) is built in this process. A Panda
free-motion stream (`_ros_load.PandaStream`, the residual ~0: τ_ext a little noise) is
written into the shared-memory ring as the chain writes it, and the base F/T sensor's
readings of the same samples (with noise) are handed, serialised, to the F/T estimator's
polled callback; every 5 ms (on the wall clock) a batch of 5 readings then the feed's take,
as the process's wake does them. Stamps are fixed (not the wall clock: each node's stamp
clock reads the newest one), so every run gets the same inputs. Prints µs of this thread's
CPU per sample of the wake (median, mean, p99) at rest, and then over a second of contacts
(`end_to_end.py`'s: 60 N on the forearm for 50 ms every 0.25 s); and a digest of every
output (base wrenches handed to the localizer, F/T point, wrench, peak forces, markers, the
localizer's point, wrench and markers: recorded, not published), so that a change that
must not move any output can be checked against main's (before = after).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/estimation_cost.py [--seconds S] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import pickle
import pstats
import sys
import time
from collections import defaultdict

import numpy as np
from rclpy.serialization import serialize_message

from _ros_load import (Contacts, PandaStream, contact_effect, machine, realtime_priority,
                       table)
from chain_wake import process_nodes
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.sample_ring import SampleRingWriter, ring_name
from contact_estimation.core.chain.stamps import sec_nanosec
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.ros.conversions import seconds_to_stamp, wrench_stamped
from contact_estimation.ros.testing import ros_context

RATE = 1000.0
BATCH = 5            # samples per wake: the feed's PERIOD at 1 kHz
WARMUP = 1000        # samples: the observers settle
CONTACT_SECONDS = 1.0
CONTACTS = Contacts(0, 0.0, 0.25, 0.05, 'panda_link5', (0.0, 0.06, -0.12), (0.0, 60.0, -30.0))
FIRST_STAMP_NS = 1_800_000_000 * 1_000_000_000  # fixed: the same bits in every run
TAU_NOISE, FORCE_NOISE, TORQUE_NOISE = 0.05, 0.3, 0.03  # N·m, N, N·m (σ)
_NOT_OUTPUTS = ('diagnostics', 'rosout', 'parameter_events')


class Inputs:
    """`count` samples: the rest (`rest` of them) then a second of contacts, as the ring's
    JointSamples and the F/T readings' bytes."""

    def __init__(self, robot: RobotModel, rest: int):
        count = rest + int(CONTACT_SECONDS * RATE)
        stream = PandaStream(robot, RATE, count, fingers=False, wrenches=True)
        rng = np.random.default_rng(0)
        tau_ext = rng.normal(0.0, TAU_NOISE, (count, robot.n))
        wrench = stream.wrench + rng.normal(0.0, 1.0, (count, 6)) * np.repeat(
            [FORCE_NOISE, TORQUE_NOISE], 3)
        for i in range(rest, count):
            if CONTACTS.active(i - rest, RATE):
                torque, on_sensor = contact_effect(robot, stream.q[i], CONTACTS)
                tau_ext[i] += torque
                wrench[i] += on_sensor
        self.stamps = [FIRST_STAMP_NS + i * 1_000_000 for i in range(count)]
        self.samples = [JointSample(ns * 1e-9, stream.q[i], stream.v[i], stream.effort[i],
                                    tau_ext[i], sec_nanosec(ns))
                        for i, ns in enumerate(self.stamps)]
        self.readings = [serialize_message(wrench_stamped(
            seconds_to_stamp(ns * 1e-9), robot.base_link, wrench[i, :3], wrench[i, 3:]))
            for i, ns in enumerate(self.stamps)]


class Outputs:
    """Every output of the nodes, recorded in order (nothing is published): `digest` per
    topic."""

    def __init__(self, nodes):
        self.recorded: dict[str, list[bytes]] = defaultdict(list)
        for node in nodes:
            for publisher in node.publishers:
                if not publisher.topic_name.endswith(_NOT_OUTPUTS):
                    publisher.publish = self._recorder(publisher.topic_name)
        ft = next(n for n in nodes if n.get_name() == 'ft_contact_estimator')
        ft._base_wrench.receivers.append(self._base_wrenches)

    def _recorder(self, topic: str):
        # repr, not the CDR bytes: their alignment padding is not always the same
        return lambda msg: self.recorded[topic].append(repr(msg).encode())

    def _base_wrenches(self, wrenches) -> None:
        for wrench in wrenches:
            self.recorded['base_wrench (handed over)'].append(
                np.float64(wrench.t).tobytes() + wrench.frame_id.encode()
                + wrench.wrench.tobytes())

    def digest(self) -> list[str]:
        rows = []
        for topic, items in sorted(self.recorded.items()):
            rows.append(f'{topic:48s} | {len(items):6d} | '
                        f'{hashlib.sha256(b"".join(items)).hexdigest()[:16]}')
        return rows


def wake(ft_callback, take, inputs: Inputs, start: int) -> float:
    """One wake: the F/T readings of the batch from `start`, then the feed's take; s of
    this thread's CPU."""
    began = time.thread_time()
    for raw in inputs.readings[start:start + BATCH]:
        ft_callback(raw)
    take()
    return time.thread_time() - began


def feed(nodes, writer: SampleRingWriter, inputs: Inputs, first: int, count: int,
         stamp: list) -> np.ndarray:
    """µs of CPU per sample of each wake over samples [first, first + count), a batch
    written every BATCH / RATE s of the wall clock."""
    ft = next(n for n in nodes if n.get_name() == 'ft_contact_estimator')
    ft_callback = ft.polled_subscriptions[0].callback
    take = nodes[0].catch_up
    spent = []
    next_at = time.monotonic()
    for k in range(first, first + count, BATCH):
        next_at += BATCH / RATE
        time.sleep(max(next_at - time.monotonic(), 0.0))
        stamp[0] = inputs.stamps[k + BATCH - 1] * 1e-9
        writer.write_batch(inputs.samples[k:k + BATCH])
        spent.append(wake(ft_callback, take, inputs, k) / BATCH)
    return np.array(spent) * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=20.0, help='seconds at rest')
    parser.add_argument('--profile', action='store_true',
                        help="cProfile's top functions at rest")
    parser.add_argument('--sort', default='tottime', help='their order (pstats keys)')
    parser.add_argument('--save', metavar='FILE',
                        help='write every output (pickled: topic → the repr of each message) to '
                        'FILE, to find where two runs differ')
    args = parser.parse_args(argv)
    print(f'machine: {machine()}; this process at {realtime_priority(20)}, as the '
          'estimation process')
    robot = RobotModel.load('panda')
    rest = int(args.seconds * RATE)
    inputs = Inputs(robot, WARMUP + rest)
    rows = []
    with ros_context() as context:
        started = time.perf_counter()
        nodes = process_nodes(context, 'contact_estimation_estimation')
        print(f'nodes built in {time.perf_counter() - started:.2f} s')
        writer = SampleRingWriter(ring_name(nodes[0].get_namespace()), robot.n)
        try:
            stamp = [inputs.stamps[0] * 1e-9]  # the nodes' stamp clock: the newest stamp
            for node in nodes:
                node.stamp_clock = lambda: stamp[0]
            outputs = Outputs(nodes)
            nodes[0].catch_up()  # the reader attaches: it follows the writer from now on
            feed(nodes, writer, inputs, 0, WARMUP, stamp)
            profile = cProfile.Profile() if args.profile else None
            if profile:
                profile.enable()
            at_rest = feed(nodes, writer, inputs, WARMUP, rest, stamp)
            if profile:
                profile.disable()
                pstats.Stats(profile).sort_stats(args.sort).print_stats(40)
            in_contact = feed(nodes, writer, inputs, WARMUP + rest,
                              int(CONTACT_SECONDS * RATE), stamp)
        finally:
            writer.close()
            for node in nodes:
                node.destroy_node()
    for name, spent in (('at rest', at_rest), ('contacts', in_contact)):
        rows.append(f'{name:8s} | {len(spent) * BATCH:7d} | {np.median(spent):9.1f} | '
                    f'{spent.mean():9.1f} | {np.percentile(spent, 99):9.1f}')
    print(f'\nthe estimation process\'s wake ({BATCH} F/T readings, then the take of '
          f'{BATCH} samples), µs of thread CPU per sample\n')
    print(table('phase    | samples | median    | mean      | p99', rows))
    print('\noutputs (every one, in order: same digest = same bits)\n')
    print(table(f'{"topic":48s} | count  | sha256', outputs.digest()))
    if args.save:
        with open(args.save, 'wb') as f:
            pickle.dump(dict(outputs.recorded), f)
    return 0


if __name__ == '__main__':
    sys.exit(main())
