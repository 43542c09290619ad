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
beside the others on small machines). Every time setting is in seconds, so a driver's rate
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

import dataclasses
import sys

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
from contact_estimation.ros.input_rate import InputRateLog, TimeSettings
from contact_estimation.ros.joint_states import JointStateWriter
from contact_estimation.ros.node_main import run
from contact_estimation.ros.params import ROBOT, Parameter, ParameterTable
from contact_estimation.ros.qos import STOP_QOS
from contact_estimation.ros.suite_node import SuiteNode

NAME = 'joint_state_listener'

# How often the watchdog is checked (a stale input is flagged at most this late after
# input_timeout; every check wakes the node, and 200 Hz cost ~8 % of a core) and how often
# input_stale is repeated when it does not change.
WATCHDOG_PERIOD = 0.01   # s
HEARTBEAT_PERIOD = 0.1   # s


def _conditioning(name: str, description: str, field: str = '', **row) -> Parameter:
    """A row feeding ConditioningConfig's `field` (by default the field `name`), at its
    default."""
    return Parameter(name, description, field=(ConditioningConfig, field or name), **row)


PARAMETERS = ROBOT + ParameterTable(
    _conditioning('effort_is_current', 'the effort field is motor current (A): joint torque = '
                  'G_m k_m i (seed 001 eqs. 1-2)'),
    _conditioning('positions_are_motor_side', 'positions and velocities are motor-side: '
                  'divided by G_m (seed 001 eq. 3)'),
    _conditioning('torque_constants', 'motor torque constants k_m (N·m/A): one value for all '
                  'joints or one per joint', range=(0.0, 1e3), per_joint=1),
    _conditioning('gear_ratios', 'gear ratios G_m (motor/joint): one value for all joints or '
                  'one per joint', range=(0.0, 1e5), per_joint=1),
    _conditioning('velocity_filter.window_duration', 'time span (s) of the least-squares fit '
                  'that estimates velocity the driver omits (at least 3 samples whatever the '
                  'rate)', 'velocity_window', range=(0.001, 1.0)),
    _conditioning('merge_window', 'largest stamp difference (s) between joint-state parts '
                  'merged into one sample', range=(0.0, 1.0)),
    _conditioning('gap_threshold', 'input pause (s) after which the velocity filter restarts',
                  range=(0.001, 10.0)),
    _conditioning('input_timeout', 'time (s) without a valid sample after which input_stale '
                  'goes True; also how long stamps must keep going back before a new time '
                  'base is accepted', 'time_reset_after', range=(0.001, 10.0)),
    _conditioning('max_future', "largest time (s) a stamp may be ahead of this node's clock",
                  range=(0.001, 3600.0)),
    _conditioning('max_past', "largest time (s) a stamp may be behind this node's clock: an "
                  'older joint state was sent long ago (a log played live, a clock set to '
                  '1970) and is dropped, never feeding the watchdog', range=(0.001, 3600.0)),
    _conditioning('limit_margin', 'distance (rad or m) beyond a joint limit before it is '
                  'reported (warning)', range=(0.0, 3.2)),
    _conditioning('hard_limit_margin', 'distance (rad or m) beyond a joint limit at which a '
                  'message is dropped (at least limit_margin)', range=(0.0, 10.0)),
    _conditioning('velocity_limit_factor', 'a message is dropped when |velocity| exceeds this '
                  'times the URDF limit', range=(1.0, 100.0)),
    _conditioning('effort_limit_factor', 'a message is dropped when |joint torque| exceeds '
                  'this times the URDF limit', range=(1.0, 100.0)),
    renamed={'velocity_filter.window': 'velocity_filter.window_duration'})  # samples → s


class JointStateListener(SuiteNode):
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
        self.subscribe('joint_states', JointState, self._on_joint_states, raw=True)
        self._stale: bool | None = None
        self._rate = InputRateLog(self, self._time_settings)
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

    # ----------------------------------------------------------------- messages
    def _on_joint_states(self, raw: bytes) -> None:
        """One driver message, decoded from its bytes (ros/cdr.py: at 1 kHz, rclpy's message
        object costs more than the conditioning)."""
        try:
            msg = cdr.decode_joint_state(raw)
        except ValueError as err:
            self.problems.report(MALFORMED, f'joint state: {err}: dropped', ERROR)
            return
        result = self._conditioner.condition(
            msg.stamp, msg.names, msg.position, msg.velocity, msg.effort,
            now=self.stamp_clock(),
            stamp=Time(sec=msg.sec, nanosec=msg.nanosec))
        for kind, detail in result.problems:
            self.problems.report(kind, detail,
                                 WARN if kind in WARNINGS or kind in TIMING_DROPS else ERROR)
        if result.sample is not None:
            sample = result.sample
            self._pass_on(dataclasses.replace(sample, frame_id=msg.frame_id)
                          if msg.frame_id else sample)

    def _pass_on(self, sample: JointSample) -> None:
        """One clean sample out: to the nodes that read it in this process (composed mode)
        first, then published while anyone subscribes; it feeds the watchdog."""
        self._output.send(sample, lambda: self._writer.write(
            sample.stamp, sample.frame_id, sample.q, sample.v, sample.tau))
        self.problems.traffic['samples_published'] += 1
        self._watchdog.feed(self.seconds())
        self._rate.add(sample.t)

    def _time_settings(self) -> TimeSettings:
        """For InputRateLog: the velocity filter's window, the timeouts."""
        window = 'velocity_filter.window_duration'
        return ({window: self.value(window)},
                {n: self.value(n) for n in ('gap_threshold', 'input_timeout')}, {})

    # ----------------------------------------------------------------- watchdog
    def _check_watchdog(self) -> None:
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
    return run(JointStateListener, args)


if __name__ == '__main__':
    sys.exit(main())
