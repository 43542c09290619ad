"""External joint torque τ_ext from joint position, velocity and torque: three residuals.

Sign convention (the project's, DEVELOPERS.md): M(q)q̈ + C(q,q̇)q̇ + g(q) + f(q̇) = τ + τ_ext,
so a force F acting ON the robot at point p gives τ_ext = J(p)ᵀF, and every residual here is
"model − τ". Seed 001 eq. 6 and eq. 9 and seed 003 eqs. 6–7 write the opposite sign,
τ_e = τ − model (the torque the drive spends against the contact); the formulas below are
theirs with the sign flipped, which is also the sign the momentum observer converges to.

- `FastResidual` (seed 001 eq. 9): τ_ext = g(q) + f(q̇) − τ. Inertial and Coriolis terms are
  dropped, which holds for the slow, constant speeds of force/position hybrid tasks.
- `InverseDynamicsResidual` (seed 001 eq. 6, seed 003 eq. 7):
  τ_ext = M q̈ + C q̇ + g + f − τ, with q̈ differentiated from the joint positions.
- `MomentumObserver` (De Luca et al., the generalized-momentum observer; Haddadin et al. 2017,
  seed 001 ref. [4]): needs no acceleration, and r → τ_ext as a first-order filter of
  time constant 1/K_O per joint.

g and f come either from an identified model (seed 001 eqs. 16–24, `IdentifiedModel`) or
from the URDF's gravity with a configured friction model; M and C always from the URDF. A
payload on the flange (`core/robot/payload.Payload`, a tool) adds its mass to M, C and g in every
case, so carrying a declared tool is not a contact.

A wrist F/T sensor measuring an intended task force (seed 001 §3.1, force/position hybrid
tasks) is removed with `RobotModel.link_wrench_torque` so that pressing on a workpiece is not
taken for a collision.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import math

import numpy as np
import pinocchio as pin

from contact_estimation.core.chain import friction
from contact_estimation.core.chain.derivatives import DerivativeEstimator
from contact_estimation.core.chain.sample import Acceleration
from contact_estimation.core.compiled import kernel
from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.settings import TIMEOUT, WINDOW, checked, setting

if TYPE_CHECKING:
    from contact_estimation.core.identification.identified_model import IdentifiedModel

MODELS = ('fast', 'rnea', 'momentum_observer')

# 1/s: the observer's residual follows τ_ext within ~1/K_O s; beyond this (1 ms) it is the
# raw, unfiltered difference of noisy terms, and 1e308 is no filter at all (as the F/T
# estimator's observer_gain range).
MAX_OBSERVER_GAIN = 1000.0


@dataclass(frozen=True)
@checked
class ResidualConfig:
    """Which residual, and its settings: residual_node's parameters, and the one source of
    their defaults (its parameter table and `make_residual` take them; config/
    residual_node.yaml ships the same values: test/test_node_defaults.py)."""

    model: str = setting(
        'momentum_observer', 'residual: fast (seed 001 eq. 9, g + f only), rnea (inverse '
        'dynamics, seed 003 eq. 7) or momentum_observer (no acceleration needed)',
        choices=MODELS)
    model_file: str = setting('', 'identified gravity + friction YAML; "" = URDF gravity and '
                              'the friction below')
    friction_model: str = setting('coulomb_viscous', 'friction model without model_file',
                                  choices=tuple(friction.MODELS))
    friction_parameters: tuple[float, ...] = setting(
        (0.0, 0.0), 'friction parameters without model_file: k values for every joint, or '
        'n×k flat (row per joint, model joint order)', range=(-1e4, 1e4))
    observer_gain: tuple[float, ...] = setting(
        (50.0,), 'momentum observer gain K_O, 1/s (time constant 1/K_O): each > 0',
        range=(0.1, MAX_OBSERVER_GAIN), per_joint=1)
    # Times in seconds, not samples, so that they mean the same at 1 kHz and at 100 Hz.
    acceleration_window: float = setting(
        0.02, 'time span (s) of the least-squares fit giving q̈ for the rnea residual (at '
        'least 3 samples whatever the rate; lag about half of it)', range=(0.001, 1.0),
        name='acceleration_filter.window_duration', timing=WINDOW)
    gap_threshold: float = setting(  # 5 periods at 100 Hz: one lost message is no gap
        0.05, 'a longer pause in the input (s) restarts the residual', range=(1e-4, 10.0),
        timing=TIMEOUT)

    def __post_init__(self):
        for name in ('friction_parameters', 'observer_gain'):
            value = getattr(self, name)
            object.__setattr__(self, name, tuple(float(x) for x in np.ravel(value)))

    def residual(self, robot_model: RobotModel, identified_model: IdentifiedModel | None = None,
                 payload: Payload = Payload()) -> 'Residual':
        """The residual these settings describe (`identified_model` loaded from model_file
        by the caller)."""
        return make_residual(self.model, robot_model, identified_model, self.friction_model,
                             self.friction_parameters, self.observer_gain, self.gap_threshold,
                             self.acceleration_window, payload)


_DEFAULT = ResidualConfig()


class SampleOrderError(ValueError):
    """A sample whose time is not after the previous one."""


# ----------------------------------------------------------------------- g(q) and f(q̇)
# Each friction model's formula (core/chain/friction.py) compiled as it is written: one loop
# per sample instead of numpy's dispatch of each operation. Identification fits the same
# formulas in numpy, over whole recordings.
_COMPILED_FRICTION = {name: kernel(model.function) for name, model in friction.MODELS.items()}


class StaticTerms:
    """g(q) and f(q̇): from an identified model, or URDF gravity with a configured friction;
    the payload's gravity included either way.

    `robot_model` is the arm without the payload. `friction_params` is n×k (one row per
    joint) or k values shared by every joint, k being the number of parameters of
    `friction_model` (core/chain/friction.py).

    Called at 1 kHz: pinocchio is called directly with only what each term needs (its
    results are new arrays, nothing to copy), and friction whose parameters are all 0 is
    not evaluated (`frictionless`).
    """

    def __init__(self, robot_model: RobotModel, identified: IdentifiedModel | None = None,
                 friction_model: str = _DEFAULT.friction_model,
                 friction_params=_DEFAULT.friction_parameters, payload: Payload = Payload()):
        self.robot = payload.carried_by(robot_model)
        self._model, self._data = self.robot.model, self.robot.data
        self._payload = payload
        self._identified = identified
        if identified is not None:
            model, params = friction.get(identified.friction_model), identified.friction_parameters
        else:
            model = friction.get(friction_model)
            params = per_joint(f'friction_parameters ({friction_model}: '
                               f'{", ".join(model.parameters)})', friction_params,
                               robot_model.n, width=len(model.parameters))
        # friction.joint_friction's call (the identified model's too), compiled, its
        # per-joint parameter columns taken once.
        self._friction_function = _COMPILED_FRICTION[model.name]
        self._friction_columns = tuple(np.ascontiguousarray(column) for column in params.T)
        self.frictionless = not params.any()
        self.friction(np.zeros(robot_model.n))  # numba compiles or loads it now, not live

    def gravity(self, q: np.ndarray) -> np.ndarray:
        if self._identified is None:  # the URDF's, payload included
            return pin.computeGeneralizedGravity(self._model, self._data,
                                                 self.robot.configuration(q))
        # The identified base parameters describe the arm as it was identified, bare.
        gravity = self._identified.gravity(self.robot, q)
        return gravity + self._payload.gravity(self.robot, q) if self._payload else gravity

    def friction(self, v: np.ndarray) -> np.ndarray:
        return self._friction_function(v, *self._friction_columns)

    def inverse_dynamics(self, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
        """M q̈ + C q̇ + g + f, N·m: the URDF's inertia (payload included) with these g and f."""
        torque = pin.rnea(self._model, self._data, self.robot.configuration(q), v, a)
        if self._identified is not None:
            # rnea carries the URDF's gravity; swap in the identified one.
            torque += self.gravity(q) - self.robot.gravity(q)
        if not self.frictionless:
            torque += self.friction(v)
        return torque


# ------------------------------------------------------------------------- sample clock
class _SampleClock:
    """Time steps between samples; starts over on the first sample and after a gap."""

    def __init__(self, gap_threshold: float):
        if not gap_threshold > 0.0:
            raise ValueError(f'gap_threshold must be > 0 s, got {gap_threshold}')
        self.gap_threshold = gap_threshold
        self._t: float | None = None
        self.last_gap = 0.0

    def step(self, t: float) -> float | None:
        """dt since the previous sample, or None to start over (first sample or gap).

        Sets `last_gap` to the length of the gap that made it start over (else 0). A time
        more than `gap_threshold` back is a new time base (the driver or the simulator
        restarted, and the listener accepted it): a gap too, not an error that would drop
        every sample until the old time is passed. A repeated or slightly earlier time
        raises SampleOrderError.
        """
        previous, self.last_gap = self._t, 0.0
        if previous is not None and previous - self.gap_threshold <= t <= previous:
            raise SampleOrderError(f'sample at t = {t:.6f} s is not after the previous one '
                                   f'({previous:.6f} s)')
        self._t = t
        if previous is None:
            return None
        dt = t - previous
        if abs(dt) > self.gap_threshold:
            self.last_gap = abs(dt)
            return None
        return dt

    def reset(self) -> None:
        self._t, self.last_gap = None, 0.0


class Residual:
    """Common interface: `update(t, q, v, tau) -> tau_ext` (n) and `reset()`.

    `t` (s) must increase from one sample to the next (else `SampleOrderError`). After a
    gap longer than `gap_threshold`, forwards or backwards (a restarted time base), a model
    with state starts over instead of integrating over the gap; `last_gap` then holds the
    gap's length (0 otherwise).
    """

    # The q̈ the latest update fitted, to hand on with the sample (None: this residual fits
    # none).
    acceleration: Acceleration | None = None

    def __init__(self, terms: StaticTerms, gap_threshold: float):
        self.robot = terms.robot
        self.terms = terms
        self._clock = _SampleClock(gap_threshold)

    @property
    def last_gap(self) -> float:
        return self._clock.last_gap

    def update(self, t: float, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> np.ndarray:
        return self._update(self._clock.step(t), t, q, v, tau)

    def _update(self, dt: float | None, t: float, q: np.ndarray, v: np.ndarray,
                tau: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def reset(self) -> None:
        self._clock.reset()


class FastResidual(Residual):
    """Seed 001 eq. 9, project sign: τ_ext = g(q) + f(q̇) − τ (no inertial terms, no state)."""

    def _update(self, dt, t, q, v, tau):
        return self.terms.gravity(q) + self.terms.friction(v) - tau


class InverseDynamicsResidual(Residual):
    """Seed 001 eq. 6 / seed 003 eq. 7, project sign: τ_ext = M q̈ + C q̇ + g + f − τ.

    q̈ comes from `acceleration`, a DerivativeEstimator of the joint positions
    (core/chain/joint_state_conditioning.py), restarted with the residual after a gap; it is
    handed on with the sample (`Residual.acceleration`, once its window has filled).
    """

    def __init__(self, terms, gap_threshold, acceleration: DerivativeEstimator):
        super().__init__(terms, gap_threshold)
        self._acceleration = acceleration

    def _update(self, dt, t, q, v, tau):
        if dt is None:
            self._acceleration.reset()
        _, a = self._acceleration.update(t, q)
        fit = self._acceleration
        self.acceleration = Acceleration(fit.duration, a if fit.ready else None)
        return self.terms.inverse_dynamics(q, v, a) - tau

    def reset(self):
        super().reset()
        self._acceleration.reset()


class MomentumObserver(Residual):
    """Generalized-momentum observer (De Luca et al.), project sign, per-joint gain K_O (1/s).

    p = M(q)q̇ and, since Ṁ = C + Cᵀ, ṗ = τ + τ_ext + Cᵀq̇ − g − f. The observer
        r(t) = K_O [p(t) − p(0) − ∫₀ᵗ (τ + Cᵀq̇ − g − f + r) ds]
    obeys ṙ = K_O (τ_ext − r): r follows τ_ext with time constant 1/K_O, without q̈.

    Discrete form, exact for a first-order filter whose input is constant over the step
    (stable for any K_O·dt, so uneven steps need no check):
        r_k = e^{−K dt} r_{k−1} + (1 − e^{−K dt}) [(p_k − p_{k−1})/dt − β̄],
    β = τ + Cᵀq̇ − g − f averaged over the step (trapezoid). The first sample, and the
    first after a gap, set p(0) and r = 0.

    Per sample: M from crba (its upper triangle, mirrored), C from computeCoriolisMatrix,
    g from computeGeneralizedGravity; the rest is one compiled kernel (`_observe`) over
    preallocated arrays, compiled (or loaded from numba's cache) when the observer is built.
    """

    def __init__(self, terms, gap_threshold, gain):
        super().__init__(terms, gap_threshold)
        n = self.robot.n
        self.gain = per_joint('observer_gain', gain, n, 0.0, strict=True, unit=' 1/s',
                              high=MAX_OBSERVER_GAIN)
        self._memory = np.zeros((_MEMORY_ROWS, n))
        self._memory[_DECAY_STEP] = np.nan  # no e^{−K dt} yet
        self._no_friction = np.zeros(n)
        self._r = np.zeros(n)
        zero = np.zeros(n)
        self.update(0.0, zero, zero, zero)  # numba compiles or loads `_observe` now, not live
        self.reset()

    def _update(self, dt, t, q, v, tau):
        model, data, terms = self.robot.model, self.robot.data, self.terms
        configuration = self.robot.configuration(q)
        r = np.empty(self.robot.n)  # the caller keeps it: never written into afterwards
        _observe(pin.crba(model, data, configuration),
                 pin.computeCoriolisMatrix(model, data, configuration, v), terms.gravity(q),
                 self._no_friction if terms.frictionless else terms.friction(v), tau, v,
                 dt is None, 0.0 if dt is None else dt, self.gain, self._memory, self._r, r)
        self._r = r
        return r

    def reset(self):
        super().reset()
        self._r = np.zeros(self.robot.n)


# MomentumObserver's memory between samples, one row each: p and β of the previous sample,
# e^{−K dt} and 1 − e^{−K dt}, and the dt they were computed for (in every column).
_P, _BETA, _DECAY, _RISE, _DECAY_STEP = range(5)
_MEMORY_ROWS = 5


@kernel
def _observe(mass, coriolis, gravity, friction, tau, v, restart, dt, gain, memory,
             r_previous, r):
    """One MomentumObserver step into `r`: p = M q̇ with M's upper triangle (mirrored),
    β = τ + Cᵀq̇ − g − f, then r = 0 on a `restart`, else
    r = e^{−K dt} r_previous + (1 − e^{−K dt}) [(p − p_previous)/dt − (β + β_previous)/2];
    `memory` (rows _P, _BETA, _DECAY, _RISE, _DECAY_STEP) is updated in place. The same
    operations in the same order as the numpy formula, e^{−K dt} again only when dt changes."""
    n = v.shape[0]
    if not restart and dt != memory[_DECAY_STEP, 0]:
        for i in range(n):
            decay = math.exp(-gain[i] * dt)
            memory[_DECAY, i] = decay
            memory[_RISE, i] = 1.0 - decay
            memory[_DECAY_STEP, i] = dt
    for i in range(n):
        p = 0.0
        for j in range(n):
            p += (mass[j, i] if j < i else mass[i, j]) * v[j]
        coriolis_term = 0.0
        for j in range(n):
            coriolis_term += v[j] * coriolis[j, i]
        beta = tau[i] + coriolis_term - gravity[i] - friction[i]
        if restart:
            r[i] = 0.0
        else:
            drive = (p - memory[_P, i]) / dt - 0.5 * (beta + memory[_BETA, i])
            r[i] = memory[_DECAY, i] * r_previous[i] + memory[_RISE, i] * drive
        memory[_P, i] = p
        memory[_BETA, i] = beta


def make_residual(kind: str, robot_model: RobotModel,
                  identified_model: IdentifiedModel | None = None,
                  friction_model: str = _DEFAULT.friction_model,
                  friction_params=_DEFAULT.friction_parameters,
                  observer_gain=_DEFAULT.observer_gain,
                  gap_threshold: float = _DEFAULT.gap_threshold,
                  acceleration_window: float = _DEFAULT.acceleration_window,
                  payload: Payload = Payload()) -> Residual:
    """The residual `kind` ('fast', 'rnea' or 'momentum_observer') of `robot_model` (the
    bare arm) carrying `payload`.

    With `identified_model`, g and f come from it and `friction_model`/`friction_params`
    are not used. `observer_gain` (1/s, one value or one per joint) is for
    'momentum_observer', `acceleration_window` (s of samples in the q̈ fit, at least 3) for
    'rnea'.
    """
    if kind not in MODELS:
        raise ValueError(f'unknown residual model {kind!r}; choose one of {", ".join(MODELS)}')
    terms = StaticTerms(robot_model, identified_model, friction_model, friction_params, payload)
    if kind == 'fast':
        return FastResidual(terms, gap_threshold)
    if kind == 'rnea':
        return InverseDynamicsResidual(terms, gap_threshold,
                                       DerivativeEstimator(duration=acceleration_window))
    return MomentumObserver(terms, gap_threshold, observer_gain)
