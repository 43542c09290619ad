"""One contact estimate from every sensor at once: joint torques, base F/T and lidar. No ROS.

A point force F acting ON the robot at the point p of link k explains (project sign, as seed
000 eq. 3 writes it too)

- the external joint torques τ_ext = J_k(p)ᵀF: n equations (seed 000 eq. 3);
- the compensated base wrench [f; m] = [F; p × F] at the base origin, base frame: 6
  equations (seed 004 eqs. 4-6 and 20, after `BaseWrenchCompensator` or
  `MomentumWrenchObserver` of core/contact/ft_compensation.py);
- and a lidar obstacle next to the link says where the contact probably is: a prior on
  the link and the point (seed 000 §5, `LinkProximity` of core/contact/lidar_fusion.py).

`FusedContactEstimator.estimate` scores every candidate link and surface point against all
the equations it has at once: each equation weighted by its sensor's noise, the force the
weighted least-squares one at the point, kept in the friction cone (seed 000 eq. 6), and
the fit χ² the sum of the squared weighted residuals. The links come from seed 000's link
range (eq. 13.1-13.2) when the torques are given. Seeds for a continuous refinement are
where the line of action enters each link (known up to λ from the base wrench, seed 004
eq. 21, or, on links with 6 or more joints before them, from the torques, seed 000 eqs.
10-12 in 3D), the lidar's point and surface samples (with the base wrench only those near
its line: it makes the search cheap and nearly unambiguous); a grid search with a Newton
step in each seed's tangent plane refines them all at once. The estimate is the cheapest
point a finger can reach (not covered by another link); the candidates whose posterior
cost is within `ambiguity` of it are its ambiguity: the links and points the sensors
cannot tell apart.

What stays ambiguous: with the base wrench alone, every link the line of action enters
explains the data equally (only the friction cone and the preference for forces near the
normal choose); with the torques alone, a contact on a link with fewer than 5 joints before
it slides along its line of action (seed 000 statement 1), and a force whose line passes
through the axes of the joints beyond a link loads those joints no more than a contact on
that link would (seed 000 eq. 13: the range [k_min, k_max]). With both, only a line that
passes through the axes of every joint between two entered links leaves both.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import open3d as o3d
from scipy.stats import chi2 as chi_square

from contact_estimation.core.compiled import kernel
from contact_estimation.core.contact.contact import SOURCE_NONE, Contact, ContactEstimate
from contact_estimation.core.contact.contact_localization import (_tangent_basis, into_cone,
                                                                  moving_link_samples,
                                                                  spatial_link_range,
                                                                  torque_maps)
from contact_estimation.core.contact.ft_compensation import cross
from contact_estimation.core.contact.ft_contact import line_of_action
from contact_estimation.core.contact.lidar_fusion import LinkProximity
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.settings import checked, setting

# The sensors an estimate can use (`ContactEstimate.sensors`).
TORQUE = 'torque'
FORCE_TORQUE = 'ft'
LIDAR = 'lidar'

# Links of the combined ray-casting scene are this far apart (m), and rays start half of it
# behind the point of their line nearest their link's origin: a ray meets its own link only.
_LINK_SPACING = 10.0
# The rounds of refinement: reach of the square grid (in sample spacings) and its points
# per side.
_GRIDS = ((1.0, 5), (0.25, 3))
_UNIT_GRIDS = {size: np.stack(np.meshgrid(*2 * [np.linspace(-1, 1, size)], indexing='ij'),
                               axis=-1).reshape(-1, 2) for _, size in _GRIDS}
# The finite differences on a 3×3 neighbourhood of the gradient and Hessian: d/dx, d/dy,
# d²/dx², d²/dy², d²/dxdy (unit spacing).
_STENCILS = np.array([[[0, -0.5, 0], [0, 0, 0], [0, 0.5, 0]],
                      [[0, 0, 0], [-0.5, 0, 0.5], [0, 0, 0]],
                      [[0, 1, 0], [0, -2, 0], [0, 1, 0]],
                      [[0, 0, 0], [1, -2, 1], [0, 0, 0]],
                      [[0.25, 0, -0.25], [0, 0, 0], [-0.25, 0, 0.25]]])
# Refined points closer than this (m) to a better one of the same link are the same candidate.
_SAME_POINT = 0.01
# A contact point lifted this far (m) off its surface must be at least `_CLEARANCE` (m) from
# every other link: else another link covers it or leaves too narrow a gap for a finger.
# (Where the links' meshes interpenetrate, at the joints, an inside test by the nearest
# facet's normal is unreliable: the distance alone is used.)
_LIFT, _CLEARANCE = 0.004, 0.0025
# The cheapest refined points tested for that, the estimate and its ambiguity among them.
_EXPOSURE_CHECKS = 24


# Larger inputs (rad, N·m, N) are no measurement: refused before they overflow the squares.
_IMPLAUSIBLE = 1e6


class FusedContactError(ValueError):
    """Input or settings the fused estimator cannot use."""


@dataclass(frozen=True)
@checked
class SensorNoise:
    """Standard deviations of the sensors' errors: `torque` per joint of τ_ext (N·m, one
    value or n), `force` and `moment` per axis of the compensated base wrench (N, N·m)."""

    torque: float | tuple = 0.1
    force: float = setting(0.3, 'standard deviation of the compensated base force per axis, N',
                           range=(1e-4, 100.0))
    moment: float = setting(
        0.2, 'standard deviation of the compensated base moment per axis, N·m',
        range=(1e-4, 100.0))

    def __post_init__(self):
        torque = np.ravel(self.torque)  # not a setting: the node gives the residual's noise
        if not (np.isfinite(torque).all() and np.all(torque > 0)):
            raise FusedContactError(f'torque noise levels must be finite and > 0, got '
                                    f'{torque.tolist()}')


def _fused(sensors: tuple[str, ...], **fields) -> ContactEstimate:
    """The estimate from `sensors` (`TORQUE`, `FORCE_TORQUE`, `LIDAR`; the lidar only when
    it saw an obstacle next to a candidate link), its `source` their names joined by '+'
    ('none': no sensor). `link_range`: seed 000 eq. 13's links with the torques, all links
    without. `candidates`: the points whose posterior cost is within the estimator's
    `ambiguity` of the best, the estimate first. `consistent`: χ² is within the noise (χ²
    test at 99.9 %, `equations` − 5 degrees of freedom)."""
    return ContactEstimate(source='+'.join(sensors) or SOURCE_NONE, sensors=sensors, **fields)


@dataclass
class _Data:
    """One estimate's equations, per link l of the estimator (L links, E equations).

    A force F (link axes) at p (link frame) of link l predicts the weighted measurements
    A(p)F = C_l F + D_l (p × F) (E): the torques J_l(p)ᵀF = J_vᵀF + J_ωᵀ(p × F) over σ_τ
    (seed 000 eq. 3), the base force R F over σ_f and its moment (R p + o) × R F =
    R((p + Rᵀo) × F) over σ_m (seed 004 eqs. 4-6), the last two in the link's axes (a
    rotation keeps their norm): C_l = [J_vᵀ/σ_τ; I/σ_f; [Rᵀo]×/σ_m], D_l = [J_ωᵀ/σ_τ; 0;
    I/σ_m]; b_l, the measurements the same way: τ/σ_τ, Rᵀf/σ_f, Rᵀm/σ_m.

    Every point is scored through the 3×3 products of these, whatever E: with P = [p]×,
    AᵀA = CᵀC + CᵀD P + (CᵀD P)ᵀ + Pᵀ DᵀD P, Aᵀb = Cᵀb + (Dᵀb) × p and χ² = ‖b − AF‖² =
    bᵀb − 2Fᵀ Aᵀb + Fᵀ AᵀA F."""

    cc: np.ndarray                    # L×3×3 CᵀC
    cd: np.ndarray                    # L×3×3 CᵀD
    dd: np.ndarray                    # L×3×3 DᵀD
    cb: np.ndarray                    # L×3 Cᵀb
    db: np.ndarray                    # L×3 Dᵀb
    bb: np.ndarray                    # L, bᵀb
    equations: int
    prior: np.ndarray | None          # L×3 link frames, NaN: no obstacle near that link


def _equations(constant, lever, measured) -> _Data:
    """The products of `_Data` of the equations C (L×E×3), D (L×E×3), b (L×E); no prior."""
    return _Data(np.einsum('lei,lej->lij', constant, constant),
                 np.einsum('lei,lej->lij', constant, lever),
                 np.einsum('lei,lej->lij', lever, lever),
                 np.einsum('lei,le->li', constant, measured),
                 np.einsum('lei,le->li', lever, measured),
                 np.einsum('le,le->l', measured, measured), measured.shape[1], None)


_SUMMED = ('cc', 'cd', 'dd', 'cb', 'db', 'bb', 'equations')


def _joined(parts: list[_Data], prior) -> _Data:
    """The equations of every sensor in `parts` at once (their products add up), with the
    lidar's `prior`."""
    return _Data(*(sum(getattr(part, name) for part in parts) for name in _SUMMED), prior)


@dataclass
class _Shared:
    """What the estimates at one q share, with or without the base wrench: the torques (or
    None), the lidar's view, the noise; per link of the estimator (L) its rotation and
    origin (base frame) and link-frame Jacobian (L×6×n); the rotations and origins of
    `surfaces.links`; the joints' links' (rotations, origins, Jacobians); seed 000 eq. 13's
    (k_min, k_max) of the torques; their equations (`_Data`, no prior)."""

    tau: np.ndarray | None
    proximity: LinkProximity | None
    noise: SensorNoise
    rotations: np.ndarray
    origins: np.ndarray
    jacobians: np.ndarray
    every_link: tuple[np.ndarray, np.ndarray]
    joint_poses: tuple[np.ndarray, np.ndarray, np.ndarray]
    torque_span: tuple[int, int] | None
    torque_equations: _Data | None


class FusedContactEstimator:
    """The contact (link, point, force) best explaining the joint torques, the base wrench and
    the lidar's obstacles, whichever of them are given.

    surfaces: the robot's `LinkSurfaces` (its samples, `point_spacing` apart, are the coarse
    candidates). mu: friction coefficient (seed 000 eq. 6); normal_slack (rad) widens the
    cone by a mesh facet's normal error. noise: `SensorNoise`, the default for `estimate`.
    delta_tau, delta_w (N·m): seed 000 eq. 13's tolerances; by default 4 σ_τ and 5 σ_τ.
    min_force (N): without torques over δ_τ, a base force below this is no contact.
    contact_distance (m): an obstacle farther from a link is not next to it; prior_radius
    (m): how far the contact may be from the obstacle's point on the link.
    normal_preference κ: a prior that forces lie near the surface normal, cost
    2κ(1 − cos θ) in χ² units (seed 004's normal preference, as in core/contact/ft_contact.py).
    seeds_per_link: surface samples kept per candidate link; refine: seeds refined.
    ambiguity: the posterior cost margin of the candidates (χ² units; by default the 99 %
    likelihood region of the point's two surface coordinates).
    """

    def __init__(self, surfaces: LinkSurfaces, mu: float = 0.5, normal_slack: float = 0.15,
                 noise: SensorNoise = SensorNoise(), delta_tau: float | None = None,
                 delta_w: float | None = None, min_force: float = 2.0,
                 contact_distance: float = 0.1, prior_radius: float = 0.05,
                 normal_preference: float = 5.0, seeds_per_link: int = 2, refine: int = 8,
                 ambiguity: float = float(chi_square.ppf(0.99, 2))):
        if min(mu, min_force, contact_distance, prior_radius) <= 0 or min(seeds_per_link,
                                                                           refine) < 1:
            raise FusedContactError('mu, min_force, contact_distance and prior_radius must be '
                                    'positive, seeds_per_link and refine at least 1')
        if not 0 <= normal_slack < np.pi / 2 - np.arctan(mu):
            raise FusedContactError('normal_slack must be in [0, π/2 − atan μ)')
        if normal_preference < 0 or ambiguity < 0:
            raise FusedContactError('normal_preference and ambiguity must be ≥ 0')
        for name, value in (('delta_tau', delta_tau), ('delta_w', delta_w)):
            if value is not None and not value > 0:
                raise FusedContactError(f'{name} must be > 0 N·m, got {value}')
        self.surfaces = surfaces
        self.robot: RobotModel = surfaces.robot
        self.mu = float(np.tan(np.arctan(mu) + normal_slack))  # the widened cone's
        self.noise = noise
        self.delta_tau, self.delta_w = delta_tau, delta_w
        self.min_force, self.contact_distance = min_force, contact_distance
        self.prior_radius, self.normal_preference = prior_radius, normal_preference
        self.seeds_per_link, self.refine, self.ambiguity = seeds_per_link, refine, ambiguity
        (self.links, self.link_joint, self._surface_index, self._points, self._inward,
         self._sample_link, self.slide) = moving_link_samples(surfaces)
        (self._scene, self._geometry_link, self._bounds, self._facet_normals,
         self._facet_offset) = self._combined_scene()
        self._shift = np.outer(np.arange(len(surfaces.links)), [_LINK_SPACING, 0.0, 0.0])
        self._link_shift = self._shift[self._surface_index]
        # One kinematics pass: every surface link (in `surfaces.links` order: a contact must
        # not be buried in any of them), then the joints' other links.
        self._frames = surfaces.links + [link for link in self.robot.joint_links
                                         if link not in surfaces.links]
        self._joint_frames = [self._frames.index(link) for link in self.robot.joint_links]
        # χ² at 99.9 % by degrees of freedom (equations − 5: the point's 2, the force's 3)
        self._chi2_limit = chi_square.ppf(0.999, np.arange(1, self.robot.n + 7))
        self._no_prior = np.zeros((len(self.links), 3))
        # numba compiles the kernels (or loads them from its cache) now, not at the first
        # contact.
        nothing = np.zeros((0, 3))
        self._score(_Data(*3 * (np.zeros((0, 3, 3)),), nothing, nothing, np.zeros(0), 0, None),
                    np.zeros(0, dtype=np.int64), nothing, nothing)
        _grid_offsets(np.zeros((0, 3, 3)), np.linspace(-1, 1, 3), _STENCILS, np.zeros((0, 2)))

    def _combined_scene(self):
        """Every surface link's mesh in its own frame, link i of `surfaces.links` shifted by
        i × `_LINK_SPACING` along x, in one scene: one call casts or projects the points of
        every link. Returns the scene, the surface index of each geometry id (the last
        entry, -1, for a miss), each link's bounding sphere (S×4: centre, radius), the
        outward normals of all facets and the first facet of each geometry id among them."""
        scene = o3d.t.geometry.RaycastingScene()
        ids, bounds, normals = [], [], []
        for i, link in enumerate(self.surfaces.links):
            mesh = self.surfaces.mesh(link)
            normals.append(np.asarray(mesh.triangle_normals))
            vertices = np.asarray(mesh.vertices)
            centre = (vertices.min(axis=0) + vertices.max(axis=0)) / 2
            bounds.append([*centre, np.linalg.norm(vertices - centre, axis=1).max()])
            ids.append(scene.add_triangles(
                o3d.core.Tensor((vertices + [i * _LINK_SPACING, 0.0, 0.0]).astype(np.float32)),
                o3d.core.Tensor(np.asarray(mesh.triangles).astype(np.uint32))))
        lookup = np.full(max(ids) + 2, -1)
        lookup[ids] = np.arange(len(ids))
        offset = np.zeros(max(ids) + 2, dtype=np.int64)
        offset[ids] = np.cumsum([0] + [len(n) for n in normals[:-1]])
        return scene, lookup, np.array(bounds), np.vstack(normals), offset

    # ------------------------------------------------------------------ the estimate
    def estimate(self, q, tau=None, wrench=None, proximity: LinkProximity | None = None,
                 noise: SensorNoise | None = None) -> ContactEstimate:
        """The contact explaining the data at q (n joint positions): `tau`, the external
        joint torques (n, N·m, project sign) or None; `wrench`, the compensated contact
        wrench [f; m] at the base origin, base frame (6, N and N·m; seed 004 eq. 20) or
        None; `proximity`, the lidar's view of the links or None; `noise`, the sensors'
        `SensorNoise` (the estimator's by default). At least one of tau and wrench."""
        q, tau, wrench = self._checked(q, tau, wrench, proximity)
        return self._estimate(self._shared(q, tau, proximity, noise or self.noise), wrench)

    def estimate_or_without_wrench(self, q, tau, wrench, proximity: LinkProximity | None = None,
                                   noise: SensorNoise | None = None
                                   ) -> tuple[ContactEstimate, bool]:
        """`estimate` with the base wrench or, when that one is inconsistent (the wrench's
        compensation lags at a contact's onset, or errs) and the torques (and the lidar)
        alone are consistent, without it; and whether the wrench was left out. What both
        estimates need of q, the torques and the lidar (kinematics, the torques' link range
        and equations) is computed once (issue 35: a contact's first estimate often needs
        both)."""
        q, tau, wrench = self._checked(q, tau, wrench, proximity)
        noise = noise or self.noise
        shared = self._shared(q, tau, proximity, noise)
        estimate = self._estimate(shared, wrench)
        if tau is None or wrench is None or estimate.consistent:
            return estimate, False
        alone = self._estimate(shared, None)
        if alone.consistent and _force_plausible(alone, wrench, noise):
            return alone, True
        return estimate, False

    def _shared(self, q, tau, proximity, noise: SensorNoise) -> _Shared:
        """What every estimate at q from the torques `tau` (or None) and `proximity` shares,
        with or without a base wrench."""
        rotations, origins, frame_jacobians = self.robot.link_kinematics(q, self._frames)
        joint_poses = (rotations[self._joint_frames], origins[self._joint_frames],
                       frame_jacobians[self._joint_frames])
        surfaces = len(self.surfaces.links)
        jacobians = frame_jacobians[self._surface_index]
        torque_span = None
        if tau is not None:
            torque_span = spatial_link_range(tau, joint_poses[2], *self._torque_limits(noise))
        return _Shared(tau, proximity, noise, rotations[self._surface_index],
                       origins[self._surface_index], jacobians,
                       (rotations[:surfaces], origins[:surfaces]), joint_poses, torque_span,
                       None if tau is None else self._torque_equations(tau, jacobians, noise))

    def _estimate(self, shared: _Shared, wrench) -> ContactEstimate:
        """`estimate` of the data in `shared`, with the base wrench `wrench` or None."""
        tau, noise, rotations, origins = shared.tau, shared.noise, shared.rotations, shared.origins
        joint_poses, every_link = shared.joint_poses, shared.every_link
        span = self._range(shared, wrench)
        if span is None:
            return _fused((), contact=None, link_range=None, residual=0.0, consistent=True,
                          message='no joint torque reaches delta_tau and no base force '
                          'reaches min_force')
        in_range = (self.link_joint >= span[0]) & (self.link_joint <= span[1])
        parts = [] if tau is None else [shared.torque_equations]
        if wrench is not None:
            parts.append(self._wrench_equations(wrench, rotations, origins, noise))
        data = _joined(parts, self._priors(shared.proximity, in_range))
        span_links = (self.robot.joint_links[span[0]], self.robot.joint_links[span[1]])
        sensors = tuple(name for name, used in ((TORQUE, tau is not None),
                                                 (FORCE_TORQUE, wrench is not None),
                                                 (LIDAR, data.prior is not None)) if used)

        # Seeds: where the lines of action enter the links of the range, the lidar's points
        # and samples: with the base wrench, the one nearest its line on each link it does
        # not enter (every seed is refined); else the best of each link (the `refine` best
        # seeds are).
        links, points, inward = self._line_entries(
            self._lines(tau, wrench, joint_poses, span), rotations, origins, in_range)
        if data.prior is not None:
            seen = np.flatnonzero(np.isfinite(data.prior[:, 0]))
            on_surface, seen_inward = self._onto_surface(seen, data.prior[seen])
            links, points = np.concatenate([links, seen]), np.vstack([points, on_surface])
            inward = np.vstack([inward, seen_inward])
        lined = wrench is not None and np.linalg.norm(wrench[:3]) >= self.min_force
        if lined:
            sampled = in_range.copy()
            sampled[links] = False
            samples, away = self._near_line(wrench, noise, rotations, origins, sampled)
            samples = samples[self._best_per_link(self._sample_link[samples], away, 1)]
            seeds = np.arange(len(samples) + len(links))
        else:
            samples = np.flatnonzero(in_range[self._sample_link])
        links = np.concatenate([self._sample_link[samples], links])
        points = np.vstack([self._points[samples], points])
        inward = np.vstack([self._inward[samples], inward])
        if not lined:
            _, cost, _ = self._score(data, links, points, inward)
            seeds = np.concatenate([self._best_per_link(links[:len(samples)],
                                                        cost[:len(samples)]),
                                    np.arange(len(samples), len(links))])
            seeds = seeds[np.argsort(cost[seeds])[:self.refine]]
        if not len(seeds):
            return _fused(sensors, contact=None, link_range=span_links, residual=0.0,
                          consistent=False, equations=data.equations,
                          message='no surface point to try: no link of the range has a '
                          'surface sample')
        links, points, inward = self._refine(data, links[seeds], points[seeds], inward[seeds])
        force, cost, chi2 = self._score(data, links, points, inward)

        # The estimate: the cheapest point a finger can reach; its ambiguity: the others
        # within `ambiguity` of it, one per place.
        order = np.argsort(cost)[:_EXPOSURE_CHECKS]
        exposed = order[self._exposed(links[order], points[order], inward[order], every_link)]
        order = exposed if len(exposed) else order  # none: the mesh's fault, not the data's
        best = order[0]
        close = order[cost[order] <= cost[best] + self.ambiguity]
        chosen = close[self._distinct(links[close], points[close])]
        link, point = links[best], points[best]
        rotation, origin = rotations[link], origins[link]
        dof = data.equations - 5
        consistent = bool(dof <= 0 or chi2[best] <= self._chi2_limit[dof - 1])
        candidates = (np.einsum('kij,kj->ki', rotations[links[chosen]], points[chosen])
                      + origins[links[chosen]])
        if tau is not None:
            residual = tau - torque_maps(shared.jacobians[[link]], point[None])[0] @ force[best]
        else:
            residual = wrench[3:] - np.cross(rotation @ point + origin, rotation @ force[best])
        candidate_links = [self.links[i] for i in links[chosen]]
        contact = Contact(self.links[link], point, force[best], rotation @ point + origin,
                          rotation @ force[best],
                          tuple(dict.fromkeys(c for c in candidate_links if c != self.links[link])))
        return _fused(
            sensors, contact=contact, link_range=span_links,
            chi2=float(chi2[best]), residual=float(np.linalg.norm(residual)),
            equations=data.equations, consistent=consistent, candidates=candidates,
            candidate_links=candidate_links,
            message='' if consistent else f'no single point contact explains the data within '
                                          f'the noise (χ² {chi2[best]:.1f} over '
                                          f'{data.equations} equations)')

    # ------------------------------------------------------------------ pieces
    def _checked(self, q, tau, wrench, proximity):
        """The inputs as float arrays; FusedContactError on a wrong shape or non-finite value."""
        n = self.robot.n
        arrays = []
        for name, value, size in (('q', q, n), ('tau', tau, n), ('wrench', wrench, 6)):
            if value is None:
                arrays.append(None)
                continue
            array = np.asarray(value, dtype=float)
            if array.shape != (size,) or not np.all(np.abs(array) < _IMPLAUSIBLE):
                raise FusedContactError(f'{name} must be {size} finite values below '
                                        f'{_IMPLAUSIBLE:g} in size, got '
                                        f'{np.array2string(array, precision=3)}')
            arrays.append(array)
        if arrays[0] is None:
            raise FusedContactError('q must be given')
        if tau is None and wrench is None:
            raise FusedContactError('need the joint torques, the base wrench or both')
        if proximity is not None:
            links = len(self.surfaces.links)
            distance = np.asarray(proximity.distance, dtype=float)
            surface = np.asarray(proximity.surface_point, dtype=float)
            if (distance.shape != (links,) or surface.shape != (links, 3)
                    or np.isnan(distance).any()
                    or not np.isfinite(surface[np.isfinite(distance)]).all()):
                raise FusedContactError(f'the lidar proximity must give {links} distances '
                                        'and finite surface points where a distance is')
        return arrays

    def _torque_limits(self, noise: SensorNoise) -> tuple[float, float]:
        """δ_τ and δ_w of seed 000 eq. 13: given, or 4 and 5 times the largest σ_τ."""
        sigma = float(np.max(noise.torque))
        return self.delta_tau or 4 * sigma, self.delta_w or 5 * sigma

    def _range(self, shared: _Shared, wrench) -> tuple[int, int] | None:
        """The joints (k_min, k_max) whose links may hold the contact, or None: no contact.

        With torques, seed 000 eq. 13; when no torque reaches δ_τ but the base force reaches
        `min_force`, every joint up to eq. 13.2's k_max (a force whose line passes through
        every axis loads none). Without torques, every joint."""
        force = 0.0 if wrench is None else float(np.linalg.norm(wrench[:3]))
        if shared.tau is None:
            return (0, self.robot.n - 1) if force >= self.min_force else None
        k_min, k_max = shared.torque_span
        if k_min >= 0:
            return k_min, max(k_min, k_max)
        if force < self.min_force:
            return None
        # every torque below δ_τ: eq. 13.2 alone (with a zero δ_τ every joint counts as loaded)
        delta_w = self._torque_limits(shared.noise)[1]
        return 0, spatial_link_range(shared.tau, shared.joint_poses[2], 0.0, delta_w)[1]

    def _priors(self, proximity, in_range) -> np.ndarray | None:
        """Per link (L×3, link frame) the lidar obstacle's point on the links of the range
        within `contact_distance` of an obstacle (NaN rows elsewhere); None when none is."""
        if proximity is None:
            return None
        distance = np.asarray(proximity.distance, dtype=float)[self._surface_index]
        near = in_range & (distance <= self.contact_distance)
        if not near.any():
            return None
        surface = np.asarray(proximity.surface_point, dtype=float)[self._surface_index]
        return np.where(near[:, None], surface, np.nan)

    def _torque_equations(self, tau, jacobians, noise: SensorNoise) -> _Data:
        """The torques' equations of every link (see `_Data`; jacobians: L×6×n, link frames)."""
        weight = np.broadcast_to(1.0 / np.asarray(noise.torque, dtype=float),
                                 (self.robot.n,))[:, None]
        return _equations(np.transpose(jacobians[:, :3], (0, 2, 1)) * weight,
                          np.transpose(jacobians[:, 3:], (0, 2, 1)) * weight,
                          np.broadcast_to(tau * weight[:, 0], (len(self.links), self.robot.n)))

    def _wrench_equations(self, wrench, rotations, origins, noise: SensorNoise) -> _Data:
        """The base wrench's equations of every link (see `_Data`)."""
        count = len(self.links)
        identity = np.broadcast_to(np.eye(3), (count, 3, 3))
        base = np.einsum('lji,lj->li', rotations, origins)               # Rᵀo
        return _equations(
            np.concatenate([identity / noise.force, _skew(base) / noise.moment], axis=1),
            np.concatenate([np.zeros((count, 3, 3)), identity / noise.moment], axis=1),
            np.concatenate([np.einsum('lji,j->li', rotations, wrench[:3]) / noise.force,
                            np.einsum('lji,j->li', rotations, wrench[3:]) / noise.moment],
                           axis=1))

    def _score(self, data: _Data, links, points, inward):
        """Per point: the weighted least-squares force (K×3, link axes) kept in the friction
        cone (seed 000 eq. 6), the posterior cost (χ² + prior + normal preference) and the
        data's χ² alone (`_score_each`, compiled: a few hundred points per call, where numpy's
        calls on K×3×3 arrays cost more than their arithmetic)."""
        count = len(links)
        force, cost, chi2 = np.empty((count, 3)), np.empty(count), np.empty(count)
        prior = self._no_prior if data.prior is None else data.prior
        _score_each(data.cc, data.cd, data.dd, data.cb, data.db, data.bb,
                    np.ascontiguousarray(links, dtype=np.int64),
                    np.ascontiguousarray(points, dtype=float),
                    np.ascontiguousarray(inward, dtype=float), self.mu, self.normal_preference,
                    prior, data.prior is not None, self.contact_distance, self.prior_radius,
                    force, cost, chi2)
        return force, cost, chi2

    def _best_per_link(self, owner, cost, count: int | None = None) -> np.ndarray:
        """Indices of the `count` (default `seeds_per_link`) cheapest of each link's samples."""
        order = np.lexsort((cost, owner))
        link = owner[order]
        rank = np.arange(len(order)) - np.searchsorted(link, link)
        return order[rank < (count or self.seeds_per_link)]

    def _near_line(self, wrench, noise: SensorNoise, rotations, origins,
                   sampled) -> np.ndarray:
        """The samples of the links `sampled` (L) near the base wrench's line of action (seed
        004 eq. 21): within `slide` plus four standard deviations of the line's place there,
        (σ_m + σ_f ‖s‖)/‖f‖ at s from the base origin, and their distances to it (m). Links
        whose bounding sphere is farther are skipped whole."""
        size = np.linalg.norm(wrench[:3])
        start, direction = line_of_action(wrench[:3], wrench[3:])
        bounds = self._bounds[self._surface_index]
        centres = np.einsum('lij,lj->li', rotations, bounds[:, :3]) + origins
        spread = (noise.moment + noise.force * (np.linalg.norm(centres, axis=1)
                                                + bounds[:, 3])) / size
        away = np.linalg.norm(cross(centres - start, direction), axis=1)
        samples = np.flatnonzero((sampled & (away <= bounds[:, 3] + self.slide + 4 * spread))
                                 [self._sample_link])
        owner = self._sample_link[samples]
        lever = np.einsum('kij,kj->ki', rotations[owner], self._points[samples]) + origins[owner]
        away = np.linalg.norm(cross(lever - start, direction), axis=1)
        near = away <= self.slide + 4 * spread[owner]
        return samples[near], away[near]

    def _lines(self, tau, wrench, joint_poses, span) -> list[tuple[np.ndarray, np.ndarray]]:
        """The lines of action (point, unit direction; base frame) the data give: that of the
        base wrench (seed 004 eq. 21; from `min_force` on); without it, for each joint of the range
        with 6 or
        more joints up to it, that of the wrench its torques identify on its link (seed 000
        eqs. 10-12 in 3D; `joint_poses`: the rotations, origins and link-frame Jacobians of
        the joints' links)."""
        if wrench is not None:
            return ([line_of_action(wrench[:3], wrench[3:])]
                    if np.linalg.norm(wrench[:3]) >= self.min_force else [])
        lines = []
        rotations, origins, jacobians = joint_poses
        for joint in range(max(span[0], 5), span[1] + 1):
            head = jacobians[joint][:, :joint + 1].T
            solution, _, rank, _ = np.linalg.lstsq(head, tau[:joint + 1], rcond=None)
            if rank < 6 or np.linalg.norm(solution[:3]) < self.min_force:
                continue
            force = rotations[joint] @ solution[:3]
            moment = rotations[joint] @ solution[3:] + cross(origins[joint], force)
            lines.append(line_of_action(force, moment))
        return lines

    def _line_entries(self, lines, rotations, origins, in_range):
        """Where each line enters each link of the range, going along its force (so that
        the force pushes into the surface, seed 004 eq. 24; a concave link may be entered
        twice): links, points and inward normals (link frames). One query in the combined
        scene."""
        if not lines:
            return np.zeros(0, dtype=int), np.zeros((0, 3)), np.zeros((0, 3))
        links = np.flatnonzero(in_range)
        starts = np.array([point for point, _ in lines])          # N×3 base frame
        directions = np.array([direction for _, direction in lines])
        local = np.einsum('lji,nlj->nli', rotations[links],
                          starts[:, None] - origins[links][None])        # N×B×3
        heading = np.einsum('lji,nj->nli', rotations[links], directions)
        nearest = local - np.einsum('nli,nli->nl', local, heading)[..., None] * heading
        begin = nearest - _LINK_SPACING / 2 * heading + self._link_shift[links]
        rays = np.concatenate([begin, heading], axis=-1).reshape(-1, 6)
        result = self._scene.list_intersections(o3d.core.Tensor(rays.astype(np.float32)))
        ray = result['ray_ids'].numpy().astype(np.int64)
        geometry = result['geometry_ids'].numpy().astype(np.int64)
        owner = np.tile(links, len(lines))[ray]
        facing = self._facet_normals[self._facet_offset[geometry]
                                     + result['primitive_ids'].numpy().astype(np.int64)]
        entering = ((self._geometry_link[geometry] == self._surface_index[owner])
                    & (np.einsum('ki,ki->k', facing, rays[ray, 3:]) < 0))
        ray = ray[entering]
        points = (rays[ray, :3] + result['t_hit'].numpy()[entering, None] * rays[ray, 3:]
                  - self._link_shift[owner[entering]])
        return owner[entering], points, -facing[entering]

    def _refine(self, data: _Data, links, points, inward):
        """Every seed refined on the surface at once, in rounds (`_GRIDS`): the cheapest point
        of a square grid in its tangent plane, moved to the vertex of the quadratic through
        it and its neighbours, dropped onto the mesh. Returns the seeds and every round's
        points (links, points, inward normals; link frames): where a valley of the cost is
        flat (the point sliding along its line of action) a round may not improve."""
        every = [(points, inward)]
        basis = _tangent_basis(inward)      # the seeds' tangent planes serve every round
        for reach, size in _GRIDS:
            points, inward = self._grid_step(data, links, points, inward, basis,
                                             reach * self.slide, size)
            every.append((points, inward))
        return (np.tile(links, len(every)), np.vstack([p for p, _ in every]),
                np.vstack([n for _, n in every]))

    def _grid_step(self, data: _Data, links, points, inward, basis, reach: float, size: int):
        """One round of `_refine`: a size × size grid over ±reach (m) in the planes spanned
        by `basis` (K×3×2)."""
        count = len(links)
        steps = np.linspace(-reach, reach, size)
        grid = reach * _UNIT_GRIDS[size]
        tried = (points[:, None] + np.einsum('kij,gj->kgi', basis, grid)).reshape(-1, 3)
        _, cost, _ = self._score(data, np.repeat(links, len(grid)), tried,
                                 np.repeat(inward, len(grid), axis=0))
        offset = np.empty((count, 2))
        _grid_offsets(cost.reshape(count, size, size), steps, _STENCILS, offset)
        return self._onto_surface(links, points + np.einsum('kij,kj->ki', basis, offset))

    def _onto_surface(self, links, points) -> tuple[np.ndarray, np.ndarray]:
        """Nearest points of the links' meshes and the inward normals there (link frames),
        one query in the combined scene."""
        shifted = (points + self._link_shift[links]).astype(np.float32)
        result = self._scene.compute_closest_points(o3d.core.Tensor(shifted))
        return (result['points'].numpy().astype(float) - self._link_shift[links],
                -result['primitive_normals'].numpy().astype(float))

    def _exposed(self, links, points, inward, every_link) -> np.ndarray:
        """Which points (link frames) a finger can reach at this pose: lifted `_LIFT` off the
        surface, at least `_CLEARANCE` from every other surface link (only the links whose
        bounding sphere is that near are asked). `every_link`: the rotations and origins of
        `surfaces.links`."""
        rotations, origins = every_link
        own = self._surface_index[links]
        lifted = (np.einsum('kij,kj->ki', rotations[own], points - _LIFT * inward)
                  + origins[own])                                           # base frame
        centres = np.einsum('sij,sj->si', rotations, self._bounds[:, :3]) + origins
        near = (np.linalg.norm(lifted[:, None] - centres[None], axis=2)
                <= self._bounds[:, 3] + _CLEARANCE)
        near[np.arange(len(links)), own] = False
        point, other = np.nonzero(near)
        if not len(point):
            return np.arange(len(links))
        local = (np.einsum('kji,kj->ki', rotations[other], lifted[point] - origins[other])
                 + self._shift[other])
        result = self._scene.compute_closest_points(o3d.core.Tensor(local.astype(np.float32)))
        buried = np.zeros(len(links), dtype=bool)
        close = np.linalg.norm(local - result['points'].numpy(), axis=1) < _CLEARANCE
        buried[point[close]] = True
        return np.flatnonzero(~buried)

    @staticmethod
    def _distinct(links, points) -> np.ndarray:
        """Indices of the first point of each group (points sorted by cost) of the same link
        within `_SAME_POINT` of each other."""
        keep = []
        for i in range(len(links)):
            if not any(links[j] == links[i] and np.linalg.norm(points[j] - points[i])
                       < _SAME_POINT for j in keep):
                keep.append(i)
        return np.array(keep, dtype=int)


# The torques alone may find a point near a joint's axis whose lever is tiny, and there a
# force of any size explains a few N·m: a touch of 3 N on panda_link5 (the demo, base force
# 4.8 N) came out as 105 N on panda_link4, which the proximity monitor's power and force
# limit stopped on. Such a force is left out when the base force, however its compensation
# lags, says it is far smaller: more than this many times it, plus PLAUSIBLE_FLOOR × the
# force noise.
PLAUSIBLE_RATIO = 10.0
PLAUSIBLE_FLOOR = 10.0


def _force_plausible(estimate: ContactEstimate, wrench: np.ndarray, noise: SensorNoise) -> bool:
    """Whether `estimate`'s force (made without the base wrench) is within what the base
    force [f; m] allows (PLAUSIBLE_RATIO)."""
    bound = PLAUSIBLE_RATIO * np.linalg.norm(wrench[:3]) + PLAUSIBLE_FLOOR * noise.force
    return estimate.contact is None or float(np.linalg.norm(estimate.contact.force)) <= bound


@kernel
def _score_each(cc, cd, dd, cb, db, bb, links, points, inward, mu, normal_preference, prior,
                has_prior, contact_distance, prior_radius, force, cost, chi2):
    """`FusedContactEstimator._score` of each point k (link links[k], point and inward normal
    in its frame) into force[k], cost[k] and chi2[k]: with P = [p]×, AᵀA = CᵀC + CᵀD P +
    (CᵀD P)ᵀ + Pᵀ DᵀD P and Aᵀb = Cᵀb + (Dᵀb) × p (`_Data`). Torques alone on a link with few
    joints before it (or a point whose Jacobian loses rank) leave a family of forces: a
    faint penalty on the tangential force takes the one nearest the normal, the one the
    friction cone (eq. 6) is most likely to keep. The prior (when `has_prior`): the squared
    distance to the lidar's point over `prior_radius`, `contact_distance` where the link has
    none."""
    skew, mixed, dd_skew = np.zeros((3, 3)), np.empty((3, 3)), np.empty((3, 3))
    gram, system, rhs = np.empty((3, 3)), np.empty((3, 3)), np.empty(3)
    for k in range(links.shape[0]):
        link = links[k]
        x, y, z = points[k, 0], points[k, 1], points[k, 2]
        skew[0, 1], skew[0, 2], skew[1, 2] = -z, y, -x
        skew[1, 0], skew[2, 0], skew[2, 1] = z, -y, x
        for i in range(3):
            for j in range(3):
                mixed[i, j] = (cd[link, i, 0] * skew[0, j] + cd[link, i, 1] * skew[1, j]
                               + cd[link, i, 2] * skew[2, j])
                dd_skew[i, j] = (dd[link, i, 0] * skew[0, j] + dd[link, i, 1] * skew[1, j]
                                 + dd[link, i, 2] * skew[2, j])
        for i in range(3):
            for j in range(3):
                gram[i, j] = (cc[link, i, j] + mixed[i, j] + mixed[j, i]
                              + (skew[0, i] * dd_skew[0, j] + skew[1, i] * dd_skew[1, j]
                                 + skew[2, i] * dd_skew[2, j]))
        rhs[0] = cb[link, 0] + (db[link, 1] * z - db[link, 2] * y)
        rhs[1] = cb[link, 1] + (db[link, 2] * x - db[link, 0] * z)
        rhs[2] = cb[link, 2] + (db[link, 0] * y - db[link, 1] * x)
        nx, ny, nz = inward[k, 0], inward[k, 1], inward[k, 2]
        normal = (nx, ny, nz)
        scale = gram[0, 0] + gram[1, 1] + gram[2, 2]
        for i in range(3):
            for j in range(3):
                ridge = 1e-6 * ((1.0 if i == j else 0.0) - normal[i] * normal[j]) + 1e-9 * (
                    1.0 if i == j else 0.0)
                system[i, j] = gram[i, j] + scale * ridge
        fx, fy, fz = _solve_one(system, rhs)
        fx, fy, fz = into_cone(fx, fy, fz, nx, ny, nz, mu)
        force[k, 0], force[k, 1], force[k, 2] = fx, fy, fz
        fitted = 0.0
        for i in range(3):
            fitted += force[k, i] * (2 * rhs[i] - (gram[i, 0] * fx + gram[i, 1] * fy
                                                   + gram[i, 2] * fz))
        chi2[k] = max(bb[link] - fitted, 0.0)
        size = max(np.sqrt(fx * fx + fy * fy + fz * fz), 1e-12)
        cost[k] = chi2[k] + 2 * normal_preference * (1 - (fx * nx + fy * ny + fz * nz) / size)
        if has_prior:
            dx, dy, dz = x - prior[link, 0], y - prior[link, 1], z - prior[link, 2]
            gap = np.sqrt(dx * dx + dy * dy + dz * dz)
            cost[k] += ((gap if np.isfinite(gap) else contact_distance) / prior_radius) ** 2


@kernel
def _solve_one(matrix, vector):
    """x of M x = v for a symmetric positive definite 3×3 M, by cofactors (its upper
    triangle)."""
    a, b, c = matrix[0, 0], matrix[0, 1], matrix[0, 2]
    d, e, f = matrix[1, 1], matrix[1, 2], matrix[2, 2]
    first, second, third = d * f - e * e, c * e - b * f, b * e - c * d
    fourth, fifth, sixth = a * f - c * c, b * c - a * e, a * d - b * b
    determinant = a * first + b * second + c * third
    x, y, z = vector[0], vector[1], vector[2]
    return ((first * x + second * y + third * z) / determinant,
            (second * x + fourth * y + fifth * z) / determinant,
            (third * x + fifth * y + sixth * z) / determinant)


@kernel
def _grid_offsets(cost, steps, stencils, offset):
    """Per seed k, from the costs of its size × size grid (K×size×size; its coordinates
    `steps` on both axes), the offset (in its tangent plane) of the cheapest grid point,
    moved to the vertex of the quadratic through that point's 3×3 neighbourhood (a Newton
    step, by the finite differences `stencils`: the cost's valleys along a line of action
    run askew to the grid) where the point is inside the grid and the quadratic convex,
    by at most one grid step."""
    size = steps.shape[0]
    spacing = steps[1] - steps[0]
    differences = np.empty(5)
    for k in range(cost.shape[0]):
        first, second = 0, 0
        for i in range(size):
            for j in range(size):
                if cost[k, i, j] < cost[k, first, second]:
                    first, second = i, j
        offset[k, 0], offset[k, 1] = steps[first], steps[second]
        if not (0 < first < size - 1 and 0 < second < size - 1):
            continue
        for a in range(5):
            total = 0.0
            for i in range(3):
                for j in range(3):
                    total += cost[k, first + i - 1, second + j - 1] * stencils[a, i, j]
            differences[a] = total
        gx, gy, xx, yy, xy = (differences[0], differences[1], differences[2], differences[3],
                              differences[4])
        determinant = xx * yy - xy * xy
        if xx > 0 and determinant > 0:
            offset[k, 0] += min(max((xy * gy - yy * gx) / determinant, -1.0), 1.0) * spacing
            offset[k, 1] += min(max((xy * gx - xx * gy) / determinant, -1.0), 1.0) * spacing


def _skew(vectors: np.ndarray) -> np.ndarray:
    """[v]× (K×3×3) of each row of `vectors`: [v]× w = v × w."""
    matrices = np.zeros(vectors.shape[:-1] + (3, 3))
    x, y, z = vectors[..., 0], vectors[..., 1], vectors[..., 2]
    matrices[..., 0, 1], matrices[..., 0, 2], matrices[..., 1, 2] = -z, y, -x
    matrices[..., 1, 0], matrices[..., 2, 0], matrices[..., 2, 1] = z, -y, x
    return matrices
