"""Collision detection from the external joint torque τ_ext (seed 001 eq. 7), fail-safe.

Seed 001 eq. 7: a collision is detected when some joint i has |τ_ext,i| > ψ_i for m ≥ n
consecutive samples; m counts the consecutive samples in which the condition "some joint is
over its threshold" holds (the equation's ∃i), so a contact whose torque moves from one joint
to the next while it builds up is not lost. The seed's thresholds depend on each joint's role
in a force/position hybrid task: 4 N·m on position-controlled joints, 8 N·m on
force-controlled ones (section 4.2), and it uses n = 25 ms at a 2 ms cycle.

Persistence in seconds, not samples (a 1 kHz pipeline and a 100 Hz driver with 4–10 ms steps
take the same parameters): each sample stands for the time since the previous one, Δt_k, on
the sample clock (the joint-state stamps), and the evidence E of the current run of samples
with some joint over ψ (the ∃i of eq. 7) grows by

    consecutive (seed 001):   E_k = E_{k−1} + Δt_k                  (the time over ψ)
    weighted:                 E_k = E_{k−1} + Δt_k · r_k²,  r_k = max_i |τ_ext,i| / ψ_i > 1

and restarts at 0 on a sample with every joint under ψ; a collision when E ≥ T
(`persistence_time`). `consecutive` is eq. 7 with n = T/Δt; `weighted` is the same rule for a
residual just over ψ (r → 1) and shortens it with the exceedance: a steady residual r ψ
strong needs T/r², so a hit 3 ψ strong stops in a ninth of the time while a residual just
over ψ still needs all of T. Why r²: E is then the energy of the residual over the run in
units of ψ²·s, and for Gaussian model error the log-likelihood that a sample is not noise
grows with |τ_ext|², so a sample twice as far out is (at least) four times the evidence
(the benchmark: r gains less than half of r²'s speed-up, r³ and r⁴ little more, all
without false alarms; the residual's own lag is then the floor). Why not a CUSUM
(S = max(0, S + Δt (r − ρ))): with ρ < 1 it fires on a residual that never exceeds ψ (ψ would
no longer be the threshold) and with ρ = 1 a residual just over ψ never fires, so it cannot
reduce to eq. 7; restarting under ψ keeps eq. 7's meaning. No sample counts for more than
T/2, so however large, a single sample (a glitch) is never a collision and a gap between
stamps is not taken for evidence; and the first sample (no Δt yet) counts for nothing.

Sample clock: a stamp not after the previous one is out of order: ignored and counted (it
does not refresh the input timeout either, so a stream of them ends in a stale stop); a stamp
more than `input_timeout` before the previous one is a restarted time base: taken, with the
run restarted.

Beyond the seed (its conclusion names "dynamic thresholds" as future work): the model error
grows with motion, so the threshold may grow with joint speed and acceleration, up to a cap
that keeps fast motion from making the detector blind:
    ψ_i = min(ψ_0,i + k_v,i |q̇_i| + k_a,i |q̈_i|,  ψ_max,i)      (`thresholds`, the one place).
The sign convention of τ_ext does not matter here (only |τ_ext| is used).

Stop is latched: once raised (collision, stale input or a gap between residuals, a non-finite
residual) it stays until `reset()` or, with `hold_time` > 0, until `hold_time` seconds after
the last unsafe sample (a process restarted after it died: until `reset()` only). Either way
it clears only once the residual has been quiet (no joint over ψ) for max(T,
`reset_quiet_time`) seconds of samples, so a contact that is still going on (a dip under ψ
for a sample or two) cannot be reset away. Clearing keeps eq. 7's evidence.
What makes the stop fail safe (a restart, a fault, no input yet, stale input, stamps gone
back, this node behind) is judged by the input gate, core/chain/input_gate.py, as the
proximity monitor's is; its table says which of those this detector latches.
Times are seconds on one clock chosen by the caller (the node uses a monotonic clock for the
receipt time, which runs the timeouts, and the joint-state stamps for the sample clock).

Touch (issues 29 and 37, `TouchConfig.enabled`; core/chain/contact_class.py): the sample
eq. 7 fires in a contact, the sample the stop latches on with touch off, is its hold
(`contact`, and `deciding` until its class is decided: f_S = 0 from that sample, seed 003),
and the class is decided within `touch.decision_time` of it. An impact (and anything the
classifier is unsure of) latches the stop on the sample it is decided on: the hold itself
when a rule fired before it; a touch latches none (f_S holds and yields). A touch that shows
a hit or grows beyond a limit becomes an impact and latches the stop on that sample. The
classifier estimates the contact force (core/chain/contact_force.py), so touch needs the
robot model (the constructor's `robot`) and the joint positions of each sample
(`update`'s `position`; without them a contact is an impact), and the tracked hands when
there are any (`set_hands`: a contact with no hand at its link is an impact). With touch off
no classifier runs and nothing differs.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from contact_estimation.core.compiled import kernel
from contact_estimation.core.chain.contact_class import (IMPACT, TOUCH, ContactClassifier,
                                                         ContactDecision, HandsSeen, TouchConfig)
from contact_estimation.core.chain.input_gate import GateConfig, InputGate
from contact_estimation.core.chain.lag import BAD_STAMP, BEHIND, LATE_INPUT, MAX_LAG
from contact_estimation.core.chain.derivatives import DerivativeEstimator
from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.restart import RESTARTED
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.settings import DURATION, TIMEOUT, checked, setting

POSITION, FORCE = 'position', 'force'
ROLES = (POSITION, FORCE)
CONSECUTIVE, WEIGHTED = 'consecutive', 'weighted'
PERSISTENCE_RULES = (CONSECUTIVE, WEIGHTED)
# Sums of sample periods are compared with T to this tolerance (s): 25 steps of 1 ms make
# 25 ms even in floating point, and no driver's period comes near it.
TIME_TOLERANCE = 1e-6

# Seed 001 section 4.2: thresholds by joint role, N·m.
SEED_POSITION_THRESHOLD = 4.0
SEED_FORCE_THRESHOLD = 8.0
# The range of a torque threshold ψ (N·m): above 0, as ψ = 0 would call every sample a
# contact; the ceiling a user may raise is threshold_ceiling, checked beside it.
TORQUE_THRESHOLDS = (0.01, 1e4)

@dataclass(frozen=True)
@checked
class DetectorSettings:
    """The detector's settings as a user gives them (one value for every joint or one per
    joint), at their defaults: declared once, here (core/settings.py); `DetectorConfig` is
    the same fields checked and made per joint for an arm."""

    thresholds_position: float | tuple = setting(
        SEED_POSITION_THRESHOLD, 'ψ_0 of position-controlled joints, N·m (seed 001: 4 N·m)',
        range=TORQUE_THRESHOLDS, per_joint=1)
    thresholds_force: float | tuple = setting(
        SEED_FORCE_THRESHOLD, 'ψ_0 of force-controlled joints, N·m (seed 001: 8 N·m)',
        range=TORQUE_THRESHOLDS, per_joint=1)
    roles: str | tuple = setting(POSITION, "each joint's role; switchable at run time",
                                 choices=ROLES, per_joint=1, name='joint_roles')
    # benchmarks/detection.py: weighted is 2–3× faster on hits ≥ 8 N·m, with no false alarm
    # in 10 min ('consecutive' is seed 001's)
    persistence: str = setting(
        WEIGHTED, "seed 001 eq. 7's persistence rule: 'consecutive' (some joint over ψ for "
        "persistence_time) or 'weighted' (each sample counts Δt·(|τ_ext|/ψ)²: a strong hit "
        'needs less time)', choices=PERSISTENCE_RULES)
    persistence_time: float = setting(
        0.025, 'T of seed 001 eq. 7 on the joint-state stamps: over threshold this long '
        "(weighted: this much evidence) makes a collision, s (seed 001's 25 ms window)",
        range=(0.001, 10.0), timing=DURATION)
    speed_gain: float | tuple = setting(
        0.0, 'k_v, N·m per rad/s: ψ grows by k_v |q̇|', range=(0.0, 1e4), per_joint=1)
    acceleration_gain: float | tuple = setting(
        0.0, 'k_a, N·m per rad/s²: ψ grows by k_a |q̈|', range=(0.0, 1e4), per_joint=1)
    threshold_max: float | tuple = setting(
        15.0, 'ψ_max, N·m: cap of ψ so that fast motion never hides a contact this strong '
        '(>= ψ_0)', range=TORQUE_THRESHOLDS, per_joint=1)
    # A value that switches detection off (1e308) is refused unless the user raises this.
    threshold_ceiling: float = setting(
        100.0, 'N·m: thresholds, threshold_max and the gains (their term at 1 rad/s, '
        '1 rad/s²) above this are refused, since they would switch detection off; raise it '
        'explicitly for a stronger arm', range=(1.0, 1e4))
    hold_time: float = setting(
        0.0, 'stop clears this long after the last unsafe sample, s; 0 = latched until the '
        '~/reset service', range=(0.0, 3600.0))
    reset_quiet_time: float = setting(
        0.05, 'the stop clears (reset or hold_time) only after every joint was under '
        'threshold this long and for persistence_time, s', range=(0.0, 60.0), timing=DURATION)
    input_timeout: float = setting(0.1, 'no residual for this long → stop, s',
                                   range=(0.001, 10.0), timing=TIMEOUT)


DEFAULTS = DetectorSettings()
# q̈ for the k_a |q̈| term (AccelerationEstimate): s of joint positions in the quadratic fit,
# collision_detector's `acceleration_filter.window_duration` (q̈ lags by about half of it).
ACCELERATION_WINDOW_DURATION = 0.02

# Why stop is raised (DetectorState.cause), and what is wrong with the input now
# (DetectorState.input_problem).
NONE, COLLISION, STALE, INVALID, WAITING = ('', 'collision', 'stale_input', 'invalid_residual',
                                            'waiting')
FAULT = 'node_fault'  # the node met an unexpected error (ros/guard.py): latched like a collision
# RESTARTED (core/restart.py): the process was started again after it died: latched until reset
# BEHIND (core/chain/lag.py): the node decided on a sample too late: latched; BAD_STAMP: the
# stamps went back (a restarted driver, a clock stepped back): latched


def joint_roles(roles, n_joints: int) -> tuple[str, ...]:
    """Roles (each one of ROLES: the setting's choices) as a tuple of one per joint (one role
    applies to all)."""
    roles = [roles] if isinstance(roles, str) else list(roles)
    if len(roles) == 1:
        roles = roles * n_joints
    if len(roles) != n_joints:
        raise ValueError(f'joint_roles: expected 1 or {n_joints} roles, got {len(roles)}')
    return tuple(roles)


def thresholds(base, speed_gain, acceleration_gain, threshold_max=np.inf, velocity=None,
               acceleration=None) -> np.ndarray:
    """ψ = min(ψ_0 + k_v|q̇| + k_a|q̈|, ψ_max), per joint; arrays broadcast (samples × joints).

    A missing q̇ or q̈ (None) adds nothing. A non-finite term gives ψ_max (never NaN: a NaN
    threshold would hide every contact).
    """
    psi = np.asarray(base, dtype=float)
    if velocity is not None:
        psi = psi + np.asarray(speed_gain) * np.abs(velocity)
    if acceleration is not None:
        psi = psi + np.asarray(acceleration_gain) * np.abs(acceleration)
    return np.fmin(psi, threshold_max)


def accumulate_evidence(evidence: float, dt: float, ratio: float, rule: str,
                        persistence_time: float) -> float:
    """E after one sample (module docstring): `ratio` = max_i |τ_ext,i| / ψ_i at the sample,
    `dt` (s) the time since the previous sample; 0 when no joint is over ψ."""
    return _evidence_after(evidence, dt, ratio, rule == WEIGHTED, persistence_time)


@kernel
def _evidence_after(evidence, dt, ratio, weighted, persistence_time):
    """`accumulate_evidence` compiled (`weighted`: the rule is WEIGHTED)."""
    if not ratio > 1.0:
        return 0.0
    weight = ratio * ratio if weighted else 1.0
    step = dt * weight
    return evidence + (0.5 * persistence_time if 0.5 * persistence_time < step else step)


# Rows of `DetectorConfig.limits`, the per-joint terms of ψ.
BASE, SPEED_GAIN, ACCELERATION_GAIN, CAP = range(4)
# Entries of the detector's run state (`CollisionDetector._runs`, written by `_eq7_sample`):
# E, the samples and the time (s) of the current run over ψ, the time of the current run
# with every joint under ψ (s).
EVIDENCE, OVER_SAMPLES, OVER_TIME, QUIET_TIME = range(4)
# A q̇ or q̈ not known (None), as the kernels take it: an array of no element.
MISSING = np.empty(0)


def vector(values, n: int, name: str) -> np.ndarray:
    """`values` (`name`, one per joint of `n`) as a kernel takes them: float64 in one
    contiguous row; None as MISSING. A kernel does not check bounds, so a wrong size is a
    ValueError here."""
    if values is None:
        return MISSING
    values = np.ascontiguousarray(values, dtype=float)
    if values.shape != (n,):
        raise ValueError(f'{name} has {values.size} values, the detector {n} joints')
    return values


@kernel
def _thresholds_into(thresholds, limits, velocity, acceleration):
    """The module function `thresholds` one joint at a time into `thresholds`, from the rows
    of `limits` (BASE … CAP); `velocity`, `acceleration` of no element when unknown."""
    for i in range(thresholds.size):
        psi = limits[BASE, i]
        if velocity.size:
            psi = psi + limits[SPEED_GAIN, i] * abs(velocity[i])
        if acceleration.size:
            psi = psi + limits[ACCELERATION_GAIN, i] * abs(acceleration[i])
        thresholds[i] = psi if psi <= limits[CAP, i] else limits[CAP, i]  # fmin: NaN → cap


@kernel
def _eq7_sample(tau, velocity, acceleration, limits, dt, weighted, persistence_time,
                thresholds, ratios, over, runs):
    """One sample of eq. 7 on preallocated arrays: ψ into `thresholds` (`_thresholds_into`),
    |τ_ext| / ψ into `ratios`, and their max, which it returns (NaN or inf exactly when some
    τ_ext is not finite: then it writes nothing more). For a finite max: `over` (ratios > 1)
    and the runs (`runs`, indexed by EVIDENCE … QUIET_TIME) after the sample, `dt` s after
    the previous one."""
    _thresholds_into(thresholds, limits, velocity, acceleration)
    ratio = -np.inf
    for i in range(tau.size):
        ratios[i] = abs(tau[i]) / thresholds[i]
        if ratios[i] > ratio or ratios[i] != ratios[i]:  # np.max: a NaN is the max
            ratio = ratios[i]
    if not math.isfinite(ratio):
        return ratio
    for i in range(tau.size):
        over[i] = ratios[i] > 1.0
    runs[EVIDENCE] = _evidence_after(runs[EVIDENCE], dt, ratio, weighted, persistence_time)
    if ratio > 1.0:
        runs[OVER_SAMPLES] += 1.0
        runs[OVER_TIME] += dt
        runs[QUIET_TIME] = 0.0
    else:
        runs[OVER_SAMPLES], runs[OVER_TIME] = 0.0, 0.0
        runs[QUIET_TIME] += dt
    return ratio


def is_collision(evidence: float, persistence_time: float) -> bool:
    """Eq. 7 holds: the evidence of the current run has reached T."""
    return evidence >= persistence_time - TIME_TOLERANCE


@dataclass(frozen=True)
class DetectorConfig(DetectorSettings):
    """DetectorSettings checked and made per joint for an arm of `joint_names`: the ones given
    per joint as arrays of one entry per joint (ψ_0 by role, k_v, k_a, ψ_max), `roles` as a
    tuple of one per joint. Build with `DetectorConfig.build`."""

    joint_names: tuple[str, ...] = ()

    @classmethod
    def build(cls, joint_names, **parameters) -> 'DetectorConfig':
        """DetectorSettings fields by name, missing ones at their defaults; scalars (or single
        values) apply to every joint. Raises ValueError naming the parameter on a bad value."""
        unknown = set(parameters) - {f.name for f in dataclasses.fields(DetectorSettings)}
        if unknown:
            raise TypeError(f'unknown detector parameters: {", ".join(sorted(unknown))}')
        p = dataclasses.asdict(DetectorSettings(**parameters))  # the one check of each bound
        names = tuple(joint_names)
        n = len(names)
        if n == 0:
            raise ValueError('the detector needs at least one joint')
        ceiling = p['threshold_ceiling']
        limit = {'high': ceiling, 'high_name': 'threshold_ceiling'}
        config = cls(
            joint_names=names,
            thresholds_position=per_joint('thresholds_position', p['thresholds_position'], n,
                                          unit=' N·m', **limit),
            thresholds_force=per_joint('thresholds_force', p['thresholds_force'], n,
                                       unit=' N·m', **limit),
            roles=joint_roles(p['roles'], n),
            persistence=p['persistence'], persistence_time=float(p['persistence_time']),
            speed_gain=per_joint('speed_gain', p['speed_gain'], n, unit=' N·m·s/rad', **limit),
            acceleration_gain=per_joint('acceleration_gain', p['acceleration_gain'], n,
                                        unit=' N·m·s²/rad', **limit),
            threshold_max=per_joint('threshold_max', p['threshold_max'], n, unit=' N·m',
                                    **limit),
            threshold_ceiling=float(ceiling),
            hold_time=float(p['hold_time']), reset_quiet_time=float(p['reset_quiet_time']),
            input_timeout=float(p['input_timeout']))
        base = config.base_thresholds
        for i in np.flatnonzero(config.threshold_max < base):
            raise ValueError(f'threshold_max[{i}] = {config.threshold_max[i]:g} N·m is below '
                             f'ψ_0 = {base[i]:g} N·m of {names[i]} ({config.roles[i]} role): '
                             'the cap must not be tighter than the base threshold')
        return config

    def replace(self, **changes) -> 'DetectorConfig':
        """A copy with some parameters changed, validated like `build`."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields.update(changes)
        return DetectorConfig.build(**fields)

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @cached_property
    def base_thresholds(self) -> np.ndarray:
        """ψ_0 of each joint for its current role (read-only: worked out once)."""
        force = np.array([r == FORCE for r in self.roles])
        base = np.where(force, self.thresholds_force, self.thresholds_position)
        base.flags.writeable = False
        return base

    @cached_property
    def limits(self) -> np.ndarray:
        """ψ_0, k_v, k_a and ψ_max of each joint as the rows BASE … CAP, for the kernels."""
        return np.array([self.base_thresholds, self.speed_gain, self.acceleration_gain,
                         self.threshold_max], dtype=float)

    def thresholds(self, velocity=None, acceleration=None) -> np.ndarray:
        """ψ of every joint at this q̇ and q̈ (module function `thresholds`), as the detector
        computes it (`_thresholds_into`)."""
        psi = np.empty(self.n)
        _thresholds_into(psi, self.limits, vector(velocity, self.n, 'q̇'),
                         vector(acceleration, self.n, 'q̈'))
        return psi


@dataclass(frozen=True)
class DetectorState:
    """The detector's output after a sample or a check."""

    stop: bool
    cause: str                        # why stop is raised now: COLLISION, STALE, INVALID, WAITING
                                      # or NONE
    reason: str                       # one line for people; '' when not stopped
    colliding_joints: tuple[int, ...]  # joints over ψ during the latched collision, until it clears
    residuals: np.ndarray             # last τ_ext, N·m
    thresholds: np.ndarray            # last ψ, N·m
    over_threshold: bool = False      # some joint is over ψ now (a collision or not yet)
    contact: bool = False             # eq. 7 holds at the latest sample: a collision is going on
    input_problem: str = NONE         # WAITING, STALE or INVALID while the input is unusable now
    ignored: str = ''                 # why this sample was ignored (out of order), else ''
    touch: bool = False               # eq. 7 holds on a contact classified as a touch (no stop)
    deciding: bool = False            # a contact held (eq. 7 fired), its class not yet decided
    decision: ContactDecision | None = None  # a contact's class decided at this sample


class CollisionDetector:
    """Seed 001 eq. 7 with role thresholds, speed-dependent thresholds, persistence in
    seconds (consecutive or weighted), latching, fail-safe."""

    def __init__(self, config: DetectorConfig, touch: TouchConfig = TouchConfig(),
                 robot: RobotModel | None = None, max_lag: float = MAX_LAG):
        self.config = config
        # What makes the stop fail safe, judged as the proximity monitor's are
        # (core/chain/input_gate.py); this detector latches what it says.
        self.gate = InputGate(GateConfig('residual', config.input_timeout, max_lag=max_lag))
        self.robot = robot  # the arm's model: touch classification estimates the force with it
        self.classifier: ContactClassifier | None = None
        self._hands: HandsSeen | None = None  # kept across configure_touch
        self.configure_touch(touch)
        self._decision: ContactDecision | None = None  # made at the sample being taken
        self.out_of_order = 0             # samples ignored for a stamp not after the last one
        # E of the current run over ψ (s), its samples and duration (Σ Δt, s), the duration
        # of the current run with no joint over ψ (s): indexed by EVIDENCE … QUIET_TIME.
        self._runs = np.zeros(4)
        self._last_stamp: float | None = None
        self._over = np.zeros(config.n, dtype=bool)
        self._over_any = False            # _over.any()
        self._ratios = np.zeros(config.n)  # |τ_ext| / ψ of the latest sample
        self._invalid = False             # the last sample was not finite
        # τ_ext and ψ of the latest finite sample: a new pair of arrays per sample, which the
        # states share (nothing writes them after).
        self._residuals = np.zeros(config.n)
        self._thresholds = config.base_thresholds
        # numba compiles (or loads from its cache) here, not on the first sample.
        _eq7_sample(self._residuals, MISSING, MISSING, config.limits, 0.0, True, 1.0,
                    np.empty(config.n), self._ratios, self._over, self._runs.copy())
        self._latched_cause = NONE
        self._latched_reason = ''
        self._last_unsafe = -np.inf
        self._colliding: tuple[int, ...] = ()

    # ------------------------------------------------------------ configuration
    def configure(self, config: DetectorConfig) -> None:
        """New parameters at run time; the latch and the sample counts are kept."""
        if config.n != self.config.n:
            raise ValueError(f'the detector has {self.config.n} joints, the new '
                             f'configuration {config.n}')
        self.config = config
        self.gate.config = dataclasses.replace(self.gate.config,
                                               input_timeout=config.input_timeout)

    def configure_touch(self, touch: TouchConfig) -> None:
        """Touch classification on (a fresh classifier) or off (none runs)."""
        if not touch.enabled:
            self.classifier = None
            return
        if self.robot is None:
            raise ValueError('touch.enabled needs the robot model (the contact force is '
                             'estimated from τ_ext with it)')
        if self.robot.n != self.config.n:
            raise ValueError(f'the robot model has {self.robot.n} joints, the detector '
                             f'{self.config.n}')
        self.classifier = ContactClassifier(touch, self.robot)
        self.classifier.hands = self._hands

    def set_hands(self, hands: HandsSeen) -> None:
        """Where the tracked person's hands were (the proximity monitor's): touch
        classification's hand rule (core/chain/contact_class.py)."""
        self._hands = hands
        if self.classifier is not None:
            self.classifier.hands = hands

    # ------------------------------------------------------------------ inputs
    def update(self, t: float, tau_ext, velocity=None, acceleration=None,
               stamp: float | None = None, position=None) -> DetectorState:
        """One residual sample received at time `t`, taken at `stamp` (the sample clock,
        default `t`): eq. 7 with ψ from the joint speed and acceleration; the joint
        positions (None: unknown) give touch classification its contact force.

        A gap longer than `input_timeout` since the previous sample latches a stale-input
        stop before the sample is taken, whether or not a watchdog ran during the gap.
        A non-finite τ_ext raises stop at once: it means the estimator upstream is broken,
        and dropping it would leave the arm unwatched while such samples keep arriving.
        A stamp not after the previous one is ignored and counted (`out_of_order`).
        """
        config = self.config
        tau = vector(tau_ext, config.n, 'τ_ext')
        velocity = vector(velocity, config.n, 'q̇')
        acceleration = vector(acceleration, config.n, 'q̈')
        stamp = float(t if stamp is None else stamp)
        dt = self._sample_step(stamp)
        if dt is None:
            self.out_of_order += 1
            return dataclasses.replace(self.state(t), ignored=(
                f'residual stamp {stamp:.6f} s not after the previous {self._last_stamp:.6f} s '
                f'(out of order): ignored'))
        gap = self.gate.arrived(t)
        if gap.cause:
            self._latch_stale(t, gap.reason)
            dt = 0.0
        thresholds = np.empty(config.n)  # finite and > 0
        ratio = _eq7_sample(tau, velocity, acceleration, config.limits, dt,
                            config.persistence == WEIGHTED, config.persistence_time,
                            thresholds, self._ratios, self._over, self._runs)
        self._invalid = not math.isfinite(ratio)  # exactly when some τ_ext is not finite
        if self._invalid:
            self._restart_runs()
            self._latch(t, INVALID, f'non-finite residual on {self._joint_list(~np.isfinite(tau))}')
            return self.state(t)
        self._residuals, self._thresholds = tau.copy(), thresholds
        self._over_any = ratio > 1.0
        classifier, self._decision = self.classifier, None
        if classifier is not None:
            self._decision = classifier.update(stamp, tau, self._ratios.copy(),
                                               velocity if velocity.size else None, position)
        if self._collides(stamp):
            # The joints of the latched collision: every joint over ψ while it lasts.
            # (An impact decided while no joint is over ψ: the joint nearest to it.)
            over = self._over if self._over_any else self._ratios == ratio
            self._colliding = tuple(sorted(set(self._colliding)
                                           | {int(i) for i in np.flatnonzero(over)}))
            if self._latched_cause != COLLISION:
                self._latch(t, COLLISION, self._collision_reason())
                if self._decision is not None:
                    self._latched_reason += f'; {self._decision.kind}: {self._decision.reason}'
        if self._over_any and self._latched_cause:
            self._last_unsafe = t  # hold_time counts from the last sample over threshold
        return self.state(t, self._decision)

    @property
    def invalid(self) -> bool:
        """The latest sample taken had a τ_ext that was not finite."""
        return self._invalid

    def set_input_stale(self, stale: bool) -> None:
        """The joint-state listener's watchdog: True while its input is stale.

        Until it has once reported fresh joint states, its True means the arm's driver has
        not started yet: stop, but as waiting (not latched), like before the first residual.
        """
        self.gate.upstream('joint states are stale (listener watchdog)' if stale else '')

    def fault(self, now: float, reason: str) -> None:
        """The node met an error it did not expect: stop, latched like a collision (cleared
        by `reset()` or `hold_time`), since what it decided meanwhile is unknown."""
        self.gate.fault(now, reason)
        self._restart_runs()
        self._latch(now, FAULT, reason)

    def restarted(self, now: float, reason: str) -> None:
        """This process was started again after it died (core/restart.py): stop, latched
        until `reset()` (never by `hold_time`: what the dead process had latched is unknown)."""
        self.gate.restarted(reason)
        self._latch(now, RESTARTED, reason)

    def set_lag(self, now: float, cause: str, reason: str) -> None:
        """How late the node's latest batch was (core/chain/lag.py: `cause` '' = in time, else
        why, `reason`): BEHIND, a stop latched like stale input, since every decision comes
        as late as the node is behind (no reset while behind); LATE_INPUT, stale input (its
        input paused); BAD_STAMP, latched. A collision keeps its own cause."""
        self.gate.sample_lag(cause, reason)
        if not cause or self._latched_cause == COLLISION:
            return
        if cause == LATE_INPUT:
            self._latch_stale(now, reason)
        else:
            self._latch(now, cause, reason)

    def stale(self, now: float) -> str:
        """Why the input is stale at `now` ('' when it is fresh)."""
        return self.gate.stale(now)

    def state(self, now: float, decision: ContactDecision | None = None) -> DetectorState:
        """Apply the fail-safe and the hold-time release at `now`; the resulting state (with
        `decision`, the class decided at the sample just taken).

        Before the first residual, and while the listener has not yet reported fresh joint
        states, the stop is raised but not latched (nothing has failed yet), with the cause
        of a latch from before (`restarted`, `fault`) if there is one; after that, stale
        input latches like a collision.
        """
        waiting = self.gate.waiting
        if waiting:
            return self._make_state(True, self._latched_cause or WAITING,
                                    self._latched_reason or waiting, WAITING)
        stale = self.stale(now)
        if stale:
            self._latch_stale(now, stale)
        elif (self._latched_cause not in (NONE, RESTARTED) and self.config.hold_time > 0
              and not self._invalid and not self.gate.judge(now).cause
              and now - self._last_unsafe >= self.config.hold_time and not self._not_quiet(now)):
            self._clear()
        problem = STALE if stale else INVALID if self._invalid else NONE
        return self._make_state(bool(self._latched_cause), self._latched_cause,
                                self._latched_reason, problem, decision)

    def reset(self, now: float) -> str:
        """Clear a latched stop; refused (a message saying why) while unsafe, '' when done.

        Unsafe: the input gate says why (core/chain/input_gate.py: a fault within its hold,
        no residual yet, stale input, behind), the last residual was not finite, or some joint
        has been over ψ within the last n samples or `reset_quiet_time` seconds (a contact
        may still be going on). A reset also releases the restart's latch.
        """
        refusal = self.gate.refusal(now)
        if refusal:
            return refusal
        if self._invalid:
            return 'cannot reset: the last residual was not finite'
        not_quiet = self._not_quiet(now)
        if not_quiet:
            return f'cannot reset: {not_quiet}'
        self.gate.reset()
        self._clear()
        return ''

    # ----------------------------------------------------------------- helpers
    def _collides(self, stamp: float) -> bool:
        """Whether this sample latches (or keeps latching) a collision. Touch off: eq. 7
        holds. Touch on: eq. 7's first sample in a contact is its hold (f_S = 0 from it,
        seed 003) and opens its decision window (core/chain/contact_class.py); an impact
        latches on the sample it is decided on, in the window or after a touch, whether or
        not eq. 7 holds then, and on every sample eq. 7 holds after it."""
        classifier = self.classifier
        if classifier is None:
            return self._contact()
        if self._contact() and classifier.awaiting_hold:
            self._decision = classifier.hold(stamp) or self._decision
        decided = self._decision is not None and self._decision.kind == IMPACT
        return decided or (self._contact() and classifier.kind == IMPACT)

    def _sample_step(self, stamp: float) -> float | None:
        """Δt of a sample stamped `stamp` (s), remembered as the last stamp; None when it is
        out of order. A step longer than `input_timeout` either way (a gap, a restarted time
        base) restarts the runs: what came between is unknown, Δt 0."""
        last = self._last_stamp
        if last is not None and last - self.config.input_timeout <= stamp <= last:
            return None
        self._last_stamp = stamp
        if last is not None and last < stamp <= last + self.config.input_timeout:
            return stamp - last
        self._restart_runs()
        return 0.0

    def _restart_runs(self) -> None:
        """Forget the current runs over and under ψ: what came between is unknown."""
        self._runs[:] = 0.0

    def _contact(self) -> bool:
        return is_collision(float(self._runs[EVIDENCE]), self.config.persistence_time)

    def _not_quiet(self, now: float) -> str:
        """Why the residual is not quiet enough to clear a stop ('' when it is)."""
        needed = max(self.config.persistence_time, self.config.reset_quiet_time)
        if self._over_any:
            return f'still over threshold on {self._joint_list(self._over)}'
        quiet_time = self._runs[QUIET_TIME]
        if quiet_time < needed - TIME_TOLERANCE:
            return (f'every joint must stay under threshold for {needed:g} s first (so far '
                    f'{quiet_time:.3f} s)')
        return ''

    def _latch(self, t: float, cause: str, reason: str) -> None:
        """Latch `cause`; a restart's latch keeps its name until reset but for a collision
        (stale or `behind` input while the new process starts says less)."""
        if self._latched_cause != RESTARTED or cause == COLLISION:
            self._latched_cause, self._latched_reason = cause, reason
        self._last_unsafe = t

    def _latch_stale(self, t: float, reason: str) -> None:
        """Stale input: what happened meanwhile is unknown, so quiet must be shown anew."""
        self._latch(t, STALE, reason)
        self._restart_runs()

    def _clear(self) -> None:
        """Release the latch. Eq. 7's evidence is kept: a contact still going on is still
        counted (clearing needs a quiet residual, so the evidence is 0 here anyway)."""
        self._latched_cause, self._latched_reason = NONE, ''
        self._colliding = ()

    def _joint_list(self, mask) -> str:
        return ', '.join(self.config.joint_names[i] for i in np.flatnonzero(mask))

    def _collision_reason(self) -> str:
        parts = [f'{self.config.joint_names[i]} |τ_ext| {abs(self._residuals[i]):.2f} > '
                 f'{self._thresholds[i]:.2f} N·m' for i in self._colliding]
        config = self.config
        return (f'collision: {"; ".join(parts)}, over for {int(self._runs[OVER_SAMPLES])} '
                f'samples in {self._runs[OVER_TIME] * 1e3:.1f} ms ({config.persistence} '
                f'persistence '
                f'{config.persistence_time * 1e3:g} ms, seed 001 eq. 7)')

    def _make_state(self, stop: bool, cause: str, reason: str, problem: str,
                    decision: ContactDecision | None = None) -> DetectorState:
        contact, classifier = self._contact(), self.classifier
        return DetectorState(stop=stop, cause=cause if stop else NONE,
                             reason=reason if stop else '', colliding_joints=self._colliding,
                             residuals=self._residuals, thresholds=self._thresholds,
                             over_threshold=self._over_any,
                             contact=contact,
                             input_problem=problem,
                             touch=contact and classifier is not None
                             and classifier.kind == TOUCH,
                             deciding=classifier is not None and classifier.deciding,
                             decision=decision)


class AccelerationEstimate:
    """q̈ for the k_a |q̈| term of ψ: a quadratic fit over the recent joint positions
    (DerivativeEstimator over the last `duration` seconds of the true stamps, lag ≈ half of
    it).

    None (ψ without the q̈ term: the more sensitive side) until the fit has a full window: at
    start, after a stamp that does not increase (the fit restarts from that sample, and
    `restarted` says why), and when the term is used again after a pause (`in_use` False:
    acceleration gain 0), since the samples before the pause are out of date.
    """

    def __init__(self, duration: float = ACCELERATION_WINDOW_DURATION):
        self._fit = DerivativeEstimator(duration)
        self._paused = False
        self.restarted: str | None = None  # why the latest update restarted the fit

    def update(self, t: float, q: np.ndarray, in_use: bool = True) -> np.ndarray | None:
        self.restarted = None
        if not in_use:
            self._paused = True
            return None
        if self._paused:
            self._paused = False
            self._fit.reset()
        try:
            acceleration = self._fit.update(t, q)[1]
        except ValueError as err:  # a stamp that does not increase
            self.restarted = str(err)
            self._fit.reset()
            acceleration = self._fit.update(t, q)[1]
        return acceleration if self._fit.ready else None


def event_stamped_by_residual(state: DetectorState) -> bool:
    """True when a stop change came from a residual (collision, invalid residual, decided on
    too late): its event carries that residual's joint-state stamp; the others (stale input,
    waiting, cleared) are stamped by the node's clock."""
    return state.cause in (COLLISION, INVALID, BEHIND, BAD_STAMP)
