"""The proximity monitor under load (issue 35): its stops by cause, how late its checks come,
and its CPU, with the suite composed as `up --priority 40` runs it.

    PYTHONPATH=$PWD python benchmarks/proximity_load.py [--minutes 3] [--no-stress]
                                                        [--no-cloud]

A driver process at SCHED_FIFO 50 (where allowed) publishes a Panda's free motion at 1 kHz
(joint states and the base F/T readings: no contact, so no stop is due) and a lidar cloud of
a cell (benchmarks/soak.py `cell_cloud`, 43 000 points, nothing near the arm) at 10 Hz; the
chain runs at SCHED_FIFO 39, the proximity process at 40 (nodes.yaml `realtime`), the
estimation process at normal priority, and a second job burns one core at normal priority
(a Python busy loop pinned to the last core), as on the user's 2-core machine. Reported
from the proximity monitor's last /diagnostics before the driver stops (what follows, with
no joint state, is not the run's): its stops by cause (behind: its check came more than
max_lag after it was due; stale: no fresh joint state; fault), the checks' lateness (p50 /
p99 / max since start) and its check's cost, the joint state's age at the checks (the
`stale` test, against the same max_lag), how old the clouds are when their objects reach
the check, its cloud worker's state (ros/cloud_process.py: a process of its own; its
start-up time, clouds processed and dropped); and every process's CPU, with its child
processes' (the cloud workers), as a ratio to the rclpy floor of the same run.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import (LOG_DIR, DriverTopics, Output, PandaStream, cpu_table,  # noqa: E402
                       drive, machine, table)
from soak import cell_cloud  # noqa: E402

from contact_estimation import manifest  # noqa: E402
from contact_estimation.core.robot.robot_model import RobotModel  # noqa: E402
from contact_estimation.ros.testing import composed_processes  # noqa: E402

RATE = 1000.0         # Hz: joint states and F/T readings
CLOUD_RATE = 10.0     # Hz
CLOUD_POINTS = 43_000
PRIORITY = 40         # the chain's SCHED_FIFO priority, as `up --priority 40`
WARMUP = 5.0          # s
PROXIMITY = manifest.node('proximity_monitor')
CAUSES = ('behind', 'stale', 'fault', 'input', 'near')


def burn() -> None:
    """The second job: one core busy at normal priority, until killed."""
    os.sched_setaffinity(0, {os.cpu_count() - 1})
    while True:
        pass


class LastDiagnostics:
    """Output callback: the proximity monitor's status values on /diagnostics, by receipt
    time; `before(t)` the last received by wall time t."""

    def __init__(self):
        self.received: list[tuple[float, dict[str, str]]] = []

    def __call__(self, msg: DiagnosticArray, now: float) -> None:
        for status in msg.status:
            if status.name.lstrip('/') == PROXIMITY.name:
                self.received.append((now, {kv.key: kv.value for kv in status.values}))

    def before(self, t: float) -> dict[str, str]:
        return next((values for now, values in reversed(self.received) if now <= t), {})


def run(minutes: float, stress: bool, cloud: bool) -> str:
    robot = RobotModel.load('panda')
    count = int((WARMUP + 60 * minutes) * RATE)
    stream = PandaStream(robot, RATE, count, wrenches=True)
    if cloud:
        points = cell_cloud(np.random.default_rng(0), CLOUD_POINTS)
        stream.clouds = {i: points for i in range(0, count, int(RATE / CLOUD_RATE))}
    diagnostics = LastDiagnostics()
    listener, ft = manifest.node('joint_state_listener'), manifest.node('ft_contact_estimator')
    topics = DriverTopics(listener.topic('joint_states'), ft.topic('ft_wrench'),
                          PROXIMITY.topic('lidar_points') if cloud else '')
    os.makedirs(LOG_DIR, exist_ok=True)
    burner = None
    if stress:
        burner = multiprocessing.get_context('spawn').Process(target=burn, daemon=True)
        burner.start()
    try:
        with composed_processes(log_path=lambda name: os.path.join(
                LOG_DIR, f'{name}_proximity_load.log'), priority=PRIORITY) as procs:
            inputs = {topics.joint_states, topics.wrench} | ({topics.cloud} if cloud else set())
            load = drive(procs, {name: proc.pid for name, proc in procs.items()}, stream,
                         topics, [Output(DiagnosticArray, PROXIMITY.topic('diagnostics'),
                                         diagnostics)], inputs, 60 * minutes, WARMUP)
    finally:
        if burner is not None:
            burner.kill()
    # As the driver stopped: the drain after it (no joint state) is not the run's.
    values = diagnostics.before(load.stamps[-1])
    process = next(p.name for p in manifest.composed() if PROXIMITY.name in p.nodes)
    return '\n\n'.join([
        f'{minutes:g} min of free motion at {RATE:.0f} Hz (joint states + F/T)'
        + (f', a {CLOUD_POINTS}-point cloud at {CLOUD_RATE:g} Hz' if cloud else '')
        + (', a second job burning one core' if stress else '')
        + f'; the chain at SCHED_FIFO {PRIORITY}, the driver {load.priority}; {machine()}',
        table('stops: ' + ' | '.join(f'{c:>6s}' for c in CAUSES)
              + ' | check lag p50 / p99 / max | check time | cloud age p50 / p99 / max',
              [' ' * 7 + ' | '.join(f'{values.get(c, "0"):>6s}' for c in CAUSES)
               + f' | {values.get("lag", "?"):>25s} | {values.get("check_time", "?"):>10s} | '
               + values.get('cloud_age', '-')]),
        f'joint state age at the checks beyond the clocks\' offset, p50 / p99 / max: '
        f'{values.get("joint_state_age", "?")}',
        f'the proximity monitor runs in `{process}`; its cloud worker: '
        f'{values.get("cloud_worker", "?")}',
        cpu_table(load)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--minutes', type=float, default=3.0)
    parser.add_argument('--no-stress', action='store_true', help='no second job')
    parser.add_argument('--no-cloud', action='store_true', help='no lidar cloud')
    args = parser.parse_args()
    start = time.monotonic()
    print(run(args.minutes, not args.no_stress, not args.no_cloud))
    print(f'\n({time.monotonic() - start:.0f} s)')


if __name__ == '__main__':
    main()
