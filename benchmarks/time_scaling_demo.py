"""Seed 003's reaction in the simulated cobot: the arm holds, yields when pushed, resumes.

Runs a scenario of config/scenarios/ (push_back: a press, then a push back along the path;
steady_push: the demo's side push held for 3 s) closed loop and ROS-free (SimulatedCobot →
momentum observer → CollisionDetector → TimeScaling → the sim's reference clock), with the
detector's and the time scaling's shipped defaults: the stop latches at the first contact and
stays (hold_time 0, no ~/reset here), while f_S follows each contact and resumes the motion by
itself. Prints the phases, and per push, from its detection to its ramp down, how f_S moved:
sign changes, total variation, whether it was monotone (chatter shows in all three). Writes
out/time_scaling_<scenario>.png: f_S with the stop, the external joint torque (estimated and
true) and the path parameter against time.

    .venv/bin/python benchmarks/time_scaling_demo.py [--scenario steady_push] [--quick]
"""
from __future__ import annotations

import argparse
import os
import sys

import matplotlib
import numpy as np

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

from contact_estimation.core.chain.detector import DetectorConfig  # noqa: E402
from contact_estimation.core.robot.robot_model import RobotModel  # noqa: E402
from contact_estimation.core.sim.harness import simulate  # noqa: E402
from contact_estimation.core.sim.scenario import Scenario  # noqa: E402
from contact_estimation.core.chain.time_scaling import TimeScalingConfig  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = os.path.join(ROOT, 'config', 'scenarios')


def push_table(trace, scenario) -> None:
    """Per scripted force: how f_S moved from the push's detection to its ramp down."""
    t, f_s = trace['t'], trace['f_S']
    print(f'\n{"push s":>11s} {"detected s":>10s} {"sign changes":>12s} {"total variation":>15s} '
          f'{"monotone":>8s} {"f_S at end":>10s}')
    for force in scenario.forces:
        during = (t >= force.start) & (t < force.start + force.duration - force.ramp)
        held = during & (f_s <= 0.0)
        if not held.any():
            print(f'{force.start:5.2f}–{force.start + force.duration:<5.2f} {"never":>10s}')
            continue
        detected = t[held][0]
        values = f_s[during & (t >= detected)]
        steps = np.diff(values)
        print(f'{force.start:5.2f}–{force.start + force.duration:<5.2f} {detected:10.3f} '
              f'{np.count_nonzero(np.diff(np.sign(values))):12d} {np.abs(steps).sum():15.3f} '
              f'{str(bool(np.all(steps <= 0) or np.all(steps >= 0))):>8s} {values[-1]:+10.3f}')


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--scenario', default='push_back', help='a file of config/scenarios/')
    parser.add_argument('--quick', action='store_true', help='stop right after the last push')
    parser.add_argument('--out', help='plot file (default out/time_scaling_<scenario>.png)')
    args = parser.parse_args(argv)
    out = args.out or os.path.join(ROOT, 'out', f'time_scaling_{args.scenario}.png')
    robot = RobotModel.load('panda')
    scenario = Scenario.load(os.path.join(SCENARIOS, f'{args.scenario}.yaml'), robot)
    detector = DetectorConfig.build(robot.joint_names)
    scaling = TimeScalingConfig()
    last_push = max(force.start + force.duration for force in scenario.forces)
    trace = simulate(robot, scenario, last_push + (0.5 if args.quick else 4.0), detector,
                     scaling)

    t = trace['t']
    print(f'{"t s":>5s} {"f_S":>6s} {"path s":>7s} {"stop":>5s} {"max|τ_ext| N·m":>15s}')
    for k in range(0, len(t), 250):
        print(f'{t[k]:5.2f} {trace["f_S"][k]:+6.2f} {trace["path_time"][k]:7.3f} '
              f'{str(trace["stop"][k]):>5s} {np.abs(trace["tau_ext"][k]).max():15.2f}')
    push_table(trace, scenario)

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
    axes[0].set_title(f'{args.scenario}: {scenario.description}; stop latched', fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f'wrote {out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
