"""Joint-space reference motions for the simulated cobot and their time-scaled playback.

Every trajectory answers `sample(t) -> (q, q̇, q̈)` in model joint order
(`RobotModel.joint_names`), radians and seconds. `TimeScaler` plays one back on the clock
of seed 003 eqs. 8-9, so that a collision reaction can slow, hold or reverse the motion
along its path.

`make_trajectory` builds one from a spec, the `trajectory:` entry of a scenario file
(config/scenarios/*.yaml; every key but `type` optional):

    type: smooth_random    sum of sinusoids per joint, within the limits
      seed, speed_scale, amplitude, margin, center   (see SmoothRandomTrajectory)
    type: waypoints        minimum-jerk segments, at rest at each waypoint
      waypoints: [[...], ...]   m rows of n joint angles (rad), within the limits
      durations: [...]          m − 1 segment durations (s)
    type: sweeps           the identification sweeps of seed 001 §2.1
    (core/identification/excitation.py,
                           the plan `contact-estimation identify plan` writes), then holds home
      speeds: [0.01, ...]  plateau speeds (rad/s); default 12 log-spaced from 0.01 to 1
      amplitude: 0.8       Q (rad): each joint sweeps its centre ± Q
      repetitions: 1       forward/back pairs per speed, each in a new configuration
      joints: [joint2]     names of the joints to sweep; default all
      seed: 0              random configurations of the other joints
      acceleration, max_speed_fraction, margin, max_pass_time, dwell, transfer_speed,
      floor_clearance, spread, home: the other `excitation.SweepSettings` fields
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from contact_estimation.core.identification.excitation import SweepSettings, plan_sweeps
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.settings import checked, setting


def bounded_limits(robot: RobotModel, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Position limits shrunk by `margin` (rad); ±π for continuous joints."""
    lower, upper = robot.position_limits
    lower = np.where(np.isfinite(lower), lower, -np.pi) + margin
    upper = np.where(np.isfinite(upper), upper, np.pi) - margin
    if np.any(lower > upper):
        raise ValueError(f'a limit margin of {margin} rad leaves no room on joint(s) '
                         f'{[robot.joint_names[i] for i in np.flatnonzero(lower > upper)]}')
    return lower, upper


@dataclass(frozen=True)
@checked
class SmoothRandomSettings:
    """SmoothRandomTrajectory's settings at their defaults (the sim's `trajectory.*`)."""

    seed: int = setting(0, 'smooth_random and sweeps: random seed', range=(0, 2 ** 31 - 1))
    speed_scale: float = setting(0.3, 'smooth_random: peak speed / velocity limit',
                                 range=(0.01, 1.0))
    margin: float = setting(0.2, 'smooth_random: distance (rad) kept from the limits',
                            range=(0.0, 1.5))
    amplitude: float = setting(0.5, 'smooth_random: share of the room to the limits used',
                               range=(0.01, 1.0))


_SMOOTH = SmoothRandomSettings()


class SmoothRandomTrajectory:
    """Endless smooth motion: per joint, a centre plus a sum of sinusoids.

    q_i(t) = c_i + Σ_k a_ik sin(ω_ik t + φ_ik), with Σ_k a_ik ≤ the room between c_i and the
    limits (shrunk by `margin`) times `amplitude`, so q stays within the limits; the
    frequencies are scaled so that Σ_k a_ik ω_ik = `speed_scale` × the velocity limit, which
    bounds |q̇_i|. Every derivative is continuous. `center` defaults to the middle of the range.
    """

    def __init__(self, robot: RobotModel, seed: int = _SMOOTH.seed,
                 speed_scale: float = _SMOOTH.speed_scale, margin: float = _SMOOTH.margin,
                 amplitude: float = _SMOOTH.amplitude, components: int = 3,
                 center: np.ndarray | None = None):
        if not 0.0 < speed_scale <= 1.0:
            raise ValueError(f'speed_scale must be in (0, 1], got {speed_scale}')
        if not 0.0 < amplitude <= 1.0:
            raise ValueError(f'amplitude must be in (0, 1], got {amplitude}')
        rng = np.random.default_rng(seed)
        lower, upper = bounded_limits(robot, margin)
        center = (lower + upper) / 2 if center is None else np.clip(center, lower, upper)
        room = amplitude * np.minimum(center - lower, upper - center)
        weights = rng.uniform(0.2, 1.0, size=(robot.n, components))
        self.amplitudes = room[:, None] * weights / weights.sum(axis=1, keepdims=True)
        base_frequencies = rng.uniform(0.5, 1.5, size=(robot.n, components))
        peak_speed = (self.amplitudes * base_frequencies).sum(axis=1)
        scale = np.divide(speed_scale * robot.velocity_limits, peak_speed,
                          out=np.zeros(robot.n), where=peak_speed > 0)
        self.frequencies = base_frequencies * scale[:, None]
        self.phases = rng.uniform(-np.pi, np.pi, size=(robot.n, components))
        self.center = center

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        angle = self.frequencies * t + self.phases
        a, w = self.amplitudes, self.frequencies
        q = self.center + (a * np.sin(angle)).sum(axis=1)
        v = (a * w * np.cos(angle)).sum(axis=1)
        acc = -(a * w ** 2 * np.sin(angle)).sum(axis=1)
        return q, v, acc


class FirstSeconds:
    """An endless trajectory played for `duration` s (a simulator recording needs an end)."""

    def __init__(self, trajectory, duration: float):
        self.trajectory, self.duration = trajectory, duration

    def sample(self, t: float):
        return self.trajectory.sample(t)


class WaypointTrajectory:
    """Quintic segments between waypoints, at rest (q̇ = q̈ = 0) at each one.

    Holds the first waypoint before t = 0 and the last one after the end.
    """

    def __init__(self, waypoints, durations):
        self.waypoints = np.atleast_2d(np.asarray(waypoints, dtype=float))
        self.durations = np.atleast_1d(np.asarray(durations, dtype=float))
        if len(self.durations) != len(self.waypoints) - 1:
            raise ValueError(f'{len(self.waypoints)} waypoints need {len(self.waypoints) - 1} '
                             f'segment durations, got {len(self.durations)}')
        if np.any(self.durations <= 0) or not np.all(np.isfinite(self.waypoints)):
            raise ValueError('segment durations must be positive and waypoints finite')
        self.starts = np.concatenate([[0.0], np.cumsum(self.durations)])

    @property
    def duration(self) -> float:
        return float(self.starts[-1])

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        zero = np.zeros(self.waypoints.shape[1])
        if t <= 0.0 or len(self.durations) == 0:
            return self.waypoints[0].copy(), zero, zero.copy()
        if t >= self.duration:
            return self.waypoints[-1].copy(), zero, zero.copy()
        k = int(np.searchsorted(self.starts, t, side='right')) - 1
        T = self.durations[k]
        s = (t - self.starts[k]) / T
        # Minimum-jerk blend 10s³ − 15s⁴ + 6s⁵ and its derivatives.
        blend = s ** 3 * (10 - 15 * s + 6 * s ** 2)
        d_blend = 30 * s ** 2 * (1 - s) ** 2 / T
        dd_blend = 60 * s * (1 - s) * (1 - 2 * s) / T ** 2
        delta = self.waypoints[k + 1] - self.waypoints[k]
        return self.waypoints[k] + blend * delta, d_blend * delta, dd_blend * delta


class TimeScaler:
    """Plays a trajectory on a scaled clock (seed 003 eqs. 8-9): t_i = t_{i−1} + f_S Δt,
    q_d(t_i) = q(t_i).

    f_S = 1 follows the trajectory, 0 holds, a negative value goes back along the path
    (never before its start). The reference velocity and acceleration are those of the scaled
    playback, q̇_d = f_S q'(t_i) and q̈_d = f_S² q''(t_i) (f_S taken piecewise constant).
    `max_scaling` bounds |f_S|: by default never faster than planned.
    """

    def __init__(self, trajectory, dt: float, max_scaling: float = 1.0):
        self.trajectory = trajectory
        self.dt = dt
        self.max_scaling = max_scaling
        self.path_time = 0.0
        self.scaling = 1.0

    def set_scaling(self, scaling: float) -> float:
        """Set f_S (clipped to ±max_scaling); return the value used. Non-finite → ValueError."""
        if not np.isfinite(scaling):
            raise ValueError(f'time scaling must be finite, got {scaling}')
        self.scaling = float(np.clip(scaling, -self.max_scaling, self.max_scaling))
        return self.scaling

    def reference(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, v, a = self.trajectory.sample(self.path_time)
        at_start_going_back = self.path_time <= 0.0 and self.scaling < 0.0
        scaling = 0.0 if at_start_going_back else self.scaling
        return q, scaling * v, scaling ** 2 * a

    def advance(self) -> None:
        self.path_time = max(0.0, self.path_time + self.scaling * self.dt)


TRAJECTORY_TYPES = ('smooth_random', 'waypoints', 'sweeps')


def make_trajectory(robot: RobotModel, spec: dict):
    """A trajectory from a spec (a scenario file's `trajectory`, or the node's parameters):

    - `type: smooth_random` with optional seed, speed_scale, margin, amplitude, center;
    - `type: waypoints` with waypoints (m × n, rad) and durations (m − 1 segment times, s);
    - `type: sweeps` with optional `excitation.SweepSettings` fields (joints by name).
    """
    kind = spec.get('type')
    options = {k: v for k, v in spec.items() if k != 'type'}
    if kind == 'smooth_random':
        if 'center' in options:
            options['center'] = np.asarray(options['center'], dtype=float)
        return SmoothRandomTrajectory(robot, **options)
    if kind == 'waypoints':
        if set(options) != {'waypoints', 'durations'}:
            raise ValueError(f'a waypoints trajectory takes waypoints and durations, '
                             f'got {sorted(options)}')
        trajectory = WaypointTrajectory(options['waypoints'], options['durations'])
        if trajectory.waypoints.shape[1] != robot.n:
            raise ValueError(f'waypoints have {trajectory.waypoints.shape[1]} joints, '
                             f'the robot has {robot.n}')
        lower, upper = robot.position_limits
        if np.any(trajectory.waypoints < lower) or np.any(trajectory.waypoints > upper):
            raise ValueError('a waypoint is outside the joint limits')
        return trajectory
    if kind == 'sweeps':
        return _sweeps(robot, options)
    raise ValueError(f'trajectory type must be one of {TRAJECTORY_TYPES}, got {kind!r}')


def _sweeps(robot: RobotModel, options: dict):
    """The identification sweeps of core/identification/excitation.py for a `type: sweeps` spec."""
    known = {f.name for f in fields(SweepSettings)}
    if set(options) - known:
        raise ValueError(f'a sweeps trajectory takes {sorted(known)}, got unknown '
                         f'{sorted(set(options) - known)}')
    for key in ('speeds', 'home'):
        if options.get(key) is not None:
            options[key] = tuple(float(x) for x in options[key])
    if options.get('joints') is not None:
        unknown = [j for j in options['joints'] if j not in robot.joint_names]
        if unknown:
            raise ValueError(f'sweeps joints {unknown} are not joints of robot {robot.name!r} '
                             f'({robot.joint_names})')
        options['joints'] = tuple(robot.joint_names.index(j) for j in options['joints'])
    return plan_sweeps(robot, SweepSettings(**options))
