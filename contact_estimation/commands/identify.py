"""`contact-estimation identify`: gravity and friction identification of seed 001 §2.

    identify plan --robot panda --out sweeps.csv          the sweeps to run on the arm (CSV)
    identify simulate --robot panda --out rec.csv|BAGDIR  the sweeps on the simulated cobot
    identify fit RECORDING --robot panda --out model.yaml --plots DIR

`fit` reads joint states (CSV or a ROS 2 bag, sqlite3 or mcap), keeps the constant-speed
parts, fits the base gravity parameters and each friction model per joint, prints seed 001
Table 3 (ε per joint and model), and writes the YAML the residual node loads
(`model_file`) and one PNG per joint. Bad input: a message on stderr, exit code 2, no file.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

import numpy as np

from contact_estimation.core import friction as friction_models
from contact_estimation.core.excitation import (SweepSettings, plan_sweeps, record_on_simulator,
                                                simulator_config)
from contact_estimation.core.identification import IdentificationError, identify
from contact_estimation.core.recording import (STORAGES, RecordingError, read_recording,
                                               write_bag, write_csv)
from contact_estimation.core.robot_model import RobotModelError, RobotModel

BAD_INPUT = 2


def _progress(iterable, total, desc):
    from tqdm import tqdm
    return tqdm(iterable, total=total, desc=desc, leave=False)


def _sweep_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = SweepSettings()
    parser.add_argument('--robot', default='panda', help='example-robot-data name or URDF path')
    parser.add_argument('--speeds', type=float, nargs='+', default=list(defaults.speeds),
                        help='plateau speeds, rad/s')
    parser.add_argument('--amplitude', type=float, default=defaults.amplitude,
                        help='Q: each joint sweeps its centre ± Q, rad')
    parser.add_argument('--repetitions', type=int, default=defaults.repetitions,
                        help='forward/back pairs per speed, each in a new configuration')
    parser.add_argument('--seed', type=int, default=defaults.seed)


def _settings(args) -> SweepSettings:
    return SweepSettings(amplitude=args.amplitude, speeds=tuple(args.speeds),
                         repetitions=args.repetitions, seed=args.seed)


def _plan(args) -> int:
    robot = RobotModel.load(args.robot)
    trajectory = plan_sweeps(robot, _settings(args))
    trajectory.write_csv(args.out, args.rate)
    print(f'wrote {args.out}: {len(trajectory.passes)} constant-speed passes, '
          f'{trajectory.duration:.0f} s at {args.rate:g} Hz. Run it on the arm under position '
          f'control, record /joint_states (position, velocity, effort), then '
          f'`contact-estimation identify fit RECORDING --robot {args.robot}`.')
    return 0


def _simulate(args) -> int:
    robot = RobotModel.load(args.robot)
    trajectory = plan_sweeps(robot, _settings(args))
    config = simulator_config(robot, args.effort_noise, args.seed)
    recording = record_on_simulator(robot, trajectory, config, args.rate, _progress)
    if args.out.lower().endswith('.csv'):
        write_csv(args.out, recording)
    else:
        write_bag(args.out, recording, storage=args.storage)
    print(f'wrote {args.out}: {len(recording.t)} joint states, {trajectory.duration:.0f} s')
    return 0


def _fit(args) -> int:
    robot = RobotModel.load(args.robot)
    recording = read_recording(args.recording, robot, args.topic)
    models = tuple(dict.fromkeys([args.friction_model, *friction_models.MODELS]))
    result = identify(robot, recording, models, args.starts, progress=_progress)
    print(result.table())
    metadata = {'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
                'data_source': os.path.abspath(args.recording),
                'robot_description': args.robot,
                'method': 'seed 001 eqs. 10-23: constant-speed sweeps, base gravity parameters, '
                          f'{args.friction_model} friction by bounded nonlinear least squares'}
    model = result.model(args.friction_model, metadata)
    if args.plots:
        for path in plot_joints(result, args.plots):
            print(f'wrote {path}')
    model.save(args.out)
    print(f'wrote {args.out}')
    return 0


def plot_joints(result, directory) -> list[str]:
    """One PNG per joint: τ_G against its angle (seed 001 Fig. 3) and τ_f against its speed
    with every fitted friction model (Fig. 5)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    paths = []
    for i, joint in enumerate(result.robot.joint_names):
        data = result.data.of_joint(i)
        predicted = result.gravity.predicted[result.data.joint == i]
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        order = np.argsort(data.q[:, i])
        left.plot(data.q[order, i], data.tau_g[order], '.', label='(τ⁺ + τ⁻)/2, data')
        left.plot(data.q[order, i], predicted[order], 'x', label='H_G(q) π_G, fitted')
        left.set(xlabel=f'{joint} angle (rad)', ylabel='gravity torque (N·m)',
                 title=f'{joint}: gravity (RMS {result.gravity.rms[i]:.3f} N·m)')
        right.plot(np.r_[data.speed, -data.speed], np.r_[data.tau_f, -data.tau_f], '.',
                   color='gray', label='(τ⁺ − τ⁻)/2, data')
        top = max(float(np.max(data.speed)), 1e-3) * 1.05
        speeds = np.linspace(-top, top, 801)
        for name, fits in result.friction.items():
            fit = fits[i]
            right.plot(speeds, friction_models.get(name)(speeds, fit.parameters),
                       label=f'{name} (ε = {fit.epsilon:.3g})')
        right.set(xlabel=f'{joint} speed (rad/s)', ylabel='friction torque (N·m)',
                  title=f'{joint}: friction')
        for axes in (left, right):
            axes.grid(True, alpha=0.3)
            axes.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(directory, f'{joint}.png')
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='contact-estimation identify', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest='command', required=True)
    plan = commands.add_parser('plan', help='write the sweep trajectory (CSV) for the arm')
    _sweep_arguments(plan)
    plan.add_argument('--out', required=True, help='trajectory CSV to write')
    plan.add_argument('--rate', type=float, default=1000.0, help='rows per second')
    plan.set_defaults(run=_plan)
    simulate = commands.add_parser('simulate', help='record the sweeps on the simulated cobot')
    _sweep_arguments(simulate)
    simulate.add_argument('--out', required=True,
                          help='recording: a .csv file, else a rosbag2 directory')
    simulate.add_argument('--storage', choices=STORAGES, default='sqlite3', help='bag storage')
    simulate.add_argument('--rate', type=float, default=1000.0, help='recorded samples per s')
    simulate.add_argument('--effort-noise', type=float, default=0.2, help='torque noise σ, N·m')
    simulate.set_defaults(run=_simulate)
    fit = commands.add_parser('fit', help='identify gravity and friction from a recording')
    fit.add_argument('recording', help='CSV file or ROS 2 bag (directory, .db3 or .mcap)')
    fit.add_argument('--robot', default='panda', help='example-robot-data name or URDF path')
    fit.add_argument('--topic', default='/joint_states', help='JointState topic in a bag')
    fit.add_argument('--out', required=True, help='identified model YAML to write')
    fit.add_argument('--plots', help='directory for one PNG per joint')
    fit.add_argument('--friction-model', choices=sorted(friction_models.MODELS),
                     default='continuous', help='the friction model saved (all are fitted)')
    fit.add_argument('--starts', type=int, default=8, help='starting points per nonlinear fit')
    fit.set_defaults(run=_fit)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (IdentificationError, RecordingError, RobotModelError, ValueError, OSError) as err:
        print(f'contact-estimation identify {args.command}: {err}', file=sys.stderr)
        return BAD_INPUT


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
