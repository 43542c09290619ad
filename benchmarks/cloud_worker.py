"""What the cloud worker process costs (ros/cloud_process.py, issue 35): its start-up, the
node's side of a cloud, and the round trip, for the Panda and the proximity monitor's recipe.

    PYTHONPATH=$PWD python benchmarks/cloud_worker.py [--starts 5] [--clouds 50]

Start-up: from the CloudProcess's construction to the worker's first answer (it imports
open3d and pinocchio and builds the robot's link surfaces), the time the constructor holds
the node's thread (a start, or a restart from the check), and the worker's memory once
ready (resident, and the part it shares with no other process). Per cloud (a 43 000-point
cell, benchmarks/soak.py `cell_cloud`, at the node's `cloud.budget_points`): how long
`submit` holds the node's thread (the bytes into the memfd; on the wall clock, where this
process at normal priority may lose its core to the worker it has just woken, which a node
at real-time priority does not, and in CPU), the worker's CPU, the time from
`submit` to the result being taken (polled every 1 ms, as no check does: the node takes it
at its next check), and the same cloud processed in the node's thread, as a replay does.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import machine, table  # noqa: E402
from soak import cell_cloud  # noqa: E402

from contact_estimation.core.contact.lidar_fusion import CloudConfig  # noqa: E402
from contact_estimation.core.robot.robot_model import RobotModel  # noqa: E402
from contact_estimation.core.robot.surfaces import LinkSurfaces  # noqa: E402
from contact_estimation.ros.cloud_process import (CloudJob, CloudProcess,  # noqa: E402
                                                  CloudRecipe)
from contact_estimation.ros.conversions import (CloudLayout, seconds_to_stamp,  # noqa: E402
                                                xyz_to_cloud)
from contact_estimation.ros.sensor_frames import BUDGET_POINTS, IDENTITY  # noqa: E402

SPACING = {'sphere_spacing': 0.05}  # the proximity monitor's robot_sphere_spacing


def memory_mib(pid: int) -> tuple[float, float]:
    """A process's resident memory and the part of it no other process shares (MiB): open3d's
    and pinocchio's libraries are mapped by the node too."""
    found = {}
    with open(f'/proc/{pid}/smaps_rollup', encoding='ascii') as f:
        for line in f:
            key, _, value = line.partition(':')
            if key in ('Rss', 'Private_Clean', 'Private_Dirty'):
                found[key] = int(value.split()[0]) / 1024
    return found['Rss'], found['Private_Clean'] + found['Private_Dirty']


def wait(clouds: CloudProcess, ready: bool = False):
    """(s, the result) until the next result is taken (polled every ms), or with `ready`,
    until the worker is ready."""
    start = time.monotonic()
    while time.monotonic() - start < 120.0:
        result = clouds.take()
        if result is not None or (ready and clouds.status().startswith('ready')):
            return time.monotonic() - start, result
        time.sleep(0.001)
    raise RuntimeError(f'the worker did not answer: {clouds.status()}')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--starts', type=int, default=5)
    parser.add_argument('--clouds', type=int, default=50)
    args = parser.parse_args()
    robot = RobotModel.load('panda')
    surfaces = LinkSurfaces(robot, **SPACING)
    recipe = CloudRecipe('panda', '', '', SPACING)
    faults = []

    starts = []
    for _ in range(args.starts):
        begin = time.monotonic()
        clouds = CloudProcess(recipe, surfaces, 'benchmark', True,
                              lambda *fault: faults.append(fault), lambda _: None)
        held = time.monotonic() - begin
        ready = held + wait(clouds, ready=True)[0]
        starts.append((ready, held, *memory_mib(clouds.pid)))
        if len(starts) < args.starts:
            clouds.close()

    msg = xyz_to_cloud(seconds_to_stamp(1.0), robot.base_link,
                       cell_cloud(np.random.default_rng(0), 43_000))
    job = CloudJob(1.0, np.zeros(robot.n), CloudLayout.of(msg), IDENTITY, CloudConfig(),
                   BUDGET_POINTS)
    rows = []
    for _ in range(args.clouds):
        begin, cpu = time.monotonic(), time.thread_time()
        clouds.submit(job, msg.data)
        held, cpu = time.monotonic() - begin, time.thread_time() - cpu
        seconds, result = wait(clouds)
        rows.append((held, cpu, result.cpu, held + seconds))
        time.sleep(result.cpu + 0.01)  # its rest (max_duty 0.5)
    clouds.close()
    in_node = CloudProcess(recipe, surfaces, 'benchmark', False, print, print)
    inline = []
    for _ in range(args.clouds):
        begin = time.monotonic()
        in_node.submit(job, msg.data)
        inline.append(time.monotonic() - begin)
        in_node.take()

    starts, rows = np.array(starts), np.array(rows)
    print(f'cloud worker for the Panda, proximity monitor recipe; {machine()}\n')
    print(table('start-up                  |  median |     max',
                [f'to ready, s               | {np.median(starts[:, 0]):7.2f} | '
                 f'{starts[:, 0].max():7.2f}',
                 f'node thread held, ms      | {1e3 * np.median(starts[:, 1]):7.2f} | '
                 f'{1e3 * starts[:, 1].max():7.2f}',
                 f'worker resident, MiB      | {np.median(starts[:, 2]):7.0f} | '
                 f'{starts[:, 2].max():7.0f}',
                 f'... its own (private), MiB | {np.median(starts[:, 3]):7.0f} | '
                 f'{starts[:, 3].max():7.0f}']))
    print()
    print(table(f'per cloud ({msg.width} points, {len(msg.data)} bytes) |  median |     max',
                [f'submit holds the node, ms          | {1e3 * np.median(rows[:, 0]):7.3f} | '
                 f'{1e3 * rows[:, 0].max():7.3f}',
                 f'... of its CPU, ms                 | {1e3 * np.median(rows[:, 1]):7.3f} | '
                 f'{1e3 * rows[:, 1].max():7.3f}',
                 f'worker CPU, ms                     | {1e3 * np.median(rows[:, 2]):7.1f} | '
                 f'{1e3 * rows[:, 2].max():7.1f}',
                 f'submit to result, ms               | {1e3 * np.median(rows[:, 3]):7.1f} | '
                 f'{1e3 * rows[:, 3].max():7.1f}',
                 f"in the node's thread (replay), ms  | {1e3 * np.median(inline):7.1f} | "
                 f'{1e3 * max(inline):7.1f}']))
    if faults:
        print(f'\nfaults: {faults}')


if __name__ == '__main__':
    main()
