"""residual_node: joint state (position, velocity, torque) → external joint torque τ_ext.

Reads the listener's conditioned joint state (model joint order, effort = joint torque),
runs one of the residuals of core/residual.py and publishes τ_ext (N·m, project sign:
τ_ext = J(p)ᵀF for a force F on the robot) as a JointState whose effort is τ_ext, with the
stamp of the sample it came from. With a wrist F/T sensor (force/position hybrid tasks,
seed 001 §3.1) the measured task wrench is removed, so that only unintended contacts remain.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from sensor_msgs.msg import JointState

from contact_estimation import manifest
from contact_estimation.core import friction
from contact_estimation.core.identified_model import IdentifiedModel, ModelFileError
from contact_estimation.core.residual import Residual, SampleOrderError, make_residual
from contact_estimation.ros import params
from contact_estimation.ros.conversions import stamp_to_seconds, wrench_to_arrays
from contact_estimation.ros.diagnostics import OK, ProblemCounter
from contact_estimation.ros.joint_states import JointStateError, JointStateReader
from contact_estimation.ros.node_main import StartupError, run
from contact_estimation.ros.qos import PIPELINE_QOS, SENSOR_QOS

NAME = 'residual_node'

# Parameters that choose and tune the residual; any change rebuilds it (and restarts it).
_RESIDUAL_PARAMETERS = ('model', 'model_file', 'friction_model', 'friction_parameters',
                        'observer_gain', 'gap_threshold', 'wrist_wrench_enabled', 'wrist_link',
                        'wrist_wrench_timeout', 'wrist_wrench_on_robot')


@dataclass
class _Setup:
    """What the parameters build: the residual and how to use the wrist sensor."""

    residual: Residual
    description: str
    wrist_enabled: bool
    wrist_link: str
    wrist_timeout: float
    wrist_sign: float


class ResidualNode(Node):
    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        spec = manifest.node(NAME)
        try:
            self.robot = params.declare_robot(self)
            self._declare_residual_parameters()
            self._setup = self._build({n: self.get_parameter(n).value
                                       for n in _RESIDUAL_PARAMETERS})
        except (ValueError, ModelFileError, ParameterException) as err:
            raise StartupError(f'{NAME}: {err}') from err
        self._joint_names = list(self.robot.joint_names)
        self._joint_states = JointStateReader(self._joint_names, model_order_only=True)
        self._wrench: tuple[float, np.ndarray, np.ndarray] | None = None
        self.problems = ProblemCounter(self)
        self.problems.set_status(OK, self._setup.description)
        self._publisher = self.create_publisher(JointState, spec.topic('residual'), PIPELINE_QOS)
        self.create_subscription(JointState, spec.topic('joint_state'), self._on_joint_state,
                                 SENSOR_QOS)
        self.create_subscription(WrenchStamped, spec.topic('wrist_wrench'), self._on_wrench,
                                 SENSOR_QOS)
        params.on_change(self, self._on_parameter_change)
        self.get_logger().info(f'{self._setup.description}; reading '
                               f'{spec.topic("joint_state")}, publishing {spec.topic("residual")}')

    # ------------------------------------------------------------------ parameters
    def _declare_residual_parameters(self) -> None:
        params.declare(self, 'model', 'momentum_observer',
                       'residual: fast (seed 001 eq. 9, g + f only), rnea (inverse dynamics, '
                       'seed 003 eq. 7) or momentum_observer (no acceleration needed)')
        params.declare(self, 'model_file', '',
                       'identified gravity + friction YAML; "" = URDF gravity and the '
                       'friction below')
        params.declare(self, 'friction_model', 'coulomb_viscous',
                       f'friction model without model_file: {", ".join(friction.MODELS)}')
        params.declare(self, 'friction_parameters', [0.0, 0.0],
                       'friction parameters without model_file: k values for every joint, or '
                       'n×k flat (row per joint, model joint order)')
        params.declare(self, 'observer_gain', [50.0],
                       'momentum observer gain K_O, 1/s (time constant 1/K_O): one value or one '
                       'per joint')
        params.declare(self, 'gap_threshold', 0.05,
                       'a longer pause in the input (s) restarts the residual', 1e-4, 10.0)
        params.declare(self, 'wrist_wrench_enabled', False,
                       'remove the wrench measured by a wrist F/T sensor (intended task force)')
        params.declare(self, 'wrist_link', '',
                       'link whose frame the wrist wrench is given in ("" = tip_link)')
        params.declare(self, 'wrist_wrench_timeout', 0.05,
                       'a wrist wrench further than this (s) from the joint state stamp is not '
                       'used (the task force then counts as a contact: fail safe)', 1e-3, 10.0)
        params.declare(self, 'wrist_wrench_on_robot', True,
                       'true: the sensor reports the wrench the environment exerts on the '
                       'robot; false: the wrench the tool exerts on the environment')

    def _build(self, values: dict) -> _Setup:
        """The residual these parameter values describe; ValueError/ModelFileError if bad."""
        identified = None
        if values['model_file']:
            identified = IdentifiedModel.load(values['model_file'], self.robot)
        residual = make_residual(
            values['model'], self.robot, identified, values['friction_model'],
            list(values['friction_parameters']), list(values['observer_gain']),
            values['gap_threshold'])
        wrist_link = values['wrist_link'] or self.robot.tip_link
        if values['wrist_wrench_enabled']:
            self.robot.check_moving_link(wrist_link)
        source = (f'identified model {values["model_file"]}' if identified else
                  f'URDF gravity, {values["friction_model"]} friction')
        wrist = f', wrist wrench at {wrist_link} removed' if values['wrist_wrench_enabled'] else ''
        return _Setup(residual, f'{values["model"]} residual ({source}{wrist})',
                      values['wrist_wrench_enabled'], wrist_link,
                      values['wrist_wrench_timeout'],
                      1.0 if values['wrist_wrench_on_robot'] else -1.0)

    def _on_parameter_change(self, changes: dict) -> str | None:
        if not any(name in _RESIDUAL_PARAMETERS for name in changes):
            return None
        values = {n: self.get_parameter(n).value for n in _RESIDUAL_PARAMETERS} | changes
        try:
            self._setup = self._build(values)
        except (ValueError, ModelFileError) as err:
            return str(err)
        self._wrench = None
        self.problems.set_status(OK, self._setup.description)
        self.get_logger().info(f'now: {self._setup.description}')
        return None

    # -------------------------------------------------------------------- messages
    def _on_wrench(self, msg: WrenchStamped) -> None:
        frame = msg.header.frame_id
        if frame and frame != self._setup.wrist_link:
            self.problems.report('wrist_wrench_frame', f'wrist wrench in frame {frame!r}, '
                                 f'expected {self._setup.wrist_link!r}: dropped')
            return
        force, torque = wrench_to_arrays(msg)
        if not (np.isfinite(force).all() and np.isfinite(torque).all()):
            self.problems.report('wrist_wrench_not_finite', 'wrist wrench with NaN/inf: dropped')
            return
        sign = self._setup.wrist_sign
        self._wrench = (stamp_to_seconds(msg.header.stamp), sign * force, sign * torque)

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            q, v, tau = self._joint_states.read(msg)
        except JointStateError as err:
            self.problems.report(err.kind, str(err))
            return
        t = stamp_to_seconds(msg.header.stamp)
        setup = self._setup
        try:
            tau_ext = setup.residual.update(t, q, v, tau)
        except SampleOrderError as err:
            self.problems.report('out_of_order', f'{err}: dropped')
            return
        if setup.residual.last_gap:
            self.problems.report('gap', f'joint-state time jumped by '
                                 f'{setup.residual.last_gap:.3f} s (a pause, or a restarted '
                                 f'clock): residual restarted')
        if setup.wrist_enabled:
            tau_ext = tau_ext - self._wrist_torque(t, q, setup)
        if not np.isfinite(tau_ext).all():
            # Finite inputs whose model terms overflow: an observer that integrated it would
            # stay NaN. Start over and publish nothing; the detector's timeout stops the arm
            # if this persists.
            setup.residual.reset()
            self.problems.report('non_finite_residual', 'τ_ext came out NaN/inf: residual '
                                 'restarted, sample dropped')
            return
        out = JointState(header=msg.header, name=self._joint_names, position=msg.position,
                         velocity=msg.velocity, effort=tau_ext.tolist())
        self._publisher.publish(out)
        self.problems.traffic['residuals_published'] += 1

    def _wrist_torque(self, t: float, q: np.ndarray, setup: _Setup) -> np.ndarray:
        """J_wristᵀ w of the latest wrist wrench, or zero (reported) when it is not current."""
        if self._wrench is None or abs(self._wrench[0] - t) > setup.wrist_timeout:
            self.problems.report('wrist_wrench_stale', 'no wrist wrench within '
                                 f'{setup.wrist_timeout} s of the joint state: task force not '
                                 'removed')
            return np.zeros(self.robot.n)
        _, force, torque = self._wrench
        return self.robot.link_wrench_torque(q, setup.wrist_link, force, torque)


def main(args=None):
    return run(ResidualNode, args)


if __name__ == '__main__':
    sys.exit(main())
