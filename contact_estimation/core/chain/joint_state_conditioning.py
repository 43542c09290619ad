"""Raw joint states → clean, complete samples in model joint order, no ROS.

A robot driver's `sensor_msgs/JointState` may list joints in any order, include joints outside
the chain (gripper fingers), be split over several publishers (arm and gripper, two arm
halves), carry motor current instead of torque, omit velocity, or be plain wrong (NaN, wrong
lengths, values no joint can have, stamps going backwards or from the future).
`JointStateConditioner` turns each message into either nothing or a `JointSample` the rest of
the pipeline can trust, and names every problem it finds (the `*` constants below) without
ever raising on a message.

Rules:
- A message with an error is dropped whole; `WARNINGS` (a gap, a joint beyond its limits, a
  new time base) are reported and the sample still goes out.
- Names of URDF joints outside the chain are ignored; any other unknown name is an error, and
  so is a message without names.
- Values no healthy robot gives are errors (`IMPLAUSIBLE`): a position more than
  `hard_limit_margin` beyond the URDF limits, |velocity| above `velocity_limit_factor` × the
  URDF velocity limit, |effort| above `effort_limit_factor` × the URDF effort limit (where the
  URDF gives limits > 0). Within `limit_margin` of the limits is fine, between the two margins
  a warning (`OUT_OF_LIMITS`).
- Stamps: each joint's stamps must increase. A stamp more than `max_future` ahead of the
  caller's clock (`now`) is an error, so one bad stamp cannot make every later good one look
  old; so is one more than `max_past` behind it (a log played live, a clock set to 1970:
  such samples never feed the caller's watchdog). Stamps that keep going back (a driver
  restart) are errors until they have done so for `time_reset_after` seconds of the caller's
  clock; then the new time base is accepted and everything restarts (`TIME_RESET`).
  Meanwhile no sample goes out, so the caller's watchdog reports the input stale: the fail-
  safe direction.
- Merging: each chain joint keeps its latest value and stamp. A sample goes out when every
  chain joint has been refreshed since the last sample and the refreshed stamps lie within
  `merge_window` seconds of each other; its stamp is the newest of them. A message that
  refreshes a joint again before the set is complete abandons that cycle (`MISSING_JOINTS`).
- Motor-side readings are converted with seed 001 eqs. 1–3 (`Transmission`).
- The usual message (one of a known name list, within every bound, stamped after the last)
  goes through one compiled kernel (`_joint_side`, core/compiled.py): gathered in model
  order, converted, checked and stored in plain loops; what it does not pass (values out of
  bounds, a stamp not newer, a part of the chain) is explained and handled in Python.
- Velocity the driver does not provide comes from `DerivativeEstimator`, fed only while it is
  needed; the estimator restarts after a gap longer than `gap_threshold`. The q̈ of that same
  fit goes on with the sample (`JointSample.acceleration`): a node that needs q̈ over the same
  window takes it instead of fitting again; otherwise it runs its own `DerivativeEstimator`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from contact_estimation.core.chain.derivatives import DerivativeEstimator
from contact_estimation.core.chain.joint_order import JointOrder
from contact_estimation.core.chain.sample import Acceleration, JointSample
from contact_estimation.core import input_rejected
# The stamp problem kinds are among the kinds below (core/chain/stamps.py checks every input).
from contact_estimation.core.chain.stamps import (  # noqa: F401
    FUTURE_STAMP, MAX_FUTURE, MAX_PAST, PAST_STAMP, ZERO_STAMP, stamp_problem)
from contact_estimation.core.compiled import kernel
from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.settings import TIMEOUT, WINDOW, checked, setting

# Problem kinds (the keys counted on /diagnostics): those every node meets have the names of
# core/input_rejected.py, the others are the listener's own.
NON_FINITE = input_rejected.NOT_FINITE
LENGTH_MISMATCH = input_rejected.WRONG_SIZE
UNKNOWN_JOINT = input_rejected.WRONG_JOINTS
MISSING_JOINTS = 'missing_joints'
DUPLICATE_JOINT = 'duplicate_joint'
REPEATED_STAMP = 'repeated_stamp'
OUT_OF_ORDER_STAMP = 'out_of_order_stamp'
NO_NAMES = 'no_joint_names'
IMPLAUSIBLE = 'implausible_value'

# The ranges of a drive's k_m (N·m/A) and G_m: a cobot's motors have k_m ~0.05-0.5 N·m/A and
# G_m ~50-160 (harmonic drives); a thousand times more is still a drive, 1e308 turns every
# current into an infinite torque. Each is > 0: a zero or negative one would turn every push
# into a pull (the residual's sign flips); a drive that counts the other way is the driver's
# sign convention to fix.
TORQUE_CONSTANTS = (1e-4, 1e3)
GEAR_RATIOS = (1e-3, 1e5)
UNALIGNED_PARTS = 'unaligned_parts'
GAP = 'gap'
OUT_OF_LIMITS = 'out_of_limits'
TIME_RESET = 'time_reset'

# Kinds that do not stop the sample from going out.
WARNINGS = frozenset({GAP, OUT_OF_LIMITS, TIME_RESET})
# Dropped samples that real drivers give now and then (reordered or repeated on the way):
# worth a warning, not an error.
TIMING_DROPS = frozenset({OUT_OF_ORDER_STAMP, REPEATED_STAMP})

Problem = tuple[str, str]


@dataclass(frozen=True)
@checked
class ConditioningConfig:
    """How joint states are converted and checked: joint_state_listener's parameters, and
    the one source of their defaults (its parameter table takes them; config/
    joint_state_listener.yaml ships the same values: test/test_node_defaults.py).

    Times in seconds, not samples, so that they mean the same at 1 kHz and at 100 Hz.
    """

    effort_is_current: bool = setting(
        False, 'the effort field is motor current (A): joint torque = G_m k_m i (seed 001 '
        'eqs. 1-2)')
    positions_are_motor_side: bool = setting(
        False, 'positions and velocities are motor-side: divided by G_m (seed 001 eq. 3)')
    torque_constants: tuple[float, ...] = setting(
        (1.0,), 'motor torque constants k_m (N·m/A)', range=TORQUE_CONSTANTS, per_joint=1)
    gear_ratios: tuple[float, ...] = setting(
        (1.0,), 'gear ratios G_m (motor turns per joint turn)', range=GEAR_RATIOS,
        per_joint=1)
    velocity_window: float = setting(
        0.02, 'time span (s) of the least-squares fit that estimates velocity the driver '
        'omits (at least 3 samples whatever the rate)', range=(0.001, 1.0),
        name='velocity_filter.window_duration', timing=WINDOW)
    merge_window: float = setting(
        0.001, 'largest stamp difference (s) between joint-state parts merged into one sample',
        range=(0.0, 1.0))
    gap_threshold: float = setting(  # 5 periods at 100 Hz: one lost message is no gap
        0.05, 'input pause (s) after which the velocity filter restarts', range=(0.001, 10.0),
        timing=TIMEOUT)
    time_reset_after: float = setting(
        0.05, 'time (s) without a valid sample after which input_stale goes True; also how '
        'long stamps must keep going back before a new time base is accepted',
        range=(0.001, 10.0), name='input_timeout', timing=TIMEOUT)
    max_future: float = setting(
        MAX_FUTURE, "largest time (s) a stamp may be ahead of this node's clock",
        range=(0.001, 3600.0))
    max_past: float = setting(
        MAX_PAST, "largest time (s) a stamp may be behind this node's clock: an older joint "
        'state was sent long ago (a log played live, a clock set to 1970) and is dropped, '
        'never feeding the watchdog', range=(0.001, 3600.0))
    limit_margin: float = setting(
        0.05, 'distance (rad or m) beyond a joint limit before it is reported (warning)',
        range=(0.0, 3.2))
    hard_limit_margin: float = setting(
        0.5, 'distance (rad or m) beyond a joint limit at which a message is dropped (at '
        'least limit_margin)', range=(0.0, 10.0))
    velocity_limit_factor: float = setting(
        2.0, 'a message is dropped when |velocity| exceeds this times the URDF limit',
        range=(1.0, 100.0))
    effort_limit_factor: float = setting(
        3.0, 'a message is dropped when |joint torque| exceeds this times the URDF limit',
        range=(1.0, 100.0))

    def __post_init__(self):
        if self.hard_limit_margin < self.limit_margin:
            raise ValueError(f'hard_limit_margin ({self.hard_limit_margin}) must be at least '
                             f'limit_margin ({self.limit_margin})')
        for name in ('torque_constants', 'gear_ratios'):
            object.__setattr__(self, name, tuple(float(x) for x in getattr(self, name)))


@dataclass(frozen=True)
class Transmission:
    """Motor-side readings → joint-side values through the gearbox (seed 001 eqs. 1–3).

    τ_m = k_m i_m (eq. 1) and τ = G_m τ_m (eq. 2) when the effort field carries motor current;
    q = θ_m / G_m (eq. 3), and likewise q̇ = θ̇_m / G_m, when positions are motor angles.
    """

    torque_constants: np.ndarray  # k_m, N·m/A, one per model joint
    gear_ratios: np.ndarray       # G_m, motor turns per joint turn
    effort_is_current: bool = False
    positions_are_motor_side: bool = False

    @classmethod
    def create(cls, n: int, config: 'ConditioningConfig') -> 'Transmission':
        """The constants of `config` for `n` joints (one value for all or one per joint;
        each within TORQUE_CONSTANTS and GEAR_RATIOS, checked as `config` was built)."""
        return cls(per_joint('torque_constants', config.torque_constants, n),
                   per_joint('gear_ratios', config.gear_ratios, n),
                   bool(config.effort_is_current), bool(config.positions_are_motor_side))

    def joint_position(self, value: np.ndarray, joints: np.ndarray) -> np.ndarray:
        """Position or velocity of model joints `joints` on the joint side (eq. 3)."""
        return value / self.gear_ratios[joints] if self.positions_are_motor_side else value

    def joint_torque(self, effort: np.ndarray, joints: np.ndarray) -> np.ndarray:
        """Joint torque of model joints `joints` from the effort field (eqs. 1–2)."""
        if self.effort_is_current:
            return self.gear_ratios[joints] * self.torque_constants[joints] * effort
        return effort


@dataclass
class ConditionResult:
    sample: JointSample | None = None
    problems: list[Problem] = field(default_factory=list)


class _Layout:
    """What one list of joint names means to a conditioner, worked out once per list.

    At 1 kHz the same one or two lists come again and again: their problems (duplicates,
    unknown names), where their values go, and the bounds those values must keep are the
    same for every message. `joints`/`rows` keep the message's order (the problem texts name
    joints in it); `at` are the joints in model order and `take` the kernel's indices and
    `constants` its per-joint numbers (`_joint_side`).
    """

    __slots__ = ('problems', 'joints', 'rows', 'at', 'every', 'take', 'constants',
                 'unbounded', 'values')

    def __init__(self, conditioner: 'JointStateConditioner', names: tuple[str, ...]):
        mapping = conditioner._order.map(names)
        self.problems: list[Problem] = []
        if len(set(names)) != len(names):
            repeated = sorted({n for n in names if names.count(n) > 1})
            self.problems.append((DUPLICATE_JOINT, f'joint names listed twice: {repeated}'))
        if mapping.unknown:
            self.problems.append((UNKNOWN_JOINT, f'joints not in the robot model: '
                                  f'{list(mapping.unknown)}'))
        self.joints, self.rows = mapping.joints, mapping.rows
        order = np.argsort(mapping.joints, kind='stable')
        joints, rows = mapping.joints[order], mapping.rows[order]
        n = len(conditioner.joint_names)
        self.every = not self.problems and np.array_equal(joints, np.arange(n))
        self.at = joints
        self.take = np.stack([rows, joints]).astype(np.int64)  # message row, model joint
        # Position within the soft limits (inside the hard ones: hard_limit_margin ≥
        # limit_margin), |velocity| and |effort| within their bounds: nothing to say.
        c, tx = conditioner, conditioner.transmission
        low = np.stack([c._lower[joints], -c._max_velocity[joints], -c._max_effort[joints]])
        high = np.stack([c._upper[joints], c._max_velocity[joints], c._max_effort[joints]])
        self.unbounded = not (np.isfinite(low).all() and np.isfinite(high).all())
        # Eqs. 1–3 as a divisor of position and velocity and a factor of effort: 1.0 where
        # not converted (x / 1.0 and x · 1.0 are x to the bit), G_m and G_m k_m where they are.
        ones = np.ones(joints.size)
        divisor = tx.gear_ratios[joints] if tx.positions_are_motor_side else ones
        factor = (tx.gear_ratios[joints] * tx.torque_constants[joints]
                  if tx.effort_is_current else ones)
        self.constants = np.vstack([low, high, divisor, factor])
        self.values = np.empty((3, joints.size))  # position, velocity, effort, joint side


class JointStateConditioner:
    """JointState arrays → `ConditionResult` (see the module docstring for the rules)."""

    LAYOUTS = 16  # name lists remembered (one or two per driver in practice)

    def __init__(self, joint_names: Sequence[str], ignored_joints: Sequence[str] = (),
                 position_limits: tuple[np.ndarray, np.ndarray] | None = None,
                 velocity_limits: np.ndarray | None = None,
                 effort_limits: np.ndarray | None = None,
                 config: ConditioningConfig = ConditioningConfig()):
        self.joint_names = list(joint_names)
        n = len(self.joint_names)
        self.config = config
        self._order = JointOrder(self.joint_names, ignored_joints)
        self._layouts: dict[tuple[str, ...], _Layout] = {}
        lower, upper = position_limits or (np.full(n, -np.inf), np.full(n, np.inf))
        lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
        self._lower, self._upper = lower - config.limit_margin, upper + config.limit_margin
        self._hard_lower = lower - config.hard_limit_margin
        self._hard_upper = upper + config.hard_limit_margin
        self._max_velocity = _bound(velocity_limits, config.velocity_limit_factor, n)
        self._max_effort = _bound(effort_limits, config.effort_limit_factor, n)
        self.transmission = Transmission.create(n, config)
        self.merge_window = float(config.merge_window)
        self.gap_threshold = float(config.gap_threshold)
        self.max_future = float(config.max_future)
        self.max_past = float(config.max_past)
        self.time_reset_after = float(config.time_reset_after)
        self.estimator = DerivativeEstimator(duration=config.velocity_window)
        self.reset()
        _warm_up()

    @classmethod
    def for_robot(cls, model, config: ConditioningConfig = ConditioningConfig(),
                  **changes) -> 'JointStateConditioner':
        """Conditioner for a `RobotModel`: its chain, its limits, its other URDF joints
        ignored; `config` with `changes` (ConditioningConfig fields) applied."""
        return cls(model.joint_names, model.urdf_joint_names, model.position_limits,
                   model.velocity_limits, model.effort_limits, replace(config, **changes))

    def reset(self) -> None:
        n = len(self.joint_names)
        # Each joint's position, velocity, effort (NaN: not provided by the driver), stamp,
        # and the caller's time its stamps first went back: one array for the kernel.
        self._state = np.array([np.zeros(n), np.full(n, np.nan), np.full(n, np.nan),
                                np.full(n, -np.inf), np.full(n, np.nan)])
        self._values = self._state[:3]
        self._stamps, self._backwards_since = self._state[3:]
        self._stamp_objects: list[Any] = [None] * n
        self._pending = np.zeros(n, dtype=bool)
        self._some_pending = False            # False: no joint is pending (quick check)
        self._last_sample_t: float | None = None
        self.estimator.reset()

    # ------------------------------------------------------------------ input
    def condition(self, t: float, names: Sequence[str], position, velocity=(), effort=(),
                  *, now: float, stamp: Any = None, frame_id: str = '') -> ConditionResult:
        """Check and merge one JointState stamped `t`, received at `now` (the caller's clock,
        seconds, same time base as the stamps); never raises on bad data. `stamp` and
        `frame_id` go out unchanged with the sample the message completes."""
        result = ConditionResult()
        problems = result.problems
        names = tuple(names)
        if not names:
            problems.append((NO_NAMES, f'joint state without joint names ({len(position)} '
                             'positions): no way to tell which joint is which'))
            return result
        position, velocity, effort = _floats(position), _floats(velocity), _floats(effort)
        stamp_refused = stamp_problem(t, now, self.max_future, self.max_past)
        if stamp_refused:
            problems.append(stamp_refused)
        for field_name, values, optional in (('position', position, False),
                                             ('velocity', velocity, True),
                                             ('effort', effort, True)):
            if values.size != len(names) and not (optional and values.size == 0):
                problems.append((LENGTH_MISMATCH, f'{len(names)} names but {values.size} '
                                 f'{field_name} values'))
        if problems:
            return result
        layout = self._layouts.get(names) or self._layout(names)
        if layout.problems or layout.joints.size == 0:
            problems += layout.problems
            return result  # an error, or only joints outside the chain (a gripper driver)
        # A field not given is passed as `position` and read as 0: within every bound, and
        # stored as "not given".
        given = velocity.size > 0, effort.size > 0
        fields = (position, velocity if given[0] else position, effort if given[1] else position,
                  *given, layout.take, layout.constants, layout.unbounded, layout.values)
        outcome = _joint_side(float(t), *fields, self._state, True)
        if outcome != _STORED:
            # The problems and their texts come from `_explain` and `_stamp_in_order`.
            if outcome == _OUTSIDE:
                self._explain(layout, position, velocity, effort, problems)
            if problems or not self._stamp_in_order(t, layout, now, problems):
                return result
            _joint_side(float(t), *fields, self._state, False)  # (a new one after TIME_RESET)
        self._store(layout, stamp, problems)
        if layout.every or self._pending.all():
            result.sample = self._complete_sample(
                problems, frame_id, given if outcome == _STORED and layout.every else None)
        return result

    def _layout(self, names: tuple[str, ...]) -> _Layout:
        if len(self._layouts) >= self.LAYOUTS:
            self._layouts.pop(next(iter(self._layouts)))
        layout = self._layouts[names] = _Layout(self, names)
        return layout

    def _names(self, joints: np.ndarray) -> list[str]:
        return [self.joint_names[j] for j in joints]

    def _explain(self, layout: _Layout, position, velocity, effort, problems) -> None:
        """The problems of values that failed the quick checks, joints in message order:
        `NON_FINITE`, else `IMPLAUSIBLE` (none: only the soft position limits were passed)."""
        joints = layout.joints
        position, velocity, effort = (
            values[layout.rows] if values.size else values
            for values in (position, velocity, effort))
        for field_name, values in (('position', position), ('velocity', velocity),
                                   ('effort', effort)):
            bad = ~np.isfinite(values)
            if bad.any():
                problems.append((NON_FINITE, f'{field_name} of {self._names(joints[bad])} '
                                 f'is {values[bad].tolist()}'))
        if problems:
            return
        tx = self.transmission
        position = tx.joint_position(position, joints)
        velocity = tx.joint_position(velocity, joints) if velocity.size else velocity
        effort = tx.joint_torque(effort, joints) if effort.size else effort
        self._check_plausible(joints, position, velocity, effort, problems)
    def _check_plausible(self, joints, position, velocity, effort, problems) -> None:
        """`IMPLAUSIBLE` for joint-side values far beyond what the URDF allows."""
        outside = ((position < self._hard_lower[joints]) |
                   (position > self._hard_upper[joints]))
        if outside.any():
            problems.append((IMPLAUSIBLE, f'position of {self._names(joints[outside])} at '
                             f'{position[outside].tolist()} rad, more than hard_limit_margin '
                             f'beyond the limits [{self._hard_lower[joints[outside]].tolist()}, '
                             f'{self._hard_upper[joints[outside]].tolist()}]'))
        for field_name, values, bound, unit in (('velocity', velocity, self._max_velocity, 'rad/s'),
                                                ('effort', effort, self._max_effort, 'N·m')):
            if not values.size:
                continue
            beyond = np.abs(values) > bound[joints]
            if beyond.any():
                problems.append((IMPLAUSIBLE, f'{field_name} of {self._names(joints[beyond])} '
                                 f'is {values[beyond].tolist()} {unit}, beyond '
                                 f'{bound[joints[beyond]].tolist()} (the URDF limit × '
                                 f'{field_name}_limit_factor)'))

    def _stamp_in_order(self, t, layout: _Layout, now, problems) -> bool:
        """False, with the problem, for a stamp not newer than its joints' last one.

        Stamps that have kept going back for `time_reset_after` seconds of the caller's clock
        are a new time base (a driver restart): everything restarts and the message is taken.
        """
        joints = layout.at
        previous = self._stamps[joints].max()
        if t > previous:
            return True
        if t == previous:
            problems.append((REPEATED_STAMP, f'stamp {t:.9f} s received again'))
            return False
        # fmin keeps the earliest start and restarts it if the caller's clock went back too.
        since = np.fmin(self._backwards_since[joints], now)
        self._backwards_since[joints] = since
        if now - since.max() < self.time_reset_after:
            problems.append((OUT_OF_ORDER_STAMP, f'stamp {t:.9f} s arrived after '
                             f'{previous:.9f} s ({1e3 * (previous - t):.3f} ms older); a new '
                             f'time base is accepted after {self.time_reset_after} s of this'))
            return False
        problems.append((TIME_RESET, f'stamps went back {previous - t:.6f} s and stayed back '
                         f'for {now - since.max():.3f} s: new time base accepted (driver '
                         'restart?), merging and velocity filter restarted'))
        self.reset()
        return True

    # ---------------------------------------------------------------- merging
    def _store(self, layout: _Layout, stamp, problems) -> None:
        """The message's joints, whose values and stamps `_joint_side` stored, are pending
        until every chain joint has been refreshed (a message of every joint completes the
        sample at once: nothing pends)."""
        joints = layout.at
        if self._some_pending and self._pending[joints].any():
            missing = ~self._pending
            if missing.any():
                problems.append((MISSING_JOINTS,
                                 f'no value for {self._names(np.flatnonzero(missing))} '
                                 'before the next message of the other joints'))
            self._pending[:] = False
            self._some_pending = False
        if layout.every:
            self._stamp_objects = [stamp] * len(self.joint_names)
            return
        for j in joints:
            self._stamp_objects[j] = stamp
        self._pending[joints] = True
        self._some_pending = True

    def _complete_sample(self, problems: list[Problem], frame_id: str,
                         whole: tuple[bool, bool] | None = None) -> JointSample | None:
        """Every joint refreshed: emit if the parts are aligned in time. `whole`: one message
        gave every joint (one stamp: nothing to align), its positions within the limits, and
        whether it gave (velocity, effort)."""
        newest = 0 if whole else int(np.argmax(self._stamps))
        t = float(self._stamps[newest])  # a float, not a numpy scalar: cheaper downstream
        spread = 0.0 if whole else t - self._stamps.min()
        if spread > self.merge_window:
            problems.append((UNALIGNED_PARTS, f'joint state parts {1e3 * spread:.3f} ms apart, '
                             f'more than merge_window {1e3 * self.merge_window:.3f} ms'))
            self._pending = self._stamps >= t - self.merge_window
            self._some_pending = bool(self._pending.any())
            return None
        if self._some_pending:
            self._pending[:] = False
            self._some_pending = False
        if self._last_sample_t is not None and t - self._last_sample_t > self.gap_threshold:
            problems.append((GAP, f'{1e3 * (t - self._last_sample_t):.1f} ms without joint '
                             'states: velocity filter restarted'))
            self.estimator.reset()
        self._last_sample_t = t
        q, v, effort = self._values.copy()
        missing = None if whole and whole[0] else np.isnan(v)
        fitted = None
        if missing is not None and missing.any():
            estimate, acceleration = self.estimator.update(t, q)
            if not self.estimator.ready:
                return None  # a velocity must be estimated and the estimator is still filling
            v[missing] = estimate[missing]
            fitted = Acceleration(self.estimator.duration, acceleration)  # handed on
        else:
            self.estimator.reset()  # unfed now, its window would later span a hole
        if whole is None:
            outside = (q < self._lower) | (q > self._upper)
            if outside.any():
                problems.append((OUT_OF_LIMITS, f'{self._names(np.flatnonzero(outside))} at '
                                 f'{q[outside].round(4).tolist()} rad, beyond the limits'))
        given = whole[1] if whole else not np.isnan(effort).any()
        return JointSample(t=t, q=q, v=v, tau=effort if given else None,
                           stamp=self._stamp_objects[newest], frame_id=frame_id,
                           acceleration=fitted)


_OUTSIDE, _NOT_NEWER, _STORED = 0, 1, 2  # `_joint_side`'s outcomes


@kernel
def _joint_side(t, position, velocity, effort, velocity_given, effort_given, take, constants,
                check_finite, values, state, check):
    """One message's values of the layout's joints, joint side, in model order, into
    `values` (3 × m: position, velocity, effort), and into the conditioner's `state` (5 × n:
    position, velocity, effort, stamp `t`, time the stamps first went back: NaN) when they
    pass: `_STORED`. `check`: pass only values within [low, high] (finite ones where a bound
    is infinite: `check_finite`), else `_OUTSIDE`, and a stamp newer than each joint's last,
    else `_NOT_NEWER` (both: nothing stored).

    Joint i of the layout is message row take[0, i], model joint take[1, i]; constants[:, i]
    are its low and high bounds (3 each), the divisor of position and velocity and the factor
    of effort (eqs. 1–3). A field not given reads 0 and is stored as NaN."""
    joints = take.shape[1]
    within = True
    for i in range(joints):
        row = take[0, i]
        values[0, i] = position[row] / constants[6, i]
        values[1, i] = velocity[row] / constants[6, i] if velocity_given else 0.0
        values[2, i] = effort[row] * constants[7, i] if effort_given else 0.0
        for k in range(3):
            value = values[k, i]
            if not (constants[k, i] <= value <= constants[3 + k, i]) or (
                    check_finite and not np.isfinite(value)):
                within = False
    if check:
        if not within:
            return _OUTSIDE
        for i in range(joints):
            if not t > state[3, take[1, i]]:
                return _NOT_NEWER
    for i in range(joints):
        j = take[1, i]
        state[0, j] = values[0, i]
        state[1, j] = values[1, i] if velocity_given else np.nan
        state[2, j] = values[2, i] if effort_given else np.nan
        state[3, j] = t
        state[4, j] = np.nan
    return _STORED


def _warm_up() -> None:
    """`_joint_side` compiled, or loaded from numba's cache, for the arrays `condition` is
    given: read-only views of a message's bytes (ros/cdr.py) and arrays of the caller's own;
    at start, never on the first sample."""
    take, constants, values, state = (np.zeros((2, 1), np.int64), np.zeros((8, 1)),
                                      np.zeros((3, 1)), np.zeros((5, 1)))
    for given in (np.frombuffer(bytes(8), np.float64), np.zeros(1)):
        _joint_side(1.0, given, given, given, True, True, take, constants, True, values, state,
                    True)


_FLOAT64 = np.dtype(np.float64)


def _floats(values) -> np.ndarray:
    """`values` as a float64 array (itself when it is one)."""
    if type(values) is np.ndarray and values.dtype is _FLOAT64:
        return values
    return np.asarray(values, dtype=float)


def _bound(limits: np.ndarray | None, factor: float, n: int) -> np.ndarray:
    """`factor` × each URDF limit; no bound (inf) where the URDF gives none (≤ 0)."""
    limits = np.full(n, np.inf) if limits is None else np.asarray(limits, dtype=float)
    return np.where(limits > 0, factor * limits, np.inf)
