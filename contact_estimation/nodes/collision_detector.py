"""collision_detector: τ_ext → stop signal, collision events, rviz markers, time scaling.

Runs the detector of core/chain/detector.py (seed 001 eq. 7, role and speed-dependent thresholds
capped at `threshold_max`, latched, fail-safe) on every residual and the reaction `REACTION`
(core/chain/reaction.py): seed 003's time scaling (core/chain/time_scaling.py, eqs. 8–11).
Two outputs, two meanings:
- stop (std_msgs/Bool, True = stop), the latched safety signal: reliable and transient-local,
  published on every change and as a heartbeat; it stays True after a collision until
  `~/reset` (or `hold_time`), and a controller must treat a missing heartbeat as stop;
- time scaling f_S (std_msgs/Float64), the seed 003 reaction: it follows the contact itself,
  0 while a collision is detected and `time_scaling.resume_delay` after it, negative while
  the arm is pushed back along its path, then back to 1 by itself, even while the stop is
  still latched, at limited rates (no chatter); it is 0 whenever the input is waiting, stale
  or invalid.
With `touch.enabled` (off by default) every contact holds the arm (f_S = 0) on the sample
eq. 7 fires and is classified impact or touch within `touch.decision_time` of it
(core/chain/contact_class.py): a touch latches no stop (f_S holds and yields), an impact
latches it on the sample it is decided on; each decision is a collision event with its
evidence. The proximity monitor's tracked hands (`proximity/hands`, ~100 Hz
while a skeleton is tracked; over DDS from its process, handed over when built in one) are
kept, the latest only, for the classifier: while they are recent (`touch.hand_max_age`) a
touch needs a hand at the contacted link.
The stop, f_S, their heartbeat and `~/reset` keep the controller's contract
(ros/stop_signal.py), as the proximity monitor's do. Collision events are
diagnostic_msgs/DiagnosticArray, one status each, header stamped with the joint-state time of
the residual that triggered them. docs/collision_events.md has the fields and what a
controller must do.

The residuals' rate is measured on their stamps (on /diagnostics) and logged with what the
time settings (all in seconds) come to at it (ros/input_rate.py), as the listener and the
residual node do.

Fail-safe, judged by the input gate as the proximity monitor's (core/chain/input_gate.py,
which has the order and which causes latch): before the first residual, after
`input_timeout` without one (or a gap that long between two), while the listener reports
stale joint states, and on a non-finite residual, stop is True. A message of the wrong size
is dropped and counted; it does not restart the timeout, so a stream of them stops the arm
within `input_timeout`. So does a residual stamped more than 1 s ahead of or behind this
node's clock (dropped and counted: core/chain/stamps.py). A residual decided on more than
`max_lag` after its stamp (beyond the clocks' constant offset: core/chain/lag.py) latches a
`behind` stop when the wait was this node's: it is working through a backlog, and every
decision comes that late; when the residual reached it late, after a watchdog check that
found nothing waiting (composed mode: its input paused), the stop is `stale_input`; stamps
that go back (a restarted driver, a clock stepped back) latch `bad_stamp`. An unexpected
error in any callback latches a `node_fault` stop (ros/guard.py). The stop's heartbeat is a
process of its own (ros/stop_process.py). A process started again after it died (`up`, the
launch file) starts with a `restarted` stop, latched until `~/reset` (core/restart.py).
"""
from __future__ import annotations

import sys

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from visualization_msgs.msg import MarkerArray

from contact_estimation.core.chain.contact_class import TouchConfig
from contact_estimation.core.chain.detector import (ACCELERATION_WINDOW_DURATION, BEHIND,
                                                    COLLISION, FAULT, INVALID, STALE,
                                                    WAITING, AccelerationEstimate,
                                                    DetectorConfig, DetectorSettings, DetectorState,
                                                    event_stamped_by_residual)
from contact_estimation.core.chain.detector import CollisionDetector
from contact_estimation.core.chain.lag import BAD_STAMP, LagBudget
from contact_estimation.core.chain.reaction import Reaction
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.time_scaling import TimeScaling, TimeScalingConfig
from contact_estimation.core.input_rejected import InputRejected
from contact_estimation.core.restart import RESTARTED, restart_reason
from contact_estimation.core.settings import WINDOW
from contact_estimation.ros.collision_messages import collision_event, collision_markers
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.diagnostics import ERROR, OK, WARN
from contact_estimation.ros.input_rate import InputRateLog
from contact_estimation.ros.joint_states import JointStateReader
from contact_estimation.ros.node_main import run
from contact_estimation.ros.params import ROBOT, Parameter, ParameterTable, rows
from contact_estimation.ros.hands_messages import hands_seen
from contact_estimation.ros.qos import LATEST_QOS, STOP_QOS
from contact_estimation.ros.stop_signal import STOP_PARAMETERS, StopSignal
from contact_estimation.ros.suite_node import SuiteNode

NAME = 'collision_detector'
# What the arm does on a contact besides the stop (core/chain/reaction.py): its config is fed
# by the `time_scaling.*` rows.
REACTION: type[Reaction] = TimeScaling


ACCELERATION_WINDOW = 'acceleration_filter.window_duration'
# A residual over this fraction of its threshold counts as a contact nearing: the chain wakes
# per message until it falls back (`_judge_contact_lasts`).
NEAR = 0.5
_TIME_SCALING_FIELDS = ('alpha', 'push_threshold', 'push_hysteresis', 'push_filter_time',
                        'yield_rate', 'recovery_rate', 'resume_delay')
PARAMETERS = ROBOT + STOP_PARAMETERS + rows(LagBudget, read_only=True) + rows(
    DetectorSettings) + ParameterTable(
    Parameter(ACCELERATION_WINDOW, 'time span (s) of the quadratic fit to q that gives q̈ for '
              'the acceleration term (at least 3 samples whatever the rate; lag about half of '
              'it)', ACCELERATION_WINDOW_DURATION, (0.001, 1.0), read_only=True,
              timing=WINDOW),
    Parameter('watchdog_rate', 'rate of the input timeout check, Hz: a stop for missing '
              'input comes at most input_timeout + 1/watchdog_rate late', 50.0, (10.0, 2000.0),
              read_only=True),
    renamed={'consecutive_samples': 'persistence_time',                     # samples → s
             'acceleration_window': ACCELERATION_WINDOW,  # samples → s
             **{f'time_scaling_{field}': f'time_scaling.{field}'
                for field in _TIME_SCALING_FIELDS}},
) + rows(TimeScalingConfig, 'time_scaling.') + rows(TouchConfig, 'touch.')


class CollisionDetectorNode(SuiteNode):
    PARAMETERS = PARAMETERS

    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        with self.starting():
            self.detector = CollisionDetector(self._detector_config({}),
                                     PARAMETERS.build(TouchConfig, self.values()), self.robot,
                                     self.value('max_lag'))
            self.reaction: Reaction = REACTION(PARAMETERS.build(REACTION.CONFIG, self.values()))
            self._acceleration_window = self.value(ACCELERATION_WINDOW)
            self._acceleration = AccelerationEstimate(self._acceleration_window)
            self._lag = self.detector.gate.lag  # core/chain/lag.py, in the input gate
        self.problems.values['lag'] = self._lag.statistics.summary  # p50 / p99 / max
        self._names = list(self.robot.joint_names)
        self._joint_states = JointStateReader(self._names)
        self._q: np.ndarray | None = None          # latest joint positions (markers)
        self._q_stamp = seconds_to_stamp(0.0)       # stamp of the message they came in
        self._stamp = seconds_to_stamp(0.0)         # stamp of the latest residual
        self._published: DetectorState | None = None
        self._decided_at = -np.inf                  # the time the latest sample was decided at
        self._looked = -np.inf  # stamp_clock() when the watchdog last found nothing waiting
        self._shown_joints: tuple[int, ...] = ()
        self._rate = InputRateLog(self, self._unused_time_settings)

        self.stop_signal = StopSignal(self, 'time_scaling', self._reset)
        self.closing(self.stop_signal.close)
        # Transient local like the stop: a subscriber that starts late gets the last events.
        self._event_pub = self.publisher('events', DiagnosticArray, STOP_QOS)
        self._marker_pub = self.publisher('markers', MarkerArray)
        self.receive('residual', JointState, self._on_residual, None,
                     on_batch=self.process_residuals)
        self.receive('input_stale', Bool, self._on_input_stale, self.process_input_stale,
                     STOP_QOS)
        self.receive('hands', DiagnosticArray, self.process_hands, self.process_hands,
                     LATEST_QOS)
        self.create_timer(1.0 / self.value('watchdog_rate'), self._on_watchdog)
        self.create_timer(1.0 / self.value('heartbeat_rate'), self._refresh_markers)
        self.on_parameter_change(self._on_parameter_change)
        restarted = restart_reason()
        if restarted:
            self.detector.restarted(self.seconds(), restarted)
        self._apply(self.detector.state(self.seconds()))
        self.get_logger().info(
            f'watching {len(self._names)} joints of {self.robot.name or "the robot"} on '
            f'{self.spec.topic("residual")}; stop on {self.spec.topic("stop")}')

    # ------------------------------------------------------------------ parameters
    def _detector_config(self, changes: dict) -> DetectorConfig:
        return DetectorConfig.build(self.robot.joint_names, **PARAMETERS.fields(
            DetectorSettings, self.values(changes)))

    def _on_parameter_change(self, changes: dict) -> str | None:
        """Validate and apply detector and reaction parameters; a bad value is refused."""
        config = (self._detector_config(changes)
                  if set(changes) & set(PARAMETERS.feeding(DetectorSettings)) else None)
        reaction = (PARAMETERS.build(REACTION.CONFIG, self.values(changes))
                    if set(changes) & set(PARAMETERS.feeding(REACTION.CONFIG)) else None)
        touch = (PARAMETERS.build(TouchConfig, self.values(changes))
                 if set(changes) & set(PARAMETERS.feeding(TouchConfig)) else None)
        if touch is not None:
            self.detector.configure_touch(touch)
        if config is not None:
            self.detector.configure(config)
            self.get_logger().info(f'thresholds now {np.round(config.base_thresholds, 3)} N·m, '
                                   f'roles {list(config.roles)}, {config.persistence} '
                                   f'persistence {config.persistence_time:g} s')
        if reaction is not None:
            self.reaction.config = reaction
        return None

    # -------------------------------------------------------------------- messages
    def _on_residual(self, msg: JointState) -> None:
        """A residual message → process_residual. Positions and velocities (residual_node
        copies them from its joint state) are optional; a NaN τ_ext is passed on: the
        detector stops on it."""
        # Not fed: the timeout stops. (One stamped long ago is taken, and is `behind`.)
        sample = self.joint_sample(msg, self._joint_states, 'residual', residual=True,
                                   required=('effort',), optional=('position', 'velocity'),
                                   finite=False)
        if sample is not None:
            self.process_residual(sample)

    def process_residual(self, sample: JointSample) -> None:
        """One τ_ext sample: `process_residuals` of a batch of one."""
        self.process_residuals((sample,))

    def process_residuals(self, samples) -> None:
        """τ_ext samples in stamp order (model order; q and q̇ finite, or None when unknown),
        all received at once: whether the node is behind, judged once on the batch's oldest
        sample (core/chain/lag.py: a backlog is caught up, and stops only past `max_lag`),
        then each sample to the detector and the reaction (`_decide`), exactly as one by one:
        each at the time it would have been decided on had it come alone, this node's `now`
        less how much newer the batch's newest sample is (never before the previous sample),
        so that the input timeout, the hold and f_S run as in the replay, where `now` is the
        stamp. On simulated time the stamps are on the node's clock: each is its own time
        (a simulator's clock may reach this node before the samples up to it do).

        The residual node calls this directly in composed mode with every sample of its
        wake; `_on_residual` otherwise.
        """
        now = self.seconds()
        reason = self._lag.check_batch(self.stamp_clock(), samples[0].t, samples[-1].t,
                                       self._looked)
        self.detector.set_lag(now, self._lag.cause, reason)
        self.problems.traffic['residuals_received'] += len(samples)
        self._rate.add_batch(samples)
        newest, simulated = samples[-1].t, self.simulated_time
        acceleration_used = bool(self.detector.config.acceleration_gain.any())
        for sample in samples:
            at = sample.t if simulated else now - (newest - sample.t)
            self._decided_at = max(at, self._decided_at)
            self._decide(self._decided_at, sample, acceleration_used)
        self.stop_signal.watching()
        self._judge_contact_lasts()

    def _judge_contact_lasts(self) -> None:
        """`contact_lasts` after a batch: a residual over NEAR of its threshold, a contact
        held or being classified, or the time scaling yielding. The chain's process then
        wakes per message (joint_state_listener `wake_period`), so that the sample that
        completes eq. 7's persistence is decided as it comes."""
        state = self._published
        scale = self.stop_signal.scale
        self.contact_lasts = state is not None and (
            state.over_threshold or state.contact or state.deciding or state.touch
            or (scale is not None and scale < 1.0)
            or bool(np.any(np.abs(state.residuals) > NEAR * state.thresholds)))

    def _decide(self, now: float, sample: JointSample, acceleration_used: bool) -> None:
        """One τ_ext sample → the detector and the reaction, then what changed is published
        (`_apply`); `acceleration_used`: the thresholds have a q̈ term (k_a > 0).

        Without velocity the thresholds fall back to ψ_0, the most sensitive setting, which
        errs on the safe side; without position there are no markers, no q̈ term and no
        contact force (with touch on, a contact is then an impact: the touch rules need the
        force).
        """
        tau_ext, velocity, stamp, t = sample.tau_ext, sample.v, sample.stamp, sample.t
        if sample.q is not None:
            self._q, self._q_stamp = sample.q, stamp
        acceleration = self._acceleration_of(sample, acceleration_used)
        state = self.detector.update(now, tau_ext, velocity, acceleration, stamp=t,
                                     position=sample.q)
        # The detector found it; a sample it ignored (out of order) is checked here.
        non_finite = not np.isfinite(tau_ext).all() if state.ignored else self.detector.invalid
        if non_finite:
            self.problems.report('non_finite_residual', 'residual with NaN/inf: stop')
        if state.ignored:
            self.problems.report('out_of_order', state.ignored)
            return
        self._stamp = stamp
        self._apply(state, react=(now, tau_ext, velocity), watching=False)

    def _unused_time_settings(self) -> tuple[str, ...]:
        """For InputRateLog: the q̈ window is in use only while k_a is."""
        return () if self.detector.config.acceleration_gain.any() else (ACCELERATION_WINDOW,)

    def _acceleration_of(self, sample: JointSample, in_use: bool):
        """q̈ for the acceleration term when the thresholds use it (core/chain/detector.py
        AccelerationEstimate has the rules); None without positions. The q̈ a node upstream
        fitted over the same window comes with the sample (the listener's, for a driver
        without q̇; the rnea residual's): it is taken, not fitted again (issue 35), and this
        node's own fit pauses meanwhile (its samples would be out of date)."""
        if sample.q is None:
            return None
        given = sample.acceleration
        if given is not None and given.window == self._acceleration_window:
            self._acceleration.update(sample.t, sample.q, in_use=False)
            return given.value if in_use else None
        acceleration = self._acceleration.update(sample.t, sample.q, in_use=in_use)
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

    def process_hands(self, msg: DiagnosticArray) -> None:
        """Where the tracked hands are (the proximity monitor's, ~100 Hz: nothing per
        residual), for touch classification; a stamp not believed, or a distance that is no
        number, is dropped and counted."""
        t = self.believed(msg.header.stamp, 'hands')
        if t is None:
            return
        try:
            hands = hands_seen(msg, t)
        except InputRejected as err:
            self.problems.report(err.kind, f'hands: {err}: dropped')
            return
        self.problems.traffic['hands_received'] += 1
        self.detector.set_hands(hands)

    def _on_watchdog(self) -> None:
        """The fail-safe clock: input timeout and hold-time release even without input. The
        samples waiting for this process are taken first (`catch_up`): a late wake is not
        stale input. When there were none, any sample that comes later waited for this node
        no longer than since then (core/chain/lag.py: the rest of its lag is its input's)."""
        looked, received = self.stamp_clock(), self.problems.traffic['residuals_received']
        self.catch_up()
        if self.catches_up and received == self.problems.traffic['residuals_received']:
            self._looked = looked
        now = self.seconds()
        state = self.detector.state(now)
        self._apply(state, react=(now, None, None) if state.input_problem in (WAITING, STALE)
                    else None)

    def _refresh_markers(self) -> None:
        """The markers again while shown: they follow the arm."""
        if self._shown_joints and self._published is not None:
            self._publish_markers(self._published)

    def _reset(self) -> tuple[bool, str]:
        """~/reset (ros/stop_signal.py): the detector says whether the stop may clear; the
        reply tells what was then published (a stop raised again at once is a refusal)."""
        now = self.seconds()
        refusal = self.detector.reset(now)
        if refusal:
            return False, f'refused: {refusal}'
        state = self.detector.state(now)
        self._apply(state, cleared_by='reset')
        if state.stop:
            return False, f'refused: still stopped after the reset: {state.reason}'
        return True, 'stop cleared'

    def fail_safe(self, reason: str) -> None:
        """An unexpected error in a callback (ros/guard.py): stop, latched like a collision
        (~/reset or hold_time clears it), and f_S held at 0."""
        now = self.seconds()
        self.detector.fault(now, reason)
        self._apply(self.detector.state(now), react=(now, None, None))

    # -------------------------------------------------------------------- outputs
    def _apply(self, state: DetectorState, cleared_by: str = 'hold_time elapsed',
               react: tuple | None = None, watching: bool = True) -> None:
        """Publish what changed, what a controller acts on first: the stop, then the
        reaction's speed scale (when `react` = (now, τ_ext, q̇) asks for it), then the event,
        status and markers; `watching`: as StopSignal.decide."""
        previous = self._published
        self._published = state
        self.stop_signal.decide(state.stop, watching)
        changed = previous is None or state.stop != previous.stop or state.cause != previous.cause
        if react is not None:
            now, tau_ext, velocity = react
            self._react(now, state, tau_ext, velocity)
        if changed:
            self._on_stop_change(state, previous, cleared_by)
        decision = state.decision
        if decision is not None and not (changed and state.cause == COLLISION):
            self._event_pub.publish(collision_event(
                state, self._names, f'{decision.kind}: {decision.reason}', self._stamp,
                self.robot.name, decision.kind))
        if state.colliding_joints != self._shown_joints:
            self._publish_markers(state)

    def _on_stop_change(self, state: DetectorState, previous: DetectorState | None,
                        cleared_by: str) -> None:
        """The event first (an output a controller may read), then the log (stderr and
        /rosout) and the status."""
        if state.stop:
            self._publish_event(state, state.reason)
        elif previous is not None:
            self._publish_event(state, 'stop cleared: ' + (
                'input arrived' if previous.cause == WAITING else cleared_by))
        if state.cause in (COLLISION, STALE, INVALID, FAULT, BEHIND, BAD_STAMP, RESTARTED):
            # Every stop is logged and counted (report() would throttle a second one).
            self.problems.counts[state.cause] += 1
            self.get_logger().error(f'stop: {state.reason}')
        if state.stop:
            self.problems.set_status(WARN if state.cause == WAITING else ERROR, state.reason)
        else:
            self.problems.set_status(OK, f'monitoring {len(self._names)} joints')
        self.problems.values['stop'] = str(state.stop)

    def _react(self, now: float, state: DetectorState, tau_ext, velocity) -> None:
        """The reaction's speed scale from the contact (not from the latched stop), published
        when it is worth sending (core/chain/time_scaling.worth_publishing); the heartbeat
        repeats it."""
        self.stop_signal.publish_scale(self.reaction.react(now, state, tau_ext, velocity))

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


def main(args=None):
    return run(CollisionDetectorNode, args)


if __name__ == '__main__':
    sys.exit(main())
