"""collision_detector: τ_ext → stop signal, collision events, rviz markers, time scaling.

Runs the detector of core/chain/detector.py (seed 001 eq. 7, role and speed-dependent thresholds
capped at `threshold_max`, latched, fail-safe) on every residual and the reaction of
core/chain/time_scaling.py (seed 003 eqs. 8–11). Two outputs, two meanings:
- stop (std_msgs/Bool, True = stop), the latched safety signal: reliable and transient-local,
  published on every change and as a heartbeat; it stays True after a collision until
  `~/reset` (or `hold_time`), and a controller must treat a missing heartbeat as stop;
- time scaling f_S (std_msgs/Float64), the seed 003 reaction: it follows the contact itself,
  0 while a collision is detected and `time_scaling_resume_delay` after it, negative while
  the arm is pushed back along its path, then back to 1 by itself, even while the stop is
  still latched, at limited rates (no chatter); it is 0 whenever the input is waiting, stale
  or invalid.
Collision events are diagnostic_msgs/DiagnosticArray, one status each, header stamped with
the joint-state time of the residual that triggered them. docs/collision_events.md has the
fields and what a controller must do.

The residuals' rate is measured on their stamps (on /diagnostics) and logged with what the
time settings (all in seconds) come to at it (ros/input_rate.py), as the listener and the
residual node do.

Fail-safe: before the first residual, after `input_timeout` without one (or a gap that long
between two), while the listener reports stale joint states, and on a non-finite residual,
stop is True. A message of the wrong size is dropped and counted; it does not restart the
timeout, so a stream of them stops the arm within `input_timeout`. So does a residual stamped
more than 1 s ahead of this node's clock (dropped and counted: core/chain/stamps.py). An unexpected
error in any callback latches a `node_fault` stop (ros/guard.py). The stop's heartbeat is a
thread of its own (ros/heartbeat.py): no backlog of residuals delays it.
"""
from __future__ import annotations

import sys

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from contact_estimation.core.chain.detector import (ACCELERATION_WINDOW_DURATION, COLLISION,
                                              DEFAULTS, FAULT, INVALID, RENAMED, STALE, WAITING,
                                              AccelerationEstimate, DetectorConfig,
                                              DetectorState, event_stamped_by_residual)
from contact_estimation.core.chain.detector import CollisionDetector as Detector
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.time_scaling import (TimeScaling, TimeScalingConfig,
                                                  worth_publishing)
from contact_estimation.ros.collision_messages import collision_event, collision_markers
from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds
from contact_estimation.ros.diagnostics import ERROR, OK, WARN
from contact_estimation.ros.heartbeat import Heartbeat
from contact_estimation.ros.input_rate import InputRateLog, TimeSettings
from contact_estimation.ros.joint_states import JointStateError, JointStateReader
from contact_estimation.ros.node_main import run
from contact_estimation.ros.suite_node import SuiteNode
from contact_estimation.ros.qos import STOP_QOS

NAME = 'collision_detector'

# Parameter name → DetectorConfig field.
_DETECTOR_PARAMETERS = {
    'thresholds_position': 'thresholds_position', 'thresholds_force': 'thresholds_force',
    'joint_roles': 'roles', 'persistence': 'persistence', 'persistence_time': 'persistence_time',
    'speed_gain': 'speed_gain', 'acceleration_gain': 'acceleration_gain',
    'threshold_max': 'threshold_max', 'threshold_ceiling': 'threshold_ceiling',
    'hold_time': 'hold_time',
    'reset_quiet_time': 'reset_quiet_time', 'input_timeout': 'input_timeout',
}
# Parameter name → TimeScalingConfig field.
_SCALING_PARAMETERS = {
    'time_scaling_alpha': 'alpha', 'time_scaling_push_threshold': 'push_threshold',
    'time_scaling_push_hysteresis': 'push_hysteresis',
    'time_scaling_push_filter_time': 'push_filter_time', 'time_scaling_yield_rate': 'yield_rate',
    'time_scaling_recovery_rate': 'recovery_rate', 'time_scaling_resume_delay': 'resume_delay',
}
_SCALING_DEFAULTS = TimeScalingConfig()


class CollisionDetector(SuiteNode):
    RENAMED = RENAMED

    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        with self.starting():
            self._declare_parameters()
            self.detector = Detector(self._detector_config({}))
            self.scaling = TimeScaling(self._scaling_config({}))
            self._acceleration = AccelerationEstimate(
                self.value('acceleration_filter.window_duration'))
        self._names = list(self.robot.joint_names)
        self._joint_states = JointStateReader(self._names)
        self._q: np.ndarray | None = None          # latest joint positions (markers)
        self._q_stamp = seconds_to_stamp(0.0)       # stamp of the message they came in
        self._stamp = seconds_to_stamp(0.0)         # stamp of the latest residual
        self._published: DetectorState | None = None
        self._scaling_sent: float | None = None    # f_S last published
        self._shown_joints: tuple[int, ...] = ()
        self._rate = InputRateLog(self, self._time_settings)

        self._stop_pub = self.publisher('stop', Bool, STOP_QOS)
        self._scaling_pub = self.publisher('time_scaling', Float64)
        # Transient local like the stop: a subscriber that starts late gets the last events.
        self._event_pub = self.publisher('events', DiagnosticArray, STOP_QOS)
        self._marker_pub = self.publisher('markers', MarkerArray)
        self._heartbeat = Heartbeat(
            self._stop_pub, self.value('heartbeat_rate'),
            lambda: None if self._published is None else self._published.stop,
            self.seconds, f'{NAME} heartbeat')
        self.receive('residual', JointState, self._on_residual, self.process_residual)
        self.receive('input_stale', Bool, self._on_input_stale, self.process_input_stale,
                     STOP_QOS)
        self.create_service(Trigger, '~/reset', self._on_reset)
        self.create_timer(1.0 / self.value('watchdog_rate'), self._on_watchdog)
        self.create_timer(1.0 / self.value('heartbeat_rate'), self._on_heartbeat)  # f_S, markers
        self.on_parameter_change(self._on_parameter_change)
        self._apply(self.detector.state(self.seconds()))
        self.get_logger().info(
            f'watching {len(self._names)} joints of {self.robot.name or "the robot"} on '
            f'{self.spec.topic("residual")}; stop on {self.spec.topic("stop")}')

    # ------------------------------------------------------------------ parameters
    def _declare_parameters(self) -> None:
        """Every parameter, with the defaults of core/detector.DEFAULTS and TimeScalingConfig."""
        d, k, ts = self.declare, DEFAULTS, _SCALING_DEFAULTS
        d('thresholds_position', [float(k['thresholds_position'])], 'ψ_0 of '
          'position-controlled joints, N·m: one value for all joints or one per joint '
          '(seed 001: 4 N·m)')
        d('thresholds_force', [float(k['thresholds_force'])], 'ψ_0 of force-controlled '
          'joints, N·m: one value or one per joint (seed 001: 8 N·m)')
        d('joint_roles', [k['roles']], "each joint's role, 'position' or 'force' "
          '(one for all joints or one per joint); switchable at run time')
        d('persistence', k['persistence'], "seed 001 eq. 7's persistence rule: "
          "'consecutive' (some joint over ψ for persistence_time) or 'weighted' (each sample "
          'counts Δt·(|τ_ext|/ψ)²: a strong hit needs less time)')
        d('persistence_time', k['persistence_time'], 'T of seed 001 eq. 7 on the '
          'joint-state stamps: over threshold this long (weighted: this much evidence) makes '
          'a collision, s', 0.001, 10.0)
        d('speed_gain', [float(k['speed_gain'])], 'k_v, N·m per rad/s: ψ grows by '
          'k_v |q̇| (one or per joint)')
        d('acceleration_gain', [float(k['acceleration_gain'])], 'k_a, N·m per rad/s²: '
          'ψ grows by k_a |q̈| (one or per joint)')
        d('threshold_max', [float(k['threshold_max'])], 'ψ_max, N·m: cap of ψ so that '
          'fast motion never hides a contact this strong (one or per joint, >= ψ_0)')
        d('threshold_ceiling', k['threshold_ceiling'], 'N·m: thresholds, threshold_max and '
          'the gains (their term at 1 rad/s, 1 rad/s²) above this are refused, since they '
          'would switch detection off; raise it explicitly for a stronger arm', 1.0, 1e4)
        d('acceleration_filter.window_duration', ACCELERATION_WINDOW_DURATION, 'time span '
          '(s) of the quadratic fit to q that gives q̈ for the acceleration term (at least 3 '
          'samples whatever the rate; lag about half of it)', 0.001, 1.0, read_only=True)
        d('hold_time', k['hold_time'], 'stop clears this long after the last unsafe '
          'sample, s; 0 = latched until the ~/reset service', 0.0, 3600.0)
        d('reset_quiet_time', k['reset_quiet_time'], 'the stop clears (reset or '
          'hold_time) only after every joint was under threshold this long and for '
          'persistence_time, s', 0.0, 60.0)
        d('input_timeout', k['input_timeout'], 'no residual for this long → stop, s',
          0.001, 10.0)
        d('watchdog_rate', 50.0, 'rate of the input timeout check, Hz: a stop for missing '
          'input comes at most input_timeout + 1/watchdog_rate late', 10.0, 2000.0,
          read_only=True)
        d('heartbeat_rate', 20.0, 'rate at which stop and f_S are republished, Hz', 1.0, 1000.0,
          read_only=True)
        d('time_scaling_alpha', ts.alpha, 'seed 003 α: yield speed (fraction of '
          'nominal) per N·m of push back beyond the push threshold, 1/(N·m)', 0.0, 100.0)
        d('time_scaling_push_threshold', ts.push_threshold, 'a push back along the path '
          'weaker than this only holds the arm (the middle of the hysteresis), N·m', 0.0, 1000.0)
        d('time_scaling_push_hysteresis', ts.push_hysteresis, 'yield starts above push '
          'threshold + half of this and ends below push threshold − half; a push that varies '
          'less than this does not move f_S, N·m', 0.0, 1000.0)
        d('time_scaling_push_filter_time', ts.push_filter_time, 'time constant of the '
          'low-pass filter on the push along the path, s', 0.0, 10.0)
        d('time_scaling_yield_rate', ts.yield_rate, 'fastest change of f_S while it is '
          '<= 0 (into, along and out of a yield), 1/s', 1e-3, 1000.0)
        d('time_scaling_recovery_rate', ts.recovery_rate, 'f_S returns from 0 to 1 at '
          'this rate once the contact is over, 1/s', 1e-3, 1000.0)
        d('time_scaling_resume_delay', ts.resume_delay, 'f_S stays 0 this long after the '
          'residuals fall back under threshold, s', 0.0, 60.0)

    def _detector_config(self, changes: dict) -> DetectorConfig:
        return DetectorConfig.build(self.robot.joint_names, **{
            field: changes.get(p, self.value(p)) for p, field in _DETECTOR_PARAMETERS.items()})

    def _scaling_config(self, changes: dict) -> TimeScalingConfig:
        return TimeScalingConfig(**{field: changes.get(p, self.value(p))
                                    for p, field in _SCALING_PARAMETERS.items()})

    def _on_parameter_change(self, changes: dict) -> str | None:
        """Validate and apply detector and time-scaling parameters; a bad value is refused."""
        config = self._detector_config(changes) if set(changes) & set(_DETECTOR_PARAMETERS) \
            else None
        scaling = self._scaling_config(changes) if set(changes) & set(_SCALING_PARAMETERS) \
            else None
        if config is not None:
            self.detector.configure(config)
            self.get_logger().info(f'thresholds now {np.round(config.base_thresholds, 3)} N·m, '
                                   f'roles {list(config.roles)}, {config.persistence} '
                                   f'persistence {config.persistence_time:g} s')
        if scaling is not None:
            self.scaling.config = scaling
        return None

    # -------------------------------------------------------------------- messages
    def _on_residual(self, msg: JointState) -> None:
        if self.believed(msg.header.stamp, 'residual') is None:  # not fed: the timeout stops
            return
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
        self.process_residual(JointSample(
            stamp_to_seconds(msg.header.stamp), self._finite(msg, order, 'position'),
            self._finite(msg, order, 'velocity'), None, tau_ext, msg.header.stamp,
            msg.header.frame_id))

    def _finite(self, msg: JointState, order: np.ndarray, field: str) -> np.ndarray | None:
        """Positions or velocities of the residual message (residual_node copies them from
        its joint state) in model order; None when missing or not finite."""
        values = self._joint_states.field(msg, field, order)
        if values is not None and not np.isfinite(values).all():
            if field == 'velocity':
                self.problems.report('invalid_velocity', 'velocity with NaN/inf: thresholds '
                                     'without the speed term')
            return None
        return values

    def process_residual(self, sample: JointSample) -> None:
        """One τ_ext sample (model order; q and q̇ finite, or None when unknown) → the
        detector and f_S, then what changed is published (`_apply`).

        Without velocity the thresholds fall back to ψ_0, the most sensitive setting, which
        errs on the safe side; without position there are no markers and no q̈ term. The
        residual node calls this directly in composed mode; `_on_residual` otherwise.
        """
        now = self.seconds()
        tau_ext, velocity, stamp, t = sample.tau_ext, sample.v, sample.stamp, sample.t
        self.problems.traffic['residuals_received'] += 1
        if not np.isfinite(tau_ext).all():
            self.problems.report('non_finite_residual', 'residual with NaN/inf: stop')
        if sample.q is not None:
            self._q, self._q_stamp = sample.q, stamp
        self._rate.add(t)
        acceleration = self._acceleration_of(t, sample.q)
        state = self.detector.update(now, tau_ext, velocity, acceleration, stamp=t)
        if state.ignored:
            self.problems.report('out_of_order', state.ignored)
            return
        self._stamp = stamp
        self._apply(state, react=(now, tau_ext, velocity))

    def _time_settings(self) -> TimeSettings:
        """For InputRateLog: the q̈ window (while k_a uses it), the input timeout, and the
        times the detection and the reaction take to decide."""
        window = 'acceleration_filter.window_duration'
        windows = ({window: self.value(window)} if self.detector.config.acceleration_gain.any()
                   else {})
        durations = ('persistence_time', 'reset_quiet_time', 'time_scaling_push_filter_time')
        return (windows, {'input_timeout': self.value('input_timeout')},
                {name: self.value(name) for name in durations})

    def _acceleration_of(self, t: float, position: np.ndarray | None):
        """q̈ for the acceleration term when the thresholds use it (core/chain/detector.py
        AccelerationEstimate has the rules); None without positions."""
        if position is None:
            return None
        acceleration = self._acceleration.update(
            t, position, in_use=self.detector.config.acceleration_gain.any())
        if self._acceleration.restarted:
            self.problems.report('stamp_order', f'residual stamp: '
                                 f'{self._acceleration.restarted}; q̈ estimate restarted')
        return acceleration

    def _on_input_stale(self, msg: Bool) -> None:
        self.process_input_stale(msg.data)

    def process_input_stale(self, stale: bool) -> None:
        """The listener's watchdog (on change and as a heartbeat); called directly by the
        listener in composed mode."""
        self.detector.set_input_stale(stale)
        self._apply(self.detector.state(self.seconds()))

    def _on_watchdog(self) -> None:
        """The fail-safe clock: input timeout and hold-time release even without input."""
        now = self.seconds()
        state = self.detector.state(now)
        self._apply(state, react=(now, None, None) if state.input_problem in (WAITING, STALE)
                    else None)

    def _on_heartbeat(self) -> None:
        """f_S again, and the markers while shown (they follow the arm); the stop's own
        heartbeat is a thread (ros/heartbeat.py), which no backlog of residuals delays."""
        self.problems.values['late_heartbeats'] = str(self._heartbeat.late)
        if self._scaling_sent is not None:
            self._scaling_pub.publish(Float64(data=self._scaling_sent))
        if self._shown_joints and self._published is not None:
            self._publish_markers(self._published)

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response):
        refusal = self.detector.reset(self.seconds())
        response.success = not refusal
        response.message = refusal or 'stop cleared'
        if refusal:
            self.get_logger().warning(f'reset refused: {refusal}')
        else:
            self.get_logger().info('stop cleared by ~/reset')
            self._apply(self.detector.state(self.seconds()), cleared_by='reset')
        return response

    def fail_safe(self, reason: str) -> None:
        """An unexpected error in a callback (ros/guard.py): stop, latched like a collision
        (~/reset or hold_time clears it), and f_S held at 0."""
        now = self.seconds()
        self.detector.fault(now, reason)
        self._apply(self.detector.state(now), react=(now, None, None))

    # -------------------------------------------------------------------- outputs
    def _apply(self, state: DetectorState, cleared_by: str = 'hold_time elapsed',
               react: tuple | None = None) -> None:
        """Publish what changed, what a controller acts on first: the stop, then f_S (when
        `react` = (now, τ_ext, q̇) asks for it), then the event, status and markers."""
        previous = self._published
        self._published = state
        self._heartbeat.decision()
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
        if state.cause in (COLLISION, STALE, INVALID, FAULT):
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
        self._heartbeat.beat()

    def _publish_scaling(self, now: float, state: DetectorState, tau_ext, velocity) -> None:
        """f_S of seed 003 from the contact (not from the latched stop), when it is worth
        sending (core/time_scaling.worth_publishing); the heartbeat repeats it."""
        value = self.scaling.react(now, state, tau_ext, velocity)
        if worth_publishing(value, self._scaling_sent):
            self._scaling_sent = value
            self._scaling_pub.publish(Float64(data=value))

    def _publish_event(self, state: DetectorState, message: str) -> None:
        """One collision event per stop change (ros/collision_messages.py)."""
        stamp = (self._stamp if event_stamped_by_residual(state)
                 else self.get_clock().now().to_msg())
        self._event_pub.publish(collision_event(state, self._names, message, stamp,
                                                self.robot.name))

    def _publish_markers(self, state: DetectorState) -> None:
        """The markers of the latched collision, where the latest joint state puts it."""
        self._shown_joints = state.colliding_joints
        self.problems.values['colliding_joints'] = ','.join(
            self._names[i] for i in state.colliding_joints)
        origins = None
        if state.colliding_joints and self._q is not None:
            origins, _ = self.robot.joint_axes(self._q)
        self._marker_pub.publish(collision_markers(state, self._names, origins,
                                                   self.robot.base_link, self._q_stamp))

    def destroy_node(self):
        if hasattr(self, '_heartbeat'):  # not when the node refused to start
            self._heartbeat.close()
        return super().destroy_node()


def main(args=None):
    return run(CollisionDetector, args)


if __name__ == '__main__':
    sys.exit(main())
