"""ros/heartbeat.py and ros/stop_process.py: the stop repeated by a process of its own, True
while the node has not decided for longer than it may (issue 19), whatever the node's own
process is doing (issue 36); the speed scale repeated with it."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, Float64

from contact_estimation.ros.heartbeat import Heartbeat
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.stop_process import StopProcess
from contact_estimation.ros.testing import spinning

TIMEOUT = 15.0
# Deep enough to keep every beat the listener could not take while the test held the lock.
EVERY_BEAT = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000,
                        reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.VOLATILE)


class Published:
    """What a heartbeat published, in order (rclpy's publisher interface)."""

    def __init__(self):
        self.data: list[bool] = []

    def publish(self, message: Bool) -> None:
        self.data.append(message.data)


def test_a_beat_says_stop_while_the_node_is_late_and_its_decision_again_after():
    clock = [100.0]  # s, moved by the test
    told = []        # (newly, silence) of each late beat
    published = Published()
    heartbeat = Heartbeat(published, 50.0, lambda: False, lambda: clock[0],
                          on_late=lambda newly, silence: told.append((newly, silence)))
    heartbeat.beat()
    clock[0] += 0.05  # 2.5 periods of 20 ms without a decision: still watching
    heartbeat.beat()
    assert published.data == [False, False] and heartbeat.late == 0
    clock[0] += 0.02  # 3.5 periods: nobody is watching
    heartbeat.beat()
    heartbeat.beat()
    assert published.data[2:] == [True, True] and heartbeat.late == 2
    assert [newly for newly, _ in told] == [True, False] and told[0][1] == pytest.approx(0.07)
    heartbeat.decision()
    heartbeat.beat()
    assert published.data[-1] is False
    clock[0] += 0.07  # late again: newly again
    heartbeat.beat()
    assert published.data[-1] is True and told[-1][0] is True


def test_under_simulated_time_a_beat_waits_the_slowest_clocks_share_of_the_silence():
    clock = [0.0]
    published = Published()
    heartbeat = Heartbeat(published, 20.0, lambda: False, lambda: clock[0],
                          slowest_clock=Heartbeat.SLOWEST_CLOCK)
    clock[0] = 3 / 20.0 / Heartbeat.SLOWEST_CLOCK - 0.01
    heartbeat.beat()
    clock[0] += 0.02
    heartbeat.beat()
    assert published.data == [False, True]


def test_a_stop_decided_true_is_never_counted_late():
    clock = [0.0]
    published = Published()
    heartbeat = Heartbeat(published, 20.0, lambda: True, lambda: clock[0])
    clock[0] = 10.0
    heartbeat.beat()
    assert published.data == [True] and heartbeat.late == 0


def hold_the_interpreter_lock(seconds: float) -> float:
    """Keep this process's interpreter lock for at least `seconds` in one C call (a regular
    expression's backtracking does not let go of it); how long it was kept."""
    for n in range(16, 40):
        began = time.monotonic()
        re.match(r'(a+)+$', 'a' * n + 'b')
        took = time.monotonic() - began
        if took >= seconds:
            return took
    raise AssertionError('could not hold the lock long enough')


class Listener(Node):
    def __init__(self, context):
        super().__init__('stop_listener', context=context)
        self.stops: list[bool] = []
        self.scales: list[float] = []
        self.create_subscription(Bool, '/stop_process_test/stop',
                                 lambda m: self.stops.append(m.data), EVERY_BEAT)
        self.create_subscription(Float64, '/stop_process_test/scale',
                                 lambda m: self.scales.append(m.data), EVERY_BEAT)


def stop_process(late=None, faults=None, rate=20.0) -> StopProcess:
    return StopProcess('stop_process_test', '/', '/stop_process_test/stop',
                       '/stop_process_test/scale', rate, False, 0,
                       lambda newly, silence: (late if late is not None else []).append(newly),
                       (faults if faults is not None else []).append)


def test_the_stop_process_beats_while_the_nodes_process_holds_the_interpreter_lock(context):
    """Issue 36: a publish in the node's process that holds the lock (Fast DDS's 333 ms
    shared-memory sleep) no longer holds the stop: its beats come from another process."""
    listener = Listener(context)
    stops = stop_process(rate=50.0)
    try:
        with spinning(context, listener) as executor:
            stops.publish_scale(0.5)
            stops.publish_stop(False)
            assert spin_until(executor, lambda: len(listener.stops) >= 5, TIMEOUT)
            assert spin_until(executor, lambda: listener.scales[-1:] == [0.5], TIMEOUT)
            stops.decision()
            count = len(listener.stops)
            # The listener cannot take a message while the lock is held, DDS keeps them: the
            # beats sent meanwhile are all there once it is let go.
            held = hold_the_interpreter_lock(1.0)
            assert spin_until(executor, lambda: len(listener.stops) >= count + 0.5 * held * 50,
                              TIMEOUT), f'{len(listener.stops) - count} beats in {held:.1f} s'
            # No decision for that long: the beats said stop, and the node was told.
            assert True in listener.stops[count:]
    finally:
        stops.close()


def test_the_stop_process_says_stop_while_the_node_is_late_and_the_node_is_told(context):
    listener, late = Listener(context), []
    stops = stop_process(late)
    try:
        with spinning(context, listener) as executor:
            stops.publish_stop(False)
            assert spin_until(executor, lambda: listener.stops[-1:] == [True], TIMEOUT)
            assert spin_until(executor, lambda: late and late[0] is True, TIMEOUT)
            stops.decision()
            stops.publish_stop(False)  # a decision, and the child hears it
            assert spin_until(executor, lambda: listener.stops[-1:] == [False], TIMEOUT)
            stops.publish_stop(True)
            assert spin_until(executor, lambda: listener.stops[-1:] == [True], TIMEOUT)
    finally:
        stops.close()


def test_a_stop_process_that_dies_is_reported_and_started_again_with_the_stop(context):
    listener, faults = Listener(context), []
    stops = stop_process(faults=faults)
    try:
        with spinning(context, listener) as executor:
            stops.publish_stop(True)
            assert spin_until(executor, lambda: listener.stops[-1:] == [True], TIMEOUT)
            first = stops.pid
            os.kill(first, signal.SIGKILL)
            assert spin_until(executor, lambda: faults, TIMEOUT)
            assert f'pid {first}' in faults[0] and 'code -9' in faults[0]
            assert spin_until(executor, lambda: stops.pid != first, TIMEOUT)
            listener.stops.clear()
            assert spin_until(executor, lambda: len(listener.stops) >= 3, TIMEOUT)
            assert all(listener.stops)
    finally:
        stops.close()


def test_closing_ends_the_stop_process():
    stops = stop_process()
    deadline = time.monotonic() + TIMEOUT
    while stops.pid is None and time.monotonic() < deadline:
        time.sleep(0.01)
    child = stops.pid
    stops.close()
    assert child is not None and not running(child)


def test_the_stop_process_ends_with_the_nodes_process():
    """No orphan beats a stop for a node that is gone: a node's process killed with SIGKILL
    takes its stop process with it (PR_SET_PDEATHSIG)."""
    node = subprocess.Popen([sys.executable, '-c', (
        'import sys, time\n'
        'from test_heartbeat import stop_process\n'
        'stops = stop_process()\n'
        'while stops.pid is None:\n'
        '    time.sleep(0.01)\n'
        'print(stops.pid, flush=True)\n'
        'time.sleep(600)\n')], cwd=os.path.dirname(__file__), stdout=subprocess.PIPE,
        text=True)
    try:
        child = int(node.stdout.readline())
        assert running(child)
    finally:
        node.kill()
        node.wait()
    deadline = time.monotonic() + TIMEOUT
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(child), 'the stop process outlived its node'


def running(pid: int) -> bool:
    """Process `pid` exists and has not ended (a zombie waits to be reaped: it has)."""
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False
