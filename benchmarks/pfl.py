"""Power and force limiting (issue 38, core/contact/pfl.py): the Panda's effective mass against
ISO/TS 15066's M/2 + m_L, the permissible speeds it gives, and what the online pieces cost.

For a few Panda poses, with and without a 2 kg payload on the hand: m_R = 1 / (uᵀ J M⁻¹ Jᵀ u)
at the flange (the hand link's origin) and at mid-forearm (panda_link5, halfway between the
elbow and the wrist), along the base axes x, y, z, against the standard's m_R = M/2 + m_L;
then v_max = F_T / √(μ k) for the hand, lower arm, chest and thigh at the lightest and the
heaviest of those masses, and at M/2 + m_L. Last, the CPU time per call (µs, median of batches) of
the force check, the effective mass and the permissible speed, and of the proximity monitor's
check (one per period, 100 Hz) with a person in reach and the arm approaching, with and
without the power and force limit on speed (its extra cost per cycle).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/pfl.py
"""
from __future__ import annotations

import time

import numpy as np

from contact_estimation.core.contact.pfl import (
    BODY_REGIONS, PflCheck, effective_mass, effective_masses, permissible_speed,
    standard_effective_mass, tracked_parts)
from contact_estimation.core.contact.proximity import (HumanModel, ProximityConfig,
                                                       ProximityMonitor, standing_skeleton)
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces

POSES = {
    'ready': [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785],
    'reaching': [0.0, 0.3, 0.0, -1.2, 0.0, 1.5, 0.785],
    'folded': [0.0, -1.2, 0.0, -2.8, 0.0, 1.6, 0.785],
    'sideways': [1.2, 0.2, -0.5, -1.8, 0.4, 2.0, 0.0],
}
PAYLOAD = Payload(2.0, (0.0, 0.0, 0.05))
REGIONS = ('hand_fingers', 'lower_arm_wrist', 'chest', 'thigh_knee')
AXES = {'x': (1.0, 0.0, 0.0), 'y': (0.0, 1.0, 0.0), 'z': (0.0, 0.0, 1.0)}


def points(robot: RobotModel, q) -> dict[str, tuple[str, np.ndarray]]:
    """The flange and mid-forearm: (link, point in the base frame)."""
    (_, flange), (_, elbow), (_, wrist) = robot.link_poses(
        q, [robot.tip_link, 'panda_link4', 'panda_link6'])
    return {'flange': (robot.tip_link, flange), 'mid-forearm': ('panda_link5', (elbow + wrist) / 2)}


def speeds(mass: float) -> str:
    return ' | '.join(f'{permissible_speed(BODY_REGIONS[r], mass):.2f}' for r in REGIONS)


def mass_table(robot: RobotModel) -> None:
    print('| payload | pose | point | m_R x | m_R y | m_R z | M/2 + m_L |')
    print('|---|---|---|---|---|---|---|')
    extremes = {}
    for payload in (Payload(), PAYLOAD):
        carried = payload.carried_by(robot)
        standard = standard_effective_mass(robot, payload.mass)
        masses = []
        for pose, q in POSES.items():
            for name, (link, point) in points(carried, np.array(q)).items():
                row = [effective_mass(carried, np.array(q), link, point, u) for u in AXES.values()]
                masses += row
                print(f'| {payload.mass:.0f} kg | {pose} | {name} | '
                      + ' | '.join(f'{m:.2f} kg' for m in row) + f' | {standard:.2f} kg |')
        extremes[payload.mass] = (min(masses), max(masses), standard)
    print('\nv_max (m/s) = F_T / √(μ k) at those masses:\n')
    print('| payload | m_R | kg | ' + ' | '.join(REGIONS) + ' |')
    print('|---|---|---|' + '---|' * len(REGIONS))
    for mass, (lightest, heaviest, standard) in extremes.items():
        for label, m_r in (('lightest', lightest), ('heaviest', heaviest),
                           ('M/2 + m_L', standard)):
            print(f'| {mass:.0f} kg | {label} | {m_r:.2f} | {speeds(m_r)} |')


def per_call(function, batches: int = 15, size: int = 200) -> float:
    """Median over batches of the CPU time per call, µs (CPU, not wall: the machine is shared)."""
    times = []
    for _ in range(batches):
        start = time.process_time()
        for _ in range(size):
            function()
        times.append((time.process_time() - start) / size)
    return 1e6 * float(np.median(times))


def cost_table(robot: RobotModel) -> None:
    q = np.array(POSES['reaching'])
    link, point = points(robot, q)['flange']
    keypoints = standing_skeleton((point[0] + 0.3, point[1], 0.0))
    parts = tracked_parts(HumanModel().bodies(keypoints))
    links = [f'panda_link{k}' for k in range(1, 8)]
    link_points = [origin for _, origin in robot.link_poses(q, links)]
    directions = np.tile((1.0, 0.0, 0.0), (len(links), 1))
    check = PflCheck()
    force = np.array([0.0, 0.0, -150.0])
    print('\n| call | CPU µs per call (median of 15 × 200) |\n|---|---|')
    rows = {
        f'PflCheck.check, {len(parts)} tracked parts '
        f'({sum(len(p.points) for p in parts)} points)':
            lambda: check.check(link, point, force, 1.2, 1.0, parts),
        'PflCheck.check, no tracker (default region)':
            lambda: check.check(link, point, force, 1.2, 1.0),
        'effective_mass (Panda, one point, one direction)':
            lambda: effective_mass(robot, q, link, point, (1.0, 0.0, 0.0)),
        'effective_masses (Panda, one point on each of the 7 links, at once)':
            lambda: effective_masses(robot, q, links, link_points, directions),
        'permissible_speed': lambda: permissible_speed(BODY_REGIONS['hand_fingers'], 3.0),
        **proximity_rows(robot, q, keypoints),
    }
    for label, function in rows.items():
        print(f'| {label} | {per_call(function):.1f} |')


def proximity_rows(robot: RobotModel, q: np.ndarray, keypoints: np.ndarray) -> dict:
    """The proximity monitor's check at q, the arm reaching toward the person at 1 rad/s on
    joints 2 and 4 (speed scale held at 1 by a long recovery), without and with the limit."""
    surfaces = LinkSurfaces(robot, sphere_spacing=0.05)
    config = ProximityConfig(human_speed=0.0, recovery_rate=100.0)
    velocity = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    rows = {}
    for label, limit in (('without', None), ('with', robot)):
        monitor = ProximityMonitor(surfaces, config, speed_limit_robot=limit)
        monitor.set_skeleton(0.0, keypoints)
        result = monitor.update(0.0, q, velocity)
        limited = (f' ({np.count_nonzero(result.body_speed_share)} body parts approached, '
                   f'ratio {result.pfl_ratio:.2f})' if limit else '')
        rows[f'ProximityMonitor.update, person in reach, {label} the speed limit{limited}'] = (
            lambda m=monitor: m.update(0.0, q, velocity))
    return rows


def main() -> None:
    robot = RobotModel.load('panda')
    print(f'Panda: M = {2 * standard_effective_mass(robot):.2f} kg moved by the chain\'s joints; '
          f'payload {PAYLOAD.mass:.0f} kg at {PAYLOAD.centre_of_mass} m on {robot.tip_link}\n')
    mass_table(robot)
    cost_table(robot)


if __name__ == '__main__':
    main()
