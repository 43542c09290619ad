"""What receiving a 1 kHz JointState stream costs a process, by the way it wakes (issue 35).

One SCHED_FIFO 50 publisher (a driver) sends 7-joint joint states at 1 kHz; beside it, in
the same run, one process per way of receiving them, each on rclpy's EventsExecutor:
- `floor`: a callback per message, as messages (`_ros_load.floor`, the CPU figures' unit);
- `raw`: a callback per message, as bytes (how the chain's listener takes them);
- `poll2`, `poll5`: no callback; a timer every 2 or 5 ms takes what waits, as bytes
  (`suite_node.waiting_messages`: how the estimators take the F/T readings); a message then
  waits up to that long;
- `rest5`: no callback, no timer; the spin loop itself waits for the next 5 ms tick
  (`spin_once` with the time left as its timeout) and takes what waits, as bytes (how
  ros/node_main.py runs a process's periodic work);
- `future`: `floor` spun by `spin_until_future_complete` instead of a `spin_once` loop.
Prints each one's CPU, % of a core and × floor. Nothing is done with the messages: this is
the least a process pays to be woken by the stream, before any work of its own.

    .venv/bin/python benchmarks/wake_cost.py [--seconds S]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import time

import rclpy
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState

from _ros_load import CpuClock, machine, realtime_priority, table
from contact_estimation.ros.node_main import FastExecutor
from contact_estimation.ros.qos import SENSOR_QOS
from contact_estimation.ros.suite_node import waiting_messages

TOPIC = 'wake_cost_joint_states'
WAYS = ('floor', 'raw', 'poll2', 'poll5', 'rest5', 'future')


def publish() -> None:
    """The driver: 1 kHz on a fixed schedule, at SCHED_FIFO 50 where allowed."""
    realtime_priority()
    rclpy.init()
    node = rclpy.create_node('wake_cost_driver')
    publisher = node.create_publisher(JointState, TOPIC, SENSOR_QOS)
    msg = JointState(name=[f'joint{i}' for i in range(1, 8)], position=[0.1] * 7,
                     velocity=[0.0] * 7, effort=[1.0] * 7)
    start, k = time.monotonic(), 0
    while True:
        k += 1
        time.sleep(max(start + k * 1e-3 - time.monotonic(), 0.0))
        msg.header.stamp = node.get_clock().now().to_msg()
        publisher.publish(msg)


def receive(way: str) -> None:
    """Receive the stream `way` (module docstring) until killed."""
    rclpy.init()
    node = rclpy.create_node(f'wake_cost_{way}')
    executor = FastExecutor()
    if way in ('floor', 'future', 'raw'):
        node.create_subscription(JointState, TOPIC, lambda msg: None, SENSOR_QOS,
                                 raw=way == 'raw')
    else:
        hidden = Node(f'wake_cost_{way}_polled', start_parameter_services=False,
                      enable_rosout=False)
        subscription = hidden.create_subscription(JointState, TOPIC, lambda msg: None,
                                                  SENSOR_QOS, raw=True)
        if way.startswith('poll'):
            node.create_timer(float(way[4:]) * 1e-3,
                              lambda: waiting_messages(subscription, 200))
    executor.add_node(node)
    if way == 'future':
        executor.spin_until_future_complete(Future())
    if way.startswith('rest'):
        period = float(way[4:]) * 1e-3
        due = time.monotonic()
        while True:
            executor.spin_once(timeout_sec=max(due - time.monotonic(), 0.0))
            if time.monotonic() >= due:
                waiting_messages(subscription, 200)
                due = max(due + period, time.monotonic())
    while True:
        executor.spin_once(timeout_sec=0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=15.0, help='measured time')
    args = parser.parse_args()
    print(machine())
    spawn = multiprocessing.get_context('spawn')
    receivers = {way: spawn.Process(target=receive, args=(way,), daemon=True) for way in WAYS}
    for process in receivers.values():
        process.start()
    time.sleep(3.0)  # discovery
    driver = spawn.Process(target=publish, daemon=True)
    driver.start()
    time.sleep(3.0)  # the stream settles
    clocks = {way: CpuClock(p.pid) for way, p in receivers.items()}
    before = {way: clock.read() for way, clock in clocks.items()}
    start = time.monotonic()
    time.sleep(args.seconds)
    elapsed = time.monotonic() - start
    cpu = {way: 100 * (clocks[way].read() - before[way]) / elapsed for way in WAYS}
    for process in (*receivers.values(), driver):
        process.kill()
    print(f'\n1 kHz JointState (7 joints) for {args.seconds:.0f} s; CPU of each receiver')
    print(table('way          | % of a core | × floor',
                [f'{way:12s} | {cpu[way]:11.1f} | {cpu[way] / cpu["floor"]:7.2f}'
                 for way in WAYS]))


if __name__ == '__main__':
    os.environ.setdefault('ROS_DOMAIN_ID', str(100 + os.getpid() % 100))
    main()
