"""Seed 003's reaction in the simulated cobot: the arm holds, yields when pushed, resumes.

Runs config/scenarios/push_back.yaml closed loop and ROS-free (SimulatedCobot → momentum
observer → CollisionDetector → TimeScaling → the sim's reference clock), with the detector's
and the time scaling's shipped defaults: the stop latches at the first contact and stays
(hold_time 0, no ~/reset here), while f_S follows each contact and resumes the motion by
itself. Prints the phases and writes out/time_scaling_demo.png: f_S with the stop, the
external joint torque (estimated and true) and the path parameter against time.

    .venv/bin/python benchmarks/time_scaling_demo.py [--quick]
"""
from __future__ import annotations

import argparse
import os
import sys

import matplotlib
import numpy as np

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

from contact_estimation.core.detector import DetectorConfig  # noqa: E402
from contact_estimation.core.robot_model import RobotModel  # noqa: E402
from contact_estimation.core.sim.harness import simulate  # noqa: E402
from contact_estimation.core.sim.scenario import Scenario  # noqa: E402
from contact_estimation.core.time_scaling import TimeScalingConfig  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = os.path.join(ROOT, 'config', 'scenarios', 'push_back.yaml')


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='stop right after the push (6 s)')
    parser.add_argument('--out', default=os.path.join(ROOT, 'out', 'time_scaling_demo.png'))
    args = parser.parse_args(argv)
    robot = RobotModel.load('panda')
    scenario = Scenario.load(SCENARIO, robot)
    detector = DetectorConfig.build(robot.joint_names)
    scaling = TimeScalingConfig()
    trace = simulate(robot, scenario, 6.0 if args.quick else 11.0, detector, scaling)

    t = trace['t']
    print(f'{"t s":>5s} {"f_S":>6s} {"path s":>7s} {"stop":>5s} {"max|τ_ext| N·m":>15s}')
    for k in range(0, len(t), 250):
        print(f'{t[k]:5.2f} {trace["f_S"][k]:+6.2f} {trace["path_time"][k]:7.3f} '
              f'{str(trace["stop"][k]):>5s} {np.abs(trace["tau_ext"][k]).max():15.2f}')

    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(9, 7))
    axes[0].plot(t, trace['f_S'], label='f_S')
    axes[0].fill_between(t, -1, 1, where=trace['stop'], color='red', alpha=0.15, label='stop')
    axes[0].set_ylabel('f_S')
    axes[0].legend(loc='lower right')
    for j in range(robot.n):
        line, = axes[1].plot(t, trace['tau_ext'][:, j], label=robot.joint_names[j])
        axes[1].plot(t, trace['tau_true'][:, j], '--', color=line.get_color(), linewidth=0.8)
    axes[1].set_ylabel('τ_ext N·m (-- true)')
    axes[1].legend(fontsize=6, ncol=4)
    axes[2].plot(t, trace['path_time'], label='path parameter (reference time)')
    axes[2].plot(t, t, ':', color='gray', label='wall time')
    axes[2].set_ylabel('s')
    axes[2].set_xlabel('time s')
    axes[2].legend(loc='upper left')
    axes[0].set_title('push_back: hold (press across the path), yield (push back), resume; '
                      'stop latched', fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
