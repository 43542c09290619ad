"""Collision detection from the external joint torque τ_ext (seed 001 eq. 7), fail-safe.

Seed 001 eq. 7: a collision is detected when some joint i has |τ_ext,i| > ψ_i for m ≥ n
consecutive samples; m counts the consecutive samples in which the condition "some joint is
over its threshold" holds (the equation's ∃i), so a contact whose torque moves from one joint
to the next while it builds up is not lost. The seed's thresholds depend on each joint's role
in a force/position hybrid task: 4 N·m on position-controlled joints, 8 N·m on
force-controlled ones (section 4.2), and it uses n = 25 ms at a 2 ms cycle.

Beyond the seed (its conclusion names "dynamic thresholds" as future work): the model error
grows with motion, so the threshold may grow with joint speed and acceleration,
    ψ_i = ψ_0,i + k_v,i |q̇_i| + k_a,i |q̈_i|.
The sign convention of τ_ext does not matter here (only |τ_ext| is used).

Stop is latched: once raised (collision, stale input, a non-finite residual) it stays until
`reset()` or, with `hold_time` > 0, until `hold_time` seconds after the last unsafe sample.
Times are seconds on one clock chosen by the caller (the node uses a monotonic clock).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

POSITION, FORCE = 'position', 'force'
ROLES = (POSITION, FORCE)

# Seed 001 section 4.2: thresholds by joint role, N·m.
SEED_POSITION_THRESHOLD = 4.0
SEED_FORCE_THRESHOLD = 8.0

# Why stop is raised (DetectorState.cause).
NONE, COLLISION, STALE, INVALID, WAITING = '', 'collision', 'stale_input', 'invalid_residual', 'waiting'


def per_joint(name: str, value, n_joints: int, low: float = 0.0, strict: bool = False,
              unit: str = '') -> np.ndarray:
    """`value` (a scalar, or 1 or `n_joints` values) as an `n_joints` float array, validated.

    Raises ValueError naming the parameter when the count is wrong or a value is not finite
    or below `low` (or equal to it when `strict`).
    """
    array = np.atleast_1d(np.asarray(value, dtype=float)).ravel()
    if array.size == 1:
        array = np.full(n_joints, array[0])
    if array.size != n_joints:
        raise ValueError(f'{name}: expected 1 or {n_joints} values (one per joint), '
                         f'got {array.size}')
    for i, x in enumerate(array):
        if not np.isfinite(x) or x < low or (strict and x == low):
            bound = f'> {low:g}' if strict else f'>= {low:g}'
            raise ValueError(f'{name}[{i}] = {x:g}{unit} is invalid: must be finite and {bound}')
    return array


def joint_roles(roles, n_joints: int) -> tuple[str, ...]:
    """Roles as a tuple of 'position'/'force', one per joint (one role applies to all)."""
    roles = [roles] if isinstance(roles, str) else list(roles)
    if len(roles) == 1:
        roles = roles * n_joints
    if len(roles) != n_joints:
        raise ValueError(f'joint_roles: expected 1 or {n_joints} roles, got {len(roles)}')
    for i, role in enumerate(roles):
        if role not in ROLES:
            raise ValueError(f'joint_roles[{i}] = {role!r}: must be one of {", ".join(ROLES)}')
    return tuple(roles)


@dataclass(frozen=True)
class DetectorConfig:
    """Validated detector parameters, one entry per joint. Build with `DetectorConfig.build`."""

    joint_names: tuple[str, ...]
    thresholds_position: np.ndarray  # ψ_0 of position-controlled joints, N·m
    thresholds_force: np.ndarray     # ψ_0 of force-controlled joints, N·m
    roles: tuple[str, ...]
    consecutive_samples: int         # n of eq. 7
    speed_gain: np.ndarray           # k_v, N·m per rad/s
    acceleration_gain: np.ndarray    # k_a, N·m per rad/s²
    hold_time: float                 # s; 0 = latch until reset()
    input_timeout: float             # s without a residual → stop

    @classmethod
    def build(cls, joint_names, thresholds_position=SEED_POSITION_THRESHOLD,
              thresholds_force=SEED_FORCE_THRESHOLD, roles=POSITION,
              consecutive_samples: int = 12, speed_gain=0.0, acceleration_gain=0.0,
              hold_time: float = 0.0, input_timeout: float = 0.1) -> 'DetectorConfig':
        """Scalars (or single values) apply to every joint; raises ValueError on bad values."""
        names = tuple(joint_names)
        n = len(names)
        if n == 0:
            raise ValueError('the detector needs at least one joint')
        if isinstance(consecutive_samples, float) and not consecutive_samples.is_integer():
            raise ValueError(f'consecutive_samples = {consecutive_samples}: must be an integer')
        if int(consecutive_samples) < 1:
            raise ValueError(f'consecutive_samples = {consecutive_samples}: must be >= 1 '
                             '(the number of consecutive samples over threshold, eq. 7)')
        if not np.isfinite(hold_time) or hold_time < 0:
            raise ValueError(f'hold_time = {hold_time} s: must be >= 0 (0 = latch until reset)')
        if not np.isfinite(input_timeout) or input_timeout <= 0:
            raise ValueError(f'input_timeout = {input_timeout} s: must be > 0')
        return cls(
            joint_names=names,
            thresholds_position=per_joint('thresholds_position', thresholds_position, n,
                                          strict=True, unit=' N·m'),
            thresholds_force=per_joint('thresholds_force', thresholds_force, n,
                                       strict=True, unit=' N·m'),
            roles=joint_roles(roles, n),
            consecutive_samples=int(consecutive_samples),
            speed_gain=per_joint('speed_gain', speed_gain, n, unit=' N·m·s/rad'),
            acceleration_gain=per_joint('acceleration_gain', acceleration_gain, n,
                                        unit=' N·m·s²/rad'),
            hold_time=float(hold_time), input_timeout=float(input_timeout))

    def replace(self, **changes) -> 'DetectorConfig':
        """A copy with some parameters changed, validated like `build`."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields.update(changes)
        return DetectorConfig.build(**fields)

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @property
    def base_thresholds(self) -> np.ndarray:
        """ψ_0 of each joint for its current role."""
        force = np.array([r == FORCE for r in self.roles])
        return np.where(force, self.thresholds_force, self.thresholds_position)

    def thresholds(self, velocity=None, acceleration=None) -> np.ndarray:
        """ψ_i = ψ_0,i + k_v,i |q̇_i| + k_a,i |q̈_i|; a missing q̇ or q̈ adds nothing."""
        psi = self.base_thresholds.copy()
        if velocity is not None:
            psi += self.speed_gain * np.abs(velocity)
        if acceleration is not None:
            psi += self.acceleration_gain * np.abs(acceleration)
        return psi


@dataclass(frozen=True)
class DetectorState:
    """The detector's output after a sample or a check."""

    stop: bool
    cause: str                        # why stop is raised now: COLLISION, STALE, INVALID, WAITING or NONE
    reason: str                       # one line for people; '' when not stopped
    colliding_joints: tuple[int, ...]  # joints over threshold in a detected collision (eq. 7 "yes")
    residuals: np.ndarray             # last τ_ext, N·m
    thresholds: np.ndarray            # last ψ, N·m
    over_threshold: bool = False      # some joint is over ψ now (counted or not yet n samples)


class CollisionDetector:
    """Seed 001 eq. 7 with role thresholds, speed-dependent thresholds, latching, fail-safe."""

    def __init__(self, config: DetectorConfig):
        self.config = config
        self._over_count = 0              # m of eq. 7
        self._over = np.zeros(config.n, dtype=bool)
        self._invalid = False             # the last sample was not finite
        self._residuals = np.zeros(config.n)
        self._thresholds = config.base_thresholds
        self._last_input: float | None = None
        self._input_stale = False
        self._latched_cause = NONE
        self._latched_reason = ''
        self._last_unsafe = -np.inf
        self._colliding: tuple[int, ...] = ()

    # ------------------------------------------------------------ configuration
    def configure(self, config: DetectorConfig) -> None:
        """New parameters at run time; the latch and the sample count are kept."""
        if config.n != self.config.n:
            raise ValueError(f'the detector has {self.config.n} joints, the new '
                             f'configuration {config.n}')
        self.config = config

    def set_roles(self, roles) -> None:
        """Switch joints between 'position' and 'force' control (their thresholds follow)."""
        self.configure(self.config.replace(roles=roles))

    # ------------------------------------------------------------------ inputs
    def update(self, t: float, tau_ext, velocity=None, acceleration=None) -> DetectorState:
        """One residual sample at time `t`: eq. 7 with ψ from the joint speed and acceleration.

        A non-finite τ_ext raises stop at once: it means the estimator upstream is broken,
        and dropping it would leave the arm unwatched while such samples keep arriving.
        """
        tau = np.asarray(tau_ext, dtype=float)
        if tau.shape != (self.config.n,):
            raise ValueError(f'τ_ext has {tau.size} values, the detector {self.config.n} joints')
        self._last_input = t
        self._invalid = not np.isfinite(tau).all()
        if self._invalid:
            self._over_count = 0
            self._latch(t, INVALID, f'non-finite residual on {self._joint_list(~np.isfinite(tau))}')
            return self.state(t)
        self._residuals = tau
        self._thresholds = self.config.thresholds(velocity, acceleration)
        self._over = np.abs(tau) > self._thresholds
        self._over_count = self._over_count + 1 if self._over.any() else 0
        if self._over_count >= self.config.consecutive_samples:
            self._colliding = tuple(int(i) for i in np.flatnonzero(self._over))
            if self._latched_cause != COLLISION:
                self._latch(t, COLLISION, self._collision_reason())
        else:
            self._colliding = ()
        if self._over.any() and self._latched_cause:
            self._last_unsafe = t  # hold_time counts from the last sample over threshold
        return self.state(t)

    def set_input_stale(self, stale: bool) -> None:
        """The joint-state listener's watchdog: True while its input is stale."""
        self._input_stale = bool(stale)

    def stale(self, now: float) -> str:
        """Why the input is stale at `now` ('' when it is fresh)."""
        if self._input_stale:
            return 'joint states are stale (listener watchdog)'
        if self._last_input is not None and now - self._last_input > self.config.input_timeout:
            return (f'no residual for {now - self._last_input:.3f} s '
                    f'(input_timeout {self.config.input_timeout:g} s)')
        return ''

    def state(self, now: float) -> DetectorState:
        """Apply the fail-safe and the hold-time release at `now`; the resulting state.

        Before the first residual the stop is raised but not latched (nothing has failed
        yet); once residuals have flowed, stale input latches like a collision.
        """
        stale = self.stale(now)
        if self._last_input is None:
            return self._make_state(True, WAITING, stale or 'waiting for the first residual')
        if stale:
            self._latch(now, STALE, stale)
            self._last_unsafe = now
        elif (self._latched_cause and self.config.hold_time > 0 and not self._over.any()
              and not self._invalid and now - self._last_unsafe >= self.config.hold_time):
            self._clear()
        return self._make_state(bool(self._latched_cause), self._latched_cause,
                                self._latched_reason)

    def reset(self, now: float) -> str:
        """Clear a latched stop; refused (a message saying why) while unsafe, '' when done."""
        stale = self.stale(now) or (self._last_input is None and 'no residual received yet')
        if stale:
            return f'cannot reset: {stale}'
        if self._invalid:
            return 'cannot reset: the last residual was not finite'
        if self._over.any():
            return f'cannot reset: still over threshold on {self._joint_list(self._over)}'
        self._clear()
        return ''

    # ----------------------------------------------------------------- helpers
    def _latch(self, t: float, cause: str, reason: str) -> None:
        self._latched_cause, self._latched_reason = cause, reason
        self._last_unsafe = t

    def _clear(self) -> None:
        self._latched_cause, self._latched_reason = NONE, ''
        self._over_count = 0
        self._colliding = ()

    def _joint_list(self, mask) -> str:
        return ', '.join(self.config.joint_names[i] for i in np.flatnonzero(mask))

    def _collision_reason(self) -> str:
        parts = [f'{self.config.joint_names[i]} |τ_ext| {abs(self._residuals[i]):.2f} > '
                 f'{self._thresholds[i]:.2f} N·m' for i in self._colliding]
        return (f'collision: {"; ".join(parts)} for {self._over_count} consecutive samples '
                '(seed 001 eq. 7)')

    def _make_state(self, stop: bool, cause: str, reason: str) -> DetectorState:
        return DetectorState(stop=stop, cause=cause if stop else NONE,
                             reason=reason if stop else '', colliding_joints=self._colliding,
                             residuals=self._residuals.copy(), thresholds=self._thresholds.copy(),
                             over_threshold=bool(self._over.any()))

