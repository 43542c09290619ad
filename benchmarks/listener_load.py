"""joint_state_listener under the franka driver's load: 1 kHz Panda joint states (7 arm joints
+ 2 finger joints, position, velocity, effort) into the node run as a real process.

Prints messages lost, the node's CPU use (% of one core, /proc/<pid>/stat over the measured
period) and the latency from input stamp (the publish time) to receipt of the node's output.

    .venv/bin/python benchmarks/listener_load.py [--quick] [--duration S]
"""
from __future__ import annotations

import argparse
import sys

from sensor_msgs.msg import JointState
from tqdm import tqdm

from _ros_load import (LoadResult, Output, PandaStream, StampLatencies, cpu_table, machine,
                       run_load, table)
from contact_estimation import manifest
from contact_estimation.core.robot.robot_model import RobotModel

NODE = 'joint_state_listener'
RATE = 1000.0
WARMUP = 2.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=60.0, help='measured seconds')
    parser.add_argument('--quick', action='store_true', help='10 s instead of 60 s')
    args = parser.parse_args(argv)
    duration = 10.0 if args.quick else args.duration
    print(f'machine: {machine()}')
    spec = manifest.node(NODE)
    stream = PandaStream(RobotModel.load('panda'), RATE, int((WARMUP + duration) * RATE))
    outputs = StampLatencies()
    with tqdm(total=int(WARMUP + duration), unit='s', desc=NODE) as bar:
        run = run_load({NODE: {}}, stream, spec.topic('joint_states'),
                       [Output(JointState, spec.topic('joint_state'), outputs)], duration,
                       WARMUP, bar.update)
    result = LoadResult(RATE, run.sent, outputs.since(run.measure_from))
    print(f'\n{NODE}: {RATE:.0f} Hz for {duration:.0f} s (after {WARMUP:.0f} s warm-up); '
          'latency = input stamp → output receipt')
    print(table(f'node                 | {LoadResult.HEADER} | CPU, %',
                [f'{NODE:20s} | {result.cells()} | {run.cpu[NODE]:6.1f}']))
    print(f'\n{cpu_table(run)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
