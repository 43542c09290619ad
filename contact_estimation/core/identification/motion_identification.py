"""Gravity and friction identification from a log of ordinary free motion (seed 001 §2,
extended from its constant-speed sweeps to the full inverse-dynamics model).

Seed 001 identifies from constant-speed sweeps (core/identification/identification.py), where the
inertial
terms vanish (eq. 9). Ordinary work motion accelerates, so the whole model of seed 001 eq. 6
is fitted; in the project's sign (M q̈ + C q̇ + g + f(q̇) = τ + τ_ext, τ_ext = 0 in free
motion):

    τ = Y(q, q̇, q̈) π + f(q̇; γ)

with Y pinocchio's joint-torque regressor (`computeJointTorqueRegressor`, the ten dynamic
parameters of every body) and f a friction model of core/chain/friction.py on every joint (the
continuous model of seed 001 eq. 23, Coulomb–viscous, Stribeck).

1. `motion_samples`: the log on a uniform time grid (real drivers' stamps jitter), q̈ the
   zero-phase Savitzky–Golay derivative of q̇ (a symmetric window: no lag against τ).
   Rows of a joint slower than `still_speed` are left out: there it may stick, and its
   friction is anything up to static friction.
2. The rigid-body part, one of (`MotionSettings.inertia`, 'auto' by default):
   - 'urdf': the description's inertia is kept, τ − [Y(q,q̇,q̈) − Y(q,0,0)] π_URDF =
     H_G(q) π_G + f(q̇), only the gravity base parameters π_G fitted;
   - 'fitted': the base parameters of the whole regressor (`inertial_basis`) are fitted,
     and π_G follows from them (their G(q) = Y(q,0,0) π projected on the gravity basis).
   'auto' fits them when the motion excites them (condition number of the column-scaled
   regressor ≤ `max_inertia_condition`): in smooth motion q̈ correlates with q, so an error
   in the description's inertia would leak into the gravity and friction estimates. It keeps
   the description's otherwise (slow motion leaves the inertia undetermined, and only noise
   would come of fitting it). Either way the model file holds G and f: the residual node
   takes M and C from the description (core/chain/residual.py).
3. Friction is linear in its amplitudes (γ₁, γ₄, γ₆ of eq. 23; Coulomb, static and viscous
   levels) and nonlinear in its rate constants (γ₂, γ₃, γ₅) and characteristic speeds: a
   separable least-squares problem, solved by variable projection (`least_squares` over the
   nonlinear parameters, everything linear, π included, solved inside by linear least
   squares). First per joint, from several starts (`identification.starting_points`), on the
   torque a joint Coulomb–viscous fit leaves; then all joints and π jointly.
4. The report: per joint the position travel, the speeds visited (`SPEED_BANDS`), the
   gravity's standard error and the fit's RMS; the condition numbers; what extra motion
   would help. A log that cannot give the model is refused in one line naming the joint and
   the missing motion (`check_coverage`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
from scipy.linalg import solve_triangular
from scipy.optimize import least_squares, lsq_linear
from scipy.signal import savgol_filter
from scipy.stats import f as f_distribution

from contact_estimation.core.chain import friction as friction_models
from contact_estimation.core.identification.identification import (
    MAX_GRAVITY_DEVIATION,
    FrictionFit,
    IdentificationError,
    base_parameters,
    check_gravity_plausible,
    check_recording,
    condition_number,
    gravity_basis,
    identified_model,
    starting_points,
)
from contact_estimation.core.identification.identified_model import (
    DYNAMIC_PARAMETERS,
    GravityBasis,
    IdentifiedModel,
)
from contact_estimation.core.identification.recording import JointRecording
from contact_estimation.core.robot.robot_model import RobotModel

# Speed bands of the coverage report, rad/s: 12 log-spaced from 0.005 to 2 (ratio 1.65). A band
# in which a joint moved for `band_time` counts as one distinct speed, the sweeps' rule
# (identification.distinct_speeds): a friction model needs as many as it has parameters.
SPEED_BANDS = np.geomspace(0.005, 2.0, 13)
# Below this a joint is in its Stribeck region (seed 001 Fig. 5: the hump of eq. 23).
STRIBECK_SPEED = 0.03  # rad/s
INERTIA_CHOICES = ('auto', 'urdf', 'fitted')


def _friction_dictionary(v, *weights):
    """Σ_k a_k tanh(v / s_k) + b v over `_DICTIONARY_SPEEDS` s_k: any odd friction curve
    with its Stribeck hump, Coulomb step and viscous slope, linear in (a, b)."""
    steps = sum(a * np.tanh(v / s) for a, s in zip(weights[:-1], _DICTIONARY_SPEEDS))
    return steps + weights[-1] * v


_DICTIONARY_SPEEDS = (0.005, 0.02, 0.08, 0.3)  # rad/s
FRICTION_DICTIONARY = friction_models.FrictionModel(
    'dictionary', _friction_dictionary,
    tuple(f'a{k}' for k in range(len(_DICTIONARY_SPEEDS))) + ('viscous',),
    ('N·m',) * len(_DICTIONARY_SPEEDS) + ('N·m·s/rad',),
    (-50.0,) * len(_DICTIONARY_SPEEDS) + (0.0,), (50.0,) * (len(_DICTIONARY_SPEEDS) + 1))


@dataclass(frozen=True)
class MotionSettings:
    """How a free-motion log is turned into fit rows, and when the inertia is fitted."""

    derivative_window: float = 0.1     # s, Savitzky–Golay window of q̈ (cubic fit of q̇)
    still_speed: float = 0.005         # rad/s: slower rows of a joint are not used (stiction)
    max_samples: int = 5000            # time samples kept for the fits (evenly thinned)
    min_travel: float = 0.05           # rad: a joint covering less never moved
    band_time: float = 0.2             # s of motion in a speed band (or one way) to count
    stribeck_time: float = 5.0         # s below STRIBECK_SPEED to pin down the hump
    max_inertia_condition: float = 1000.0  # 'auto' fits the inertia below this condition number
    inertia: str = 'auto'              # 'auto', 'urdf' or 'fitted'
    poses: int = 300                   # random poses for the gravity projection and its error


# ------------------------------------------------------------------------------ samples
@dataclass
class MotionSamples:
    """The log on a uniform grid: t (N,), q, v, a, tau (N, n); `dt` its step in s."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau: np.ndarray
    dt: float

    def thinned(self, count: int) -> 'MotionSamples':
        """At most `count` samples, evenly spaced in time."""
        step = max(1, int(np.ceil(len(self.t) / count)))
        return MotionSamples(self.t[::step], self.q[::step], self.v[::step], self.a[::step],
                             self.tau[::step], self.dt * step)


def motion_samples(recording: JointRecording, settings: MotionSettings = MotionSettings()
                   ) -> MotionSamples:
    """Resample on the median step and differentiate q̇ with a zero-phase Savitzky–Golay
    filter; the half windows at both ends, where the filter is one-sided, are dropped."""
    dt = float(np.median(np.diff(recording.t)))
    grid = np.arange(recording.t[0], recording.t[-1], dt)
    window = max(5, int(round(settings.derivative_window / dt)) | 1)  # odd, ≥ 5

    def resampled(values):
        return np.column_stack([np.interp(grid, recording.t, values[:, j])
                                for j in range(values.shape[1])])

    if len(grid) < 3 * window:
        raise IdentificationError(f'{recording.source}: {grid[-1] - grid[0]:.2f} s of motion is '
                                  f'too short for q̈ over {window * dt:.2f} s windows')
    v = resampled(recording.v)
    a = savgol_filter(v, window, 3, deriv=1, delta=dt, axis=0)
    keep = slice(window // 2, len(grid) - window // 2)
    return MotionSamples(grid[keep], resampled(recording.q)[keep], v[keep], a[keep],
                         resampled(recording.effort)[keep], dt)


# ----------------------------------------------------------------------------- coverage
@dataclass
class JointCoverage:
    """How a joint moved: position travel, peak speed, time (s) in each `SPEED_BANDS` band,
    each way and in the Stribeck region."""

    joint: str
    travel: float
    max_speed: float
    band_time: np.ndarray
    positive: float
    negative: float
    slow: float          # s moving slower than STRIBECK_SPEED

    def bands(self, minimum: float) -> np.ndarray:
        """Indices of the bands with at least `minimum` s of motion."""
        return np.flatnonzero(self.band_time >= minimum)

    def speed_range(self, minimum: float) -> tuple[float, float]:
        """The speeds (rad/s) spanned by the bands with at least `minimum` s."""
        bands = self.bands(minimum)
        if bands.size == 0:
            return 0.0, 0.0
        return float(SPEED_BANDS[bands[0]]), float(SPEED_BANDS[bands[-1] + 1])


def coverage(robot: RobotModel, samples: MotionSamples,
             settings: MotionSettings = MotionSettings()) -> list[JointCoverage]:
    result = []
    for i, joint in enumerate(robot.joint_names):
        v = samples.v[:, i]
        counts, _ = np.histogram(np.abs(v), SPEED_BANDS)
        moving = np.abs(v) >= settings.still_speed
        result.append(JointCoverage(joint, float(np.ptp(samples.q[:, i])),
                                    float(np.max(np.abs(v))), counts * samples.dt,
                                    float(np.sum(moving & (v > 0)) * samples.dt),
                                    float(np.sum(moving & (v < 0)) * samples.dt),
                                    float(np.sum(moving & (np.abs(v) < STRIBECK_SPEED))
                                          * samples.dt)))
    return result


def check_coverage(robot: RobotModel, joints: list[JointCoverage], friction_model: str,
                   settings: MotionSettings = MotionSettings(), source: str = '') -> None:
    """IdentificationError, in one line, for the first joint whose motion cannot give the
    model: it never moved, moved one way only, or at too few distinct speeds for
    `friction_model` (one band of `SPEED_BANDS` per parameter); the line names the missing
    motion."""
    needed = friction_models.get(friction_model).minimum_speeds
    prefix = f'{source}: ' if source else ''
    for i, c in enumerate(joints):
        top = _speed_cap(robot, i)
        if c.travel < settings.min_travel or c.max_speed < 2 * settings.still_speed:
            raise IdentificationError(
                f'{prefix}joint {c.joint} never moves (travel {c.travel:.3g} rad, |q̇| ≤ '
                f'{c.max_speed:.2g} rad/s): record it moving both ways at 0.01-{top:.2g} rad/s')
        for way, seconds, other in (('positive', c.positive, c.negative),
                                    ('negative', c.negative, c.positive)):
            if other < settings.band_time:
                raise IdentificationError(
                    f'{prefix}joint {c.joint} moves only the {way} way ({seconds:.1f} s, '
                    f'{other:.2f} s back): friction needs both; record it moving both ways')
        bands = c.bands(settings.band_time)
        if bands.size < needed:
            low, high = c.speed_range(settings.band_time)
            missing = (f'below {low:.2g} rad/s' if low > 2 * SPEED_BANDS[1]
                       else f'{high:.2g}-{top:.2g} rad/s')
            raise IdentificationError(
                f'{prefix}joint {c.joint} moves only at {low:.2g}-{high:.2g} rad/s: '
                f'{bands.size} of the {needed} speed bands the {friction_model} friction model '
                f'needs; record it moving {missing} (or --friction-model with fewer parameters)')


def _speed_cap(robot: RobotModel, i: int) -> float:
    """The fastest speed worth asking for: half the velocity limit, at most 1 rad/s."""
    limit = robot.velocity_limits[i]
    return float(min(1.0, 0.5 * limit)) if np.isfinite(limit) and limit > 0 else 1.0


# ------------------------------------------------------------------------- rigid body
def inertial_basis(robot: RobotModel, samples: int = 100, seed: int = 1,
                   tolerance: float = 1e-9) -> GravityBasis:
    """Base parameters of the whole joint-torque regressor Y(q, q̇, q̈) (ten per body), from
    random states (`identification.base_parameters`)."""
    labels = [f'{link}/{p}' for link in robot.joint_links for p in DYNAMIC_PARAMETERS]
    rng = np.random.default_rng(seed)
    stacked = np.vstack([_regressor(robot, q, rng.standard_normal(robot.n),
                                    rng.standard_normal(robot.n))
                         for q in robot.random_configuration(rng, samples)])
    return base_parameters(labels, stacked, tolerance)


def _regressor(robot: RobotModel, q, v, a) -> np.ndarray:
    """Y(q, q̇, q̈), n × 10·bodies (a copy: pinocchio returns its data buffer)."""
    return np.array(pin.computeJointTorqueRegressor(robot.model, robot.data,
                                                    robot.configuration(q), v, a))


def _label_columns(robot: RobotModel, labels: list[str]) -> np.ndarray:
    everything = [f'{link}/{p}' for link in robot.joint_links for p in DYNAMIC_PARAMETERS]
    position = {label: k for k, label in enumerate(everything)}
    return np.array([position[label] for label in labels], dtype=int)


@dataclass
class RigidBody:
    """The fitted rigid-body columns per sample, τ_known (not fitted) and G(q) columns."""

    kind: str                 # 'urdf' or 'fitted'
    columns: np.ndarray       # (N, n, p): rows of the unknowns π (gravity or inertial base)
    known: np.ndarray         # (N, n): the description's inertial torque ('urdf') or zeros
    labels: list[str]         # the p unknowns, '<link>/<parameter>'
    gravity_rows: object      # q ↦ (n, p): G(q) = gravity_rows(q) π


def rigid_body_designs(robot: RobotModel, samples: MotionSamples,
                       gravity: GravityBasis) -> dict[str, RigidBody]:
    """Both ways of treating the inertia (module doc, step 2)."""
    zeros = np.zeros(robot.n)
    full = np.array([_regressor(robot, q, v, a)
                     for q, v, a in zip(samples.q, samples.v, samples.a)])
    static = np.array([_regressor(robot, q, zeros, zeros) for q in samples.q])
    reference = np.concatenate([robot.model.inertias[j].toDynamicParameters()
                                for j in range(1, robot.model.njoints)])
    gravity_columns = gravity.columns(robot, gravity.independent)
    inertial = inertial_basis(robot)
    inertial_columns = _label_columns(robot, inertial.independent)
    return {
        'urdf': RigidBody('urdf', static[:, :, gravity_columns], (full - static) @ reference,
                          list(gravity.independent),
                          lambda q: gravity.regressor(robot, q)),
        'fitted': RigidBody('fitted', full[:, :, inertial_columns],
                            np.zeros((len(samples.t), robot.n)), list(inertial.independent),
                            lambda q: _regressor(robot, q, zeros, zeros)[:, inertial_columns]),
    }


# ------------------------------------------------------------------------------- fitting
class _Problem:
    """The separable least-squares problem of one friction model over all joints: the
    rigid-body unknowns π, the linear friction parameters of every joint (bounded as the
    model says: amplitudes ≥ 0) and, given, its nonlinear ones.

    π is projected out once: with B = Q R the rigid-body columns, the friction parameters
    minimise |(I − QQᵀ)(F θ − y)|², whose normal equations are small (joints × linear
    parameters), since F is block-diagonal by joint; then R π = Qᵀ(y − F θ).
    """

    def __init__(self, body: RigidBody, samples: MotionSamples, model, moving: np.ndarray):
        self.model = model
        self.nonlinear = [k for k, unit in enumerate(model.units) if unit in ('s/rad', 'rad/s')]
        self.linear = [k for k in range(len(model.units)) if k not in self.nonlinear]
        n = samples.v.shape[1]
        self.rows = [np.flatnonzero(moving[:, i]) for i in range(n)]
        self.speed = [samples.v[r, i] for i, r in enumerate(self.rows)]
        self.body = np.vstack([body.columns[r, i] for i, r in enumerate(self.rows)])
        self.y = np.concatenate([samples.tau[r, i] - body.known[r, i]
                                 for i, r in enumerate(self.rows)])
        self.p, self.k, self.n = self.body.shape[1], len(self.linear), n
        self.offsets = np.cumsum([0] + [len(r) for r in self.rows])
        self._body_scale = np.maximum(np.linalg.norm(self.body, axis=0), 1e-12)
        self._q, self._r = np.linalg.qr(self.body / self._body_scale)
        weak = np.abs(np.diag(self._r)) < 1e-8
        if weak.any():
            names = [body.labels[j] for j in np.flatnonzero(weak)]
            raise IdentificationError(f'the motion does not excite the parameters {names}: '
                                      f'move every joint through more of its range')
        self._y_free = self.y - self._q @ (self._q.T @ self.y)
        self._lower = np.tile(np.array(model.lower)[self.linear], n)
        self._upper = np.tile(np.array(model.upper)[self.linear], n)

    def joint(self, i: int) -> slice:
        return slice(self.offsets[i], self.offsets[i + 1])

    def friction_columns(self, i: int, nonlinear) -> np.ndarray:
        """Joint i's friction as columns of its linear parameters, given the nonlinear ones:
        f is linear in them, so column k is f with that parameter 1 and the others 0."""
        params = np.zeros(len(self.model.units))
        params[self.nonlinear] = nonlinear
        columns = []
        for k in self.linear:
            unit = params.copy()
            unit[k] = 1.0
            columns.append(self.model.function(self.speed[i], *unit))
        return np.column_stack(columns)

    def _blocks(self, nonlinear: np.ndarray) -> list[np.ndarray]:
        per_joint = np.asarray(nonlinear).reshape(self.n, len(self.nonlinear))
        return [self.friction_columns(i, per_joint[i]) for i in range(self.n)]

    def design(self, nonlinear: np.ndarray) -> np.ndarray:
        """[rigid-body columns | friction columns of every joint, block-diagonal]."""
        matrix = np.zeros((len(self.y), self.p + self.n * self.k))
        matrix[:, :self.p] = self.body
        for i, block in enumerate(self._blocks(nonlinear)):
            matrix[self.joint(i), self.p + i * self.k:self.p + (i + 1) * self.k] = block
        return matrix

    def solve(self, nonlinear: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The linear unknowns [π, friction] for given nonlinear ones, and the residuals."""
        blocks = self._blocks(nonlinear)
        projected = np.hstack([self._q[self.joint(i)].T @ block
                               for i, block in enumerate(blocks)])            # p × n·k
        gram = -projected.T @ projected
        rhs = np.empty(self.n * self.k)
        for i, block in enumerate(blocks):
            part = slice(i * self.k, (i + 1) * self.k)
            gram[part, part] += block.T @ block
            rhs[part] = block.T @ self._y_free[self.joint(i)]
        theta = _bounded_solve(gram, rhs, self._lower, self._upper)
        friction = np.concatenate([block @ theta[i * self.k:(i + 1) * self.k]
                                   for i, block in enumerate(blocks)])
        in_body = self._q.T @ (self.y - friction)
        pi = solve_triangular(self._r, in_body) / self._body_scale
        residual = friction - self._q @ (self._q.T @ friction) - self._y_free
        return np.concatenate([pi, theta]), residual

    def parameters(self, solution: np.ndarray, nonlinear: np.ndarray) -> np.ndarray:
        """n × k friction parameters in the model's order."""
        rows = np.zeros((self.n, len(self.model.units)))
        rows[:, self.linear] = solution[self.p:].reshape(self.n, self.k)
        rows[:, self.nonlinear] = np.asarray(nonlinear).reshape(self.n, len(self.nonlinear))
        return rows


def _bounded_solve(gram: np.ndarray, rhs: np.ndarray, lower: np.ndarray,
                   upper: np.ndarray) -> np.ndarray:
    """argmin θᵀGθ − 2bᵀθ within bounds, as the least squares |Lᵀθ − L⁻¹b| (G = LLᵀ) on
    unit-scaled variables (scipy `lsq_linear`, bounded-variable least squares)."""
    scale = np.sqrt(np.maximum(np.diag(gram), 1e-300))
    scaled = gram / np.outer(scale, scale) + 1e-12 * np.eye(len(rhs))
    factor = np.linalg.cholesky(scaled)
    target = solve_triangular(factor, rhs / scale, lower=True)
    result = lsq_linear(factor.T, target, bounds=(lower * scale, upper * scale), method='bvls')
    return result.x / scale


def _scaled_lstsq(matrix: np.ndarray, y: np.ndarray) -> np.ndarray:
    scale = np.maximum(np.linalg.norm(matrix, axis=0), 1e-12)
    return np.linalg.lstsq(matrix / scale, y, rcond=None)[0] / scale


def fit_friction_jointly(body: RigidBody, samples: MotionSamples, model, moving: np.ndarray,
                         starts: int = 8) -> tuple[_Problem, np.ndarray, np.ndarray, np.ndarray]:
    """Variable projection (module doc, step 3): the problem, its solution (π and the linear
    friction parameters), the nonlinear friction parameters of every joint (flattened) and
    the residuals."""
    problem = _Problem(body, samples, model, moving)
    if not problem.nonlinear:
        solution, residual = problem.solve(np.zeros(0))
        return problem, solution, np.zeros(0), residual
    lower = np.array(model.lower)[problem.nonlinear]
    upper = np.array(model.upper)[problem.nonlinear]
    # Per joint first, on the torque a joint Coulomb–viscous fit leaves to friction.
    initial = _Problem(body, samples, friction_models.get('coulomb_viscous'), moving)
    solution, _ = initial.solve(np.zeros(0))
    left_over = problem.y - problem.body @ solution[:problem.p]
    linear_lower = np.array(model.lower)[problem.linear]
    linear_upper = np.array(model.upper)[problem.linear]
    per_joint = []
    for i in range(problem.n):
        target = left_over[problem.joint(i)]

        def residual(x, i=i, target=target):
            columns = problem.friction_columns(i, x)
            theta = _bounded_solve(columns.T @ columns, columns.T @ target,
                                   linear_lower, linear_upper)
            return columns @ theta - target

        speeds = np.percentile(np.abs(problem.speed[i]), [5, 95])
        rng = np.random.default_rng(i)
        best = None
        for x0 in starting_points(model, float(np.median(np.abs(target))), speeds, starts, rng):
            result = least_squares(residual, x0[problem.nonlinear], bounds=(lower, upper),
                                   x_scale='jac', method='trf')
            if best is None or result.cost < best.cost:
                best = result
        per_joint.append(best.x)
    # Then every joint and π together.
    result = least_squares(lambda x: problem.solve(x)[1], np.concatenate(per_joint),
                           bounds=(np.tile(lower, problem.n), np.tile(upper, problem.n)),
                           x_scale='jac', method='trf')
    solution, residual = problem.solve(result.x)
    return problem, solution, result.x, residual


# ------------------------------------------------------------------------------ result
@dataclass
class MotionIdentification:
    """Everything `identify fit` reports and saves for a free-motion log."""

    robot: RobotModel
    basis: GravityBasis
    gravity_parameters: np.ndarray
    inertia: str                          # 'urdf' or 'fitted'
    inertia_reason: str
    conditions: dict[str, float]          # condition number with the URDF's / fitted inertia
    coverage: list[JointCoverage]
    gravity_error: np.ndarray             # (n,) standard error of G over random poses, N·m
    friction: dict[str, list[FrictionFit]] = field(default_factory=dict)
    rms: dict[str, np.ndarray] = field(default_factory=dict)  # model → fit RMS per joint, N·m
    settings: MotionSettings = MotionSettings()
    duration: float = 0.0
    # Per joint (speed, τ − Y π): the torque the saved friction model was fitted to.
    friction_data: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    def model(self, friction_model: str, metadata: dict) -> IdentifiedModel:
        fits = self.friction[friction_model]
        quality = {
            'method': 'ordinary motion',
            'inertia': f'{self.inertia}: {self.inertia_reason}',
            'condition_number': {k: _finite(v) for k, v in self.conditions.items()},
            'gravity_standard_error_Nm': dict(zip(self.robot.joint_names,
                                                  map(float, self.gravity_error))),
            'fit_rms_Nm': {name: dict(zip(self.robot.joint_names, map(float, rms)))
                           for name, rms in self.rms.items()},
            'friction_epsilon_N2m2': {name: dict(zip(self.robot.joint_names,
                                                     [_finite(fit.epsilon) for fit in per_joint]))
                                      for name, per_joint in self.friction.items()},
            'speed_bands': dict(zip(self.robot.joint_names, [fit.speeds for fit in fits])),
            'duration_s': float(self.duration),
        }
        return identified_model(self.robot, self.basis, self.gravity_parameters, friction_model,
                                fits, metadata, quality)

    def table(self) -> str:
        """The excitation report (module doc, step 4) and the fit per joint and model."""
        names = list(self.friction)
        lines = [f'ordinary motion, {self.duration:.0f} s: τ = Y(q,q̇,q̈) π + f(q̇) fitted jointly '
                 f'(seed 001 eq. 6; friction eq. 23 and the others by variable projection)',
                 f'inertia: {self.inertia} ({self.inertia_reason})',
                 'joint        travel  speeds rad/s  bands  ± gravity N·m  '
                 + '  '.join(f'{m + " RMS":>20}' for m in names)]
        minimum = self.settings.band_time
        for i, c in enumerate(self.coverage):
            low, high = c.speed_range(minimum)
            rms = '  '.join(f'{self.rms[m][i]:20.4f}' for m in names)
            lines.append(f'{c.joint:<12} {c.travel:6.2f}  {low:5.3f}-{high:5.3f}  '
                         f'{c.bands(minimum).size:5d}  {self.gravity_error[i]:13.4f}  {rms}')
        notes = sorted({f'{m} on {self.robot.joint_names[i]}: {fit.problem}'
                        for m in names for i, fit in enumerate(self.friction[m]) if fit.problem})
        if notes:
            lines.append('- not fitted: ' + '; '.join(notes))
        help_lines = self.suggestions()
        lines.append('what extra motion would help:' if help_lines
                     else 'the motion excites every parameter well')
        lines += [f'- {line}' for line in help_lines]
        return '\n'.join(lines)

    def suggestions(self) -> list[str]:
        """Extra motion that would determine the model better."""
        lines = []
        lower, upper = self.robot.position_limits
        span = np.where(np.isfinite(upper - lower), upper - lower, 2 * np.pi)
        scale = _gravity_scale(self.robot, self.basis)
        for i, c in enumerate(self.coverage):
            if c.slow < self.settings.stribeck_time:
                lines.append(f'{c.joint}: {c.slow:.1f} s below {STRIBECK_SPEED} rad/s; more slow '
                             f'motion would pin down its Stribeck hump and static friction '
                             f'(sweeps do best: identify plan)')
            if self.gravity_error[i] > 0.02 * scale[i]:
                lines.append(f'{c.joint}: gravity known to ±{self.gravity_error[i]:.2g} N·m '
                             f'only: move the joints up to {c.joint} through wider ranges')
            if c.travel < 0.3 * span[i]:
                lines.append(f'{c.joint}: covered {c.travel:.2f} of its {span[i]:.2f} rad range')
        if self.conditions['fitted'] > self.settings.max_inertia_condition:
            lines.append(f'faster motion with larger accelerations would let the inertial '
                         f'parameters be fitted (condition number '
                         f'{self.conditions["fitted"]:.3g}, fitted at ≤ '
                         f'{self.settings.max_inertia_condition:.3g})')
        return lines


def _finite(x) -> float | None:
    return float(x) if np.isfinite(x) else None


def _gravity_scale(robot: RobotModel, basis: GravityBasis, samples: int = 100) -> np.ndarray:
    """RMS of the description's gravity torque per joint (at least 10 % of the largest)."""
    rng = np.random.default_rng(3)
    gravity = np.array([basis.regressor(robot, q) @ basis.base_values(robot)
                        for q in robot.random_configuration(rng, samples)])
    rms = np.sqrt(np.mean(gravity ** 2, axis=0))
    return np.maximum(rms, 0.1 * rms.max())


def identify_motion(robot: RobotModel, recording: JointRecording,
                    friction_model: str = 'continuous',
                    models: tuple[str, ...] = tuple(friction_models.MODELS), starts: int = 8,
                    settings: MotionSettings = MotionSettings(), progress=None,
                    max_gravity_deviation: float = MAX_GRAVITY_DEVIATION) -> MotionIdentification:
    """Gravity and friction from a log of ordinary free motion (module doc).

    `friction_model` is the one to be saved: the log must cover enough speeds for it
    (`check_coverage`); the other `models` are fitted where the speeds allow, for comparison.
    `progress(iterable, total, desc)` wraps the loop over friction models (e.g. tqdm).
    """
    if settings.inertia not in INERTIA_CHOICES:
        raise ValueError(f'inertia must be one of {INERTIA_CHOICES}, got {settings.inertia!r}')
    check_recording(recording, robot)
    everything = motion_samples(recording, settings)
    joints = coverage(robot, everything, settings)
    check_coverage(robot, joints, friction_model, settings, recording.source)
    samples = everything.thinned(settings.max_samples)
    moving = np.abs(samples.v) >= settings.still_speed
    basis = gravity_basis(robot)
    designs = rigid_body_designs(robot, samples, basis)
    inertia, reason, conditions = choose_inertia(designs, samples, moving, settings)
    body = designs[inertia]

    models = tuple(dict.fromkeys([friction_model, *models]))
    jobs = models if progress is None else progress(models, total=len(models),
                                                    desc='friction fits')
    fits, rms, solutions = {}, {}, {}
    for name in jobs:
        model = friction_models.get(name)
        bands = [c.bands(settings.band_time).size for c in joints]
        if min(bands) < model.minimum_speeds:
            fits[name] = [FrictionFit(name, np.full(len(model.units), np.nan), float('nan'), 0, k,
                                      f'{min(bands)} speed bands (on '
                                      f'{robot.joint_names[int(np.argmin(bands))]}) for '
                                      f'{model.minimum_speeds} parameters')
                          for k in bands]
            rms[name] = np.full(robot.n, np.nan)
            continue
        problem, solution, nonlinear, residual = fit_friction_jointly(body, samples, model,
                                                                       moving, starts)
        parameters = problem.parameters(solution, nonlinear)
        epsilon = [float(np.sum(residual[problem.joint(i)] ** 2)) for i in range(robot.n)]
        fits[name] = [FrictionFit(name, parameters[i], epsilon[i], len(problem.rows[i]),
                                  bands[i]) for i in range(robot.n)]
        rms[name] = np.sqrt(np.array(epsilon) / np.maximum(np.diff(problem.offsets), 1))
        solutions[name] = (problem, solution, nonlinear, residual)

    problem, solution, nonlinear, residual = solutions[friction_model]
    pi = solution[:problem.p]
    gravity_parameters, gravity_error = _gravity(robot, basis, body, pi, problem, nonlinear,
                                                 residual, settings.poses)
    check_gravity_plausible(robot, basis, gravity_parameters, max_gravity_deviation)
    left_to_friction = problem.y - problem.body @ pi
    friction_data = [(problem.speed[i], left_to_friction[problem.joint(i)])
                     for i in range(robot.n)]
    return MotionIdentification(robot, basis, gravity_parameters, inertia, reason, conditions,
                                joints, gravity_error, fits, rms, settings,
                                float(everything.t[-1] - everything.t[0]), friction_data)


def choose_inertia(designs: dict[str, RigidBody], samples: MotionSamples, moving: np.ndarray,
                   settings: MotionSettings) -> tuple[str, str, dict[str, float]]:
    """'urdf' or 'fitted' (module doc, step 2), why, and the condition number of each design.

    With `settings.inertia` 'auto', the inertial base parameters are fitted when the motion
    excites them (condition number ≤ `max_inertia_condition`) and the data reject the
    description's inertia: with them fitted, a fit with a flexible linear friction
    (`FRICTION_DICTIONARY`, so that friction misfit does not pose as inertia) lowers the
    residual more than their number explains (F-test, 1 in 1000 by chance). Otherwise the
    description's are kept: fewer unknowns, less noise in the gravity.
    """
    problems = {kind: _Problem(body, samples, FRICTION_DICTIONARY, moving)
                for kind, body in designs.items()}
    conditions = {kind: condition_number(problem.design(np.zeros(0)))
                  for kind, problem in problems.items()}
    rss = {kind: float(np.sum(problem.solve(np.zeros(0))[1] ** 2))
           for kind, problem in problems.items()}
    rows = len(problems['fitted'].y)
    extra = problems['fitted'].p - problems['urdf'].p
    dof = rows - problems['fitted'].p - problems['fitted'].n * problems['fitted'].k
    statistic = (rss['urdf'] - rss['fitted']) / extra / (rss['fitted'] / dof)
    critical = float(f_distribution.ppf(0.999, extra, dof))
    compared = (f'fit RMS {np.sqrt(rss["urdf"] / rows):.4g} N·m with the description\'s '
                f'inertia, {np.sqrt(rss["fitted"] / rows):.4g} with {extra} inertial parameters '
                f'fitted: F = {statistic:.3g}, {critical:.3g} by chance')
    fitted, limit = conditions['fitted'], settings.max_inertia_condition
    if settings.inertia != 'auto':
        return settings.inertia, f'as asked; {compared}', conditions
    if fitted > limit:
        return 'urdf', (f'the description\'s kept: the motion does not excite the inertial '
                        f'parameters (condition number {fitted:.3g} > {limit:.3g})'), conditions
    if statistic > critical:
        return 'fitted', (f'base inertial parameters fitted: the motion excites them (condition '
                          f'number {fitted:.3g}) and disagrees with the description\'s inertia '
                          f'({compared}); M and C of the residual stay the description\'s'), \
            conditions
    return 'urdf', (f'the description\'s kept: the motion excites the inertial parameters '
                    f'(condition number {fitted:.3g}) and agrees with them ({compared})'), \
        conditions


def _gravity(robot: RobotModel, basis: GravityBasis, body: RigidBody, pi: np.ndarray,
             problem: _Problem, nonlinear: np.ndarray, residual: np.ndarray,
             poses: int) -> tuple[np.ndarray, np.ndarray]:
    """π_G (the gravity base parameters) from the fitted rigid-body parameters, and the
    standard error of G(q) per joint over random poses (σ² (AᵀA)⁻¹ of the fit)."""
    rng = np.random.default_rng(4)
    configurations = robot.random_configuration(rng, poses)
    rows = np.array([body.gravity_rows(q) for q in configurations])   # poses × n × p
    if body.kind == 'urdf':
        parameters = pi
    else:
        target = rows @ pi
        gravity_rows = np.array([basis.regressor(robot, q) for q in configurations])
        parameters = _scaled_lstsq(gravity_rows.reshape(-1, gravity_rows.shape[2]),
                                   target.ravel())
    matrix = problem.design(nonlinear)
    dof = max(len(residual) - matrix.shape[1], 1)
    variance = float(residual @ residual) / dof
    scale = np.maximum(np.linalg.norm(matrix, axis=0), 1e-12)
    covariance = variance * np.linalg.pinv((matrix / scale).T @ (matrix / scale))
    covariance = (covariance / scale[:, None] / scale[None, :])[:problem.p, :problem.p]
    error = np.sqrt(np.mean(np.einsum('kip,pr,kir->ki', rows, covariance, rows), axis=0))
    return parameters, error
