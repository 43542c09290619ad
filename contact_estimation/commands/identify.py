"""`contact-estimation identify`: gravity and friction identification of seed 001 §2.

    identify plan --robot panda --out sweeps.csv [--scenario sweeps.yaml]
                                   the sweeps to run on the arm (CSV), and as a sim scenario
    identify simulate --robot panda --out rec.csv|BAGDIR  the sweeps on the simulated cobot
    identify fit RECORDING --robot panda --out model.yaml --plots DIR
    identify payload RECORDING --robot panda [--model-file model.yaml] --out payload.yaml
                                   a tool's mass and centre of mass, for residual_node

The sweeps (seed 001 §2.1): each joint goes back and forth at constant speeds, by default
12 speeds log-spaced from 0.01 to 1 rad/s, one pair per speed (about 20-25 min for a 6- or
7-joint arm; `plan` prints the time). Friction models are fitted only to joints swept at
no fewer distinct speeds than they have parameters (continuous, seed 001 eq. 23: 6;
stribeck: 4; coulomb_viscous: 2).

On the simulated cobot (sim_cobot node), the same sweeps run from a scenario file whose
trajectory is

    trajectory:
      type: sweeps         then any SweepSettings field (core/identification/excitation.py): speeds,
      speeds: [...]        amplitude, repetitions, joints (names), seed, acceleration,
      amplitude: 0.8       max_pass_time, …; plan's --speeds, --amplitude, --repetitions
                           and --seed set the keys of the same names

(`plan --scenario FILE` writes one; the format is in core/identification/trajectory.py; the
simulated
friction is the node's `friction` parameter).

`fit` reads joint states (CSV or a ROS 2 bag, sqlite3 or mcap), keeps the constant-speed
parts, fits the base gravity parameters and each friction model per joint, prints seed 001
Table 3 (ε per joint and model), and writes the YAML the residual node loads
(`model_file`) and one PNG per joint (data and fits, seed 001 figs. 3 and 5). It refuses a
recording whose identified gravity is far from the robot description's (another robot).
`payload` reads a short log (a few rest poses and slow motion between them, the flange
turned and tilted) of the arm carrying its tool, fits the tool's mass and centre of mass
(core/identification/payload_identification.py) to what the arm's own model leaves of the torques
(the URDF,
or with --model-file the arm's identified gravity and friction), prints how well the log
determines each value, and writes them as a parameter file (the same payload block for
residual_node and ft_contact_estimator) to pass with the others (`contact-estimation up
--config payload.yaml`) or paste into yours.

Bad input: a message on stderr, exit code 2, no file.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

import numpy as np
import yaml

from contact_estimation.core.chain import friction as friction_models
from contact_estimation.core.chain.residual import StaticTerms
from contact_estimation.core.identification.excitation import SweepSettings, plan_sweeps
from contact_estimation.core.identification.identification import (
    MAX_GRAVITY_DEVIATION,
    IdentificationError,
    identify,
    in_time_order,
    recording_kind,
)
from contact_estimation.core.identification.identified_model import IdentifiedModel
from contact_estimation.core.identification.motion_identification import (
    INERTIA_CHOICES,
    SPEED_BANDS,
    MotionIdentification,
    MotionSettings,
    identify_motion,
)
from contact_estimation.core.identification.payload_identification import (
    PayloadFit,
    identify_payload,
)
from contact_estimation.core.identification.recording import RecordingError, write_csv
from contact_estimation.core.robot.robot_model import RobotModel, RobotModelError
from contact_estimation.core.sim.harness import record_on_simulator, simulator_config
from contact_estimation.suite_bag import JOINT_STATES, STORAGES, read_recording, write_bag

BAD_INPUT = 2


def _progress(iterable, total, desc):
    from tqdm import tqdm
    return tqdm(iterable, total=total, desc=desc, leave=False)


def _sweep_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = SweepSettings()
    parser.add_argument('--robot', default='panda', help='example-robot-data name or URDF path')
    parser.add_argument('--speeds', type=float, nargs='+', default=list(defaults.speeds),
                        help='plateau speeds, rad/s (default: 12 log-spaced, 0.01 to 1); '
                             'friction models need as many distinct speeds as parameters')
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
    settings = _settings(args)
    trajectory = plan_sweeps(robot, settings)
    trajectory.write_csv(args.out, args.rate)
    print(f'wrote {args.out}: {len(trajectory.passes)} constant-speed passes, '
          f'{trajectory.duration:.0f} s ({trajectory.duration / 60:.1f} min) at {args.rate:g} Hz. '
          f'Run it on the arm under position control, record /joint_states (position, '
          f'velocity, effort), then `contact-estimation identify fit RECORDING --robot '
          f'{args.robot}`.')
    if args.scenario:
        write_scenario(args.scenario, robot, settings)
        print(f'wrote {args.scenario}: the same sweeps as a sim_cobot scenario')
    _warn_about_speeds(settings)
    return 0


def write_scenario(path, robot: RobotModel, settings: SweepSettings) -> None:
    """A scenario file (sim_cobot `scenario` parameter) whose trajectory is the sweeps."""
    spec = {'type': 'sweeps', 'speeds': [float(v) for v in settings.speeds],
            'amplitude': settings.amplitude, 'repetitions': settings.repetitions,
            'seed': settings.seed}
    text = yaml.safe_dump({'description': f'identification sweeps of seed 001 for {robot.name} '
                                          f'(contact-estimation identify plan)',
                           'robot': robot.name, 'trajectory': spec}, sort_keys=False)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)


def _warn_about_speeds(settings: SweepSettings) -> None:
    count = len(set(settings.speeds))
    short = [f'{name} ({model.minimum_speeds})' for name, model in friction_models.MODELS.items()
             if model.minimum_speeds > count]
    if short:
        print(f'note: {count} distinct speeds are too few for the friction models '
              f'{", ".join(short)} (parameters); `fit` will not fit them')


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
    _warn_about_speeds(_settings(args))
    return 0


METHODS = ('auto', 'sweeps', 'motion')


def _read_in_time_order(args, robot: RobotModel):
    """The recording sorted by stamp (a real driver sends a few samples late), saying so."""
    recording, reordered = in_time_order(read_recording(args.recording, robot, args.topic))
    if reordered:
        print(f'note: {reordered} samples out of time order or repeated: sorted by stamp')
    return recording


def _fit(args) -> int:
    robot = RobotModel.load(args.robot)
    recording = _read_in_time_order(args, robot)
    method = args.method
    if method == 'auto':
        method, reason = recording_kind(recording, robot)
        print(f'method: {method} ({reason})')
    models = tuple(dict.fromkeys([args.friction_model, *friction_models.MODELS]))
    if method == 'sweeps':
        result = identify(robot, recording, models, args.starts, progress=_progress,
                          max_gravity_deviation=args.max_gravity_deviation)
        how = ('seed 001 eqs. 10-23: constant-speed sweeps, base gravity parameters, '
               f'{args.friction_model} friction by bounded nonlinear least squares')
    else:
        result = identify_motion(robot, recording, args.friction_model, models, args.starts,
                                 MotionSettings(inertia=args.inertia), _progress,
                                 args.max_gravity_deviation)
        how = motion_method(args.friction_model, result.inertia)
    print(result.table())
    model = result.model(args.friction_model,
                         model_metadata(os.path.abspath(args.recording), args.robot, how))
    if args.plots:
        for path in plot_joints(result, args.plots):
            print(f'wrote {path}')
    model.save(args.out)
    print(f'wrote {args.out}')
    return 0


def motion_method(friction_model: str, inertia: str) -> str:
    """How a model from ordinary motion was fitted, as its file says (`method`)."""
    return ('seed 001 eq. 6 on ordinary motion: full inverse-dynamics regressor, base '
            f'gravity parameters and {friction_model} friction jointly by variable '
            f'projection; inertia {inertia}')


def model_metadata(source: str, robot: str, how: str) -> dict:
    """What a model file says of how it was made: when, from which data, for which robot
    description, by which method."""
    return {'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
            'data_source': source, 'robot_description': robot, 'method': how}


def _payload(args) -> int:
    robot = RobotModel.load(args.robot)
    recording = _read_in_time_order(args, robot)
    identified = IdentifiedModel.load(args.model_file, robot) if args.model_file else None
    fit = identify_payload(StaticTerms(robot, identified), recording)
    print(fit.summary())
    write_payload_parameters(args.out, fit, args.recording,
                             args.model_file or f'URDF of {args.robot}, no friction',
                             args.robot)
    print(f'wrote {args.out}: load it with the other parameter files '
          f'(contact-estimation up --config {args.out}), or copy its payload block into yours')
    return 0


def write_payload_parameters(path, fit: PayloadFit, source: str, arm_model: str,
                             robot: str) -> None:
    """The fit as a parameter file for residual_node and ft_contact_estimator (the same
    payload block), with how it was made in comments and the `robot` it was made for (a
    suite with another robot refuses it: manifest.suite_robot)."""
    payload = fit.payload
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')
    comments = [f'Payload identified by contact-estimation identify payload, {date}',
                f'from {os.path.abspath(source)}; arm model: {arm_model}.',
                *fit.summary().splitlines()]
    block = {'robot': robot, 'payload': {'mass': round(payload.mass, 4),
                         'centre_of_mass': [round(x, 5) for x in payload.centre_of_mass],
                         'link': fit.tip_link}}
    parameters = {node: {'ros__parameters': block}
                  for node in ('residual_node', 'ft_contact_estimator')}
    with open(path, 'w', encoding='utf-8') as f:
        f.write(''.join(f'# {line}\n' for line in comments))
        f.write(yaml.safe_dump(parameters, sort_keys=False, default_flow_style=None))


def plot_joints(result, directory) -> list[str]:
    """One PNG per joint. Left: from sweeps, τ_G against its angle (seed 001 Fig. 3); from
    ordinary motion, the time spent in each speed band (how well it excites friction).
    Right: the friction data against speed with every fitted friction model (Fig. 5; speed
    axis linear near zero, logarithmic beyond the slowest speed, so the Stribeck region
    shows)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    paths = []
    for i, joint in enumerate(result.robot.joint_names):
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
        if isinstance(result, MotionIdentification):
            band = result.coverage[i].band_time
            left.bar(SPEED_BANDS[:-1], band, width=np.diff(SPEED_BANDS), align='edge',
                     color='tab:blue', label='time at each speed')
            left.axhline(result.settings.band_time, color='black', lw=0.8,
                         label=f'{result.settings.band_time} s: the band counts')
            left.set_xscale('log')
            left.set(xlabel=f'{joint} |speed| (rad/s)', ylabel='time (s)',
                     title=f'{joint}: speed coverage (gravity ±{result.gravity_error[i]:.3g} N·m)')
            speed, torque = result.friction_data[i]
            label = 'τ − Y π, data'
        else:
            data = result.data.of_joint(i)
            predicted = result.gravity.predicted[result.data.joint == i]
            order = np.argsort(data.q[:, i])
            left.plot(data.q[order, i], data.tau_g[order], 'o', ms=5, mfc='none',
                      color='tab:blue', label='(τ⁺ + τ⁻)/2, data')
            left.plot(data.q[order, i], predicted[order], '+', ms=4, color='black',
                      label='H_G(q) π_G, fitted')
            left.set(xlabel=f'{joint} angle (rad)', ylabel='gravity torque (N·m)',
                     title=f'{joint}: gravity (fit RMS {result.gravity.rms[i]:.3f} N·m)')
            speed, torque = np.r_[data.speed, -data.speed], np.r_[data.tau_f, -data.tau_f]
            label = '(τ⁺ − τ⁻)/2, data'
        right.plot(speed, torque, '.', ms=3, color='gray', label=label)
        slowest = max(float(np.min(np.abs(speed))), 1e-3)
        top = max(float(np.max(np.abs(speed))), slowest) * 1.1
        half = np.geomspace(slowest / 20, top, 400)
        speeds = np.r_[-half[::-1], 0.0, half]
        for name, fits in result.friction.items():
            fit = fits[i]
            if fit.problem:
                right.plot([], [], ' ', label=f'{name}: not fitted ({fit.problem})')
                continue
            right.plot(speeds, friction_models.get(name)(speeds, fit.parameters),
                       label=f'{name} (ε = {fit.epsilon:.3g} N²·m²)')
        right.set_xscale('symlog', linthresh=slowest)
        right.set(xlabel=f'{joint} speed (rad/s; linear within ±{slowest:.3g}, log beyond)',
                  ylabel='friction torque (N·m)', title=f'{joint}: friction')
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
    plan.add_argument('--scenario', help='also write the sweeps as a sim_cobot scenario YAML')
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
    fit.add_argument('--topic', default=JOINT_STATES, help='JointState topic in a bag')
    fit.add_argument('--out', required=True, help='identified model YAML to write')
    fit.add_argument('--plots', help='directory for one PNG per joint')
    fit.add_argument('--friction-model', choices=sorted(friction_models.MODELS),
                     default='continuous',
                     help='the friction model saved (all are fitted where the speeds allow)')
    fit.add_argument('--starts', type=int, default=8, help='starting points per nonlinear fit')
    fit.add_argument('--max-gravity-deviation', type=float, default=MAX_GRAVITY_DEVIATION,
                     help='refuse when the identified gravity differs from the description\'s '
                          'by more than this share of its RMS on some joint (another robot)')
    fit.add_argument('--method', choices=METHODS, default='auto',
                     help='sweeps (seed 001, the best input), motion (any free motion: the '
                          'full inverse-dynamics fit), or auto: sweeps when every joint has '
                          'them')
    fit.add_argument('--inertia', choices=INERTIA_CHOICES, default='auto',
                     help='motion: keep the description\'s inertia (urdf), fit its base '
                          'parameters (fitted), or auto: fitted when the motion excites them '
                          'and disagrees with the description')
    fit.set_defaults(run=_fit)
    payload = commands.add_parser('payload', help="estimate a tool's mass and centre of mass "
                                  'from a short log of the arm carrying it')
    payload.add_argument('recording', help='CSV file or ROS 2 bag (directory, .db3 or .mcap)')
    payload.add_argument('--robot', default='panda', help='example-robot-data name or URDF path')
    payload.add_argument('--topic', default=JOINT_STATES, help='JointState topic in a bag')
    payload.add_argument('--model-file', help='the bare arm\'s identified model (identify fit); '
                                              'default: the URDF, no friction')
    payload.add_argument('--out', required=True, help='residual_node parameter file to write')
    payload.set_defaults(run=_payload)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (IdentificationError, RecordingError, RobotModelError, ValueError, OSError) as err:
        print(f'contact-estimation identify {args.command}: {err}', file=sys.stderr)
        return BAD_INPUT


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
