"""Joint samples from the chain's process to the estimators' process through shared memory.
No ROS.

The 1 kHz chain (listener → residual → detector) runs in a process of its own so that no
estimator can take its CPU or its interpreter lock (issue 26). The estimators need every
sample it makes (q, q̇, τ, τ_ext with its stamp). Publishing them over DDS would cost the
chain a serialisation per sample and the estimators a deserialisation per sample; here the
chain writes each sample into a ring of fixed slots in shared memory (a few numpy copies)
and the estimators' process reads what is new when it has time, in batches.

One writer, any number of readers, no lock: each slot carries the sequence number of the
sample in it, written before (negated: "being written") and after the data; a reader keeps
a slot only if both read the same, so a slot overwritten while it was read is counted as
lost, never half-read. A reader that falls more than `capacity` samples behind loses the
oldest and counts them (`lost`): the ring is bounded, and nothing blocks the writer.

The segment's name is the one thing both processes must agree on (`ring_name`: the ROS
namespace and domain, so two arms on one host do not share one); the writer creates it
anew at start (a random `generation`), and marks it closed when it stops. A reader that
finds its segment closed, or sees no new sample for `IDLE_TIME` (a writer killed without
closing), opens the name again and follows a new writer from its first sample.

Each slot is described once, `slot_dtype(n)` (a numpy structured dtype): the sequence number
before and after the data, the chain's time `t`, the stamp in one form (`stamp_ns`, whole ns),
whether τ was given, q, q̇, τ, τ_ext, and the frame_id in FRAME_BYTES bytes. A longer
frame_id is kept cut, and the writer says so once per frame (`on_cut`).

The seqlock relies on x86-64's memory order: stores become visible in program order, and
loads are not reordered with older loads. Python puts no barrier between its stores, so on a
weaker order (ARMv8, POWER) a reader could accept a slot half-written. There the writer
refuses (`ORDERED_STORES`), and the suite runs its nodes as separate processes over DDS
(manifest.processes). docs/performance.md measures iceoryx2, which would carry it there.
"""
from __future__ import annotations

import os
import platform
import re
import secrets
import time
from multiprocessing import shared_memory
from typing import Callable

import numpy as np

from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.stamps import NS_PER_S, nanoseconds

ORDERED_STORES = platform.machine().lower() in ('x86_64', 'amd64')

CAPACITY = 2048          # samples: 2 s at 1 kHz
IDLE_TIME = 0.5          # s without a new sample before the reader looks for a new writer
FRAME_BYTES = 64         # frame_id kept up to this many UTF-8 bytes (a longer one: `on_cut`)
_HEADER = 4              # int64: written count, generation, joints, capacity
_WRITTEN_HERE: set[str] = set()  # segments this process created (and will unlink)


def slot_dtype(n: int) -> np.dtype:
    """One slot of the ring for an arm of `n` joints: the one description of its layout."""
    return np.dtype([
        ('seq_before', np.int64),           # −seq while the slot is written, then seq
        ('t', np.float64),                  # s, the sample's time as the chain used it
        ('stamp_ns', np.int64),             # the stamp, whole ns (its sec, nanosec derived)
        ('has_tau', np.int64),              # 1: τ measured, 0: the driver gives none
        ('q', np.float64, (n,)), ('v', np.float64, (n,)),
        ('tau', np.float64, (n,)), ('tau_ext', np.float64, (n,)),
        ('frame_id', f'S{FRAME_BYTES}'),    # UTF-8, NUL-padded
        ('seq_after', np.int64),            # seq once the data is written
    ])


def ring_name(namespace: str = '', domain: str | None = None) -> str:
    """The shared-memory name of one suite's samples (namespace and ROS domain)."""
    domain = os.environ.get('ROS_DOMAIN_ID', '0') if domain is None else domain
    tag = re.sub(r'[^A-Za-z0-9]+', '_', namespace).strip('_') or 'root'
    return f'contact_estimation_{domain}_{tag}_samples'


def _segment_size(n: int, capacity: int) -> int:
    return _HEADER * 8 + capacity * slot_dtype(n).itemsize


class _Layout:
    """Views of a segment: header and slots."""

    def __init__(self, memory: shared_memory.SharedMemory, n: int, capacity: int):
        self.memory = memory
        self.header = np.ndarray((_HEADER,), np.int64, memory.buf, 0)
        self.slots = np.ndarray((capacity,), slot_dtype(n), memory.buf, _HEADER * 8)
        self.n, self.capacity = n, capacity
        # One view per field over every slot: plain ndarray indexing per sample (a field
        # looked up by name on each write cost 5 times the write).
        self.field = {name: self.slots[name] for name in self.slots.dtype.names}

    def close(self) -> None:
        del self.header, self.slots
        self.memory.close()


class SampleRingWriter:
    """The chain's end: `write(sample)` for every sample with τ_ext. `on_cut(frame_id)` is
    called once for each frame_id longer than FRAME_BYTES (it is kept cut)."""

    def __init__(self, name: str, n_joints: int, capacity: int = CAPACITY,
                 on_cut: Callable[[str], None] = lambda frame_id: None):
        if not ORDERED_STORES:
            raise RuntimeError(f'the shared sample ring needs x86-64\'s memory order, and this '
                               f'machine is {platform.machine()}: run the nodes separate '
                               '(`up --separate`, separate:=true)')
        size = _segment_size(n_joints, capacity)
        try:  # a segment left by a writer that died: replaced
            stale = shared_memory.SharedMemory(name)
            stale.close()
            stale.unlink()
        except FileNotFoundError:
            pass
        memory = shared_memory.SharedMemory(name, create=True, size=size)
        _WRITTEN_HERE.add(name)
        self._ring = _Layout(memory, n_joints, capacity)
        self._ring.slots['seq_before'] = 0
        self._ring.header[:] = (0, secrets.randbits(62), n_joints, capacity)
        self.name = name
        self._on_cut = on_cut
        self._frames: dict[str, bytes] = {}
        self._written = 0  # header[0], which only this writer changes
        # The field views in slot order, unpacked per write (cheaper than a lookup each).
        self._fields = tuple(self._ring.field[name] for name in self._ring.slots.dtype.names)

    def write(self, sample: JointSample) -> None:
        """One sample into the next slot: its sequence number negated, the data, the number
        after it, then the number before it (in this order: the seqlock)."""
        seq_before, t, stamp_ns, has_tau, q, v, tau, tau_ext, frame_id, seq_after = self._fields
        count = self._written
        i, seq = count % self._ring.capacity, count + 1
        seq_before[i] = -seq
        t[i] = sample.t
        stamp_ns[i] = _stamp_ns(sample)
        has_tau[i] = sample.tau is not None
        q[i] = sample.q
        v[i] = sample.v
        if sample.tau is not None:
            tau[i] = sample.tau
        tau_ext[i] = sample.tau_ext
        frame_id[i] = self._frame(sample.frame_id)
        seq_after[i] = seq
        seq_before[i] = seq
        self._ring.header[0] = self._written = seq

    def write_batch(self, samples) -> None:
        for sample in samples:
            self.write(sample)

    def _frame(self, frame_id: str) -> bytes:
        if frame_id not in self._frames:
            raw = frame_id.encode()
            if len(raw) > FRAME_BYTES:
                self._on_cut(frame_id)
            if len(self._frames) > 16:
                self._frames.clear()
            self._frames[frame_id] = raw[:FRAME_BYTES]
        return self._frames[frame_id]

    def close(self) -> None:
        """Mark the segment closed and remove its name, unless a newer writer (a chain's
        process started while this one was stopping) has taken the name over since."""
        generation = int(self._ring.header[1])
        self._ring.header[1] = 0  # closed: readers look for a new writer
        self._ring.close()
        try:
            current = shared_memory.SharedMemory(self.name)
        except FileNotFoundError:
            return
        taken_over = int(np.ndarray((1,), np.int64, current.buf, 8)[0]) not in (generation, 0)
        current.close()
        if taken_over:  # nor may this process's resource tracker remove it at exit
            _untrack(current)
        else:
            self._ring.memory.unlink()
        _WRITTEN_HERE.discard(self.name)


class SampleRingReader:
    """The estimators' end: `take()` gives the samples written since the last call, oldest
    first, as JointSamples with τ_ext (stamp = (sec, nanosec); `make_stamp` turns it into
    the caller's stamp type). `lost` counts samples overwritten before they were read."""

    def __init__(self, name: str, make_stamp=None, clock: Callable[[], float] = time.monotonic):
        self.name = name
        self._make_stamp = make_stamp or (lambda sec, nanosec: (sec, nanosec))
        self._clock = clock  # s, for IDLE_TIME
        self._ring: _Layout | None = None
        self._generation = None
        self._next = 0
        self._last_new = clock()  # when the last new sample (or the attach) was seen
        self.lost = 0

    def attached(self) -> bool:
        """Attach (again, if the writer was restarted); False while there is no writer."""
        if self._ring is not None and int(self._ring.header[1]) == self._generation \
                and self._clock() - self._last_new < IDLE_TIME:
            return True
        self._last_new = self._clock()
        try:
            memory = shared_memory.SharedMemory(self.name)
        except FileNotFoundError:
            self._detach()
            return False
        if self.name not in _WRITTEN_HERE:
            _untrack(memory)
        header = np.ndarray((_HEADER,), np.int64, memory.buf, 0)
        count, generation, n, capacity = (int(x) for x in header)
        del header
        if generation == self._generation or generation == 0:
            memory.close()
            return self._ring is not None and generation != 0
        first_writer = self._generation is None
        self._detach()
        self._ring = _Layout(memory, n, capacity)
        # The first writer from now on; a restarted one from its first sample.
        self._generation = generation
        self._next = count if first_writer else max(0, count - capacity)
        return True

    def take(self) -> list[JointSample]:
        if not self.attached():
            return []
        ring = self._ring
        count = int(ring.header[0])
        if count == self._next:
            return []
        self._last_new = self._clock()
        if count - self._next > ring.capacity:
            self.lost += count - self._next - ring.capacity
            self._next = count - ring.capacity
        seqs = np.arange(self._next, count) + 1
        slots = (seqs - 1) % ring.capacity
        rows = ring.slots[slots]  # one copy of the batch
        # A slot is kept only if its sequence number was the same before and after its data
        # and still is after the copy: never half-written, never overwritten meanwhile.
        whole = ((rows['seq_before'] == seqs) & (rows['seq_after'] == seqs)
                 & (ring.field['seq_before'][slots] == seqs))
        torn = len(whole) - int(np.count_nonzero(whole))
        if torn:
            self.lost += torn
            rows = rows[whole]
        self._next = count
        # Whole columns to Python values at once; per sample only the JointSample (issue 35:
        # numpy scalars converted one by one cost the estimation process more than its rows).
        sec, nanosec = np.divmod(rows['stamp_ns'], NS_PER_S)
        frames = rows['frame_id'].tolist()
        frame_ids = {raw: raw.decode(errors='replace') for raw in set(frames)}
        make_stamp = self._make_stamp
        return [JointSample(t, q, v, tau if has_tau else None, tau_ext, make_stamp(s, ns),
                            frame_ids[frame])
                for t, s, ns, has_tau, q, v, tau, tau_ext, frame in zip(
                    rows['t'].tolist(), sec.tolist(), nanosec.tolist(),
                    rows['has_tau'].tolist(), rows['q'], rows['v'], rows['tau'],
                    rows['tau_ext'], frames)]

    def newest(self) -> list[JointSample]:
        """The newest sample written since the last take, if any, as `take` gives it; the
        others are skipped, not lost (a reader no one waits on: nothing to build for them)."""
        if self.attached():
            self._next = max(self._next, int(self._ring.header[0]) - 1)
        return self.take()

    def _detach(self) -> None:
        if self._ring is not None:
            self._ring.close()
            self._ring = None

    def close(self) -> None:
        self._detach()


def _stamp_ns(sample: JointSample) -> int:
    """The sample's stamp in whole ns: of its stamp object (a header's, or (sec, nanosec)),
    or of `t` when it has none."""
    stamp = sample.stamp
    if stamp is None:
        return int(round(sample.t * 1e9))
    return nanoseconds(*stamp) if isinstance(stamp, tuple) else nanoseconds(stamp.sec,
                                                                             stamp.nanosec)


def _untrack(memory: shared_memory.SharedMemory) -> None:
    """A reader must not unlink the writer's segment when it exits (Python < 3.13 registers
    every attached segment with the resource tracker, which unlinks it at exit)."""
    try:
        from multiprocessing import resource_tracker
        resource_tracker.unregister(memory._name, 'shared_memory')
    except (ImportError, AttributeError, KeyError):
        pass
