"""Derivatives of a sampled signal on its true stamps, no ROS: `DerivativeEstimator`.

The one q̇/q̈ filter of the suite: the listener's velocity where the driver gives none
(core/chain/joint_state_conditioning.py), and q̈ for the rnea residual (core/chain/residual.py),
the detector's acceleration term (core/chain/detector.py) and the F/T compensation
(nodes/ft_contact_estimator.py), each with the window its parameter sets.
"""
from __future__ import annotations

import numpy as np


class DerivativeEstimator:
    """Velocity and acceleration of a sampled signal: a causal least-squares quadratic fit.

    Each `update(t, q)` fits q(τ) = c₀ + c₁τ + c₂τ² (τ = time before the newest sample) to the
    samples of its window, per joint, by least squares on their true timestamps, and returns
    q̇ = c₁ and q̈ = 2c₂ at the newest sample: a Savitzky–Golay differentiator generalised to
    uneven time steps. The window is the newest samples that span `duration` seconds (the
    last one at or before t − duration; at least 3, however slow the input): the same filter
    at any rate (0.02 s: 21 samples at 1 kHz, 3 at 100 Hz, 3–6 at 140 Hz with 4–10 ms steps).

    Why this filter rather than an alpha-beta-gamma (steady-state Kalman) filter: at 1 kHz, on
    a 0.5 rad sinusoid of 0.5–2 Hz with 1e-5 rad encoder noise, both reach the same error
    (0.02 s ≈ tracking index 0.01: velocity RMS error ≈ 2e-3 rad/s at 0.5 Hz), but the fit
    - is exact for motions up to constant acceleration, so velocity has no steady-state lag;
    - uses the real timestamps, so dropped or jittered messages cost nothing (a fixed-gain
      alpha-beta-gamma filter assumes a constant period);
    - has finite memory: a start-up transient or an outlier is gone after one window;
    - has one knob, the window, whose effect is plain: velocity noise falls as
      samples^-1.5, acceleration noise as samples^-2.5; the acceleration is the mean over the
      window, so it lags by half the window (≈ 10 ms for 0.02 s), velocity by none.
    Until the window has filled once (`ready`), the fit uses the samples it has, with a lower
    degree for fewer than 3 (one sample: zero velocity and acceleration).
    """

    DEGREE = 2
    MAX_SAMPLES = 2000  # in the window: 20 ms at 100 kHz, far above any driver

    def __init__(self, duration: float):
        if not (np.isfinite(duration) and duration > 0.0):
            raise ValueError(f'derivative window duration must be > 0 s, got {duration}')
        self.duration = float(duration)
        # Samples live in rows [start, end) of linear buffers at least twice the window's
        # size (grown when the input gets faster), moved to the front when the end is
        # reached (the fit reads one slice).
        self._t = np.zeros(8 * (self.DEGREE + 1))
        self._q: np.ndarray | None = None
        self.reset()

    def reset(self) -> None:
        """Forget every sample (after a gap, the old ones no longer describe the motion)."""
        self._start = self._end = 0
        self._ready = False

    @property
    def ready(self) -> bool:
        """True once the window has filled: estimates have their nominal noise and delay."""
        return self._ready

    def update(self, t: float, q) -> tuple[np.ndarray, np.ndarray]:
        """Add the sample q at time t (seconds, increasing); return (q̇, q̈) at t."""
        q = np.asarray(q, dtype=float)
        if self._q is None or self._q.shape[1] != q.size:
            self._q = np.zeros((self._t.size, q.size))
            self.reset()
        if self._end > self._start and t <= self._t[self._end - 1]:
            raise ValueError(f'sample times must increase: {t} after {self._t[self._end - 1]}')
        self._append(t, q)
        self._forget_old(t)
        used = self._end - self._start
        degree = min(self.DEGREE, used - 1)
        zero = np.zeros(q.size)
        if degree == 0:
            return zero, zero
        # Least squares by the normal equations: a (degree + 1)² system, well conditioned
        # with the time scaled to [-1, 0] and the values taken relative to the newest one.
        times = self._t[self._start:self._end]
        span = t - times[0]
        basis = np.ones((used, degree + 1))
        basis[:, 1] = (times - t) / span
        if degree == 2:
            np.square(basis[:, 1], out=basis[:, 2])
        transposed = basis.T
        coef = np.linalg.solve(transposed @ basis,
                               transposed @ (self._q[self._start:self._end] - q))
        velocity = coef[1] / span
        acceleration = 2.0 * coef[2] / span**2 if degree == 2 else zero
        return velocity, acceleration

    def _append(self, t: float, q: np.ndarray) -> None:
        if self._end == self._t.size:
            kept, count, size = slice(self._start, self._end), self._end - self._start, self._t.size
            if 2 * count > size:  # a faster input than so far: grow
                self._t = np.concatenate([self._t[kept], np.zeros(2 * size - count)])
                self._q = np.concatenate([self._q[kept], np.zeros((2 * size - count, q.size))])
            else:
                self._t[:count], self._q[:count] = self._t[kept], self._q[kept]
            self._start, self._end = 0, count
        self._t[self._end], self._q[self._end] = t, q
        self._end += 1

    def _forget_old(self, t: float) -> None:
        """Drop the samples the window no longer needs (keeping 3); note when it has filled.

        The window spans at least `duration`: it keeps the newest sample at or before
        t − duration. On a jittered stream (4–10 ms steps) the samples strictly inside a 20 ms
        window may span only 8 ms, and a quadratic fit's q̈ noise grows as 1/span²: up to 6×
        (benchmarks/real_arm.py: the rnea residual at 140 Hz ± 3 ms peaked at 17 N·m instead
        of 4). On a regular stream whose period divides `duration` nothing changes.
        """
        minimum = self.DEGREE + 1
        reach = t - self.duration * (1.0 - 1e-6)  # stamps a few ns off still count
        while self._end - self._start > minimum and self._t[self._start + 1] <= reach:
            self._start += 1
            self._ready = True
        # Bounded by count too: stamps 1 ns apart would otherwise all fit in the window.
        self._start = max(self._start, self._end - self.MAX_SAMPLES)
        self._ready = self._ready or (self._end - self._start >= minimum and
                                     self._t[self._start] <= reach)
