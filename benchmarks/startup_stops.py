"""The proximity monitor's start-up beside a driver that already streams (issue 35, "no stop
without a cause"): the stops and rejected inputs it counts in its first seconds.

    PYTHONPATH=$PWD python benchmarks/startup_stops.py [--starts 5] [--window 12]
                                                       [--priority 0]

For each start, a driver process publishes a Panda's free motion at 1 kHz (joint states and
base F/T readings, stamped with the wall clock) and a 43 000-point cell cloud at 10 Hz
(benchmarks/soak.py `cell_cloud`: nothing near the arm), from 1 s before the suite starts;
the suite then starts composed, as `up` starts it (the chain at SCHED_FIFO `--priority`, 0 =
normal). Nothing in these inputs calls for a stop: no contact, nobody near, no input stale
or hostile. Reported, per start, from the proximity monitor's last /diagnostics `--window` s
after its first (its node built): its stops by cause (behind, stale, input, fault; near: an
object of the cell cloud within the protective distance, a stop with a cause), its `no_pose`
rejections, the clouds it dropped as start-up (`clouds_before_joint_states`), how often its
stop was raised again after its first release (`re-stops`: the flicker a user sees, whatever
its cause), the checks' lag (p50 / p99 / max since start) and its status at the end (`clear`:
released).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Bool

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import LOG_DIR, PandaStream, machine, table  # noqa: E402
from proximity_load import CLOUD_POINTS, CLOUD_RATE, PROXIMITY, RATE  # noqa: E402
from soak import cell_cloud  # noqa: E402

from contact_estimation import manifest  # noqa: E402
from contact_estimation.core.robot.robot_model import RobotModel  # noqa: E402
from contact_estimation.ros.conversions import seconds_to_stamp  # noqa: E402
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS  # noqa: E402
from contact_estimation.ros.spinning import spin_for, spin_until  # noqa: E402
from contact_estimation.ros.testing import composed_processes, ros_context  # noqa: E402

LEAD = 1.0  # s the driver streams before the suite starts
START_UP = 60.0  # s at most from the suite's start to the proximity monitor's /diagnostics
# Counted on /diagnostics: stop causes (core/chain/input_gate.py CAUSES and the monitor's
# own) and the inputs refused at start-up.
STOPS = ('behind', 'stale', 'input', 'fault', 'near')
REFUSED = ('no_pose', 'clouds_before_joint_states')


def _drive(stream: PandaStream, topics: tuple[str, str, str]) -> None:
    """The driver: every input of `stream` at its time, from its start, subscribed or not,
    until killed."""
    with ros_context() as context:
        node = rclpy.create_node('driver', context=context)
        joints, wrenches, clouds = (node.create_publisher(kind, topic, PIPELINE_QOS) for
                                    kind, topic in zip((JointState, WrenchStamped, PointCloud2),
                                                       topics))
        start = time.monotonic()
        for i in range(len(stream)):
            delay = start + i / stream.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            stamp = seconds_to_stamp(time.time())
            joints.publish(stream.message(i, stamp))
            wrenches.publish(stream.wrench_message(i, stamp))
            cloud = stream.cloud_message(i, stamp)
            if cloud is not None:
                clouds.publish(cloud)
        raise RuntimeError(f'the driver ran out of its {len(stream) / stream.rate:g} s')


def start_once(stream: PandaStream, window: float, priority: int, index: int) -> dict:
    """One start of the suite beside the streaming driver: the proximity monitor's last
    /diagnostics values (with 'message': its status's, 're-stops': its stop raised again
    after its first release) `window` s after its first."""
    listener, ft = manifest.node('joint_state_listener'), manifest.node('ft_contact_estimator')
    topics = (listener.topic('joint_states'), ft.topic('ft_wrench'),
              PROXIMITY.topic('lidar_points'))
    driver = multiprocessing.get_context('spawn').Process(
        target=_drive, args=(stream, topics), daemon=True)
    last: dict[str, str] = {}
    stops: list[bool] = []

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.lstrip('/') == PROXIMITY.name:
                last.clear()
                last.update({kv.key: kv.value for kv in status.values},
                            message=status.message)

    with ros_context() as context:
        node = rclpy.create_node('startup_monitor', context=context)
        node.create_subscription(DiagnosticArray, PROXIMITY.topic('diagnostics'),
                                 on_diagnostics, 10)
        node.create_subscription(Bool, PROXIMITY.topic('stop'), lambda m: stops.append(m.data),
                                 STOP_QOS)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        driver.start()
        spin_for(executor, LEAD)
        with composed_processes(log_path=lambda name: os.path.join(
                LOG_DIR, f'{name}_startup_{index}.log'), priority=priority):
            if not spin_until(executor, lambda: bool(last), START_UP):
                raise RuntimeError(f'no /diagnostics from {PROXIMITY.name} in {START_UP:g} s')
            spin_for(executor, window)
        executor.shutdown()
        node.destroy_node()
    driver.kill()
    released = stops.index(False) if False in stops else len(stops)
    changes = sum(a != b for a, b in zip(stops[released:], stops[released + 1:]))
    return last | {'re-stops': str((changes + 1) // 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--starts', type=int, default=5)
    parser.add_argument('--window', type=float, default=12.0, help='s after each start')
    parser.add_argument('--priority', type=int, default=0, help="the chain's, as `up`'s")
    args = parser.parse_args()
    os.makedirs(LOG_DIR, exist_ok=True)
    begun = time.monotonic()
    count = int((LEAD + START_UP + args.window) * RATE)
    stream = PandaStream(RobotModel.load('panda'), RATE, count, wrenches=True)
    points = cell_cloud(np.random.default_rng(0), CLOUD_POINTS)
    stream.clouds = {i: points for i in range(0, count, int(RATE / CLOUD_RATE))}
    rows = []
    for index in range(args.starts):
        values = start_once(stream, args.window, args.priority, index)
        rows.append(f'{index + 1:5d} | ' + ' | '.join(
            f'{values.get(key, "0"):>7s}' for key in STOPS + REFUSED + ('re-stops',))
            + f' | {values.get("lag", "?"):>24s} | {values.get("message", "no diagnostics")}')
    print(f'{args.starts} starts of the composed suite beside a driver streaming since {LEAD:g} '
          f's before (1 kHz joint states + F/T, a {CLOUD_POINTS}-point cloud at '
          f'{CLOUD_RATE:g} Hz), the proximity monitor read {args.window:g} s after its first '
          f'/diagnostics; '
          f'the chain at priority {args.priority}; {machine()}\n')
    print(table('start | ' + ' | '.join(f'{key:>7s}' for key in STOPS + REFUSED
                                        + ('re-stops',))
                + ' | check lag p50 / p99 / max | status at the end', rows))
    print(f'\n({time.monotonic() - begun:.0f} s)')


if __name__ == '__main__':
    main()
