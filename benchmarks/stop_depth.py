"""A reliable stop's delivery while other programs join the domain, by the writer's history
depth (issue 36: both stops went ~300 ms silent at a monitor when a process joined).

    PYTHONPATH=$PWD python benchmarks/stop_depth.py [--runs 3] [--seconds 45] [--depths 1 10]

A publisher at SCHED_FIFO 41 (the stops' own processes beat there under `up`) sends a
message with its send time every 50 ms (the stops' 20 Hz heartbeat) with ros/qos.py
STOP_QOS (reliable, transient local) at each history depth; a monitor at SCHED_FIFO 60
receives it; meanwhile programs join the domain one after the other, each with 70 topics of
its own and a subscription to the stop, for 1.5 s, at normal priority. Every process uses
the suite's Fast DDS settings (launcher.transport_environment). Reported per depth: the
monitor's gaps over 150 ms (a controller keeping the README's contract stops), the longest,
and the longest delay of a message sent after the first second (before it, transient local
hands over what was sent before the monitor matched).

A reliable reader hands its samples over in order: one lost in transport holds the newer
ones until the writer's next heartbeat says what it still holds (Fast DDS: every 3 s by
default, sooner piggybacked on data); with a history of one, the lost one is gone and the
reader waits to learn so.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import join_domain, machine, realtime_priority, stop_qos, table  # noqa: E402

from contact_estimation.launcher import transport_environment  # noqa: E402
from contact_estimation.ros.testing import isolate_ros_domain  # noqa: E402

TOPIC = 'stop_depth_test'
PERIOD = 0.05      # s between two messages: the stops' heartbeat
CONTRACT = 0.150   # s without a stop message after which a controller stops (README)
SETTLED = 1.0      # s after the first message from which delays are counted


def _publish(depth: int, seconds: float) -> None:
    import rclpy
    from std_msgs.msg import Float64
    realtime_priority(41)
    rclpy.init()
    node = rclpy.create_node('stop_depth_publisher')
    publisher = node.create_publisher(Float64, TOPIC, stop_qos(depth))
    end = time.monotonic() + seconds

    def beat() -> None:
        while time.monotonic() < end:
            time.sleep(PERIOD)
            publisher.publish(Float64(data=time.monotonic()))
    beating = threading.Thread(target=beat)
    beating.start()
    beating.join()
    rclpy.shutdown()


def _monitor(depth: int, seconds: float, results) -> None:
    import rclpy
    from rclpy.experimental import EventsExecutor
    from std_msgs.msg import Float64
    realtime_priority(60)
    rclpy.init()
    node = rclpy.create_node('stop_depth_monitor')
    heard: list[tuple[float, float]] = []
    node.create_subscription(Float64, TOPIC, lambda m: heard.append((time.monotonic(), m.data)),
                             stop_qos(depth))
    executor = EventsExecutor()
    executor.add_node(node)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.1)
    rclpy.shutdown()
    results.put(heard)


def run(depth: int, seconds: float) -> tuple[int, float, float, int]:
    """One run: (gaps over CONTRACT, longest gap, longest delay after SETTLED, joins)."""
    from std_msgs.msg import Float64
    spawn = multiprocessing.get_context('spawn')
    results = spawn.Queue()
    monitor = spawn.Process(target=_monitor, args=(depth, seconds + 4.0, results))
    monitor.start()
    time.sleep(1.0)
    publisher = spawn.Process(target=_publish, args=(depth, seconds + 2.0))
    publisher.start()
    time.sleep(2.0)
    joins, end = 0, time.monotonic() + seconds - 2.0
    while time.monotonic() < end:
        joining = spawn.Process(target=join_domain, args=([(Float64, TOPIC, depth)],))
        joining.start()
        joining.join()
        joins += 1
    heard = results.get(timeout=seconds + 60.0)
    publisher.join()
    monitor.join()
    arrivals = [a for a, _ in heard]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    settled = heard[0][1] + SETTLED if heard else 0.0
    delays = [a - sent for a, sent in heard if sent >= settled]
    return (sum(g > CONTRACT for g in gaps), max(gaps, default=float('nan')),
            max(delays, default=float('nan')), joins)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--seconds', type=float, default=45.0, help='length of each run')
    parser.add_argument('--depths', type=int, nargs='+', default=[1, 10])
    args = parser.parse_args()
    isolate_ros_domain()
    os.environ.update(transport_environment())
    print(machine())
    rows = []
    for depth in args.depths:
        for k in range(args.runs):
            gaps, longest, delay, joins = run(depth, args.seconds)
            rows.append(f'{depth} | {k + 1} | {joins} | {gaps} | {longest * 1e3:.0f} | '
                        f'{delay * 1e3:.0f}')
            print(rows[-1], flush=True)
    print(table('history depth | run | joins | gaps > 150 ms | longest gap, ms | '
                'longest delay, ms', rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
