"""Trajectory time scaling as the reaction to a collision (seed 003 eqs. 8–11), without chatter.

Seed 003 re-samples the reference trajectory in time instead of stopping it: the reference
time advances as t_i = t_{i-1} + f_S Δt (eq. 8) and the joint reference becomes
q_d(t_i) = q(t_{i-1} + f_S Δt) (eq. 9). f_S is 1 with no external torque (track normally),
0 on a collision (the arm holds where it is) and negative while a person pushes the arm back
(it yields backwards along its path), with a constant α setting the sensitivity; motion
resumes by itself when the contact ends (its Fig. 14). Eqs. 8–9 are the controller's part
(core/identification/trajectory.TimeScaler plays the simulated cobot's reference that way);
this module computes f_S, the collision detector's reaction (core/chain/reaction.py). It
follows the contact itself, not the latched stop of core/chain/detector.py: the stop stays
raised until it is reset, while f_S lets the arm go on once the contact is over.

The piecewise f_S of eqs. 10–11 is an image missing from the seed's text, so the law is ours.
A law that maps each sample's push straight to f_S chatters: under a steady push f_S jumps
between 0 and a yield several times a second. Why, physically:
- the push p = τ_extᵀd (d: unit q̇ of the last forward motion) is noisy, and near the dead
  band every noise spike flips hold ↔ yield;
- the arm's own motion changes the residual: a jump in f_S is a jump in reference speed, so
  a spike of q̈ (M(q) errors give τ_ext ≈ ΔM q̈), and the joints reverse when the arm starts
  or stops yielding, so the friction model's error flips sign (≈ 2 Δf_c). Through the
  momentum observer this self-made torque arrives with its lag 1/K_O (20 ms at K_O = 50/s)
  and settles in ≈ 3/K_O: a law that reacts within that time reacts to its own last move,
  and the push it sees is partly its own echo (yield → apparent push changes → hold →
  apparent push returns → yield …), a limit cycle;
- a person's hand is not a constant force: it softens as the arm gives way and catches up
  when it stops, which the lag above turns into the same cycle.
So f_S is a slow, rate-limited follower of a continuous target with a play:
1. P = −p, low-pass filtered with time constant `push_filter_time` (noise);
2. a play (backlash) of width h = `push_hysteresis` on P: the played push P̃ moves only when P
   leaves [P̃ − h/2, P̃ + h/2]. Yield starts once P > p_0 + h/2 and ends once P < p_0 − h/2
   (hysteresis between hold and yield), and a steady push, noise and self-made torque within
   h cannot move the yield level back and forth: f_S stays monotone. h should exceed the
   self-made change of the residual on starting or stopping to yield (the friction flip);
3. the target, while holding (a collision detected at this sample, or within `resume_delay`
   after the last one):  f* = −min(1, α (P̃ − p_0)) when P̃ > p_0, else 0 (continuous);
   otherwise f* = 1;
4. f_S approaches f* at most `yield_rate` per second while f_S ≤ 0 (into, along and out of
   the yield) and `recovery_rate` per second from 0 up to 1. The arm's own acceleration is
   then at most yield_rate·|q'| (q' the path speed), so its self-made torque ΔM·yield_rate·|q'|
   stays small against p_0, and f_S needs 1/yield_rate (0.25 s) to cross its yield range,
   many times the observer's settling time: f_S never acts on a residual that still lags its
   own last move by more than a small part of that move.
Without limit, at once: f_S → 0 on a collision while tracking (seed 003's hold: stopping the
arm is never delayed), on unusable input (waiting, stale, invalid: never move blind, never
yield), and when pushed forward along the path beyond the dead band (P < −(p_0 + h/2)): a
yielding arm has backed into something. Every limit is in seconds or 1/s and the filter is
exact for any step, so a 100 Hz driver with jittered stamps gets the same f_S as 1 kHz.
On the simulated cobot (benchmarks/time_scaling_demo.py, README) the per-sample law flipped
13 times in 3 s of the demo's steady side push; this one holds still.
Sign: τ_ext = J(p)ᵀF with F acting ON the robot (project convention), so a force against the
motion (Fᵀẋ < 0, ẋ = J q̇) gives τ_extᵀq̇ = Fᵀ J q̇ < 0, a push back P > 0.
"""
from __future__ import annotations

import math
from dataclasses import astuple, dataclass

import numpy as np

from contact_estimation.core.compiled import kernel
from contact_estimation.core.settings import DURATION, checked, setting


@dataclass(frozen=True)
@checked
class TimeScalingConfig:
    alpha: float = setting(0.1, 'seed 003 α: yield speed (fraction of nominal) per N·m of '
                           'push back beyond the push threshold, 1/(N·m)', range=(0.0, 100.0))
    push_threshold: float = setting(
        2.0, 'p_0: a push back along the path weaker than this only holds the arm (the middle '
        'of the hysteresis), N·m', range=(0.0, 1000.0))
    push_hysteresis: float = setting(
        1.0, 'h: yield starts above push threshold + half of this and ends below push '
        'threshold − half; a push that varies less than this does not move f_S, N·m',
        range=(0.0, 1000.0))
    push_filter_time: float = setting(
        0.05, 'time constant of the low-pass filter on the push along the path, s',
        range=(0.0, 10.0), timing=DURATION)
    yield_rate: float = setting(
        4.0, 'fastest change of f_S while it is <= 0 (into, along and out of a yield), 1/s',
        range=(1e-3, 1000.0))
    recovery_rate: float = setting(
        0.5, 'f_S returns from 0 to 1 at this rate once the contact is over, 1/s',
        range=(1e-3, 1000.0))
    resume_delay: float = setting(
        0.5, 'f_S stays 0 this long after the residuals fall back under threshold, s',
        range=(0.0, 60.0))
    min_speed: float = 1e-3       # rad/s: slower motion has no direction to remember


# The entries of a TimeScalingConfig in the kernel's `settings` (its fields' order).
(ALPHA, PUSH_THRESHOLD, PUSH_HYSTERESIS, PUSH_FILTER_TIME, YIELD_RATE, RECOVERY_RATE,
 RESUME_DELAY, MIN_SPEED) = range(8)
# The entries of TimeScaling's `memory`: f_S, P (filtered, N·m), P̃ (N·m), the time of the
# previous update (NaN before the first), the last time a contact or bad input held (s), and
# whether `direction` holds the path's direction yet (1.0) or not (0.0).
VALUE, PUSH_BACK, PLAYED_PUSH, LAST_TIME, LAST_HOLD, DIRECTION_KNOWN = range(6)
NO_VALUES = np.empty(0)  # τ_ext or q̇ unknown, as the kernel takes it


class TimeScaling:
    """f_S of seed 003 from the detected contact, τ_ext and q̇, updated sample by sample: the
    collision detector's reaction (core/chain/reaction.Reaction)."""

    CONFIG = TimeScalingConfig

    def __init__(self, config: TimeScalingConfig = TimeScalingConfig()):
        self.config = config
        self._memory = np.array([1.0, 0.0, 0.0, np.nan, -np.inf, 0.0])
        self._direction = NO_VALUES  # unit q̇ of the last forward motion, sized on first use
        # numba compiles (or loads from its cache) here, not on the first sample.
        _time_scaling_step(self._memory.copy(), np.zeros(1), np.zeros(1), np.zeros(1), 0.0,
                           False, self._settings)

    @property
    def config(self) -> TimeScalingConfig:
        return self._config

    @config.setter
    def config(self, config: TimeScalingConfig) -> None:
        """A new config (at run time too); the kernel reads it as `_settings`."""
        self._config = config
        self._settings = np.array(astuple(config), dtype=float)

    @property
    def value(self) -> float:
        """f_S after the latest update."""
        return float(self._memory[VALUE])

    @property
    def direction(self) -> np.ndarray | None:
        """Unit q̇ of the last forward motion (None until one was seen)."""
        return self._direction.copy() if self._memory[DIRECTION_KNOWN] else None

    @property
    def push_back(self) -> float:
        """P, the filtered push back along the path, N·m."""
        return float(self._memory[PUSH_BACK])

    @property
    def played_push(self) -> float:
        """P̃, the push back after the play, N·m."""
        return float(self._memory[PLAYED_PUSH])

    def push(self, tau_ext) -> float:
        """p = τ_extᵀ d, the external torque along the path (N·m; < 0 pushes back); 0 if unknown."""
        if not self._memory[DIRECTION_KNOWN] or tau_ext is None:
            return 0.0
        return _along(self._joint_values(tau_ext, 'τ_ext'), self._direction)

    def update(self, t: float, contact: bool, tau_ext=None, velocity=None) -> float:
        """f_S at time `t` (s). `contact`: a collision is detected at this sample.

        `tau_ext` None means the input is unusable (waiting, stale, invalid): hold at once,
        never yield. Pass `velocity` None while an external torque is suspected (some joint
        over threshold): the path direction must be learnt from free motion, not from a push.
        """
        tau_ext = self._joint_values(tau_ext, 'τ_ext')
        velocity = self._joint_values(velocity, 'q̇')  # both before `_direction`: it may grow
        return _time_scaling_step(self._memory, self._direction, tau_ext, velocity, float(t),
                                  bool(contact), self._settings)

    def react(self, t: float, state, tau_ext, velocity) -> float:
        """f_S after a core.chain.detector.DetectorState `state` for the sample (τ_ext, q̇).

        Holds on a detected contact (and, with touch classification, until its class is
        decided: core/chain/contact_class.py) and whenever the input is unusable; learns the
        path direction only while no joint is over threshold.
        """
        usable = None if state.input_problem else tau_ext
        return self.update(t, state.contact or state.deciding, usable,
                           None if state.over_threshold else velocity)

    def _joint_values(self, values, name: str) -> np.ndarray:
        """`values` (one per joint; None: unknown) as the kernel takes them. The joint count
        is that of the first values given (the direction's size); another is a ValueError,
        since the kernel does not check bounds."""
        if values is None:
            return NO_VALUES
        values = np.ascontiguousarray(values, dtype=float)
        if values.shape != self._direction.shape:
            if self._direction.size or values.ndim != 1:
                raise ValueError(f'{name} has {values.size} values, f_S follows '
                                 f'{self._direction.size} joints')
            self._direction = np.zeros(values.size)
        return values


@kernel
def _along(tau, direction):
    """τ_extᵀ d, summed joint by joint."""
    push = 0.0
    for i in range(tau.size):
        push += tau[i] * direction[i]
    return push


@kernel
def _time_scaling_step(memory, direction, tau, velocity, t, contact, settings):
    """f_S after one update at `t` (module docstring), on `memory` (VALUE … DIRECTION_KNOWN)
    and `direction`, with the config's `settings` (ALPHA … MIN_SPEED); `tau` and `velocity`
    of no element when unknown. Python's min and max where the steps are compared, so it
    gives what they gave, NaN included."""
    last = memory[LAST_TIME]
    dt = 0.0
    if last == last:  # not the first update
        dt = t - last
        dt = 0.0 if 0.0 > dt else dt
    memory[LAST_TIME] = t
    if tau.size == 0:  # unusable input: hold at once, never yield
        memory[LAST_HOLD], memory[VALUE] = t, 0.0
        return 0.0
    # P: −p low-pass filtered (exact first order for any step dt), then the play of width h.
    push = _along(tau, direction) if memory[DIRECTION_KNOWN] else 0.0
    filter_time = settings[PUSH_FILTER_TIME]
    gain = 1.0 - math.exp(-dt / filter_time) if filter_time > 0 else 1.0
    memory[PUSH_BACK] += gain * (-push - memory[PUSH_BACK])
    push_back, half = memory[PUSH_BACK], settings[PUSH_HYSTERESIS] / 2
    played = memory[PLAYED_PUSH]
    played = push_back - half if push_back - half > played else played
    memory[PLAYED_PUSH] = push_back + half if push_back + half < played else played
    if contact:
        memory[LAST_HOLD] = t
    holding = t - memory[LAST_HOLD] < settings[RESUME_DELAY] or memory[LAST_HOLD] == t
    if holding and push_back < -(settings[PUSH_THRESHOLD] + half):
        memory[VALUE] = 0.0  # pushed forward along the path: never move into it
    else:
        target = 1.0
        if holding:  # f*: 0, or the yield for the played push beyond the dead band
            beyond = memory[PLAYED_PUSH] - settings[PUSH_THRESHOLD]
            scaled = settings[ALPHA] * beyond
            target = -(scaled if scaled < 1.0 else 1.0) if beyond > 0 else 0.0
        memory[VALUE] = _approach(memory[VALUE], target, dt, settings)
    _remember_direction(memory, direction, velocity, settings[MIN_SPEED])
    return memory[VALUE]


@kernel
def _approach(value, target, dt, settings):
    """f_S one step of `dt` from `value` toward `target`: to 0 at once when a hold stops
    forward motion, at yield_rate within [−1, 0], at recovery_rate above 0."""
    if target < value and value > 0:
        value = 0.0  # seed 003: the arm holds at once
    if value < 0 or target < 0:  # here value ≤ 0, so the bounds are in order
        step = settings[YIELD_RATE] * dt
        low = value - step if value - step > target else target
        high = value + step
        high = 0.0 if 0.0 < high else high
        return high if high < low else low
    rising = value + settings[RECOVERY_RATE] * dt
    return rising if rising < target else target


@kernel
def _remember_direction(memory, direction, velocity, min_speed):
    """While tracking normally (f_S = 1), the unit q̇ is the direction of the path.

    Not while f_S recovers: the arm then still settles from the contact (joints pushed
    off the path move back to it), and that motion is not the path's.
    """
    if velocity.size == 0 or memory[VALUE] < 1.0:
        return
    speed = math.sqrt(_along(velocity, velocity))
    if math.isfinite(speed) and speed > min_speed:
        for i in range(velocity.size):
            direction[i] = velocity[i] / speed
        memory[DIRECTION_KNOWN] = 1.0


# f_S is worth sending when it moved by more than this: a 1 kHz stream of 1.0 costs CPU and
# tells a controller nothing (the node repeats the last value at its heartbeat rate).
PUBLISH_STEP = 1e-3


def worth_publishing(value: float, last_sent: float | None) -> bool:
    """Whether f_S = `value` must go out after `last_sent`: a move of more than PUBLISH_STEP,
    or landing exactly on 0 (hold) or 1 (track), so that the last value sent, which a
    controller keeps, is never just short of either."""
    if last_sent is None:
        return True
    return abs(value - last_sent) > PUBLISH_STEP or (value != last_sent and value in (0.0, 1.0))


def combined_scaling(time_scaling: float, speed_scale: float) -> float:
    """What a controller plays the trajectory at, given the detector's f_S (this module) and
    the proximity monitor's speed scale s in [0, 1] (core/contact/proximity.py): min(f_S, s) while
    f_S ≥ 0. While the arm yields (f_S < 0, back along its path, pushed by a person) it is
    f_S·s: the arm goes back no faster than s of its nominal speed and holds at s = 0, since
    the path it came along may be where the monitor now sees someone. Either way its size
    is at most s."""
    if time_scaling >= 0.0:
        return min(time_scaling, speed_scale)
    return time_scaling * speed_scale
