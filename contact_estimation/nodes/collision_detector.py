"""collision_detector: τ_ext → stop signal, collision events, rviz markers, time scaling.

Runs the detector of core/detector.py (seed 001 eq. 7, role and speed-dependent thresholds
capped at `threshold_max`, latched, fail-safe) on every residual and the reaction of
core/time_scaling.py (seed 003 eqs. 8–11). Two outputs, two meanings:
- stop (std_msgs/Bool, True = stop), the latched safety signal: reliable and transient-local,
  published on every change and as a heartbeat; it stays True after a collision until
  `~/reset` (or `hold_time`), and a controller must treat a missing heartbeat as stop;
- time scaling f_S (std_msgs/Float64), the seed 003 reaction: it follows the contact itself,
  0 while a collision is detected and `time_scaling_resume_delay` after it, negative while
  the arm is pushed back along its path, then back to 1 by itself, even while the stop is
  still latched; it is 0 whenever the input is waiting, stale or invalid.
Collision events are diagnostic_msgs/DiagnosticArray, one status each, header stamped with
the joint-state time of the residual that triggered them. docs/collision_events.md has the
fields and what a controller must do.

Fail-safe: before the first residual, after `input_timeout` without one (or a gap that long
between two), while the listener reports stale joint states, and on a non-finite residual,
stop is True. A message of the wrong size is dropped and counted; it does not restart the
timeout, so a stream of them stops the arm within `input_timeout`.
"""
from __future__ import annotations

import sys
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

from contact_estimation import manifest
from contact_estimation.core.detector import (COLLISION, DEFAULTS, INVALID, NONE, STALE,
                                              WAITING, DetectorConfig, DetectorState)
from contact_estimation.core.detector import CollisionDetector as Detector
from contact_estimation.core.joint_state_conditioning import DerivativeEstimator
from contact_estimation.core.time_scaling import (TimeScaling, TimeScalingConfig,
                                                  worth_publishing)
from contact_estimation.ros import params
from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds
from contact_estimation.ros.diagnostics import ERROR, OK, WARN, ProblemCounter, level_byte
from contact_estimation.ros.joint_states import JointStateError, JointStateReader
from contact_estimation.ros.node_main import StartupError, run
from contact_estimation.ros.qos import PIPELINE_QOS, SENSOR_QOS, STOP_QOS

NAME = 'collision_detector'

# Parameter name → DetectorConfig field.
_DETECTOR_PARAMETERS = {
    'thresholds_position': 'thresholds_position', 'thresholds_force': 'thresholds_force',
    'joint_roles': 'roles', 'consecutive_samples': 'consecutive_samples',
    'speed_gain': 'speed_gain', 'acceleration_gain': 'acceleration_gain',
    'threshold_max': 'threshold_max', 'hold_time': 'hold_time',
    'reset_quiet_time': 'reset_quiet_time', 'input_timeout': 'input_timeout',
}
# Parameter name → TimeScalingConfig field.
_SCALING_PARAMETERS = {
    'time_scaling_alpha': 'alpha', 'time_scaling_push_threshold': 'push_threshold',
    'time_scaling_recovery_rate': 'recovery_rate', 'time_scaling_resume_delay': 'resume_delay',
}
_SCALING_DEFAULTS = TimeScalingConfig()
_EVENT_LEVELS = {NONE: OK, WAITING: WARN}
_MARKER_NS = 'collision'


class CollisionDetector(Node):
    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        spec = manifest.node(NAME)
        self.robot = params.declare_robot(self)  # StartupError when it cannot be loaded
        try:
            self._declare_parameters()
            self.detector = Detector(self._detector_config({}))
            self.scaling = TimeScaling(self._scaling_config({}))
            self._acceleration = DerivativeEstimator(self._value('acceleration_window'))
        except (ValueError, ParameterException) as err:
            raise StartupError(f'{NAME}: {err}') from err
        self._names = list(self.robot.joint_names)
        self._joint_states = JointStateReader(self._names)
        self._q: np.ndarray | None = None          # latest joint positions (markers)
        self._q_stamp = seconds_to_stamp(0.0)       # stamp of the message they came in
        self._stamp = seconds_to_stamp(0.0)         # stamp of the latest residual
        self._published: DetectorState | None = None
        self._scaling_sent: float | None = None    # f_S last published
        self._shown_joints: tuple[int, ...] = ()

        self.problems = ProblemCounter(self, hardware_id=self.robot.name)
        self._stop_pub = self.create_publisher(Bool, spec.topic('stop'), STOP_QOS)
        self._scaling_pub = self.create_publisher(Float64, spec.topic('time_scaling'),
                                                  PIPELINE_QOS)
        # Transient local like the stop: a subscriber that starts late gets the last events.
        self._event_pub = self.create_publisher(DiagnosticArray, spec.topic('events'),
                                                STOP_QOS)
        self._marker_pub = self.create_publisher(MarkerArray, spec.topic('markers'),
                                                 PIPELINE_QOS)
        self.create_subscription(JointState, spec.topic('residual'), self._on_residual,
                                 SENSOR_QOS)
        self.create_subscription(Bool, spec.topic('input_stale'), self._on_input_stale,
                                 STOP_QOS)
        self.create_service(Trigger, '~/reset', self._on_reset)
        self.create_timer(1.0 / self._value('watchdog_rate'), self._on_watchdog)
        self.create_timer(1.0 / self._value('heartbeat_rate'), self._on_heartbeat)
        params.on_change(self, self._on_parameter_change)
        self._apply(self.detector.state(time.monotonic()))
        self.get_logger().info(
            f'watching {len(self._names)} joints of {self.robot.name or "the robot"} on '
            f'{spec.topic("residual")}; stop on {spec.topic("stop")}')

    # ------------------------------------------------------------------ parameters
    def _declare_parameters(self) -> None:
        """Every parameter, with the defaults of core/detector.DEFAULTS and TimeScalingConfig."""
        d, k, ts = params.declare, DEFAULTS, _SCALING_DEFAULTS
        d(self, 'thresholds_position', [float(k['thresholds_position'])], 'ψ_0 of '
          'position-controlled joints, N·m: one value for all joints or one per joint '
          '(seed 001: 4 N·m)')
        d(self, 'thresholds_force', [float(k['thresholds_force'])], 'ψ_0 of force-controlled '
          'joints, N·m: one value or one per joint (seed 001: 8 N·m)')
        d(self, 'joint_roles', [k['roles']], "each joint's role, 'position' or 'force' "
          '(one for all joints or one per joint); switchable at run time')
        d(self, 'consecutive_samples', k['consecutive_samples'], 'n of seed 001 eq. 7: samples '
          'over threshold in a row that make a collision', 1, 10000)
        d(self, 'speed_gain', [float(k['speed_gain'])], 'k_v, N·m per rad/s: ψ grows by '
          'k_v |q̇| (one or per joint)')
        d(self, 'acceleration_gain', [float(k['acceleration_gain'])], 'k_a, N·m per rad/s²: '
          'ψ grows by k_a |q̈| (one or per joint)')
        d(self, 'threshold_max', [float(k['threshold_max'])], 'ψ_max, N·m: cap of ψ so that '
          'fast motion never hides a contact this strong (one or per joint, >= ψ_0)')
        d(self, 'acceleration_window', 20, 'samples of the quadratic fit to q that gives q̈ '
          'for the acceleration term (lag ≈ half of it)', 3, 1000, read_only=True)
        d(self, 'hold_time', k['hold_time'], 'stop clears this long after the last unsafe '
          'sample, s; 0 = latched until the ~/reset service', 0.0, 3600.0)
        d(self, 'reset_quiet_time', k['reset_quiet_time'], 'the stop clears (reset or '
          'hold_time) only after every joint was under threshold this long and for '
          'consecutive_samples samples, s', 0.0, 60.0)
        d(self, 'input_timeout', k['input_timeout'], 'no residual for this long → stop, s',
          0.001, 10.0)
        d(self, 'watchdog_rate', 50.0, 'rate of the input timeout check, Hz: a stop for missing '
          'input comes at most input_timeout + 1/watchdog_rate late', 10.0, 2000.0,
          read_only=True)
        d(self, 'heartbeat_rate', 20.0, 'rate at which stop and f_S are republished, Hz', 1.0, 1000.0,
          read_only=True)
        d(self, 'time_scaling_alpha', ts.alpha, 'seed 003 α: yield speed (fraction of '
          'nominal) per N·m of push back beyond the push threshold, 1/(N·m)', 0.0, 100.0)
        d(self, 'time_scaling_push_threshold', ts.push_threshold, 'a push back along the path '
          'weaker than this only holds the arm, N·m', 0.0, 1000.0)
        d(self, 'time_scaling_recovery_rate', ts.recovery_rate, 'f_S returns from 0 to 1 at '
          'this rate once the contact is over, 1/s', 1e-3, 1000.0)
        d(self, 'time_scaling_resume_delay', ts.resume_delay, 'f_S stays 0 this long after the '
          'residuals fall back under threshold, s', 0.0, 60.0)

    def _value(self, name: str):
        return self.get_parameter(name).value

    def _detector_config(self, changes: dict) -> DetectorConfig:
        return DetectorConfig.build(self.robot.joint_names, **{
            field: changes.get(p, self._value(p)) for p, field in _DETECTOR_PARAMETERS.items()})

    def _scaling_config(self, changes: dict) -> TimeScalingConfig:
        return TimeScalingConfig(**{field: changes.get(p, self._value(p))
                                    for p, field in _SCALING_PARAMETERS.items()})

    def _on_parameter_change(self, changes: dict) -> str | None:
        """Validate and apply detector and time-scaling parameters; a bad value is refused."""
        config = self._detector_config(changes) if set(changes) & set(_DETECTOR_PARAMETERS) \
            else None
        scaling = self._scaling_config(changes) if set(changes) & set(_SCALING_PARAMETERS) \
            else None
        if config is not None:
            if not self.detector.config.acceleration_gain.any() and config.acceleration_gain.any():
                self._acceleration.reset()  # switched on again: old samples are out of date
            self.detector.configure(config)
            self.get_logger().info(f'thresholds now {np.round(config.base_thresholds, 3)} N·m, '
                                   f'roles {list(config.roles)}, n = {config.consecutive_samples}')
        if scaling is not None:
            self.scaling.config = scaling
        return None

    # -------------------------------------------------------------------- messages
    def _on_residual(self, msg: JointState) -> None:
        now = time.monotonic()
        self.problems.traffic['residuals_received'] += 1
        try:
            order = self._joint_states.order(msg)
        except JointStateError as err:
            self.problems.report(err.kind, str(err))
            return
        tau_ext = self._joint_states.field(msg, 'effort', order)
        if tau_ext is None:
            self.problems.report('wrong_size', f'residual with {len(msg.effort)} efforts for '
                                 f'{len(msg.name) or len(self._names)} joints: dropped')
            return
        if not np.isfinite(tau_ext).all():
            self.problems.report('non_finite_residual', 'residual with NaN/inf: stop')
        velocity = self._velocity(msg, order)
        position = self._remember_position(msg, order)
        acceleration = self._acceleration_of(msg, position)
        self._stamp = msg.header.stamp
        state = self.detector.update(now, tau_ext, velocity, acceleration)
        self._apply(state, react=(now, tau_ext, velocity))

    def _velocity(self, msg: JointState, order: np.ndarray) -> np.ndarray | None:
        """q̇ from the residual message (residual_node copies it from its joint state).

        None when missing or not finite: the thresholds then fall back to ψ_0, the most
        sensitive setting, which errs on the safe side.
        """
        velocity = self._joint_states.field(msg, 'velocity', order)
        if velocity is not None and not np.isfinite(velocity).all():
            self.problems.report('invalid_velocity', 'velocity with NaN/inf: thresholds '
                                 'without the speed term')
            return None
        return velocity

    def _remember_position(self, msg: JointState, order: np.ndarray) -> np.ndarray | None:
        """The message's finite positions in model order (kept for the markers), or None."""
        position = self._joint_states.field(msg, 'position', order)
        if position is None or not np.isfinite(position).all():
            return None
        self._q, self._q_stamp = position, msg.header.stamp
        return position

    def _acceleration_of(self, msg: JointState, position: np.ndarray | None):
        """q̈ from a quadratic fit over the recent positions, when the thresholds use it.

        None (ψ without the q̈ term: the more sensitive side) until the fit has a full
        window of samples: at start, after a stamp that does not increase (the estimator
        restarts from that sample) and after the acceleration gain is switched on again.
        """
        if position is None or not self.detector.config.acceleration_gain.any():
            return None
        t = stamp_to_seconds(msg.header.stamp)
        try:
            acceleration = self._acceleration.update(t, position)[1]
        except ValueError as err:  # a stamp that does not increase
            self.problems.report('stamp_order', f'residual stamp: {err}; q̈ estimate restarted')
            self._acceleration.reset()
            acceleration = self._acceleration.update(t, position)[1]
        return acceleration if self._acceleration.ready else None

    def _on_input_stale(self, msg: Bool) -> None:
        self.detector.set_input_stale(msg.data)
        self._apply(self.detector.state(time.monotonic()))

    def _on_watchdog(self) -> None:
        """The fail-safe clock: input timeout and hold-time release even without input."""
        now = time.monotonic()
        state = self.detector.state(now)
        self._apply(state, react=(now, None, None) if state.input_problem in (WAITING, STALE)
                    else None)

    def _on_heartbeat(self) -> None:
        """Stop and f_S again, and the markers while shown (they follow the arm)."""
        self._publish_stop()
        if self._scaling_sent is not None:
            self._scaling_pub.publish(Float64(data=self._scaling_sent))
        if self._shown_joints and self._published is not None:
            self._publish_markers(self._published)

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response):
        refusal = self.detector.reset(time.monotonic())
        response.success = not refusal
        response.message = refusal or 'stop cleared'
        if refusal:
            self.get_logger().warning(f'reset refused: {refusal}')
        else:
            self.get_logger().info('stop cleared by ~/reset')
            self._apply(self.detector.state(time.monotonic()), cleared_by='reset')
        return response

    # -------------------------------------------------------------------- outputs
    def _apply(self, state: DetectorState, cleared_by: str = 'hold_time elapsed',
               react: tuple | None = None) -> None:
        """Publish what changed, what a controller acts on first: the stop, then f_S (when
        `react` = (now, τ_ext, q̇) asks for it), then the event, status and markers."""
        previous = self._published
        self._published = state
        changed = previous is None or state.stop != previous.stop or state.cause != previous.cause
        if changed:
            self._publish_stop()
        if react is not None:
            now, tau_ext, velocity = react
            self._publish_scaling(now, state, tau_ext, velocity)
        if changed:
            self._on_stop_change(state, previous, cleared_by)
        if state.colliding_joints != self._shown_joints:
            self._publish_markers(state)

    def _on_stop_change(self, state: DetectorState, previous: DetectorState | None,
                        cleared_by: str) -> None:
        if state.cause in (COLLISION, STALE, INVALID):
            # Every stop is logged and counted (report() would throttle a second one).
            self.problems.counts[state.cause] += 1
            self.get_logger().error(f'stop: {state.reason}')
        if state.stop:
            self.problems.set_status(WARN if state.cause == WAITING else ERROR, state.reason)
            self._publish_event(state, state.reason)
        else:
            message = f'monitoring {len(self._names)} joints'
            self.problems.set_status(OK, message)
            if previous is not None:
                self._publish_event(state, 'stop cleared: ' + (
                    'input arrived' if previous.cause == WAITING else cleared_by))
        self.problems.values['stop'] = str(state.stop)

    def _publish_stop(self) -> None:
        if self._published is not None:
            self._stop_pub.publish(Bool(data=self._published.stop))

    def _publish_scaling(self, now: float, state: DetectorState, tau_ext, velocity) -> None:
        """f_S of seed 003 from the contact (not from the latched stop), when it is worth
        sending (core/time_scaling.worth_publishing); the heartbeat repeats it."""
        value = self.scaling.react(now, state, tau_ext, velocity)
        if worth_publishing(value, self._scaling_sent):
            self._scaling_sent = value
            self._scaling_pub.publish(Float64(data=value))

    def _publish_event(self, state: DetectorState, message: str) -> None:
        """One DiagnosticArray (one status) per stop change (docs/collision_events.md).

        Stamp: that of the joint state the triggering residual came from (collision,
        invalid residual); the node's clock for what no residual triggered (stale input,
        waiting, cleared).
        """
        from_residual = state.cause in (COLLISION, INVALID)
        stamp = self._stamp if from_residual else self.get_clock().now().to_msg()
        event = DiagnosticStatus(name='collision', message=message,
                                 hardware_id=self.robot.name,
                                 level=level_byte(_EVENT_LEVELS.get(state.cause, ERROR)))
        joints = state.colliding_joints if state.cause == COLLISION else ()
        event.values = [KeyValue(key='event', value=state.cause or 'cleared'),
                        KeyValue(key='stamp', value=f'{stamp_to_seconds(stamp):.9f}'),
                        KeyValue(key='joints', value=','.join(self._names[i] for i in joints))]
        for i in joints:
            event.values += [
                KeyValue(key=f'{self._names[i]}.residual', value=f'{state.residuals[i]:.4f}'),
                KeyValue(key=f'{self._names[i]}.threshold', value=f'{state.thresholds[i]:.4f}')]
        array = DiagnosticArray(status=[event])
        array.header.stamp = stamp
        self._event_pub.publish(array)

    def _publish_markers(self, state: DetectorState) -> None:
        """A red sphere and a label at each joint of the latched collision, where the latest
        joint state puts it; DELETEALL first clears the last set (and alone, the collision)."""
        self._shown_joints = state.colliding_joints
        self.problems.values['colliding_joints'] = ','.join(
            self._names[i] for i in state.colliding_joints)
        markers = [Marker(action=Marker.DELETEALL, ns=_MARKER_NS)]
        if state.colliding_joints and self._q is not None:
            origins, _ = self.robot.joint_axes(self._q)
            header_stamp = self._q_stamp
            for i in state.colliding_joints:
                sphere = self._marker(Marker.SPHERE, i, origins[i], header_stamp)
                sphere.scale.x = sphere.scale.y = sphere.scale.z = 0.12
                label = self._marker(Marker.TEXT_VIEW_FACING, len(self._names) + i,
                                     origins[i] + [0.0, 0.0, 0.12], header_stamp)
                label.scale.z = 0.05
                label.text = (f'{self._names[i]} {state.residuals[i]:+.1f} N·m '
                              f'(ψ {state.thresholds[i]:.1f})')
                markers += [sphere, label]
        self._marker_pub.publish(MarkerArray(markers=markers))

    def _marker(self, kind: int, marker_id: int, position, stamp) -> Marker:
        marker = Marker(type=kind, action=Marker.ADD, ns=_MARKER_NS, id=marker_id)
        marker.header.frame_id = self.robot.base_link
        marker.header.stamp = stamp
        marker.pose.position.x, marker.pose.position.y, marker.pose.position.z = (
            float(c) for c in position)
        marker.pose.orientation.w = 1.0
        marker.color.r, marker.color.a = 1.0, 0.8
        return marker


def main(args=None):
    return run(CollisionDetector, args)


if __name__ == '__main__':
    sys.exit(main())
