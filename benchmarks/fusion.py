"""One contact estimate from every sensor at once (core/fused_contact.py) on the simulated Panda.

The contacts of benchmarks/localization_panda.py (`contact_cases`: random poses, a random
exposed point of links 2-7 from a 5 mm sampling the estimators never saw, a 10-60 N force in
the friction cone, μ = 0.5) with its lidar (`LidarScene`: a forearm touching the contact,
scanned by the sim cobot's lidar, through `LidarFusion`). The sensors:

- joint torques τ_ext = J(p)ᵀF + noise, σ_τ = `TORQUE_NOISE` per joint (the momentum
  observer's noise floor on the sim cobot, README "Residual quality", is 0.08 N·m RMS);
- the compensated base wrench [F; p × F] + noise, σ = `FORCE_NOISE`, `MOMENT_NOISE` per axis
  (what the momentum observer of the base wrench leaves in free motion on the sim cobot,
  README "Base F/T contact": 0.35 N and 0.24 N·m RMS, over √3 per axis);
- the lidar's obstacles next to each link.

One row per set of sensors for `FusedContactEstimator`, and today's estimators on the same
contacts: `ContactLocalizer` (torques, torques + lidar) and `FtContactLocator.
locate_from_residual` (torques + F/T, the F/T node's). Right link: the estimate's link is the
contact's; point (median, p95) and force errors (‖F̂ − F‖/‖F‖, median) over the right-link
estimates; candidates: the truth's link is among the estimate's candidate links, and their
mean number of distinct links. Time per estimate: one call, in-process, wall clock (the
lidar fusion runs per cloud and the wrench compensation per F/T sample: neither is counted).

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/fusion.py [--quick]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from localization_panda import MU, LidarScene, contact_cases

from contact_estimation.core.contact_localization import ContactLocalizer
from contact_estimation.core.ft_contact import FtContactLocator, MeshSurfaces
from contact_estimation.core.fused_contact import FusedContactEstimator, SensorNoise
from contact_estimation.core.lidar_fusion import CloudConfig, LidarFusion
from contact_estimation.core.robot_model import RobotModel
from contact_estimation.core.surfaces import LinkSurfaces

TORQUE_NOISE = 0.1   # N·m per joint
FORCE_NOISE = 0.2    # N per axis
MOMENT_NOISE = 0.14  # N·m per axis
# The lidar's rows are ~5 cm apart at the arm: as in localization_panda.py, a loose prior.
CONTACT_DISTANCE, PRIOR_RADIUS = 0.2, 0.08
# Which inputs each fused row gives: torques, base wrench, lidar.
FUSED_ROWS = (('torques only', True, False, False), ('torques + lidar', True, False, True),
              ('F/T only', False, True, False), ('torques + F/T', True, True, False),
              ('all three', True, True, True))


def sensor_data(robot, cases, rng):
    """Per case: the noisy torques and base wrench (base origin, base frame)."""
    data = []
    for q, link, point, force, _ in cases:
        rotation, origin = robot.link_pose(q, link)
        on_base, at = rotation @ force, rotation @ point + origin
        tau = (robot.point_jacobian(q, link, point).T @ on_base
               + TORQUE_NOISE * rng.standard_normal(robot.n))
        wrench = np.concatenate([on_base + FORCE_NOISE * rng.standard_normal(3),
                                 np.cross(at, on_base) + MOMENT_NOISE * rng.standard_normal(3)])
        data.append((tau, wrench))
    return data


def lidar_views(robot, surfaces, cases):
    """Per case: the lidar's `LinkProximity` with the forearm touching the contact."""
    scene = LidarScene(robot)
    fusion = LidarFusion(surfaces, CloudConfig(self_margin=0.02, cluster_min_points=3))
    views = []
    for q, link, point, _, normal in cases:
        rotation, origin = robot.link_pose(q, link)
        cloud = scene.scan(q, rotation @ point + origin, rotation @ normal)
        views.append(fusion.update(0.0, q, cloud).proximity)
    return views


def timed(call):
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def score(rows):
    """Table cells from (true link, link, point error m, force error, seconds, truth among
    candidates, distinct candidate links) rows."""
    right = np.array([r[0] == r[1] for r in rows])
    point = np.array([r[2] for r in rows], dtype=float)[right]
    force = np.array([r[3] for r in rows], dtype=float)[right]
    seconds = np.array([r[4] for r in rows])
    among = [r[5] for r in rows if r[5] is not None]
    count = [r[6] for r in rows if r[6] is not None]
    candidates = (f'{100 * np.mean(among):.1f} % ({np.mean(count):.2f})' if among else '–')
    return (f'{100 * right.mean():.1f} % | {1e3 * np.nanmedian(point):.1f} / '
            f'{1e3 * np.nanpercentile(point, 95):.1f} mm | {100 * np.nanmedian(force):.2f} % '
            f'| {candidates} | {1e3 * np.median(seconds):.2f} ms')


def errors(link, point, force, estimate_link, estimate_point, estimate_force):
    if estimate_link != link or estimate_point is None:
        return np.nan, np.nan
    return (float(np.linalg.norm(estimate_point - point)),
            float(np.linalg.norm(estimate_force - force) / np.linalg.norm(force)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='20 contacts per link, not 100')
    args = parser.parse_args()
    per_link = 20 if args.quick else 100
    robot = RobotModel.load('panda')
    surfaces = LinkSurfaces(robot, point_spacing=0.02)
    truth = LinkSurfaces(robot, point_spacing=0.005, seed=7)
    rng = np.random.default_rng(0)
    cases = contact_cases(robot, truth, rng, per_link)
    measured = sensor_data(robot, cases, rng)
    views = lidar_views(robot, surfaces, cases)

    noise = SensorNoise(TORQUE_NOISE, FORCE_NOISE, MOMENT_NOISE)
    fused = FusedContactEstimator(surfaces, mu=MU, noise=noise,
                                  contact_distance=CONTACT_DISTANCE, prior_radius=PRIOR_RADIUS)
    localizer = ContactLocalizer(surfaces, mu=MU, delta_tau=4 * TORQUE_NOISE,
                                 delta_w=5 * TORQUE_NOISE, contact_distance=CONTACT_DISTANCE,
                                 prior_radius=PRIOR_RADIUS)
    ft_locator = FtContactLocator(MeshSurfaces(surfaces), residual_noise=TORQUE_NOISE)

    table = {}
    for name, torques, ft, lidar in FUSED_ROWS:
        rows = []
        for (q, link, point, force, _), (tau, wrench), view in zip(cases, measured, views):
            estimate, seconds = timed(lambda: fused.estimate(
                q, tau if torques else None, wrench if ft else None, view if lidar else None))
            rows.append((link, estimate.link, *errors(link, point, force, estimate.link,
                                                      estimate.point_link, estimate.force_link),
                         seconds, link in estimate.candidate_links,
                         len(set(estimate.candidate_links))))
        table[f'fused: {name}'] = score(rows)
    for name, lidar in (('torques only', False), ('torques + lidar', True)):
        rows = []
        for (q, link, point, force, _), (tau, _), view in zip(cases, measured, views):
            estimate, seconds = timed(lambda: localizer.estimate(q, tau, view if lidar else None))
            rows.append((link, estimate.link, *errors(link, point, force, estimate.link,
                                                      estimate.point_link, estimate.force_link),
                         seconds, None, None))
        table[f'today: ContactLocalizer, {name}'] = score(rows)
    rows = []
    for (q, link, point, force, _), (tau, wrench) in zip(cases, measured):
        estimate, seconds = timed(lambda: ft_locator.locate_from_residual(
            q, wrench, tau, 4 * TORQUE_NOISE))
        found = estimate is not None
        rows.append((link, estimate.link if found else None,
                     *errors(link, point, force, estimate.link if found else None,
                             estimate.point if found else None,
                             estimate.force if found else None),
                     seconds, link in estimate.candidates if found else False,
                     len(set(estimate.candidates)) if found else 0))
    table['today: FtContactLocator, torques + F/T'] = score(rows)

    print(f'{len(cases)} contacts on links 2-7 ({per_link} per link), 10-60 N, μ = {MU}; '
          f'σ_τ = {TORQUE_NOISE} N·m, F/T σ = {FORCE_NOISE} N / {MOMENT_NOISE} N·m per axis; '
          f'surface samples {1e3 * fused.slide:.0f} mm apart\n')
    print('| estimator, sensors | right link | point median / p95 | force error median '
          '| truth among candidates (distinct links) | time per estimate median |')
    print('|---|---|---|---|---|---|')
    for name, cells in table.items():
        print(f'| {name} | {cells} |')


if __name__ == '__main__':
    main()
