"""Contact localization on the simulated Panda, with and without the sim cobot's lidar.

Per torque-noise level (0.05 and 0.2 N·m): random poses, a contact on links 2-7 at a random
exposed surface point (one the finger could reach: not under another link) of a 5 mm
sampling the localizer never saw (it scores its own 2 cm samples), a 10-60 N force in the
friction cone (μ = 0.5), τ = J(p)ᵀF + noise. The obstacle is a forearm reaching in along the
surface normal (a capsule, radius 4 cm, 30 cm long) touching the link at the contact point
in the sim cobot's MuJoCo scene; its lidar scans the scene at that pose and `LidarFusion`
turns the scan into per-link obstacles. Point and force errors are over
the estimates on the right link; "≥ 20 N" rows keep only forces of at least 20 N; "lidar saw
the contact": the cases with an obstacle point within 5 cm of the contact after the fusion.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/localization_panda.py [--quick]
"""
from __future__ import annotations

import argparse
import time

import mujoco
import numpy as np

from contact_estimation.core.contact.contact_localization import (ContactLocalizer,
                                                                  LocalizerConfig)
from contact_estimation.core.contact.lidar_fusion import CloudConfig, LidarFusion
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.mjcf import OBSTACLE_PREFIX
from contact_estimation.core.sim.scenario import Obstacle, Scenario
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.identification.trajectory import WaypointTrajectory

MU = 0.5
NOISE = (0.05, 0.2)
LINKS = [f'panda_link{i}' for i in range(2, 8)]
ARM_RADIUS, ARM_HALF_LENGTH = 0.04, 0.15  # m
SEEN_NEAR = 0.05  # m: the lidar "saw the contact" when an obstacle point is this close to it


def contact_cases(robot, truth, rng, per_link):
    """(q, link, point, force) on exposed points, forces 10-60 N in the cone."""
    cases = []
    for link in LINKS:
        points, normals = truth.surface_points(link)
        while sum(c[1] == link for c in cases) < per_link:
            q = robot.random_configuration(rng, 1)[0]
            i = rng.integers(len(points))
            rotation, origin = robot.link_pose(q, link)
            outside = rotation @ (points[i] + 0.004 * normals[i]) + origin
            hit = truth.closest_points(q, outside[None])
            if truth.link_names(hit.link)[0] != link or hit.distance[0] < 0.003:
                continue
            inward = -normals[i]
            helper = np.array([1.0, 0, 0]) if abs(inward[0]) < 0.9 else np.array([0, 1.0, 0])
            first = np.cross(inward, helper)
            first /= np.linalg.norm(first)
            second = np.cross(inward, first)
            tilt, turn = rng.uniform(0, np.arctan(MU)), rng.uniform(0, 2 * np.pi)
            direction = (np.cos(tilt) * inward
                         + np.sin(tilt) * (np.cos(turn) * first + np.sin(turn) * second))
            cases.append((q, link, points[i], rng.uniform(10, 60) * direction, normals[i]))
    return cases


class LidarScene:
    """The sim cobot's MuJoCo scene with one forearm, posed per case, scanned by its lidar."""

    def __init__(self, robot):
        arm = Obstacle('forearm', 'capsule', (ARM_RADIUS, ARM_HALF_LENGTH),
                       np.array([5.0, 5.0, 5.0]))
        self.cobot = SimulatedCobot(robot, WaypointTrajectory([np.zeros(robot.n)], []),
                                    Scenario(obstacles=[arm]), SimConfig(noise_seed=1))
        self.geom = self.cobot.model.geom(OBSTACLE_PREFIX + 'forearm').id

    def scan(self, q, touch, outward):
        """Lidar points with the arm at q and the forearm's tip touching `touch` (base
        frame), its axis along `outward`."""
        self.cobot.data.qpos[:] = q
        self.cobot.model.geom_pos[self.geom] = (touch + (ARM_RADIUS + ARM_HALF_LENGTH + 0.002)
                                                * outward)
        quaternion = np.zeros(4)
        mujoco.mju_quatZ2Vec(quaternion, outward)
        self.cobot.model.geom_quat[self.geom] = quaternion
        mujoco.mj_forward(self.cobot.model, self.cobot.data)
        # mj_forward moves a world-body geom to geom_pos but keeps its orientation from
        # compile time: without this the forearm stood upright, its centre 19 cm from the link.
        orientation = np.zeros(9)
        mujoco.mju_quat2Mat(orientation, quaternion)
        self.cobot.data.geom_xmat[self.geom] = orientation
        return self.cobot.lidar_points()


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
    scene = LidarScene(robot)
    fusion = LidarFusion(surfaces, CloudConfig(self_margin=0.02, cluster_min_points=3))
    proximities, sight = [], []
    for q, link, point, _, normal in cases:
        rotation, origin = robot.link_pose(q, link)
        touch = rotation @ point + origin
        obstacles = fusion.update(0.0, q, scene.scan(q, touch, rotation @ normal))
        proximities.append(obstacles.proximity)
        # How close to the contact the lidar saw the forearm (the arm hides its tip from a
        # lidar on the other side).
        sight.append(np.min(np.linalg.norm(obstacles.points - touch, axis=1), initial=np.inf))

    print(f'{len(cases)} contacts ({per_link} per link), 10-60 N, μ = {MU}; localizer samples '
          f'2 cm apart, lidar {scene.cobot.config.lidar.rows}×{scene.cobot.config.lidar.columns}'
          f' rays')
    for sigma in NOISE:
        # The lidar rows are ~5 cm apart at the arm: obstacles within 20 cm count, a loose prior.
        localizer = ContactLocalizer(surfaces, LocalizerConfig(
            mu=MU, delta_tau=4 * sigma, delta_w=5 * sigma, contact_distance=0.2,
            prior_radius=0.08))
        rows, times = [], []
        for (q, link, point, force, _), proximity, seen in zip(cases, proximities, sight):
            rotation, _ = robot.link_pose(q, link)
            tau = (robot.point_jacobian(q, link, point).T @ (rotation @ force)
                   + sigma * rng.standard_normal(robot.n))
            start = time.perf_counter()
            alone = localizer.estimate(q, tau)
            times.append(time.perf_counter() - start)
            start = time.perf_counter()
            fused = localizer.estimate(q, tau, proximity)
            times.append(time.perf_counter() - start)
            rows.append((link, np.linalg.norm(force), _link(alone) == link, _link(fused) == link,
                         fused.source) + _errors(fused, link, point, force)
                        + (seen <= SEEN_NEAR,))
        _table(sigma, rows)
        seen = np.mean([np.isfinite(p.distance).any() for p in proximities])
        print(f'the lidar saw an obstacle next to the arm in {100 * seen:.0f} % of the cases, '
              f'within {100 * SEEN_NEAR:.0f} cm of the contact in '
              f'{100 * np.mean(np.array(sight) <= SEEN_NEAR):.0f} % (median distance '
              f'{100 * np.median(sight):.0f} cm)')
        times = 1000 * np.array(times)
        print(f'time per estimate: median {np.median(times):.2f} ms, p95 '
              f'{np.percentile(times, 95):.2f} ms\n')


def _link(estimate) -> str | None:
    return estimate.contact.link if estimate.found else None


def _errors(estimate, link, point, force):
    """Point error (mm), force magnitude error (%), direction error (°); NaN off the link."""
    if _link(estimate) != link:
        return np.nan, np.nan, np.nan
    found = estimate.contact
    magnitude = abs(np.linalg.norm(found.force) - np.linalg.norm(force))
    cosine = found.force @ force / (np.linalg.norm(found.force) * np.linalg.norm(force) + 1e-12)
    return (1000 * np.linalg.norm(found.point - point),
            100 * magnitude / np.linalg.norm(force), np.degrees(np.arccos(np.clip(cosine, -1, 1))))


def _table(sigma, rows):
    print(f'σ_τ = {sigma} N·m')
    print('| link | right link, torque only | right link, with lidar '
          f'| lidar saw the contact (≤ {100 * SEEN_NEAR:.0f} cm): cases, right link '
          '| lidar fallback | point median / 95 % (mm) | ≥ 20 N: point median '
          '| force median (%) | direction median (°) |')
    print('|---|---|---|---|---|---|---|---|---|')
    for link in LINKS + ['all']:
        mine = [r for r in rows if link in ('all', r[0])]
        point = np.array([r[5] for r in mine], dtype=float)
        strong = np.array([r[5] for r in mine if r[1] >= 20], dtype=float)
        force = np.array([r[6] for r in mine], dtype=float)
        direction = np.array([r[7] for r in mine], dtype=float)
        fallback = np.mean([r[4] == 'lidar fallback' for r in mine])
        near = [r[3] for r in mine if r[8]]
        print(f'| {link.replace("panda_", "")} | {100 * np.mean([r[2] for r in mine]):.1f} % '
              f'| {100 * np.mean([r[3] for r in mine]):.1f} % '
              f'| {len(near)}, {100 * np.mean(near) if near else np.nan:.0f} % '
              f'| {100 * fallback:.1f} % '
              f'| {np.nanmedian(point):.1f} / {np.nanpercentile(point, 95):.1f} '
              f'| {np.nanmedian(strong):.1f} | {np.nanmedian(force):.1f} '
              f'| {np.nanmedian(direction):.1f} |')


if __name__ == '__main__':
    main()
