"""Contact point and force from the base F/T sensor (seed 004) on the simulated Panda, ROS-free.

SimulatedCobot (panda, free smooth motion, its base sensor: robot on sensor, base origin)
→ the contact wrench, two ways: BaseWrenchCompensator (URDF model, q̈ from a 40-sample
quadratic fit of the measured q) and MomentumWrenchObserver (the arm's momentum, no q̈, a
low pass of 1/K s, K = `observer_gain`, the node's default)
→ FtContactLocator with each surface model (patent ellipsoids fitted to the collision
meshes; the meshes). Per sensor noise level (the sim's 0.1 N / 0.01 N·m and 0.5 N / 0.05 N·m):
1. compensation: 3 s of free motion; RMS of the compensated wrench (it should be zero) with
   the sim's true state and acceleration (the model alone), with the dynamic term f_Bd, τ_Bd
   from the measured state and estimated q̈, from the momentum observer, and with the
   weight f₀, τ₀ alone;
2. contacts: point forces at random points of the outer surface of random moving links,
   within 30° of the inward normal, 5–60 N, turning with the link, 0.3 s each (50 ms ramps),
   0.15 s apart. Scored every 5 ms over the plateau from 100 ms after the ramp (the jerk of
   the ramp is out of the q̈ fit's 40 ms window by then). The contacted body comes from the
   momentum observer (the sim's friction model), threshold `THRESHOLD`, or the F/T force
   alone from 10 N (`presence_force`). Point error: distance to the true point in the
   base frame; link: the estimated link is the true one (body: the joint that moves it).
   The body: `FtContactLocator.locate_from_residual` (every body the line of action enters,
   scored by how well a contact on it explains τ_ext, σ = 0.1 N·m, and by the angle between
   the force and the surface normal there, κ = 5). Link: the link of the estimate is the
   true one; body: the estimated link moves with the same joint as the true one (hand,
   fingers and link 7 are one body: only the surface tells them apart). Candidates: the
   links of the bodies scoring within `ambiguity_margin` (2) of the best, the estimate's first:
   how often the true link is among them, and how many there are.
Time per estimate: compensation + localisation, one sample, in-process (the observer's
update runs at every sample; the time counts one).

    .venv/bin/python benchmarks/ft_contact.py [--quick]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from tqdm import tqdm

from contact_estimation.core.contact.ft_compensation import (COMPENSATIONS,
                                                             BaseWrenchCompensator,
                                                             MomentumWrenchObserver)
from contact_estimation.core.contact.ft_contact import FtContactLocator
from contact_estimation.core.robot.body_surfaces import SURFACE_MODELS, make_surfaces
from contact_estimation.core.contact.ft_contact_stream import FtEstimatorConfig
from contact_estimation.core.chain.derivatives import DerivativeEstimator
from contact_estimation.core.chain.residual import make_residual
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.config import DEFAULT_FRICTION, SimConfig
from contact_estimation.core.sim.scenario import PointForce, Scenario
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.identification.trajectory import make_trajectory

NOISE = [(0.1, 0.01), (0.5, 0.05)]  # N, N·m
ACCELERATION_WINDOW = FtEstimatorConfig.acceleration_window  # s of positions in the q̈ fit
OBSERVER_GAIN = FtEstimatorConfig.observer_gain  # 1/s, momentum observer of the base wrench
THRESHOLD = 0.5                      # N·m, contacted-joint threshold on |τ_ext|
DURATION, RAMP, GAP, SETTLE, EVERY = 0.3, 0.05, 0.15, 0.1, 5  # s, s, s, s, steps
CONE = np.deg2rad(30.0)
MOTION = {'type': 'smooth_random', 'seed': 5, 'speed_scale': 0.3}


def random_pushes(robot, surfaces, rng, count: int) -> list[PointForce]:
    """`count` pushes at surface samples of the moving links, into the surface."""
    links = [link for link in surfaces.links if link in robot.link_joint]
    return [random_push(surfaces, rng, links, (5.0, 60.0), start=0.2 + k * (DURATION + GAP),
                        duration=DURATION, ramp=RAMP) for k in range(count)]


def random_push(surfaces, rng, links: list[str], force: tuple[float, float], start: float,
                duration: float, ramp: float) -> PointForce:
    """A push on one of `links` at a random surface sample, within `CONE` of the inward
    normal, of a random size within `force` (N), turning with the link."""
    link = links[rng.integers(len(links))]
    points, normals = surfaces.surface_points(link)
    i = rng.integers(len(points))
    inward = -normals[i]
    side = np.cross(inward, rng.normal(size=3))
    side /= np.linalg.norm(side)
    angle = rng.uniform(0.0, CONE)
    direction = np.cos(angle) * inward + np.sin(angle) * side
    return PointForce(link, points[i], rng.uniform(*force) * direction, start=start,
                      duration=duration, ramp=ramp, frame='link')


def steps(robot, scenario, config, seconds):
    """Per step: cobot, measured (q, q̇), q̈ estimate, F/T reading, τ_ext of the observer."""
    cobot = SimulatedCobot(robot, make_trajectory(robot, MOTION), scenario, config)
    acceleration = DerivativeEstimator(ACCELERATION_WINDOW)
    residual = make_residual('momentum_observer', robot, friction_model='continuous',
                             friction_params=DEFAULT_FRICTION)
    for _ in tqdm(range(int(seconds / cobot.dt)), leave=False):
        cobot.step()
        q, v, tau = cobot.joint_state()
        _, a = acceleration.update(cobot.time, q)
        yield cobot, q, v, a, np.concatenate(cobot.ft_wrench()), residual.update(cobot.time, q,
                                                                                  v, tau)


def compensation(robot, config, seconds):
    compensator = BaseWrenchCompensator(robot)
    observer = MomentumWrenchObserver(compensator, OBSERVER_GAIN)
    exact, dynamic, observed, static = [], [], [], []
    for k, (cobot, q, v, a, reading, _) in enumerate(steps(robot, None, config, seconds)):
        from_momentum = observer.update(cobot.time, reading, q, v)
        if k >= 2 * ACCELERATION_WINDOW / cobot.dt:
            exact.append(compensator.contact_wrench(reading, cobot.q, cobot.v, cobot.data.qacc))
            dynamic.append(compensator.contact_wrench(reading, q, v, a))
            observed.append(from_momentum)
            static.append(compensator.contact_wrench(reading, q))

    def rms(rows):
        rows = np.array(rows)
        return (np.sqrt(np.mean(np.sum(rows[:, :3] ** 2, axis=1))),
                np.sqrt(np.mean(np.sum(rows[:, 3:] ** 2, axis=1))))
    return rms(exact), rms(dynamic), rms(observed), rms(static)


def contacts(robot, surfaces, config, count, seed):
    """Per (compensation, surface model): rows (|F| true, point error m, force error, link ok,
    body ok, µs, true link among the candidates, number of candidates)."""
    rng = np.random.default_rng(seed)
    pushes = random_pushes(robot, surfaces, rng, count)
    compensator = BaseWrenchCompensator(robot)
    observer = MomentumWrenchObserver(compensator, OBSERVER_GAIN)
    locators = {kind: FtContactLocator(make_surfaces(kind, surfaces)) for kind in SURFACE_MODELS}
    rows = {(way, kind): [] for way in COMPENSATIONS for kind in SURFACE_MODELS}
    seconds = pushes[-1].start + DURATION + GAP
    for k, (cobot, q, v, a, reading, tau_ext) in enumerate(
            steps(robot, Scenario(forces=pushes), config, seconds)):
        start = time.perf_counter()
        wrenches = {'momentum_observer': observer.update(cobot.time, reading, q, v)}
        observed = time.perf_counter() - start
        active = [p for p in pushes
                  if p.start + RAMP + SETTLE <= cobot.time <= p.start + DURATION - RAMP]
        if k % EVERY or not active:
            continue
        start = time.perf_counter()
        wrenches['acceleration'] = compensator.contact_wrench(reading, q, v, a)
        compensated = {'momentum_observer': observed,
                       'acceleration': time.perf_counter() - start}
        truth = cobot.true_contacts()[0]
        rotation, origin = robot.link_pose(cobot.q, truth.link)
        true_point, true_force = rotation @ truth.point + origin, rotation @ truth.force
        for (way, kind), table in rows.items():
            start = time.perf_counter()
            estimate = locators[kind].locate_from_residual(q, wrenches[way], tau_ext, THRESHOLD)
            elapsed = time.perf_counter() - start + compensated[way]
            if estimate is None:
                table.append((np.linalg.norm(true_force), np.nan, np.nan, 0, 0, elapsed, 0, 0))
                continue
            table.append((
                np.linalg.norm(true_force), np.linalg.norm(estimate.point_base - true_point),
                np.linalg.norm(estimate.force_base - true_force) / np.linalg.norm(true_force),
                estimate.link == truth.link,
                robot.link_joint[estimate.link] == robot.link_joint[truth.link], elapsed,
                truth.link in (estimate.link, *estimate.ambiguous_with),
                1 + len(estimate.ambiguous_with)))
    return {key: np.array(r, dtype=float) for key, r in rows.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='fewer contacts, shorter motion')
    args = parser.parse_args()
    count, seconds = (12, 1.0) if args.quick else (60, 3.0)
    robot = RobotModel.load('panda')
    surfaces = LinkSurfaces(robot)

    print(f'\nCompensation residual in free motion ({seconds:.0f} s, RMS of ‖f‖, ‖τ‖):\n')
    print('| sensor noise | true q, q̇, q̈ (sim) | with f_Bd, τ_Bd (q̈ estimated) '
          f'| momentum observer (K = {OBSERVER_GAIN:g}/s) | weight only (f₀, τ₀) |')
    print('|---|---|---|---|---|')
    for force_noise, torque_noise in NOISE:
        config = SimConfig(ft_force_noise=force_noise, ft_torque_noise=torque_noise)
        cells = ' | '.join(f'{f:.2f} N, {t:.3f} N·m'
                           for f, t in compensation(robot, config, seconds))
        print(f'| {force_noise} N / {torque_noise} N·m | {cells} |')

    print(f'\nContacts ({count} pushes, 5–60 N; point error and force error for |F| ≥ 20 N; '
          f'link and body over all; body from the residual, threshold {THRESHOLD} N·m):\n')
    print('| sensor noise | compensation | surface | point median | point p90 | force median '
          '| link | body | link among candidates (mean count) | time median | time p99 |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    for force_noise, torque_noise in NOISE:
        config = SimConfig(ft_force_noise=force_noise, ft_torque_noise=torque_noise)
        for (way, kind), rows in contacts(robot, surfaces, config, count, seed=11).items():
            strong = rows[rows[:, 0] >= 20.0]
            print(f'| {force_noise} N / {torque_noise} N·m | {way} | {kind} '
                  f'| {1e3 * np.nanmedian(strong[:, 1]):.1f} mm '
                  f'| {1e3 * np.nanpercentile(strong[:, 1], 90):.1f} mm '
                  f'| {100 * np.nanmedian(strong[:, 2]):.2f} % '
                  f'| {100 * rows[:, 3].mean():.1f} % | {100 * rows[:, 4].mean():.1f} % '
                  f'| {100 * rows[:, 6].mean():.1f} % ({rows[:, 7].mean():.2f}) '
                  f'| {1e6 * np.median(rows[:, 5]):.0f} µs '
                  f'| {1e6 * np.percentile(rows[:, 5], 99):.0f} µs |')


if __name__ == '__main__':
    main()
