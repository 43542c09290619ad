"""Identification sweeps (seed 001 §2.1): each joint goes back and forth at constant speeds.

For each swept joint i, each speed and each repetition, the arm moves (all joints at once) to a
fresh random configuration with joint i at the low end of its interval [c − Q, c + Q]; joint i
then sweeps forward to c + Q and back to c − Q with trapezoidal speed profiles while the other
joints hold still. At a given position gravity is the same on both passes and friction is
opposite, which is what `identification` uses (seed 001 eqs. 10–15); the random positions of
the other joints make every gravity parameter show up; several speeds give friction as a
function of speed.

The default plan (`SweepSettings()`): 12 plateau speeds log-spaced from 0.01 to 1 rad/s, one
forward/back pair per speed and joint, slow passes cut to 8 s: 144 passes in about 21 min on
urdf/spatial_6r.urdf, 24 min on the Panda (`identify plan` prints the time). Each joint then
has friction at 12 distinct speeds (the continuous model of seed 001 eq. 23 has 6 parameters)
and gravity in 12 random configurations.

Checks on the plan: joint limits (minus a margin), speeds at most a fraction of the velocity
limits, and no link origin below the base plane (a coarse floor check; self-collisions are not
checked, so review the trajectory before running it on a real arm).

`SweepTrajectory.sample(t) -> (q, q̇, q̈)` with `duration`, the interface the simulated cobot
plays; `series(rate)` gives the time series with the constant-speed flags; `write_csv` the
file a user runs on the real arm.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from contact_estimation.core.robot.robot_model import RobotModel

# Default plateau speeds: 12 log-spaced from 0.01 to 1 rad/s (ratio ≈ 1.52), so that the
# friction models (6 parameters for seed 001 eq. 23) are fitted over the Stribeck region at
# low speed as well as the viscous one (seed 001 fits about 30 speed points).
DEFAULT_SPEEDS = tuple(float(f'{v:.3g}') for v in np.geomspace(0.01, 1.0, 12))


@dataclass(frozen=True)
class SweepSettings:
    """What to sweep and how fast."""

    amplitude: float = 0.8             # Q, rad: joint i sweeps [c_i − Q, c_i + Q] within limits
    speeds: tuple[float, ...] = DEFAULT_SPEEDS  # rad/s, constant-speed plateaus
    repetitions: int = 1               # forward/back pairs per speed, each in a new configuration
    acceleration: float = 2.0          # rad/s², trapezoid ramps
    max_speed_fraction: float = 0.5    # plateau speeds capped at this share of the velocity limit
    margin: float = 0.1                # rad kept from every position limit
    max_pass_time: float = 8.0         # s: slow passes are shortened around c_i to last this long
    dwell: float = 0.2                 # s still at each end of a pass
    transfer_speed: float = 0.5        # rad/s, fastest joint while moving between sweeps
    floor_clearance: float = 0.05      # m: link origins stay this high above the base plane
    spread: float = 1.5                # rad: the other joints sit within home ± spread
    home: tuple[float, ...] | None = None  # rad; None = the most upright configuration
    seed: int = 0
    joints: tuple[int, ...] | None = None  # model indices of the joints to sweep; None = all


@dataclass
class ExcitationSeries:
    """The sweeps sampled at a fixed rate; `moving_joint` is -1 outside sweep passes."""

    joint_names: list[str]
    t: np.ndarray               # (N,) s
    q: np.ndarray               # (N, n) rad
    v: np.ndarray               # (N, n) rad/s
    a: np.ndarray               # (N, n) rad/s²
    moving_joint: np.ndarray    # (N,) int
    constant_speed: np.ndarray  # (N,) bool: a sweep pass at its plateau speed


@dataclass(frozen=True)
class SweepPass:
    """One constant-speed pass of the plan (for reports and tests)."""

    joint: int
    speed: float        # signed, rad/s
    start: float        # s, plateau start
    end: float          # s, plateau end
    configuration: np.ndarray = field(repr=False)  # q at the start of the pass


class _Move:
    """Straight line in joint space from `q_from` to `q_to` with a trapezoidal time law.

    The path parameter s goes 0 → L (L = largest joint travel) at most at `speed` with
    `acceleration`, so no joint exceeds either; a zero-length move is a pause of `pause` s.
    """

    def __init__(self, q_from, q_to, speed, acceleration, joint=-1, pause=0.0):
        self.q_from = np.asarray(q_from, dtype=float)
        delta = np.asarray(q_to, dtype=float) - self.q_from
        self.length = float(np.max(np.abs(delta)))
        self.direction = delta / self.length if self.length > 0 else np.zeros_like(delta)
        self.acceleration = acceleration
        self.joint = joint
        if self.length == 0:
            self.cruise, self.ramp, self.plateau = 0.0, 0.0, pause
        elif self.length >= speed ** 2 / acceleration:
            self.cruise, self.ramp = speed, speed / acceleration
            self.plateau = (self.length - speed ** 2 / acceleration) / speed
        else:  # too short to reach `speed`: triangular profile
            self.cruise = np.sqrt(self.length * acceleration)
            self.ramp, self.plateau = self.cruise / acceleration, 0.0
        self.duration = 2 * self.ramp + self.plateau


class SweepTrajectory:
    """A sequence of moves, evaluated at any time: q(t), q̇(t), q̈(t)."""

    def __init__(self, joint_names: list[str], moves: list[_Move]):
        self.joint_names = list(joint_names)
        durations = np.array([m.duration for m in moves])
        self._start = np.concatenate([[0.0], np.cumsum(durations)[:-1]])
        self.duration = float(durations.sum())
        self._q_from = np.array([m.q_from for m in moves])
        self._direction = np.array([m.direction for m in moves])
        self._length = np.array([m.length for m in moves])
        self._cruise = np.array([m.cruise for m in moves])
        self._accel = np.array([m.acceleration for m in moves])
        self._ramp = np.array([m.ramp for m in moves])
        self._plateau = np.array([m.plateau for m in moves])
        self._joint = np.array([m.joint for m in moves], dtype=int)
        self.passes = [
            SweepPass(m.joint, float(m.cruise * m.direction[m.joint]), start + m.ramp,
                      start + m.ramp + m.plateau, m.q_from)
            for m, start in zip(moves, self._start) if m.joint >= 0
        ]

    def evaluate(self, t) -> tuple[np.ndarray, ...]:
        """q, q̇, q̈ (N×n), moving joint and constant-speed flag (N) at times `t` (N)."""
        t = np.clip(np.atleast_1d(np.asarray(t, dtype=float)), 0.0, self.duration)
        k = np.clip(np.searchsorted(self._start, t, side='right') - 1, 0, len(self._start) - 1)
        tau = t - self._start[k]
        ramp, plateau, cruise, accel = (self._ramp[k], self._plateau[k], self._cruise[k],
                                        self._accel[k])
        rising = tau < ramp
        falling = tau > ramp + plateau
        to_end = np.maximum(2 * ramp + plateau - tau, 0.0)
        s = np.where(rising, 0.5 * accel * tau ** 2,
                     np.where(falling, self._length[k] - 0.5 * accel * to_end ** 2,
                              0.5 * cruise * ramp + cruise * (tau - ramp)))
        s_dot = np.where(rising, accel * tau, np.where(falling, accel * to_end, cruise))
        s_ddot = np.where(rising, accel, np.where(falling, -accel, 0.0))
        s = np.where(self._length[k] > 0, s, 0.0)
        direction = self._direction[k]
        q = self._q_from[k] + direction * s[:, None]
        v = direction * s_dot[:, None]
        a = direction * s_ddot[:, None]
        moving = self._joint[k]
        constant = (moving >= 0) & ~rising & ~falling
        return q, v, a, moving, constant

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q, q̇, q̈) at time t (held at the ends outside [0, duration])."""
        q, v, a, _, _ = self.evaluate(t)
        return q[0], v[0], a[0]

    def series(self, rate: float = 1000.0) -> ExcitationSeries:
        t = np.arange(int(np.floor(self.duration * rate)) + 1) / rate
        q, v, a, moving, constant = self.evaluate(t)
        return ExcitationSeries(self.joint_names, t, q, v, a, moving, constant)

    def write_csv(self, path, rate: float = 1000.0) -> None:
        """Trajectory file for the real arm, one row per 1/rate s: t in s, then
        <joint>/position (rad) for each joint, then <joint>/velocity (rad/s) for each joint."""
        series = self.series(rate)
        header = ','.join(['t'] + [f'{j}/position' for j in self.joint_names]
                          + [f'{j}/velocity' for j in self.joint_names])
        table = np.column_stack([series.t, series.q, series.v])
        temporary = os.fspath(path) + '.partial'
        np.savetxt(temporary, table, delimiter=',', header=header, comments='', fmt='%.6f')
        os.replace(temporary, path)


def sweep_intervals(robot: RobotModel, settings: SweepSettings) -> tuple[np.ndarray, np.ndarray]:
    """Centre c_i and half-range Q_i of each joint's sweep, inside the limits minus the margin.

    Seed 001 sweeps [−Q, Q]; here the interval is centred on the home configuration (all zeros
    is not a safe pose for every arm) and slides to stay inside the limits.
    """
    lower, upper = _usable_limits(robot, settings.margin)
    half = np.minimum(settings.amplitude, (upper - lower) / 2)
    centre = np.clip(home_configuration(robot, settings), lower + half, upper - half)
    return centre, half


def home_configuration(robot: RobotModel, settings: SweepSettings) -> np.ndarray:
    """`settings.home`, or the configuration with the link origins highest above the base
    (arm upright), from which random configurations are least likely to reach the floor."""
    lower, upper = _usable_limits(robot, settings.margin)
    if settings.home is not None:
        home = np.asarray(settings.home, dtype=float)
        if home.shape != (robot.n,) or np.any(home < lower) or np.any(home > upper):
            raise ValueError(f'home {settings.home} is not {robot.n} positions inside the limits '
                             f'minus the {settings.margin} rad margin')
        return home
    links = list(robot.joint_links) + [robot.tip_link]

    def mean_height(q):
        return -np.mean([p[2] for _, p in robot.link_poses(q, links)])

    start = np.clip(0.0, lower, upper)
    return minimize(mean_height, start, method='L-BFGS-B', bounds=list(zip(lower, upper))).x


def plan_sweeps(robot: RobotModel, settings: SweepSettings = SweepSettings()) -> SweepTrajectory:
    """The identification trajectory: starts and ends at the home configuration."""
    if settings.repetitions < 1 or not settings.speeds or min(settings.speeds) <= 0:
        raise ValueError('sweeps need at least one repetition and positive speeds')
    rng = np.random.default_rng(settings.seed)
    home = home_configuration(robot, settings)
    centre, half = sweep_intervals(robot, settings)
    lower, upper = _usable_limits(robot, settings.margin)
    lower, upper = (np.maximum(lower, home - settings.spread),
                    np.minimum(upper, home + settings.spread))
    floor = _FloorCheck(robot, home, settings.floor_clearance)
    joints = range(robot.n) if settings.joints is None else settings.joints
    accel = settings.acceleration
    moves = []
    current = home
    for i in joints:
        for speed in _joint_speeds(robot, i, settings):
            reach = min(half[i], speed * settings.max_pass_time / 2)
            if 2 * reach < 2 * speed ** 2 / accel:
                raise ValueError(
                    f'joint {robot.joint_names[i]}: at {speed:.3g} rad/s the ramps take more '
                    f'than half of the {2 * reach:.3g} rad pass; raise the acceleration '
                    f'({accel} rad/s²) or the amplitude, or lower the speed')
            low, high = centre[i] - reach, centre[i] + reach
            for _ in range(settings.repetitions):
                start = floor.random_start(rng, lower, upper, i, low, high, current)
                end = start.copy()
                end[i] = high
                moves += [_Move(current, start, settings.transfer_speed, accel),
                          _Move(start, end, speed, accel, joint=i),
                          _Move(end, end, 0, accel, pause=settings.dwell),
                          _Move(end, start, speed, accel, joint=i),
                          _Move(start, start, 0, accel, pause=settings.dwell)]
                current = start
    moves.append(_Move(current, home, settings.transfer_speed, accel))
    return SweepTrajectory(robot.joint_names, moves)


def _usable_limits(robot: RobotModel, margin: float) -> tuple[np.ndarray, np.ndarray]:
    lower, upper = robot.position_limits
    lower = np.where(np.isfinite(lower), lower + margin, -np.pi)
    upper = np.where(np.isfinite(upper), upper - margin, np.pi)
    if np.any(upper <= lower):
        bad = [robot.joint_names[i] for i in np.flatnonzero(upper <= lower)]
        raise ValueError(f'joints {bad} have no range left inside their limits minus the margin')
    return lower, upper


def _joint_speeds(robot: RobotModel, i: int, settings: SweepSettings) -> list[float]:
    """The plateau speeds for joint i, capped by its velocity limit."""
    limit = robot.velocity_limits[i]
    cap = settings.max_speed_fraction * limit if np.isfinite(limit) and limit > 0 else np.inf
    return sorted({float(min(s, cap)) for s in settings.speeds})


class _FloorCheck:
    """Rejects configurations that put a link origin below the base plane (plus clearance)."""

    _SAMPLES = 9  # configurations checked along each pass and transfer

    def __init__(self, robot: RobotModel, home: np.ndarray, clearance: float):
        self.robot = robot
        self.links = list(robot.joint_links) + [robot.tip_link]
        heights = np.array([p[2] for _, p in robot.link_poses(home, self.links)])
        # A link already lower at home (e.g. a base-level first link) must just not go lower.
        self.minimum = np.minimum(clearance, heights - 1e-6)

    def clear(self, q: np.ndarray) -> bool:
        heights = np.array([p[2] for _, p in self.robot.link_poses(q, self.links)])
        return bool(np.all(heights >= self.minimum))

    def random_start(self, rng, lower, upper, joint, low, high, current) -> np.ndarray:
        """Random configuration with `joint` at `low`, clear of the floor over the pass and
        over the straight transfer from `current`."""
        fractions = np.linspace(0.0, 1.0, self._SAMPLES)
        for _ in range(200):
            start = rng.uniform(lower, upper)
            start[joint] = low
            path = [current + f * (start - current) for f in fractions]
            for f in fractions:
                q = start.copy()
                q[joint] = low + f * (high - low)
                path.append(q)
            if all(self.clear(q) for q in path):
                return start
        raise ValueError(f'no configuration found that keeps the links above the floor while '
                         f'sweeping {self.robot.joint_names[joint]}; lower the amplitude or '
                         f'the floor clearance')
