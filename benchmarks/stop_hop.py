"""What the stop's own process costs a stop: the extra hop, against a publish in the node's
process (issue 36).

    PYTHONPATH=$PWD python benchmarks/stop_hop.py [--changes 200] [--runs 3]

A node process at SCHED_FIFO 39 (the chain's under `up`) changes its stop every 50 ms,
`--changes` times: through a StopProcess (ros/stop_process.py: a Unix socket to a child at
SCHED_FIFO 41 that publishes over UDP) on one topic, and with a publish of its own (as before
issue 36's fix, on the suite's Fast DDS settings) on another. A monitor at SCHED_FIFO 60 on
Fast DDS's defaults (a controller's) notes when each change arrives. Printed per run: the
time from the node's call to the monitor's receipt, p50 / p99 / max, for each path, on the
monotonic clock both processes share.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import machine, realtime_priority, table  # noqa: E402

from contact_estimation.launcher import transport_environment  # noqa: E402
from contact_estimation.ros.qos import STOP_QOS  # noqa: E402
from contact_estimation.ros.testing import isolate_ros_domain  # noqa: E402

PERIOD = 0.05  # s between two changes
PATHS = {'stop process': '/stop_hop/own_process', 'publish in the node': '/stop_hop/in_node'}


def node(changes: int, ready, sent) -> None:
    """Change both stops every PERIOD; when each change was asked for."""
    realtime_priority(39)
    os.environ.update(transport_environment())
    import rclpy
    from std_msgs.msg import Bool

    from contact_estimation.ros.stop_process import StopProcess
    rclpy.init()
    ros_node = rclpy.create_node('stop_hop_node')
    direct = ros_node.create_publisher(Bool, PATHS['publish in the node'], STOP_QOS)
    own = StopProcess('stop_hop', '/', PATHS['stop process'], '/stop_hop/scale', 20.0,
                      False, 41, lambda newly, silence: None, print)
    ready.wait()
    time.sleep(3.0)  # the child started, discovery
    times: dict[str, list[float]] = {path: [] for path in PATHS}
    for k in range(changes):
        stop = k % 2 == 0
        own.decision()
        times['stop process'].append(time.monotonic())
        own.publish_stop(stop)
        times['publish in the node'].append(time.monotonic())
        direct.publish(Bool(data=stop))
        time.sleep(PERIOD)
    sent.put(times)
    own.close()  # before its beats say stop, late (that would be one change more)


def monitor(ready, heard, seconds: float) -> None:
    """When each change of each stop arrived."""
    realtime_priority(60)
    for name in [n for n in os.environ if n.startswith(('FASTDDS', 'FASTRTPS'))]:
        del os.environ[name]
    import rclpy
    from std_msgs.msg import Bool
    rclpy.init()
    ros_node = rclpy.create_node('stop_hop_monitor')
    times: dict[str, list[float]] = {path: [] for path in PATHS}
    last: dict[str, bool | None] = {path: None for path in PATHS}

    def on(path: str):
        def note(message: Bool) -> None:
            if message.data != last[path]:
                last[path] = message.data
                times[path].append(time.monotonic())
        return note

    for path, topic in PATHS.items():
        ros_node.create_subscription(Bool, topic, on(path), STOP_QOS)
    ready.set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rclpy.spin_once(ros_node, timeout_sec=0.01)
    heard.put(times)


def run(changes: int) -> dict[str, np.ndarray]:
    """Each path's delays, s, of the changes heard, paired in order (the monitor matched
    both publishers before the first change)."""
    spawn = multiprocessing.get_context('spawn')
    ready, sent, heard = spawn.Event(), spawn.Queue(), spawn.Queue()
    watcher = spawn.Process(target=monitor, args=(ready, heard, changes * PERIOD + 8.0),
                            daemon=True)
    sender = spawn.Process(target=node, args=(changes, ready, sent), daemon=True)
    watcher.start()
    sender.start()
    asked, got = sent.get(timeout=120.0), heard.get(timeout=120.0)
    sender.join(10.0)
    delays = {}
    for path in PATHS:
        n = min(len(asked[path]), len(got[path]))
        delays[path] = np.array(got[path][:n]) - np.array(asked[path][:n])
    return delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--changes', type=int, default=200)
    parser.add_argument('--runs', type=int, default=3)
    args = parser.parse_args()
    isolate_ros_domain()
    print(machine())
    rows = []
    for k in range(args.runs):
        for path, delays in run(args.changes).items():
            ms = np.percentile(delays, [50, 99, 100]) * 1e3
            rows.append(f'{k + 1} | {path} | {len(delays)} | {ms[0]:.2f} | {ms[1]:.2f} | '
                        f'{ms[2]:.2f}')
    print(table('run | path | changes heard | p50, ms | p99, ms | max, ms', rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
