"""Trajectory time scaling as the reaction to a collision (seed 003 eqs. 8–11).

Seed 003 re-samples the reference trajectory in time instead of stopping it: the reference
time advances as t_i = t_{i-1} + f_S Δt (eq. 8) and the joint reference becomes
q_d(t_i) = q(t_{i-1} + f_S Δt) (eq. 9). f_S is 1 with no external torque (track normally),
0 on a collision (the arm holds where it is) and negative while a person pushes the arm back
(it yields backwards along its path), with a constant α setting the sensitivity; motion
resumes by itself when the contact ends (its Fig. 14). Eqs. 8–9 are the controller's part
(core/trajectory.TimeScaler plays the simulated cobot's reference that way); this module
computes f_S.

f_S follows the contact itself, not the latched stop signal of core/detector.py: the stop
stays raised until it is reset, while f_S lets the arm go on once the contact is over. The
piecewise definition of f_S (eqs. 10–11) is an image missing from the seed's text, so the law
here is ours, built to reproduce the behaviour the seed describes:
- hold, while a collision is detected (eq. 7 holds at this sample), for `resume_delay`
  seconds after the last such sample, and whenever the input is unusable (waiting, stale,
  invalid):                           f_S = 0,
  unless the external torque pushes against the direction of motion d (unit q̇ of the last
  forward motion): with p = τ_extᵀ d < −p_0,
                                      f_S = −min(1, α (|p| − p_0))
  (a dead band p_0 so that noise never moves the arm; continuous at |p| = p_0; never on
  unusable input);
- otherwise:                          f_S rises back to 1 at `recovery_rate` per second,
  starting from max(f_S, 0) so that the arm never keeps yielding once released.
Sign: τ_ext = J(p)ᵀF with F acting ON the robot (project convention), so a force against the
motion (Fᵀẋ < 0, ẋ = J q̇) gives τ_extᵀq̇ = Fᵀ J q̇ < 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TimeScalingConfig:
    alpha: float = 0.1            # 1/(N·m): yield speed (fraction of nominal) per N·m of push
    push_threshold: float = 2.0   # p_0, N·m: pushes weaker than this only hold the arm
    recovery_rate: float = 0.5    # 1/s: f_S from 0 back to 1 in 1/recovery_rate seconds
    resume_delay: float = 0.5     # s: still hold this long after the contact is over
    min_speed: float = 1e-3       # rad/s: slower motion has no direction to remember

    def __post_init__(self):
        for name in ('alpha', 'push_threshold', 'resume_delay', 'min_speed'):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise ValueError(f'time scaling {name} = {value}: must be finite and >= 0')
        if not np.isfinite(self.recovery_rate) or self.recovery_rate <= 0:
            raise ValueError(f'time scaling recovery_rate = {self.recovery_rate} 1/s: '
                             'must be > 0 (else motion never resumes)')


class TimeScaling:
    """f_S of seed 003 from the detected contact, τ_ext and q̇, updated sample by sample."""

    def __init__(self, config: TimeScalingConfig = TimeScalingConfig()):
        self.config = config
        self.value = 1.0
        self.direction: np.ndarray | None = None  # unit q̇ of the last forward motion
        self._t: float | None = None
        self._last_hold = -np.inf                  # last time a contact or bad input held

    def push(self, tau_ext) -> float:
        """p = τ_extᵀ d, the external torque along the path (N·m; < 0 pushes back); 0 if unknown."""
        if self.direction is None or tau_ext is None:
            return 0.0
        return float(np.dot(np.asarray(tau_ext, dtype=float), self.direction))

    def update(self, t: float, contact: bool, tau_ext=None, velocity=None) -> float:
        """f_S at time `t` (s). `contact`: a collision is detected at this sample.

        `tau_ext` None means the input is unusable (waiting, stale, invalid): hold, never
        yield. Pass `velocity` None while an external torque is suspected (some joint over
        threshold): the path direction must be learnt from free motion, not from a push.
        """
        dt = 0.0 if self._t is None else max(t - self._t, 0.0)
        self._t = t
        if contact or tau_ext is None:
            self._last_hold = t
        if t - self._last_hold < self.config.resume_delay or self._last_hold == t:
            beyond = -self.push(tau_ext) - self.config.push_threshold
            self.value = -min(1.0, self.config.alpha * beyond) if beyond > 0 else 0.0
        else:
            self.value = min(1.0, max(self.value, 0.0) + self.config.recovery_rate * dt)
        self._remember_direction(velocity)
        return self.value

    def react(self, t: float, state, tau_ext, velocity) -> float:
        """f_S after a core.detector.DetectorState `state` for the sample (τ_ext, q̇).

        Holds on a detected contact and whenever the input is unusable; learns the path
        direction only while no joint is over threshold.
        """
        usable = None if state.input_problem else tau_ext
        return self.update(t, state.contact, usable, None if state.over_threshold else velocity)

    def _remember_direction(self, velocity) -> None:
        """While tracking normally (f_S = 1), the unit q̇ is the direction of the path.

        Not while f_S recovers: the arm then still settles from the contact (joints pushed
        off the path move back to it), and that motion is not the path's.
        """
        if velocity is None or self.value < 1.0:
            return
        v = np.asarray(velocity, dtype=float)
        speed = float(np.linalg.norm(v))
        if np.isfinite(speed) and speed > self.config.min_speed:
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
