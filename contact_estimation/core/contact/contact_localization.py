"""Which link was hit, where and how hard, from the external joint torques (seed 000). No ROS.

Seed 000 (Popov 2023, ../shared/METHODS.md §000): a point force F acting ON the robot at a
point p of link k gives τ_ext = J_k(p)ᵀF (eq. 3, the project's convention; the seed writes
the same sign). Joints beyond link k feel nothing, so the last loaded joint bounds k from
below (eq. 13.1) and the consistency of the first i equations bounds it from above (eq. 13.2).

- The seed's analytic method on its planar arm (`solve_planar`, `PlanarLocalizer`) is in
  benchmarks/planar_localization.py: the reproduction of the seed's figures (seed000_planar.py).
- `ContactLocalizer`: the same on a spatial arm. Every surface sample of the candidate links
  is scored at once by its least-squares residual; where the link's Jacobian has rank 6 the
  wrench's line of action is cast into the link's mesh; the best are refined on the surface.
  A lidar's view (`LinkProximity`, from `lidar_fusion`) picks the link and a prior point.

One contact at a time: torques that no single point force explains are reported as such.

Every estimate is a `core/contact/contact.ContactEstimate`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import open3d as o3d
from scipy.spatial import cKDTree

from contact_estimation.core.compiled import kernel
from contact_estimation.core.contact.contact import (SOURCE_LIDAR_FALLBACK, SOURCE_NONE,
                                                      SOURCE_TORQUE, SOURCE_TORQUE_LIDAR,
                                                      Contact, ContactEstimate, no_contact)
from contact_estimation.core.contact.ft_contact import line_of_action as spatial_line_of_action
from contact_estimation.core.contact.lidar_fusion import LinkProximity, link_scenes
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.settings import checked, setting


class LocalizationError(ValueError):
    """The robot or the input does not fit the localizer."""


def checked_torques(tau, n: int) -> np.ndarray:
    """`tau` as n finite joint torques; LocalizationError otherwise."""
    tau = np.asarray(tau, dtype=float)
    if tau.shape != (n,):
        raise LocalizationError(f'expected {n} joint torques, got shape {tau.shape}')
    if not np.isfinite(tau).all():
        raise LocalizationError('joint torques must be finite')
    return tau


# ------------------------------------------------------------------------------ spatial arm
def torque_maps(jacobians: np.ndarray, points: np.ndarray) -> np.ndarray:
    """J(p)ᵀ (M×n×3) for M points p (M×3) fixed on links with 6×n frame Jacobians (M×6×n).

    Point, Jacobian and force in the same frame (here: the link's): a force F ON the robot
    at p gives τ = J_vᵀF + J_ωᵀ(p × F) = (J_vᵀ + J_ωᵀ[p]×)F, seed 000 eq. 3 in 3D. One
    expression for every point at once, no loop.
    """
    linear, angular = jacobians[:, :3], jacobians[:, 3:]
    x, y, z = (points[:, i, None] for i in range(3))
    return np.stack([linear[:, 0] + angular[:, 1] * z - angular[:, 2] * y,
                     linear[:, 1] + angular[:, 2] * x - angular[:, 0] * z,
                     linear[:, 2] + angular[:, 0] * y - angular[:, 1] * x], axis=-1)


def project_to_cone(force: np.ndarray, inward: np.ndarray, mu: float) -> np.ndarray:
    """Nearest force (M×3) inside the friction cone of half-angle atan μ around the unit
    inward normals (seed 000 eq. 6): the projection onto a second-order cone."""
    force = np.ascontiguousarray(force, dtype=float)
    inward = np.ascontiguousarray(inward, dtype=float)
    projected = np.empty_like(force)
    _project_each(force, inward, float(mu), projected)
    return projected


@kernel
def _project_each(force, inward, mu, out):
    """`project_to_cone` of each row of force (M×3) into `out`."""
    for k in range(force.shape[0]):
        out[k, 0], out[k, 1], out[k, 2] = into_cone(force[k, 0], force[k, 1], force[k, 2],
                                                    inward[k, 0], inward[k, 1], inward[k, 2],
                                                    mu)


@kernel
def into_cone(fx, fy, fz, nx, ny, nz, mu):
    """The force (fx, fy, fz) projected onto the friction cone of half-angle atan μ around
    the unit inward normal (nx, ny, nz) (seed 000 eq. 6): kept inside it, zero where it
    points out of the polar cone, else onto the cone's rim."""
    normal = fx * nx + fy * ny + fz * nz
    tx, ty, tz = fx - normal * nx, fy - normal * ny, fz - normal * nz
    slip = np.sqrt(tx * tx + ty * ty + tz * tz)
    if slip <= mu * normal:
        return fx, fy, fz
    if mu * slip <= -normal:
        return 0.0, 0.0, 0.0
    on_rim = (normal + mu * slip) / (1 + mu * mu)
    if slip > 0:
        tx, ty, tz = tx / slip, ty / slip, tz / slip
    else:
        tx, ty, tz = 0.0, 0.0, 0.0
    return on_rim * (nx + mu * tx), on_rim * (ny + mu * ty), on_rim * (nz + mu * tz)


def fit_forces(maps: np.ndarray, tau: np.ndarray, inward: np.ndarray,
               mu: float) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares force of τ = J(p)ᵀF at each point (maps: M×n×3), kept in the friction
    cone, and the residual ‖τ − J(p)ᵀF‖ (M). A point with fewer than 3 loaded joints leaves a
    family of forces: a small ridge takes its smallest."""
    transposed = np.transpose(maps, (0, 2, 1))
    gram = transposed @ maps
    ridge = 1e-9 * np.trace(gram, axis1=1, axis2=2).max(initial=1.0)
    force = np.linalg.solve(gram + ridge * np.eye(3), transposed @ tau[:, None])
    force = project_to_cone(force[..., 0], inward, mu)
    return force, np.linalg.norm(tau - (maps @ force[..., None])[..., 0], axis=1)


def spatial_link_range(tau: np.ndarray, jacobians: np.ndarray, delta_tau: float,
                       delta_w: float) -> tuple[int, int]:
    """k_min and k_max (0-based joint indices; -1, -1 without a torque ≥ δ_τ), seed 000 eq. 13
    with the planar wrench [F_x, F_y, τ_z] replaced by the spatial [F; M]: jacobians (n of
    6×n) are the frame Jacobians of the links the joints move; k_max is the last i whose first i
    torques a wrench on link i explains within δ_w (always so for i ≤ 6)."""
    loaded = np.flatnonzero(np.abs(tau) >= delta_tau)
    if not len(loaded):
        return -1, -1
    k_max = min(len(tau), 6) - 1
    for i in range(k_max + 1, len(tau)):
        head = jacobians[i][:, :i + 1].T
        wrench = np.linalg.lstsq(head, tau[:i + 1], rcond=None)[0]
        if np.linalg.norm(head @ wrench - tau[:i + 1]) <= delta_w:
            k_max = i
    return int(loaded[-1]), k_max


def moving_link_samples(surfaces: LinkSurfaces) -> tuple:
    """The surface samples both localizers score: the links with a surface that a joint
    moves, their joints, their index in `surfaces.links`, their samples in one array (S×3,
    each in its link's frame), the inward normals there, the index (into the links) of each
    sample's link, and how far refinement may slide a sample (the typical distance to the
    next one, m)."""
    robot = surfaces.robot
    links = [link for link in surfaces.links if link in robot.link_joint]
    samples = [surfaces.surface_points(link) for link in links]
    points = np.vstack([p for p, _ in samples])
    return (links, np.array([robot.link_joint[link] for link in links]),
            np.array([surfaces.link_index(link) for link in links]), points,
            -np.vstack([normals for _, normals in samples]),
            np.repeat(np.arange(len(links)), [len(p) for p, _ in samples]),
            float(np.median(cKDTree(points).query(points, k=2)[0][:, 1])))


@dataclass(frozen=True)
@checked
class LocalizerConfig:
    """A contact localizer's settings (`ContactLocalizer`; the contact_localizer node gives
    the same to `FusedContactEstimator`). normal_slack stands for the error of a mesh facet's
    normal against the curved surface it stands for."""

    mu: float = setting(0.5, 'friction coefficient μ of the contact (seed 000 eq. 6)',
                        range=(0.01, 5.0))
    normal_slack: float = setting(
        0.15, 'widens the friction cone by the error of a mesh normal, rad (< π/2 − atan μ)',
        range=(0.0, 1.5))
    delta_tau: float = setting(
        0.3, 'δ_τ of seed 000 eq. 13: a joint torque below this counts as zero, N·m',
        range=(1e-4, 100.0))
    delta_w: float = setting(
        0.5, 'δ_w of seed 000 eq. 13, and the fit residual that counts as explained, N·m (a '
        'few times the residual noise; the torque noise is δ_w/5)', range=(1e-4, 100.0))
    contact_distance: float = setting(
        0.1, 'an obstacle farther than this from every link is not the contact, m',
        range=(1e-3, 2.0))
    prior_radius: float = setting(
        0.05, "how far the contact may lie from the cloud's obstacle point, m",
        range=(1e-3, 2.0))
    refine: int = setting(4, 'best samples refined on the surface per estimate',
                          range=(1, 100))

    def __post_init__(self):
        if self.normal_slack >= np.pi / 2 - np.arctan(self.mu):
            raise LocalizationError(f'normal_slack = {self.normal_slack:g} rad must be below '
                                    f'π/2 − atan(mu) = {np.pi / 2 - np.arctan(self.mu):g} '
                                    f'(mu = {self.mu:g}): the widened cone would be a '
                                    'half-space')

    @property
    def cone_mu(self) -> float:
        """μ of the friction cone widened by `normal_slack`."""
        return float(np.tan(np.arctan(self.mu) + self.normal_slack))


class ContactLocalizer:
    """Seed 000 on a spatial arm: the link, point and force of one point contact from τ_ext.

    Candidates are the links of joints k_min … k_max (eq. 13). Every surface sample of those
    links (`LinkSurfaces.surface_points`) gets, in one vectorised pass, its least-squares
    force within the friction cone and its residual ‖τ − J(p)ᵀF‖ over all joints; the samples
    within δ_w are the ambiguity. The best samples, and where the link's Jacobian has rank 6
    the entry point of the wrench's line of action into the link's mesh (eqs. 10-12 in 3D),
    are refined on the surface by Gauss-Newton. With a cloud (`LinkProximity`), the obstacle's
    point on each link of the range within `contact_distance` of it is a prior of spread
    `prior_radius` (seed 000 §5 picks the link nearest the cloud; the prior weighs that
    against the torques' fit); when no point explains τ, the point is the cloud's on the
    nearest link and the force the torques' at it (the seed's fallback).

    `config`: `LocalizerConfig`.
    """

    def __init__(self, surfaces: LinkSurfaces, config: LocalizerConfig = LocalizerConfig()):
        self.surfaces = surfaces
        self.robot: RobotModel = surfaces.robot
        self.config = config
        self.delta_tau, self.delta_w = config.delta_tau, config.delta_w
        self.mu = config.cone_mu
        self.contact_distance, self.prior_radius = config.contact_distance, config.prior_radius
        self.refine = config.refine
        (self.links, self.link_joint, self._surface_index, self._points, self._inward,
         self._sample_link, self.slide) = moving_link_samples(surfaces)
        scenes = link_scenes(surfaces)
        self._scenes = [scenes[i] for i in self._surface_index]
        self._triangle_normals = [np.asarray(surfaces.mesh(link).triangle_normals)
                                  for link in self.links]
        # One kinematics pass per estimate: the surface links, then the joints' other links.
        self._frames = self.links + [link for link in self.robot.joint_links
                                     if link not in self.links]
        self._joint_frames = [self._frames.index(link) for link in self.robot.joint_links]

    def estimate(self, q: np.ndarray, tau: np.ndarray,
                 proximity: LinkProximity | None = None) -> ContactEstimate:
        """The point contact explaining τ_ext at q; `proximity`: the cloud's view, or None."""
        tau = checked_torques(tau, self.robot.n)
        q = np.asarray(q, dtype=float)
        rotations, origins, frame_jacobians = self.robot.link_kinematics(q, self._frames)
        k_min, k_max = spatial_link_range(tau, frame_jacobians[self._joint_frames],
                                          self.delta_tau, self.delta_w)
        if k_min < 0:
            return no_contact()
        span = (self.robot.joint_links[k_min], self.robot.joint_links[max(k_min, k_max)])
        in_range = (self.link_joint >= k_min) & (self.link_joint <= max(k_min, k_max))
        jacobians = frame_jacobians[:len(self.links)]
        priors, nearest = self._priors(proximity, in_range)
        samples = np.flatnonzero(in_range[self._sample_link])
        owner = self._sample_link[samples]
        points, inward = self._points[samples], self._inward[samples]
        forces, residuals = fit_forces(torque_maps(jacobians[owner], points), tau, inward,
                                       self.mu)
        explained = residuals <= self.delta_w
        candidates = (np.einsum('mij,mj->mi', rotations[owner[explained]], points[explained])
                      + origins[owner[explained]])
        candidate_links = [self.links[i] for i in owner[explained]]

        cost = self._cost(residuals, points, priors, owner)
        seeds = samples[np.argsort(cost)[:self.refine]]
        line_links, line_points = self._line_hits(tau, jacobians, in_range)
        link, point, force, residual = self._refine(
            tau, jacobians, np.concatenate([self._sample_link[seeds], line_links]),
            np.vstack([self._points[seeds], line_points]), priors)

        source = SOURCE_TORQUE_LIDAR if nearest >= 0 else SOURCE_TORQUE
        if residual > self.delta_w:
            if nearest < 0:
                return ContactEstimate(None, span, SOURCE_NONE, residual, False, candidates,
                                       candidate_links,
                                       f'inconsistent with one point contact: the best '
                                       f'residual {residual:.3g} N·m exceeds delta_w')
            # Seed 000's fallback: the point from the cloud, the force from the torques.
            link, point, source = nearest, priors[nearest], SOURCE_LIDAR_FALLBACK
            inward = self._onto_surface(np.array([link]), point[None])[1]
            force, fit = fit_forces(torque_maps(jacobians[[link]], point[None]), tau, inward,
                                    self.mu)
            force, residual = force[0], float(fit[0])
        rotation, origin = rotations[link], origins[link]
        contact = Contact(self.links[link], point, force, rotation @ point + origin,
                          rotation @ force)
        return ContactEstimate(contact, span, source, residual, residual <= self.delta_w,
                               candidates, candidate_links)

    # ------------------------------------------------------------------ pieces
    def _priors(self, proximity: LinkProximity | None,
                in_range: np.ndarray) -> tuple[np.ndarray | None, int]:
        """Per link (L×3, link frame; NaN rows: none) the cloud's obstacle point on the links
        of the range with an obstacle within `contact_distance`, and the nearest such link
        (seed 000's k*; -1 when none, and then None for the priors)."""
        if proximity is None:
            return None, -1
        distance = np.asarray(proximity.distance)[self._surface_index]
        near = in_range & (distance <= self.contact_distance)
        if not near.any():
            return None, -1
        priors = np.where(near[:, None], np.asarray(proximity.surface_point)[self._surface_index],
                          np.nan)
        return priors, int(np.argmin(np.where(near, distance, np.inf)))

    def _cost(self, residuals: np.ndarray, points: np.ndarray, priors: np.ndarray | None,
              links: np.ndarray) -> np.ndarray:
        """(r/δ_w)² plus, with a cloud, (‖p − prior‖/prior_radius)², prior = the obstacle's
        point on the sample's link: the negative log posterior up to constants. A link the
        cloud sees no obstacle next to costs as if its prior were `contact_distance` away
        (the seed picks the link nearest the cloud; this lets strong torque evidence win)."""
        cost = (residuals / self.delta_w) ** 2
        if priors is None:
            return cost
        gap = np.linalg.norm(points - priors[links], axis=1)
        gap = np.where(np.isfinite(gap), gap, self.contact_distance)
        return cost + (gap / self.prior_radius) ** 2

    def _line_hits(self, tau, jacobians, in_range) -> tuple[np.ndarray, np.ndarray]:
        """Where the wrench's line of action enters each candidate link whose Jacobian has
        rank 6 (the wrench is identifiable, seed 000 statement 2 in 3D), link frames."""
        links, points = [], []
        for link in np.flatnonzero(in_range):
            head = jacobians[link][:, :self.link_joint[link] + 1].T
            if head.shape[0] < 6:
                continue
            wrench, _, rank, _ = np.linalg.lstsq(head, tau[:head.shape[0]], rcond=None)
            if rank < 6 or not np.any(wrench[:3]):
                continue
            # The line {r : r × F = M} (seed 004's eq. 21 solution, the same line).
            nearest, direction = spatial_line_of_action(wrench[:3], wrench[3:])
            start = nearest - _RAY_LENGTH / 2 * direction
            # Every place the line enters the mesh (a concave link may be entered twice).
            hits = self._scenes[link].list_intersections(o3d.core.Tensor(
                np.r_[start, direction][None].astype(np.float32)))
            distance = hits['t_hit'].numpy().astype(float)
            entering = self._triangle_normals[link][hits['primitive_ids'].numpy()] @ direction < 0
            links.extend([link] * int(entering.sum()))
            points.extend(start + np.outer(distance[entering], direction))
        return np.array(links, dtype=int), np.array(points).reshape(-1, 3)

    def _refine(self, tau, jacobians, links, points, priors):
        """Gauss-Newton on the surface for the point and force of every start at once: the
        point slides in the tangent plane of its start (at most `slide` from it), then drops
        onto the mesh. Returns the best of the starts and their refinements: link, point,
        force (link frame) and residual."""
        inward = self._onto_surface(links, points)[1]
        basis = _tangent_basis(inward)
        tangents = np.transpose(basis, (0, 2, 1))
        jac = jacobians[links]
        offset = np.zeros((len(links), 2))
        force, _ = fit_forces(torque_maps(jac, points), tau, inward, self.mu)
        weight = 1.0 / self.delta_w
        for _ in range(_GAUSS_NEWTON_STEPS):
            moved = points + np.einsum('kij,kj->ki', basis, offset)
            maps = torque_maps(jac, moved)
            error = weight * (tau - np.einsum('kni,ki->kn', maps, force))
            # ∂(J(p)ᵀF)/∂p = J_ωᵀ ∂(p × F)/∂p = −J_ωᵀ[F]×: along tangent b, J_ωᵀ(b × F).
            along = np.einsum('kin,kli->knl', jac[:, 3:], np.cross(tangents, force[:, None, :]))
            rows = weight * np.concatenate([along, maps], axis=2)       # k×n×5
            if priors is not None:
                prior = priors[links]
                seen = np.isfinite(prior[:, :1]) / self.prior_radius   # 0: no prior there
                prior_rows = np.concatenate([basis, np.zeros((len(links), 3, 3))], axis=2)
                error = np.concatenate([error, seen * np.nan_to_num(prior - moved)], axis=1)
                rows = np.concatenate([rows, seen[..., None] * prior_rows], axis=1)
            normal = np.einsum('kni,knj->kij', rows, rows) + _DAMPING_5
            step = np.linalg.solve(normal, np.einsum('kni,kn->ki', rows, error)[..., None])[..., 0]
            offset += step[:, :2]
            length = np.linalg.norm(offset, axis=1, keepdims=True)
            offset *= np.minimum(1.0, self.slide / np.maximum(length, 1e-12))
            force = force + step[:, 2:]
        moved, inward_moved = self._onto_surface(
            links, points + np.einsum('kij,kj->ki', basis, offset))
        links = np.concatenate([links, links])
        points = np.vstack([points, moved])
        force, residual = fit_forces(torque_maps(jacobians[links], points), tau,
                                     np.vstack([inward, inward_moved]), self.mu)
        best = int(np.argmin(self._cost(residual, points, priors, links)))
        return links[best], points[best], force[best], float(residual[best])

    def _onto_surface(self, links, points) -> tuple[np.ndarray, np.ndarray]:
        """Nearest points of the links' meshes and the inward normals there (link frames)."""
        surface, inward = points.copy(), np.zeros_like(points)
        for link in np.unique(links):
            mine = links == link
            result = self._scenes[link].compute_closest_points(
                o3d.core.Tensor(points[mine].astype(np.float32)))
            surface[mine] = result['points'].numpy()
            inward[mine] = -result['primitive_normals'].numpy()
        return surface, inward



# Length of the ray along the line of action through a link (m): longer than any link.
_RAY_LENGTH = 4.0
# Gauss-Newton refinement: iterations and Levenberg damping.
_GAUSS_NEWTON_STEPS = 3
_DAMPING_5 = 1e-9 * np.eye(5)


def _tangent_basis(normals: np.ndarray) -> np.ndarray:
    """Two unit vectors (K×3×2) spanning the plane normal to each unit normal (K×3)."""
    helper = np.where(np.abs(normals[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
    first = _cross_rows(normals, helper)
    first /= np.linalg.norm(first, axis=1, keepdims=True)
    return np.stack([first, _cross_rows(normals, first)], axis=2)


def _cross_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b of each row (K×3): np.cross's arithmetic without its per-call overhead (a
    fifth of a refinement's time on a few seeds)."""
    a0, a1, a2 = a[:, 0], a[:, 1], a[:, 2]
    b0, b1, b2 = b[:, 0], b[:, 1], b[:, 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=1)
