"""Detector thresholds from a recording of free motion (no contact): ψ_i = ψ_0 + k_v|q̇| + k_a|q̈|.

Seed 001 eq. 7 takes fixed thresholds (4 / 8 N·m by joint role); its conclusion names dynamic
thresholds as future work. Here the residual of free motion, which is pure model error and
noise, gives them: for each joint the tightest envelope

    e(q̇, q̈) = b + k_v |q̇| + k_a |q̈|,   b, k_v, k_a ≥ 0,

that lies above every free-motion sample |τ_ext| and has the smallest mean over the motion (a
linear programme solved by cutting planes, so hours of data stay cheap), is multiplied by the
false-alarm margin m ≥ 1: ψ = m·e, so every recorded sample stays below ψ/m.

q̈ is estimated from the positions with the detector node's own differentiator
(`DerivativeEstimator`, same window), so the thresholds see the q̈ the node will see.

What the calibration promises: zero false alarms on the recording at ψ (checked with eq. 7's
n-consecutive rule), i.e. a false-alarm rate below 3 / T per hour at 95 % confidence for T
hours recorded (the "rule of three" for zero events in a Poisson process), valid for motions
like the recorded ones.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from contact_estimation.core.joint_state_conditioning import DerivativeEstimator

BINS = 24  # histogram bins per axis for the envelope LP


@dataclass(frozen=True)
class Calibration:
    """Proposed thresholds and what they promise; arrays have one entry per joint."""

    joint_names: tuple[str, ...]
    base: np.ndarray               # ψ_0, N·m
    speed_gain: np.ndarray         # k_v, N·m·s/rad
    acceleration_gain: np.ndarray  # k_a, N·m·s²/rad
    margin: float                  # ψ = margin × the free-motion envelope
    consecutive_samples: int       # n of eq. 7 used for the check
    acceleration_window: int       # samples of the q̈ fit (the node's acceleration_window)
    duration: float                # s of free motion used
    samples: int
    peak: np.ndarray               # largest free-motion |τ_ext|, N·m
    peak_ratio: np.ndarray         # largest |τ_ext| / ψ over the samples (≤ 1/margin)
    false_alarms: int              # eq. 7 alarms on the recording at ψ
    source: str = ''

    @property
    def false_alarm_bound_per_hour(self) -> float:
        """95 % upper bound of the false-alarm rate from the recording (rule of three)."""
        return (3.0 + self.false_alarms) / (self.duration / 3600.0)

    def thresholds(self, velocity, acceleration) -> np.ndarray:
        """ψ for samples of |q̇| and |q̈| (arrays … × n)."""
        return (self.base + self.speed_gain * np.abs(velocity)
                + self.acceleration_gain * np.abs(acceleration))

    def parameters(self, role: str = 'position') -> dict:
        """collision_detector parameters (floats rounded to 1e-3, rounded up: never tighter)."""
        def up(values):
            return [float(np.ceil(x * 1000.0) / 1000.0) for x in values]
        return {f'thresholds_{role}': up(self.base), 'speed_gain': up(self.speed_gain),
                'acceleration_gain': up(self.acceleration_gain),
                'consecutive_samples': int(self.consecutive_samples),
                'acceleration_window': int(self.acceleration_window)}

    def table(self) -> str:
        """One row per joint: thresholds, the free-motion peak and the headroom."""
        rows = [f'{"joint":16s} {"ψ_0 N·m":>9s} {"k_v N·m·s/rad":>14s} {"k_a N·m·s²/rad":>15s} '
                f'{"peak |τ_ext|":>13s} {"peak/ψ":>7s}']
        for i, name in enumerate(self.joint_names):
            rows.append(f'{name:16s} {self.base[i]:9.3f} {self.speed_gain[i]:14.3f} '
                        f'{self.acceleration_gain[i]:15.4f} {self.peak[i]:13.3f} '
                        f'{self.peak_ratio[i]:7.3f}')
        rows.append(f'{self.samples} samples, {self.duration:.1f} s of free motion; margin '
                    f'{self.margin:g} (every sample below ψ/{self.margin:g}); n = '
                    f'{self.consecutive_samples}; {self.false_alarms} false alarms on the '
                    f'recording → promise < {self.false_alarm_bound_per_hour:.1f} per hour '
                    '(95 %) for motions like these')
        return '\n'.join(rows)


def accelerations(t: np.ndarray, q: np.ndarray, window: int) -> np.ndarray:
    """q̈ at every sample from the positions, as the detector node estimates it."""
    estimator = DerivativeEstimator(window)
    return np.array([estimator.update(float(tk), qk)[1] for tk, qk in zip(t, q)])


def envelope(y: np.ndarray, speed: np.ndarray, acceleration: np.ndarray,
             use_speed: bool = True, use_acceleration: bool = True) -> np.ndarray:
    """(b, k_v, k_a) ≥ 0 of the smallest-mean envelope b + k_v|q̇| + k_a|q̈| ≥ y (one joint).

    Cutting planes keep the LP small: it starts from the largest y of each cell of a
    (|q̇|, |q̈|) histogram, then adds the samples the last solution left above, until none.
    """
    features = np.column_stack([np.ones_like(y),
                                np.abs(speed) if use_speed else np.zeros_like(y),
                                np.abs(acceleration) if use_acceleration else np.zeros_like(y)])
    cells = np.zeros(y.size, dtype=int)
    for column in features[:, 1:].T:
        if column.max() > 0:
            cells = cells * BINS + np.minimum((column / column.max() * BINS).astype(int), BINS - 1)
    order = np.lexsort((-y, cells))  # by cell, largest y first
    first = np.ones(y.size, dtype=bool)
    first[1:] = cells[order][1:] != cells[order][:-1]
    active = order[first]
    cost = features.mean(axis=0)
    bounds = [(0, None), (0, None if use_speed else 0), (0, None if use_acceleration else 0)]
    while True:
        result = linprog(cost, A_ub=-features[active], b_ub=-y[active], bounds=bounds,
                         method='highs')
        if not result.success:  # cannot happen: b = max y, k = 0 is always feasible
            raise RuntimeError(f'envelope LP failed: {result.message}')
        excess = y - features @ result.x
        above = np.flatnonzero(excess > 1e-9 * max(1.0, y.max()))
        if above.size == 0:
            return result.x
        active = np.union1d(active, above[np.argsort(-excess[above])[:1000]])


def count_alarms(over: np.ndarray, n: int) -> int:
    """Alarms of seed 001 eq. 7 in a boolean (samples × joints) 'over threshold' array: runs
    of ≥ n consecutive samples with some joint over, each counted once."""
    any_over = np.asarray(over).any(axis=1).astype(np.int8)
    edges = np.diff(np.concatenate([[0], any_over, [0]]))
    lengths = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    return int(np.sum(lengths >= n))


def calibrate(t, q, v, tau_ext, joint_names, margin: float = 1.5,
              min_threshold: float = 0.5, consecutive_samples: int = 25,
              acceleration_window: int = 20, use_speed: bool = True,
              use_acceleration: bool = True, source: str = '') -> Calibration:
    """Propose thresholds from free motion: t (N,), q, q̇, τ_ext (N × n).

    `min_threshold` (N·m) floors ψ_0 so that a joint the recording barely exercised does not
    get a threshold inside the noise of motions it did not see.
    """
    t = np.asarray(t, dtype=float)
    q, v, tau = (np.asarray(x, dtype=float) for x in (q, v, tau_ext))
    names = tuple(joint_names)
    if not (np.isfinite(margin) and margin >= 1.0):
        raise ValueError(f'margin = {margin}: must be >= 1 (ψ = margin × free-motion envelope)')
    if not (np.isfinite(min_threshold) and min_threshold > 0):
        raise ValueError(f'min_threshold = {min_threshold} N·m: must be > 0')
    if int(consecutive_samples) < 1:
        raise ValueError(f'consecutive_samples = {consecutive_samples}: must be >= 1')
    if q.shape != (t.size, len(names)) or v.shape != q.shape or tau.shape != q.shape:
        raise ValueError(f'expected {t.size} samples of {len(names)} joints for q, q̇ and '
                         f'τ_ext, got {q.shape}, {v.shape}, {tau.shape}')
    if t.size < 2 * acceleration_window or not np.all(np.diff(t) > 0):
        raise ValueError(f'need at least {2 * acceleration_window} samples with increasing '
                         f'times, got {t.size}')
    a = accelerations(t, q, acceleration_window)
    keep = np.isfinite(q).all(axis=1) & np.isfinite(v).all(axis=1) & np.isfinite(tau).all(axis=1)
    keep[:acceleration_window] = False  # the q̈ fit is still filling its window
    if keep.sum() < acceleration_window:
        raise ValueError('too few finite samples to calibrate on')
    y = np.abs(tau)
    coefficients = np.array([envelope(y[keep, i], v[keep, i], a[keep, i], use_speed,
                                      use_acceleration) for i in range(len(names))])
    base = np.maximum(margin * coefficients[:, 0], min_threshold)
    speed_gain, acceleration_gain = margin * coefficients[:, 1], margin * coefficients[:, 2]
    psi = base + speed_gain * np.abs(v[keep]) + acceleration_gain * np.abs(a[keep])
    return Calibration(
        joint_names=names, base=base, speed_gain=speed_gain, acceleration_gain=acceleration_gain,
        margin=float(margin), consecutive_samples=int(consecutive_samples),
        acceleration_window=int(acceleration_window),
        duration=float(t[keep][-1] - t[keep][0]), samples=int(keep.sum()),
        peak=y[keep].max(axis=0), peak_ratio=(y[keep] / psi).max(axis=0),
        false_alarms=count_alarms(y[keep] > psi, consecutive_samples), source=source)
