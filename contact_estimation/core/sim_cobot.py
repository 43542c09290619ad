"""A simulated torque-controlled cobot in MuJoCo: base F/T sensor, lidar, scripted contacts.

The MuJoCo model is generated from the same robot description as `RobotModel` (one body per
joint of the chain, the joint frames, axes and inertial parameters of pinocchio's model), so
the simulated rigid-body dynamics are exactly `RobotModel.rnea`. Friction is ours, not
MuJoCo's: each step applies

    qfrc_applied = τ_cmd − f(q̇)      (f: seed 001 eq. 23, `friction.continuous`)

so the project convention M q̈ + C q̇ + g + f(q̇) = τ + τ_ext holds with τ = τ_cmd, the motor
torque a joint torque sensor measures, and τ_ext = Σ J(p)ᵀ F over the contacts (forces ON the
robot). To keep a steep Coulomb slope stable at 1 ms, the friction is integrated implicitly,
linearised about the current velocity: MuJoCo's joint damping is set to f'(q̇) every step and
added back to qfrc_applied, so the explicit force stays exactly τ_cmd − f(q̇).

Frames: MuJoCo's world is the robot's `base_link` frame; every pose, point, force and lidar
hit is in that frame unless said otherwise. Every collision object of the robot's
description is a geom of its own (primitives as such, meshes as mesh assets), so contacts and
lidar hits lie on the links' collision surfaces; the robot does not collide with itself.

The 6-axis F/T sensor sits between the base and joint 1 (seed 004). `ft_wrench()` reports
the wrench the robot exerts ON the sensor, at the base origin, in the base frame: at rest it
is the robot's weight (force Σ m_i g, torque Σ r_i × m_i g), and a contact force F at p adds
(F, p × F), the f = f₀ + f_cB + f_Bd of seed 004.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import mujoco
import numpy as np
import pinocchio as pin
import yaml

from contact_estimation.core import friction
from contact_estimation.core.robot_model import RobotModel
from contact_estimation.core.trajectory import TimeScaler, make_trajectory

INTEGRATORS = {'implicitfast': mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
               'implicit': mujoco.mjtIntegrator.mjINT_IMPLICIT,
               'euler': mujoco.mjtIntegrator.mjINT_EULER}
SHAPES = {'box': 3, 'sphere': 1, 'capsule': 2, 'cylinder': 2}  # MuJoCo geom sizes
FT_SITE = 'ft_sensor'
FLOOR = 'floor'
OBSTACLE_PREFIX = 'obstacle/'
ROBOT_PREFIX = 'robot/'


class SimulationError(RuntimeError):
    """The physics diverged (MuJoCo found a non-finite acceleration)."""


class ScenarioError(ValueError):
    """A scenario file does not fit the robot or the format."""


# ------------------------------------------------------------------------------ scenario
@dataclass(frozen=True)
class PointForce:
    """A scripted force on `link` at `point` (link frame, m).

    `force` (N, on the robot) is in the base frame (`frame='base'`) or turns with the link
    (`frame='link'`). It acts from `start` for `duration` seconds of simulated time, ramping
    linearly up over the first `ramp` seconds and down over the last `ramp` seconds.
    """

    link: str
    point: np.ndarray
    force: np.ndarray
    start: float
    duration: float
    ramp: float = 0.05
    frame: str = 'base'

    def scale(self, t: float) -> float:
        """0 … 1: the share of `force` acting at time t."""
        elapsed, end = t - self.start, self.start + self.duration - t
        if elapsed < 0 or end <= 0:
            return 0.0
        if self.ramp <= 0:
            return 1.0
        return float(min(1.0, elapsed / self.ramp, end / self.ramp))


@dataclass(frozen=True)
class Obstacle:
    """A fixed solid the arm can hit: MuJoCo sizes (box: half extents; sphere: radius;
    capsule, cylinder: radius and half length along the obstacle's z), pose in the base frame."""

    name: str
    shape: str
    size: tuple
    position: np.ndarray
    rpy: np.ndarray = field(default_factory=lambda: np.zeros(3))


@dataclass
class Scenario:
    """What happens to the arm: scripted forces, obstacles and, optionally, its motion."""

    forces: list[PointForce] = field(default_factory=list)
    obstacles: list[Obstacle] = field(default_factory=list)
    trajectory: dict | None = None  # a `make_trajectory` spec; None: the caller's default
    description: str = ''

    @classmethod
    def load(cls, path: str, robot: RobotModel) -> 'Scenario':
        with open(path, encoding='utf-8') as f:
            raw = yaml.safe_load(f) or {}
        try:
            return cls.from_dict(raw, robot)
        except ScenarioError as err:
            raise ScenarioError(f'{path}: {err}') from err

    @classmethod
    def from_dict(cls, raw: dict, robot: RobotModel) -> 'Scenario':
        unknown = set(raw) - {'description', 'robot', 'trajectory', 'forces', 'obstacles'}
        if unknown:
            raise ScenarioError(f'unknown keys {sorted(unknown)}')
        if raw.get('robot') not in (None, robot.name):
            raise ScenarioError(f'written for robot {raw["robot"]!r}, this is {robot.name!r}')
        try:
            forces = [_point_force(item, robot) for item in raw.get('forces') or []]
            obstacles = [_obstacle(item) for item in raw.get('obstacles') or []]
        except (KeyError, TypeError, ValueError) as err:
            raise ScenarioError(f'bad force or obstacle: {err!r}') from err
        trajectory = raw.get('trajectory')
        if trajectory is not None:
            try:
                make_trajectory(robot, trajectory)
            except (KeyError, TypeError, ValueError) as err:
                raise ScenarioError(f'bad trajectory: {err}') from err
        return cls(forces, obstacles, trajectory, str(raw.get('description', '')))


def _vector(value, size: int, what: str) -> np.ndarray:
    v = np.asarray(value, dtype=float)
    if v.shape != (size,) or not np.all(np.isfinite(v)):
        raise ValueError(f'{what} must be {size} finite numbers, got {value!r}')
    return v


def _point_force(item: dict, robot: RobotModel) -> PointForce:
    if item['link'] not in robot.link_joint:
        raise ValueError(f'link {item["link"]!r} is not a moving link of the chain')
    frame = item.get('frame', 'base')
    if frame not in ('base', 'link'):
        raise ValueError(f'force frame must be "base" or "link", got {frame!r}')
    force = PointForce(item['link'], _vector(item['point'], 3, 'point'),
                       _vector(item['force'], 3, 'force'), float(item['start']),
                       float(item['duration']), float(item.get('ramp', 0.05)), frame)
    if force.duration <= 0 or force.ramp < 0 or 2 * force.ramp > force.duration:
        raise ValueError('a force needs duration > 0 and 0 <= ramp <= duration / 2')
    return force


def _obstacle(item: dict) -> Obstacle:
    shape = item['shape']
    if shape not in SHAPES:
        raise ValueError(f'obstacle shape must be one of {sorted(SHAPES)}, got {shape!r}')
    size = _vector(item['size'], SHAPES[shape], f'size of a {shape}')
    if np.any(size <= 0):
        raise ValueError('obstacle sizes must be positive')
    return Obstacle(str(item['name']), shape, tuple(size), _vector(item['position'], 3, 'position'),
                    _vector(item.get('rpy', [0, 0, 0]), 3, 'rpy'))


# ------------------------------------------------------------------------ configuration
@dataclass
class LidarConfig:
    """Rays from `position` (base frame); the lidar's x axis looks forward, rotated by `rpy`
    (roll, pitch, yaw, REP 103). `rows` × `columns` rays spread over the vertical and
    horizontal fields of view (rad)."""

    position: tuple = (1.5, 0.0, 1.0)
    rpy: tuple = (0.0, 0.35, np.pi)
    rows: int = 32
    columns: int = 128
    vertical_fov: float = 1.0
    horizontal_fov: float = 1.6
    max_range: float = 5.0
    range_noise: float = 0.005  # m, Gaussian σ
    floor: bool = True          # a floor plane the lidar sees (the arm never touches it)
    floor_height: float = 0.0   # m, in the base frame

    def directions(self) -> np.ndarray:
        """Unit ray directions (rows·columns × 3) in the base frame."""
        elevation = np.linspace(-self.vertical_fov / 2, self.vertical_fov / 2, self.rows)
        azimuth = np.linspace(-self.horizontal_fov / 2, self.horizontal_fov / 2, self.columns)
        el, az = (a.ravel() for a in np.meshgrid(elevation, azimuth, indexing='ij'))
        local = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=1)
        return local @ pin.rpy.rpyToMatrix(*self.rpy).T


DEFAULT_FRICTION = (0.3, 40.0, 4.0, 1.0, 40.0, 0.2)  # seed 001 eq. 23: γ1 … γ6, every joint


@dataclass
class SimConfig:
    timestep: float = 0.001
    integrator: str = 'implicitfast'
    # Joint friction, seed 001 eq. 23: one row (γ1 … γ6) for every joint or one per joint.
    friction: np.ndarray = field(default_factory=lambda: np.array(DEFAULT_FRICTION))
    # Computed-torque controller: closed-loop natural frequency (rad/s) and damping ratio;
    # the share of the friction model it feeds forward (at the reference velocity).
    natural_frequency: float = 25.0
    damping_ratio: float = 1.0
    friction_compensation: float = 0.7
    position_noise: float = 1e-5  # rad, Gaussian σ of the measured joint positions
    velocity_noise: float = 1e-3  # rad/s
    effort_noise: float = 0.05    # N·m
    ft_force_noise: float = 0.1   # N
    ft_torque_noise: float = 0.01  # N·m
    noise_seed: int = 0
    lidar: LidarConfig = field(default_factory=LidarConfig)


@dataclass(frozen=True)
class Contact:
    """One contacted link: `point` and `force` (on the robot) in the link's frame."""

    link: str
    point: np.ndarray
    force: np.ndarray


# ------------------------------------------------------------------------------- MJCF
def _fmt(values) -> str:
    return ' '.join(repr(float(v)) for v in np.ravel(values))


def _quat(rotation: np.ndarray) -> str:
    q = pin.Quaternion(rotation)
    return _fmt([q.w, q.x, q.y, q.z])


def _robot_geom(assets: ET.Element, body: ET.Element, geometry: pin.GeometryObject,
                placement: pin.SE3) -> None:
    """One collision object of the robot as a MuJoCo geom of `body`, placed by `placement`.

    Primitives keep their shape (coal and MuJoCo both size them by half extents, radius and
    half length along z); a mesh becomes one of `assets`, the vertices and triangles coal
    loaded (the URDF's scale applied). MuJoCo collides with a mesh's convex hull and casts
    rays at its triangles. Robot geoms collide with obstacles only: contype 1 / conaffinity 0
    never matches itself.
    """
    shape, name = geometry.geometry, ROBOT_PREFIX + geometry.name
    kind = type(shape).__name__
    if kind.startswith('BVHModel'):
        triangles = [[t[k] for k in range(3)]
                     for t in map(shape.tri_indices, range(shape.num_tris))]
        ET.SubElement(assets, 'mesh', name=name, vertex=_fmt(shape.vertices()),
                      face=' '.join(str(i) for i in np.ravel(triangles)))
        attrs = {'type': 'mesh', 'mesh': name}
    elif kind == 'Box':
        attrs = {'type': 'box', 'size': _fmt(shape.halfSide)}
    elif kind == 'Sphere':
        attrs = {'type': 'sphere', 'size': repr(shape.radius)}
    elif kind in ('Cylinder', 'Capsule'):
        attrs = {'type': kind.lower(), 'size': _fmt([shape.radius, shape.halfLength])}
    else:
        raise ValueError(f'collision shape {kind} of {geometry.name!r} is not supported')
    ET.SubElement(body, 'geom', name=name, pos=_fmt(placement.translation),
                  quat=_quat(placement.rotation), contype='1', conaffinity='0',
                  rgba='0.9 0.9 0.9 1', **attrs)


def _joint(body: ET.Element, robot: RobotModel, j: int) -> None:
    """Hinge or slide along the pinocchio joint's motion subspace, with its position limits."""
    joint = robot.model.joints[j]
    data = joint.createData()
    joint.calc(data, pin.neutral(robot.model))
    linear, angular = np.asarray(data.S).ravel()[:3], np.asarray(data.S).ravel()[3:]
    revolute = np.linalg.norm(angular) > 0
    attrs = {'name': robot.joint_names[j - 1], 'type': 'hinge' if revolute else 'slide',
             'axis': _fmt(angular if revolute else linear)}
    lower, upper = (limit[j - 1] for limit in robot.position_limits)
    if np.isfinite(lower) and np.isfinite(upper):
        attrs['range'] = _fmt([lower, upper])
    ET.SubElement(body, 'joint', **attrs)


def build_mjcf(robot: RobotModel, obstacles: list[Obstacle], config: SimConfig) -> str:
    """MJCF of the robot on its F/T sensor, the obstacles and the floor; world = base frame."""
    model = robot.model
    pin.framesForwardKinematics(model, robot.data, pin.neutral(model))
    base_inverse = robot.data.oMf[model.getFrameId(robot.base_link)].inverse()

    root = ET.Element('mujoco', model=robot.name or 'robot')
    ET.SubElement(root, 'compiler', angle='radian', inertiafromgeom='false', autolimits='true')
    ET.SubElement(root, 'option', timestep=repr(config.timestep), integrator=config.integrator,
                  gravity=_fmt(base_inverse.rotation @ model.gravity.linear))
    assets = ET.SubElement(root, 'asset')
    world = ET.SubElement(root, 'worldbody')
    lidar = config.lidar
    if lidar.floor:
        # Seen by the lidar, never touched (contype = conaffinity = 0). A thin box, not a
        # plane: mj_multiRay culls planes by a zero bounding radius and misses most rays.
        ET.SubElement(world, 'geom', name=FLOOR, type='box', size='5 5 0.005',
                      pos=_fmt([0, 0, lidar.floor_height - 0.005]), contype='0',
                      conaffinity='0', rgba='0.5 0.5 0.5 1')
    for obstacle in obstacles:
        ET.SubElement(world, 'geom', name=OBSTACLE_PREFIX + obstacle.name, type=obstacle.shape,
                      size=_fmt(obstacle.size), pos=_fmt(obstacle.position),
                      quat=_quat(pin.rpy.rpyToMatrix(*obstacle.rpy)),
                      contype='0', conaffinity='1', rgba='0.8 0.3 0.2 0.6')

    bodies = {0: world}
    # Massless body between the base and joint 1: the F/T sensor measures its link to the world.
    sensor_body = ET.SubElement(world, 'body', name=FT_SITE)
    ET.SubElement(sensor_body, 'site', name=FT_SITE, size='0.02')
    for j in range(1, model.njoints):
        parent = model.parents[j]
        placement = model.jointPlacements[j]
        if parent == 0:
            placement = base_inverse * placement
        body = ET.SubElement(sensor_body if parent == 0 else bodies[parent], 'body',
                             name=robot.joint_links[j - 1], pos=_fmt(placement.translation),
                             quat=_quat(placement.rotation))
        bodies[j] = body
        _joint(body, robot, j)
        inertia = model.inertias[j]
        i = inertia.inertia
        ET.SubElement(body, 'inertial', pos=_fmt(inertia.lever), mass=repr(inertia.mass),
                      fullinertia=_fmt([i[0, 0], i[1, 1], i[2, 2], i[0, 1], i[0, 2], i[1, 2]]))
    for geometry in robot.collision_model.geometryObjects:
        joint = geometry.parentJoint
        _robot_geom(assets, bodies[joint], geometry,
                    base_inverse * geometry.placement if joint == 0 else geometry.placement)
    sensors = ET.SubElement(root, 'sensor')
    ET.SubElement(sensors, 'force', site=FT_SITE)
    ET.SubElement(sensors, 'torque', site=FT_SITE)
    return ET.tostring(root, encoding='unicode')


# ------------------------------------------------------------------------- simulation
def _friction_and_slope(v: np.ndarray, g1, g2, g3, g4, g5, g6) -> tuple[np.ndarray, np.ndarray]:
    """f(q̇) of seed 001 eq. 23 (as `friction.continuous`) and ∂f/∂q̇, from one set of tanh
    (d tanh(x)/dx = 1 − tanh²x): the step needs both, at 1 kHz."""
    t2, t3, t5 = np.tanh(g2 * v), np.tanh(g3 * v), np.tanh(g5 * v)
    f = g1 * (t2 - t3) + g4 * t5 + g6 * v
    slope = g1 * (g2 * (1.0 - t2 * t2) - g3 * (1.0 - t3 * t3)) + g4 * g5 * (1.0 - t5 * t5) + g6
    return f, slope


class SimulatedCobot:
    """The robot of `robot` under computed-torque control, following `trajectory` (played back
    through a `TimeScaler`), with the forces and obstacles of `scenario`.

    `step()` advances one physics step. Afterwards the readings describe the instant `time`
    at which the step's motor torque was applied (the state it started from; the physics has
    been integrated to `time + dt`): `joint_state()`, `ft_wrench()`, `lidar_points()`,
    `true_contacts()`, `true_external_torque()`.
    """

    def __init__(self, robot: RobotModel, trajectory, scenario: Scenario | None = None,
                 config: SimConfig | None = None):
        self.robot = robot
        self.scenario = scenario or Scenario()
        self.config = config = config or SimConfig()
        if config.integrator not in INTEGRATORS:
            raise ValueError(f'integrator must be one of {sorted(INTEGRATORS)} '
                             f'(RK4 cannot split a step to apply the control)')
        rows = np.atleast_2d(np.asarray(config.friction, dtype=float))
        if rows.shape not in ((1, 6), (robot.n, 6)):
            raise ValueError(f'friction takes 6 parameters (seed 001 eq. 23) for every joint '
                             f'or 6 × {robot.n}, got {rows.size}')
        self._friction = np.broadcast_to(rows, (robot.n, 6)).T  # 6 × n: γ_k of every joint
        self.mjcf = build_mjcf(robot, self.scenario.obstacles, config)
        self.model = mujoco.MjModel.from_xml_string(self.mjcf)
        self.data = mujoco.MjData(self.model)
        self._sensor_adr = [self.model.sensor(k).adr[0] for k in range(2)]
        # The moving link of each geom (None: the base, an obstacle or the floor).
        link_of = {ROBOT_PREFIX + g.name: robot.model.frames[g.parentFrame].name
                   for g in robot.collision_model.geometryObjects if g.parentJoint > 0}
        self._geom_link = [link_of.get(self.model.geom(g).name)
                           for g in range(self.model.ngeom)]
        self._body_of_link = {link: self.model.body(robot.joint_links[j]).id
                              for link, j in robot.link_joint.items()}
        self.scaler = TimeScaler(trajectory, config.timestep)
        self._kp = config.natural_frequency ** 2
        self._kd = 2 * config.damping_ratio * config.natural_frequency
        limits = robot.effort_limits
        self._effort_limit = np.where(limits > 0, limits, np.inf)
        self._rng = np.random.default_rng(config.noise_seed)
        self._rays = config.lidar.directions()
        self._ray_origin = np.asarray(config.lidar.position, dtype=float)
        self._ray_geoms = np.zeros(len(self._rays), dtype=np.int32)
        self._ray_dist = np.zeros(len(self._rays))

        q0, v0, _ = self.scaler.reference()
        self.data.qpos[:], self.data.qvel[:] = q0, v0
        self.time = 0.0
        self.q = self.v = self.tau = None  # true state and motor torque at `time`
        self._measured = None
        self._applied: list[tuple[str, np.ndarray, np.ndarray]] = []  # (link, p_link, F_base)
        self._bad_qacc = 0

    # -------------------------------------------------------------------- stepping
    @property
    def dt(self) -> float:
        return self.config.timestep

    def friction(self, v: np.ndarray) -> np.ndarray:
        """f(q̇) of every joint, seed 001 eq. 23 (`v`: n, or k × n for k velocity vectors)."""
        return friction.continuous(v, *self._friction)

    def set_time_scaling(self, scaling: float) -> float:
        """f_S of seed 003 eq. 8 for the reference playback; returns the (clipped) value used."""
        return self.scaler.set_scaling(scaling)

    def step(self) -> None:
        m, d, cfg = self.model, self.data, self.config
        q, v = d.qpos.copy(), d.qvel.copy()
        reference = self.scaler.reference()
        (f, f_ref), (slope, _) = _friction_and_slope(np.stack([v, reference[1]]), *self._friction)
        # Implicit friction: damping f'(q̇) here, +f'(q̇)q̇ in qfrc_applied (see module doc).
        m.dof_damping[:] = np.maximum(slope, 0.0)
        mujoco.mj_step1(m, d)

        noise = self._rng.standard_normal((3, self.robot.n))
        q_meas = q + cfg.position_noise * noise[0]
        v_meas = v + cfg.velocity_noise * noise[1]
        tau = self._control(q_meas, v_meas, reference, f_ref)
        d.qfrc_applied[:] = tau - f + m.dof_damping * v
        self.time = d.time
        self._apply_forces(q)
        mujoco.mj_step2(m, d)
        self.scaler.advance()

        bad = d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number
        if bad != self._bad_qacc:
            self._bad_qacc = bad
            raise SimulationError(f'the physics diverged at t = {self.time:.3f} s '
                                  f'(MuJoCo reset the state)')
        self.q, self.v, self.tau = q, v, tau
        self._measured = (q_meas, v_meas, tau + cfg.effort_noise * noise[2])

    def _control(self, q: np.ndarray, v: np.ndarray, reference, friction_ref) -> np.ndarray:
        """Computed torque on the measured state and the reference (q_d, q̇_d, q̈_d):
        τ = rnea(q, q̇, q̈_d + Kp e + Kd ė) + c f(q̇_d), saturated at the effort limits. The
        friction is fed forward at the reference velocity (no chatter from velocity noise).
        It knows nothing of the external forces."""
        q_ref, v_ref, a_ref = reference
        a_cmd = a_ref + self._kp * (q_ref - q) + self._kd * (v_ref - v)
        tau = self.robot.rnea(q, v, a_cmd) + self.config.friction_compensation * friction_ref
        return np.clip(tau, -self._effort_limit, self._effort_limit)

    def _apply_forces(self, q: np.ndarray) -> None:
        """Scripted point forces at time `self.time`, as Cartesian forces on their bodies."""
        d = self.data
        d.xfrc_applied[:] = 0.0
        self._applied = []
        for item in self.scenario.forces:
            share = item.scale(self.time)
            if share == 0.0:
                continue
            rotation, origin = self.robot.link_pose(q, item.link)
            force = share * (rotation @ item.force if item.frame == 'link' else item.force)
            point = rotation @ item.point + origin
            body = self._body_of_link[item.link]
            d.xfrc_applied[body, :3] += force
            d.xfrc_applied[body, 3:] += np.cross(point - d.xipos[body], force)
            self._applied.append((item.link, item.point.copy(), force))

    # -------------------------------------------------------------------- readings
    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Measured (q, q̇, τ) at `time`: the motor torque τ_cmd plus sensor noise."""
        return self._measured

    def ft_wrench(self) -> tuple[np.ndarray, np.ndarray]:
        """(force, torque) the robot exerts on the base F/T sensor, at the base origin, base
        frame; one noisy reading per call."""
        data = self.data.sensordata
        force_on_robot = data[self._sensor_adr[0]:self._sensor_adr[0] + 3]
        torque_on_robot = data[self._sensor_adr[1]:self._sensor_adr[1] + 3]
        noise = self._rng.standard_normal(6)
        return (-force_on_robot + self.config.ft_force_noise * noise[:3],
                -torque_on_robot + self.config.ft_torque_noise * noise[3:])

    def lidar_points(self) -> np.ndarray:
        """Hit points (N × 3, base frame) of one lidar scan at `time`, with range noise."""
        mujoco.mj_multiRay(self.model, self.data, self._ray_origin, self._rays.ravel(), None, 1,
                           -1, self._ray_geoms, self._ray_dist, len(self._rays),
                           self.config.lidar.max_range)
        hit = self._ray_dist >= 0
        noise = self.config.lidar.range_noise * self._rng.standard_normal(hit.sum())
        ranges = self._ray_dist[hit] + noise
        return self._ray_origin + ranges[:, None] * self._rays[hit]

    def _contacts_base(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """(link, point in link frame, force on the robot in base frame) of every contact."""
        contacts = list(self._applied)
        d = self.data
        result = np.zeros(6)
        for i in range(d.ncon):
            contact = d.contact[i]
            link1, link2 = self._geom_link[contact.geom1], self._geom_link[contact.geom2]
            if (link1 is None) == (link2 is None) or contact.efc_address < 0:
                continue
            mujoco.mj_contactForce(self.model, d, i, result)
            # Contact frame rows: normal (from geom1 to geom2), then tangents; the force is
            # the one geom1 exerts on geom2.
            force = contact.frame.reshape(3, 3).T @ result[:3]
            if not np.any(force):
                continue
            link = link2 or link1
            # On the robot; its surface lies dist/2 (negative: penetration) from contact.pos
            # along the normal, towards the robot.
            force, offset = (force, contact.dist / 2) if link2 else (-force, -contact.dist / 2)
            # contact.pos is midway between the two surfaces. Slid along the force's line of
            # action onto the plane of the link's surface there, the point has the same
            # moment (τ_ext = J(p)ᵀF and the F/T wrench unchanged) and lies on the link.
            normal = contact.frame[:3]
            point = contact.pos + offset / (force @ normal) * force
            rotation, origin = self.robot.link_pose(self.q, link)
            contacts.append((link, rotation.T @ (point - origin), force))
        return contacts

    def true_contacts(self) -> list[Contact]:
        """Contacts at `time`, one per link: the total force on that link and its point of
        application (several MuJoCo contact points on a link are merged at their
        force-weighted mean). Point and force in the link frame."""
        per_link: dict[str, list] = {}
        for link, point, force in self._contacts_base():
            per_link.setdefault(link, []).append((point, force))
        contacts = []
        for link, items in per_link.items():
            points = np.array([p for p, _ in items])
            forces = np.array([f for _, f in items])
            weights = np.linalg.norm(forces, axis=1)
            rotation, _ = self.robot.link_pose(self.q, link)
            contacts.append(Contact(link, weights @ points / weights.sum(),
                                    rotation.T @ forces.sum(axis=0)))
        return contacts

    def true_external_torque(self) -> np.ndarray:
        """τ_ext = Σ J(p)ᵀ F over the contacts at `time` (forces on the robot)."""
        tau = np.zeros(self.robot.n)
        for link, point, force in self._contacts_base():
            tau += self.robot.point_jacobian(self.q, link, point).T @ force
        return tau
