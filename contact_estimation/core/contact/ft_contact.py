"""Contact point and force from a 6-axis F/T sensor under the robot's base (seed 004). No ROS.

Seed 004 (patent CN 106182087 A, ../shared/METHODS.md §004) puts the sensor between the base
and joint 1. It reads, eq. 20,

    f = f₀ + f_cB + f_Bd,   m = τ₀ + τ_cB + τ_Bd

the arm's weight (f₀, τ₀: eqs. 9–10), the contact wrench at the base origin (f_cB, τ_cB:
eqs. 4–6) and the reaction of the moving arm (f_Bd, τ_Bd: eqs. 14–18). `BaseWrenchCompensator`
removes the sensor's own offset and f₀ + f_Bd, τ₀ + τ_Bd, which are together the base
reaction of inverse dynamics (`RobotModel.base_wrench`, with the measured q, q̇ and an
estimated q̈): what is left is the contact wrench. The two sign conventions meet here without
a flip: a force p acting ON the robot at c (the project's convention) pushes the robot onto
its base with f_cB = p, τ_cB = c × p.

`FtContactLocator` turns the contact wrench into a point: c × p = τ_cB leaves the line of
action c = (p × τ_cB)/‖p‖² + λp (eq. 21, rank 5); the contacted body (the links one joint
moves) is given, or chosen by seed 004's current constraint with the torque residual in place
of the motor current (`contacted_joint`); the point is where the line enters that body's
surface, so that the force pushes into it, pᵀn < 0 (eq. 24's normal). With noise the six
equations disagree (rank 6); the compatibility analysis of claim 6 solves the six subsystems
of five equations with the surface equation, drops the singular ones, averages the rest and
takes the closest surface point (`compatible_wrenches`).

Two surface models, compared in benchmarks/ft_contact.py:
- `EllipsoidSurfaces`: the patent's ellipsoid per link, S(c) = cᵀAᵀAc = 1 (eq. 23), here with
  a centre and principal axes, fitted to the collision mesh by default, overridable per link;
- `MeshSurfaces`: the collision meshes of `LinkSurfaces` themselves, by ray casting.

Frames: the base frame of the `RobotModel` (REP 103) unless said otherwise; a body's
surfaces live in the frame of the link its joint moves first (`RobotModel.joint_links`),
and every estimate goes out in the frame of the link that was hit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import open3d as o3d

from contact_estimation.core.contact.contact import Contact
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces

ROBOT_ON_SENSOR = 'robot_on_sensor'
MOUNT_ON_ROBOT = 'mount_on_robot'
CONVENTIONS = (ROBOT_ON_SENSOR, MOUNT_ON_ROBOT)
SURFACE_MODELS = ('ellipsoid', 'mesh')
COMPENSATIONS = ('momentum_observer', 'acceleration')

# Rays are cast from this far behind the line's point nearest the body (m): farther than any
# arm link reaches, so the first hit is where the line enters the body.
_RAY_BACKOFF = 10.0
# Distance between neighbouring bodies in the scene of `MeshSurfaces` (m): a ray starts at most
# _RAY_BACKOFF plus an arm's reach from its body, so bodies this far apart never shadow it.
_BODY_SPACING = 4.0 * _RAY_BACKOFF
# Points sampled along a line that misses the body, to find the surface point nearest to it.
_MISS_SAMPLES = 64


# Levi-Civita symbol: a × b = ε a b as one einsum, several times faster than np.cross on the
# few-row arrays of one estimate.
_LEVI_CIVITA = np.zeros((3, 3, 3))
_LEVI_CIVITA[[0, 1, 2], [1, 2, 0], [2, 0, 1]] = 1.0
_LEVI_CIVITA[[0, 1, 2], [2, 0, 1], [1, 2, 0]] = -1.0


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum('ijk,...j,...k->...i', _LEVI_CIVITA, a, b)


class FtContactError(ValueError):
    """Input the F/T contact estimation cannot use (non-finite, wrong shape, bad setting)."""


def _vector(value, size: int, what: str) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if array.shape[-1:] != (size,) or not np.isfinite(array).all():
        raise FtContactError(f'{what} must be finite with {size} values per row, got '
                             f'shape {array.shape}')
    return array


# ------------------------------------------------------------------------ the sensor
@dataclass(frozen=True)
class SensorMount:
    """Where the sensor sits and which wrench it reports.

    Picture the arm standing on the sensor, the sensor bolted on the mount:

               arm (joint 1 and up)
        ════════════╤════════════   top plate: carries the robot
                    S               sensor frame S: axes R_BS, reference point o_S
        ════════════╧════════════   bottom plate: bolted to the mount
               mount / floor

    `reports`: `ROBOT_ON_SENSOR` — the wrench the robot exerts on the sensor (at rest the
    force points down, the robot's weight: the sim cobot's `ft_wrench`), or
    `MOUNT_ON_ROBOT` — the wrench the mount exerts on the robot (at rest it points up).
    `rotation`: R_BS, the sensor's axes in the base frame (columns). `position`: o_S, the
    point the sensor refers its moments to, in the base frame (m). The sim cobot's sensor:
    robot on sensor, identity, origin.
    """

    reports: str = ROBOT_ON_SENSOR
    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    position: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self):
        if self.reports not in CONVENTIONS:
            raise FtContactError(f'reports must be one of {CONVENTIONS}, got {self.reports!r}')
        rotation = np.asarray(self.rotation, dtype=float)
        if (rotation.shape != (3, 3) or not np.isfinite(rotation).all()
                or not np.allclose(rotation.T @ rotation, np.eye(3), atol=1e-6)
                or np.linalg.det(rotation) < 0):
            raise FtContactError('rotation must be a 3×3 rotation matrix')
        object.__setattr__(self, 'rotation', rotation)
        object.__setattr__(self, 'position', _vector(self.position, 3, 'position'))

    @property
    def _sign(self) -> float:
        return 1.0 if self.reports == ROBOT_ON_SENSOR else -1.0

    def to_base(self, reading: np.ndarray) -> np.ndarray:
        """Sensor readings [f; m] (…×6, sensor frame, at o_S) → the wrench of the robot on its
        base, [f; m] at the base origin, base frame: f_B = s R f, m_B = s (R m + o_S × R f)."""
        reading = _vector(reading, 6, 'F/T reading')
        force = reading[..., :3] @ self.rotation.T
        torque = reading[..., 3:] @ self.rotation.T + _cross(self.position, force)
        return self._sign * np.concatenate([force, torque], axis=-1)

    def from_base(self, wrench: np.ndarray) -> np.ndarray:
        """The inverse of `to_base`: what the sensor reads for this robot-on-base wrench."""
        wrench = self._sign * _vector(wrench, 6, 'base wrench')
        torque = wrench[..., 3:] - _cross(self.position, wrench[..., :3])
        return np.concatenate([wrench[..., :3] @ self.rotation, torque @ self.rotation], axis=-1)


class BaseWrenchCompensator:
    """Seed 004 eq. 20 solved for the contact wrench: reading − offset − (f₀ + f_Bd, τ₀ + τ_Bd).

    The arm's wrench comes from `robot` (its URDF or identified inertial parameters) carrying
    `payload` (core/payload.Payload, the residual's too). `offset` is the sensor's own reading
    with nothing on it, in its frame (`resting_offset` measures it; keeping it across
    restarts is the caller's job).
    """

    def __init__(self, robot: RobotModel, mount: SensorMount | None = None,
                 payload: Payload = Payload(), offset=(0.0,) * 6):
        self.mount = mount or SensorMount()
        self.robot = payload.carried_by(robot)
        self.offset = _vector(offset, 6, 'offset')
        self._still = np.zeros(robot.n)

    def arm_wrench(self, q: np.ndarray, v=None, a=None) -> np.ndarray:
        """[f; m] of the arm on its base (base origin, base frame): f₀ + f_Bd, τ₀ + τ_Bd, or
        the weight alone (f₀, τ₀, eqs. 9–10) when v or a is None."""
        if v is None or a is None:
            v = a = self._still
        return np.concatenate(self.robot.base_wrench(q, v, a))

    def contact_wrench(self, reading: np.ndarray, q: np.ndarray, v=None, a=None) -> np.ndarray:
        """[f_cB; τ_cB]: the contact force on the robot and its moment about the base origin,
        base frame (eq. 20). Without v and a the arm's motion is not compensated."""
        reading = _vector(reading, 6, 'F/T reading')
        return self.mount.to_base(reading - self.offset) - self.arm_wrench(q, v, a)

    def resting_offset(self, readings: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The sensor's offset (sensor frame) from readings (N×6) on an arm resting at q (N×n):
        the mean of each reading minus what the arm's weight alone would give."""
        readings = np.atleast_2d(_vector(readings, 6, 'F/T readings'))
        q = np.atleast_2d(_vector(q, self.robot.n, 'joint positions'))
        if len(readings) != len(q) or not len(q):
            raise FtContactError(f'need as many readings as joint positions (≥ 1), got '
                                 f'{len(readings)} and {len(q)}')
        weights = np.array([self.arm_wrench(qk) for qk in q])
        return np.mean(readings - self.mount.from_base(weights), axis=0)


class MomentumWrenchObserver:
    """Seed 004 eq. 20 without q̈: the contact wrench from the arm's momentum, low-passed.

    The arm's momentum h = [P; L] (about the base origin, base frame; `base_momentum`, a
    function of q and q̇ only) changes as ḣ = −(f_Bd, τ_Bd), so the contact wrench is
    W_c = R − W₀ + ḣ (R: the reading as the robot's wrench on its base, W₀ = [f₀; τ₀] its
    weight). As the momentum observer of the joint residual (seed 001) does for τ_ext,

        r(t) = K (h(t) − h(t₀) + ∫ (R − W₀ − r) ds),   so   ṙ = K (W_c − r):

    r follows W_c through a first-order low pass of time constant 1/K (`gain`, 1/s) and
    never differentiates a measurement: the q̈ estimate's error (~0.3 N·m on the sim cobot)
    is gone and the sensor noise is averaged over ~1/K seconds. The integral is implicit
    (stable for any step). Times are the samples' stamps in seconds; a stamp not after the
    last one restarts the observer.
    """

    def __init__(self, compensator: BaseWrenchCompensator, gain: float):
        if not (np.isfinite(gain) and gain > 0.0):
            raise FtContactError(f'observer gain must be > 0 1/s, got {gain}')
        self.compensator = compensator
        self.gain = float(gain)
        self.reset()

    def reset(self) -> None:
        """Start again at the next sample (its wrench is taken as the momentum's origin)."""
        self._time = None
        self._momentum0 = np.zeros(6)
        self._integral = np.zeros(6)
        self.wrench = np.zeros(6)

    def update(self, t: float, reading: np.ndarray, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The contact wrench [f_cB; τ_cB] (base origin, base frame, force on the robot) after
        the reading at stamp `t` (s) with the measured q, q̇."""
        compensator = self.compensator
        reading = _vector(reading, 6, 'F/T reading')
        static = compensator.mount.to_base(reading - compensator.offset) - compensator.arm_wrench(q)
        momentum = np.concatenate(compensator.robot.base_momentum(q, v))
        if self._time is None or t <= self._time:
            # start as if in steady state, r = R − W₀ (the weight-only compensation)
            self._time, self._momentum0, self._integral = t, momentum, static / self.gain
            self.wrench = static
            return self.wrench.copy()
        dt = t - self._time
        self._time = t
        # r = K (h − h₀ + I + (R − W₀ − r) dt), I the integral so far: solved for r
        self.wrench = self.gain * (momentum - self._momentum0 + self._integral + static * dt) / (
            1.0 + self.gain * dt)
        self._integral += (static - self.wrench) * dt
        return self.wrench.copy()


# ------------------------------------------------------------ wrench → line → point
def line_of_action(force: np.ndarray, torque: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 21's rank-5 solution: the line c = (p × τ)/‖p‖² + λ p̂ on which c × p = τ.

    `force`, `torque`: …×3. Returns the line's point nearest the origin and its unit
    direction p̂ (…×3 each). Exact when pᵀτ = 0; otherwise it is the least-squares line.
    """
    norm2 = np.einsum('...i,...i->...', force, force)[..., None]
    return _cross(force, torque) / norm2, force / np.sqrt(norm2)


def compatible_wrenches(force: np.ndarray, torque: np.ndarray,
                        singular_ratio: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """The compatible (p, τ) of seed 004 claim 6's six subsystems of five equations.

    The six equations f = p, m = c × p can only hold together when pᵀm = 0 (c × p ⊥ p).
    Dropping force equation k leaves p_k free, and pᵀm = 0 fixes it:
    p_k = −Σ_{i≠k} f_i m_i / m_k; dropping moment equation k fixes m_k = −Σ_{i≠k} f_i m_i / f_k
    likewise. Each subsystem, with the surface equation, is then a line of action meeting
    the surface. A subsystem is singular when its divisor is below `singular_ratio` times
    the norm of its vector (|m_k| < ratio ‖m‖, |f_k| < ratio ‖f‖): it is dropped. Returns
    the kept pairs (k×3 forces, k×3 torques; at least one moment subsystem always stays).
    """
    overlap = force * torque  # f_i m_i
    others = overlap.sum() - overlap  # Σ_{i≠k} f_i m_i
    divisors = np.concatenate([torque, force])
    norms = np.repeat([np.linalg.norm(torque), np.linalg.norm(force)], 3)
    keep = np.abs(divisors) > singular_ratio * norms
    wrenches = np.tile(np.concatenate([force, torque]), (6, 1))
    wrenches[[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]] = (-np.tile(others, 2)
                                                        / np.where(keep, divisors, 1.0))
    return wrenches[keep, :3], wrenches[keep, 3:]


def contacted_joint(tau_ext: np.ndarray, threshold) -> int | None:
    """Seed 004's current constraint, with the torque residual for the current: the contact
    is on the body of the highest joint whose |τ_ext| exceeds `threshold` (N·m, one value
    or one per joint, as FtEstimatorConfig.thresholds checked it once) — a contact on body k
    loads joints ≤ k only. None: no joint does."""
    above = np.flatnonzero(np.abs(tau_ext) > threshold)
    return int(above[-1]) if len(above) else None


# ------------------------------------------------------------------ surface models
@dataclass(frozen=True)
class Ellipsoid:
    """Seed 004 eq. 23 in a link frame: ‖A Rᵀ(c − o)‖ = 1, A = diag(1/α, 1/β, 1/γ).

    `centre` o (m), `axes` R (columns: the principal axes in the link frame), `semi_axes`
    (α, β, γ), m. The patent's ellipsoid has o = 0, R = I.
    """

    centre: np.ndarray
    axes: np.ndarray
    semi_axes: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, 'centre', _vector(self.centre, 3, 'ellipsoid centre'))
        axes = np.asarray(self.axes, dtype=float)
        if axes.shape != (3, 3) or not np.allclose(axes.T @ axes, np.eye(3), atol=1e-6):
            raise FtContactError('ellipsoid axes must be a 3×3 orthonormal matrix')
        object.__setattr__(self, 'axes', axes)
        semi = _vector(self.semi_axes, 3, 'ellipsoid semi-axes')
        if np.any(semi <= 0):
            raise FtContactError(f'ellipsoid semi-axes must be > 0 m, got {semi.tolist()}')
        object.__setattr__(self, 'semi_axes', semi)

    @classmethod
    def fit(cls, points: np.ndarray) -> 'Ellipsoid':
        """Least-squares quadric through surface points (N×3): xᵀQx + bᵀx = 1 is linear in
        Q and b; its centre is −Q⁻¹b/2, its axes and semi-axes Q's eigenvectors and
        eigenvalues. A surface no ellipsoid fits gets the box around the points along their
        principal axes instead."""
        mean = points.mean(axis=0)
        x, y, z = (points - mean).T
        design = np.column_stack([x * x, y * y, z * z, 2 * x * y, 2 * x * z, 2 * y * z, x, y, z])
        a, b, c, d, e, f, *linear = np.linalg.lstsq(design, np.ones(len(points)), rcond=None)[0]
        quadric = np.array([[a, d, e], [d, b, f], [e, f, c]])
        values, axes = np.linalg.eigh(quadric)
        if values.min() > 0:
            shift = -0.5 * np.linalg.solve(quadric, linear)
            scale = 1.0 + shift @ quadric @ shift
            if np.linalg.det(axes) < 0:
                axes[:, 2] *= -1
            return cls(mean + shift, axes, np.sqrt(scale / values))
        axes = np.linalg.svd(points - mean, full_matrices=False)[2].T
        if np.linalg.det(axes) < 0:
            axes[:, 2] *= -1
        local = (points - mean) @ axes
        low, high = local.min(axis=0), local.max(axis=0)
        return cls(mean + axes @ ((low + high) / 2), axes, np.maximum((high - low) / 2, 1e-3))

    def moved(self, rotation: np.ndarray, position: np.ndarray) -> 'Ellipsoid':
        """The same ellipsoid in a frame where the link frame has this pose."""
        return Ellipsoid(rotation @ self.centre + position, rotation @ self.axes, self.semi_axes)


class EllipsoidSurfaces:
    """The patent's surface model: one ellipsoid per link with collision geometry, fitted to
    its surface samples (`Ellipsoid.fit`) unless `overrides` gives it (link name → Ellipsoid,
    in that link's frame)."""

    name = 'ellipsoid'

    def __init__(self, surfaces: LinkSurfaces, overrides: dict[str, Ellipsoid] | None = None):
        self.robot = surfaces.robot
        overrides = dict(overrides or {})
        unknown = set(overrides) - set(self.robot.link_joint)
        if unknown:
            raise FtContactError(f'ellipsoids given for links not moved by the chain: '
                                 f'{sorted(unknown)}')
        self.ellipsoids = {link: Ellipsoid.fit(surfaces.surface_points(link)[0])
                           for link in surfaces.links
                           if link in self.robot.link_joint and link not in overrides}
        self.ellipsoids.update(overrides)
        # Every body's ellipsoids in its body frame, stacked for vector maths: the joint that
        # moves each (`_joint_of`) and its index among that body's links (`_index`).
        bodies = _bodies(self.robot, self.ellipsoids)
        self.joints = tuple(sorted(bodies))
        self._links = {joint: bodies[joint][0] for joint in self.joints}
        moved = [(joint, index, self.ellipsoids[link].moved(*pose)) for joint in self.joints
                 for index, (link, pose) in enumerate(zip(*bodies[joint]))]
        self._joint_of = np.array([joint for joint, _, _ in moved])
        self._index = np.array([index for _, index, _ in moved])
        self._centres = np.array([e.centre for _, _, e in moved])
        self._axes = np.array([e.axes for _, _, e in moved])
        self._semi = np.array([e.semi_axes for _, _, e in moved])

    def links(self, joint: int) -> list[str]:
        return self._links.get(joint, [])

    def first_entry(self, joints, origins, directions):
        """Where each line first enters its body going along its direction, for several
        bodies at once: `joints` (B body joints), `origins` and unit `directions` (B×N×3, row
        b in the frame of body b). Returns the points (B×N×3, NaN on a miss), the index of
        the link entered among the body's `links` (B×N, -1 on a miss) and the outward unit
        normal there (B×N×3, body frames; eq. 24's n)."""
        row_of = {joint: row for row, joint in enumerate(joints)}
        mine = np.flatnonzero(np.isin(self._joint_of, joints))
        rows = np.array([row_of[j] for j in self._joint_of[mine]])
        centres, axes, semi = self._centres[mine], self._axes[mine], self._semi[mine]
        # the lines in each ellipsoid's unit-sphere coordinates: E×N×3
        y = np.einsum('eji,enj->eni', axes, origins[rows] - centres[:, None]) / semi[:, None]
        u = np.einsum('eji,enj->eni', axes, directions[rows]) / semi[:, None]
        uu = np.einsum('eni,eni->en', u, u)
        yu = np.einsum('eni,eni->en', y, u)
        disc = yu ** 2 - uu * (np.einsum('eni,eni->en', y, y) - 1.0)
        with np.errstate(invalid='ignore'):
            entry = np.where(disc >= 0, (-yu - np.sqrt(disc)) / uu, np.inf)  # smaller root
        # per body, its ellipsoid entered first: B×N indices into the E stacked here
        own = rows[None, :, None] == np.arange(len(joints))[:, None, None]
        per_body = np.where(own, entry[None], np.inf)
        best = np.argmin(per_body, axis=1)
        along = np.take_along_axis(per_body, best[:, None], axis=1)[:, 0]
        n = np.arange(origins.shape[1])
        hit = np.isfinite(along)
        points = origins + np.where(hit, along, np.nan)[..., None] * directions
        # n ∝ R A² Rᵀ(c − o) = R (y/s) / s at the unit-sphere point y of the entry
        on_sphere = y[best, n] + np.where(hit, along, 0.0)[..., None] * u[best, n]
        normals = np.einsum('bnij,bnj->bni', axes[best], on_sphere / semi[best])
        normals /= np.linalg.norm(normals, axis=-1, keepdims=True)
        return points, np.where(hit, self._index[mine][best], -1), normals

    def closest(self, joint, points):
        """Nearest surface point to each point (N×3, body frame), its link index, distance."""
        mine = self._joint_of == joint
        centres, axes, semi = self._centres[mine], self._axes[mine], self._semi[mine]
        y = np.einsum('eji,enj->eni', axes, points[None] - centres[:, None])  # E×N×3, principal
        nearest = _ellipsoid_closest(y, semi[:, None, :])
        distance = np.linalg.norm(nearest - y, axis=2)
        best = np.argmin(distance, axis=0)
        n = np.arange(len(points))
        on_body = np.einsum('nij,nj->ni', axes[best], nearest[best, n]) + centres[best]
        return on_body, self._index[mine][best], distance[best, n]


def _ellipsoid_closest(y: np.ndarray, semi: np.ndarray, iterations: int = 30) -> np.ndarray:
    """Closest point on the axis-aligned ellipsoid Σ (x_i/s_i)² = 1 to y (broadcast …×3).

    x_i = s_i² y_i / (t + s_i²) with t the root of F(t) = Σ (s_i y_i / (t + s_i²))² − 1,
    convex and decreasing for t > −min s_i² (Eberly, "Distance from a point to an ellipse,
    an ellipsoid, or a hyperellipsoid"). Newton starts at t = 0 (the points given lie near
    the surface, so the root is near 0); a step that lands left of the root, or beyond the
    pole, is clamped to t₀ = −s_min² + s_min |y_min| where F ≥ 0, and from the left Newton
    climbs to the root without overshooting; it stops when t moves less than 1e-12 m²
    (a few steps for the points near the surface an estimate projects).
    """
    s2 = semi ** 2
    s_min = semi.min(axis=-1)
    y_min = np.abs(y * (semi == s_min[..., None])).max(axis=-1)  # |y| along the shortest axis
    lowest = -s_min ** 2 + s_min * np.maximum(y_min, 1e-9)
    t = np.maximum(np.zeros(y.shape[:-1]), lowest)
    for _ in range(iterations):
        shifted = t[..., None] + s2
        ratio2 = (semi * y / shifted) ** 2
        step = np.maximum(t + (ratio2.sum(-1) - 1.0) / (2.0 * (ratio2 / shifted).sum(-1)),
                          lowest) - t
        t = t + step
        if np.abs(step).max() < 1e-12:
            break
    return s2 * y / (t[..., None] + s2)


class MeshSurfaces:
    """The collision meshes of `LinkSurfaces` in one ray-casting scene, each body (the links
    one joint moves) in its body frame and shifted `_BODY_SPACING` from the next: far enough
    apart that a ray cast for one body can meet no other one first, so that one cast serves
    every body."""

    name = 'mesh'

    def __init__(self, surfaces: LinkSurfaces):
        self.robot = surfaces.robot
        meshes = {link: surfaces.mesh(link) for link in surfaces.links
                  if link in self.robot.link_joint}
        bodies = _bodies(self.robot, meshes)
        self.joints = tuple(sorted(bodies))
        self._links = {joint: bodies[joint][0] for joint in self.joints}
        self._shift = np.zeros((self.robot.n, 3))
        self._shift[list(self.joints), 0] = _BODY_SPACING * (
            np.arange(len(self.joints)) - (len(self.joints) - 1) / 2)
        self._scene = o3d.t.geometry.RaycastingScene()
        geometries = []  # (joint, link index) of each geometry id
        for joint in self.joints:
            for index, (link, (rotation, position)) in enumerate(zip(*bodies[joint])):
                vertices = (np.asarray(meshes[link].vertices) @ rotation.T + position
                            + self._shift[joint])
                geometry = self._scene.add_triangles(
                    o3d.core.Tensor(vertices.astype(np.float32)),
                    o3d.core.Tensor(np.asarray(meshes[link].triangles).astype(np.uint32)))
                geometries.append((geometry, joint, index))
        ids, joint_of, index = np.array(geometries).T
        self._joint_of = np.full(ids.max() + 2, -1)  # the last entry: the invalid id of a miss
        self._index = np.full(ids.max() + 2, -1)
        self._joint_of[ids], self._index[ids] = joint_of, index

    def links(self, joint: int) -> list[str]:
        return self._links.get(joint, [])

    def _geometries(self, ids: np.ndarray) -> np.ndarray:
        """Geometry ids of open3d (a miss gives an invalid one) → rows of the lookups."""
        return np.minimum(ids.astype(np.int64), len(self._index) - 1)

    def first_entry(self, joints, origins, directions):
        """As `EllipsoidSurfaces.first_entry`, on the meshes, one cast for all bodies
        (outward triangles: the first hit from far behind faces the ray)."""
        joints = np.asarray(joints)
        shift = self._shift[joints][:, None]
        starts = origins - _RAY_BACKOFF * directions
        rays = np.concatenate([starts + shift, directions], axis=-1).reshape(-1, 6)
        result = self._scene.cast_rays(o3d.core.Tensor(rays.astype(np.float32)))
        shape = origins.shape[:2]
        along = result['t_hit'].numpy().astype(float).reshape(shape)
        geometry = self._geometries(result['geometry_ids'].numpy()).reshape(shape)
        hit = np.isfinite(along) & (self._joint_of[geometry] == joints[:, None])
        along = np.where(hit, along, np.nan)[..., None]
        return (starts + along * directions, np.where(hit, self._index[geometry], -1),
                result['primitive_normals'].numpy().reshape(*shape, 3).astype(float))

    def closest(self, joint, points):
        """As `EllipsoidSurfaces.closest`, on the meshes."""
        shifted = (points + self._shift[joint]).astype(np.float32)
        result = self._scene.compute_closest_points(o3d.core.Tensor(shifted))
        nearest = result['points'].numpy().astype(float) - self._shift[joint]
        return (nearest, self._index[self._geometries(result['geometry_ids'].numpy())],
                np.linalg.norm(nearest - points, axis=1))


def _bodies(robot: RobotModel, per_link: dict) -> dict[int, tuple[list[str], list]]:
    """Per joint, the links of `per_link` it moves and their poses in its body frame (the
    frame of `robot.joint_links[joint]`): constant, so taken at q = 0."""
    q = np.zeros(robot.n)
    links = list(per_link)
    poses = dict(zip(links, robot.link_poses(q, links)))
    bodies: dict[int, tuple[list[str], list]] = {}
    for link in links:
        joint = robot.link_joint[link]
        body_rotation, body_position = robot.link_pose(q, robot.joint_links[joint])
        rotation, position = poses[link]
        entry = bodies.setdefault(joint, ([], []))
        entry[0].append(link)
        entry[1].append((body_rotation.T @ rotation, body_rotation.T @ (position - body_position)))
    return bodies


# ------------------------------------------------------------------------ estimate
@dataclass(frozen=True)
class FtLocatorConfig:
    """`FtContactLocator`'s settings (the ft_contact_estimator's rows feed them).

    `singular_ratio`: see `compatible_wrenches`. `min_force` (N): below it the line of
    action is too uncertain, no estimate. `presence_force` (N): a contact even when no
    joint's |τ_ext| reaches the threshold. `residual_noise` (N·m, σ of τ_ext),
    `normal_preference` (κ) and `ambiguity_margin`: the body scores of
    `FtContactLocator.locate_from_residual`.
    """

    singular_ratio: float = 0.1
    min_force: float = 2.0
    presence_force: float = 10.0
    residual_noise: float = 0.1
    normal_preference: float = 5.0
    ambiguity_margin: float = 2.0

    def __post_init__(self):
        if not 0.0 <= self.singular_ratio < 1.0 / np.sqrt(3.0):
            raise FtContactError(f'singular_ratio must be in [0, 1/√3), got '
                                 f'{self.singular_ratio}')
        if not self.min_force > 0.0:
            raise FtContactError(f'min_force must be > 0 N, got {self.min_force}')
        if not self.residual_noise > 0.0 or not self.normal_preference >= 0.0:
            raise FtContactError(f'residual_noise must be > 0 N·m and normal_preference ≥ 0, '
                                 f'got {self.residual_noise} and {self.normal_preference}')
        if not self.ambiguity_margin >= 0.0:
            raise FtContactError(f'ambiguity_margin must be ≥ 0, got {self.ambiguity_margin}')
        if not self.presence_force >= self.min_force:
            raise FtContactError(f'presence_force must be ≥ min_force ({self.min_force} N), '
                                 f'got {self.presence_force}')


class FtContactLocator:
    """Contact wrench at the base origin → contact point and force on one body.

    `model`: an `EllipsoidSurfaces` or `MeshSurfaces`; `config`: `FtLocatorConfig`.
    """

    def __init__(self, model: EllipsoidSurfaces | MeshSurfaces,
                 config: FtLocatorConfig = FtLocatorConfig()):
        self.model = model
        self.robot = model.robot
        self.config = config
        # Constant in each joint's body frame: the joint's axis and a point on it (for
        # `line_torques`), and the pose of every link of the model (for the estimate's frame).
        still = np.zeros(self.robot.n)
        bodies = self.robot.link_poses(still, self.robot.joint_links)
        origins, axes = self.robot.joint_axes(still)
        self._axes = np.array([r.T @ a for (r, _), a in zip(bodies, axes)])
        self._axis_points = np.array([r.T @ (o - p) for (r, p), o in zip(bodies, origins)])
        rotation, position = self.robot.link_pose(still, self.robot.tip_link)
        jacobian = self.robot.jacobian(still, self.robot.tip_link, -rotation.T @ position)
        self._revolute = np.linalg.norm(jacobian[3:], axis=0) > 0.5
        links = {link: None for joint in model.joints for link in model.links(joint)}
        self._placements = {link: pose for links_, poses in _bodies(self.robot, links).values()
                            for link, pose in zip(links_, poses)}

    def locate(self, q: np.ndarray, wrench: np.ndarray, joint: int) -> Contact | None:
        """The contact on the body of `joint` (index in model order) for the contact wrench
        [f_cB; τ_cB] (base origin, base frame, force on the robot); None when the force is
        below `min_force` or the body has no surface."""
        wrench = _vector(wrench, 6, 'contact wrench')
        if np.linalg.norm(wrench[:3]) < self.config.min_force or not self.model.links(joint):
            return None
        forces, torques = compatible_wrenches(wrench[:3], wrench[3:],
                                              self.config.singular_ratio)
        pose = self.robot.link_pose(q, self.robot.joint_links[joint])
        starts, headings, entries, _, _ = self._enter([pose], [joint],
                                                      *line_of_action(forces, torques))
        return self._contact(wrench, joint, pose, starts[0], headings[0], entries[0])

    def locate_from_residual(self, q: np.ndarray, wrench: np.ndarray, tau_ext: np.ndarray,
                             threshold) -> Contact | None:
        """The contact, its body chosen with the torque residual τ_ext (project sign).

        Seed 004's current constraint says a contact is present (some |τ_ext| exceeds
        `threshold`, one value or one per joint) and, in its strict form, that the body is
        that of the highest such joint (`contacted_joint`). The sensor itself says so too
        when the contact force reaches `presence_force` (N): a push on the first link loads
        no joint but the first, and that one only about its axis, so τ_ext may never see it. That
        form fails whenever the line
        of action passes near the axes of the joints above the body — a push square to a
        link that turns about its own axis loads its joint not at all. So every body j the
        line enters is scored, and the least score wins:

            misfit_j / (2σ²) + κ (1 − cos θ_j)

        misfit_j: how badly a contact on body j explains τ_ext. It gives τ_ext,i = τ_L,i
        (`line_torques`, the same anywhere on the line) for i ≤ j and 0 above:
        Σ_{i≤j} (τ_ext,i − τ_L,i)² + Σ_{i>j} τ_ext,i²; σ = `residual_noise` (N·m), so this
        term is the negative log-likelihood of Gaussian residual noise. θ_j: the angle
        between the force and the inward normal where the line enters body j; κ =
        `normal_preference`, a prior that contact forces lie near the normal (inside a
        friction cone). It decides when τ_ext cannot: a line through the axes of the
        joints between two bodies loads them alike. When the line enters no body: that of
        `contacted_joint`, its surface point nearest the line (None when no joint is loaded). Every
        body whose score is
        within `ambiguity_margin` of the least (a likelihood ratio of e^margin) is a
        candidate: its link where the line enters it goes into `ambiguous_with`, best first.

        One cast serves all: the least-squares line (scores) and claim 6's subsystem lines
        (the point), each in every body's frame.
        """
        lowest = contacted_joint(tau_ext, threshold)
        wrench = _vector(wrench, 6, 'contact wrench')
        force = np.linalg.norm(wrench[:3])
        settings = self.config
        if force < settings.min_force or (lowest is None and force < settings.presence_force):
            return None
        forces, torques = compatible_wrenches(wrench[:3], wrench[3:], settings.singular_ratio)
        origins, directions = line_of_action(np.vstack([wrench[:3], forces]),
                                             np.vstack([wrench[3:], torques]))
        joints = self.model.joints
        every_body = self.robot.link_poses(q, self.robot.joint_links)
        poses = [every_body[j] for j in joints]
        starts, headings, entries, links, normals = self._enter(poses, joints, origins,
                                                                directions)
        entered = np.isfinite(entries[:, 0, 0])
        if not entered.any():
            return None if lowest is None else self.locate(q, wrench, lowest)
        explained = np.cumsum((tau_ext - self.line_torques(q, wrench, every_body)) ** 2)
        unexplained = np.cumsum((tau_ext ** 2)[::-1])[::-1]
        misfit = np.append(explained[:-1] + unexplained[1:], explained[-1])[list(joints)]
        cosines = -np.einsum('bi,bi->b', normals[:, 0], headings[:, 0])
        score = np.where(entered, misfit / (2.0 * settings.residual_noise ** 2)
                         + settings.normal_preference * (1.0 - cosines), np.inf)
        order = np.argsort(score)
        b = int(order[0])
        close = [int(c) for c in order if score[c] <= score[b] + settings.ambiguity_margin]
        others = [self.model.links(joints[c])[links[c, 0]] for c in close[1:]]
        return self._contact(wrench, joints[b], poses[b], starts[b, 1:], headings[b, 1:],
                             entries[b, 1:], others)

    def _enter(self, poses, joints, origins, directions):
        """Lines (N×3 points, unit directions, base frame) in the frames of the bodies of
        `joints` (B, their poses (R, p) in `poses`), and where each enters each body: the
        lines (B×N×3 twice), the entry points (B×N×3, NaN on a miss), the links entered
        (B×N indices into each body's links, -1 on a miss) and the normals there."""
        rotations = np.array([rotation for rotation, _ in poses])
        positions = np.array([position for _, position in poses])
        starts = np.einsum('bji,bnj->bni', rotations, origins[None] - positions[:, None])
        headings = np.einsum('bji,nj->bni', rotations, directions)
        entries, links, normals = self.model.first_entry(joints, starts, headings)
        return starts, headings, entries, links, normals

    def _contact(self, wrench, joint, pose, origins, directions, entries,
                 others=()) -> Contact:
        """The contact on the body of `joint` (pose (R, p)) from claim 6's lines (N×3, body
        frame) and where they enter it: the mean entry projected onto the surface, or the
        surface point nearest the last line when none enters. `others`: the links of the
        other candidate bodies."""
        hit = np.isfinite(entries[:, 0])
        if hit.any():
            mean = entries[hit].mean(axis=0, keepdims=True)
        else:
            mean = self._nearest_to_line(joint, origins[-1], directions[-1])
        point, link_index, _ = self.model.closest(joint, mean)
        link = self.model.links(joint)[int(link_index[0])]
        body_rotation, body_position = pose
        rotation, position = self._placements[link]  # the link in the body frame
        force = wrench[:3]
        return Contact(link, rotation.T @ (point[0] - position),
                       rotation.T @ (force @ body_rotation),
                       body_rotation @ point[0] + body_position, force.copy(), tuple(others))

    def line_torques(self, q: np.ndarray, wrench: np.ndarray, bodies=None) -> np.ndarray:
        """τ_i = J_iᵀ[f; m] for every joint i: the joint torques the contact wrench would
        cause if every joint carried it: a_i·(m − o_i × f) for a revolute joint i with axis
        a_i through o_i, a_i·f for a prismatic one. `bodies`: the poses of the joints' body
        frames at q (`RobotModel.joint_links`), when already known."""
        force, torque = np.split(_vector(wrench, 6, 'contact wrench'), 2)
        if bodies is None:
            bodies = self.robot.link_poses(q, self.robot.joint_links)
        rotations = np.array([rotation for rotation, _ in bodies])
        positions = np.array([position for _, position in bodies])
        axes = np.einsum('nij,nj->ni', rotations, self._axes)
        on_axes = np.einsum('nij,nj->ni', rotations, self._axis_points) + positions
        moments = np.einsum('ni,ni->n', axes, torque - _cross(on_axes, force))
        return np.where(self._revolute, moments, axes @ force)

    def _nearest_to_line(self, joint, origin, direction):
        """The surface point nearest to a line that misses the body: the line sampled over
        ±1 m around its point nearest the body frame's origin."""
        along = np.linspace(-1.0, 1.0, _MISS_SAMPLES)
        samples = origin - (origin @ direction) * direction + along[:, None] * direction
        points, _, distance = self.model.closest(joint, samples)
        return points[np.argmin(distance)][None]


def make_surfaces(kind: str, surfaces: LinkSurfaces,
                  ellipsoids: dict[str, Ellipsoid] | None = None):
    """The surface model `kind` ('ellipsoid' or 'mesh') of a robot's `LinkSurfaces`."""
    if kind == 'ellipsoid':
        return EllipsoidSurfaces(surfaces, ellipsoids)
    if kind == 'mesh':
        return MeshSurfaces(surfaces)
    raise FtContactError(f'surface model must be one of {SURFACE_MODELS}, got {kind!r}')
