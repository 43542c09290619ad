"""Hostile inputs against the composed suite: stop heartbeat gaps and memory (issue 27).

    PYTHONPATH=$PWD python benchmarks/hostile.py [--seconds 5]

The core nodes run composed in one process, as `contact-estimation up` starts them; this
process sends, one phase after another: nothing (baseline), 400 000-point clouds at 2 Hz,
10 000-pose skeletons at 10 Hz, bursts of 10 000 joint states, and nothing again (does the
memory return?). It listens to both stops. A controller keeping the README's contract stops
after 150 ms without a stop message: reported per phase, for each stop, its gaps over 150 ms
and the longest, and the composed process's resident memory at the end of the phase. The
gaps are measured here, on a machine this process shares: "probe late" is the longest delay
of this process's own 10 ms timer in the phase; when it is itself over 150 ms the machine
was too loaded to judge the gaps, and the table says so.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import rclpy
from geometry_msgs.msg import Pose, PoseArray
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Bool

from contact_estimation import manifest
from contact_estimation.ros.conversions import seconds_to_stamp, xyz_to_cloud
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import composed_process, isolate_ros_domain

CONTRACT = 0.150  # s without a stop message after which a controller stops (README)
STOPS = ('collision_detector', 'proximity_monitor')


class Probe(rclpy.node.Node):
    def __init__(self):
        super().__init__('hostile_probe')
        self.heard = {name: [] for name in STOPS}  # monotonic receipt times
        for name in STOPS:
            self.create_subscription(Bool, manifest.node(name).topic('stop'),
                                     lambda _, n=name: self.heard[n].append(time.monotonic()),
                                     STOP_QOS)
        spec = manifest.node('proximity_monitor')
        self.cloud_pub = self.create_publisher(PointCloud2, spec.topic('lidar_points'),
                                               PIPELINE_QOS)
        self.skeleton_pub = self.create_publisher(PoseArray, spec.topic('skeleton'),
                                                  PIPELINE_QOS)
        self.joint_pub = self.create_publisher(
            JointState, manifest.node('joint_state_listener').topic('joint_states'),
            PIPELINE_QOS)
        self.late, self._last = 0.0, time.monotonic()
        self.create_timer(0.01, self._tick)

    def _tick(self):
        now = time.monotonic()
        self.late, self._last = max(self.late, now - self._last - 0.01), now


def rss_mib(pid: int) -> float:
    with open(f'/proc/{pid}/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith('VmRSS')) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=5.0, help='length of each phase')
    args = parser.parse_args()
    isolate_ros_domain()
    rclpy.init()
    probe = Probe()
    executor = SingleThreadedExecutor()
    executor.add_node(probe)
    rng = np.random.default_rng(27)
    cloud_points = rng.uniform(-1.0, 1.0, size=(400_000, 3))
    skeleton = PoseArray(poses=[Pose() for _ in range(10_000)])
    skeleton.header.frame_id = 'panda_link0'
    burst = JointState(name=[f'panda_joint{i}' for i in range(1, 8)], position=[0.0] * 7,
                       velocity=[0.0] * 7, effort=[0.0] * 7)

    def clouds():
        stamp = probe.get_clock().now().to_msg()
        probe.cloud_pub.publish(xyz_to_cloud(stamp, 'panda_link0', cloud_points))

    def skeletons():
        skeleton.header.stamp = probe.get_clock().now().to_msg()
        probe.skeleton_pub.publish(skeleton)

    def bursts():
        now = time.time()
        for k in range(10_000):
            burst.header.stamp = seconds_to_stamp(now - 1.0 + k * 1e-4)
            probe.joint_pub.publish(burst)

    phases = [('baseline', None, 1.0), ('400 000-point clouds', clouds, 0.5),
              ('10 000-pose skeletons', skeletons, 0.1), ('10 000 joint-state bursts', bursts,
                                                          1.0), ('idle after', None, 1.0)]
    rows = []
    with composed_process() as proc:
        assert spin_until(executor, lambda: all(len(h) > 5 for h in probe.heard.values()),
                          60.0), 'the composed suite never published its stops'
        for name, send, period in phases:
            start = time.monotonic()
            probe.late, next_send = 0.0, start
            for heard in probe.heard.values():
                heard.clear()
            while time.monotonic() - start < args.seconds:
                if send and time.monotonic() >= next_send:
                    send()
                    next_send += period
                executor.spin_once(timeout_sec=0.005)
            row = [name]
            for stop in STOPS:
                gaps = np.diff(probe.heard[stop]) if len(probe.heard[stop]) > 1 else [np.inf]
                row += [str(int(np.sum(np.asarray(gaps) > CONTRACT))),
                        f'{np.max(gaps) * 1e3:.0f}']
            judged = 'yes' if probe.late < CONTRACT else 'no: machine too loaded'
            rows.append(row + [f'{probe.late * 1e3:.0f}', judged, f'{rss_mib(proc.pid):.0f}'])
    executor.shutdown()
    probe.destroy_node()
    rclpy.shutdown()
    header = ['phase', 'detector gaps > 150 ms', 'longest, ms', 'proximity gaps > 150 ms',
              'longest, ms', 'probe late, ms', 'judged', 'RSS, MiB']
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print(' | '.join(c.ljust(w) for c, w in zip(r, widths)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
