"""Collision detection on the simulated cobot (ROS-free): delay, smallest contact, false alarms.

SimulatedCobot (panda, the sim's default sensor noise) → momentum observer (URDF model, the
sim's friction) → CollisionDetector (seed 001 eq. 7). Three runs:
1. calibration: free motion → `calibrate` proposes ψ = ψ_0 + k_v|q̇| + k_a|q̈| (margin 1.5),
   fitted on the first half and checked on the held-out second half (its promise);
2. false alarms: another free motion (other seed), at the calibrated and at the seed's
   4 N·m thresholds; alarms per hour against the calibration's promise;
3. contacts: point forces on random links, in random directions, scaled so that the largest
   joint torque they cause at onset is 4, 8 or 15 N·m (plus a sweep of random 0.5–8 N·m for
   the smallest contact detected per joint); 0.4 s each, 1 s apart, on a moving arm.
   Delay = contact onset (start of a 10 ms ramp) → stop. Eq. 7 fires when *some* joint is
   over its threshold, so the joint that stopped the arm is recorded too: it need not be the
   joint the contact loads most.
With the reference never re-timed the detector does not act on the sim, so each residual
trace is recorded once and replayed through every detector.

    .venv/bin/python benchmarks/detection.py [--quick]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from tqdm import tqdm

from contact_estimation.core.detector import DEFAULTS, CollisionDetector, DetectorConfig
from contact_estimation.core.robot_model import RobotModel
from contact_estimation.core.sim.harness import simulate
from contact_estimation.core.sim.scenario import PointForce, Scenario
from contact_estimation.core.threshold_calibration import accelerations, calibrate
from contact_estimation.core.trajectory import make_trajectory

N = DEFAULTS['consecutive_samples']  # n of eq. 7, as the node runs it
WINDOW = 20        # acceleration_window
MARGIN = 1.5
SPACING, DURATION, RAMP = 1.0, 0.4, 0.01  # s, contact schedule
LINKS = ['panda_link3', 'panda_link4', 'panda_link5', 'panda_link6', 'panda_link7']


def motion(seed: int) -> dict:
    return {'type': 'smooth_random', 'seed': seed, 'speed_scale': 0.3, 'amplitude': 0.5}


def run(robot, trajectory_spec, forces, seconds, bar):
    """Residual trace of `seconds` of motion with the scripted `forces`."""
    return simulate(robot, Scenario(forces=forces, trajectory=trajectory_spec), seconds,
                    progress=bar.update)


def replay(config: DetectorConfig, trace) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Stop signal of a detector fed the recorded residual, q̇ and q̈ (as the node does), and
    per sample the joints of the latched collision."""
    detector = CollisionDetector(config)
    a = accelerations(trace['t'], trace['q'], WINDOW) if config.acceleration_gain.any() else \
        [None] * len(trace['t'])
    states = [detector.update(t, tau, v, ak) for t, tau, v, ak in
              zip(trace['t'], trace['tau_ext'], trace['v'], a)]
    return np.array([s.stop for s in states]), [s.colliding_joints for s in states]


def contacts(robot, trajectory, magnitudes, first: float, rng) -> list[PointForce]:
    """One contact per magnitude, SPACING apart from `first`: the largest |JᵀF| at onset = m."""
    forces = []
    for k, m in enumerate(magnitudes):
        start = first + k * SPACING
        q = trajectory.sample(start)[0]
        link = LINKS[rng.integers(len(LINKS))]
        point = rng.uniform(-0.05, 0.05, 3)
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        tau = robot.point_jacobian(q, link, point).T @ direction
        forces.append(PointForce(link, point, m / np.abs(tau).max() * direction, start,
                                 DURATION, RAMP))
    return forces


def delays(replayed, trace, forces) -> list[tuple[float, np.ndarray, tuple[int, ...]]]:
    """(delay or nan if missed, true τ_ext at full force, joints that stopped it) per contact."""
    stop, joints = replayed
    t, results = trace['t'], []
    for force in forces:
        during = (t >= force.start) & (t < force.start + force.duration)
        full = np.flatnonzero(during)[len(np.flatnonzero(during)) // 2]
        onset = np.flatnonzero(during)[0]
        if stop[onset - 1]:  # still stopped from before: not a clean trial
            results.append((np.nan, trace['tau_true'][full], ()))
            continue
        hit = np.flatnonzero(stop & during)
        results.append((t[hit[0]] - force.start, trace['tau_true'][full], joints[hit[0]])
                       if hit.size else (np.nan, trace['tau_true'][full], ()))
    return results


def short(joint: str) -> str:
    """panda_joint4 → joint4."""
    return joint.split('_')[-1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='short run')
    args = parser.parse_args(argv)
    cal_s, fa_s, per_level = (20.0, 30.0, 8) if args.quick else (60.0, 300.0, 25)
    robot = RobotModel.load('panda')
    rng = np.random.default_rng(0)
    levels = [4.0, 8.0, 15.0]
    sweep = rng.uniform(0.5, 8.0, 3 * per_level)
    magnitudes = np.concatenate([np.repeat(levels, per_level), sweep])
    rng.shuffle(magnitudes)
    contact_s = 1.0 + len(magnitudes) * SPACING
    bar = tqdm(total=int(cal_s + fa_s + contact_s) * 1000, unit='step', desc='simulating')

    calibration_trace = run(robot, motion(11), [], cal_s, bar)
    cal = calibrate(calibration_trace['t'], calibration_trace['q'], calibration_trace['v'],
                    calibration_trace['tau_ext'], robot.joint_names, margin=MARGIN,
                    consecutive_samples=N, acceleration_window=WINDOW, source='free motion')
    free_trace = run(robot, motion(12), [], fa_s, bar)
    spec = motion(13)
    forces = contacts(robot, make_trajectory(robot, spec), magnitudes, 1.0, rng)
    contact_trace = run(robot, spec, forces, contact_s, bar)
    bar.close()

    configs = {
        'calibrated': DetectorConfig.build(robot.joint_names, thresholds_position=cal.base,
                                           speed_gain=cal.speed_gain,
                                           acceleration_gain=cal.acceleration_gain,
                                           threshold_max=cal.threshold_max,
                                           consecutive_samples=N, hold_time=0.1),
        'seed 4 N·m': DetectorConfig.build(robot.joint_names, consecutive_samples=N,
                                           hold_time=0.1),
    }
    print(f'\nCalibration ({cal_s:g} s free motion, half held out, margin {MARGIN:g}, n = {N}):')
    print(cal.table())

    print(f'\nFalse alarms on {fa_s:g} s of other free motion:')
    print(f'{"thresholds":12s} {"alarms":>6s} {"per hour":>9s} {"promise/h":>10s}')
    for name, config in configs.items():
        stop, _ = replay(config, free_trace)
        alarms = int(np.sum(np.diff(stop.astype(int)) == 1) + stop[0])
        promise = f'{cal.false_alarm_bound_per_hour:10.1f}' if name == 'calibrated' else f'{"-":>10s}'
        print(f'{name:12s} {alarms:6d} {alarms / fa_s * 3600:9.1f} {promise}')

    for name, config in configs.items():
        results = delays(replay(config, contact_trace), contact_trace, forces)
        print(f'\nDetection, {name} thresholds (n = {N}, 1 kHz):')
        print(f'{"effect N·m":>10s} {"contacts":>8s} {"detected":>8s} {"p50 ms":>7s} {"p95 ms":>7s}')
        for level in levels:
            picked = [r for r, m in zip(results, magnitudes) if m == level]
            found = np.array([d for d, _, _ in picked if np.isfinite(d)]) * 1e3
            p50, p95 = (np.percentile(found, [50, 95]) if found.size else (np.nan, np.nan))
            print(f'{level:10.1f} {len(picked):8d} {found.size:8d} {p50:7.1f} {p95:7.1f}')
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
    return 0


if __name__ == '__main__':
    sys.exit(main())
