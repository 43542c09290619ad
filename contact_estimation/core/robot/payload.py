"""A payload on the flange (a tool, a held part): its dynamics, and its identification.

The payload is a point mass m at c (m, in the frame of the link carrying it: by default the
robot's tip link, the flange or the hand). It adds to the body moved by that link's joint,
whose dynamic parameters in the joint's frame are linear in m and m·c' (c' = c expressed in
the joint frame) for gravity, plus a rotational inertia m(|c'|²1 − c'c'ᵀ) about the joint
origin. So the joint torque the payload needs is, with Y_body the 10 columns of pinocchio's
joint-torque regressor for that body (the same regressor seed 001 eqs. 18, 22 identify the
arm's gravity on),

    τ_payload(q, q̇, q̈) = Y_body(q, q̇, q̈) π(m, c'),   π = (m, m c'_x, m c'_y, m c'_z, I…)

and its gravity torque is the first four columns at q̇ = q̈ = 0. `identify_payload` fits the
four gravity parameters (m, m·c') by linear least squares on the torque residual a
recording leaves with the arm's own model, with the small rotational term taken from the
previous estimate (a fixed point reached in a few rounds), and says how well the recording
determines each of them. The residual (core/chain/residual.py), the F/T base-wrench compensation
(core/contact/ft_compensation.py) and the simulated cobot (core/sim) all take a `Payload`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.settings import LINK, checked, setting

_PARAMETERS_PER_BODY = 10   # pinocchio's dynamic parameter vector per body
GRAVITY_PARAMETERS = 4      # m, m·c'_x, m·c'_y, m·c'_z


@dataclass(frozen=True)
@checked
class Payload:
    """A tool or a held part: a point mass `mass` (kg) at `centre_of_mass` (m) in the frame
    of `link` ('' = the robot's tip link)."""

    mass: float = setting(0.0, 'mass of the tool or part on payload.link, kg (0 = none): '
                          'part of the arm, so carrying it is not a contact',
                          range=(0.0, 1000.0))
    centre_of_mass: tuple[float, float, float] = setting(
        (0.0, 0.0, 0.0), 'payload centre of mass, m, in the frame of payload.link '
        '(contact-estimation identify payload estimates it and the mass)', range=(-10.0, 10.0),
        size=3)
    link: str = setting('', "link carrying the payload ('' = tip_link)", names=LINK)

    def __post_init__(self):
        centre = np.asarray(self.centre_of_mass, dtype=float).ravel()
        if centre.size != 3:
            raise ValueError(f'payload.centre_of_mass must be 3 values (m, in the frame of '
                             f'{self.link or "the tip link"}), got {list(self.centre_of_mass)}')
        object.__setattr__(self, 'mass', float(self.mass))
        object.__setattr__(self, 'centre_of_mass', tuple(float(x) for x in centre))

    def __bool__(self) -> bool:
        return self.mass > 0.0

    def carrier(self, robot: RobotModel) -> str:
        """The link of `robot` that carries the payload."""
        return self.link or robot.tip_link

    def carried_by(self, robot: RobotModel) -> RobotModel:
        """`robot` with this payload on its link (itself when there is none). RobotModelError
        (a ValueError) for a link that is not on the moving chain."""
        return robot.with_payload(self.mass, self.centre_of_mass, self.link) if self else robot

    def parameters(self, robot: RobotModel) -> np.ndarray:
        """π: the payload's 10 dynamic parameters in the frame of the joint moving its link."""
        placement = robot.model.frames[robot.frame_id(self.carrier(robot))].placement
        return pin.Inertia(self.mass, placement.act(np.asarray(self.centre_of_mass)),
                           np.zeros((3, 3))).toDynamicParameters()

    def gravity(self, robot: RobotModel, q) -> np.ndarray:
        """The payload's share of g(q), N·m."""
        zero = np.zeros(robot.n)
        return (body_regressor(robot, self.carrier(robot), q, zero, zero)[:, :GRAVITY_PARAMETERS]
                @ self.parameters(robot)[:GRAVITY_PARAMETERS])

    @classmethod
    def from_gravity_parameters(cls, robot: RobotModel, values) -> 'Payload':
        """The payload whose (m, m·c'_x, m·c'_y, m·c'_z), in the tip joint's frame, are `values`."""
        mass, moment = float(values[0]), np.asarray(values[1:4], dtype=float)
        placement = robot.model.frames[robot.frame_id(robot.tip_link)].placement
        centre = placement.actInv(moment / mass) if mass > 0.0 else np.zeros(3)
        return cls(max(mass, 0.0), tuple(centre))


def body_regressor(robot: RobotModel, link: str, q, v, a) -> np.ndarray:
    """Y_body(q, q̇, q̈), n×10: the joint-torque regressor columns of the body `link` is on."""
    robot.check_moving_link(link)
    joint = robot.model.frames[robot.frame_id(link)].parentJoint
    full = pin.computeJointTorqueRegressor(robot.model, robot.data, robot.configuration(q),
                                           np.asarray(v, dtype=float), np.asarray(a, dtype=float))
    start = _PARAMETERS_PER_BODY * (joint - 1)
    return full[:, start:start + _PARAMETERS_PER_BODY]
