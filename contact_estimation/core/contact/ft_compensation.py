"""The contact wrench from a 6-axis F/T sensor under the robot's base (seed 004). No ROS.

Seed 004 (patent CN 106182087 A, ../shared/METHODS.md §004) puts the sensor between the base
and joint 1. It reads, eq. 20,

    f = f₀ + f_cB + f_Bd,   m = τ₀ + τ_cB + τ_Bd

the arm's weight (f₀, τ₀: eqs. 9–10), the contact wrench at the base origin (f_cB, τ_cB:
eqs. 4–6) and the reaction of the moving arm (f_Bd, τ_Bd: eqs. 14–18). `BaseWrenchCompensator`
removes the sensor's own offset and f₀ + f_Bd, τ₀ + τ_Bd, which are together the base
reaction of inverse dynamics (`RobotModel.base_wrench`, with the measured q, q̇ and an
estimated q̈, core/chain/derivatives.py): what is left is the contact wrench.
`MomentumWrenchObserver` gets the same without q̈. The two sign conventions meet here without
a flip: a force p acting ON the robot at c (the project's convention) pushes the robot onto
its base with f_cB = p, τ_cB = c × p. The point comes from core/contact/ft_contact.py.

Frames: the base frame of the `RobotModel` (REP 103) unless said otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from contact_estimation.core.compiled import kernel
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel

ROBOT_ON_SENSOR = 'robot_on_sensor'
MOUNT_ON_ROBOT = 'mount_on_robot'
CONVENTIONS = (ROBOT_ON_SENSOR, MOUNT_ON_ROBOT)
COMPENSATIONS = ('momentum_observer', 'acceleration')


# Levi-Civita symbol: a × b = ε a b as one einsum, several times faster than np.cross on the
# few-row arrays of one estimate.
_LEVI_CIVITA = np.zeros((3, 3, 3))
_LEVI_CIVITA[[0, 1, 2], [1, 2, 0], [2, 0, 1]] = 1.0
_LEVI_CIVITA[[0, 1, 2], [2, 0, 1], [1, 2, 0]] = -1.0


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b over the last axis."""
    return np.einsum('ijk,...j,...k->...i', _LEVI_CIVITA, a, b)


class BaseWrench(NamedTuple):
    """A compensated base wrench, from the F/T estimator to the localizer: its stamp (s), its
    frame and [f; m]. In composed mode it is handed over as it is, and its WrenchStamped is
    built only for a subscriber (issue 35: a message per 1 kHz reading that nobody read)."""

    t: float
    frame_id: str
    wrench: np.ndarray


class FtContactError(ValueError):
    """Input the F/T contact estimation cannot use (non-finite, wrong shape, bad setting)."""


def finite_rows(value, size: int, what: str) -> np.ndarray:
    """`value` as a float array of rows of `size` finite numbers; FtContactError naming `what`
    otherwise."""
    array = np.asarray(value, dtype=float)
    if array.shape[-1:] != (size,) or not np.isfinite(array).all():
        raise FtContactError(f'{what} must be finite with {size} values per row, got '
                             f'shape {array.shape}')
    return array


@dataclass(frozen=True)
class SensorMount:
    """Where the sensor sits and which wrench it reports.

    Picture the arm standing on the sensor, the sensor bolted on the mount:

               arm (joint 1 and up)
        ════════════╤════════════   top plate: carries the robot
                    S               sensor frame S: axes R_BS, reference point o_S
        ════════════╧════════════   bottom plate: bolted to the mount
               mount / floor

    `reports`: `ROBOT_ON_SENSOR` — the wrench the robot exerts on the sensor (at rest the
    force points down, the robot's weight: the sim cobot's `ft_wrench`), or
    `MOUNT_ON_ROBOT` — the wrench the mount exerts on the robot (at rest it points up).
    `rotation`: R_BS, the sensor's axes in the base frame (columns). `position`: o_S, the
    point the sensor refers its moments to, in the base frame (m). The sim cobot's sensor:
    robot on sensor, identity, origin.
    """

    reports: str = ROBOT_ON_SENSOR
    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    position: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self):
        if self.reports not in CONVENTIONS:
            raise FtContactError(f'reports must be one of {CONVENTIONS}, got {self.reports!r}')
        rotation = np.asarray(self.rotation, dtype=float)
        if (rotation.shape != (3, 3) or not np.isfinite(rotation).all()
                or not np.allclose(rotation.T @ rotation, np.eye(3), atol=1e-6)
                or np.linalg.det(rotation) < 0):
            raise FtContactError('rotation must be a 3×3 rotation matrix')
        object.__setattr__(self, 'rotation', rotation)
        object.__setattr__(self, 'position', finite_rows(self.position, 3, 'position'))

    @property
    def _sign(self) -> float:
        return 1.0 if self.reports == ROBOT_ON_SENSOR else -1.0

    def to_base(self, reading: np.ndarray) -> np.ndarray:
        """Sensor readings [f; m] (…×6, sensor frame, at o_S) → the wrench of the robot on its
        base, [f; m] at the base origin, base frame: f_B = s R f, m_B = s (R m + o_S × R f)."""
        return self.checked_to_base(finite_rows(reading, 6, 'F/T reading'))

    def checked_to_base(self, reading: np.ndarray) -> np.ndarray:
        """`to_base` of readings already finite, float, …×6 (not checked again)."""
        force = reading[..., :3] @ self.rotation.T
        torque = reading[..., 3:] @ self.rotation.T + cross(self.position, force)
        return self._sign * np.concatenate([force, torque], axis=-1)

    def from_base(self, wrench: np.ndarray) -> np.ndarray:
        """The inverse of `to_base`: what the sensor reads for this robot-on-base wrench."""
        wrench = self._sign * finite_rows(wrench, 6, 'base wrench')
        torque = wrench[..., 3:] - cross(self.position, wrench[..., :3])
        return np.concatenate([wrench[..., :3] @ self.rotation, torque @ self.rotation], axis=-1)


class BaseWrenchCompensator:
    """Seed 004 eq. 20 solved for the contact wrench: reading − offset − (f₀ + f_Bd, τ₀ + τ_Bd).

    The arm's wrench comes from `robot` (its URDF or identified inertial parameters) carrying
    `payload` (core/robot/payload.Payload, the residual's too). `offset` is the sensor's own reading
    with nothing on it, in its frame (`resting_offset` measures it; keeping it across
    restarts is the caller's job).
    """

    def __init__(self, robot: RobotModel, mount: SensorMount | None = None,
                 payload: Payload = Payload(), offset=(0.0,) * 6):
        self.mount = mount or SensorMount()
        self.robot = payload.carried_by(robot)
        self.offset = finite_rows(offset, 6, 'offset')
        self._still = np.zeros(robot.n)

    def arm_wrench(self, q: np.ndarray, v=None, a=None) -> np.ndarray:
        """[f; m] of the arm on its base (base origin, base frame): f₀ + f_Bd, τ₀ + τ_Bd, or
        the weight alone (f₀, τ₀, eqs. 9–10) when v or a is None."""
        if v is None or a is None:
            v = a = self._still
        return np.concatenate(self.robot.base_wrench(q, v, a))

    def static_wrench(self, reading: np.ndarray, q: np.ndarray) -> np.ndarray:
        """R − W₀: the reading as the robot's wrench on its base (base origin, base frame) less
        the arm's weight; the contact wrench when the arm does not move."""
        reading = finite_rows(reading, 6, 'F/T reading')
        return self.mount.checked_to_base(reading - self.offset) - self.arm_wrench(q)

    def contact_wrench(self, reading: np.ndarray, q: np.ndarray, v=None, a=None) -> np.ndarray:
        """[f_cB; τ_cB]: the contact force on the robot and its moment about the base origin,
        base frame (eq. 20). Without v and a the arm's motion is not compensated."""
        reading = finite_rows(reading, 6, 'F/T reading')
        return self.mount.to_base(reading - self.offset) - self.arm_wrench(q, v, a)

    def resting_offset(self, readings: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The sensor's offset (sensor frame) from readings (N×6) on an arm resting at q (N×n):
        the mean of each reading minus what the arm's weight alone would give."""
        readings = np.atleast_2d(finite_rows(readings, 6, 'F/T readings'))
        q = np.atleast_2d(finite_rows(q, self.robot.n, 'joint positions'))
        if len(readings) != len(q) or not len(q):
            raise FtContactError(f'need as many readings as joint positions (≥ 1), got '
                                 f'{len(readings)} and {len(q)}')
        weights = np.array([self.arm_wrench(qk) for qk in q])
        return np.mean(readings - self.mount.from_base(weights), axis=0)


class MomentumWrenchObserver:
    """Seed 004 eq. 20 without q̈: the contact wrench from the arm's momentum, low-passed.

    The arm's momentum h = [P; L] (about the base origin, base frame; `base_momentum`, a
    function of q and q̇ only) changes as ḣ = −(f_Bd, τ_Bd), so the contact wrench is
    W_c = R − W₀ + ḣ (R: the reading as the robot's wrench on its base, W₀ = [f₀; τ₀] its
    weight). As the momentum observer of the joint residual (seed 001) does for τ_ext,

        r(t) = K (h(t) − h(t₀) + ∫ (R − W₀ − r) ds),   so   ṙ = K (W_c − r):

    r follows W_c through a first-order low pass of time constant 1/K (`gain`, 1/s) and
    never differentiates a measurement: the q̈ estimate's error (~0.3 N·m on the sim cobot)
    is gone and the sensor noise is averaged over ~1/K seconds. The integral is implicit
    (stable for any step). Times are the samples' stamps in seconds; a stamp not after the
    last one restarts the observer.

    `static` (R − W₀) and `momentum` (h) of the last update stay readable: the force limit's
    peak residual (`BaseForceResidual`) is built on the same terms.
    """

    def __init__(self, compensator: BaseWrenchCompensator, gain: float):
        if not (np.isfinite(gain) and gain > 0.0):
            raise FtContactError(f'observer gain must be > 0 1/s, got {gain}')
        self.compensator = compensator
        self.gain = float(gain)
        # numba compiles (or loads its cache) here, not on the first reading
        observer_step(np.zeros(6), np.zeros(6), np.zeros(6), np.zeros(6), np.zeros(6), 1.0, 1.0)
        self.reset()

    def reset(self) -> None:
        """Start again at the next sample (its wrench is taken as the momentum's origin)."""
        self._time = None
        self._momentum0 = np.zeros(6)
        self._integral = np.zeros(6)
        self.wrench = self.static = self.momentum = np.zeros(6)

    def update(self, t: float, reading: np.ndarray, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The contact wrench [f_cB; τ_cB] (base origin, base frame, force on the robot) after
        the reading at stamp `t` (s) with the measured q, q̇."""
        compensator = self.compensator
        self.static = static = compensator.static_wrench(reading, q)
        self.momentum = momentum = np.concatenate(compensator.robot.base_momentum(q, v))
        gain = self.gain
        if self._time is None or t <= self._time:
            # start as if in steady state, r = R − W₀ (the weight-only compensation)
            self._time, self._momentum0, self._integral = t, momentum, static / gain
            self.wrench = static
            return self.wrench.copy()
        dt = t - self._time
        self._time = t
        self.wrench = np.empty(6)
        observer_step(self.wrench, self._integral, static, momentum, self._momentum0, gain, dt)
        return self.wrench.copy()


@kernel
def observer_step(wrench, integral, static, momentum, momentum0, gain, dt):
    """One step of `MomentumWrenchObserver` into `wrench` and `integral` (6 each):
    r = K (h − h₀ + I + (R − W₀ − r) dt), I the integral so far, solved for r, then
    I += (R − W₀ − r) dt; each element in numpy's order of the same formula (its bits), in a
    tenth of its time."""
    divisor = 1.0 + gain * dt
    for i in range(6):
        wrench[i] = gain * (momentum[i] - momentum0[i] + integral[i] + static[i] * dt) / divisor
        integral[i] += (static[i] - wrench[i]) * dt


class BaseForceResidual:
    """The contact force from the base F/T over a few ms, for the force limit's check of an
    impact's peak (issue 38). Seed 004 eq. 20 (../shared/METHODS.md §004) with
    f_Bd = −Ṗ (P the arm's linear momentum, `RobotModel.base_momentum`) and Ṗ by the
    difference of P over the shortest span of samples ≥ `window`:

        f̂(t_k) = (P_k − P_i) / (t_k − t_i) + mean(R_f − f₀ over the samples in [t_i, t_k))

    the momentum observer with K → ∞ on a window: the direct base-wrench residual, no low
    pass to attenuate a 9 ms impact (K = 1000/s read a hand's 8 ms impact 2-7 % low and a
    lower arm's 15 % low at 1 kHz). Measured on benchmarks/pfl_sim.py's 20 impacts at 1 kHz
    (2026-11-28, with the readings of (t_i, t_k]): window 1 ms, 17 of 20 peaks within ±10 %
    (the velocity noise over 1 ms: free motion up to 21 N); 2 ms, 20 of 20 (median +3.6 %,
    free motion ≤ 11.6 N, as the K = 1000 observer's); 3 ms, 18; 4 ms, 16 (a hand's
    half-sine averaged away). The noise of a momentum difference falls as 1/span, not
    1/√span.

    The readings of [t_i, t_k), not (t_i, t_k]: the momentum feels a reading's force over the
    step after it (P_{k+1} = P_k + Δt (f_c − (R_f − f₀)_k) in the simulator, exactly; a 1 kHz
    controller's torque is held so too), so the arm's own reaction stepping with the
    controller (the detector's stop at an impact's peak: 31 → 170 N in one reading on the
    simulated lower arm at 1 m/s) swung the newest-reading residual by half the step, there
    down over the peak (232 N read 200 N). `newest` (the same with the newest reading in
    place of the oldest) says first that a force has come, with one reading each 4 ms at
    rest: it starts `PeakForceTracker`'s burst.

    Samples (stamp s, static force R_f − f₀ N, linear momentum P kg·m/s, base frame) come in
    stamp order, or earlier than the last ones (a backfill: inserted in order); a stamp
    `RESTART` s before the newest restarts it (a new time base). Only the last `_KEPT` are
    kept: a window is a few samples."""

    _KEPT = 16
    RESTART = 1.0   # s

    def __init__(self, window: float):
        if not (np.isfinite(window) and window > 0.0):
            raise FtContactError(f'peak window must be > 0 s, got {window}')
        self.window = float(window)
        self._samples: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.newest = np.zeros(3)   # the last residual with the newest reading (above)

    def add(self, t: float, static_force: np.ndarray, momentum: np.ndarray) -> np.ndarray | None:
        """Add a sample; the contact force at `t` (N, base frame) from it and the samples
        before it, None while none is `window` s earlier."""
        samples = self._samples
        if samples and t < samples[-1][0] - self.RESTART:
            samples.clear()
        at = len(samples)
        while at and samples[at - 1][0] >= t:
            at -= 1
        if at < len(samples) and samples[at][0] == t:
            samples[at] = (t, static_force, momentum)   # the same stamp again: replaced
        else:
            samples.insert(at, (t, static_force, momentum))
        if len(samples) > self._KEPT:
            del samples[0]
            at -= 1
        return self._residual(at)

    def _residual(self, k: int) -> np.ndarray | None:
        samples = self._samples
        t, _, momentum = samples[k]
        i = k - 1
        while i >= 0 and samples[i][0] > t - self.window * (1.0 + 1e-6):
            i -= 1
        if i < 0:
            return None
        t_i, static, momentum_i = samples[i]
        if i < k - 1:   # more than one reading in the window (a burst): their mean
            static = sum(sample[1] for sample in samples[i:k]) / (k - i)
        force = (momentum - momentum_i) / (t - t_i) + static
        self.newest = force + (samples[k][1] - samples[i][1]) / (k - i)
        return force
