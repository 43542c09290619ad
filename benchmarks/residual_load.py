"""residual_node under 1 kHz load, per residual model, and each model's compute time.

1. For each model (fast, rnea, momentum_observer) the node runs as a real process and gets
   the conditioned Panda joint state (7 joints, position, velocity, torque) at 1 kHz on its
   input topic: messages lost, CPU use of the node (% of one core, /proc/<pid>/stat over the
   measured period), latency input stamp → τ_ext receipt.
2. In-process, no ROS: time of one `Residual.update` per model (URDF gravity, Coulomb +
   viscous friction as the node's defaults), median and p99 over the samples.

    .venv/bin/python benchmarks/residual_load.py [--quick] [--duration S] [--compute-only]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from sensor_msgs.msg import JointState
from tqdm import tqdm

from _ros_load import (LoadResult, Output, PandaStream, StampLatencies, cpu_table, machine,
                       run_load, table)
from contact_estimation import manifest
from contact_estimation.core.chain.residual import MODELS, make_residual
from contact_estimation.core.robot.robot_model import RobotModel

NODE = 'residual_node'
RATE = 1000.0
WARMUP = 2.0


def compute_times(robot: RobotModel, stream: PandaStream, samples: int) -> dict[str, np.ndarray]:
    """Seconds per `update` call of each model, on `samples` samples of the stream."""
    times = {}
    for kind in tqdm(MODELS, desc='compute time'):
        residual = make_residual(kind, robot)
        spent = np.empty(samples)
        for i in range(samples):
            q, v, tau = stream.q[i], stream.v[i], stream.effort[i]
            start = time.perf_counter()
            residual.update(i / RATE, q, v, tau)
            spent[i] = time.perf_counter() - start
        times[kind] = spent
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=60.0, help='measured seconds per model')
    parser.add_argument('--quick', action='store_true', help='10 s per model, 5000 samples')
    parser.add_argument('--compute-only', action='store_true',
                        help='only part 2: the in-process time of one update per model')
    args = parser.parse_args(argv)
    duration = 10.0 if args.quick else args.duration
    samples = 5000 if args.quick else 20000
    print(f'machine: {machine()}')
    spec = manifest.node(NODE)
    robot = RobotModel.load('panda')
    count = max(int((WARMUP + duration) * RATE), samples)
    stream = PandaStream(robot, RATE, count, fingers=False)

    times = compute_times(robot, stream, samples)
    print(f'\nResidual.update, in-process, {samples} samples (Panda, 7 joints)')
    print(table('model             | median, µs | p99, µs',
                [f'{kind:17s} | {1e6 * np.median(t):10.1f} | {1e6 * np.percentile(t, 99):7.1f}'
                 for kind, t in times.items()]))
    if args.compute_only:
        return 0

    rows, runs = [], {}
    with tqdm(total=len(MODELS) * int(WARMUP + duration), unit='s', desc=NODE) as bar:
        for kind in MODELS:
            outputs = StampLatencies()
            run = run_load({NODE: {'model': kind}}, stream, spec.topic('joint_state'),
                           [Output(JointState, spec.topic('residual'), outputs)], duration,
                           WARMUP, bar.update)
            result = LoadResult(RATE, run.sent, outputs.since(run.measure_from))
            rows.append(f'{kind:17s} | {result.cells()} | {run.cpu[NODE]:6.1f}')
            runs[kind] = run
    print(f'\n{NODE}: {RATE:.0f} Hz for {duration:.0f} s per model (after {WARMUP:.0f} s '
          'warm-up); latency = input stamp → τ_ext receipt')
    print(table(f'model             | {LoadResult.HEADER} | CPU, %', rows))
    for kind, run in runs.items():
        print(f'\n{kind}:\n{cpu_table(run)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
