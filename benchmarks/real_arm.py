"""Issue 11's user on the simulated Panda (ROS-free): a real driver, a tool on the flange,
identification from ordinary motion, the suite configured as the README says; detection delay
and false alarms for each residual model and identification source, against the issue's
simple offline baseline.

The arm: the simulated Panda with the eq. 23 friction of `simulator_config` (seed 001; the
truth the identification should recover), a driver that reports effort from motor current
(seed 001 eqs. 1–2, `MOTOR`: 0.01 A noise and ADC step, 0.07–0.14 N·m at the joint), and, once
identified bare, a 3 kg `TOOL` on the flange (its controller compensates it). Two streams of
the same physics: every 1 kHz step, and what a real driver publishes of it (`DRIVER_RATE`
140 Hz ± 3 ms: steps of 4–10 ms, 1 % of the samples late; core/sim/driver.py). Both go through
the joint-state listener's conditioner (late samples dropped and counted), and every
residual runs on the stream itself (at ~140 Hz on the ~140 Hz stream).

The user's steps, with the shipped defaults everywhere (README "Real arm", "Identification"):
1. `identify fit` on the bare arm, from either source, both recorded through the driver:
   sweeps (the default plan, 12 speeds, 24 min; --quick: 6 speeds, short passes) or 60 s of
   ordinary (smooth random) free motion → gravity and continuous friction (the model file);
2. `identify payload` with that model on 30 s of slow motion carrying the tool → the payload
   declared to the residual;
3. the residual (fast, rnea, momentum_observer) on 60 s of free motion → `calibrate`
   (its margin, half held out, weighted persistence of 25 ms) → the detector's thresholds;
   `defaults` rows: the detector's shipped 4 N·m instead.
Measured (benchmarks/detection.py's contacts and replay): point forces on random links scaled
so that their largest joint torque at onset is 4, 8 or 15 N·m (0.4 s, 10 ms ramp, 1 s apart,
on a moving arm; links 3-6, none taking a joint past 80 % of its effort limit with the arm's
gravity, which the arm could not hold), delay from onset to the stamp of the sample that raised
the stop, p50 / p95;
false alarms in 600 s of other free motion (--quick: 30 s).

Baseline (the issue's "simple offline baseline"): τ_ext = RNEA of the URDF with the declared
tool at (q, q̇, q̈) + f(q̇) − τ, f Coulomb–viscous fitted per joint by least squares on the
calibration log, q̈ the centred (zero-phase) derivative of q̇ over `BASELINE_SMOOTHING`, so a
sample's verdict is known only half that later (counted in its delay); thresholds k·σ per joint
(σ of that residual on the calibration log,
k = `BASELINE_K`); a collision when some joint is over for n = 3 consecutive samples.

    nice -n 10 .venv/bin/python benchmarks/real_arm.py [--quick]

`--free-runs` (issue 28): false stops per hour over long free runs of ur5 and the Panda at
`FREE_RATE` (100 Hz ± 3 ms, 1 % late), effort as motor current through the listener's
transmission (`effort_is_current`), the tool, the model from 60 s of ordinary motion
(`identify_motion`), `calibrate` on `--calibration-seconds` of free motion, then `--minutes`
(30) of held-out free motion up to `WORK_SPEED` of the velocity limits, and contacts at the
flange of 8 and 15 N·m; each false stop with the joint over ψ, its q̇, q̈ and the time since
its q̇ changed sign.

    nice -n 10 .venv/bin/python benchmarks/real_arm.py --free-runs [--minutes 30] [--quick]

`--noise-sources` (issue 28's diagnosis): the residual of the true model (no model error) on
60 s of that motion, with each of the driver's measurement noises off in turn.

    nice -n 10 .venv/bin/python benchmarks/real_arm.py --noise-sources
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from dataclasses import dataclass

import numpy as np
from detection import LEVELS, SPACING, alarms, contacts, delays, motion, replay
from scipy.ndimage import uniform_filter1d
from tqdm import tqdm

from contact_estimation.core.chain.detector import DetectorConfig, thresholds
from contact_estimation.core.chain.joint_state_conditioning import JointStateConditioner
from contact_estimation.core.chain.residual import MODELS, StaticTerms, make_residual
from contact_estimation.core.chain.threshold_calibration import (
    MARGIN,
    accelerations,
    calibrate,
    caps_from_effort,
    rate_upper_bound,
)
from contact_estimation.core.identification.excitation import SweepSettings, plan_sweeps
from contact_estimation.core.identification.identification import (
    gravity_error,
    identify,
    in_time_order,
)
from contact_estimation.core.identification.motion_identification import identify_motion
from contact_estimation.core.identification.payload_identification import identify_payload
from contact_estimation.core.identification.trajectory import FirstSeconds, make_trajectory
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.driver import DriverStream, DriverTiming, MotorCurrent
from contact_estimation.core.sim.harness import closed_loop, record_on_simulator, simulator_config
from contact_estimation.core.sim.scenario import Scenario

TOOL = Payload(3.0, (0.01, 0.03, 0.06))  # kg, m in the tip link: the Panda's rated payload
DRIVER_RATE = 140.0                       # Hz: with ±3 ms, steps of 4–10 ms
DRIVER_TIMING = DriverTiming(period_jitter=0.003, reorder_probability=0.01)
EPOCH = 1000.0          # s added to the sim's stamps for the listener (a driver's clock)
IDENTIFICATION_S = 60.0  # s of ordinary motion to identify from (the issue's)
PAYLOAD_S = 30.0         # s of slow motion carrying the tool
CONTACT_SHARE = 0.8       # of the effort limits at most for gravity and push: the arm holds
# Not the hand's link7: the sim's computed torque holds joint 7 with M₇₇ω_n² ≈ 6 N·m/rad, and
# a 2 N·m push spins it past its velocity limit (the listener then drops the samples).
CONTACT_LINKS = ('panda_link3', 'panda_link4', 'panda_link5', 'panda_link6')
BASELINE_K, BASELINE_SAMPLES = 5.0, 3
BASELINE_SMOOTHING = 0.02  # s, centred moving average of the baseline's q̈
SOURCES = ('sweeps', 'motion')
# Issue 28's long free runs (--free-runs).
FREE_RATE = 100.0          # Hz, with DRIVER_TIMING: steps of 7–13 ms
WORK_SPEED = 0.5           # peak speed of the free-run motion / velocity limit
CALIBRATION_S = 60.0       # s of free motion `calibrate` gets (half held out): --live's default
FLANGE_LEVELS = (8.0, 15.0)  # N·m: the largest joint torque of a contact at the flange


@dataclass(frozen=True)
class Arm:
    """A simulated real arm: the robot, its driver's motor current (seed 001 eqs. 1–2) and
    publishing rate."""

    robot: RobotModel
    motor: MotorCurrent
    rate: float  # Hz, with DRIVER_TIMING's jitter and late samples


def make_arm(name: str, rate: float) -> Arm:
    """The Panda (k_m 0.14 / 0.07 N·m/A, G_m 100) or the UR5 (0.125 / 0.092 N·m/A, G_m 101)
    with its driver at `rate` Hz."""
    motors = {'panda': MotorCurrent((0.14,) * 4 + (0.07,) * 3, (100.0,)),
              'ur5': MotorCurrent((0.125,) * 3 + (0.092,) * 3, (101.0,))}
    if name not in motors:
        raise ValueError(f'no driver data for robot {name!r}: one of {sorted(motors)}')
    return Arm(RobotModel.load(name), motors[name], rate)


def _progress(iterable, total, desc):
    return tqdm(iterable, total=total, desc=desc, leave=False, mininterval=2.0)


def arm_config(arm: Arm, seed: int, payload: Payload = Payload()):
    """The simulated arm with the driver's motor-current effort and `payload`."""
    return dataclasses.replace(simulator_config(arm.robot, seed=seed), motor_current=arm.motor,
                               payload=payload)


def driver_log(arm: Arm, spec: dict, seconds: float, seed: int, payload: Payload, desc: str):
    """`seconds` of the trajectory `spec` as the arm's driver delivers it (a JointRecording
    in the order its samples left)."""
    def progress(iterable, total, **_):
        return _progress(iterable, total, desc)
    return record_on_simulator(arm.robot, FirstSeconds(make_trajectory(arm.robot, spec), seconds),
                               arm_config(arm, seed, payload), arm.rate, progress, DRIVER_TIMING)


# ------------------------------------------------------------------ the user's setup
def motion_model(arm: Arm):
    """Step 1 from ordinary motion: `identify fit` on IDENTIFICATION_S of the bare arm's
    ordinary motion through the driver; (the model, the recording)."""
    recording = in_time_order(driver_log(arm, motion(1), IDENTIFICATION_S, 3, Payload(),
                                         'ordinary motion'))[0]
    fit = identify_motion(arm.robot, recording, progress=_progress)
    return fit.model('continuous', {}), recording


def identified_models(arm: Arm, quick: bool) -> dict:
    """Step 1: the bare arm's model (`identify fit`) from each source, recorded through the
    driver and sorted by stamp as `fit` does."""
    robot = arm.robot
    settings = (SweepSettings(speeds=tuple(np.round(np.geomspace(0.02, 0.8, 6), 3)),
                              amplitude=0.5, max_pass_time=4.0) if quick else SweepSettings())
    sweeps = plan_sweeps(robot, settings)
    swept = in_time_order(record_on_simulator(robot, sweeps, arm_config(arm, 2), arm.rate,
                                              _progress, DRIVER_TIMING))[0]
    models = {'sweeps': identify(robot, swept, progress=_progress).model('continuous', {})}
    models['motion'], ordinary = motion_model(arm)
    print(f'1. identified the bare arm from sweeps ({sweeps.duration:.0f} s, '
          f'{len(settings.speeds)} speeds) and from {IDENTIFICATION_S:g} s of ordinary motion '
          f'({len(ordinary.t)} samples); gravity error against the URDF, mean '
          'over 2000 poses, N·m per joint:')
    for name, model in models.items():
        error = gravity_error(robot, model, 2000).mean(axis=0)
        print(f'   {name:7s} ' + ' '.join(f'{e:.3f}' for e in error))
    return models


def identified_payloads(arm: Arm, models: dict) -> dict:
    """Step 2: `identify payload` with each bare-arm model on a log of slow motion carrying
    the tool, through the driver."""
    slow = {'type': 'smooth_random', 'seed': 21, 'speed_scale': 0.1, 'amplitude': 0.8}
    log = in_time_order(driver_log(arm, slow, PAYLOAD_S, 4, TOOL, 'slow motion with the tool'))[0]
    payloads = {}
    print(f'2. tool {TOOL.mass:g} kg at {TOOL.centre_of_mass} m identified from '
          f'{PAYLOAD_S:g} s of slow motion:')
    for name, model in models.items():
        fit = identify_payload(StaticTerms(arm.robot, model), log)
        payloads[name] = fit.payload
        print(f'   {name:7s} {fit.payload.mass:.3f} ± {fit.mass_error:.3f} kg at '
              f'{np.round(fit.payload.centre_of_mass, 4)} m')
    return payloads


# ------------------------------------------------------------------ streams
def record(arm: Arm, spec: dict, forces, seconds: float, seed: int, bar) -> dict:
    """Every physics step of `seconds` of the tool-carrying arm with the scripted `forces`:
    measured q, q̇, τ and the true external torque."""
    sim = SimulatedCobot(arm.robot, make_trajectory(arm.robot, spec), Scenario(forces=forces),
                         arm_config(arm, seed, TOOL))
    trace = closed_loop(sim, None, seconds=seconds, progress=bar.update)
    return {key: trace[key] for key in ('t', 'q', 'v', 'effort', 'tau_true')}


def driver_stream(trace: dict, rate: float, seed: int) -> dict:
    """The trace as the real driver at `rate` Hz delivers it: the steps it samples, in the
    order they leave."""
    steps = DriverStream(1.0 / rate, SimConfig().timestep, DRIVER_TIMING,
                         seed).schedule(len(trace['t']))
    return {key: values[steps] for key, values in trace.items()}


def listened(arm: Arm, stream: dict) -> tuple[dict, Counter]:
    """The stream after the joint-state listener's conditioner (its defaults, and the
    transmission of a driver reporting motor current, `effort_is_current`, seed 001 eqs.
    1–2: the effort leaves as i_m = τ / (G_m k_m)), and the problems it found (late samples:
    dropped), by kind."""
    robot = arm.robot
    conditioner = JointStateConditioner.for_robot(
        robot, effort_is_current=True, torque_constants=arm.motor.torque_constants,
        gear_ratios=arm.motor.gear_ratios)
    currents = stream['effort'] / arm.motor.torque_per_ampere(robot.n)
    names, kept, problems, effort = robot.joint_names, [], Counter(), []
    for k, (t, q, v, i_m) in enumerate(zip(stream['t'], stream['q'], stream['v'], currents)):
        result = conditioner.condition(EPOCH + t, names, q, v, i_m, now=EPOCH + t)
        problems.update(code for code, _ in result.problems)
        if result.sample is not None:
            kept.append(k)
            effort.append(result.sample.tau)
    out = {key: values[kept] for key, values in stream.items()}
    out['effort'] = np.array(effort).reshape(len(kept), robot.n)
    out['a'] = accelerations(out['t'], out['q'])  # the detector's q̈, once per stream
    return out, problems


def residual_of(kind: str, robot, model, payload, stream: dict, desc: str) -> np.ndarray:
    residual = make_residual(kind, robot, model, payload=payload)
    samples = zip(stream['t'], stream['q'], stream['v'], stream['effort'])
    return np.array([residual.update(*sample) for sample in
                     _progress(samples, len(stream['t']), desc)])


# ------------------------------------------------------------------ the suite
def suite_rows(arm: Arm, rate: str, streams: dict, models: dict, payloads: dict,
               forces) -> list[tuple]:
    """(rate, model, source, thresholds, ψ_0 range, delays, false alarms) of the suite."""
    robot, rows = arm.robot, []
    for source in SOURCES:
        for kind in MODELS:
            desc = f'{rate} {kind} ({source})'
            traces = {name: {**stream, 'tau_ext': residual_of(
                kind, robot, models[source], payloads[source], stream, f'{desc}: {name}')}
                for name, stream in streams.items()}
            cal = traces['calibration']
            configs = {}
            try:
                fitted = calibrate(cal['t'], cal['q'], cal['v'], cal['tau_ext'],
                                   robot.joint_names, margin=MARGIN)
                configs['calibrated'] = DetectorConfig.build(
                    robot.joint_names, thresholds_position=fitted.base,
                    speed_gain=fitted.speed_gain, acceleration_gain=fitted.acceleration_gain,
                    threshold_max=fitted.threshold_max, hold_time=0.1)
            except ValueError as err:
                print(f'{desc}: calibrate refused: {err}')
            if kind == 'momentum_observer':
                configs['defaults'] = DetectorConfig.build(robot.joint_names, hold_time=0.1)
            for name, config in configs.items():
                free_stop = replay(config, traces['free'])[0]
                found = delays(replay(config, traces['contacts']), traces['contacts'], forces)
                rows.append((rate, kind, source, name, config.base_thresholds, found,
                             alarms(free_stop)))
    return rows


# ------------------------------------------------------------------ the baseline
def baseline_residual(tooled, stream: dict, friction: np.ndarray | None = None):
    """RNEA(q, q̇, q̈) of the URDF with the tool − τ, q̈ centred; with `friction` (n × 2:
    Coulomb, viscous) its f(q̇) added. Returns the residual, the Coulomb–viscous columns and
    how many samples later each residual sample is known (its q̈ needs them)."""
    t, v = stream['t'], stream['v']
    window = max(1, int(round(BASELINE_SMOOTHING / np.median(np.diff(t)))))
    a = uniform_filter1d(np.gradient(v, t, axis=0), window, axis=0, mode='nearest')
    rigid = np.array([tooled.rnea(q, vk, ak) for q, vk, ak in zip(stream['q'], v, a)])
    columns = np.stack([np.sign(v), v], axis=-1)  # samples × n × 2
    residual = rigid - stream['effort']
    if friction is not None:
        residual = residual + np.einsum('snk,nk->sn', columns, friction)
    return residual, columns, window // 2 + 1


def baseline_stops(residual: np.ndarray, thresholds: np.ndarray, later: int) -> np.ndarray:
    """Per sample, whether the baseline has a collision by then: n consecutive samples with
    some joint over its threshold, known `later` samples after the n-th."""
    over = (np.abs(residual) > thresholds).any(axis=1)
    run = np.zeros(over.size, dtype=int)
    for k in np.flatnonzero(over):
        run[k] = run[k - 1] + 1 if k else 1
    known = np.zeros(over.size, dtype=bool)
    known[later:] = (run >= BASELINE_SAMPLES)[:over.size - later]
    return known


def baseline_row(robot, rate: str, streams: dict, forces) -> tuple:
    tooled = TOOL.carried_by(robot)
    y, columns, _ = baseline_residual(tooled, streams['calibration'])
    friction = np.array([np.linalg.lstsq(columns[:, j], -y[:, j], rcond=None)[0]
                         for j in range(robot.n)])
    sigma = np.std(baseline_residual(tooled, streams['calibration'], friction)[0], axis=0)
    thresholds = BASELINE_K * sigma
    stops = {}
    for name in ('free', 'contacts'):
        residual, _, later = baseline_residual(tooled, streams[name], friction)
        stops[name] = baseline_stops(residual, thresholds, later)
    found = delays((stops['contacts'], [()] * stops['contacts'].size, 0),
                   streams['contacts'], forces)
    return (rate, 'baseline (offline)', 'URDF', f'{BASELINE_K:g}σ, n = {BASELINE_SAMPLES}',
            thresholds, found, alarms(stops['free']))


# ------------------------------------------------------------------ output
def cells(found, magnitudes, levels=LEVELS) -> list[str]:
    """Per level: contacts detected of those at that level, delay p50 / p95 ms."""
    out = []
    for level in levels:
        hits = [d for (d, _, _), m in zip(found, magnitudes) if m == level]
        seen = np.array([d for d in hits if np.isfinite(d)]) * 1e3
        p50, p95 = np.percentile(seen, [50, 95]) if seen.size else (np.nan, np.nan)
        out.append(f'{seen.size}/{len(hits)}, {p50:.0f} / {p95:.0f}')
    return out


def issue_11(quick: bool) -> None:
    """The Panda at 140 Hz: every residual model and identification source against the
    baseline (the table of docs/performance.md, "Real arm: issue 11's user")."""
    cal_s, free_s, per_level = (20.0, 30.0, 6) if quick else (60.0, 600.0, 25)
    arm = make_arm('panda', DRIVER_RATE)
    robot = arm.robot
    models = identified_models(arm, quick)
    payloads = identified_payloads(arm, models)

    rng = np.random.default_rng(0)
    magnitudes = np.repeat(LEVELS, per_level)
    rng.shuffle(magnitudes)
    contact_s = 1.0 + len(magnitudes) * SPACING
    spec = motion(13)
    forces = contacts(TOOL.carried_by(robot), make_trajectory(robot, spec), magnitudes, 1.0,
                      rng, CONTACT_LINKS, CONTACT_SHARE)
    with tqdm(total=int(cal_s + free_s + contact_s) * 1000, unit='step', desc='simulating',
              mininterval=2.0) as bar:
        traces = {'calibration': record(arm, motion(11), [], cal_s, 11, bar),
                  'free': record(arm, motion(12), [], free_s, 12, bar),
                  'contacts': record(arm, spec, forces, contact_s, 13, bar)}
    rows, found_by_listener = [], {}
    for rate, make in (('1 kHz', lambda trace, seed: trace),
                       ('140 Hz ± 3 ms', lambda trace, seed: driver_stream(trace, arm.rate,
                                                                            seed))):
        streams = {}
        for seed, (name, trace) in enumerate(traces.items()):
            streams[name], found_by_listener[rate, name] = listened(arm, make(trace, seed))
        rows += suite_rows(arm, rate, streams, models, payloads, forces)
        rows.append(baseline_row(robot, rate, streams, forces))

    print(f'\n3. detection: tool {TOOL.mass:g} kg declared as identified; effort from motor '
          f'current; calibrate on {cal_s:g} s of free motion (margin {MARGIN:g}, '
          f'half held out), weighted persistence 25 ms. Contacts detected of {per_level} per '
          f'level, delay p50 / p95 ms; false alarms in {free_s:g} s of other free motion. '
          f'What the listener found: '
          + '; '.join(f'{rate} {name}: {dict(found)}'
                      for (rate, name), found in found_by_listener.items() if found))
    header = ' | '.join(f'{level:g} N·m' for level in LEVELS)
    print(f'| rate | residual | identified from | thresholds | ψ N·m | {header} | '
          'false alarms |')
    print('|---|---|---|---|---|' + '---|' * len(LEVELS) + '---|')
    for rate, kind, source, name, psi, found, false_alarms in rows:
        print(f'| {rate} | {kind} | {source} | {name} | {psi.min():.2f}–{psi.max():.2f} | '
              f'{" | ".join(cells(found, magnitudes))} | {false_alarms} |')


# ------------------------------------------------------------------ long free runs (issue 28)
def work(seed: int) -> dict:
    """The free-run motion: smooth random, up to WORK_SPEED of the velocity limits."""
    return {'type': 'smooth_random', 'seed': seed, 'speed_scale': WORK_SPEED, 'amplitude': 0.5}


def observed(arm: Arm, model, payload: Payload, stream: dict, desc: str) -> tuple[dict, Counter]:
    """The driver's stream after the listener, with the default residual (momentum observer)
    of the identified model and payload as 'tau_ext'."""
    heard, problems = listened(arm, stream)
    heard['tau_ext'] = residual_of('momentum_observer', arm.robot, model, payload, heard, desc)
    return heard, problems


def of_log(log) -> dict:
    return {'t': log.t, 'q': log.q, 'v': log.v, 'effort': log.effort}


def false_stop_rows(arm: Arm, config: DetectorConfig, trace: dict, stop: np.ndarray,
                    joints: list) -> list[tuple]:
    """Per false stop: its time, and for each joint over ψ its |τ_ext|/ψ, q̇, q̈ and the time
    since its q̇ last changed sign (a reversal through the Stribeck region)."""
    t, v, a = trace['t'], trace['v'], np.nan_to_num(trace['a'])
    psi = thresholds(config.base_thresholds, config.speed_gain, config.acceleration_gain,
                     config.threshold_max, v, a)
    rows = []
    for k in np.flatnonzero(np.diff(stop.astype(int), prepend=0) == 1):
        for j in joints[k]:
            flips = np.flatnonzero(np.diff(np.sign(v[:k + 1, j])) != 0)
            since = t[k] - t[flips[-1] + 1] if flips.size else np.inf
            rows.append((t[k] - t[0], arm.robot.joint_names[j],
                         abs(trace['tau_ext'][k, j]) / psi[k, j], v[k, j], a[k, j], since))
    return rows


def residual_parts(arm: Arm, free: dict, psi: np.ndarray) -> list[tuple]:
    """Per joint, what the free run's residual is made of (issue 28's diagnosis): RMS of
    τ_ext; RMS of the residual of the true model (the sim's URDF, tool and friction: the
    measurements' noise alone); RMS of their difference (the identified model's own error);
    the peak |τ_ext|/ψ of each; and how |τ_ext| correlates with |q̇| and |q̈|."""
    robot = arm.robot
    truth = make_residual('momentum_observer', robot, None, 'continuous',
                          arm_config(arm, 0).friction, payload=TOOL)
    noise = np.array([truth.update(*sample) for sample in _progress(
        zip(free['t'], free['q'], free['v'], free['effort']), len(free['t']), 'true model')])
    tau, error = free['tau_ext'], free['tau_ext'] - noise
    size = np.abs(tau)
    return [(name, np.sqrt(np.mean(tau[:, j] ** 2)), np.sqrt(np.mean(noise[:, j] ** 2)),
             np.sqrt(np.mean(error[:, j] ** 2)), (size[:, j] / psi[:, j]).max(),
             (np.abs(noise[:, j]) / psi[:, j]).max(),
             np.corrcoef(size[:, j], np.abs(free['v'][:, j]))[0, 1],
             np.corrcoef(size[:, j], np.abs(np.nan_to_num(free['a'][:, j])))[0, 1])
            for j, name in enumerate(robot.joint_names)]


def free_run(name: str, minutes: float, calibration_s: float, per_level: int) -> dict:
    """identify → payload → calibrate → `minutes` of held-out free motion → contacts at the
    flange, on `name` through a FREE_RATE Hz driver; the figures of one row."""
    arm = make_arm(name, FREE_RATE)
    robot = arm.robot
    print(f'\n## {name}: {robot.n} joints, driver {FREE_RATE:g} Hz ± '
          f'{DRIVER_TIMING.period_jitter * 1e3:g} ms, motor current')
    model, _ = motion_model(arm)
    payload = identified_payloads(arm, {'motion': model})['motion']
    problems = {}
    cal, problems['calibration'] = observed(arm, model, payload, of_log(driver_log(
        arm, work(11), calibration_s, 11, TOOL, 'calibration motion')), 'calibration')
    fitted = calibrate(cal['t'], cal['q'], cal['v'], cal['tau_ext'], robot.joint_names,
                       margin=MARGIN,
                       threshold_max=caps_from_effort(robot.effort_limits),
                       source=f'{calibration_s:g} s of free motion')
    print(fitted.table())
    config = DetectorConfig.build(
        robot.joint_names, thresholds_position=fitted.base, speed_gain=fitted.speed_gain,
        acceleration_gain=fitted.acceleration_gain, threshold_max=fitted.threshold_max,
        hold_time=0.1)
    free, problems['free run'] = observed(arm, model, payload, of_log(driver_log(
        arm, work(12), 60.0 * minutes, 12, TOOL, f'{minutes:g} min of free motion')), 'free run')
    stop, joints, _ = replay(config, free)
    hours = (free['t'][-1] - free['t'][0]) / 3600.0
    psi = thresholds(config.base_thresholds, config.speed_gain, config.acceleration_gain,
                     config.threshold_max, free['v'], np.nan_to_num(free['a']))
    ratio = np.abs(free['tau_ext']) / psi
    peak = np.unravel_index(np.argmax(ratio), ratio.shape)

    rng = np.random.default_rng(0)
    magnitudes = np.repeat(FLANGE_LEVELS, per_level)
    rng.shuffle(magnitudes)
    spec = work(13)
    forces = contacts(TOOL.carried_by(robot), make_trajectory(robot, spec), magnitudes, 1.0,
                      rng, (robot.tip_link,), CONTACT_SHARE)
    seconds = 1.0 + len(magnitudes) * SPACING
    with tqdm(total=int(seconds * 1000), unit='step', desc='contacts', leave=False,
              mininterval=2.0) as bar:
        trace = driver_stream(record(arm, spec, forces, seconds, 13, bar), arm.rate, 13)
    pushed, problems['contacts'] = observed(arm, model, payload, trace, 'contacts')
    hits = delays(replay(config, pushed), pushed, forces)
    return {'robot': name, 'joints': robot.n, 'calibration': fitted, 'hours': hours,
            'false_stops': alarms(stop),
            'peak': (ratio[peak], robot.joint_names[peak[1]]),
            'causes': false_stop_rows(arm, config, free, stop, joints),
            'parts': residual_parts(arm, free, psi),
            'contacts': hits, 'magnitudes': magnitudes,
            'problems': problems}


def free_runs(robots, minutes: float, calibration_s: float, quick: bool) -> None:
    """The issue 28 tables: false stops per hour in long free runs, and contacts at the
    flange."""
    results = [free_run(name, minutes, calibration_s, 4 if quick else 25) for name in robots]
    print(f'\nFalse stops in held-out free motion (up to {WORK_SPEED:g} × the velocity '
          f'limits, {FREE_RATE:g} Hz ± {DRIVER_TIMING.period_jitter * 1e3:g} ms, '
          f'{DRIVER_TIMING.reorder_probability:.0%} late, motor current, {TOOL.mass:g} kg '
          f'tool; model from {IDENTIFICATION_S:g} s of ordinary motion, thresholds calibrated '
          f'on {calibration_s:g} s of free motion, margin {MARGIN:g}); contacts at '
          'the flange: detected, delay p50 / p95 ms from onset:')
    header = ' | '.join(f'{level:g} N·m' for level in FLANGE_LEVELS)
    print(f'| robot | ψ_0 N·m | calibrate promises (per hour, 95 %) | free motion, h | '
          f'peak |τ_ext|/ψ | false stops | per hour | {header} |')
    print('|---|---|---|---|---|---|---|' + '---|' * len(FLANGE_LEVELS))
    for r in results:
        c = r['calibration']
        print(f'| {r["robot"]} | {c.base.min():.2f}–{c.base.max():.2f} | '
              f'≤ {c.false_alarm_bound_per_hour:.3g} ({c.false_alarms} in '
              f'{c.heldout_duration:.0f} s) | {r["hours"]:.2f} | '
              f'{r["peak"][0]:.2f} ({r["peak"][1]}) | {r["false_stops"]} | '
              f'{r["false_stops"] / r["hours"]:.2g} (≤ '
              f'{rate_upper_bound(r["false_stops"], r["hours"]):.2g}) | '
              f'{" | ".join(cells(r["contacts"], r["magnitudes"], FLANGE_LEVELS))} |')
    print('\nWhat the free-run residual is made of, per joint: RMS of τ_ext; of the residual '
          "of the true model (the sim's URDF, tool and friction: the measurements' noise "
          "alone); of their difference (the identified model's own error), N·m; peak "
          '|τ_ext|/ψ and the true model\'s peak/ψ; correlation of |τ_ext| with |q̇| and |q̈|')
    print('| robot | joint | RMS τ_ext | RMS, true model | RMS model error | peak/ψ | '
          'true model peak/ψ | corr. \\|q̇\\| | corr. \\|q̈\\| |')
    print('|---|---|---|---|---|---|---|---|---|')
    for r in results:
        for joint, rms, noise, error, peak, noise_peak, speed, acceleration in r['parts']:
            print(f'| {r["robot"]} | {joint} | {rms:.3f} | {noise:.3f} | {error:.3f} | '
                  f'{peak:.2f} | {noise_peak:.2f} | {speed:+.2f} | {acceleration:+.2f} |')
    causes = [(r['robot'], *row) for r in results for row in r['causes']]
    if causes:
        print('\nThe false stops (first 20): the joint over ψ, |τ_ext|/ψ, q̇ rad/s, q̈ rad/s², '
              'time since its q̇ changed sign, ms')
        print('| robot | t s | joint | |τ_ext|/ψ | q̇ | q̈ | since reversal ms |')
        print('|---|---|---|---|---|---|---|')
        for robot, t, joint, ratio, v, a, since in causes[:20]:
            print(f'| {robot} | {t:.2f} | {joint} | {ratio:.2f} | {v:+.3f} | {a:+.2f} | '
                  f'{since * 1e3:.0f} |')
    print('What the listener found: ' + '; '.join(
        f'{r["robot"]} {stream}: {dict(found)}' for r in results
        for stream, found in r['problems'].items()))


def noise_sources(robots, seconds: float = CALIBRATION_S) -> None:
    """Issue 28's diagnosis: the true model's residual (no model error) on `seconds` of the
    free-run motion, with each of the driver's measurement noises switched off in turn: what
    is left of its RMS and peak says which noise makes it."""
    print(f'\nThe residual of the true model on {seconds:g} s of the free-run motion, with '
          'each measurement noise off in turn: RMS / peak per joint, N·m')
    print('| robot | measured as | RMS | peak |\n|---|---|---|---|')
    for name in robots:
        arm = make_arm(name, FREE_RATE)
        quiet = dataclasses.replace(arm.motor, noise=0.0, resolution=0.0)
        for label, changes, motor in (
                ('benchmarked', {}, arm.motor),
                ('no velocity noise (1e-3 rad/s)', {'velocity_noise': 0.0}, arm.motor),
                ('no current noise, no ADC step', {}, quiet),
                ('no position noise (1e-5 rad)', {'position_noise': 0.0}, arm.motor)):
            changed = dataclasses.replace(arm, motor=motor)
            config = dataclasses.replace(arm_config(changed, 11, TOOL), **changes)
            log = record_on_simulator(
                arm.robot, FirstSeconds(make_trajectory(arm.robot, work(11)), seconds), config,
                arm.rate, lambda iterable, total, **_: _progress(iterable, total, label),
                DRIVER_TIMING)
            heard, _ = listened(changed, of_log(log))
            truth = make_residual('momentum_observer', arm.robot, None, 'continuous',
                                  config.friction, payload=TOOL)
            r = np.array([truth.update(*sample) for sample in
                          zip(heard['t'], heard['q'], heard['v'], heard['effort'])])
            print(f'| {name} | {label} | '
                  + ' '.join(f'{x:.2f}' for x in np.sqrt(np.mean(r ** 2, axis=0))) + ' | '
                  + ' '.join(f'{x:.2f}' for x in np.abs(r).max(axis=0)) + ' |')


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='CI scale: issue 11: short sweeps, 20 s calibration, 30 s of free '
                             'motion, 6 contacts per level; --free-runs: 4 contacts per level '
                             'and --minutes 1 by default')
    parser.add_argument('--free-runs', action='store_true',
                        help="issue 28: false stops per hour in long free runs at 100 Hz")
    parser.add_argument('--noise-sources', action='store_true',
                        help="issue 28's diagnosis: the true model's residual with each "
                             'measurement noise off in turn')
    parser.add_argument('--robots', nargs='+', default=['ur5', 'panda'],
                        help='with --free-runs or --noise-sources: the arms (ur5, panda)')
    parser.add_argument('--minutes', type=float,
                        help='with --free-runs: simulated minutes of held-out free motion per '
                             'arm (default 30; 1 with --quick)')
    parser.add_argument('--calibration-seconds', type=float, default=CALIBRATION_S,
                        help='with --free-runs: s of free motion recorded for `calibrate`')
    args = parser.parse_args(argv)
    if args.noise_sources:
        noise_sources(args.robots)
    elif args.free_runs:
        minutes = args.minutes or (1.0 if args.quick else 30.0)
        if not minutes > 0:
            parser.error('--minutes must be > 0')
        free_runs(args.robots, minutes, args.calibration_seconds, args.quick)
    else:
        issue_11(args.quick)
    return 0


if __name__ == '__main__':
    sys.exit(main())
