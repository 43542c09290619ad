"""joint_state_listener: the robot driver's joint states → one clean joint state stream.

Reads `/joint_states` (best-effort and reliable publishers alike, possibly several drivers
each with a subset of the joints) and publishes, per complete sample, a JointState in model
joint order: position (rad), velocity (rad/s, estimated where the driver gives none) and
effort = joint torque (N·m, converted from motor current if asked), with the stamp of the
input. Bad messages are dropped and counted on /diagnostics
(core/chain/joint_state_conditioning.py has the rules). `input_stale` is True while no sample went
out for `input_timeout` seconds (and before the first one): the detector stops the robot on it.
In composed mode (contact_estimation/composed.py) each sample (core/chain/sample.JointSample) goes
to residual_node, ft_contact_estimator and proximity_monitor, and input_stale to
collision_detector, by function call; the joint state is published only while anyone
subscribes to it.

Only what is published is computed (this node runs at the driver's rate, 100 Hz to 1 kHz,
beside the others on small machines). Each wake takes every message already received, up to
`MAX_BATCH`, as one batch (issue 35): the clocks are read, the watchdog fed and the samples
handed on once per batch, so a node that woke late catches up at once, and one wake costs
about the same for 1 sample or 20. Every time setting is in seconds, so a driver's rate
needs no retuning: the node measures the rate (on /diagnostics) and logs what the settings
mean at it. Acceleration is not: JointState has no field for it, and the nodes
that need q̈ (residual_node's 'rnea' residual, collision_detector's acceleration term) estimate
it from the positions published here with the same filter, `DerivativeEstimator` (a causal
least-squares quadratic fit on the true stamps: exact up to constant acceleration, unaffected
by dropped messages; its docstring compares it with an alpha-beta-gamma filter), each with the
window its own noise/lag trade-off needs (residual_node's `acceleration_filter.window_duration`,
collision_detector's `acceleration_filter.window_duration`).
"""
from __future__ import annotations

import sys
from itertools import repeat

from builtin_interfaces.msg import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from contact_estimation.core.chain.joint_state_conditioning import (
    TIMING_DROPS, WARNINGS, ConditioningConfig, JointStateConditioner)
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.watchdog_clock import Watchdog
from contact_estimation.core.input_rejected import MALFORMED
from contact_estimation.ros import cdr
from contact_estimation.ros.diagnostics import ERROR, OK, WARN
from contact_estimation.ros.input_rate import InputRateLog
from contact_estimation.ros.joint_states import JointStateWriter
from contact_estimation.ros.node_main import run
from contact_estimation.ros.params import ROBOT, Parameter, ParameterTable, rows
from contact_estimation.ros.qos import STOP_QOS
from contact_estimation.ros.suite_node import SuiteNode, waiting_messages

NAME = 'joint_state_listener'

# How often the watchdog is checked (a stale input is flagged at most this late after
# input_timeout; every check wakes the node, and 200 Hz cost ~8 % of a core) and how often
# input_stale is repeated when it does not change.
WATCHDOG_PERIOD = 0.01   # s
HEARTBEAT_PERIOD = 0.1   # s
# Messages taken in one wake at most: 0.2 s at 1 kHz, more than any hiccup that does not
# stop the arm (the detector's max_lag); the rest wait for the next wake.
MAX_BATCH = 200


PARAMETERS = ROBOT + rows(ConditioningConfig) + ParameterTable(
    Parameter('wake_period', 'least time (s) between two wakes of the chain while no contact '
              'nears (composed mode): driver messages that come sooner wait and are taken as '
              'one batch. A wake costs the chain about as much CPU as its samples; a residual '
              'over half its threshold, a contact or the time scaling yielding makes it wake '
              'per message again, so only a hit strong enough to stop within this time is '
              'stopped up to this much later. 0: a wake per message', 0.005, (0.0, 0.02)),
    renamed={'velocity_filter.window': 'velocity_filter.window_duration'})  # samples → s


class JointStateListenerNode(SuiteNode):
    PARAMETERS = PARAMETERS

    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        self._watchdog = Watchdog(timeout=self.value('input_timeout'))
        with self.starting():
            self._configure({})
        self.on_parameter_change(self._configure)
        self._joint_names = list(self.robot.joint_names)
        self._output = self.output('joint_state', JointState, only_when_listened=True)
        self._writer = JointStateWriter(self._joint_names)
        self._stale_output = self.output('input_stale', Bool, STOP_QOS)
        self._subscription = self.subscribe('joint_states', JointState, self._on_joint_states,
                                            raw=True)
        self._stale: bool | None = None
        self._woke_at = 0.0  # steady time of the latest take that found driver messages
        self._rate = InputRateLog(self)
        self._check_watchdog()
        self.create_timer(WATCHDOG_PERIOD, self._check_watchdog)
        self.create_timer(HEARTBEAT_PERIOD, self._publish_stale)
        self.get_logger().info(
            f'{self.robot.name or "robot"} chain {self._joint_names}; reading '
            f'{self.spec.topic("joint_states")}, publishing {self.spec.topic("joint_state")}')

    # ------------------------------------------------------------------ parameters
    def _configure(self, changed: dict) -> None:
        """Build the conditioner from the parameters, with `changed` values taking precedence.

        Any change restarts merging and the derivative filter. Raises ValueError on values
        that do not fit the robot (a run-time change is then refused).
        """
        values = self.values(changed)
        self._conditioner = JointStateConditioner.for_robot(
            self.robot, PARAMETERS.build(ConditioningConfig, values))
        self._watchdog.timeout = values['input_timeout']
        self._wake_period = values['wake_period']

    # ----------------------------------------------------------------- messages
    def _on_joint_states(self, raw: bytes) -> None:
        """A driver message, and every other already received (`take_waiting`)."""
        self.take_waiting([raw])

    def take_waiting(self, batch: list[bytes] = ()) -> None:
        """`batch` and the messages queued behind it, up to MAX_BATCH, in arrival order (the
        executor then finds them taken; a replay, which calls the callback itself, has
        none), conditioned and passed on as one batch. The chain's other nodes take what
        waits through it before their watchdogs judge (SuiteNode.catch_up)."""
        batch = [*batch, *waiting_messages(self._subscription, MAX_BATCH - len(batch))]
        if batch:
            # A full batch leaves a backlog behind it: taken at once, not after a rest.
            self._woke_at = self.steady() if len(batch) < MAX_BATCH else 0.0
            self.problems.traffic['wakes_taking_messages'] += 1  # against samples_published
        now = self.stamp_clock()
        samples = [sample for sample in map(self._condition, batch, repeat(now))
                   if sample is not None]
        if samples:
            self._pass_on(samples)

    def rest_after_wake(self) -> float:
        """After a take that found driver messages (fewer than MAX_BATCH: none is waiting),
        the rest of `wake_period` (ros/node_main.py sleeps it): what comes meanwhile is taken
        as one batch. Only composed, beside the detector that says when a contact nears
        (`contact_lasts`); on its own (separate mode) this node cannot know, and wakes per
        message. Not on simulated time: the simulated cobot waits for this chain's output
        (its lockstep), so a rest would only slow the whole graph, and the demo's CPU is not
        the robot PC's."""
        woke, self._woke_at = self._woke_at, 0.0
        if not woke or not self.catches_up or self.simulated_time:
            return 0.0
        return woke + self._wake_period - self.steady()

    def _condition(self, raw: bytes, now: float) -> JointSample | None:
        """One driver message, decoded from its bytes (ros/cdr.py: at 1 kHz, rclpy's message
        object costs more than the conditioning), received at `now` (ROS time): the clean
        sample it completes, if any."""
        try:
            msg = cdr.decode_joint_state(raw)
        except ValueError as err:
            self.problems.report(MALFORMED, f'joint state: {err}: dropped', ERROR)
            return None
        result = self._conditioner.condition(
            msg.stamp, msg.names, msg.position, msg.velocity, msg.effort, now=now,
            stamp=Time(sec=msg.sec, nanosec=msg.nanosec), frame_id=msg.frame_id)
        for kind, detail in result.problems:
            self.problems.report(kind, detail,
                                 WARN if kind in WARNINGS or kind in TIMING_DROPS else ERROR)
        return result.sample

    def _pass_on(self, samples: list[JointSample]) -> None:
        """Clean samples out: to the nodes that read them in this process (composed mode)
        first, then published while anyone subscribes. They feed the watchdog first: input
        that was stale is fresh again for the first of them, as the replay has it, not only
        at the watchdog's next check. On simulated time the newest stamp feeds it too (up to
        input_timeout ahead): a simulator publishes its clock before the samples up to it,
        and a clock that jumped past them while they were on their way is no stale input."""
        now = self.seconds()
        if self.simulated_time:
            now = max(now, min(samples[-1].t, now + self._watchdog.timeout))
        self._watchdog.feed(now)
        if self._stale is not False:
            self._judge_staleness()
        self._output.send_batch(samples, lambda sample: self._writer.write(
            sample.stamp, sample.frame_id, sample.q, sample.v, sample.tau))
        self.problems.traffic['samples_published'] += len(samples)
        self._rate.add_batch(samples)

    # ----------------------------------------------------------------- watchdog
    def _check_watchdog(self) -> None:
        """Stale when no valid sample came for input_timeout: judged after taking what is
        waiting, so that this node waking late is never taken for its input stopping."""
        self.take_waiting()
        self._judge_staleness()

    def _judge_staleness(self) -> None:
        stale = self._watchdog.stale(self.seconds())
        if stale == self._stale:
            return
        self._stale = stale
        if stale:
            self.problems.set_status(
                ERROR, f'input stale: no valid joint state for {self._watchdog.timeout} s')
        else:
            self.problems.set_status(OK, 'receiving joint states')
        self._publish_stale()

    def _publish_stale(self) -> None:
        """input_stale on change and as a heartbeat, to the detector in this process
        (composed mode) first."""
        self._stale_output.send(self._stale, lambda: Bool(data=self._stale))


def main(args=None):
    return run(JointStateListenerNode, args)


if __name__ == '__main__':
    sys.exit(main())
