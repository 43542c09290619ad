"""Identification from ordinary motion against the sweeps and the truth (issue 11, seed 001).

On the simulated cobot (the eq. 23 friction of `simulator_config`, 0.2 N·m torque noise, the
description's own inertia: the ground truth), two models are identified:
- sweeps: the sweep plan (`identify plan`; --quick: 6 speeds, short passes), `identify`;
- motion: 60 s of smooth random motion (`SmoothRandomTrajectory`), `identify_motion`.
Printed per joint and model:
1. gravity: mean |G_identified − g_RNEA(URDF)| over 2000 random poses, N·m;
2. friction: mean |f_identified − f_true| over 0.02-0.8 rad/s (log-spaced), and at 0.01
   rad/s (the Stribeck region), N·m;
3. the residual RMS in free motion (another 30 s of smooth random motion, rnea and momentum
   observer residuals) with each model and with the true gravity and friction, N·m.

    .venv/bin/python benchmarks/identification_motion.py [--quick] [--robot URDF_OR_NAME]
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
from contact_estimation.core.identification.motion_identification import identify_motion
from contact_estimation.core.chain.residual import make_residual
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.harness import record_on_simulator, simulator_config
from contact_estimation.core.identification.trajectory import (
    FirstSeconds,
    SmoothRandomTrajectory,
)

SPATIAL = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'spatial_6r.urdf')
RATE = 250.0  # Hz recorded


def _progress(iterable, total, desc):
    return tqdm(iterable, total=total, desc=desc, leave=False, mininterval=1.0)


def free_motion(robot, config, seconds: float, seed: int):
    return record_on_simulator(robot, FirstSeconds(SmoothRandomTrajectory(robot, seed=seed),
                                                   seconds), config, RATE, _progress)


def residual_rms(robot, recording, kind: str, **terms) -> np.ndarray:
    """RMS per joint of the `kind` residual over a free-motion log (its first 0.5 s, where
    the filters start, left out)."""
    residual = make_residual(kind, robot, **terms)
    external = np.array([residual.update(t, q, v, tau) for t, q, v, tau
                         in zip(recording.t, recording.q, recording.v, recording.effort)])
    return np.sqrt(np.mean(external[recording.t >= recording.t[0] + 0.5] ** 2, axis=0))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true', help='sweeps at 6 speeds, short passes')
    parser.add_argument('--robot', default=SPATIAL, help='URDF path or example-robot-data name')
    parser.add_argument('--seconds', type=float, default=60.0, help='ordinary motion to fit on')
    args = parser.parse_args(argv)
    robot = RobotModel.load(args.robot)
    config = simulator_config(robot, effort_noise=0.2)
    truth = np.atleast_2d(config.friction)
    settings = (SweepSettings(speeds=tuple(np.round(np.geomspace(0.02, 0.8, 6), 3)),
                              amplitude=0.5, max_pass_time=4.0) if args.quick
                else SweepSettings())
    trajectory = plan_sweeps(robot, settings)
    sweeps = identify(robot, record_on_simulator(robot, trajectory, config, RATE, _progress),
                      progress=_progress)
    motion = identify_motion(robot, free_motion(robot, config, args.seconds, seed=1),
                             progress=_progress)
    models = {'sweeps': sweeps.model('continuous', {}), 'motion': motion.model('continuous', {})}
    print(f'robot {robot.name}: sweeps {trajectory.duration:.0f} s at {len(settings.speeds)} '
          f'speeds; ordinary motion {args.seconds:.0f} s; torque noise 0.2 N·m; {RATE:g} Hz')
    print(motion.table())

    speeds = np.geomspace(0.02, 0.8, 50)
    print('\n1-2. gravity and friction error against the truth, N·m '
          '(gravity: mean over 2000 poses; friction: mean over 0.02-0.8 rad/s, and at 0.01)')
    print('joint      ' + ''.join(f'{f"G {name}":>11}' for name in models)
          + ''.join(f'{f"f {name}":>11}{"@0.01":>7}' for name in models))
    errors = {name: gravity_error(robot, model, 2000).mean(axis=0)
              for name, model in models.items()}
    for i, joint in enumerate(robot.joint_names):
        true_f = friction.continuous(speeds, *truth[i])
        cells = ''.join(f'{errors[name][i]:11.4f}' for name in models)
        for model in models.values():
            fitted = model.friction(np.tile(speeds[:, None], (1, robot.n)))[:, i]
            slow = model.friction(np.full(robot.n, 0.01))[i]
            cells += (f'{np.mean(np.abs(fitted - true_f)):11.4f}'
                      f'{abs(slow - friction.continuous(0.01, *truth[i])):7.3f}')
        print(f'{joint:<10} {cells}')

    test_log = free_motion(robot, config, 30.0, seed=7)
    print('\n3. residual RMS in 30 s of other free motion, N·m (torque noise alone: 0.2)')
    sources = {name: {'identified_model': model} for name, model in models.items()}
    sources['truth'] = {'friction_model': 'continuous', 'friction_params': truth}
    for kind in ('rnea', 'momentum_observer'):
        table = {name: residual_rms(robot, test_log, kind, **terms)
                 for name, terms in sources.items()}
        print(f'{kind}: joint  ' + ''.join(f'{name:>9}' for name in table))
        for i, joint in enumerate(robot.joint_names):
            print(f'   {joint:<12}' + ''.join(f'{table[name][i]:9.4f}' for name in table))
    return 0


if __name__ == '__main__':
    sys.exit(main())
