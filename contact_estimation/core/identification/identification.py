"""Gravity and friction identification from back-and-forth constant-speed sweeps (seed 001 §2).

1. `find_passes`: the constant-speed parts of a recording, where one joint moves at a steady
   speed and the others hold still (seed 001: "截取关节匀速部分").
2. `match_passes`: a forward and the following backward pass of the same joint, at the same
   speed and configuration of the other joints, are compared at the same positions (binned
   along the moving joint): gravity is equal and friction opposite, so
   τ_G = (τ⁺ + τ⁻)/2 and τ_f = (τ⁺ − τ⁻)/2 (seed 001 eqs. 10–15).
   Only the moving joint's own torque is used: at constant q̇_i its Coriolis/centrifugal term
   Γ_iii q̇_i² = ½ ∂M_ii/∂q_i q̇_i² is zero (M_ii does not depend on q_i), while on the held
   joints the centrifugal torque ∝ q̇_i² has the same sign on both passes and would not
   cancel in τ_G.
3. `gravity_basis` + `fit_gravity`: G(q) = H_G(q) π_G over the base parameters of the gravity
   regressor (seed 001 eqs. 16–22 for any serial arm): pinocchio's joint-torque regressor at
   q̇ = q̈ = 0, mass and first-moment columns, reduced by a rank-revealing QR; π_G = H⁺ τ_G.
4. `fit_friction`: each friction model of core/chain/friction.py per joint by bounded nonlinear
   least squares from several starts (`starting_points`); ε = residual sum of squares
   (seed 001 Table 3). A model is fitted only to a joint swept at no fewer distinct speeds
   than it has parameters (`distinct_speeds`); otherwise it is flagged, not fitted.
5. `check_gravity_plausible`: the identified G(q) must stay near the one of the robot
   description's own parameters; far from it, the recording is of another robot (or the
   description lacks a payload), and no model is written.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
from scipy.linalg import qr
from scipy.optimize import least_squares

from contact_estimation.core.chain import friction as friction_models
from contact_estimation.core.identification.identified_model import (
    GRAVITY_PARAMETERS,
    GravityBasis,
    IdentifiedModel,
    robot_structure,
)
from contact_estimation.core.identification.recording import JointRecording
from contact_estimation.core.robot.robot_model import RobotModel


class IdentificationError(ValueError):
    """The recording cannot give a model: too little data, a joint not moved, bad samples…"""


# --------------------------------------------------------------------------- gravity basis
def gravity_basis(robot: RobotModel, samples: int = 200, seed: int = 0,
                  tolerance: float = 1e-9) -> GravityBasis:
    """Base parameters of the gravity regressor from `samples` random configurations.

    The columns (m, m·c_x, m·c_y, m·c_z of every body) are stacked over the configurations
    and reduced by `base_parameters`.
    """
    labels = [f'{link}/{p}' for link in robot.joint_links for p in GRAVITY_PARAMETERS]
    everything = GravityBasis(labels, [], np.zeros((len(labels), 0)))
    rng = np.random.default_rng(seed)
    stacked = np.vstack([everything.regressor(robot, q)
                         for q in robot.random_configuration(rng, samples)])
    basis = base_parameters(labels, stacked, tolerance)
    if not basis.independent:
        raise IdentificationError(f'robot {robot.name!r} has no gravity torque on any joint')
    return basis


def base_parameters(labels: list[str], stacked: np.ndarray,
                    tolerance: float = 1e-9) -> GravityBasis:
    """The base parameters of a regressor whose columns are `labels`, from its rows `stacked`
    over many samples: a QR with column pivoting, Y P = Q [R₁₁ R₁₂], keeps the r columns
    with |R_kk| above `tolerance`·|R_00| and expresses the others as Y_dep = Y_ind K with
    K = R₁₁⁻¹ R₁₂, so Y π = Y_ind (π_ind + K π_dep) (`GravityBasis`)."""
    _, r, order = qr(stacked, mode='economic', pivoting=True)
    diagonal = np.abs(np.diag(r))
    rank = int(np.sum(diagonal > tolerance * diagonal[0])) if diagonal[0] > 0 else 0
    combination = np.linalg.solve(r[:rank, :rank], r[:rank, rank:])
    combination[np.abs(combination) < 1e-10] = 0.0
    return GravityBasis([labels[k] for k in order[:rank]], [labels[k] for k in order[rank:]],
                        combination)


# ------------------------------------------------------------------------------ passes
@dataclass(frozen=True)
class PassDetection:
    """How constant-speed passes are recognised in a recording."""

    min_speed: float = 0.004        # rad/s: a joint slower than this is not sweeping
    still_speed: float = 0.005      # rad/s: the other joints stay below this
    speed_tolerance: float = 0.05   # plateau: |q̇ − plateau speed| ≤ this share of it …
    speed_floor: float = 0.003      # … plus this (rad/s), for velocity noise at low speeds
    smoothing: float = 0.02         # s, moving-average window on q̇ before the tests
    settle: float = 0.25            # s dropped after the speed is reached (tracking transient)
    min_duration: float = 0.3       # s of constant speed for a pass to count
    bins: int = 25                  # matched positions per forward/backward pair
    configuration_tolerance: float = 0.02  # rad: the held joints in the same place on both passes


@dataclass(frozen=True)
class Pass:
    joint: int
    speed: float   # signed plateau speed, rad/s
    start: int     # sample indices [start, end)
    end: int


@dataclass
class MatchedData:
    """τ_G and τ_f at matched positions (seed 001 eqs. 14–15), one row per position bin."""

    joint: np.ndarray     # (M,) the moving joint
    pair: np.ndarray      # (M,) index of the forward/backward pair
    q: np.ndarray         # (M, n) configuration
    speed: np.ndarray     # (M,) |q̇| of the moving joint, rad/s
    tau_g: np.ndarray     # (M,) (τ⁺ + τ⁻)/2 of the moving joint
    tau_f: np.ndarray     # (M,) (τ⁺ − τ⁻)/2 of the moving joint

    def of_joint(self, i: int) -> 'MatchedData':
        k = self.joint == i
        return MatchedData(self.joint[k], self.pair[k], self.q[k], self.speed[k],
                           self.tau_g[k], self.tau_f[k])


def check_recording(recording: JointRecording, robot: RobotModel, min_samples: int = 200,
                    saturation: float = 0.99) -> None:
    """Refuse recordings that would give a wrong model: IdentificationError naming the problem."""
    n_samples = len(recording.t)
    if n_samples < min_samples:
        raise IdentificationError(f'{recording.source}: only {n_samples} samples; identification '
                                  f'needs at least {min_samples} (record the whole sweep plan)')
    for name, values in (('time', recording.t[:, None]), ('position', recording.q),
                         ('velocity', recording.v), ('effort', recording.effort)):
        bad = ~np.isfinite(values)
        if bad.any():
            joints = [robot.joint_names[j] for j in np.flatnonzero(bad.any(axis=0))] \
                if values.shape[1] == robot.n else ['t']
            raise IdentificationError(f'{recording.source}: {int(bad.any(axis=1).sum())} samples '
                                      f'have NaN or infinite {name} (joints {joints})')
    if np.any(np.diff(recording.t) <= 0):
        raise IdentificationError(f'{recording.source}: sample times do not increase')
    limits = robot.effort_limits
    capped = (limits > 0) & np.isfinite(limits)
    saturated = capped & np.any(np.abs(recording.effort) >= saturation * limits, axis=0)
    if saturated.any():
        names = [robot.joint_names[j] for j in np.flatnonzero(saturated)]
        raise IdentificationError(f'{recording.source}: efforts of joints {names} reach their '
                                  f'limits (saturated samples cannot be used): slow down or '
                                  f'check the recording is of robot {robot.name!r}')
    lower, upper = robot.position_limits
    outside = np.any((recording.q < lower - 0.05) | (recording.q > upper + 0.05), axis=0)
    if outside.any():
        names = [robot.joint_names[j] for j in np.flatnonzero(outside)]
        raise IdentificationError(f'{recording.source}: positions of joints {names} leave the '
                                  f'limits of robot {robot.name!r}: a recording of another robot?')


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1:
        return values
    kernel = np.ones(window) / window
    padded = np.pad(values, ((window // 2, window - 1 - window // 2), (0, 0)), mode='edge')
    return np.column_stack([np.convolve(padded[:, j], kernel, mode='valid')
                            for j in range(values.shape[1])])


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


def find_passes(recording: JointRecording,
                detection: PassDetection = PassDetection()) -> list[Pass]:
    """Stretches where exactly one joint moves at a constant speed and the others hold still."""
    dt = float(np.median(np.diff(recording.t)))
    v = _moving_average(recording.v, max(1, int(round(detection.smoothing / dt))))
    speed = np.abs(v)
    n = v.shape[1]
    passes = []
    for i in range(n):
        others = np.delete(speed, i, axis=1)
        alone = ((speed[:, i] >= detection.min_speed)
                 & np.all(others < detection.still_speed, axis=1))
        for sign in (1.0, -1.0):
            for start, end in _runs(alone & (np.sign(v[:, i]) == sign)):
                plateau = float(np.median(v[start:end, i]))
                steady = (np.abs(v[start:end, i] - plateau)
                          <= detection.speed_tolerance * abs(plateau) + detection.speed_floor)
                runs = _runs(steady)
                if not runs:
                    continue
                a, b = max(runs, key=lambda r: r[1] - r[0])
                t = recording.t[start + a:start + b]
                # The controller's transient after the ramp carries inertial torque M q̈.
                keep = np.flatnonzero((t >= t[0] + detection.settle)
                                      & (t <= t[-1] - detection.smoothing))
                if keep.size and t[keep[-1]] - t[keep[0]] >= detection.min_duration:
                    passes.append(Pass(i, plateau, start + a + keep[0], start + a + keep[-1] + 1))
    return sorted(passes, key=lambda p: p.start)


def match_passes(recording: JointRecording, passes: list[Pass],
                 detection: PassDetection = PassDetection()) -> MatchedData:
    """Pair each pass with the next one of the same joint going back, and take τ_G, τ_f at
    matched positions (bin means along the moving joint, seed 001 eqs. 12–15)."""
    rows = []
    used = set()
    for k, first in enumerate(passes):
        if k in used:
            continue
        for m in range(k + 1, len(passes)):
            second = passes[m]
            if second.joint != first.joint or m in used:
                continue
            if _same_sweep(recording, first, second, detection):
                used.update((k, m))
                rows += _matched_bins(recording, first, second, len(used) // 2 - 1, detection)
            break
    if not rows:
        return MatchedData(np.zeros(0, int), np.zeros(0, int), np.zeros((0, recording.q.shape[1])),
                           np.zeros(0), np.zeros(0), np.zeros(0))
    joint, pair, q, speed, tau_g, tau_f = zip(*rows)
    return MatchedData(np.array(joint), np.array(pair), np.array(q), np.array(speed),
                       np.array(tau_g), np.array(tau_f))


def _same_sweep(recording, first: Pass, second: Pass, detection: PassDetection) -> bool:
    """Opposite directions, the same speed, the held joints in the same place."""
    if np.sign(first.speed) == np.sign(second.speed):
        return False
    if abs(abs(first.speed) - abs(second.speed)) > 0.1 * max(abs(first.speed), abs(second.speed)):
        return False
    held = [j for j in range(recording.q.shape[1]) if j != first.joint]
    a = recording.q[first.start:first.end, held].mean(axis=0)
    b = recording.q[second.start:second.end, held].mean(axis=0)
    return bool(np.all(np.abs(a - b) <= detection.configuration_tolerance))


def _matched_bins(recording, first: Pass, second: Pass, pair: int, detection: PassDetection):
    i = first.joint
    forward, backward = (first, second) if first.speed > 0 else (second, first)
    q_fwd = recording.q[forward.start:forward.end, i]
    q_bwd = recording.q[backward.start:backward.end, i]
    low, high = max(q_fwd.min(), q_bwd.min()), min(q_fwd.max(), q_bwd.max())
    if high <= low:
        return []
    edges = np.linspace(low, high, detection.bins + 1)
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        means = []
        for p, positions in ((forward, q_fwd), (backward, q_bwd)):
            inside = np.flatnonzero((positions >= lo) & (positions < hi)) + p.start
            if inside.size == 0:
                break
            means.append((recording.q[inside].mean(axis=0), recording.v[inside, i].mean(),
                          recording.effort[inside, i].mean()))
        if len(means) < 2:
            continue
        (q_plus, v_plus, tau_plus), (q_minus, v_minus, tau_minus) = means
        rows.append((i, pair, 0.5 * (q_plus + q_minus), 0.5 * (v_plus - v_minus),
                     0.5 * (tau_plus + tau_minus), 0.5 * (tau_plus - tau_minus)))
    return rows


# ----------------------------------------------------------------------------- gravity
@dataclass
class GravityFit:
    parameters: np.ndarray       # π_G
    rms: np.ndarray              # (n,) RMS of τ_G − H_G π_G per joint (nan: no data)
    points: np.ndarray           # (n,) matched positions per joint
    predicted: np.ndarray        # (M,) H_G π_G at the matched positions (moving joint)
    condition: float = float('nan')  # `condition_number` of the regressor: how well π_G is excited


def fit_gravity(robot: RobotModel, basis: GravityBasis, data: MatchedData) -> GravityFit:
    """π_G = H⁺ τ_G over the moving joints' rows (seed 001 eq. 22)."""
    if data.joint.size == 0:
        raise IdentificationError('no matched forward/backward constant-speed passes: is this '
                                  'a recording of the sweep plan (identify plan)?')
    rows = np.array([basis.regressor(robot, q)[i] for q, i in zip(data.q, data.joint)])
    scale = np.maximum(np.linalg.norm(rows, axis=0), 1e-12)
    solution, _, rank, _ = np.linalg.lstsq(rows / scale, data.tau_g, rcond=None)
    if rank < rows.shape[1]:
        raise IdentificationError(
            f'the sweeps excite only {rank} of the {rows.shape[1]} gravity parameters: too little '
            f'data, or joints that never moved ({_unmoved(robot, data)}); record the whole plan')
    parameters = solution / scale
    predicted = rows @ parameters
    rms = np.full(robot.n, np.nan)
    points = np.bincount(data.joint, minlength=robot.n)
    for i in range(robot.n):
        k = data.joint == i
        if k.any():
            rms[i] = np.sqrt(np.mean((data.tau_g[k] - predicted[k]) ** 2))
    return GravityFit(parameters, rms, points, predicted, condition_number(rows))


def condition_number(matrix: np.ndarray) -> float:
    """Of the column-scaled matrix (unit columns), so that units do not count."""
    scaled = matrix / np.maximum(np.linalg.norm(matrix, axis=0), 1e-12)
    singular = np.linalg.svd(scaled, compute_uv=False)
    return float(singular[0] / singular[-1]) if singular[-1] > 0 else float('inf')


def _unmoved(robot: RobotModel, data: MatchedData) -> str:
    names = [robot.joint_names[i] for i in range(robot.n) if not np.any(data.joint == i)]
    return ', '.join(names) or 'none'


# Default of `check_gravity_plausible`: the identified G(q) may differ from the description's
# by this share of its RMS on every joint. A UR5 recording fitted with the UR10 description
# differs by 50-54 % on joints 2-3; honest fits on the simulated cobot by 0.1 % or less
# (benchmarks/identification.py: mean gravity errors below 0.005 N·m). A real arm whose
# description is rougher than this, or that carries a payload, needs --max-gravity-deviation
# raised (or the payload described).
MAX_GRAVITY_DEVIATION = 0.3


def gravity_deviation(robot: RobotModel, basis: GravityBasis, parameters: np.ndarray,
                      samples: int = 300, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Per joint, over random configurations: RMS of H_G(q)(π − π_URDF), the gap between the
    identified gravity and the robot description's, and RMS of the description's G(q)."""
    rng = np.random.default_rng(seed)
    regressors = np.array([basis.regressor(robot, q)
                           for q in robot.random_configuration(rng, samples)])
    reference = regressors @ basis.base_values(robot)
    gap = regressors @ parameters - reference
    return np.sqrt(np.mean(gap ** 2, axis=0)), np.sqrt(np.mean(reference ** 2, axis=0))


def check_gravity_plausible(robot: RobotModel, basis: GravityBasis, parameters: np.ndarray,
                            tolerance: float = MAX_GRAVITY_DEVIATION) -> None:
    """IdentificationError when on some joint the identified gravity is further from the
    description's than `tolerance` × its RMS (at least 10 % of the largest joint's RMS, so
    that a joint with next to no gravity torque is judged on the arm's scale)."""
    deviation, scale = gravity_deviation(robot, basis, parameters)
    reference = np.maximum(scale, 0.1 * scale.max())
    bad = np.flatnonzero(deviation > tolerance * reference)
    if bad.size:
        joints = ', '.join(f'{robot.joint_names[i]} {deviation[i]:.3g} N·m '
                           f'({deviation[i] / reference[i]:.0%} of {reference[i]:.3g} N·m)'
                           for i in bad)
        raise IdentificationError(
            f'the identified gravity is implausibly far from the description of robot '
            f'{robot.name!r} (RMS over random poses of the gap, and its share of the '
            f'description\'s gravity torque): {joints}; allowed {tolerance:.0%}. Is this a '
            f'recording of another robot, or does the arm carry a payload its description '
            f'lacks? No model written (tolerance: --max-gravity-deviation)')


# ---------------------------------------------------------------------------- friction
@dataclass
class FrictionFit:
    model: str
    parameters: np.ndarray   # (k,); nan when not fitted
    epsilon: float           # residual sum of squares, N²·m² (seed 001 Table 3); nan if not fitted
    points: int
    speeds: int = 0          # distinct swept speeds
    problem: str = ''        # why the model was not fitted ('' = fitted)


def distinct_speeds(speeds: np.ndarray, tolerance: float = 0.1) -> np.ndarray:
    """The distinct values among `speeds` (rad/s): sorted, a value within `tolerance` (share)
    of the first of a group belongs to it; one mean per group."""
    groups = []
    for v in np.sort(np.abs(np.asarray(speeds, dtype=float))):
        if groups and v <= groups[-1][0] * (1 + tolerance):
            groups[-1].append(v)
        else:
            groups.append([v])
    return np.array([np.mean(g) for g in groups])


def fit_friction(model_name: str, speed: np.ndarray, tau_f: np.ndarray, starts: int = 8,
                 seed: int = 0) -> FrictionFit:
    """One joint's friction model by bounded nonlinear least squares (scipy `least_squares`,
    trust-region reflective) from `starts` starting points (`starting_points`); the smallest
    ε wins. Data at fewer distinct speeds than the model has parameters: not fitted, the
    returned fit says why (`problem`)."""
    model = friction_models.get(model_name)
    lower, upper = np.array(model.lower), np.array(model.upper)
    levels = distinct_speeds(speed)
    if levels.size < model.minimum_speeds:
        return FrictionFit(model_name, np.full(lower.size, np.nan), float('nan'),
                           int(speed.size), int(levels.size),
                           f'{levels.size} distinct speeds for {model.minimum_speeds} parameters')
    rng = np.random.default_rng(seed)
    level = float(np.median(np.abs(tau_f)))
    best = None
    for x0 in starting_points(model, level, levels, starts, rng):
        result = least_squares(lambda x: model.function(speed, *x) - tau_f, x0,
                               bounds=(lower, upper), x_scale='jac', method='trf')
        epsilon = float(np.sum(result.fun ** 2))
        if best is None or epsilon < best.epsilon:
            best = FrictionFit(model_name, result.x, epsilon, int(speed.size), int(levels.size))
    return best


def starting_points(model: friction_models.FrictionModel, level: float, speeds: np.ndarray,
                    count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """`count` starts for `model`'s fit to friction of typical size `level` (N·m) measured at
    `speeds` (rad/s, v_min … v_max).

    The first is a physically sensible guess; the others are random, each parameter drawn
    according to its unit (core/chain/friction.py):
    - N·m (amplitudes): uniform in [0, 2·level];
    - N·m·s/rad (viscous): uniform in [0, 2·level / v_max];
    - s/rad (rate constants γ inside tanh(γ v)): log-uniform in [0.1 / v_max, 10 / v_min],
      from a tanh still linear over every swept speed to one saturated at the slowest;
      for the continuous model the Stribeck pair is ordered γ₂ ≥ γ₃ (a hump, since γ₁ ≥ 0);
    - rad/s (characteristic speeds): log-uniform in [v_min / 10, 10 v_max].
    Every start is clipped to the model's bounds.
    """
    lower, upper = np.array(model.lower), np.array(model.upper)
    v_min = max(float(np.min(speeds)), 1e-4)
    v_max = max(float(np.max(speeds)), v_min)
    level = max(level, 1e-3)
    guesses = {'continuous': [0.2 * level, 20.0 / v_max, 2.0 / v_max, level, 20.0 / v_max,
                              0.1 * level / v_max],
               'coulomb_viscous': [level, 0.1 * level / v_max],
               'stribeck': [level, 1.2 * level, 0.2 * v_max, 0.1 * level / v_max]}
    starts = [np.clip(guesses[model.name], lower, upper)]
    ranges = {'N·m': ('uniform', 0.0, 2 * level),
              'N·m·s/rad': ('uniform', 0.0, 2 * level / v_max),
              's/rad': ('log', 0.1 / v_max, 10.0 / v_min),
              'rad/s': ('log', 0.1 * v_min, 10.0 * v_max)}
    for _ in range(count - 1):
        x = np.empty(lower.size)
        for k, unit in enumerate(model.units):
            kind, low, high = ranges[unit]
            x[k] = (rng.uniform(low, high) if kind == 'uniform'
                    else np.exp(rng.uniform(np.log(low), np.log(high))))
        if model.name == 'continuous':
            x[1], x[2] = max(x[1], x[2]), min(x[1], x[2])
        starts.append(np.clip(x, lower, upper))
    return starts


# ------------------------------------------------------------------------- the whole fit
@dataclass
class Identification:
    """Everything `identify fit` reports and saves."""

    robot: RobotModel
    basis: GravityBasis
    data: MatchedData
    passes: list[Pass]
    gravity: GravityFit
    friction: dict[str, list[FrictionFit]] = field(default_factory=dict)  # model → per joint

    def model(self, friction_model: str, metadata: dict) -> IdentifiedModel:
        """The model file's content with `friction_model`; IdentificationError when that
        model could not be fitted on some joint (too few distinct speeds)."""
        fits = self.friction[friction_model]
        unfitted = [f'{joint} ({fit.problem})' for joint, fit in zip(self.robot.joint_names, fits)
                    if fit.problem]
        if unfitted:
            needed = friction_models.get(friction_model).minimum_speeds
            raise IdentificationError(
                f'the {friction_model} friction model was not fitted on joints '
                f'{", ".join(unfitted)}: sweep at {needed} or more distinct speeds '
                f'(identify plan --speeds), or choose a model with fewer parameters '
                f'(--friction-model)')
        quality = {
            'gravity_rms_Nm': dict(zip(self.robot.joint_names, map(_float, self.gravity.rms))),
            'friction_epsilon_N2m2': {name: dict(zip(self.robot.joint_names,
                                                     [_float(fit.epsilon) for fit in per_joint]))
                                      for name, per_joint in self.friction.items()},
            'distinct_speeds': dict(zip(self.robot.joint_names, [fit.speeds for fit in fits])),
            'matched_positions': dict(zip(self.robot.joint_names,
                                          map(int, self.gravity.points))),
            'passes': len(self.passes),
            'gravity_condition_number': _float(self.gravity.condition),
        }
        return identified_model(self.robot, self.basis, self.gravity.parameters, friction_model,
                                fits, metadata, quality)

    def table(self) -> str:
        """Seed 001 Table 3: ε (N²·m²) per joint and friction model, with the matched
        positions, distinct speeds and the gravity fit's RMS; '-' for a model not fitted."""
        names = list(self.friction)
        lines = [f'gravity: {len(self.basis.independent)} base parameters, condition number '
                 f'{self.gravity.condition:.3g} (column-scaled regressor at the matched positions)',
                 'ε (residual sum of squares, N²·m²) per joint and friction model '
                 '(seed 001 Table 3)',
                 'joint        points  speeds  gravity RMS N·m  '
                 + '  '.join(f'{m:>15}' for m in names)]
        for i, joint in enumerate(self.robot.joint_names):
            fits = [self.friction[m][i] for m in names]
            eps = '  '.join(f'{"-" if fit.problem else format(fit.epsilon, ".4g"):>15}'
                            for fit in fits)
            lines.append(f'{joint:<12} {int(self.gravity.points[i]):6d}  {fits[0].speeds:6d}  '
                         f'{self.gravity.rms[i]:15.4f}  {eps}')
        notes = sorted({f'{m}: {fit.problem}' for m in names for fit in self.friction[m]
                        if fit.problem})
        if notes:
            lines.append('- not fitted (fewer distinct speeds than parameters): '
                         + '; '.join(notes))
        return '\n'.join(lines)


def identified_model(robot: RobotModel, basis: GravityBasis, gravity_parameters: np.ndarray,
                     friction_model: str, fits: list[FrictionFit], metadata: dict,
                     quality: dict) -> IdentifiedModel:
    """The model file's content: gravity, one friction fit per joint, and how good the fit is."""
    return IdentifiedModel(robot.name, robot.joint_names, gravity_parameters, basis,
                           friction_model, np.array([fit.parameters for fit in fits]),
                           dict(metadata, fit_quality=quality), structure=robot_structure(robot))


def _float(x) -> float | None:
    return None if not np.isfinite(x) else float(x)


def in_time_order(recording: JointRecording) -> tuple[JointRecording, int]:
    """The samples sorted by time, repeated times dropped (a real driver's stamps jitter and
    a few arrive out of order), and how many samples were out of order or repeated."""
    order = np.argsort(recording.t, kind='stable')
    keep = order[np.r_[True, np.diff(recording.t[order]) > 0]]
    moved = int(np.sum(order != np.arange(len(order)))) + len(order) - len(keep)
    return JointRecording(recording.joint_names, recording.t[keep], recording.q[keep],
                          recording.v[keep], recording.effort[keep], recording.source), moved


def recording_kind(recording: JointRecording, robot: RobotModel,
                   detection: PassDetection = PassDetection()) -> tuple[str, str]:
    """'sweeps' when every joint has forward/backward constant-speed passes at two or more
    speeds (seed 001's input, and the best one), else 'motion'
    (core/identification/motion_identification.py);
    and why."""
    passes = find_passes(recording, detection)
    data = match_passes(recording, passes, detection)
    short = [robot.joint_names[i] for i in range(robot.n)
             if distinct_speeds(data.of_joint(i).speed).size < 2]
    if not short:
        return 'sweeps', (f'{len(passes)} constant-speed passes, matched forward and back at '
                          f'several speeds on every joint')
    return 'motion', (f'no forward/backward constant-speed passes at two or more speeds on '
                      f'joints {", ".join(short)}: fitted as ordinary motion')


def identify(robot: RobotModel, recording: JointRecording,
             models: tuple[str, ...] = tuple(friction_models.MODELS), starts: int = 8,
             detection: PassDetection = PassDetection(), progress=None,
             max_gravity_deviation: float = MAX_GRAVITY_DEVIATION) -> Identification:
    """The whole identification of seed 001 §2 from a recording (in `robot`'s joint order).

    `progress(iterable, total, desc)` wraps the friction-fit loop (e.g. tqdm).
    """
    check_recording(recording, robot)
    passes = find_passes(recording, detection)
    data = match_passes(recording, passes, detection)
    moved = {p.joint for p in passes}
    never = [robot.joint_names[i] for i in range(robot.n) if i not in moved]
    if never:
        raise IdentificationError(f'{recording.source}: joints {never} never moved at a constant '
                                  f'speed alone; every joint needs its sweeps (identify plan)')
    unmatched = [robot.joint_names[i] for i in range(robot.n) if not np.any(data.joint == i)]
    if unmatched:
        raise IdentificationError(f'{recording.source}: joints {unmatched} have no forward pass '
                                  f'followed by a backward pass at the same speed and place')
    basis = gravity_basis(robot)
    gravity = fit_gravity(robot, basis, data)
    check_gravity_plausible(robot, basis, gravity.parameters, max_gravity_deviation)
    for i in range(robot.n):
        if distinct_speeds(data.of_joint(i).speed).size < 2:
            raise IdentificationError(f'joint {robot.joint_names[i]} was swept at one speed '
                                      f'only; friction needs several speeds')
    jobs = [(name, i) for name in models for i in range(robot.n)]
    if progress is not None:
        jobs = progress(jobs, total=len(jobs), desc='friction fits')
    fits: dict[str, list[FrictionFit]] = {name: [None] * robot.n for name in models}
    for name, i in jobs:
        joint = data.of_joint(i)
        fits[name][i] = fit_friction(name, joint.speed, joint.tau_f, starts, seed=i)
    return Identification(robot, basis, data, passes, gravity, fits)


def gravity_error(robot: RobotModel, model: IdentifiedModel, samples: int = 10_000,
                  seed: int = 0) -> np.ndarray:
    """|G_identified(q) − g_RNEA(q)| per joint over random configurations (samples × n);
    the check of seed 001 Fig. 4 against the URDF's (the maker's) parameters."""
    rng = np.random.default_rng(seed)
    configurations = robot.random_configuration(rng, samples)
    data = robot.model.createData()
    errors = np.empty((samples, robot.n))
    for k, q in enumerate(configurations):
        reference = pin.computeGeneralizedGravity(robot.model, data, robot.configuration(q))
        errors[k] = np.abs(model.gravity(robot, q) - reference)
    return errors
