"""Seed 000 Tables 1 and 2 on the planar 4-link arm (urdf/planar_4link.urdf).

Table 1: per torque-noise level, 10⁴ random poses with a ~100 N contact on link 3 or 4 at a
random point of its 16-edge contour, the force uniform in the friction cone (μ = 0.5); the
analytic method (contact_localization.solve_planar) with and without the depth sensor's
fallback. The sensor's obstacle point is the true contact point moved 1 cm out along the
normal with 1 cm Gaussian noise per axis. Errors are means over the cases with a solution
(force magnitude |‖F̂‖ − ‖F‖|, direction ∠(F̂, F), point ‖p̂ − p‖).

Table 2: time per case of the analytic method, batched over all cases and one case per call,
against eq. 7 solved by scipy.optimize.minimize (SLSQP) on the same cases in the same run.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/seed000_planar.py [--quick]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy.optimize import minimize

from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from planar_localization import PlanarLocalizer, force_at_point, solve_planar

URDF = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'planar_4link.urdf')
MU = 0.5
NOISE = (0.0, 0.1, 0.5, 1.0, 2.0)
SEED_TABLE_1 = {0.0: (0.0, 0.0, 0.0, 0.0), 0.1: (0.41, 0.33, 0.93, 0.0),
                0.5: (2.08, 1.53, 4.63, 0.51), 1.0: (4.23, 2.89, 8.23, 6.86),
                2.0: (8.31, 5.96, 12.42, 25.51)}
SENSOR_OFFSET, SENSOR_NOISE = 0.01, 0.01   # m
# The sensor's point is ~2 cm from the contact (1 cm out, 1 cm per axis): solve_planar's spread.
SENSOR_SPREAD = 0.02


def make_cases(localizer: PlanarLocalizer, rng: np.random.Generator, count: int) -> dict:
    """Poses, geometry at each pose (base frame) and a contact on link 3 or 4 at a point
    uniform along the length of its contour (the seed draws "a random point of the link's
    surface"; drawing an edge first would put 14 of 16 contacts on the short edges of the
    joint housings)."""
    robot = localizer.robot
    q = robot.random_configuration(rng, count)
    joints, vertices, normals = (np.array(a) for a in zip(*(localizer.geometry(x) for x in q)))
    link = rng.integers(2, 4, count)
    rows = np.arange(count)
    edges = vertices.shape[2]
    lengths = np.linalg.norm(np.roll(vertices, -1, axis=2) - vertices, axis=-1)[rows, link]
    arc = np.cumsum(lengths, axis=1)
    walked = rng.uniform(0, 1, count) * arc[:, -1]
    edge = np.minimum(np.sum(arc <= walked[:, None], axis=1), edges - 1)
    along = (walked - (arc[rows, edge] - lengths[rows, edge])) / lengths[rows, edge]
    start = vertices[rows, link, edge]
    end = vertices[rows, link, (edge + 1) % edges]
    point = start + along[:, None] * (end - start)
    outward = normals[rows, link, edge]
    tilt = rng.uniform(-np.arctan(MU), np.arctan(MU), count)
    inward = -outward
    direction = np.column_stack([np.cos(tilt) * inward[:, 0] - np.sin(tilt) * inward[:, 1],
                                 np.sin(tilt) * inward[:, 0] + np.cos(tilt) * inward[:, 1]])
    force = 100.0 * direction
    # τ_i = (p − p_i) × F for the joints up to the link (seed 000 eqs. 3, 5), 0 beyond.
    offset = point[:, None, :] - joints
    tau = offset[..., 0] * force[:, None, 1] - offset[..., 1] * force[:, None, 0]
    tau[np.arange(robot.n)[None, :] > link[:, None]] = 0.0
    obstacle = (point + SENSOR_OFFSET * outward
                + SENSOR_NOISE * rng.standard_normal((count, 2)))
    return dict(q=q, joints=joints, vertices=vertices, normals=normals, link=link,
                point=point, force=force, tau=tau, obstacle=obstacle)


def errors(solution, cases, kept: np.ndarray) -> tuple[float, float, float]:
    """Mean force magnitude (N), direction (°) and point (mm) errors over the `kept` cases."""
    force, truth = solution.force[kept], cases['force'][kept]
    magnitude = np.abs(np.linalg.norm(force, axis=1) - np.linalg.norm(truth, axis=1))
    cosine = np.sum(force * truth, axis=1) / (np.linalg.norm(force, axis=1)
                                              * np.linalg.norm(truth, axis=1))
    direction = np.degrees(np.arccos(np.clip(cosine, -1, 1)))
    point = 1000 * np.linalg.norm(solution.point[kept] - cases['point'][kept], axis=1)
    return magnitude.mean(), direction.mean(), point.mean()


def solve_eq7(joints, tau, vertices, normals, link) -> tuple[np.ndarray, np.ndarray]:
    """Seed 000 eq. 7 by SLSQP: min ‖τ − J_k(p)ᵀF‖² over the point's position s along the
    contour Ω_k (edge ⌊s⌋) and F, subject to F in the friction cone of that edge (two linear
    constraints in 2-D). One start per edge, at its middle with the least-squares F there (eq.
    3 with p known); the best fit of the starts wins."""
    k = link
    corners = vertices[k]
    edges = np.roll(corners, -1, axis=0) - corners
    m = len(corners)
    half = np.arctan(MU)
    turn = np.array([[np.cos(half), -np.sin(half)], [np.sin(half), np.cos(half)]])

    def point(s):
        j = int(np.clip(np.floor(s), 0, m - 1))
        return corners[j] + (s - j) * edges[j], j

    def residual(x):
        p, _ = point(x[0])
        offset = p - joints[:k + 1]
        predicted = offset[:, 0] * x[2] - offset[:, 1] * x[1]
        return np.sum((tau[:k + 1] - predicted) ** 2) + np.sum(tau[k + 1:] ** 2)

    def cone(x):
        inward = -normals[k][point(x[0])[1]]
        left, right = turn @ inward, turn.T @ inward
        f = x[1:]
        return np.array([right[0] * f[1] - right[1] * f[0], f[0] * left[1] - f[1] * left[0]])

    best = None
    for edge in range(m):
        middle = corners[edge] + 0.5 * edges[edge]
        start = force_at_point(joints[None, :k + 1], tau[None, :k + 1], middle[None])[0]
        result = minimize(residual, np.r_[edge + 0.5, start], method='SLSQP',
                          bounds=[(0, m - 1e-9), (None, None), (None, None)],
                          constraints=[{'type': 'ineq', 'fun': cone}], options={'maxiter': 200})
        if best is None or result.fun < best.fun:
            best = result
    return point(best.x[0])[0], best.x[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='10³ cases per level, 50 for SLSQP')
    args = parser.parse_args()
    count = 1000 if args.quick else 10_000
    optimised = 50 if args.quick else 200
    localizer = PlanarLocalizer(LinkSurfaces(RobotModel.load(URDF)), mu=MU)
    rng = np.random.default_rng(0)
    cases = make_cases(localizer, rng, count)

    print(f'Table 1: {count} cases per level, links 3-4, |F| = 100 N, μ = {MU}; sensor: '
          f'obstacle {SENSOR_OFFSET * 100:.0f} cm out, σ {SENSOR_NOISE * 100:.0f} cm per axis')
    print('| σ_τ (N·m) | crossings: force (N) | direction (°) | point (mm) | no crossing '
          '| all answers: point (mm) | no answer | right link '
          '| with sensor: force | direction | point | no answer | right link '
          '| seed: force / dir / point / none |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
    timed = None
    for sigma in NOISE:
        tau = cases['tau'] + sigma * rng.standard_normal(cases['tau'].shape)
        # Tolerances of eq. 13: 3σ (at σ = 0, round-off).
        delta = max(3 * sigma, 1e-6)
        geometry = (cases['joints'], tau, cases['vertices'], cases['normals'], MU, delta, delta)
        start = time.perf_counter()
        alone = solve_planar(*geometry)
        elapsed = time.perf_counter() - start
        fused = solve_planar(*geometry, cases['obstacle'], obstacle_spread=SENSOR_SPREAD)
        crossing = alone.found & ~alone.nearest
        a = errors(alone, cases, crossing)
        every = errors(alone, cases, alone.found)
        answered = np.isfinite(fused.point).all(axis=1)
        f = errors(fused, cases, answered)
        seed = SEED_TABLE_1[sigma]
        print(f'| {sigma} | {a[0]:.3g} | {a[1]:.3g} | {a[2]:.3g} '
              f'| {100 * (1 - crossing.mean()):.2f} % '
              f'| {every[2]:.3g} | {100 * (1 - alone.found.mean()):.2f} % '
              f'| {100 * np.mean(alone.link == cases["link"]):.1f} % '
              f'| {f[0]:.3g} | {f[1]:.3g} | {f[2]:.3g} | {100 * (1 - answered.mean()):.2f} % '
              f'| {100 * np.mean(fused.link == cases["link"]):.1f} % '
              f'| {seed[0]} / {seed[1]} / {seed[2]} / {seed[3]} % |')
        if sigma == 0.5:
            timed = (tau, delta, elapsed, alone)

    tau, delta, batched, alone = timed
    single = []
    for i in range(min(count, 2000)):
        start = time.perf_counter()
        solve_planar(cases['joints'][i:i + 1], tau[i:i + 1], cases['vertices'][i:i + 1],
                     cases['normals'][i:i + 1], MU, delta, delta)
        single.append(time.perf_counter() - start)
    slsqp, right = [], 0
    for i in range(optimised):
        start = time.perf_counter()
        point, _ = solve_eq7(cases['joints'][i], tau[i], cases['vertices'][i],
                             cases['normals'][i], cases['link'][i])
        slsqp.append(time.perf_counter() - start)
        right += np.linalg.norm(point - cases['point'][i]) < 0.01
    analytic_right = np.mean(np.linalg.norm(alone.point[:optimised] - cases['point'][:optimised],
                                            axis=1) < 0.01)
    single, slsqp = 1e6 * np.array(single), 1e6 * np.array(slsqp)
    per_case = 1e6 * batched / count
    print('\nTable 2: time per case (µs), σ_τ = 0.5 N·m, same cases')
    print('| method | min | avg | max | point within 1 cm |')
    print('|---|---|---|---|---|')
    print(f'| analytic, batched over {count} cases | – | {per_case:.2f} | – '
          f'| {100 * analytic_right:.0f} % (first {optimised}) |')
    print(f'| analytic, one case per call | {single.min():.0f} | {single.mean():.0f} '
          f'| {single.max():.0f} | |')
    print(f'| eq. 7 by SLSQP, {optimised} cases (given the true link; 16 starts, one per edge) '
          f'| {slsqp.min():.0f} | {slsqp.mean():.0f} | {slsqp.max():.0f} '
          f'| {100 * right / optimised:.0f} % |')
    print(f'SLSQP/analytic: {slsqp.mean() / per_case:.0f}× batched, '
          f'{slsqp.mean() / single.mean():.1f}× one per call')


if __name__ == '__main__':
    main()
