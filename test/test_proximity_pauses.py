"""The proximity monitor's `behind` means that it is late itself, and its input stopping is
`stale` (issue 35): composed as `up` runs it, its process (nodes.yaml `proximity`) or the
chain's is paused with SIGSTOP while a driver streams joint states and an empty skeleton
(nobody tracked: nothing is near, so any stop is a fault of timing)."""
import os
import signal
from contextlib import contextmanager

import pytest

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseArray
from std_msgs.msg import Bool

from contact_estimation import manifest
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.testing import composed_processes, ros_context, spinning
from contact_estimation.ros.spinning import spin_until
from test_behind import CHAIN, DETECTOR, Driver, _stream_until as _stream

PROXIMITY = manifest.node('proximity_monitor')
PROCESS = next(p for p in manifest.composed() if PROXIMITY.name in p.nodes)
# Far above what scheduling costs here, so that the pauses below decide, not the machine; the
# heartbeat slow enough that a pause under MAX_LAG is not 3 missed beats (it would say stop).
MAX_LAG = 0.3  # s
# joint_state_timeout (wall time since the newest sample was taken) as max_lag: a pause
# shorter than both budgets is what the first test pauses for.
OVERRIDES = {'max_lag': MAX_LAG, 'joint_state_timeout': MAX_LAG, 'heartbeat_rate': 5.0}
DETECTOR_OVERRIDES = {'max_lag': MAX_LAG, 'hold_time': 0.5}  # the detector, where it is judged
BURST = 20_000  # joint states at once (issue 36)


class Watcher:
    """On the driver: sends an empty skeleton with each joint state, records the proximity
    stop and its stop counts by cause (/diagnostics)."""

    def __init__(self, driver: Driver):
        self.driver = driver
        self.stops: list[bool] = []
        self.counts: dict[str, int] = {}
        self.diagnostics = 0
        self._skeleton = driver.create_publisher(PoseArray, PROXIMITY.topic('skeleton'),
                                                 PIPELINE_QOS)
        driver.create_subscription(Bool, PROXIMITY.topic('stop'),
                                   lambda m: self.stops.append(m.data), STOP_QOS)
        driver.create_subscription(DiagnosticArray, PROXIMITY.topic('diagnostics'),
                                   self._on_diagnostics, PIPELINE_QOS)
        self._sent = 0

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.lstrip('/') == PROXIMITY.name:
                values = {kv.key: kv.value for kv in status.values}
                self.counts = {k: int(values.get(k, 0)) for k in ('behind', 'stale', 'fault')}
                self.diagnostics += 1

    def send(self) -> None:
        self.driver.send()
        self._sent += 1
        if self._sent % 20 == 0:  # 50 Hz
            skeleton = PoseArray()
            skeleton.header.stamp = self.driver.get_clock().now().to_msg()
            skeleton.header.frame_id = 'panda_link0'
            self._skeleton.publish(skeleton)


@contextmanager
def _suite(standing, detector=None):  # noqa: F811 (the fixture)
    """The composed processes with the proximity monitor's OVERRIDES (and `detector`'s for
    the detector), streamed until its stop clears; yields (processes, executor, watcher)."""
    overrides = {PROXIMITY.name: OVERRIDES, **({DETECTOR.name: detector} if detector else {})}
    with composed_processes(overrides) as processes, \
            ros_context() as context:
        driver = Driver(context, standing)
        watcher = Watcher(driver)
        with spinning(context, driver) as executor:
            assert _stream(executor, watcher, lambda: watcher.stops and not watcher.stops[-1]
                           and watcher.counts), \
                f'the proximity stop did not clear: {[p.poll() for p in processes.values()]}'
            yield processes, executor, watcher


def _pause(executor, watcher: Watcher, pid: int, seconds: float) -> None:
    """SIGSTOP `pid` for `seconds` while the driver streams."""
    os.kill(pid, signal.SIGSTOP)
    try:
        _stream(executor, watcher, lambda: False, seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.xfail(strict=False, reason='open defect (issue 35): about one run in three, a '
                   'stop with no counted cause follows a 150 ms SIGSTOP of the proximity '
                   'process, since it runs above the chain and judges through the input gate')
def test_a_proximity_process_paused_within_max_lag_catches_up_without_a_stop(standing):  # noqa: F811 (the fixture)
    """Paused for half its max_lag: when it runs again, its check takes the samples that
    came meanwhile and decides on the newest; neither late nor stale."""
    with _suite(standing) as (processes, executor, watcher):
        before = len(watcher.stops)
        for _ in range(3):
            _pause(executor, watcher, processes[PROCESS.name].pid, MAX_LAG / 2)
            _stream(executor, watcher, lambda: False, 0.5)
        seen = watcher.diagnostics
        assert _stream(executor, watcher, lambda: watcher.diagnostics >= seen + 2)
        assert watcher.counts == {'behind': 0, 'stale': 0, 'fault': 0}, watcher.counts
        assert not any(watcher.stops[before:])


def test_a_proximity_process_paused_past_max_lag_stops_behind(standing):  # noqa: F811 (the fixture)
    with _suite(standing) as (processes, executor, watcher):
        _pause(executor, watcher, processes[PROCESS.name].pid, 3 * MAX_LAG)
        assert _stream(executor, watcher, lambda: watcher.counts.get('behind')), \
            watcher.counts
        assert True in watcher.stops and watcher.counts['stale'] == 0, watcher.counts


def test_the_chains_process_paused_is_stale_input_for_the_proximity_monitor(standing):  # noqa: F811 (the fixture)
    """The chain stops writing samples: the proximity monitor, on time itself, finds the
    latest joint state aging, and stops `stale`, never `behind`."""
    with _suite(standing) as (processes, executor, watcher):
        _pause(executor, watcher, processes[CHAIN.name].pid, 3 * MAX_LAG)
        assert _stream(executor, watcher, lambda: watcher.counts.get('stale')), watcher.counts
        assert True in watcher.stops and watcher.counts['behind'] == 0, watcher.counts


def test_a_paused_driver_is_stale_for_both_stops_never_behind(standing):  # noqa: F811 (the fixture)
    """Issue 36: the driver (this process) sends nothing for 3 max_lag, then the sample it
    stamped as it paused (a SIGSTOP between its clock read and its publish), then streams
    on: both stops say their input stopped (`stale`, `stale_input`), neither `behind`."""
    with _suite(standing, DETECTOR_OVERRIDES) as (processes, executor, watcher):
        driver = watcher.driver
        driver.causes.clear()
        stamped = driver.get_clock().now().nanoseconds * 1e-9
        spin_until(executor, lambda: False, 3 * MAX_LAG)
        driver.send(stamp=stamped)
        seen = watcher.diagnostics
        assert _stream(executor, watcher, lambda: watcher.diagnostics >= seen + 2
                       and 'stale_input' in driver.causes), (watcher.counts, driver.causes)
        assert watcher.counts['stale'] and not watcher.counts['behind'], watcher.counts
        assert 'behind' not in driver.causes, driver.causes


def test_every_heartbeat_keeps_coming_through_a_burst_and_the_stop_says_why(standing):  # noqa: F811 (the fixture)
    """Issue 36: 20 000 joint states at once (stamped 1 µs apart from now on): while the
    chain works through them both stops keep beating, and every stop raised names its
    cause. Counted as events (beats heard before the chain has taken the burst), no times."""
    with _suite(standing, DETECTOR_OVERRIDES) as (processes, executor, watcher):
        driver = watcher.driver
        driver.causes.clear()
        beats = len(driver.stops), len(watcher.stops)
        now = driver.get_clock().now().nanoseconds * 1e-9
        for k in range(1, BURST + 1):
            driver.send(stamp=now + k * 1e-6)
        assert _stream(executor, watcher, lambda: len(driver.stops) > beats[0] + 5
                       and len(watcher.stops) > beats[1] + 5)
        raised = [d for d in driver.stops[beats[0]:] if d]
        assert not raised or set(driver.causes) & {'behind', 'stale_input', 'bad_stamp'}, \
            driver.causes
        assert all(p.poll() is None for p in processes.values())
