"""Seed 000 as written: the analytic contact force and point on a planar arm (Popov 2023,
../shared/METHODS.md §000). No ROS.

`solve_planar`, vectorised over cases: the extended system (eqs. 8-10) gives the force and,
through the moment, its line of action (eqs. 11-12); the contact is where that line enters
the link's contour Ω_k (eq. 2) with the force inside the friction cone (eq. 6), within the
torque noise (W's covariance) when the noise tips the force out of the cone or moves the line
off the contour. `PlanarLocalizer` wraps it for one arm at q. The spatial arm's localizer,
which the node runs, is contact_localization.ContactLocalizer; this module reproduces the
seed's figures (benchmarks/seed000_planar.py, test/test_contact_localization_planar.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contact_estimation.core.contact.contact import (SOURCE_LIDAR_FALLBACK, SOURCE_NONE,
                                                      SOURCE_TORQUE, SOURCE_TORQUE_LIDAR,
                                                      Contact, ContactEstimate, no_contact)
from contact_estimation.core.contact.contact_localization import (LocalizationError,
                                                                   checked_torques)
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces

# Singular values below this share of the largest make the extended system rank deficient.
_RANK_TOLERANCE = 1e-9
# Planar answers within this many standard deviations of exact (eqs. 2, 6) are kept.
_GATE = 4.0
# Floor of variances and magnitudes that divide (exact data has zero noise).
_TINY = 1e-30


# --------------------------------------------------------------------------- planar method
@dataclass
class PlanarSolution:
    """`solve_planar` results for B cases; link indices are 0-based, -1 for none.

    `found`: a point of the contour that the torques explain within the noise; `nearest`
    flags those among them where the line of action misses the contour (the contour's point
    nearest the line, not a crossing); `fallback`: none found, so the point is the obstacle's
    on the contour of the sensor's link and the force that of eq. 10. `candidates` (B×n×m)
    marks the answers `candidate_points` (B×n×m×2), one per edge of each link's contour,
    that the noise allows.
    """

    link: np.ndarray
    point: np.ndarray
    force: np.ndarray
    k_min: np.ndarray
    k_max: np.ndarray
    found: np.ndarray
    nearest: np.ndarray
    fallback: np.ndarray
    residual: np.ndarray
    candidates: np.ndarray
    candidate_points: np.ndarray


def point_jacobians_t(joints: np.ndarray, point: np.ndarray) -> np.ndarray:
    """J_k(p)ᵀ (B×k×2) of seed 000 eq. 5: row i is [−(y_p − y_i), x_p − x_i]; joints B×k×2,
    point B×2."""
    offset = point[:, None, :] - joints
    return np.stack([-offset[..., 1], offset[..., 0]], axis=-1)


def extended_wrench(joints: np.ndarray, tau: np.ndarray, reference: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares W = [F_x, F_y, τ_z] at `reference` from the first k torques (seed 000 eq. 10).

    joints: B×k×2 joint axis positions, tau: B×k, reference: B×2 (the point p⁰). Returns W
    (B×3), the residual ‖J^wᵀW − τ‖ (B), whether J^w has rank 3 (B) and (J^w J^wᵀ)⁻¹
    (B×3×3): W's covariance per unit torque variance (zeros where the rank is < 3). Rank < 3
    leaves W the minimum-norm solution, not the force (statement 2), and k < 3 no W at all
    (zeros: k ≤ 2 equations in 3 unknowns always have an exact solution).
    """
    count = len(tau)
    if joints.shape[1] < 3:
        return (np.zeros((count, 3)), np.zeros(count), np.zeros(count, dtype=bool),
                np.zeros((count, 3, 3)))
    # Rows of J^wᵀ, eq. 9: [−(y⁰ − y_i), x⁰ − x_i, 1].
    rows = np.concatenate([point_jacobians_t(joints, reference),
                           np.ones(joints.shape[:2] + (1,))], axis=-1)
    # Normal equations (3×3 per case): far faster than an SVD per case; the rare rank-deficient
    # case is solved by the pseudo-inverse.
    gram = np.einsum('bki,bkj->bij', rows, rows)
    scale = np.trace(gram, axis1=1, axis2=2) / 3
    full_rank = np.abs(np.linalg.det(gram)) > _RANK_TOLERANCE * scale ** 3
    covariance = np.zeros((count, 3, 3))
    covariance[full_rank] = np.linalg.inv(gram[full_rank])
    wrench = np.einsum('bij,bkj,bk->bi', covariance, rows, tau)
    deficient = ~full_rank
    if deficient.any():
        wrench[deficient] = np.einsum('bik,bk->bi', np.linalg.pinv(rows[deficient]),
                                      tau[deficient])
    residual = np.linalg.norm(np.einsum('bki,bi->bk', rows, wrench) - tau, axis=1)
    return wrench, residual, full_rank, covariance


def line_of_action(wrench: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Coefficients (a, b, c) (B×3) of the line a x + b y + c = 0 the force acts along.

    Seed 000 eqs. 11-12 with a = F_y, b = −F_x. The points p of the line have the moment
    (p − p⁰) × F = τ_z about p⁰, so c = F_x y⁰ − F_y x⁰ − τ_z: METHODS.md and the seed print
    c = F_x x⁰ − F_y y⁰ − τ_z, with x⁰ and y⁰ swapped (eq. 11 itself gives ours).
    """
    fx, fy, tz = wrench[:, 0], wrench[:, 1], wrench[:, 2]
    return np.stack([fy, -fx, fx * reference[:, 1] - fy * reference[:, 0] - tz], axis=1)


def contour_candidates(wrench: np.ndarray, covariance: np.ndarray, reference: np.ndarray,
                       vertices: np.ndarray, normals: np.ndarray, mu: float
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per edge of each contour Ω_k (vertices, outward normals: P×m×2, edge j from vertex j
    to j+1), the answer the line of action (eqs. 11-12, from `wrench` at `reference`) gives
    and how far the noise must bend W to make it exact (seed 000 eqs. 2 and 6).

    The answer is where the line crosses the edge, or, when it misses the edge, the edge's
    end nearest the line. Its cost is the squared distance, in standard deviations per unit
    torque noise (so divide by σ_τ²), of W from the Ws that make it exact: the line's miss
    distance d over σ_d, plus the force's angle beyond the cone around the inward normal
    (|∠(n_p, F)| − atan μ) over σ_θ. σ_d and σ_θ come from W's covariance: d(W) =
    ((p − p⁰) × F − τ_z)/‖F‖ has the gradient g = [−(y − y⁰), x − x⁰, −1]/‖F‖, so
    σ_d² = gᵀ C g; the direction's σ_θ² = uᵀ C_F u/‖F‖², u ⊥ F. A force that the noise may
    have tipped out of the cone, or a line that it may have moved off a corner, keeps its
    answer. Returns the points (P×m×2), the miss distances d (P×m) and the costs (P×m).
    """
    force = wrench[:, :2]
    magnitude = np.maximum(np.linalg.norm(force, axis=1), _TINY)
    line = line_of_action(wrench, reference)
    side = np.einsum('pmi,pi->pm', vertices, line[:, :2]) + line[:, 2:]
    following = np.roll(side, -1, axis=1)
    crosses = side * following <= 0
    change = side - following
    t = np.where(crosses, np.divide(side, change, out=np.zeros_like(side), where=change != 0),
                 np.abs(side) > np.abs(following))
    points = vertices + t[..., None] * (np.roll(vertices, -1, axis=1) - vertices)
    miss = np.where(crosses, 0.0, np.minimum(np.abs(side), np.abs(following))) / magnitude[:, None]
    offset = points - reference[:, None, :]
    gradient = np.stack([-offset[..., 1], offset[..., 0], -np.ones_like(side)],
                        axis=-1) / magnitude[:, None, None]
    miss_variance = np.einsum('pmi,pij,pmj->pm', gradient, covariance, gradient)
    across = np.column_stack([-force[:, 1], force[:, 0]]) / magnitude[:, None]
    angle_variance = np.einsum('pi,pij,pj->p', across, covariance[:, :2, :2],
                               across) / magnitude ** 2
    cosine = -np.einsum('pmi,pi->pm', normals, force) / magnitude[:, None]
    beyond = np.maximum(np.arccos(np.clip(cosine, -1, 1)) - np.arctan(mu), 0.0)
    cost = (miss ** 2 / np.maximum(miss_variance, _TINY)
            + beyond ** 2 / np.maximum(angle_variance, _TINY)[:, None])
    return points, miss, cost


def nearest_on_contour(points: np.ndarray, vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nearest point of each closed polygon (B×m×2) to each point (B×2) and its distance (B)."""
    edges = np.roll(vertices, -1, axis=1) - vertices
    relative = points[:, None, :] - vertices
    t = np.clip(np.sum(relative * edges, axis=-1) / np.sum(edges * edges, axis=-1), 0, 1)
    feet = vertices + t[..., None] * edges
    distance = np.linalg.norm(points[:, None, :] - feet, axis=-1)
    nearest = np.argmin(distance, axis=1)
    rows = np.arange(len(points))
    return feet[rows, nearest], distance[rows, nearest]


def force_at_point(joints: np.ndarray, tau: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Least-squares F (B×2) of τ = J_k(p)ᵀF with p known (eq. 3): tau B×k."""
    return np.einsum('bik,bk->bi', np.linalg.pinv(point_jacobians_t(joints, point)), tau)


def link_range(tau: np.ndarray, head_residuals: np.ndarray, delta_tau: float,
               delta_w: float) -> tuple[np.ndarray, np.ndarray]:
    """k_min and k_max (0-based, B each; -1 when no torque reaches δ_τ), seed 000 eq. 13.

    k_min: the last joint with |τ_i| ≥ δ_τ (eq. 13.1). k_max: the last i whose first i
    equations a wrench still explains within δ_w (eq. 13.2); head_residuals (B×n) holds, for
    each i, the residual of `extended_wrench` over the first i torques with p* = p^i.
    """
    loaded = np.abs(tau) >= delta_tau
    n = tau.shape[1]
    k_min = np.where(loaded.any(axis=1), n - 1 - np.argmax(loaded[:, ::-1], axis=1), -1)
    consistent = head_residuals <= delta_w
    k_max = n - 1 - np.argmax(consistent[:, ::-1], axis=1)  # i = 0 … 2 always consistent
    return k_min, np.where(k_min >= 0, k_max, -1)


def solve_planar(joints: np.ndarray, tau: np.ndarray, vertices: np.ndarray,
                 normals: np.ndarray, mu: float, delta_tau: float, delta_w: float,
                 obstacle: np.ndarray | None = None, torque_noise: float | None = None,
                 obstacle_spread: float = 0.02) -> PlanarSolution:
    """Seed 000's analytic contact force and point for B cases of an n-joint planar arm.

    joints: B×n×2 joint axes; tau: B×n external torques (N·m); vertices, normals: B×n×m×2,
    the contour Ω_k of each link k (the link joint k moves) and its edges' outward normals,
    all in the base frame. `obstacle` (B×2, NaN rows where the sensor sees nothing): the
    external sensor's obstacle point, `obstacle_spread` (m) how far from the contact it may
    be. torque_noise: σ_τ (N·m), δ_w/3 when not given.

    For each link k of [k_min, k_max] (eq. 13), W from the first k torques at p⁰ = joint k
    (eq. 10) gives F and the line (eqs. 11-12); its crossings of Ω_k where F lies in the cone
    around the inward normal (eq. 6) are the seed's answers. Noise tips F out of the cone or
    moves the line off the contour, so `contour_candidates` also keeps the answers within
    `_GATE` standard deviations of exact (for a line that misses, the contour's point nearest
    it: `nearest`). Each is scored by (‖τ − J(p)ᵀF‖ over all n joints)/σ_τ squared plus its
    cost, and with the sensor plus (‖p − obstacle‖/obstacle_spread)²: the most likely wins
    (seed 000 §5 takes the link nearest the obstacle; this also weighs the torques, so an
    obstacle between two links does not pick the one the torques rule out). No answer: with
    the sensor the point is the obstacle's on Ω_{k*}, k* the link of the range nearest it,
    and the force that of eq. 10 (the seed's fallback); without, no solution (`found`
    False, point NaN, force that of link k_max).
    """
    count, n = tau.shape
    rows = np.arange(count)
    sigma = max(delta_w / 3 if torque_noise is None else torque_noise, _TINY)
    wrenches = np.zeros((count, n, 3))
    covariances = np.zeros((count, n, 3, 3))
    identified = np.zeros((count, n), dtype=bool)
    head_residuals = np.zeros((count, n))
    references = np.transpose(joints, (1, 0, 2))
    for k in range(n):
        # p⁰ = joint k: the same system gives eq. 13.2's test and link k's line.
        (wrenches[:, k], head_residuals[:, k], identified[:, k],
         covariances[:, k]) = extended_wrench(joints[:, :k + 1], tau[:, :k + 1], references[k])
    forces = wrenches[..., :2]
    k_min, k_max = link_range(tau, head_residuals, delta_tau, delta_w)
    # k_max < k_min: the loaded joints are inconsistent within δ_w; the residual scores that.
    in_range = ((np.arange(n) >= k_min[:, None])
                & (np.arange(n) <= np.maximum(k_min, k_max)[:, None]))
    # Over all n joints: the joints beyond link k must carry no torque.
    beyond = np.sqrt(np.cumsum((tau ** 2)[:, ::-1], axis=1)[:, ::-1])
    residuals = np.hypot(head_residuals, np.column_stack([beyond[:, 1:], np.zeros(count)]))
    # Eqs. 2 and 6 for the links that can hold the contact (usually one or two of n).
    points = np.full(vertices.shape, np.nan)
    miss = np.full(vertices.shape[:3], np.inf)
    cost = np.full(vertices.shape[:3], np.inf)
    case, link = np.nonzero(identified & in_range)
    points[case, link], miss[case, link], cost[case, link] = contour_candidates(
        wrenches[case, link], covariances[case, link], joints[case, link],
        vertices[case, link], normals[case, link], mu)
    cost /= sigma ** 2
    candidates = cost <= _GATE ** 2

    sees = np.zeros(count, dtype=bool) if obstacle is None else np.isfinite(obstacle).all(axis=1)
    sensor_link = np.full(count, -1)
    prior = np.full((count, 2), np.nan)
    score = np.where(candidates, (residuals[..., None] / sigma) ** 2 + cost, np.inf)
    if sees.any():
        # k*: the link of [k_min, k_max] nearest the obstacle (seed 000 §5), for the fallback.
        seen = np.flatnonzero(sees & (k_min >= 0))
        distance = np.full((len(seen), n), np.inf)
        feet = np.zeros((len(seen), n, 2))
        for k in range(n):
            feet[:, k], distance[:, k] = nearest_on_contour(obstacle[seen], vertices[seen, k])
        distance[~in_range[seen]] = np.inf
        sensor_link[seen] = np.argmin(distance, axis=1)
        prior[seen] = feet[np.arange(len(seen)), sensor_link[seen]]
        # The sensor's point weighs every answer: a Gaussian of spread `obstacle_spread`.
        gap = np.linalg.norm(points[seen] - obstacle[seen, None, None, :], axis=-1)
        score[seen] += np.nan_to_num(gap / obstacle_spread, nan=np.inf) ** 2

    best = np.argmin(score.reshape(count, -1), axis=1)
    best_link, best_edge = np.divmod(best, vertices.shape[2])
    found = np.isfinite(score.reshape(count, -1)[rows, best])
    fallback = ~found & (sensor_link >= 0)
    nearest = found & (miss[rows, best_link, best_edge] > 0)

    link = np.where(found, best_link, np.where(fallback, sensor_link, -1))
    chosen = np.where(link >= 0, link, np.maximum(k_max, 0))
    point = np.where(found[:, None], points[rows, best_link, best_edge],
                     np.where(fallback[:, None], prior, np.nan))
    force = forces[rows, chosen]
    # A fallback on a link with k < 3 joints has no force from eq. 10: take the one at the point.
    unidentified = np.flatnonzero(fallback & ~identified[rows, chosen])
    residual = residuals[rows, chosen]
    for k in np.unique(chosen[fallback]):
        cases = np.flatnonzero(fallback & (chosen == k))
        free = unidentified[chosen[unidentified] == k]
        force[free] = force_at_point(joints[free, :k + 1], tau[free, :k + 1], point[free])
        on_link = np.zeros_like(tau[cases])
        on_link[:, :k + 1] = np.einsum('bki,bi->bk', point_jacobians_t(
            joints[cases, :k + 1], point[cases]), force[cases])
        residual[cases] = np.linalg.norm(tau[cases] - on_link, axis=1)
    return PlanarSolution(link, point, force, k_min, k_max, found, nearest, fallback, residual,
                          candidates, points)


class PlanarLocalizer:
    """Seed 000's planar method on a planar arm (every joint axis along the base's z).

    mu: friction coefficient of eq. 6; delta_tau (N·m) and delta_w (N·m): the tolerances of
    eqs. 13.1 and 13.2; torque_noise: σ_τ (N·m) of the torques, δ_w/3 when not given;
    segments: edges of each contour Ω_k (16 in the seed).
    """

    def __init__(self, surfaces: LinkSurfaces, mu: float = 0.5, delta_tau: float = 0.5,
                 delta_w: float = 1.0, torque_noise: float | None = None, segments: int = 16):
        if mu <= 0 or delta_tau <= 0 or delta_w <= 0 or (torque_noise or 1) <= 0:
            raise LocalizationError('mu, delta_tau, delta_w and torque_noise must be positive')
        self.surfaces = surfaces
        self.robot: RobotModel = surfaces.robot
        _, axes = self.robot.joint_axes(np.zeros(self.robot.n))
        if not np.allclose(np.abs(axes[:, 2]), 1.0, atol=1e-9):
            raise LocalizationError(f'{self.robot.name!r} is not a planar arm: every joint '
                                    'axis must be along the base z axis')
        self.mu, self.delta_tau, self.delta_w = mu, delta_tau, delta_w
        self.torque_noise = torque_noise
        self.links = list(self.robot.joint_links)
        contours = [surfaces.planar_contour(link, segments) for link in self.links]
        self._vertices = np.array([v for v, _ in contours])   # n×m×2, link frames
        self._normals = np.array([nrm for _, nrm in contours])

    def geometry(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Joint axes (n×2) and contours (vertices, outward normals: n×m×2) in the base frame
        at q."""
        origins, _ = self.robot.joint_axes(q)
        poses = self.robot.link_poses(q, self.links)
        turn = np.array([r[:2, :2] for r, _ in poses])
        shift = np.array([p[:2] for _, p in poses])
        vertices = np.einsum('kij,kmj->kmi', turn, self._vertices) + shift[:, None, :]
        normals = np.einsum('kij,kmj->kmi', turn, self._normals)
        return origins[:, :2], vertices, normals

    def solve(self, q: np.ndarray, tau: np.ndarray,
              obstacle: np.ndarray | None = None) -> PlanarSolution:
        """`solve_planar` for one case (obstacle: a base-frame point the sensor sees, or None)."""
        joints, vertices, normals = self.geometry(q)
        seen = None if obstacle is None else np.asarray(obstacle, dtype=float)[None, :2]
        return solve_planar(joints[None], np.asarray(tau, dtype=float)[None], vertices[None],
                            normals[None], self.mu, self.delta_tau, self.delta_w, seen,
                            self.torque_noise)

    def estimate(self, q: np.ndarray, tau: np.ndarray,
                 obstacle: np.ndarray | None = None) -> ContactEstimate:
        """The contact explaining τ at q, as a `ContactEstimate` (planar points: z = 0)."""
        tau = checked_torques(tau, self.robot.n)
        solution = self.solve(q, tau, obstacle)
        if solution.k_min[0] < 0:
            return no_contact()
        span = (self.links[solution.k_min[0]], self.links[solution.k_max[0]])
        marked = solution.candidates[0]
        candidate_links = [self.links[k] for k in np.nonzero(marked)[0]]
        candidates = _planar_to_3d(solution.candidate_points[0][marked])
        residual = float(solution.residual[0])
        consistent = solution.k_max[0] >= solution.k_min[0] and residual <= self.delta_w
        if solution.link[0] < 0:
            return ContactEstimate(None, span, SOURCE_NONE, residual, False, candidates,
                                   candidate_links,
                                   'the line of action comes near no link contour within '
                                   'the friction cone, noise allowed, and the sensor sees no '
                                   'obstacle')
        source = (SOURCE_LIDAR_FALLBACK if solution.fallback[0] else
                  SOURCE_TORQUE_LIDAR if obstacle is not None else SOURCE_TORQUE)
        message = ('no crossing within the friction cone: the contour point nearest the line '
                   'of action' if solution.nearest[0] else '')
        return self._in_link_frame(q, self.links[solution.link[0]],
                                   _planar_to_3d(solution.point)[0],
                                   _planar_to_3d(solution.force)[0], span, source, residual,
                                   consistent, candidates, candidate_links, message)

    def _in_link_frame(self, q, link, point, force, span, source, residual, consistent,
                       candidates, candidate_links, message) -> ContactEstimate:
        rotation, origin = self.robot.link_pose(q, link)
        contact = Contact(link, rotation.T @ (point - origin), rotation.T @ force, point, force)
        return ContactEstimate(contact, span, source, residual, bool(consistent), candidates,
                               candidate_links, message)


def _planar_to_3d(xy: np.ndarray) -> np.ndarray:
    return np.concatenate([xy, np.zeros(xy.shape[:-1] + (1,))], axis=-1)


