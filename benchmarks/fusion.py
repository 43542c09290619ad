"""One contact estimate from every sensor at once (core/contact/fused_contact.py) on the simulated
Panda.

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

A second table runs the sensors as the suite does, on benchmarks/ft_contact.py's simulation
(`random_pushes`, `steps`: the sim cobot in smooth random motion, pushes of 5-60 N within
30° of the normal on every moving link, 0.3 s each): τ_ext from the momentum observer, the
base wrench from `MomentumWrenchObserver`, every 10th sample of each push's plateau.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/fusion.py [--quick]
"""
from __future__ import annotations

import argparse
import time

import ft_contact
import numpy as np
from localization_panda import MU, LidarScene, contact_cases

from contact_estimation.core.contact.contact_localization import (ContactLocalizer,
                                                                  LocalizerConfig)
from contact_estimation.core.contact.ft_compensation import (BaseWrenchCompensator,
                                                             MomentumWrenchObserver)
from contact_estimation.core.contact.ft_contact import FtContactLocator, FtLocatorConfig
from contact_estimation.core.robot.body_surfaces import MeshSurfaces
from contact_estimation.core.contact.fused_contact import FusedContactEstimator, SensorNoise
from contact_estimation.core.contact.lidar_fusion import CloudConfig, LidarFusion
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.scenario import Scenario

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


def fused_view(estimate):
    """(link, point, force, candidate links) of a fused `ContactEstimate`."""
    return (*ft_view(estimate.contact)[:3], estimate.candidate_links)


def localizer_view(estimate):
    """The same of a `ContactLocalizer`'s (its candidates are samples, not an ambiguity:
    none)."""
    return (*ft_view(estimate.contact)[:3], None)


def ft_view(contact):
    """The same of a `Contact` (None: no estimate)."""
    if contact is None:
        return None, None, None, []
    return contact.link, contact.point, contact.force, [contact.link, *contact.ambiguous_with]


def row(link, point, force, call, view):
    """One table row's numbers for the contact (link, point, force; link frame) from the
    estimate `call()` gives, read through `view`: (right link, point error m, force error,
    seconds, truth among candidates, distinct candidate links)."""
    start = time.perf_counter()
    estimate = call()
    seconds = time.perf_counter() - start
    got_link, got_point, got_force, candidates = view(estimate)
    right = got_link == link and got_point is not None
    return (right, float(np.linalg.norm(got_point - point)) if right else np.nan,
            float(np.linalg.norm(got_force - force) / np.linalg.norm(force)) if right
            else np.nan, seconds, None if candidates is None else link in candidates,
            None if candidates is None else len(set(candidates)))


def score(rows) -> str:
    """Table cells from `row`s."""
    rows = np.array(rows, dtype=object)
    right = rows[:, 0].astype(bool)
    point, force = rows[right, 1].astype(float), rows[right, 2].astype(float)
    among = [r for r in rows[:, 4] if r is not None]
    count = [r for r in rows[:, 5] if r is not None]
    candidates = f'{100 * np.mean(among):.1f} % ({np.mean(count):.2f})' if among else '–'
    return (f'{100 * right.mean():.1f} % | {1e3 * np.median(point):.1f} / '
            f'{1e3 * np.percentile(point, 95):.1f} mm | {100 * np.median(force):.2f} % '
            f'| {candidates} | {1e3 * np.median(rows[:, 3].astype(float)):.2f} ms')


def static_contacts(robot, surfaces, fused, localizer, ft_locator, per_link: int):
    """Table cells per estimator and sensors on localization_panda's contacts."""
    truth = LinkSurfaces(robot, point_spacing=0.005, seed=7)
    rng = np.random.default_rng(0)
    cases = contact_cases(robot, truth, rng, per_link)
    measured = sensor_data(robot, cases, rng)
    views = lidar_views(robot, surfaces, cases)
    rows = {}
    for (q, link, point, force, _), (tau, wrench), view in zip(cases, measured, views):
        calls = {f'fused: {name}': (lambda t=torques, f=ft, v=lidar: fused.estimate(
            q, tau if t else None, wrench if f else None, view if v else None), fused_view)
            for name, torques, ft, lidar in FUSED_ROWS}
        calls['today: ContactLocalizer, torques only'] = (
            lambda: localizer.estimate(q, tau), localizer_view)
        calls['today: ContactLocalizer, torques + lidar'] = (
            lambda: localizer.estimate(q, tau, view), localizer_view)
        calls['today: FtContactLocator, torques + F/T'] = (
            lambda: ft_locator.locate_from_residual(q, wrench, tau, 4 * TORQUE_NOISE), ft_view)
        for name, (call, view_of) in calls.items():
            rows.setdefault(name, []).append(row(link, point, force, call, view_of))
    return len(cases), {name: score(r) for name, r in rows.items()}


def sim_chain(robot, surfaces, fused, localizer, ft_locator, count: int):
    """Table cells per estimator on ft_contact.py's simulated pushes (the second table)."""
    rng = np.random.default_rng(11)
    pushes = ft_contact.random_pushes(robot, surfaces, rng, count)
    observer = MomentumWrenchObserver(BaseWrenchCompensator(robot), ft_contact.OBSERVER_GAIN)
    seconds = pushes[-1].start + ft_contact.DURATION + ft_contact.GAP
    rows = {}
    for k, (cobot, q, v, _, reading, tau) in enumerate(ft_contact.steps(
            robot, Scenario(forces=pushes), SimConfig(), seconds)):
        wrench = observer.update(cobot.time, reading, q, v)
        plateau = any(p.start + ft_contact.RAMP + ft_contact.SETTLE <= cobot.time
                      <= p.start + ft_contact.DURATION - ft_contact.RAMP for p in pushes)
        if k % 10 or not plateau:
            continue
        truth = cobot.true_contacts()[0]
        calls = {'fused: torques only': (lambda: fused.estimate(q, tau), fused_view),
                 'fused: F/T only': (lambda: fused.estimate(q, None, wrench), fused_view),
                 'fused: torques + F/T': (lambda: fused.estimate(q, tau, wrench), fused_view),
                 'today: ContactLocalizer, torques only': (lambda: localizer.estimate(q, tau),
                                                           localizer_view),
                 'today: FtContactLocator, torques + F/T': (
                     lambda: ft_locator.locate_from_residual(q, wrench, tau,
                                                             ft_contact.THRESHOLD), ft_view)}
        for name, (call, view_of) in calls.items():
            rows.setdefault(name, []).append(row(truth.link, truth.point, truth.force, call,
                                                 view_of))
    return sum(len(r) for r in rows.values()) // len(rows), {
        name: score(r) for name, r in rows.items()}


def print_table(table) -> None:
    print('| estimator, sensors | right link | point median / p95 | force error median '
          '| truth among candidates (distinct links) | time per estimate median |')
    print('|---|---|---|---|---|---|')
    for name, cells in table.items():
        print(f'| {name} | {cells} |')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true',
                        help='20 contacts per link, not 100; 12 simulated pushes, not 60')
    args = parser.parse_args()
    per_link, pushes = (20, 12) if args.quick else (100, 60)
    robot = RobotModel.load('panda')
    surfaces = LinkSurfaces(robot, point_spacing=0.02)
    noise = SensorNoise(TORQUE_NOISE, FORCE_NOISE, MOMENT_NOISE)
    fused = FusedContactEstimator(surfaces, mu=MU, noise=noise,
                                  contact_distance=CONTACT_DISTANCE, prior_radius=PRIOR_RADIUS)
    localizer = ContactLocalizer(surfaces, LocalizerConfig(
        mu=MU, delta_tau=4 * TORQUE_NOISE, delta_w=5 * TORQUE_NOISE,
        contact_distance=CONTACT_DISTANCE, prior_radius=PRIOR_RADIUS))
    ft_locator = FtContactLocator(MeshSurfaces(surfaces),
                                  FtLocatorConfig(residual_noise=TORQUE_NOISE))

    count, table = static_contacts(robot, surfaces, fused, localizer, ft_locator, per_link)
    print(f'{count} contacts on links 2-7 ({per_link} per link), 10-60 N, μ = {MU}; '
          f'σ_τ = {TORQUE_NOISE} N·m, F/T σ = {FORCE_NOISE} N / {MOMENT_NOISE} N·m per axis; '
          f'surface samples {1e3 * fused.slide:.0f} mm apart\n')
    print_table(table)
    count, table = sim_chain(robot, surfaces, fused, localizer, ft_locator, pushes)
    print(f'\nThe sim cobot in motion, {pushes} pushes on its moving links, {count} samples of '
          'their plateaus; τ_ext and the base wrench from the momentum observers\n')
    print_table(table)


if __name__ == '__main__':
    main()
