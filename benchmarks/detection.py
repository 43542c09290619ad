"""Collision detection on the simulated cobot (ROS-free): delay, smallest contact, false alarms,
at 1 kHz and at 100 Hz, for each persistence rule of eq. 7.

SimulatedCobot (panda, the sim's default sensor noise) → momentum observer (URDF model, the
sim's friction, at 1 kHz) → CollisionDetector (seed 001 eq. 7). Three runs:
1. calibration: free motion → `calibrate` proposes ψ = ψ_0 + k_v|q̇| + k_a|q̈| (its margin),
   fitted on the first half and checked on the held-out second half (its promise);
2. false alarms: another free motion (other seed), at the calibrated and at the seed's
   4 N·m thresholds;
3. contacts: point forces on random links, in random directions, scaled so that the largest
   joint torque they cause at onset is 4, 8 or 15 N·m (plus a sweep of random 0.5–8 N·m for
   the smallest contact detected per joint); 0.4 s each, 1 s apart, on a moving arm.
   Delay = contact onset (start of a 10 ms ramp) → the stamp of the sample that raised the
   stop. Eq. 7 fires when *some* joint is over its threshold, so the joint that stopped the
   arm is recorded too: it need not be the joint the contact loads most.
The 100 Hz stream is the 1 kHz one subsampled with steps drawn from 4–10 ms, with 1 % of
neighbouring samples swapped (out of order: the detector ignores and counts them), as a real
arm's driver delivers it; the thresholds are calibrated on the subsampled stream, with the
same q̈ window in seconds (the detector's default). The residual itself still
ran at 1 kHz (the observer is not re-run at 100 Hz here).
With the reference never re-timed the detector does not act on the sim, so each residual
trace is recorded once and replayed through every detector.

    .venv/bin/python benchmarks/detection.py [--quick]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from tqdm import tqdm

from contact_estimation.core.chain.detector import (ACCELERATION_WINDOW_DURATION, DEFAULTS,
                                              PERSISTENCE_RULES, CollisionDetector,
                                              DetectorConfig)
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.harness import simulate
from contact_estimation.core.sim.scenario import PointForce, Scenario
from contact_estimation.core.chain.threshold_calibration import (MARGIN, accelerations,
                                                                 calibrate)
from contact_estimation.core.identification.trajectory import make_trajectory

PERSISTENCE_TIME = DEFAULTS.persistence_time
SPACING, DURATION, RAMP = 1.0, 0.4, 0.01  # s, contact schedule
LINKS = ['panda_link3', 'panda_link4', 'panda_link5', 'panda_link6', 'panda_link7']
LEVELS = [4.0, 8.0, 15.0]
STEP_RANGE_MS = (4, 10)  # the 100 Hz driver's steps
SWAPPED = 0.01           # share of its samples that arrive after their successor


def motion(seed: int) -> dict:
    return {'type': 'smooth_random', 'seed': seed, 'speed_scale': 0.3, 'amplitude': 0.5}


def run(robot, trajectory_spec, forces, seconds, bar):
    """Residual trace of `seconds` of motion with the scripted `forces`."""
    return simulate(robot, Scenario(forces=forces, trajectory=trajectory_spec), seconds,
                    progress=bar.update)


def driver_stream(trace: dict, rng) -> dict:
    """The trace as a ~100 Hz driver delivers it: steps of 4–10 ms, a few samples swapped with
    their successor (the receipt order; the stamps stay those of the samples)."""
    steps = rng.integers(STEP_RANGE_MS[0], STEP_RANGE_MS[1] + 1, len(trace['t']))
    picked = np.cumsum(steps)
    picked = picked[picked < len(trace['t'])]
    order = np.arange(picked.size)
    for k in np.flatnonzero(rng.random(picked.size - 1) < SWAPPED):
        order[k], order[k + 1] = order[k + 1], order[k]
    return {key: value[picked[order]] for key, value in trace.items()}


def in_stamp_order(function, trace):
    """`function(t, q)` (per-sample rows) on the trace sorted by stamp, returned in the
    trace's order."""
    order = np.argsort(trace['t'])
    rows = function(trace['t'][order], trace['q'][order])
    return rows[np.argsort(order)]


def replay(config: DetectorConfig, trace) -> tuple[np.ndarray, list, int]:
    """Stop signal of a detector fed the recorded residual, q̇ and q̈ (as the node does) in the
    trace's order, per sample the joints of the latched collision, and the samples ignored.
    q̈ is the trace's 'a' when it has one (computed once for several replays), else computed
    here."""
    detector = CollisionDetector(config)
    a = [None] * len(trace['t'])
    if config.acceleration_gain.any():  # None (no q̈ term) until the fit has its window
        rows = trace['a'] if 'a' in trace else in_stamp_order(accelerations, trace)
        a = [None if np.isnan(row).any() else row for row in rows]
    states = [detector.update(t, tau, v, ak) for t, tau, v, ak in
              zip(trace['t'], trace['tau_ext'], trace['v'], a)]
    return (np.array([s.stop for s in states]), [s.colliding_joints for s in states],
            detector.out_of_order)


def contacts(robot, trajectory, magnitudes, first: float, rng, links=tuple(LINKS),
             max_share: float = np.inf) -> list[PointForce]:
    """One contact per magnitude on one of `links`, SPACING apart from `first`: the largest
    |JᵀF| at onset = m; drawn again while holding the arm (`robot`, with what it carries)
    against its gravity and the push would take some joint past `max_share` of its effort
    limit (a push the motors cannot hold backdrives the arm, whose reference runs on)."""
    limits = np.where(robot.effort_limits > 0, robot.effort_limits, np.inf)
    forces = []
    for k, m in enumerate(magnitudes):
        start = first + k * SPACING
        q = trajectory.sample(start)[0]
        while True:
            link = links[rng.integers(len(links))]
            point = rng.uniform(-0.05, 0.05, 3)
            direction = rng.normal(size=3)
            direction /= np.linalg.norm(direction)
            tau = robot.point_jacobian(q, link, point).T @ direction
            scale = m / np.abs(tau).max()
            if np.all(np.abs(robot.gravity(q) + scale * tau) <= max_share * limits):
                break
        forces.append(PointForce(link, point, scale * direction, start, DURATION, RAMP))
    return forces


def delays(replayed, trace, forces) -> list[tuple[float, np.ndarray, tuple[int, ...]]]:
    """(delay or nan if missed, true τ_ext at full force, joints that stopped it) per contact."""
    stop, joints, _ = replayed
    t, results = trace['t'], []
    for force in forces:
        during = np.flatnonzero((t >= force.start) & (t < force.start + force.duration))
        full = during[len(during) // 2]
        if stop[during[0] - 1]:  # still stopped from before: not a clean trial
            results.append((np.nan, trace['tau_true'][full], ()))
            continue
        hit = during[stop[during]]
        results.append((t[hit[0]] - force.start, trace['tau_true'][full], joints[hit[0]])
                       if hit.size else (np.nan, trace['tau_true'][full], ()))
    return results


def alarms(stop: np.ndarray) -> int:
    return int(np.sum(np.diff(stop.astype(int)) == 1) + stop[0])


def short(joint: str) -> str:
    """panda_joint4 → joint4."""
    return joint.split('_')[-1]


def smallest_table(robot, config, results) -> None:
    print('Smallest contact per joint (contacts grouped by the joint they load most; '
          '"stopped on": the joint(s) over ψ when eq. 7 fired on that smallest one; '
          '"fired elsewhere": detected contacts of the group that fired without this '
          'joint over ψ):')
    print(f'{"joint":14s} {"ψ_0 N·m":>8s} {"smallest detected |τ_j|":>24s} '
          f'{"stopped on":>22s} {"fired elsewhere":>16s} {"largest missed":>15s}')
    for j, joint in enumerate(robot.joint_names):
        dominant = [(d, abs(tau[j]), fired) for d, tau, fired in results
                    if np.argmax(np.abs(tau)) == j]
        hit = [(x, fired) for d, x, fired in dominant if np.isfinite(d)]
        miss = [x for d, x, _ in dominant if not np.isfinite(d)]
        smallest, fired = min(hit, key=lambda h: h[0]) if hit else (np.nan, ())
        stopped_on = ','.join(short(robot.joint_names[i]) for i in fired) or '-'
        elsewhere = f'{sum(j not in f for _, f in hit)}/{len(hit)}'
        print(f'{joint:14s} {config.base_thresholds[j]:8.2f} {smallest:24.2f} '
              f'{stopped_on:>22s} {elsewhere:>16s} '
              f'{max(miss) if miss else np.nan:15.2f}')


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='short run')
    args = parser.parse_args(argv)
    cal_s, fa_s, per_level = (20.0, 30.0, 8) if args.quick else (60.0, 600.0, 25)
    robot = RobotModel.load('panda')
    rng = np.random.default_rng(0)
    sweep = rng.uniform(0.5, 8.0, 3 * per_level)
    magnitudes = np.concatenate([np.repeat(LEVELS, per_level), sweep])
    rng.shuffle(magnitudes)
    contact_s = 1.0 + len(magnitudes) * SPACING
    bar = tqdm(total=int(cal_s + fa_s + contact_s) * 1000, unit='step', desc='simulating')
    traces = {'calibration': run(robot, motion(11), [], cal_s, bar),
              'free': run(robot, motion(12), [], fa_s, bar)}
    spec = motion(13)
    forces = contacts(robot, make_trajectory(robot, spec), magnitudes, 1.0, rng)
    traces['contacts'] = run(robot, spec, forces, contact_s, bar)
    bar.close()

    streams = {'1 kHz': traces,
               '100 Hz': {name: driver_stream(trace, rng) for name, trace in traces.items()}}
    rows = []
    for rate, stream in streams.items():
        cal_trace = stream['calibration']
        order = np.argsort(cal_trace['t'])
        cal = calibrate(cal_trace['t'][order], cal_trace['q'][order], cal_trace['v'][order],
                        cal_trace['tau_ext'][order], robot.joint_names, margin=MARGIN,
                        persistence_time=PERSISTENCE_TIME,
                        source='free motion')
        print(f'\nCalibration at {rate} ({cal_s:g} s free motion, half held out, margin '
              f'{MARGIN:g}, q̈ window {ACCELERATION_WINDOW_DURATION * 1e3:g} ms):')
        print(cal.table())
        thresholds = {
            'calibrated': dict(thresholds_position=cal.base, speed_gain=cal.speed_gain,
                               acceleration_gain=cal.acceleration_gain,
                               threshold_max=cal.threshold_max),
            'seed 4 N·m': {}}
        for rule in PERSISTENCE_RULES:
            for name, values in thresholds.items():
                config = DetectorConfig.build(robot.joint_names, persistence=rule,
                                              persistence_time=PERSISTENCE_TIME, hold_time=0.1,
                                              **values)
                free_stop, _, free_ignored = replay(config, stream['free'])
                replayed = replay(config, stream['contacts'])
                results = delays(replayed, stream['contacts'], forces)
                rows.append((rate, rule, name, config, results, alarms(free_stop),
                             free_ignored + replayed[2]))

    print(f'\nDetection (persistence_time {PERSISTENCE_TIME * 1e3:g} ms): contacts detected '
          f'of {per_level} per level, delay p50 / p95 ms; false alarms in {fa_s:g} s of other '
          'free motion; samples ignored (out of order)')
    header = ' | '.join(f'{level:g} N·m' for level in LEVELS)
    print(f'| rate | persistence | thresholds | {header} | false alarms | ignored |')
    print('|---|---|---|' + '---|' * len(LEVELS) + '---|---|')
    for rate, rule, name, _, results, false_alarms, ignored in rows:
        cells = []
        for level in LEVELS:
            found = np.array([d for (d, _, _), m in zip(results, magnitudes)
                              if m == level and np.isfinite(d)]) * 1e3
            p50, p95 = np.percentile(found, [50, 95]) if found.size else (np.nan, np.nan)
            cells.append(f'{found.size}/{per_level}, {p50:.0f} / {p95:.0f}')
        print(f'| {rate} | {rule} | {name} | {" | ".join(cells)} | {false_alarms} | {ignored} |')
    for rate, rule, name, config, results, _, _ in rows:
        if (rate, rule, name) == ('1 kHz', DEFAULTS.persistence, 'calibrated'):
            print(f'\nAt 1 kHz, calibrated thresholds, {rule} persistence (the default):')
            smallest_table(robot, config, results)
    return 0


if __name__ == '__main__':
    sys.exit(main())
