"""The intended task force of a force/position hybrid task, measured by a wrist F/T sensor,
as the joint torque residual_node removes from τ_ext (seed 001 §3.1).

Rules (each one fail safe: a wrench that breaks one is not removed, so the task force then
counts as a contact):
- frame: the wrench must be given in the wrist link's frame (or carry no frame_id);
- values: finite;
- freshness: its stamp within `timeout` seconds of the joint state it is removed from;
- sign: the project's, the wrench acting ON the robot (RobotModel.link_wrench_torque);
  a sensor that reports the wrench the tool exerts on the environment is negated.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contact_estimation.core.input_rejected import NOT_FINITE, UNKNOWN_FRAME, InputRejected
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.settings import LINK, checked, setting


@dataclass(frozen=True)
@checked
class WristWrenchConfig:
    """residual_node's `wrist_wrench.*` parameters, and the one source of their defaults (its
    parameter table takes them; config/residual_node.yaml ships the same values)."""

    enabled: bool = setting(False, 'remove the wrench measured by a wrist F/T sensor '
                            '(intended task force)')
    link: str = setting('', 'link whose frame the wrist wrench is given in ("" = tip_link)',
                        names=LINK)
    timeout: float = setting(
        0.05, 'a wrist wrench further than this (s) from the joint state stamp is not used '
        '(the task force then counts as a contact: fail safe)', range=(1e-3, 10.0))
    on_robot: bool = setting(
        True, 'true: the sensor reports the wrench the environment exerts on the robot; '
        'false: the wrench the tool exerts on the environment')

    def wrist(self, robot: RobotModel) -> 'WristWrench | None':
        """The WristWrench these settings describe; None when disabled."""
        if not self.enabled:
            return None
        return WristWrench(robot, self.link or robot.tip_link, self.timeout, self.on_robot)


class WristWrench:
    """The latest acceptable wrench at `link`, and its joint torque at a joint state."""

    def __init__(self, robot: RobotModel, link: str, timeout: float, on_robot: bool):
        self.robot, self.link, self.timeout = robot, link, float(timeout)
        self._sign = 1.0 if on_robot else -1.0
        robot.check_moving_link(link)  # RobotModelError (a ValueError) off the chain
        self._latest: tuple[float, np.ndarray, np.ndarray] | None = None

    def receive(self, t: float, frame_id: str, force, torque) -> None:
        """Keep a wrench stamped `t` (s); InputRejected ('unknown_frame', 'not_finite') when
        it breaks a rule."""
        if frame_id and frame_id != self.link:
            raise InputRejected(UNKNOWN_FRAME, f'wrist wrench in frame {frame_id!r}, expected '
                                f'{self.link!r}: dropped')
        force, torque = np.asarray(force, dtype=float), np.asarray(torque, dtype=float)
        if not (np.isfinite(force).all() and np.isfinite(torque).all()):
            raise InputRejected(NOT_FINITE, 'wrist wrench with NaN/inf: dropped')
        self._latest = (t, self._sign * force, self._sign * torque)

    def joint_torque(self, t: float, q: np.ndarray) -> np.ndarray | None:
        """J_wristᵀ w of the latest wrench at the joint state (t, q); None when no wrench
        came within `timeout` of t (nothing is then removed)."""
        if self._latest is None or abs(self._latest[0] - t) > self.timeout:
            return None
        _, force, torque = self._latest
        return self.robot.link_wrench_torque(q, self.link, force, torque)
