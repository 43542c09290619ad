"""Scenario files of the simulated cobot: scripted forces, obstacles and the arm's motion.

Format: config/scenarios/demo.yaml. Forces and points are checked against the robot here,
so that a bad file fails at load with the file's name, not in the middle of a run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import yaml

from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.identification.trajectory import make_trajectory
from contact_estimation.core.sim.person import ScriptedPerson

SHAPES = {'box': 3, 'sphere': 1, 'capsule': 2, 'cylinder': 2}  # MuJoCo geom sizes


class ScenarioError(ValueError):
    """A scenario file does not fit the robot or the format."""


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
    """A solid the arm can hit: MuJoCo sizes (box: half extents; sphere: radius; capsule,
    cylinder: radius and half length along the obstacle's z), pose in the base frame.

    Fixed to the world unless `mass` > 0 (kg): then it slides along its own `axes` (x: one
    slide joint named like the obstacle; xyz: three, `name/x` …), held at its pose by a
    spring of `spring` N/m and `spring_damping` N·s/m on each, its weight compensated (a body
    part that recoils, held up by its person).
    `solref` / `solimp`: MuJoCo's contact parameters for its contacts (None: MuJoCo's
    defaults); `condim` 1 makes them frictionless."""

    name: str
    shape: str
    size: tuple
    position: np.ndarray
    rpy: np.ndarray = field(default_factory=lambda: np.zeros(3))
    mass: float = 0.0
    spring: float = 0.0
    spring_damping: float = 0.0
    solref: tuple | None = None
    solimp: tuple | None = None
    condim: int = 3
    axes: str = 'x'


@dataclass
class Scenario:
    """What happens to the arm: scripted forces, obstacles, people and, optionally, its motion
    and a payload. `demo` and `suite` are the demo's (commands/demo.py), not the
    simulator's: what the scenario shows, and the suite's parameters it runs with."""

    forces: list[PointForce] = field(default_factory=list)
    obstacles: list[Obstacle] = field(default_factory=list)
    trajectory: dict | None = None  # a `make_trajectory` spec; None: the caller's default
    description: str = ''
    payload: Payload | None = None  # None: the simulator's configured one
    people: list[ScriptedPerson] = field(default_factory=list)

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
        unknown = set(raw) - {'description', 'robot', 'trajectory', 'forces', 'obstacles',
                              'payload', 'people', 'shows', 'suite'}
        if unknown:
            raise ScenarioError(f'unknown keys {sorted(unknown)}')
        if raw.get('robot') not in (None, robot.name):
            raise ScenarioError(f'written for robot {raw["robot"]!r}, this is {robot.name!r}')
        try:
            forces = [_point_force(item, robot) for item in raw.get('forces') or []]
            obstacles = [_obstacle(item) for item in raw.get('obstacles') or []]
            people = [_person(item) for item in raw.get('people') or []]
        except (KeyError, TypeError, ValueError) as err:
            raise ScenarioError(f'bad force, obstacle or person: {err!r}') from err
        trajectory = raw.get('trajectory')
        if trajectory is not None:
            try:
                make_trajectory(robot, trajectory)
            except (KeyError, TypeError, ValueError) as err:
                raise ScenarioError(f'bad trajectory: {err}') from err
        payload = None
        if raw.get('payload') is not None:
            try:
                payload = _payload(raw['payload'], robot)
            except (KeyError, TypeError, ValueError) as err:
                raise ScenarioError(f'bad payload: {err}') from err
        return cls(forces, obstacles, trajectory, str(raw.get('description', '')), payload,
                   people)


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


def _payload(item: dict, robot: RobotModel) -> Payload:
    unknown = set(item) - {'mass', 'centre_of_mass', 'link'}
    if unknown:
        raise ValueError(f'unknown keys {sorted(unknown)} (mass, centre_of_mass, link)')
    payload = Payload(float(item['mass']),
                      tuple(_vector(item.get('centre_of_mass', [0, 0, 0]), 3, 'centre_of_mass')),
                      str(item.get('link', '')))
    payload.carried_by(robot)  # refuses a link off the moving chain
    return payload


def _obstacle(item: dict) -> Obstacle:
    shape = item['shape']
    if shape not in SHAPES:
        raise ValueError(f'obstacle shape must be one of {sorted(SHAPES)}, got {shape!r}')
    size = _vector(item['size'], SHAPES[shape], f'size of a {shape}')
    if np.any(size <= 0):
        raise ValueError('obstacle sizes must be positive')
    return Obstacle(str(item['name']), shape, tuple(size), _vector(item['position'], 3, 'position'),
                    _vector(item.get('rpy', [0, 0, 0]), 3, 'rpy'))


def _person(item: dict) -> ScriptedPerson:
    unknown = set(item) - {'name', 'region', 'position', 'reach', 'radius'}
    if unknown:
        raise ValueError(f'unknown keys {sorted(unknown)} (name, region, position, reach, '
                         'radius)')
    return ScriptedPerson(str(item['name']), str(item['region']),
                          _vector(item['position'], 3, 'position'),
                          _vector(item['reach'], 3, 'reach'), float(item.get('radius', 0.05)))
