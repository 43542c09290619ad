"""The proximity monitor's check with a lidar, in-process (issue 35): µs per `update` over a
free motion against the objects of a cell's cloud, as the node's 100 Hz check runs it.

    PYTHONPATH=$PWD python benchmarks/proximity_check_cost.py [--seconds 20] [--runs 3]
                                                      [--cloud cell|uniform]

The Panda's link surfaces (robot_sphere_spacing 0.05 m, the node's default); the cloud is
benchmarks/soak.py `cell_cloud` (43 000 points: floor, wall, table, a person; `--cloud
uniform`: 43 000 points strewn through the workspace, the worst case), turned into
objects as the node's cloud worker does (`process_cloud`, cloud.budget_points, the default
cloud settings) at the motion's first pose; the motion is the soak's (every joint a sine),
checked at 100 Hz, the objects handed over again every 0.1 s as a 10 Hz lidar's would be.
Printed per run: the check's median, p99 and max (µs), `set_clusters` (on the node's check
thread at 10 Hz), and a digest of every verdict's figures (margins, distances, stops, the
speed scale), to compare two versions of the code bit for bit. The check runs in this
process alone: the figures are its cost, not its lateness on a busy machine
(benchmarks/proximity_load.py).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak import CLOUDS, PERIOD, Q0  # noqa: E402

from contact_estimation.core.contact.lidar_fusion import CloudConfig, LidarFusion  # noqa: E402
from contact_estimation.core.contact.proximity import ProximityMonitor  # noqa: E402
from contact_estimation.core.robot.robot_model import RobotModel  # noqa: E402
from contact_estimation.core.robot.surfaces import LinkSurfaces  # noqa: E402
from contact_estimation.ros.cloud_process import CloudJob, process_cloud  # noqa: E402
from contact_estimation.ros.conversions import xyz_layout  # noqa: E402
from contact_estimation.ros.sensor_frames import BUDGET_POINTS, IDENTITY  # noqa: E402

CHECK_RATE = 100.0   # Hz: the node's check_rate
CLOUD_RATE = 10.0    # Hz
CLOUD_POINTS = 43_000
SPHERE_SPACING = 0.05  # m: the node's robot_sphere_spacing


def free_motion(seconds: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The soak's motion (benchmarks/soak.py CellStreams) sampled at the check rate: t, q, q̇."""
    t = np.arange(int(seconds * CHECK_RATE)) / CHECK_RATE
    omega = 2 * np.pi * np.array([1, 2, 1, 3, 2, 3, 4]) / PERIOD
    amplitude = np.array([0.4, 0.2, 0.4, 0.3, 0.5, 0.3, 0.6])
    return (t, Q0 + amplitude * np.sin(np.outer(t, omega)),
            amplitude * omega * np.cos(np.outer(t, omega)))


def cloud_clusters(surfaces: LinkSurfaces, q: np.ndarray, cloud: str) -> list[np.ndarray]:
    """The objects of benchmarks/soak.py's `cloud` as the cloud worker finds them, arm at q."""
    points = CLOUDS[cloud](np.random.default_rng(0), CLOUD_POINTS)
    job = CloudJob(0.0, q, xyz_layout(len(points)), IDENTITY, CloudConfig(), BUDGET_POINTS)
    return process_cloud(LidarFusion(surfaces), job, points.tobytes()).obstacles.clusters


def run(monitor: ProximityMonitor, clusters, motion) -> tuple[np.ndarray, np.ndarray, int, str]:
    """Seconds of each check and of each hand-over of the objects; the checks that stopped;
    a digest of every figure of every verdict (equal digests: the same bits)."""
    checks, handovers, stops, digest = [], [], 0, hashlib.sha256()
    every = int(CHECK_RATE / CLOUD_RATE)
    for k, (t, q, v) in enumerate(zip(*motion)):
        if k % every == 0:
            start = time.perf_counter()
            monitor.set_clusters(t, clusters)
            handovers.append(time.perf_counter() - start)
        start = time.perf_counter()
        result = monitor.update(t, q, v)
        checks.append(time.perf_counter() - start)
        stops += result.stop
        for figures in (result.body_margin, result.body_distance, result.body_protective_distance,
                        result.link_distance, result.body_link_distance,
                        result.robot_sphere_distance, result.body_stop,
                        [result.speed_scale, result.stop]):
            digest.update(np.asarray(figures).tobytes())
        digest.update(repr(result.body_link).encode())
    return np.array(checks), np.array(handovers), stops, digest.hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=20.0, help='of motion per run')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--cloud', choices=sorted(CLOUDS), default='cell',
                        help="soak.py's clouds: uniform strews the points through the workspace")
    args = parser.parse_args()
    robot = RobotModel.load('panda')
    surfaces = LinkSurfaces(robot, sphere_spacing=SPHERE_SPACING)
    motion = free_motion(args.seconds)
    clusters = cloud_clusters(surfaces, motion[1][0], args.cloud)
    monitor = ProximityMonitor(surfaces)
    monitor.set_clusters(0.0, clusters)
    spheres = len(monitor._clusters.radii)
    print(f'{len(surfaces.sphere_radii)} robot spheres; the {args.cloud} cloud: '
          f'{len(clusters)} objects '
          f'({sum(map(len, clusters))} points, {spheres} spheres); {len(motion[0])} checks '
          f'of {args.seconds:g} s of free motion per run')
    print('| run | check median | p99 | max | set_clusters median | stopped checks | verdicts '
          'digest |')
    print('|---|---|---|---|---|---|---|')
    for k in range(args.runs):
        checks, handovers, stops, digest = run(ProximityMonitor(surfaces), clusters, motion)
        median, p99, worst = np.percentile(checks, [50, 99, 100]) * 1e6
        print(f'| {k + 1} | {median:.0f} µs | {p99:.0f} µs | {worst:.0f} µs | '
              f'{np.median(handovers) * 1e6:.0f} µs | {stops} | {digest} |')


if __name__ == '__main__':
    main()
