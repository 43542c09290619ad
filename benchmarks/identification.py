"""Identification (seed 001 §2) on the simulated cobot: gravity error and friction recovery.

The sweep plan (`identify plan`) runs on SimulatedCobot with 0.2 N·m torque noise and the
eq. 23 friction of `simulator_config` (the ground truth); `identify` fits the base gravity
parameters and every friction model. Printed:
1. gravity: |G_identified − g_RNEA(URDF)| over 10 000 random poses per joint (seed 001 Fig. 4:
   0.36 / 0.57 / 0.70 N·m mean on joints 2–4; target here < 0.05 N·m mean on every joint);
2. friction: ε per joint and model (seed 001 Table 3), the recovered parameters next to the
   true eq. 23 ones, the largest |f_fit − f_true| over the swept speed range, and the
   relative error at half the slowest swept speed (extrapolation towards standstill).

The full run uses the default plan (`SweepSettings()`: 12 speeds log-spaced 0.01-1 rad/s);
--quick 6 speeds from 0.02 to 0.8 rad/s with short passes.

    .venv/bin/python benchmarks/identification.py [--quick] [--robot URDF_OR_NAME]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from tqdm import tqdm

from contact_estimation.core.chain import friction
from contact_estimation.core.identification.excitation import SweepSettings, plan_sweeps
from contact_estimation.core.identification.identification import gravity_error, identify
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.harness import record_on_simulator, simulator_config

SPATIAL = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'spatial_6r.urdf')


def _progress(iterable, total, desc):
    return tqdm(iterable, total=total, desc=desc, leave=False, mininterval=1.0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true', help='6 speeds, short passes')
    parser.add_argument('--robot', default=SPATIAL, help='URDF path or example-robot-data name')
    parser.add_argument('--noise', type=float, default=0.2, help='torque noise σ, N·m')
    args = parser.parse_args(argv)
    robot = RobotModel.load(args.robot)
    settings = (SweepSettings(speeds=tuple(np.round(np.geomspace(0.02, 0.8, 6), 3)),
                              amplitude=0.5, max_pass_time=4.0) if args.quick
                else SweepSettings())
    trajectory = plan_sweeps(robot, settings)
    config = simulator_config(robot, effort_noise=args.noise)
    print(f'robot {robot.name}: {len(trajectory.passes)} passes, {trajectory.duration:.0f} s '
          f'({trajectory.duration / 60:.1f} min) of sweeps at {len(settings.speeds)} speeds '
          f'{settings.speeds} rad/s, torque noise {args.noise} N·m')
    recording = record_on_simulator(robot, trajectory, config, rate=250.0, progress=_progress)
    result = identify(robot, recording, progress=_progress)
    model = result.model('continuous', {})
    samples = 2000 if args.quick else 10_000
    errors = gravity_error(robot, model, samples)

    print(f'\n1. gravity: |G_identified - g_RNEA| over {samples} random poses, N·m '
          f'({len(result.basis.independent)} base parameters)')
    print('joint        mean      95 %       max')
    for i, joint in enumerate(robot.joint_names):
        e = errors[:, i]
        print(f'{joint:<10} {e.mean():7.4f}  {np.percentile(e, 95):7.4f}  {e.max():8.4f}')

    print('\n2. friction (points = matched positions, speeds = distinct swept speeds)')
    print(result.table())
    truth = np.atleast_2d(config.friction)
    print('\n   recovered parameters (continuous: γ1…γ6 of seed 001 eq. 23, truth below), the '
          'largest |f_fit - f_true| over the swept speeds, and f_fit/f_true - 1 at half the '
          'slowest swept speed')
    for i, joint in enumerate(robot.joint_names):
        swept = result.data.of_joint(i).speed
        speeds = np.geomspace(swept.min(), swept.max(), 200)
        below = 0.5 * swept.min()
        for name in friction.MODELS:
            fit = result.friction[name][i]
            if fit.problem:
                print(f'{joint:<8} {name:<16} not fitted: {fit.problem}')
                continue
            model = friction.get(name)
            gap = np.max(np.abs(model(speeds, fit.parameters)
                                - friction.continuous(speeds, *truth[i])))
            low = model(below, fit.parameters) / friction.continuous(below, *truth[i]) - 1
            params = ' '.join(f'{p:9.4g}' for p in fit.parameters)
            print(f'{joint:<8} {name:<16} max|Δf| {gap:7.4f} N·m  {low:+6.1%} at '
                  f'{below:.3g} rad/s   {params}')
        print(f'{joint:<8} {"truth":<16} {"":38}  ' + ' '.join(f'{p:9.4g}' for p in truth[i]))
    worst = errors.mean(axis=0).max()
    print(f'\nworst mean gravity error {worst:.4f} N·m (target < 0.05)')
    return 0 if worst < 0.05 else 1


if __name__ == '__main__':
    sys.exit(main())
