"""Serial-arm model: kinematics and rigid-body dynamics with pinocchio, no ROS.

Load a robot from a URDF file, a URDF string (the `robot_description` parameter, as
robot_state_publisher provides it) or an example-robot-data name; keep the joints on the
chain from `base_link` to `tip_link` and lock the others (grippers, mobile bases).

Every vector is in model joint order (`RobotModel.joint_names`), every pose and point in the
`base_link` frame (REP 103: metres, radians). Joint torques follow the project convention
M(q)q̈ + C(q,q̇)q̇ + g(q) + f(q̇) = τ + τ_ext, so `rnea` returns the left-hand side without
friction, and a wrench acting ON the robot maps to τ_ext through `jacobian`ᵀ.
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pinocchio as pin

DEFAULT_ROBOT = 'panda'

# The frames a Jacobian can be expressed in (`RobotModel.jacobian`).
BASE_FRAME = 'base'
LINK_FRAME = 'link'

# The usual chain of the arms we know, by the `<robot name=...>` of their URDF (the names of
# example-robot-data's panda.urdf, ur5_robot.urdf and ur10_robot.urdf, and of the UR and
# Franka description packages), so that a name, a file and a `robot_description` string
# give the same chain. Fingers and tool flanges with joints of their own fall outside it.
KNOWN_CHAINS = {
    'panda': ('panda_link0', 'panda_hand'),
    'ur3': ('base_link', 'tool0'),
    'ur5': ('base_link', 'tool0'),
    'ur10': ('base_link', 'tool0'),
}

# example-robot-data's URDFs name their meshes package://example-robot-data/robots/<robot>/...
_EXAMPLE_ROBOT_DATA_URI = re.compile(r'package://example-robot-data/robots/([^/"\s]+)')
_IDENTITY = np.eye(3)  # read only: pin.SE3 copies it


class RobotModelError(ValueError):
    """The robot description cannot be loaded or does not fit the request."""


def skew(v: np.ndarray) -> np.ndarray:
    """Matrix S(v) with S(v) @ w = v × w."""
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


@dataclass
class RobotModel:
    """Pinocchio model of the chain `base_link` → `tip_link` with array-in, array-out calls."""

    model: pin.Model
    collision_model: pin.GeometryModel
    urdf_xml: str
    base_link: str
    tip_link: str
    package_dirs: list[str] = field(default_factory=list)
    name: str = ''
    # Why the chain has no collision geometry ('' when it has some): callers that need link
    # surfaces refuse with this reason, the nodes log it at start.
    geometry_error: str = ''

    def __post_init__(self):
        self.data = self.model.createData()
        self.joint_names = [self.model.names[j] for j in range(1, self.model.njoints)]
        self.n = self.model.nv
        row, column = np.tril_indices(self.n, -1)
        self._lower_triangle, self._upper_triangle = row * self.n + column, column * self.n + row
        self._base_frame = self.model.getFrameId(self.base_link)
        self._link_frames: dict[tuple[str, ...], list[int]] = {}  # `link_placements`
        # The base link hangs on no joint of the chain: its placement in pinocchio's world
        # is constant (`base_wrench` relies on it).
        self._base_from_world = self.model.frames[self._base_frame].placement.inverse()
        # The joints that hang on the world (their subtrees carry the arm: `base_wrench`).
        self._roots = [j for j in range(1, self.model.njoints) if self.model.parents[j] == 0]
        self._continuous = [
            self.model.joints[j].nq == 2 for j in range(1, self.model.njoints)
        ]
        self._any_continuous = any(self._continuous)  # asked at 1 kHz (`configuration`)
        if any(self.model.joints[j].nv != 1 for j in range(1, self.model.njoints)):
            raise RobotModelError('only 1-DoF joints (revolute, continuous, prismatic) are '
                                  'supported')
        # The link each joint moves: the first body frame attached to that joint.
        self.joint_links = []
        for j in range(1, self.model.njoints):
            bodies = [f.name for f in self.model.frames
                      if f.parentJoint == j and f.type == pin.FrameType.BODY]
            self.joint_links.append(bodies[0])
        # Every link on the chain (fixed links included) and the joint that moves it.
        self.link_joint = {
            f.name: f.parentJoint - 1 for f in self.model.frames
            if f.type == pin.FrameType.BODY and f.parentJoint > 0
        }
        # Every frame a joint of the chain moves (links, joints, fixed frames on them): none
        # is at one pose in the base frame.
        self.moving_frames = frozenset(f.name for f in self.model.frames if f.parentJoint > 0)

    # ---------------------------------------------------------------- loading
    @classmethod
    def load(cls, source: str = DEFAULT_ROBOT, base_link: str = '', tip_link: str = '',
             package_dirs: list[str] | None = None) -> 'RobotModel':
        """Load from a URDF string, a URDF file path or an example-robot-data name."""
        source = source.strip()
        if source.startswith('<'):
            return cls.from_urdf_string(source, base_link, tip_link, package_dirs)
        if os.path.isfile(source):
            return cls.from_urdf_file(source, base_link, tip_link, package_dirs)
        return cls.from_example_robot_data(source, base_link, tip_link)

    @classmethod
    def from_urdf_file(cls, path: str, base_link: str = '', tip_link: str = '',
                       package_dirs: list[str] | None = None) -> 'RobotModel':
        with open(path, encoding='utf-8') as f:
            xml = f.read()
        dirs = list(package_dirs or []) + [os.path.dirname(os.path.abspath(path))]
        return cls.from_urdf_string(xml, base_link, tip_link, dirs)

    @classmethod
    def from_example_robot_data(cls, name: str, base_link: str = '',
                                tip_link: str = '') -> 'RobotModel':
        from example_robot_data.robots_loader import ROBOTS, getModelPath
        if name not in ROBOTS:
            raise RobotModelError(
                f'robot {name!r} is neither a URDF string, an existing file, nor an '
                f'example-robot-data name (known: {", ".join(sorted(ROBOTS))})')
        loader = ROBOTS[name]  # the class: an instance would build the whole robot once more
        if not loader.urdf_filename:
            raise RobotModelError(f'example-robot-data robot {name!r} has no URDF')
        urdf = os.path.join(loader.path, loader.urdf_subpath, loader.urdf_filename)
        model = cls.from_urdf_file(os.path.join(loader.model_path or getModelPath(urdf), urdf),
                                   base_link, tip_link)
        model.name = name
        return model

    @classmethod
    def from_urdf_string(cls, xml: str, base_link: str = '', tip_link: str = '',
                         package_dirs: list[str] | None = None) -> 'RobotModel':
        """Build the chain model and its collision geometry from URDF XML.

        Without `base_link`/`tip_link`, a known arm (`KNOWN_CHAINS`, by its URDF robot name)
        gets its usual chain, any other URDF root link → deepest link. `package://` mesh
        URIs are resolved in `package_dirs`, example-robot-data's share directory when the
        URDF names it, and (by pinocchio) ROS_PACKAGE_PATH and AMENT_PREFIX_PATH/share, as
        on a sourced ROS install. Geometry that cannot be loaded leaves the dynamics usable
        and its reason in `geometry_error`.
        """
        package_dirs = list(package_dirs or []) + _example_robot_data_dirs(xml)
        try:
            full = pin.buildModelFromXML(xml)
        except (RuntimeError, ValueError) as err:
            raise RobotModelError(f'cannot parse the URDF: {err}') from err
        geometry_error = ''
        try:
            geoms = pin.buildGeomFromUrdfString(full, xml, pin.GeometryType.COLLISION,
                                                package_dirs=package_dirs)
        except (RuntimeError, ValueError) as err:
            geoms = pin.GeometryModel()
            geometry_error = (f'collision geometry not loaded: {err} (package dirs searched: '
                              f'{package_dirs or "none"}, then ROS_PACKAGE_PATH and '
                              'AMENT_PREFIX_PATH)')
        if not (base_link and tip_link):
            default_base, default_tip = _default_chain(full)
            base_link, tip_link = base_link or default_base, tip_link or default_tip
        for link in (base_link, tip_link):
            if not full.existFrame(link):
                raise RobotModelError(f'link {link!r} is not in the URDF')
        chain = _chain_joints(full, base_link, tip_link)
        locked = [j for j in range(1, full.njoints) if j not in chain]
        model, collision = pin.buildReducedModel(full, geoms, locked, pin.neutral(full))
        if not geometry_error and collision.ngeoms == 0:
            geometry_error = f'the URDF has no <collision> element on {base_link} → {tip_link}'
        name = model.name or full.name
        return cls(model, collision, xml, base_link, tip_link, package_dirs, name,
                   geometry_error)

    @cached_property
    def urdf_joint_names(self) -> list[str]:
        """Names of every joint in the URDF, fixed ones and those outside the chain included."""
        return [joint.get('name') for joint in ET.fromstring(self.urdf_xml).iter('joint')]

    # ---------------------------------------------------------------- limits
    @property
    def position_limits(self) -> tuple[np.ndarray, np.ndarray]:
        lower = np.full(self.n, -np.inf)
        upper = np.full(self.n, np.inf)
        for i, j in enumerate(range(1, self.model.njoints)):
            if not self._continuous[i]:
                k = self.model.joints[j].idx_q
                lower[i], upper[i] = (self.model.lowerPositionLimit[k],
                                      self.model.upperPositionLimit[k])
        return lower, upper

    @property
    def velocity_limits(self) -> np.ndarray:
        return np.array(self.model.velocityLimit)

    @property
    def effort_limits(self) -> np.ndarray:
        return np.array(self.model.effortLimit)

    def configuration(self, q: np.ndarray) -> np.ndarray:
        """Joint angles (one per joint) → pinocchio configuration (cos, sin for continuous
        joints)."""
        q = np.asarray(q, dtype=float)
        if not self._any_continuous:
            return q
        parts = [[np.cos(a), np.sin(a)] if c else [a] for a, c in zip(q, self._continuous)]
        return np.concatenate(parts)

    # -------------------------------------------------------------- kinematics
    def _update(self, q: np.ndarray) -> None:
        pin.framesForwardKinematics(self.model, self.data, self.configuration(q))

    def _base_inverse(self) -> pin.SE3:
        return self.data.oMf[self._base_frame].inverse()

    def link_pose(self, q: np.ndarray, link: str) -> tuple[np.ndarray, np.ndarray]:
        """(R, p) of `link` in the base frame."""
        self._update(q)
        pose = self._base_inverse() * self.data.oMf[self.model.getFrameId(link)]
        return pose.rotation.copy(), pose.translation.copy()

    def link_poses(self, q: np.ndarray, links: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(R, p) of each link in the base frame, from one forward-kinematics pass."""
        return list(zip(*self.link_placements(q, links)))

    def link_placements(self, q: np.ndarray,
                        links: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Rotations (L×3×3) and positions (L×3) of `links` in the base frame, from one
        forward-kinematics pass (the proximity check's, twice per check: frame ids looked up
        once, no copy per link)."""
        self._update(q)
        inv, placements = self._base_inverse(), self.data.oMf
        rotations, positions = np.empty((len(links), 3, 3)), np.empty((len(links), 3))
        key = tuple(links)
        frames = self._link_frames.get(key)
        if frames is None:
            frames = self._link_frames[key] = [self.model.getFrameId(link) for link in key]
        for k, frame in enumerate(frames):
            pose = inv * placements[frame]
            rotations[k], positions[k] = pose.rotation, pose.translation
        return rotations, positions

    def joint_axes(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Origins (n×3) and unit axes (n×3) of the joints in the base frame."""
        pin.computeJointJacobians(self.model, self.data, self.configuration(q))
        pin.updateFramePlacements(self.model, self.data)
        inv = self._base_inverse()
        origins, axes = np.zeros((self.n, 3)), np.zeros((self.n, 3))
        for i, j in enumerate(range(1, self.model.njoints)):
            origins[i] = (inv * self.data.oMi[j]).translation
            # reshape: pinocchio gives a 1-D (6,) Jacobian for a one-joint chain
            jac = pin.getJointJacobian(self.model, self.data, j,
                                       pin.LOCAL_WORLD_ALIGNED).reshape(6, -1)
            axes[i] = inv.rotation @ jac[3:, i]
        return origins, axes

    def frame_id(self, link: str) -> int:
        """Pinocchio frame index of `link` (RobotModelError if the chain has no such link)."""
        if not self.model.existFrame(link):
            raise RobotModelError(f'link {link!r} is not in the robot model')
        return self.model.getFrameId(link)

    def check_moving_link(self, link: str) -> None:
        """RobotModelError unless `link` is on the chain and moved by one of its joints."""
        if self.model.frames[self.frame_id(link)].parentJoint == 0:
            raise RobotModelError(f'link {link!r} is not moved by any joint of the chain')

    def jacobian(self, q: np.ndarray, link: str, point=None,
                 frame: str = BASE_FRAME) -> np.ndarray:
        """6×n Jacobian of a point fixed on `link`: [linear velocity of the point; angular
        velocity of the link], both expressed in the base frame (`BASE_FRAME`) or in the
        link's frame (`LINK_FRAME`).

        `point` is in the link frame (default: the link origin). Its transpose maps a
        wrench [F; M] acting ON the robot, F applied at the point, expressed in that same
        frame, to τ_ext = Jᵀ[F; M] (the project's sign convention).
        """
        if frame not in (BASE_FRAME, LINK_FRAME):
            raise ValueError(f'frame must be {BASE_FRAME!r} or {LINK_FRAME!r}, got {frame!r}')
        fid = self.frame_id(link)
        pin.computeJointJacobians(self.model, self.data, self.configuration(q))
        pin.updateFramePlacements(self.model, self.data)
        # reshape: pinocchio gives a 1-D (6,) Jacobian for a one-joint chain
        jac = pin.getFrameJacobian(self.model, self.data, fid, pin.LOCAL).reshape(6, -1)
        if point is not None:
            jac[:3] -= skew(np.asarray(point, dtype=float)) @ jac[3:]  # v_p = v_o + ω × p
        if frame == LINK_FRAME:
            return jac
        rotation = self._base_inverse().rotation @ self.data.oMf[fid].rotation
        return np.vstack([rotation @ jac[:3], rotation @ jac[3:]])

    def link_kinematics(self, q: np.ndarray, links: list[str]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every link's pose and Jacobian from one kinematics pass at q: rotations (L×3×3) and
        origins (L×3) in the base frame, and the 6×n Jacobians of the link origins in the
        link frames (L×6×n, as `jacobian(q, link, frame=LINK_FRAME)`)."""
        ids = [self.frame_id(link) for link in links]
        pin.computeJointJacobians(self.model, self.data, self.configuration(q))
        pin.updateFramePlacements(self.model, self.data)
        inv = self._base_inverse()
        poses = [inv * self.data.oMf[fid] for fid in ids]
        jacobians = np.array([pin.getFrameJacobian(self.model, self.data, fid, pin.LOCAL)
                              for fid in ids]).reshape(len(ids), 6, -1)
        return (np.array([p.rotation for p in poses]).reshape(-1, 3, 3),
                np.array([p.translation for p in poses]).reshape(-1, 3), jacobians)

    def point_jacobian(self, q: np.ndarray, link: str, point: np.ndarray) -> np.ndarray:
        """3×n Jacobian of a point fixed on `link` (point in the link frame), in the base frame.

        τ_ext = J(p)ᵀ F for a force F (base frame) acting ON the robot at p.
        """
        return self.jacobian(q, link, point)[:3]

    def link_wrench_torque(self, q: np.ndarray, link: str, force: np.ndarray,
                           torque: np.ndarray) -> np.ndarray:
        """Joint torque J_linkᵀ [F; M] of a wrench acting ON the robot at `link`'s origin,
        F and M in the `link` frame (a wrist F/T sensor's reading, seed 001 §3.1).

        Sign choice: the wrench is the one the environment (workpiece) exerts on the robot,
        with the tool's own weight and the sensor offset already removed (seed 001 §3.1
        compensates both). It then adds to τ_ext like any external force, and
        `tau_ext - link_wrench_torque(...)` is what is left for collisions. A sensor that
        reports the wrench the tool exerts on the environment gives the negative.
        """
        self.check_moving_link(link)
        wrench = np.concatenate([np.asarray(force, dtype=float), np.asarray(torque, dtype=float)])
        return self.jacobian(q, link, frame=LINK_FRAME).T @ wrench

    # ---------------------------------------------------------------- dynamics
    def gravity(self, q: np.ndarray) -> np.ndarray:
        """g(q), N·m."""
        return pin.computeGeneralizedGravity(self.model, self.data, self.configuration(q)).copy()

    def rnea(self, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
        """M(q)q̈ + C(q,q̇)q̇ + g(q), N·m (inverse dynamics, no friction)."""
        return pin.rnea(self.model, self.data, self.configuration(q), v, a).copy()

    def base_wrench(self, q: np.ndarray, v: np.ndarray,
                    a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(force N, torque N·m) the moving arm exerts ON its base: at the base link's
        origin, in the base frame (RNEA's base reaction).

        Static (v = a = 0) it is the arm's weight, m g and c × m g (c: centre of mass,
        g: gravity in the base frame), seed 004's f₀, τ₀; in motion it is m g − Ṗ and
        c × m g − L̇ (P, L: the arm's linear momentum and angular momentum about the base
        origin), the difference being seed 004's f_Bd, τ_Bd. Only the links moved by the
        chain's joints count, the base link's own weight does not. The mount's wrench on
        the robot is the negative.
        """
        pin.rnea(self.model, self.data, self.configuration(q), v, a)
        # data.f[j]: the spatial force joint j's parent exerts on the subtree of joint j
        # (gravity included), in joint j's frame. The roots of the chain hang on the world,
        # so their liMi (which rnea updates, unlike oMi) is their pose in the world.
        on_robot = pin.Force.Zero()
        for j in self._roots:
            on_robot += self.data.liMi[j].act(self.data.f[j])
        on_base = -self._base_from_world.act(on_robot)
        return on_base.linear.copy(), on_base.angular.copy()

    def base_momentum(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P kg·m/s, L kg·m²/s): the arm's linear momentum and its angular momentum about the
        base link's origin, in the base frame. Their rate is what `base_wrench` subtracts
        from the weight in motion (m g − Ṗ, c × m g − L̇), without needing q̈."""
        about_com = pin.computeCentroidalMomentum(self.model, self.data, self.configuration(q), v)
        at_origin = pin.SE3(_IDENTITY, self.data.com[0]).act(about_com)
        momentum = self._base_from_world.act(at_origin)
        return momentum.linear.copy(), momentum.angular.copy()

    def with_payload(self, mass: float, centre_of_mass, link: str = '') -> 'RobotModel':
        """A copy of this model carrying a point mass `mass` (kg) at `centre_of_mass` (m, in
        the frame of `link`, default the tip link): a tool or a held part."""
        if not (np.isfinite(mass) and mass >= 0.0):
            raise RobotModelError(f'payload mass must be finite and ≥ 0 kg, got {mass}')
        centre = np.asarray(centre_of_mass, dtype=float)
        if centre.shape != (3,) or not np.isfinite(centre).all():
            raise RobotModelError(f'payload centre of mass must be 3 finite values (m), got '
                                  f'{centre_of_mass}')
        link = link or self.tip_link
        self.check_moving_link(link)
        model = pin.Model(self.model)
        frame = model.frames[self.frame_id(link)]
        joint = frame.parentJoint
        model.inertias[joint] = model.inertias[joint] + pin.Inertia(
            mass, frame.placement.act(centre), np.zeros((3, 3)))
        return replace(self, model=model)

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q), symmetric."""
        m = pin.crba(self.model, self.data, self.configuration(q)).copy()  # upper triangle
        flat = m.reshape(-1)  # a view: mirror the upper triangle into the lower (1 µs)
        flat[self._lower_triangle] = flat[self._upper_triangle]
        return m

    def coriolis_matrix(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """C(q,q̇) with Ṁ - 2C skew-symmetric (the form the momentum observer needs)."""
        return pin.computeCoriolisMatrix(self.model, self.data, self.configuration(q), v).copy()

    def random_configuration(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """`count` joint vectors uniform within the limits (±π where unbounded)."""
        lower, upper = self.position_limits
        lower = np.where(np.isfinite(lower), lower, -np.pi)
        upper = np.where(np.isfinite(upper), upper, np.pi)
        return rng.uniform(lower, upper, size=(count, self.n))


def _example_robot_data_dirs(xml: str) -> list[str]:
    """The package directory of example-robot-data's meshes, when the URDF uses them."""
    match = _EXAMPLE_ROBOT_DATA_URI.search(xml)
    if match is None:
        return []
    try:
        from example_robot_data.robots_loader import getModelPath
        robots = getModelPath(match.group(1))
    except (ImportError, OSError):
        return []  # not installed: the geometry error will name the missing mesh
    return [os.path.normpath(os.path.join(robots, '..', '..'))]


def _default_chain(model: pin.Model) -> tuple[str, str]:
    """The usual chain of a known arm, else the root link → the deepest link."""
    known = KNOWN_CHAINS.get(model.name)
    if known and all(model.existFrame(link) for link in known):
        return known
    return _root_link(model), _deepest_link(model)


def _root_link(model: pin.Model) -> str:
    bodies = [f for f in model.frames if f.type == pin.FrameType.BODY and f.parentJoint == 0]
    if not bodies:
        raise RobotModelError('the URDF has no root link')
    return bodies[0].name


def _deepest_link(model: pin.Model) -> str:
    """The body with the most joints between it and the root (first one on ties)."""
    best = max(range(1, model.njoints), key=lambda j: (len(model.supports[j]), -j))
    return [f.name for f in model.frames
            if f.parentJoint == best and f.type == pin.FrameType.BODY][0]


def _chain_joints(model: pin.Model, base_link: str, tip_link: str) -> list[int]:
    base_joint = model.frames[model.getFrameId(base_link)].parentJoint
    tip_joint = model.frames[model.getFrameId(tip_link)].parentJoint
    above_base = set(model.supports[base_joint])
    tip_support = list(model.supports[tip_joint])
    if base_joint not in tip_support:
        raise RobotModelError(f'{tip_link!r} is not below {base_link!r} in the kinematic tree')
    chain = [j for j in tip_support if j not in above_base]
    if not chain:
        raise RobotModelError(f'no joint between {base_link!r} and {tip_link!r}')
    return chain
