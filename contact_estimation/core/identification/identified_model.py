"""An identified gravity + friction model, G(q) and f(q̇) of seed 001 eq. 9, saved as YAML.

`contact-estimation identify fit` writes it; the residual node loads it and evaluates, at the
slow constant speeds of eq. 9, τ_ext = G(q) + f(q̇) − τ: the project's sign (M q̈ + C q̇ + g +
f = τ + τ_ext, τ_ext acting on the robot, core/chain/residual.py). Seed 001 eq. 9 writes the
opposite sign, τ_e = τ − f(q̇) − G(q), from its eq. 5.

Gravity is linear in a minimal parameter set: G(q) = H_G(q) π_G (seed 001 eqs. 18, 22). Here
H_G is built from pinocchio's joint-torque regressor at q̇ = q̈ = 0, whose columns are the
mass and first moments (m, m·c_x, m·c_y, m·c_z) of each joint's body in its joint frame; the
base (minimal) set keeps the independent columns and regroups the others into them:
π_G = π_independent + K π_dependent (`GravityBasis`).

Which robot a file is for: the file stores the robot's name and a fingerprint of the robot
description it was identified with (`robot_structure`: a SHA-256 over the chain's joint types,
placements, axes, position/velocity/effort limits, every body's inertial parameters and the
gravity vector). `IdentifiedModel.load` refuses a file whose fingerprint differs from the
robot's, naming both robots: joint names alone do not tell a UR5 from a UR10. The inertial
parameters are in the fingerprint on purpose: an edited URDF inertia (a tool added to the
description, say) means the arm the model was identified on may no longer be the arm used.
A file without a fingerprint (written by hand) is accepted only for a robot of the same name.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
import yaml

from contact_estimation.core.chain import friction as friction_models
from contact_estimation.core.robot.robot_model import RobotModel

FORMAT = 'contact_estimation/identified_model'
VERSION = 1

# The ten dynamic parameters of a body in pinocchio's order (`Inertia.toDynamicParameters`):
# mass, first moments of mass and the rotational inertia about the joint frame's origin; the
# gravity-relevant ones are the first four.
DYNAMIC_PARAMETERS = ('m', 'mx', 'my', 'mz', 'Ixx', 'Ixy', 'Iyy', 'Ixz', 'Iyz', 'Izz')
GRAVITY_PARAMETERS = DYNAMIC_PARAMETERS[:4]
GRAVITY_UNITS = {'m': 'kg', 'mx': 'kg·m', 'my': 'kg·m', 'mz': 'kg·m'}
_PARAMETERS_PER_BODY = len(DYNAMIC_PARAMETERS)


STRUCTURE_COVERS = ('joint types, placements and axes; position, velocity and effort limits; '
                    'inertial parameters of every body; gravity (the chain in joint order)')


def robot_structure(robot_model: RobotModel) -> str:
    """SHA-256 fingerprint of the kinematic and inertial structure of `robot_model`'s chain.

    Hashed, joint by joint: name, pinocchio joint type, placement in the parent joint frame
    (translation and rotation matrix), motion axis (the joint's motion subspace), the limits,
    and the 10 dynamic parameters of its body (fixed links merged in); then the gravity
    vector. Numbers are rounded to 1e-9 so that float noise of a rebuilt model does not
    count as a change.
    """
    model = robot_model.model
    data = model.createData()
    pin.forwardKinematics(model, data, pin.neutral(model))
    lower, upper = robot_model.position_limits
    values = []
    for i, j in enumerate(range(1, model.njoints)):
        placement = model.jointPlacements[j]
        axis = np.asarray(data.joints[j].S).ravel()
        numbers = np.concatenate([placement.translation, placement.rotation.ravel(), axis,
                                  [lower[i], upper[i], robot_model.velocity_limits[i],
                                   robot_model.effort_limits[i]],
                                  model.inertias[j].toDynamicParameters()])
        values.append(f'{model.names[j]}:{model.joints[j].shortname()}:'
                      + ','.join(_rounded(x) for x in numbers))
    values.append('gravity:' + ','.join(_rounded(x) for x in model.gravity.linear))
    return hashlib.sha256(';'.join(values).encode()).hexdigest()


def _rounded(x: float) -> str:
    if not np.isfinite(x):
        return repr(float(x))
    return repr(float(np.round(x, 9)) + 0.0)  # + 0.0: no "-0.0"


class ModelFileError(ValueError):
    """An identified-model file cannot be used: missing, malformed or made for another robot."""


@dataclass
class GravityBasis:
    """Base parameters of the gravity regressor (column labels 'link/param').

    `independent` are the regressor columns kept, one per base parameter; each `dependent`
    column equals a combination of them over all configurations, so its parameter is folded
    into theirs: π_base = π_independent + `combination` @ π_dependent.
    """

    independent: list[str]
    dependent: list[str]
    combination: np.ndarray  # len(independent) × len(dependent)

    def __post_init__(self):
        self.combination = np.asarray(self.combination, dtype=float).reshape(
            len(self.independent), len(self.dependent))

    def columns(self, robot_model: RobotModel, labels: list[str]) -> np.ndarray:
        """Indices of `labels` in pinocchio's joint-torque regressor (10 columns per body)."""
        body = {link: i for i, link in enumerate(robot_model.joint_links)}
        indices = []
        for label in labels:
            link, _, name = label.rpartition('/')
            if link not in body or name not in GRAVITY_PARAMETERS:
                raise ValueError(f'gravity parameter {label!r} is not "<link>/<m|mx|my|mz>" '
                                 f'for a link moved by a joint of this robot '
                                 f'({", ".join(robot_model.joint_links)})')
            indices.append(_PARAMETERS_PER_BODY * body[link] + GRAVITY_PARAMETERS.index(name))
        return np.array(indices, dtype=int)

    def regressor(self, robot_model: RobotModel, q: np.ndarray) -> np.ndarray:
        """H_G(q), n × (number of base parameters): G(q) = H_G(q) π_G."""
        zeros = np.zeros(robot_model.n)
        full = pin.computeJointTorqueRegressor(robot_model.model, robot_model.data,
                                               robot_model.configuration(q), zeros, zeros)
        return full[:, self.columns(robot_model, self.independent)]

    def base_values(self, robot_model: RobotModel) -> np.ndarray:
        """π_G computed from the robot description's own inertial parameters (the URDF)."""
        full = np.concatenate([robot_model.model.inertias[j].toDynamicParameters()
                               for j in range(1, robot_model.model.njoints)])
        independent = full[self.columns(robot_model, self.independent)]
        if not self.dependent:
            return independent
        return independent + self.combination @ full[self.columns(robot_model, self.dependent)]

    @property
    def units(self) -> list[str]:
        return [GRAVITY_UNITS[label.rpartition('/')[2]] for label in self.independent]


@dataclass
class IdentifiedModel:
    """Gravity G(q) = H_G(q) π_G and per-joint friction f(q̇) identified for one robot."""

    robot: str                       # robot name or URDF path it was identified for
    joint_names: list[str]
    gravity_parameters: np.ndarray   # π_G, base parameters (units: `gravity_basis.units`)
    gravity_basis: GravityBasis
    friction_model: str              # key of friction.MODELS
    friction_parameters: np.ndarray  # n × k, one row per joint
    metadata: dict = field(default_factory=dict)
    structure: str | None = None     # `robot_structure` of the robot it was identified on

    def __post_init__(self):
        self.joint_names = list(self.joint_names)
        self.gravity_parameters = np.asarray(self.gravity_parameters, dtype=float).ravel()
        self.friction_parameters = np.atleast_2d(np.asarray(self.friction_parameters, dtype=float))
        self._friction = friction_models.get(self.friction_model)
        n, k = len(self.joint_names), len(self._friction.parameters)
        if self.gravity_parameters.size != len(self.gravity_basis.independent):
            raise ValueError(f'{self.gravity_parameters.size} gravity parameters for a basis of '
                             f'{len(self.gravity_basis.independent)}')
        if self.friction_parameters.shape != (n, k):
            raise ValueError(f'{self.friction_model} friction needs {n}×{k} parameters '
                             f'(joints × {", ".join(self._friction.parameters)}), got '
                             f'{self.friction_parameters.shape[0]}×{self.friction_parameters.shape[1]}')
        for values, what in ((self.gravity_parameters, 'gravity'),
                             (self.friction_parameters, 'friction')):
            if not np.all(np.isfinite(values)):
                raise ValueError(f'{what} parameters are not all finite numbers')
        self._bound_robot = None

    # ------------------------------------------------------------ evaluation
    def _bind(self, robot_model: RobotModel) -> None:
        """Precompute what gravity() needs for this robot model (once per model object)."""
        if list(robot_model.joint_names) != self.joint_names:
            raise ValueError(f'the model was identified for joints {self.joint_names}, '
                             f'not {robot_model.joint_names}')
        # Regressor columns outside the base set get a zero parameter, so G(q) = Y(q) π_full
        # needs no column selection at run time.
        full = np.zeros(_PARAMETERS_PER_BODY * robot_model.n)
        full[self.gravity_basis.columns(robot_model, self.gravity_basis.independent)] = \
            self.gravity_parameters
        self._full_parameters = full
        self._pin_model = robot_model.model
        self._pin_data = robot_model.model.createData()
        self._zeros = np.zeros(robot_model.n)
        self._bound_robot = robot_model

    def gravity(self, robot_model: RobotModel, q) -> np.ndarray:
        """G(q) = H_G(q) π_G in N·m (seed 001 eq. 18)."""
        if robot_model is not self._bound_robot:
            self._bind(robot_model)
        regressor = pin.computeJointTorqueRegressor(
            self._pin_model, self._pin_data, robot_model.configuration(q), self._zeros, self._zeros)
        return regressor @ self._full_parameters

    def friction(self, v) -> np.ndarray:
        """f(q̇) per joint in N·m, on the dissipative side of the dynamics (opposes motion)."""
        return friction_models.joint_friction(self._friction, self.friction_parameters, v)

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict:
        spec = self._friction
        return {
            'format': FORMAT,
            'version': VERSION,
            'robot': self.robot,
            'robot_structure': None if self.structure is None else {
                'sha256': self.structure, 'covers': STRUCTURE_COVERS},
            'joint_names': list(self.joint_names),
            'gravity': {
                'description': 'G(q) = H_G(q) pi_G over the base parameters of the gravity '
                               'regressor (seed 001 eqs. 18, 22); each parameter is '
                               '"<link>/<m|mx|my|mz>" in that link\'s joint frame, plus '
                               'combination @ dependent',
                'parameters': [{'name': name, 'value': float(value), 'unit': unit}
                               for name, value, unit in zip(self.gravity_basis.independent,
                                                            self.gravity_parameters,
                                                            self.gravity_basis.units)],
                'dependent': list(self.gravity_basis.dependent),
                'combination': self.gravity_basis.combination.tolist(),
            },
            'friction': {
                'model': self.friction_model,
                'units': dict(zip(spec.parameters, spec.units)),
                'parameters': {joint: dict(zip(spec.parameters, map(float, row)))
                               for joint, row in zip(self.joint_names, self.friction_parameters)},
            },
            'metadata': _plain(self.metadata),
        }

    def save(self, path) -> None:
        """Write the YAML file (atomically: a failed save leaves no partial file)."""
        path = os.fspath(path)
        text = ('# Identified gravity and friction model (contact_estimation, seed 001).\n'
                '# Torques in N·m, angles in rad, speeds in rad/s.\n'
                + yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=100))
        temporary = path + '.partial'
        with open(temporary, 'w', encoding='utf-8') as f:
            f.write(text)
        os.replace(temporary, path)

    @classmethod
    def load(cls, path, robot_model: RobotModel) -> 'IdentifiedModel':
        """Read a model file and check that it fits `robot_model`; ModelFileError if not."""
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise ModelFileError(f'identified model file {path!r} does not exist')
        try:
            with open(path, encoding='utf-8') as f:
                raw = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as err:
            raise ModelFileError(f'{path}: cannot read the YAML: {err}') from err
        try:
            model = cls.from_dict(raw)
        except (KeyError, TypeError, ValueError) as err:
            message = f'missing entry {err}' if isinstance(err, KeyError) else str(err)
            raise ModelFileError(f'{path}: not a valid identified model file: {message}') from err
        this = robot_model.name or 'unnamed'
        if model.joint_names != list(robot_model.joint_names):
            raise ModelFileError(
                f'{path} was identified for robot {model.robot!r} with joints '
                f'{model.joint_names}; this robot ({this}) has joints '
                f'{robot_model.joint_names}')
        if model.structure is not None:
            structure = robot_structure(robot_model)
            if model.structure != structure:
                raise ModelFileError(
                    f'{path} was identified for robot {model.robot!r}, whose kinematic and '
                    f'inertial structure differs from this robot {this!r} (fingerprint '
                    f'{model.structure[:12]}… in the file, {structure[:12]}… here): the same '
                    f'joint names, another arm or an edited description; identify this robot '
                    f'(contact-estimation identify)')
        elif model.robot != robot_model.name:
            raise ModelFileError(
                f'{path} was identified for robot {model.robot!r}, this robot is {this!r} '
                f'(the file has no robot_structure fingerprint to compare)')
        try:
            model._bind(robot_model)
        except ValueError as err:
            raise ModelFileError(f'{path}: {err}') from err
        return model

    @classmethod
    def from_dict(cls, raw: dict) -> 'IdentifiedModel':
        if not isinstance(raw, dict) or raw.get('format') != FORMAT:
            raise ValueError(f'the file does not start with "format: {FORMAT}"')
        if raw.get('version') != VERSION:
            raise ValueError(f'version {raw.get("version")!r} is not supported '
                             f'(expected {VERSION})')
        gravity, friction = raw['gravity'], raw['friction']
        joint_names = [str(name) for name in raw['joint_names']]
        basis = GravityBasis([str(p['name']) for p in gravity['parameters']],
                             [str(name) for name in gravity['dependent']],
                             np.array(gravity['combination'] or [], dtype=float))
        spec = friction_models.get(friction['model'])
        rows = friction['parameters']
        if set(rows) != set(joint_names):
            raise ValueError(f'friction parameters are given for joints {sorted(rows)}, '
                             f'the model has joints {joint_names}')
        parameters = [[float(rows[joint][name]) for name in spec.parameters]
                      for joint in joint_names]
        structure = raw.get('robot_structure')
        if structure is not None and not (isinstance(structure, dict)
                                          and isinstance(structure.get('sha256'), str)):
            raise ValueError('robot_structure must hold a "sha256" string')
        return cls(robot=str(raw['robot']), joint_names=joint_names,
                   gravity_parameters=[float(p['value']) for p in gravity['parameters']],
                   gravity_basis=basis, friction_model=spec.name,
                   friction_parameters=parameters, metadata=dict(raw.get('metadata') or {}),
                   structure=None if structure is None else structure['sha256'])


def _plain(value):
    """Metadata made YAML-safe: numpy arrays and scalars become lists and floats."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value
