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
from dataclasses import dataclass

import numpy as np

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


class TimeScaling:
    """f_S of seed 003 from the detected contact, τ_ext and q̇, updated sample by sample: the
    collision detector's reaction (core/chain/reaction.Reaction)."""

    CONFIG = TimeScalingConfig

    def __init__(self, config: TimeScalingConfig = TimeScalingConfig()):
        self.config = config
        self.value = 1.0
        self.direction: np.ndarray | None = None  # unit q̇ of the last forward motion
        self.push_back = 0.0                       # P, filtered, N·m
        self.played_push = 0.0                     # P̃, N·m
        self._t: float | None = None
        self._last_hold = -np.inf                  # last time a contact or bad input held

    def push(self, tau_ext) -> float:
        """p = τ_extᵀ d, the external torque along the path (N·m; < 0 pushes back); 0 if unknown."""
        if self.direction is None or tau_ext is None:
            return 0.0
        return float(np.dot(np.asarray(tau_ext, dtype=float), self.direction))

    def update(self, t: float, contact: bool, tau_ext=None, velocity=None) -> float:
        """f_S at time `t` (s). `contact`: a collision is detected at this sample.

        `tau_ext` None means the input is unusable (waiting, stale, invalid): hold at once,
        never yield. Pass `velocity` None while an external torque is suspected (some joint
        over threshold): the path direction must be learnt from free motion, not from a push.
        """
        dt = 0.0 if self._t is None else max(t - self._t, 0.0)
        self._t = t
        if tau_ext is None:
            self._last_hold, self.value = t, 0.0
            return self.value
        self._follow_push(dt, -self.push(tau_ext))
        if contact:
            self._last_hold = t
        config = self.config
        holding = t - self._last_hold < config.resume_delay or self._last_hold == t
        if holding and self.push_back < -(config.push_threshold + config.push_hysteresis / 2):
            self.value = 0.0  # pushed forward along the path: never move into it
        else:
            self.value = self._approach(self._yield_target() if holding else 1.0, dt)
        self._remember_direction(velocity)
        return self.value

    def react(self, t: float, state, tau_ext, velocity) -> float:
        """f_S after a core.chain.detector.DetectorState `state` for the sample (τ_ext, q̇).

        Holds on a detected contact (and, with touch classification, until its class is
        decided: core/chain/contact_class.py) and whenever the input is unusable; learns the
        path direction only while no joint is over threshold.
        """
        usable = None if state.input_problem else tau_ext
        return self.update(t, state.contact or state.deciding, usable,
                           None if state.over_threshold else velocity)

    def _follow_push(self, dt: float, push_back: float) -> None:
        """Low-pass P (exact first order for any step dt), then the play of width h."""
        tau = self.config.push_filter_time
        gain = 1.0 - math.exp(-dt / tau) if tau > 0 else 1.0
        self.push_back += gain * (push_back - self.push_back)
        half = self.config.push_hysteresis / 2
        self.played_push = min(max(self.played_push, self.push_back - half),
                               self.push_back + half)

    def _yield_target(self) -> float:
        """f* while holding: 0, or the yield for the played push beyond the dead band."""
        beyond = self.played_push - self.config.push_threshold
        return -min(1.0, self.config.alpha * beyond) if beyond > 0 else 0.0

    def _approach(self, target: float, dt: float) -> float:
        """f_S one step of `dt` toward `target`: to 0 at once when a hold stops forward
        motion, at yield_rate within [−1, 0], at recovery_rate above 0."""
        value = self.value
        if target < value and value > 0:
            value = 0.0  # seed 003: the arm holds at once
        if value < 0 or target < 0:  # here value ≤ 0, so the bounds are in order
            step = self.config.yield_rate * dt
            return float(min(max(target, value - step), min(value + step, 0.0)))
        return min(target, value + self.config.recovery_rate * dt)

    def _remember_direction(self, velocity) -> None:
        """While tracking normally (f_S = 1), the unit q̇ is the direction of the path.

        Not while f_S recovers: the arm then still settles from the contact (joints pushed
        off the path move back to it), and that motion is not the path's.
        """
        if velocity is None or self.value < 1.0:
            return
        v = np.asarray(velocity, dtype=float)
        speed = math.sqrt(v.dot(v))  # np.linalg.norm's formula, without its overhead
        if math.isfinite(speed) and speed > self.config.min_speed:
            self.direction = v / speed


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
