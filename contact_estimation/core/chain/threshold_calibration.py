"""Detector thresholds from a recording of free motion (no contact), with a tested promise.

Seed 001 eq. 7 takes fixed thresholds (4 / 8 N·m by joint role); its conclusion names dynamic
thresholds as future work. Here the residual of free motion, which is pure model error and
noise, gives them. The recording is split in time: the first part fits, the last part
(`holdout`, by default half) only checks.

Fit: for each joint an envelope

    e(q̇, q̈) = b + k_v |q̇| + k_a |q̈|,   b, k_v, k_a ≥ 0,

in two steps, each a statistic of many samples, so that the same motion recorded again (with
other samples lost, issue 35) gives the same ψ:
- shape: the `TAIL_QUANTILE` quantile regression of |τ_ext| on (1, |q̇|, |q̈|) with b, k_v,
  k_a ≥ 0 (the linear programme of Koenker and Bassett, solved in its dual form): every
  fitting sample pulls on it, so a few lost samples move it little. A speed or acceleration
  term must earn its place: the shape is used only when it lowers the mean envelope over the
  motion by `SHAPE_GAIN` against a constant one; else k_v = k_a = 0 (gains fitted to noise
  of a constant size would make ψ change from run to run and with the motion for nothing).
- level: e = λ·shape (noise whose size grows with the motion) or e = shape + δ, δ added to b
  (noise of a constant size), whichever has the smaller mean over the motion, with λ (or δ)
  the mean of the largest `TOP_SHARE` of the fitting samples' |τ_ext| / shape (or
  |τ_ext| − shape): the tail mean (expected shortfall), not the single largest sample.
The result is multiplied by the margin m ≥ 1: ψ = m·e (`MARGIN` by default). The samples in
that top share are those that set ψ (`Calibration.setting`, with their stamps and values).

Why a tail mean and not the largest sample. Seed 001 eq. 7 fires only when |τ_ext| stays over
ψ for its persistence time (25 ms: at least 2 samples at 100 Hz, even under the `weighted`
rule), so no single sample is what a threshold must clear, and the largest of a recording is
its least repeatable statistic: whether it was lost, and how large it came, swings from one
recording to the next (9.4 % on ψ_0, 14.8 % on the mean ψ, of 5 recordings of the same 40 s
with the largest-sample rule; docs/performance.md "Calibration run to run"), and it grows
with the recording's length. The mean of the top 1 % moves by a fraction of a % when a few
samples go. Its level is lower than the largest sample's, so the default margin is 2 (1.5 over
the largest sample before): on 20 s of fitting at 100 Hz, about the same thresholds (the mean ψ
0-10 % higher on the benchmark's UR5).
What a tail mean leaves above ψ/m is reported (`peak_ratio`, the largest fitting
|τ_ext| / ψ), and the held-out check below counts what eq. 7 would do with it.

Why not the tightest envelope over every sample (issue 28's diagnosis, docs/performance.md
"Real arm: false stops per hour"): at 100 Hz the residual of free motion is mostly noise
(the measured velocity's noise through the momentum observer's M(q)q̇, ~0.3 N·m on the UR5's
shoulder, independent of |q̇| and |q̈|), not model error. Fitted to the largest samples of a
minute of such noise, the tightest envelope tilts: it explains the few highest peaks, which
fell at speed, with k_v and k_a, and leaves a low b where the arm moved slowly, which longer
motion then crosses (1.54 ψ in 10 min after a 60 s calibration). A quantile regression is
estimated from every sample, so k_v and k_a only grow where the residual does. What is left
is the noise's tail: the peaks of 30 min exceed those of 30 s, which `Calibration.coverage`
says ("Tail").

Check: eq. 7 (the detector's persistence rule and time) runs on the held-out part, which the
fit has not seen, and counts k false alarms in its T hours. The promise is the exact one-sided
95 % upper
bound of a Poisson rate with k events in T: λ ≤ χ²_0.95(2k + 2) / (2T) per hour (3.00/T for
k = 0, 4.74/T for k = 1, …), valid for motions like the recorded ones. It takes
χ²_0.95(2)/2 ≈ 3.0 hours of alarm-free held-out motion to promise 1 false alarm per hour.

q̈ is estimated from the positions with the detector node's own differentiator
(`AccelerationEstimate`, same window in seconds), so the thresholds see the q̈ the node will
see; the samples before its window has filled are left out.

Samples that never set ψ (`screen`, issue 35: the same motion recorded three times gave ψ a
fourfold apart): what a loaded pipeline did to a sample is not the arm's free motion, and the
thresholds would change with every recording of the same motion. Left out, counted by reason
and reported (`Calibration.excluded`):
- a stamp not after every earlier one (a duplicate, or one that went backwards);
- after a hole in the stamps (a step longer than `HOLE_FACTOR` × the recording's median step:
  samples lost by the suite or by the recorder), the samples whose q̈ window reaches back
  across it (the fit restarts there: `acceleration_window` s);
- after a gap of at least the residual's `gap_threshold` (the momentum observer restarted,
  seed 001 eq. 6's r from 0, and follows τ_ext with time constant 1/K_O), its restart
  transient: `SETTLING_TIME_CONSTANTS` / K_O s (0.1 s at the default K_O = 50/s).
Every such time is in seconds, so the rule is the same from 100 Hz to 1 kHz. A sample the
suite merely handled late is the same sample (the residual follows the stamps, not the clock);
what a lag makes of the stream, lost samples and gaps, is left out as above.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.stats import chi2

from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.chain.detector import (ACCELERATION_WINDOW_DURATION, DEFAULTS,
                                              PERSISTENCE_RULES, AccelerationEstimate,
                                              accumulate_evidence, is_collision, thresholds)
from contact_estimation.core.chain.residual import ResidualConfig

TAIL_QUANTILE = 0.9  # of |τ_ext|: the quantile regression that gives the envelope's shape
SHAPE_GAIN = 0.1     # a shape with k_v or k_a must lower the mean envelope this much (share)
TOP_SHARE = 0.01     # the largest share of the fitting samples whose mean sets the level
MARGIN = 2.0         # ψ = MARGIN × the envelope (calibrate's default; module docstring)
TAIL_GROWTH = 1.1    # the held-out tail mean over the fitting one that `coverage` reports
BEYOND_SHARE = 0.01    # held-out samples beyond the fitted |q̇|, |q̈| that calibrate reports
CONFIDENCE = 0.95  # of the false-alarm promise
EFFORT_FRACTION = 0.33  # ψ_max = this share of a joint's URDF effort limit (calibrate's default)
AIM_PER_HOUR = 1.0  # the false-stop rate the promise aims at
# Samples that never set ψ (module docstring, `screen`).
HOLE_FACTOR = 1.5  # a stamp step longer than this × the median step: samples were lost
SETTLING_TIME_CONSTANTS = 5.0  # the observer's restart transient: e^-5 < 1 % of it is left
RESIDUAL = ResidualConfig()  # the residual node's defaults: gap_threshold, observer_gain
RESTART_GAP = RESIDUAL.gap_threshold  # s: a longer pause restarts the residual
RESTART_SETTLING = SETTLING_TIME_CONSTANTS / min(RESIDUAL.observer_gain)  # s

# Why a sample was left out (Calibration.excluded's keys).
OUT_OF_ORDER = 'stamp not after an earlier one (duplicate or backwards)'
AFTER_HOLE = 'q̈ window across lost samples'
AFTER_GAP = "within the residual's restart after a gap"
WINDOW_FILLING = 'q̈ window filling at the start'
NOT_FINITE = 'non-finite value'


@dataclass(frozen=True)
class Screening:
    """Which samples of a recording may set ψ (`screen`)."""

    ordered: np.ndarray   # indices of the samples whose stamp is after every earlier one
    holes: np.ndarray     # positions in `ordered` of the first sample after each hole
    gaps: np.ndarray      # those of them after a gap that restarts the residual
    settling: np.ndarray  # bool per ordered sample: within a restart's transient
    lost: int             # samples missing in the holes (step / median step − 1, summed)
    step: float           # median stamp step, s


def screen(t, restart_gap: float = RESTART_GAP,
           restart_settling: float = RESTART_SETTLING) -> Screening:
    """The samples (stamps `t`, in the order received) that are in order, where the stamps
    have holes, which of them restart the residual (a step ≥ `restart_gap` s) and which
    samples lie within `restart_settling` s after such a restart (module docstring)."""
    t = np.asarray(t, dtype=float)
    before = np.maximum.accumulate(np.concatenate([[-np.inf], t[:-1]]))
    ordered = np.flatnonzero(t > before)
    kept = t[ordered]
    steps = np.diff(kept)
    step = float(np.median(steps)) if steps.size else 0.0
    holes = np.flatnonzero(steps > HOLE_FACTOR * step) + 1
    gaps = holes[steps[holes - 1] >= restart_gap]
    settling = np.zeros(kept.size, dtype=bool)
    for k in gaps:
        settling[k:] |= kept[k:] - kept[k] < restart_settling
    lost = int(np.maximum(np.round(steps[holes - 1] / step) - 1, 1).sum()) if holes.size else 0
    return Screening(ordered, holes, gaps, settling, lost, step)


def caps_from_effort(effort_limits, fraction: float = EFFORT_FRACTION,
                     fallback: float = DEFAULTS.threshold_max,
                     ceiling: float = DEFAULTS.threshold_ceiling) -> np.ndarray:
    """ψ_max per joint: `fraction` of its effort limit (N·m), `fallback` where the URDF
    gives none (0 or not finite), at most `ceiling` (the detector refuses more)."""
    if not (np.isfinite(fraction) and 0.0 < fraction <= 1.0):
        raise ValueError(f'effort fraction = {fraction}: must be in (0, 1] (ψ_max = fraction × '
                         "the joint's effort limit)")
    limits = np.asarray(effort_limits, dtype=float)
    given = np.isfinite(limits) & (limits > 0)
    caps = np.where(given, fraction * np.where(given, limits, 0.0), fallback)
    return np.minimum(caps, ceiling)


def rate_upper_bound(alarms: int, hours: float) -> float:
    """Exact one-sided 95 % upper bound of a Poisson rate (per hour) with `alarms` in `hours`."""
    return chi2.ppf(CONFIDENCE, 2 * alarms + 2) / 2.0 / hours


def hours_needed(rate_per_hour: float, alarms: int = 0) -> float:
    """Held-out hours with `alarms` false alarms that promise at most `rate_per_hour`."""
    return rate_upper_bound(alarms, 1.0) / rate_per_hour


@dataclass(frozen=True)
class Calibration:
    """Proposed thresholds and what they promise; arrays have one entry per joint."""

    joint_names: tuple[str, ...]
    base: np.ndarray               # ψ_0, N·m
    speed_gain: np.ndarray         # k_v, N·m·s/rad
    acceleration_gain: np.ndarray  # k_a, N·m·s²/rad
    threshold_max: np.ndarray      # ψ_max, N·m (the cap the check used)
    margin: float                  # ψ = margin × the free-motion envelope
    persistence: str               # eq. 7's persistence rule used for the check
    persistence_time: float        # and its time T, s
    acceleration_window: float     # s of the q̈ fit (acceleration_filter.window_duration)
    holdout: float                 # share of the recording held out for the check
    fit_duration: float            # s of free motion the thresholds were fitted on
    heldout_duration: float        # s of free motion they were checked on
    peak: np.ndarray               # largest fitting |τ_ext|, N·m
    peak_ratio: np.ndarray         # largest fitting |τ_ext| / ψ
    heldout_peak_ratio: np.ndarray  # largest held-out |τ_ext| / ψ (≥ 1 somewhere: an alarm risk)
    # The mean of the largest TOP_SHARE of |τ_ext| / ψ, in the fitting and the held-out part.
    tail_ratio: np.ndarray
    heldout_tail_ratio: np.ndarray
    heldout_beyond: np.ndarray     # share of held-out samples faster (|q̇| or |q̈|) than any fitted
    false_alarms: int              # eq. 7 alarms on the held-out part at ψ
    # What did not set ψ (`screen`): samples left out by reason; holes in the stamps, the
    # gaps among them that restart the residual, and the samples missing in them.
    excluded: dict[str, int]
    holes: int
    gaps: int
    lost: int
    # Per joint, the fitting samples whose mean set ψ's level (the largest TOP_SHARE,
    # `envelope`), largest first: their stamps (s) and |τ_ext| (N·m); and how many fitted.
    setting_stamps: tuple[np.ndarray, ...]
    setting_values: tuple[np.ndarray, ...]
    fitted: int
    source: str = ''

    @property
    def false_alarm_bound_per_hour(self) -> float:
        """95 % upper bound of the false-alarm rate from the held-out check (exact Poisson)."""
        return rate_upper_bound(self.false_alarms, self.heldout_duration / 3600.0)

    def recording_needed(self, rate_per_hour: float = 1.0) -> float:
        """Seconds of recording (this holdout share) whose held-out part, if it raises no
        false alarm, promises at most `rate_per_hour`."""
        return hours_needed(rate_per_hour) * 3600.0 / self.holdout

    def parameters(self, role: str = 'position') -> dict:
        """collision_detector parameters (floats rounded to 1e-3, rounded up: never tighter)."""
        def up(values):
            return [float(np.ceil(x * 1000.0) / 1000.0) for x in values]
        return {f'thresholds_{role}': up(self.base), 'speed_gain': up(self.speed_gain),
                'acceleration_gain': up(self.acceleration_gain),
                'threshold_max': up(self.threshold_max),
                'persistence': self.persistence,
                'persistence_time': float(self.persistence_time),
                'acceleration_filter.window_duration': float(self.acceleration_window)}

    def coverage(self) -> str:
        """'' when the held-out part stayed within what the fit saw: its |q̇| and |q̈| (all
        but BEYOND_SHARE of its samples, per joint) and the mean of its largest TOP_SHARE of
        |τ_ext|/ψ (at most TAIL_GROWTH × the fitting part's); else where it did not, and what
        to record."""
        said = []
        beyond = np.flatnonzero(self.heldout_beyond > BEYOND_SHARE)
        if beyond.size:
            joints = ', '.join(f'{self.joint_names[i]} ({self.heldout_beyond[i]:.1%})'
                               for i in beyond)
            said.append(f'Coverage: NOT MET: the held-out part moved faster (|q̇| or |q̈|) '
                        f'than any fitting sample on {joints} of its samples; ψ there is '
                        'extrapolated.')
        higher = np.flatnonzero(self.heldout_tail_ratio > TAIL_GROWTH * self.tail_ratio)
        if higher.size:
            joints = ', '.join(f'{self.joint_names[i]} ({self.heldout_tail_ratio[i]:.2f} ψ '
                               f'against {self.tail_ratio[i]:.2f} ψ)' for i in higher)
            said.append(f'Tail: the largest {TOP_SHARE * 100:g} % of the held-out part came '
                        f'nearer ψ than those of the fitting part on {joints}: the residual\'s '
                        'peaks still grow with the length of the recording, and the margin is '
                        'being used up.')
        if said:
            said.append('Record the motions the arm will make, as fast as it will make them, '
                        'for longer (the fitting part then holds them), and calibrate again.')
        return ' '.join(said)

    def aim(self) -> str:
        """Whether the check shows at most AIM_PER_HOUR false stops per hour and, if the
        recording is too short to, how long a recording it takes; then `coverage`."""
        return ' '.join(filter(None, (self._aim(), self.coverage())))

    def _aim(self) -> str:
        rate, need = self.false_alarm_bound_per_hour, self.recording_needed(AIM_PER_HOUR)
        recorded = (self.fit_duration + self.heldout_duration) / 3600.0
        if self.false_alarms:
            return (f'Aim (at most {AIM_PER_HOUR:g} false stop per hour): NOT MET: the held-out '
                    f'part raised {self.false_alarms} false stop(s). Record the fast motions '
                    'the arm will make in the fitting part too (the speed and acceleration '
                    'terms then fit them), or raise --margin.')
        if rate <= AIM_PER_HOUR:
            return (f'Aim (at most {AIM_PER_HOUR:g} false stop per hour): met, {rate:.3g} per '
                    'hour at most (95 %).')
        return (f'Aim (at most {AIM_PER_HOUR:g} false stop per hour): this recording '
                f'({recorded:.2f} h) is too short to promise it, though its held-out part '
                f'raised no false stop: record about {need / 3600.0:.1f} h of free motion '
                f'({need / 3600.0 - recorded:.1f} h more; `calibrate --live --seconds '
                f'{need:.0f}`, or a bag that long) and calibrate on it.')

    def promise(self) -> str:
        """What the thresholds promise, in plain words."""
        rate = self.false_alarm_bound_per_hour
        need = self.recording_needed(1.0)
        return self.aim() + ' ' + (
            f'Promise: the thresholds were fitted on the first {self.fit_duration:.1f} s of '
            f'the recording and then run, with the {self._rule()}, '
            f'on the last {self.heldout_duration:.1f} s, which they had not seen: '
            f'{self.false_alarms} false alarm(s) there. So, for motions like the recorded '
            f'ones, we are 95 % sure that false alarms come at most {rate:.3g} times per '
            f'hour (exact Poisson bound for {self.false_alarms} alarm(s) in '
            f'{self.heldout_duration:.1f} s). The bound shrinks only with more held-out '
            f'time: to promise at most 1 false alarm per hour takes about '
            f'{need / 3600.0:.1f} h of free-motion recording (holdout {self.holdout:g}) whose '
            f'held-out part raises no false alarm.')

    def _rule(self) -> str:
        return f'{self.persistence} persistence of {self.persistence_time * 1e3:g} ms'

    def table(self) -> str:
        """One row per joint: thresholds, the free-motion peak and the headroom, the promise."""
        return self.thresholds_table() + '\n' + self.promise()

    def thresholds_table(self) -> str:
        """One row per joint (thresholds, the free-motion peak and the headroom, how many
        fitting samples set ψ and the stamp of the largest), then the fit and the held-out
        check in one line, then the samples that set ψ, and those that set none and why."""
        rows = [f'{"joint":16s} {"ψ_0 N·m":>9s} {"k_v N·m·s/rad":>14s} {"k_a N·m·s²/rad":>15s} '
                f'{"ψ_max N·m":>10s} {"peak |τ_ext|":>13s} {"peak/ψ":>7s} {"held-out peak/ψ":>16s} '
                f'{"held-out beyond fit":>20s}  {"set by":>8s} {"largest at s":>13s}']
        for i, name in enumerate(self.joint_names):
            rows.append(f'{name:16s} {self.base[i]:9.3f} {self.speed_gain[i]:14.3f} '
                        f'{self.acceleration_gain[i]:15.4f} {self.threshold_max[i]:10.3f} '
                        f'{self.peak[i]:13.3f} {self.peak_ratio[i]:7.3f} '
                        f'{self.heldout_peak_ratio[i]:16.3f} {self.heldout_beyond[i]:20.1%}  '
                        f'{self.setting_stamps[i].size:8d} {self.setting_stamps[i][0]:13.3f}')
        rows.append(f'fitted on {self.fit_duration:.1f} s ({self.fitted} samples): ψ = margin '
                    f'{self.margin:g} × the envelope through the mean of its largest '
                    f'{TOP_SHARE * 100:g} % of samples; checked on '
                    f'{self.heldout_duration:.1f} s held out: {self.false_alarms} false alarms '
                    f'({self._rule()}) → at most '
                    f'{self.false_alarm_bound_per_hour:.3g} per hour (95 %)')
        rows.append(self.setting())
        rows.append(self.exclusions())
        return '\n'.join(rows)

    def setting(self, shown: int = 5) -> str:
        """Per joint, the fitting samples that set ψ: how many, and the `shown` largest as
        stamp s (|τ_ext| N·m)."""
        rows = []
        for name, stamps, values in zip(self.joint_names, self.setting_stamps,
                                        self.setting_values):
            listed = ', '.join(f'{t:.3f} s ({y:.3f})' for t, y in zip(stamps[:shown],
                                                                      values[:shown]))
            more = f', … {stamps.size - shown} more' if stamps.size > shown else ''
            rows.append(f'  {name}: {listed}{more}')
        return (f'set ψ (the largest {TOP_SHARE * 100:g} % of {self.fitted} fitting samples, '
                'against the envelope\'s shape; stamp (|τ_ext| N·m)):\n' + '\n'.join(rows))

    def exclusions(self) -> str:
        """The samples that set no ψ, by reason, and the holes in the stamps."""
        reasons = ', '.join(f'{count} {reason}' for reason, count in self.excluded.items()
                            if count)
        return (f'excluded (set no ψ, not checked): {sum(self.excluded.values())} samples'
                f'{": " + reasons if reasons else ""}; the stamps had {self.holes} hole(s) '
                f'({self.lost} sample(s) missing), {self.gaps} of them gaps that restart the '
                'residual')


def accelerations(t: np.ndarray, q: np.ndarray,
                  duration: float = ACCELERATION_WINDOW_DURATION, restarts=()) -> np.ndarray:
    """q̈ at every sample from the positions, as the detector node estimates it over
    `duration` seconds; NaN until its window has filled, and again after each sample index in
    `restarts` (the fit starts over there: after a hole it would reach back across it)."""
    estimate, rows = AccelerationEstimate(duration), []
    starts = set(np.asarray(restarts, dtype=int).tolist())
    for k, (tk, qk) in enumerate(zip(t, q)):
        if k in starts:
            estimate = AccelerationEstimate(duration)
        acceleration = estimate.update(float(tk), qk)
        rows.append(np.full(q.shape[1], np.nan) if acceleration is None else acceleration)
    return np.array(rows)


def shape_of(y: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Coefficients ≥ 0 of the TAIL_QUANTILE quantile regression of y on the feature columns:
    the β ≥ 0 minimising Σ ρ_p(y − Xβ). Solved as its dual, max yᵀd subject to Xᵀd ≤ 0 and
    −(1 − p) ≤ d ≤ p, whose constraints' multipliers are β (fast at 1 kHz sizes)."""
    p = TAIL_QUANTILE
    result = linprog(-y, A_ub=features.T, b_ub=np.zeros(features.shape[1]),
                     bounds=(-(1.0 - p), p), method='highs')
    if not result.success:  # cannot happen: d = 0 is always feasible and d is bounded
        raise RuntimeError(f'quantile regression failed: {result.message}')
    return np.maximum(-result.ineqlin.marginals, 0.0)


def top_share(values: np.ndarray) -> np.ndarray:
    """Indices of the largest TOP_SHARE of `values` (at least one), largest first."""
    count = max(1, int(np.ceil(TOP_SHARE * values.size)))
    return np.argsort(values)[::-1][:count]


def tail_mean(values: np.ndarray) -> np.ndarray:
    """Per column (samples × joints), the mean of its largest TOP_SHARE."""
    return np.array([column[top_share(column)].mean() for column in values.T])


@dataclass(frozen=True)
class Envelope:
    """One joint's envelope b + k_v|q̇| + k_a|q̈| and the samples whose mean set its level."""

    coefficients: np.ndarray  # (b, k_v, k_a)
    setting: np.ndarray       # indices into the fitted samples, largest first


def envelope(y: np.ndarray, speed: np.ndarray, acceleration: np.ndarray,
             use_speed: bool = True, use_acceleration: bool = True) -> Envelope:
    """The envelope b + k_v|q̇| + k_a|q̈| of y = |τ_ext| (one joint; module docstring): the
    quantile regression's shape, raised to the mean of its largest TOP_SHARE of samples by
    scaling it or by shifting b, whichever has the smaller mean over the motion; a constant
    one (the mean of the largest TOP_SHARE of y) unless the shape lowers that mean by
    SHAPE_GAIN."""
    features = np.column_stack([np.ones_like(y),
                                np.abs(speed) if use_speed else np.zeros_like(y),
                                np.abs(acceleration) if use_acceleration else np.zeros_like(y)])
    mean = features.mean(axis=0)
    top = top_share(y)
    constant = Envelope(np.array([y[top].mean(), 0.0, 0.0]), top)
    shape = shape_of(y, features)
    if not shape[1:].any():
        return constant
    level = features @ shape
    excess = y - level
    top = top_share(excess)
    candidates = [Envelope(shape + [excess[top].mean(), 0.0, 0.0], top)]
    if (level > 0).all():  # else the shape is 0 somewhere: only a shift covers it
        ratio = y / level
        top = top_share(ratio)
        candidates.append(Envelope(shape * ratio[top].mean(), top))
    shaped = min(candidates, key=lambda candidate: mean @ candidate.coefficients)
    if mean @ shaped.coefficients <= (1.0 - SHAPE_GAIN) * (mean @ constant.coefficients):
        return shaped
    return constant


def count_alarms(t: np.ndarray, ratio: np.ndarray, persistence: str,
                 persistence_time: float) -> int:
    """Alarms of seed 001 eq. 7 with the detector's persistence rule: `ratio` (samples ×
    joints) = |τ_ext| / ψ at times `t`; each run over ψ that reaches T counts once."""
    largest = np.asarray(ratio).max(axis=1)
    steps = np.diff(t, prepend=t[0])
    evidence, alarms, firing = 0.0, 0, False
    for dt, r in zip(steps.tolist(), largest.tolist()):
        evidence = accumulate_evidence(evidence, dt, r, persistence, persistence_time)
        collision = is_collision(evidence, persistence_time)
        alarms += collision and not firing
        firing = collision
    return alarms


def calibrate(t, q, v, tau_ext, joint_names, margin: float = MARGIN,
              min_threshold: float = 0.5,
              persistence: str = DEFAULTS.persistence,
              persistence_time: float = DEFAULTS.persistence_time,
              acceleration_window: float = ACCELERATION_WINDOW_DURATION, holdout: float = 0.5,
              threshold_max=DEFAULTS.threshold_max, use_speed: bool = True,
              use_acceleration: bool = True, source: str = '',
              restart_gap: float = RESTART_GAP,
              restart_settling: float = RESTART_SETTLING) -> Calibration:
    """Propose thresholds from free motion: t (N,), q, q̇, τ_ext (N × n), in the order
    received; fit on the first 1 − `holdout` of the time, count false alarms on the rest.
    Samples out of order, within the q̈ window after a hole in the stamps or within
    `restart_settling` s after a gap of `restart_gap` s or more (the residual node's
    gap_threshold, and SETTLING_TIME_CONSTANTS / its K_O) neither set ψ nor count in the
    check (`screen`; the module docstring says why).

    ψ = `margin` × the envelope (`envelope`), whose level is set by the largest TOP_SHARE of
    the fitting samples: which ones, per joint, is in `Calibration.setting_stamps`.

    `min_threshold` (N·m) floors ψ_0 so that a joint the recording barely exercised does not
    get a threshold inside the noise of motions it did not see.
    """
    t = np.asarray(t, dtype=float)
    q, v, tau = (np.asarray(x, dtype=float) for x in (q, v, tau_ext))
    names = tuple(joint_names)
    n_joints = len(names)
    if not (np.isfinite(margin) and margin >= 1.0):
        raise ValueError(f'margin = {margin}: must be >= 1 (ψ = margin × free-motion envelope)')
    if not (np.isfinite(min_threshold) and min_threshold > 0):
        raise ValueError(f'min_threshold = {min_threshold} N·m: must be > 0')
    if persistence not in PERSISTENCE_RULES:
        raise ValueError(f'persistence = {persistence!r}: must be one of '
                         f'{", ".join(PERSISTENCE_RULES)}')
    if not (np.isfinite(persistence_time) and persistence_time > 0):
        raise ValueError(f'persistence_time = {persistence_time} s: must be > 0')
    if not 0.0 < holdout < 1.0:
        raise ValueError(f'holdout = {holdout}: the share of the recording held out for the '
                         'check must be between 0 and 1')
    cap = per_joint('threshold_max', threshold_max, n_joints, low=0.0, strict=True, unit=' N·m')
    if q.shape != (t.size, n_joints) or v.shape != q.shape or tau.shape != q.shape:
        raise ValueError(f'expected {t.size} samples of {n_joints} joints for q, q̇ and '
                         f'τ_ext, got {q.shape}, {v.shape}, {tau.shape}')
    if not (np.isfinite(acceleration_window) and acceleration_window > 0):
        raise ValueError(f'acceleration_window = {acceleration_window} s: must be > 0')
    if t.size < 2:
        raise ValueError(f'need samples with increasing times, got {t.size}')
    screening = screen(t, restart_gap, restart_settling)
    excluded = {OUT_OF_ORDER: t.size - screening.ordered.size}
    t, q, v, tau = (x[screening.ordered] for x in (t, q, v, tau))
    if t.size < 2:
        raise ValueError(f'need samples with increasing times, got {t.size}')
    # NaN while the q̈ fit fills its window: at the start and after every hole
    a = accelerations(t, q, acceleration_window, screening.holes)
    finite = np.isfinite(np.hstack([q, v, tau])).all(axis=1)
    filled = np.isfinite(a).all(axis=1)
    after_hole = np.zeros(t.size, dtype=bool)
    if screening.holes.size:
        after_hole[screening.holes[0]:] = True
    keep = finite & filled & ~screening.settling
    excluded[NOT_FINITE] = int((~finite).sum())
    excluded[WINDOW_FILLING] = int((finite & ~filled & ~after_hole).sum())
    excluded[AFTER_HOLE] = int((finite & ~filled & after_hole & ~screening.settling).sum())
    excluded[AFTER_GAP] = int((finite & screening.settling).sum())
    if not keep.any() or np.ptp(t[keep]) < 2 * acceleration_window:
        raise ValueError(f'too few finite samples to calibrate on: need more than '
                         f'{2 * acceleration_window:g} s after the {acceleration_window:g} s '
                         'q̈ window')
    start, end = t[keep][0], t[keep][-1]
    split = start + (1.0 - holdout) * (end - start)
    fit, held = keep & (t < split), keep & (t >= split)
    if fit.sum() < 3 or not held.any() or np.ptp(t[held]) < persistence_time:
        raise ValueError(f'recording too short to fit on {1 - holdout:g} of it and check on '
                         f'{holdout:g}: {fit.sum()} and {held.sum()} samples')
    y = np.abs(tau)
    envelopes = [envelope(y[fit, i], v[fit, i], a[fit, i], use_speed, use_acceleration)
                 for i in range(n_joints)]
    coefficients = margin * np.array([e.coefficients for e in envelopes])
    base = np.maximum(coefficients[:, 0], min_threshold)
    speed_gain, acceleration_gain = coefficients[:, 1], coefficients[:, 2]
    needed = thresholds(base, speed_gain, acceleration_gain, np.inf, v[fit], a[fit]).max(axis=0)
    for i in np.flatnonzero(needed > cap):
        raise ValueError(f'{names[i]}: the recorded free motion needs ψ up to {needed[i]:.2f} '
                         f'N·m (margin {margin:g}), above threshold_max = {cap[i]:g} N·m: '
                         'raise it (calibrate --effort-fraction, or --threshold-max) or record '
                         '(and run) slower motion')
    psi_fit = thresholds(base, speed_gain, acceleration_gain, cap, v[fit], a[fit])
    psi_held = thresholds(base, speed_gain, acceleration_gain, cap, v[held], a[held])
    fastest = np.abs(v[fit]).max(axis=0), np.abs(a[fit]).max(axis=0)
    fitting = np.flatnonzero(fit)
    setting = [fitting[e.setting] for e in envelopes]
    beyond = (np.abs(v[held]) > fastest[0]) | (np.abs(a[held]) > fastest[1])
    return Calibration(
        joint_names=names, base=base, speed_gain=speed_gain, acceleration_gain=acceleration_gain,
        threshold_max=cap, margin=float(margin), persistence=persistence,
        persistence_time=float(persistence_time),
        acceleration_window=float(acceleration_window), holdout=float(holdout),
        fit_duration=float(t[fit][-1] - t[fit][0]),
        heldout_duration=float(t[held][-1] - t[held][0]),
        peak=y[fit].max(axis=0), peak_ratio=(y[fit] / psi_fit).max(axis=0),
        heldout_peak_ratio=(y[held] / psi_held).max(axis=0), heldout_beyond=beyond.mean(axis=0),
        tail_ratio=tail_mean(y[fit] / psi_fit), heldout_tail_ratio=tail_mean(y[held] / psi_held),
        false_alarms=count_alarms(t[held], y[held] / psi_held, persistence, persistence_time),
        source=source, excluded=excluded, holes=int(screening.holes.size),
        gaps=int(screening.gaps.size), lost=screening.lost,
        setting_stamps=tuple(t[k] for k in setting),
        setting_values=tuple(y[k, i] for i, k in enumerate(setting)), fitted=int(fit.sum()))
