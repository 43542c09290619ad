"""A payload's mass and centre of mass from a short joint-state log of the arm carrying it.

The arm's own model (URDF, or an identified gravity and friction: `StaticTerms`) explains
the torque of the bare arm; what is left, r = τ − (M q̈ + C q̇ + g + f), is the payload's
(core/robot/payload.py): r = Y_body(q, q̇, q̈) π, with Y_body that of the tip link's body. Its four
gravity parameters θ = (m, m·c') are fitted by linear least squares over every sample and
joint, with the payload's small rotational inertia m(|c'|²1 − c'c'ᵀ) taken from the previous
estimate (a fixed point, `ROUNDS` rounds). q̈ is the zero-phase (centred) smoothed derivative of
the recorded
velocity. Rest poses and slow motion are enough: the fit needs the flange in several
orientations, since the weight acts along gravity and a centre of mass shifted along the
vertical of every recorded pose leaves no trace in any torque.

How well the log determines θ: the covariance σ² (AᵀA)⁻¹ of the stacked regressor A, with
σ² the residual variance, gives a standard error for the mass and, propagated through
c' = (m·c')/m, for each coordinate of the centre of mass in the tip link's frame.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import uniform_filter1d

from contact_estimation.core.chain.residual import StaticTerms
from contact_estimation.core.identification.identification import (
    IdentificationError,
    check_recording,
)
from contact_estimation.core.identification.recording import JointRecording
from contact_estimation.core.robot.payload import GRAVITY_PARAMETERS, Payload, body_regressor

ROUNDS = 4                    # fixed-point rounds for the payload's rotational inertia
ACCELERATION_SMOOTHING = 0.05  # s, centred moving average over the differentiated velocity
MIN_SAMPLES = 50
MAX_SAMPLES = 4000            # samples used (evenly spread over the log), enough for 4 values
# Beyond these standard errors a value is called poorly determined.
MASS_TOLERANCE = 0.05         # kg
CENTRE_TOLERANCE = 0.005      # m
RANK_TOLERANCE = 1e-6         # relative singular value below which a direction is unseen


@dataclass
class PayloadFit:
    payload: Payload
    mass_error: float             # kg, one standard error
    centre_error: np.ndarray      # m, one standard error per tip-frame axis
    rms: float                    # N·m, what the payload model leaves of the torque residual
    condition: float              # of the column-scaled regressor
    samples: int
    duration: float               # s
    tip_link: str

    def poorly_determined(self) -> list[str]:
        """Values whose standard error exceeds MASS_TOLERANCE / CENTRE_TOLERANCE."""
        weak = ['mass'] if self.mass_error > MASS_TOLERANCE else []
        return weak + [f'centre of mass {axis}' for axis, error in zip('xyz', self.centre_error)
                       if error > CENTRE_TOLERANCE]

    def summary(self) -> str:
        p = self.payload
        lines = [
            f'payload from {self.samples} samples over {self.duration:.1f} s (torque fit RMS '
            f'{self.rms:.3f} N·m, condition number {self.condition:.3g}):',
            f"  mass            {p.mass:8.3f} ± {self.mass_error:.2g} kg",
            *(f'  centre of mass {axis} {value:8.4f} ± {error:.2g} m  (in {self.tip_link})'
              for axis, value, error in zip('xyz', p.centre_of_mass, self.centre_error))]
        weak = self.poorly_determined()
        if weak:
            lines.append(f'poorly determined: {", ".join(weak)} (standard error above '
                         f'{MASS_TOLERANCE} kg / {1e3 * CENTRE_TOLERANCE:g} mm); record more '
                         'rest poses with the flange turned and tilted (joints 4-7) and longer')
        return '\n'.join(lines)


def identify_payload(terms: StaticTerms, recording: JointRecording) -> PayloadFit:
    """The payload that explains what `terms` (the bare arm's model) leaves of the recorded
    torques. IdentificationError if the log cannot determine it, saying what is missing."""
    robot = terms.robot
    if len(recording.t) < MIN_SAMPLES:
        raise IdentificationError(f'{recording.source}: only {len(recording.t)} samples; the '
                                  f'payload fit needs at least {MIN_SAMPLES} (a few seconds)')
    check_recording(recording, robot, min_samples=MIN_SAMPLES)
    t, q, v, tau = recording.t, recording.q, recording.v, recording.effort
    step = float(np.median(np.diff(t)))
    a = uniform_filter1d(np.gradient(v, t, axis=0),
                         max(1, int(round(ACCELERATION_SMOOTHING / step))), axis=0, mode='nearest')
    rows = np.unique(np.linspace(0, len(t) - 1, min(len(t), MAX_SAMPLES)).astype(int))
    regressors = np.array([body_regressor(robot, robot.tip_link, q[k], v[k], a[k])
                           for k in rows])  # N×n×10
    left = np.concatenate([tau[k] - terms.inverse_dynamics(q[k], v[k], a[k]) for k in rows])
    gravity_part = regressors[:, :, :GRAVITY_PARAMETERS].reshape(-1, GRAVITY_PARAMETERS)
    inertia_part = regressors[:, :, GRAVITY_PARAMETERS:].reshape(len(left), -1)
    scale = np.linalg.norm(gravity_part, axis=0)
    if not (scale > 0).all():
        raise IdentificationError(f'{recording.source}: the tip joints never bear the payload\'s '
                                  'weight in this log')
    u, singular, vt = np.linalg.svd(gravity_part / scale, full_matrices=False)
    if singular[-1] < RANK_TOLERANCE * singular[0]:
        raise IdentificationError(f'{recording.source}: the log cannot separate the payload\'s '
                                  f'{_unseen(robot, vt[-1] / scale)}: record rest poses '
                                  'with the flange '
                                  'in several orientations (turn and tilt joints 4-7)')
    payload, theta = Payload(), np.zeros(GRAVITY_PARAMETERS)
    for _ in range(ROUNDS):
        rotational = inertia_part @ payload.parameters(robot)[GRAVITY_PARAMETERS:]
        theta = (vt.T @ ((u.T @ (left - rotational)) / singular)) / scale
        payload = Payload.from_gravity_parameters(robot, theta)
    residual = left - gravity_part @ theta - inertia_part @ payload.parameters(robot)[
        GRAVITY_PARAMETERS:]
    variance = residual @ residual / max(residual.size - GRAVITY_PARAMETERS, 1)
    covariance = variance * (vt.T / singular**2) @ vt / np.outer(scale, scale)
    mass_error = float(np.sqrt(covariance[0, 0]))
    if theta[0] <= 3.0 * mass_error:
        raise IdentificationError(
            f'{recording.source}: the fitted mass, {theta[0]:.3f} ± {mass_error:.3f} kg, is no '
            'payload: the arm carries none, or its model does not match this arm (identify it '
            'bare first with identify fit, then pass --model-file)')
    centre_error = _centre_errors(robot, theta, covariance)
    return PayloadFit(payload, mass_error, centre_error, float(np.sqrt(np.mean(residual**2))),
                      float(singular[0] / singular[-1]), len(rows), float(t[-1] - t[0]),
                      robot.tip_link)


def _centre_errors(robot, theta, covariance) -> np.ndarray:
    """σ of c in the tip link's frame, through c' = h/m (h = m·c'), linearised."""
    mass, moment = theta[0], theta[1:]
    jacobian = np.hstack([-moment[:, None] / mass**2, np.eye(3) / mass])  # ∂c'/∂θ
    rotation = robot.model.frames[robot.frame_id(robot.tip_link)].placement.rotation
    to_tip = rotation.T @ jacobian
    return np.sqrt(np.diag(to_tip @ covariance @ to_tip.T))


def _unseen(robot, direction: np.ndarray) -> str:
    """The combination of (m, m·c') the log leaves undetermined, in words."""
    direction = direction / np.linalg.norm(direction)
    if abs(direction[0]) > 0.9:
        return 'mass'
    rotation = robot.model.frames[robot.frame_id(robot.tip_link)].placement.rotation
    axis = rotation.T @ direction[1:] / np.linalg.norm(direction[1:])
    return (f'centre of mass along {np.array2string(axis, precision=2)} in {robot.tip_link}\'s '
            'frame: the flange kept that axis vertical')
