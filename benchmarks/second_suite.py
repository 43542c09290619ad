"""A second suite started beside a running one (issue 36): does the first's stop hold?

    PYTHONPATH=$PWD python benchmarks/second_suite.py [--seconds 10]

Suite A runs composed (its four processes as `up` starts them, the stops' processes at
SCHED_FIFO 40 and 39 where the OS allows), fed at 1 kHz by a driver process at SCHED_FIFO 50
(the Panda at rest, held against gravity); this process is the controller's view, at
SCHED_FIFO 60, on both stops, and tells each message's publisher by its gid. A 10 N·m step
on joint 4 latches A's collision stop. Then, in the same domain and namespace:

1. `contact-estimation up`: refused, and how long the refusal took;
2. suite B started as `ros2 launch` would start it (no check), kept for --seconds, stopped;
3. A's stops 2 s after B left, and A's ~/reset.

Per stop: the cleared stops (False) B published, and those A published once it had latched
`duplicate` (its log says when), both to be 0; A's longest silence while B started (until
B's stop was heard, and 1 s more) and while B ran, with the silences over the 150 ms
contract; A's stop after B left and its reset. The cost of one look at the graph (the
watch, 4 times a second per stop) is measured here on the same graph. The silences are
between the times A sent its messages (their source stamps), kept 1000 deep here so that a
stall of this process loses none; how late this process's own 10 ms timer came says how
loaded the machine was.
"""
from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager

import numpy as np
import rclpy
from geometry_msgs.msg import PoseArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from contact_estimation import manifest
from contact_estimation.ros import stop_topic
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.spinning import spin_for, spin_until
from contact_estimation.ros.testing import composed_processes, isolate_ros_domain

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import LOG_DIR, realtime_priority, table  # noqa: E402

CONTRACT = 0.150  # s without a stop message after which a controller stops (README)
STOPS = ('collision_detector', 'proximity_monitor')
SUITE_PRIORITY, MONITOR_PRIORITY = 40, 60
REST = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8])  # the Panda at rest
HIT = (3, 10.0, 0.1)  # joint index, N·m, s: a step the detector stops on
TIMEOUT = 90.0
# The stop's QoS, but every message kept while this process is late: the silences measured
# are A's, not this process's.
HEARD_QOS = QoSProfile(history=STOP_QOS.history, depth=1000, reliability=STOP_QOS.reliability,
                       durability=STOP_QOS.durability)


def drive(hit, done) -> None:
    """The robot driver, a process of its own: the Panda at rest at 1 kHz (stamps = its wall
    clock), with the HIT step once `hit` is set, until `done`; and a skeleton tracker that
    tracks nobody at 10 Hz (the proximity stop clears)."""
    from contact_estimation.core.robot.robot_model import RobotModel
    isolate_ros_domain()
    realtime_priority()
    robot = RobotModel.load('panda')
    still = np.zeros(robot.n)
    effort = robot.rnea(REST, still, still)
    rclpy.init()
    node = rclpy.create_node('second_suite_driver')
    publisher = node.create_publisher(
        JointState, manifest.node('joint_state_listener').topic('joint_states'), PIPELINE_QOS)
    msg = JointState(name=list(robot.joint_names), position=REST.tolist(),
                     velocity=still.tolist())
    tracker = node.create_publisher(
        PoseArray, manifest.node('proximity_monitor').topic('skeleton'), PIPELINE_QOS)
    nobody = PoseArray()
    nobody.header.frame_id = robot.base_link
    joint, torque, duration = HIT
    hit_until, due = None, time.monotonic()
    for i in itertools.count():
        if done.is_set():
            break
        due += 1e-3
        time.sleep(max(due - time.monotonic(), 0.0))
        if hit.is_set() and hit_until is None:
            hit_until = time.monotonic() + duration
        tau = effort.copy()
        if hit_until is not None and time.monotonic() < hit_until:
            tau[joint] += torque
        msg.effort = tau.tolist()
        msg.header.stamp = seconds_to_stamp(time.time())
        publisher.publish(msg)
        if i % 100 == 0:
            nobody.header.stamp = msg.header.stamp
            tracker.publish(nobody)
    rclpy.shutdown()


class Monitor(Node):
    """Both stops as a controller hears them, each message with its publisher and the time it
    was sent; this process's own lateness."""

    def __init__(self):
        super().__init__('second_suite_monitor')
        self.topics = {name: manifest.node(name).resolved_topic('stop') for name in STOPS}
        self.heard: dict[str, list[tuple[float, bytes, bool]]] = {n: [] for n in STOPS}
        for name, topic in self.topics.items():
            self.create_subscription(Bool, topic, lambda m, info, n=name: self.heard[n].append(
                (info['source_timestamp'] * 1e-9, gid(info), m.data)), HEARD_QOS)
        self.resets = {n: self.create_client(Trigger, f'/{n}/reset') for n in STOPS}
        self.late, self._last = 0.0, time.monotonic()
        self.create_timer(0.01, self._tick)

    def _tick(self) -> None:
        now = time.monotonic()
        self.late, self._last = max(self.late, now - self._last - 0.01), now

    def publishers(self) -> set[bytes]:
        """The gids of every publisher on the stops now."""
        return {bytes(info.endpoint_gid) for topic in self.topics.values()
                for info in self.get_publishers_info_by_topic(topic)}

    def values(self, name: str, gids: set[bytes], start: float = 0.0, end: float = np.inf):
        """(sent, value) of stop `name` from `gids`, sent within [start, end)."""
        return [(sent, value) for sent, g, value in self.heard[name]
                if g in gids and start <= sent < end]


@contextmanager
def realtime(priority: int):
    """This process at SCHED_FIFO `priority` for the block, what it got said; the processes it
    starts meanwhile (the suites, `up`, the driver) do not inherit it (SCHED_RESET_ON_FORK)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                              os.sched_param(priority))
    except OSError as err:
        yield f'normal priority (SCHED_FIFO refused: {err})'
        return
    try:
        yield f'SCHED_FIFO {priority}'
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def progress(what: str) -> None:
    print(f'[{time.strftime("%H:%M:%S")}] {what}', file=sys.stderr, flush=True)


def gid(info) -> bytes:
    return bytes(info['publisher_gid']['data'])


def latched_at(log: str, node: str) -> float:
    """When `node` logged its `duplicate` latch in `log` (its process's), s (system clock)."""
    pattern = re.compile(rf'\[ERROR\] \[(\d+\.\d+)\] \[{node}\]: stop latched until '
                         rf'~/reset: {stop_topic.DUPLICATE}')
    with open(log, encoding='utf-8') as f:
        return min((float(m.group(1)) for m in map(pattern.match, f) if m), default=np.nan)


def silences(times: list[float], start: float, end: float) -> str:
    """The longest silence within [start, end] (its edges count), ms, and how many were over
    the contract."""
    gaps = np.diff([start, *[t for t in times if start < t < end], end])
    return f'{gaps.max() * 1e3:.0f} / {int(np.sum(gaps > CONTRACT))}'


def second_up() -> tuple[str, float]:
    """`contact-estimation up` beside the running suite: its refusal and how long it took
    (stopped with Ctrl-C if it starts the suite instead)."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, '-m', 'contact_estimation', 'up'],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=os.environ.copy())
    out = proc.stdout.readline()
    while out.strip() and 'error' not in out and 'starting' not in out:
        out += proc.stdout.readline()
    elapsed = time.monotonic() - start
    if 'starting' in out:
        proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=TIMEOUT)
    found = out.split('error: ', 1)[-1].strip()
    return ('refused: ' + found if 'error' in out else 'NOT refused: ' + found), elapsed


def call(executor, client) -> str:
    if not client.wait_for_service(timeout_sec=10.0):
        return 'no service'
    future = client.call_async(Trigger.Request())
    if not spin_until(executor, future.done, 10.0):
        return 'no reply'
    reply = future.result()
    message = reply.message.removeprefix('refused: ')
    return f'{"success" if reply.success else "refused"}: {message[:40]}'


def look_cost(node: Node, topic: str, looks: int = 2000) -> float:
    """CPU µs of one look at the graph (ros/stop_topic.other_publishers)."""
    start = time.process_time()
    for _ in range(looks):
        stop_topic.other_publishers(node, topic)
    return (time.process_time() - start) / looks * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=10.0, help='how long B runs')
    args = parser.parse_args()
    isolate_ros_domain()
    os.makedirs(LOG_DIR, exist_ok=True)
    spawn = multiprocessing.get_context('spawn')
    hit, done = spawn.Event(), spawn.Event()

    def logs(suite):
        return lambda name: os.path.join(LOG_DIR, f'second_suite_{suite}_{name}.log')
    rclpy.init()
    monitor = Monitor()
    executor = SingleThreadedExecutor()
    executor.add_node(monitor)
    with ExitStack() as stack, realtime(MONITOR_PRIORITY) as monitor_priority:
        stack.enter_context(composed_processes(log_path=logs('A'), priority=SUITE_PRIORITY))
        driver = spawn.Process(target=drive, args=(hit, done), daemon=True)
        driver.start()
        stack.callback(driver.join, 10.0)
        stack.callback(done.set)
        first = {n: lambda n=n: monitor.heard[n] and monitor.heard[n][-1][2] is False
                 for n in STOPS}
        assert spin_until(executor, first['collision_detector'], TIMEOUT), \
            f"suite A's collision stop never cleared (heard {len(monitor.heard[STOPS[0]])})"
        progress('suite A runs, its stop clear')
        spin_until(executor, first['proximity_monitor'], 10.0)
        a = monitor.publishers()
        hit.set()
        assert spin_until(executor, lambda: monitor.heard['collision_detector'][-1][2], 10.0), \
            'the hit did not stop suite A'
        progress('suite A stopped by the hit')
        refusal, refusal_time = second_up()
        progress(f'second up: {refusal[:40]}')
        monitor.late = 0.0
        b_start = time.time()
        with composed_processes(log_path=logs('B'), priority=SUITE_PRIORITY):
            heard_b = lambda n: [s for s, g, _ in monitor.heard[n] if g not in a]  # noqa: E731
            spin_until(executor, lambda: all(heard_b(n) for n in STOPS), TIMEOUT)
            progress('suite B heard on both stops')
            spin_for(executor, args.seconds)
            late = monitor.late  # before the calls below, which block this process
            b = monitor.publishers() - a
            during = {n: call(executor, monitor.resets[n]) for n in STOPS}
            cost = look_cost(monitor, monitor.topics['collision_detector'])
        b_end = time.time()
        spin_for(executor, 2.0)
        after_end = time.time()
        resets = {n: call(executor, monitor.resets[n]) for n in STOPS}
        spin_for(executor, 0.5)
    rows: dict[str, list[str]] = {}
    for n in STOPS:
        latched = latched_at(logs('A')(manifest.process_of(n).name), n)
        b_first = min(heard_b(n), default=np.nan)
        a_values = monitor.values(n, a, b_start)
        a_times = [sent for sent, _ in a_values]
        after = [value for _, value in monitor.values(n, a, b_end, after_end)]
        for metric, cell in (
                ('cleared stops (False) from B', sum(not v for _, v in monitor.values(n, b))),
                ("A latched `duplicate` after B's first stop, s", f'{latched - b_first:.2f}'),
                ('False from A once latched', sum(not v for sent, v in a_values
                                                  if latched <= sent < b_end)),
                ("A's longest silence, ms / over 150 ms: B starting", silences(
                    a_times, b_start, b_first + 1.0)),
                ('... B starting and running', silences(a_times, b_start, b_end)),
                ('A in the 2 s after B left', 'all True' if after and all(after)
                 else f'False in {after}'),
                ('~/reset while B runs', during[n]),
                ('~/reset after B left', resets[n]),
                ("A's stop at the end", monitor.heard[n][-1][2])):
            rows.setdefault(metric, []).append(str(cell))
    print(f'monitor: {monitor_priority}; its own timer late by up to {late * 1e3:.0f} ms while '
          f'B started and ran; load average {os.getloadavg()[0]:.1f}')
    print(f'second `up`: {refusal} ({refusal_time:.1f} s)')
    print(f'one look at the graph: {cost:.0f} µs of CPU; at {1 / stop_topic.WATCH_PERIOD:g} Hz '
          f'per stop: {cost * 1e-6 / stop_topic.WATCH_PERIOD * 100:.3f} % of a core\n')
    width = max(map(len, rows))
    print(table(' | '.join(['suite A beside suite B'.ljust(width), *STOPS]),
                [' | '.join([m.ljust(width), *(c.ljust(len(n)) for c, n in zip(cells, STOPS))])
                 for m, cells in rows.items()]))
    monitor.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
