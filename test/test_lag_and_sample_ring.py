"""core/chain/lag.py (how late a sample is decided on) and core/chain/sample_ring.py (joint
samples across processes through shared memory), without ROS."""
import multiprocessing
import time
import uuid

import numpy as np
import pytest

from contact_estimation import manifest
from contact_estimation.core.chain import sample_ring
from contact_estimation.core.chain.lag import ClockLag, LagStatistics
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.sample_ring import (FRAME_BYTES, IDLE_TIME, SampleRingReader,
                                                      SampleRingWriter)
from contact_estimation.core.chain.stamps import PAST_STAMP, stamp_problem


def _decisions(lag: ClockLag, stamps, delays):
    return [lag.update(t + d, t) for t, d in zip(stamps, delays)]


@pytest.mark.parametrize('offset', [-0.8, -0.05, 0.0, 0.3, 0.9])
def test_a_constant_clock_offset_is_no_lag(offset):
    stamps = 1000.0 + np.arange(3000) * 1e-3
    jitter = np.random.default_rng(1).uniform(0.0, 0.002, stamps.size)  # receipt jitter
    lags = _decisions(ClockLag(0.02), stamps, offset + jitter)
    assert max(lags) < 0.003


def test_a_growing_backlog_is_behind_within_max_lag_of_its_start():
    stamps = 1000.0 + np.arange(2000) * 1e-3
    delays = np.full(stamps.size, 0.001)
    delays[1000:] += np.arange(1000) * 0.5e-3  # processing at 2/3 of the input rate
    lag = ClockLag(0.02)
    reasons = [lag.check(t + d, t) for t, d in zip(stamps, delays)]
    first = next(k for k, reason in enumerate(reasons) if reason)
    assert 1000 < first <= 1000 + 0.021 / 0.5e-3 + 1
    assert f'stamped {stamps[first]:.6f} s' in reasons[first]
    assert 'behind its input' in reasons[first]


def test_one_early_stamp_does_not_teach_a_new_offset():
    stamps = 1000.0 + np.arange(100) * 1e-3
    delays = np.full(stamps.size, 0.005)
    delays[50] = -0.5  # one message stamped half a second late (ahead)
    lags = _decisions(ClockLag(0.02), stamps, delays)
    assert max(lags[51:]) < 1e-9


def test_a_steady_lag_is_never_learned_as_an_offset():
    """The issue-26 fault: a residual a second late for seconds on end."""
    lag = ClockLag(0.02)
    for k in range(100):
        lag.update(1000.0 + k * 1e-3, 1000.0 + k * 1e-3)
    for k in range(100, 10_000):
        assert lag.check(1000.0 + k * 1e-3 + 1.0, 1000.0 + k * 1e-3)


def test_a_stamp_long_past_is_refused_naming_the_clock_difference():
    kind, why = stamp_problem(1000.0, now=1_795_000_000.0)
    assert kind == PAST_STAMP and 'behind' in why and '1794999000.000 s' in why
    assert stamp_problem(1_795_000_000.0 - 0.5, now=1_795_000_000.0) is None


def _sample(k: int, n: int = 7) -> JointSample:
    base = np.arange(n) + k
    return JointSample(100.0 + k * 1e-3, base * 0.1, base * 0.2, base * 0.3, base * 0.4,
                       (100, k * 1_000_000), 'world')


@pytest.fixture
def ring_name():
    return f'contact_estimation_test_{uuid.uuid4().hex[:12]}'


def test_the_reader_gets_every_sample_written_after_it_attached_in_order(ring_name):
    writer = SampleRingWriter(ring_name, 7, capacity=64)
    reader = SampleRingReader(ring_name)
    try:
        writer.write(_sample(0))  # before the reader attached: not read
        assert reader.take() == []
        for k in range(1, 41):
            writer.write(_sample(k))
        taken = reader.take()
        assert [s.stamp for s in taken] == [(100, k * 1_000_000) for k in range(1, 41)]
        for k, sample in enumerate(taken, start=1):
            expected = _sample(k)
            assert sample.t == expected.t and sample.frame_id == 'world'
            for field in ('q', 'v', 'tau', 'tau_ext'):
                np.testing.assert_array_equal(getattr(sample, field), getattr(expected, field))
        assert reader.take() == [] and reader.lost == 0
    finally:
        reader.close()
        writer.close()


def test_a_reader_that_falls_behind_loses_the_oldest_and_counts_them(ring_name):
    writer = SampleRingWriter(ring_name, 7, capacity=16)
    reader = SampleRingReader(ring_name)
    try:
        reader.take()
        for k in range(50):
            writer.write(_sample(k))
        taken = reader.take()
        assert [s.t for s in taken] == [_sample(k).t for k in range(34, 50)]
        assert reader.lost == 34
    finally:
        reader.close()
        writer.close()


def test_a_sample_without_joint_torques_stays_without(ring_name):
    writer = SampleRingWriter(ring_name, 3)
    reader = SampleRingReader(ring_name)
    try:
        reader.take()
        writer.write(JointSample(1.0, np.zeros(3), np.zeros(3), None, np.ones(3)))
        [sample] = reader.take()
        assert sample.tau is None and sample.stamp == (1, 0)
    finally:
        reader.close()
        writer.close()


def test_a_frame_id_too_long_for_a_slot_is_kept_cut_and_said_once(ring_name):
    cut = []
    writer = SampleRingWriter(ring_name, 3, on_cut=cut.append)
    reader = SampleRingReader(ring_name)
    frame = 'f' * (FRAME_BYTES + 10)
    try:
        reader.take()
        for k in range(3):
            writer.write(JointSample(1.0 + k, np.zeros(3), np.zeros(3), None, np.ones(3),
                                     None, frame))
        assert [s.frame_id for s in reader.take()] == [frame[:FRAME_BYTES]] * 3
        assert cut == [frame]
    finally:
        reader.close()
        writer.close()


def test_a_writer_gone_without_closing_is_left_after_idle_time_for_its_successor(ring_name):
    """A chain's process killed (its segment never marked closed): once no new sample came
    for IDLE_TIME of the reader's clock, the reader attaches to the new writer of the name."""
    now = [0.0]
    reader = SampleRingReader(ring_name, clock=lambda: now[0])
    killed = SampleRingWriter(ring_name, 7)
    try:
        reader.take()
        killed.write(_sample(0))
        assert [s.t for s in reader.take()] == [_sample(0).t]
        successor = SampleRingWriter(ring_name, 7)  # the name taken over, the old not closed
        successor.write(_sample(5))
        now[0] += IDLE_TIME / 2
        assert reader.take() == []  # still on the killed writer's segment
        now[0] += IDLE_TIME
        reader.take()  # attaches to the successor
        successor.write(_sample(6))
        assert [s.t for s in reader.take()] == [_sample(6).t]
        successor.close()
    finally:
        reader.close()
        killed.close()


def _write_in_another_process(name: str, first: int, go, done) -> None:
    writer = SampleRingWriter(name, 7)
    try:
        go.wait(60.0)
        for k in range(first, first + 20):
            writer.write(_sample(k))
        done.wait(60.0)
    finally:
        writer.close()


def test_samples_cross_processes_and_a_restarted_writer_is_followed(ring_name):
    """The chain's process writes, the estimators' process reads; when the chain's process
    is restarted (a new segment of the same name), the reader follows the new one from its
    first sample."""
    context = multiprocessing.get_context('spawn')
    reader = SampleRingReader(ring_name)
    try:
        for first in (0, 1000):
            go, done = context.Event(), context.Event()
            writer = context.Process(target=_write_in_another_process,
                                     args=(ring_name, first, go, done))
            writer.start()
            deadline = time.monotonic() + 60.0
            while not reader.attached():
                assert time.monotonic() < deadline and writer.is_alive()
                time.sleep(0.01)
            go.set()
            taken: list[JointSample] = []
            while len(taken) < 20 and time.monotonic() < deadline:
                taken += reader.take()
                time.sleep(0.001)
            done.set()
            writer.join(60.0)
            assert [s.t for s in taken] == [_sample(k).t for k in range(first, first + 20)]
    finally:
        reader.close()


def test_a_writer_that_stops_after_a_new_one_started_leaves_the_new_one_alone(ring_name):
    """A chain's process stopping while its successor already runs (a restart): the old
    writer's close must not remove the new segment's name."""
    old = SampleRingWriter(ring_name, 7)
    new = SampleRingWriter(ring_name, 7)  # takes the name over
    reader = SampleRingReader(ring_name)
    try:
        old.close()
        assert reader.attached()
        reader.take()
        new.write(_sample(5))
        assert [s.t for s in reader.take()] == [_sample(5).t]
    finally:
        reader.close()
        new.close()


def test_the_lag_statistics_give_p50_p99_and_max_to_a_bin():
    """The summary /diagnostics shows: each percentile within one BIN above numpy's (the
    histogram's upper bin edge), the max exact."""
    statistics = LagStatistics()
    assert statistics.summary() == 'none yet'
    lags = np.random.default_rng(4).exponential(2e-3, 5000)
    for lag in lags:
        statistics.add(lag)
    for p in (50, 99):
        exact = np.percentile(lags, p)
        assert exact - 1e-9 <= statistics.percentile(p) <= exact + LagStatistics.BIN
    p50, p99 = (statistics.percentile(p) * 1e3 for p in (50, 99))
    assert statistics.summary() == f'{p50:.1f} / {p99:.1f} / {lags.max() * 1e3:.1f} ms'


def test_on_a_machine_without_x86_64s_memory_order_the_ring_refuses_and_the_suite_runs_separate(
        monkeypatch):
    """The seqlock needs stores seen in program order (x86-64); elsewhere (ARMv8) a reader
    could keep a half-written slot, so the writer refuses and the processes run separate."""
    composed = {p.name for p in manifest.processes(False)}
    assert composed & {p.name for p in manifest.composed()}
    monkeypatch.setattr(sample_ring, 'ORDERED_STORES', False)
    monkeypatch.setattr(manifest, 'ORDERED_STORES', False)
    monkeypatch.setattr(sample_ring.platform, 'machine', lambda: 'aarch64')
    with pytest.raises(RuntimeError, match='aarch64.*separate'):
        sample_ring.SampleRingWriter('contact_estimation_test_arm', 7)
    assert {p.name for p in manifest.processes(False)} == {
        p.name for p in manifest.processes(False, separate=True)}
