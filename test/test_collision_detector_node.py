"""collision_detector over rclpy: stop, reset, fail-safe, events, markers, parameters."""
import os
import re
import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

from contact_estimation import manifest
from contact_estimation.core.chain.detector import DEFAULTS, WEIGHTED
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.nodes.collision_detector import CollisionDetectorNode
from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds
from contact_estimation.ros.node_main import StartupError
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.spinning import spin_until

PARAMS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      'config', 'collision_detector.yaml')
SPEC = manifest.node('collision_detector')
JOINTS = [f'panda_joint{i}' for i in range(1, 8)]
TIMEOUT = 10.0


class Probe(Node):
    """Plays the residual node and the listener; records what the detector publishes."""

    def __init__(self, context):
        super().__init__('detector_probe', context=context)
        self.residual = np.zeros(len(JOINTS))
        self.position = np.full(len(JOINTS), 0.1)
        self.sent: list[tuple[float, np.ndarray]] = []  # (stamp, residual) as published
        self.streaming = True
        # (τ_ext of 1 N, N/s, to N): the residual of a force ramping up, per stamp
        self.ramp: tuple[np.ndarray, float, float] | None = None
        self.newtons = 0.0
        self.names, self.size = JOINTS, len(JOINTS)
        self.stops, self.events, self.markers, self.scaling = [], [], [], []
        self._residual_pub = self.create_publisher(JointState, SPEC.topic('residual'),
                                                   PIPELINE_QOS)
        self.stale_pub = self.create_publisher(Bool, SPEC.topic('input_stale'), STOP_QOS)
        self.create_subscription(Bool, SPEC.topic('stop'), lambda m: self.stops.append(m.data),
                                 STOP_QOS)
        self.create_subscription(DiagnosticArray, SPEC.topic('events'), self.events.append,
                                 PIPELINE_QOS)
        self.create_subscription(MarkerArray, SPEC.topic('markers'), self.markers.append,
                                 PIPELINE_QOS)
        self.create_subscription(Float64, SPEC.topic('time_scaling'),
                                 lambda m: self.scaling.append(m.data), PIPELINE_QOS)
        self.reset_client = self.create_client(Trigger, '/collision_detector/reset')
        self.create_timer(0.002, self._publish)

    def _publish(self):
        if not self.streaming:
            return
        msg = JointState(name=self.names, effort=[float(x) for x in self.residual[:self.size]],
                         position=[float(x) for x in self.position[:self.size]],
                         velocity=[0.0] * self.size)
        msg.header.stamp = self.get_clock().now().to_msg()
        if self.ramp is not None and self.sent:
            per_newton, rate, peak = self.ramp
            step = rate * (stamp_to_seconds(msg.header.stamp) - self.sent[-1][0])
            self.newtons = min(peak, self.newtons + step)
            self.residual = self.newtons * per_newton
            msg.effort = [float(x) for x in self.residual[:self.size]]
        self.sent.append((stamp_to_seconds(msg.header.stamp), self.residual.copy()))
        self._residual_pub.publish(msg)


def status(event: DiagnosticArray) -> DiagnosticStatus:
    """The one status of a collision event."""
    assert len(event.status) == 1
    return event.status[0]


@pytest.fixture
def rig(context, request):
    # max_lag 1 s: a loaded machine may run this process 20 ms late, which is not what these
    # tests are about (test_behind is); discovery_time 0.1 s: nor is a second suite
    # (test_one_suite is).
    overrides = {'max_lag': 1.0, 'discovery_time': 0.1,
                 **getattr(request, 'param', {'input_timeout': 1.0})}
    detector = CollisionDetectorNode(
        context=context, cli_args=['--ros-args', '--params-file', PARAMS],
        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
    probe = Probe(context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(detector)
    executor.add_node(probe)
    try:
        assert spin_until(executor, lambda: probe.stops and probe.stops[-1] is False, TIMEOUT), \
            'stop did not clear once residuals flowed'
        # The start-up events ('waiting' may come before the probe listens; 'cleared' when
        # the residuals arrived) are kept apart from what each test provokes.
        assert spin_until(executor, lambda: probe.events, TIMEOUT)
        probe.startup_events = probe.events[:]
        probe.events.clear()
        yield detector, probe, executor
    finally:
        executor.shutdown()
        probe.destroy_node()
        detector.destroy_node()


def reset(probe, executor) -> Trigger.Response:
    assert probe.reset_client.wait_for_service(timeout_sec=TIMEOUT)
    future = probe.reset_client.call_async(Trigger.Request())
    assert spin_until(executor, future.done, TIMEOUT)
    return future.result()


def spheres(markers: MarkerArray) -> list[Marker]:
    return [m for m in markers.markers if m.type == Marker.SPHERE]


def test_collision_stops_latches_and_reset_is_refused_until_it_is_over(rig):
    detector, probe, executor = rig
    probe.residual[3] = -6.0  # panda_joint4 over its 4 N·m position threshold
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
    assert spin_until(executor, lambda: probe.events and probe.markers, TIMEOUT)
    event = status(probe.events[-1])
    values = {kv.key: kv.value for kv in event.values}
    assert event.name == 'collision' and event.level == DiagnosticStatus.ERROR
    assert values['event'] == 'collision' and values['joints'] == 'panda_joint4'
    assert float(values['panda_joint4.residual']) == pytest.approx(-6.0)
    assert float(values['panda_joint4.threshold']) == pytest.approx(4.0)
    # The header stamp is the joint-state stamp of the residual that completed eq. 7's
    # evidence: 25 ms on the stamps from the sample before the run over ψ, each at
    # (6/4)² = 2.25 times its Δt with the shipped weighted persistence.
    stamp = stamp_to_seconds(probe.events[-1].header.stamp)
    over = [t for t, tau in probe.sent if tau[3] == -6.0]
    before = max(t for t, _ in probe.sent if t < over[0])
    needed = 0.025 / (1.5 ** 2 if DEFAULTS.persistence == WEIGHTED else 1.0)
    assert stamp in over and needed - 1e-6 <= stamp - before < needed + 0.1
    assert float(values['stamp']) == pytest.approx(stamp, abs=1e-6)
    shown = spheres(probe.markers[-1])
    assert [m.id for m in shown] == [3] and shown[0].header.frame_id == 'panda_link0'
    assert spin_until(executor, lambda: probe.scaling and probe.scaling[-1] == 0.0, TIMEOUT)  # hold

    refused = reset(probe, executor)
    assert not refused.success and 'panda_joint4' in refused.message

    probe.residual[:] = 0.0
    # resumes by itself
    assert spin_until(executor, lambda: probe.scaling and probe.scaling[-1] > 0.0, TIMEOUT)
    assert probe.stops[-1] is True  # while the stop stays latched (hold_time 0)
    # The markers stay while the stop is latched, repeated at the heartbeat rate, and follow
    # the arm.
    count = len(probe.markers)
    probe.position[:] = [0.5, -0.3, 0.2, -2.0, 0.1, 1.5, 0.7]
    assert spin_until(executor, lambda: len(probe.markers) >= count + 3, TIMEOUT)
    assert all([m.id for m in spheres(a)] == [3] for a in probe.markers[count:])
    moved = spheres(probe.markers[-1])[0].pose.position
    assert abs(moved.x - shown[0].pose.position.x) + abs(moved.y - shown[0].pose.position.y) \
        > 0.01

    assert reset(probe, executor).success
    assert spin_until(executor, lambda: probe.stops[-1] is False, TIMEOUT)
    assert spin_until(executor, lambda: probe.markers[-1].markers[-1].action == Marker.DELETEALL
                      and len(probe.markers[-1].markers) == 1, TIMEOUT)
    assert probe.markers[-1].markers[0].ns == 'collision'  # the other nodes' markers stay
    assert detector.problems.counts['collision'] == 1


@pytest.mark.parametrize('rig', [{'input_timeout': 1.0, 'time_scaling.resume_delay': 0.05,
                                  'time_scaling.recovery_rate': 7.0}], indirect=True)
def test_every_stop_change_has_an_event_and_f_s_lands_exactly_on_0_and_1(rig):
    _, probe, executor = rig
    # Start-up: the stop went False when the residuals arrived, and an event says so.
    cleared = status(probe.startup_events[-1])
    assert {kv.key: kv.value for kv in cleared.values}['event'] == 'cleared'
    assert cleared.message == 'stop cleared: input arrived'
    # A subscriber that starts now, with the stop's QoS, still gets the start-up events.
    late = []
    probe.create_subscription(DiagnosticArray, SPEC.topic('events'), late.append, STOP_QOS)
    assert spin_until(executor, lambda: len(late) >= 2, TIMEOUT)
    assert [{kv.key: kv.value for kv in status(e).values}['event'] for e in late[:2]] == [
        'waiting', 'cleared']
    probe.residual[3] = -6.0
    assert spin_until(executor, lambda: probe.scaling and probe.scaling[-1] == 0.0, TIMEOUT)
    probe.residual[:] = 0.0
    # The ramp back moves in steps of recovery_rate × dt; whatever they are, the last value
    # published (and repeated by the heartbeat) is exactly 1, not just short of it.
    assert spin_until(executor, lambda: probe.scaling and probe.scaling[-1] == 1.0, TIMEOUT)
    count = len(probe.scaling)
    assert spin_until(executor, lambda: len(probe.scaling) >= count + 2, TIMEOUT)  # heartbeat
    assert probe.scaling[-2:] == [1.0, 1.0]


@pytest.mark.parametrize('rig', [{'input_timeout': 1.0, 'touch.enabled': True}], indirect=True)
def test_a_touch_holds_without_a_stop_and_becomes_an_impact_beyond_max_force(rig):
    _, probe, executor = rig
    robot = RobotModel.load('panda')
    probe.position[:] = [0.3, -0.4, 0.2, -2.0, 0.1, 1.6, 0.5]
    # τ_ext of a force on link 4 there (a point on its body): 7 N·m on joint 3 at 40 N
    per_newton = robot.point_jacobian(probe.position, 'panda_link4',
                                      np.array([-0.05, 0.1, 0.0])).T @ [0.0, -1.0, 0.0]
    probe.ramp = (per_newton, 60.0, 40.0)  # a hand: 40 N within 0.7 s
    assert spin_until(executor, lambda: probe.events, TIMEOUT)
    values = {kv.key: kv.value for kv in status(probe.events[-1]).values}
    assert values['event'] == 'touch' and values['class'] == 'touch'
    assert status(probe.events[-1]).level == DiagnosticStatus.WARN
    assert 0.0 < float(values['class.decision_time']) and float(values['class.rise_share']) < 0.5
    # f_S = 0 from the hold; the class decided on the first sample touch.decision_time
    # (150 ms) or more after it (the samples' stamps are the probe's clock: steps vary)
    hold, decided = float(values['class.hold']), float(values['class.decided'])
    # (a stamp within 1 µs of the window's end may fall either side of it: the stamps are
    # float seconds at 1.8e9, resolved to 0.24 µs)
    stamps = [t for t, _ in probe.sent]
    assert min(abs(t - decided) for t in stamps) < 1e-6 and decided - hold >= 0.15 - 1e-6
    assert not [t for t in stamps if hold + 0.15 + 1e-6 <= t < decided - 1e-6]
    # joint 4 carries under touch.isolation_torque at first: link 3 bounds it from below
    assert values['class.link'] in ('panda_link3', 'panda_link4')
    assert 10 < float(values['class.force']) < 80
    assert spin_until(executor, lambda: probe.scaling and probe.scaling[-1] == 0.0, TIMEOUT)
    assert probe.stops[-1] is False  # held by f_S, the stop not latched
    probe.ramp = (per_newton, 60.0, 120.0)  # on, slowly, beyond touch.max_force (80 N)
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
    assert spin_until(executor, lambda: len(probe.events) >= 2, TIMEOUT)
    values = {kv.key: kv.value for kv in status(probe.events[-1]).values}
    assert values['event'] == 'collision' and values['class'] == 'impact'
    assert values['class.reason'].startswith('touch became an impact')
    assert 'touch.max_force' in values['class.reason']
    assert values['class.rule'] == 'max_force after touch'


def diagnostics(probe) -> list:
    """The detector's statuses on /diagnostics, as they arrive."""
    statuses = []
    probe.create_subscription(DiagnosticArray, SPEC.topic('diagnostics'),
                              lambda m: statuses.extend(
                                  s for s in m.status if s.name.endswith('collision_detector')),
                              PIPELINE_QOS)
    return statuses


@pytest.mark.parametrize('rig', [{'input_timeout': 0.1}], indirect=True)
def test_no_residual_for_input_timeout_stops_with_the_reason(rig):
    _, probe, executor = rig
    statuses = diagnostics(probe)
    probe.streaming = False
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
    assert spin_until(executor, lambda: probe.events, TIMEOUT)
    assert status(probe.events[-1]).level == DiagnosticStatus.ERROR
    assert 'no residual' in status(probe.events[-1]).message
    assert spin_until(executor, lambda: statuses and statuses[-1].level == DiagnosticStatus.ERROR,
                      TIMEOUT)
    assert 'no residual' in statuses[-1].message
    assert 'no residual' in reset(probe, executor).message


def test_listener_watchdog_stops(rig):
    detector, probe, executor = rig
    statuses = diagnostics(probe)
    probe.stale_pub.publish(Bool(data=False))  # the listener has seen joint states ...
    probe.stale_pub.publish(Bool(data=True))   # ... and then no more
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
    assert spin_until(executor, lambda: probe.events, TIMEOUT)
    assert 'watchdog' in status(probe.events[-1]).message
    assert spin_until(executor, lambda: statuses and 'watchdog' in statuses[-1].message, TIMEOUT)
    assert statuses[-1].level == DiagnosticStatus.ERROR
    assert detector.problems.counts['stale_input'] == 1
    probe.stale_pub.publish(Bool(data=False))
    assert spin_until(executor, lambda: reset(probe, executor).success, TIMEOUT)
    assert spin_until(executor, lambda: probe.stops[-1] is False, TIMEOUT)


def test_nan_residual_stops_and_wrong_sizes_are_counted(rig):
    detector, probe, executor = rig
    probe.size = 5
    assert spin_until(executor, lambda: detector.problems.counts['wrong_size'] >= 3, TIMEOUT)
    assert probe.stops[-1] is False  # dropped, and the timeout has not run out
    probe.size = len(JOINTS)
    probe.residual[1] = np.nan
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
    assert spin_until(executor, lambda: probe.events, TIMEOUT)
    assert {kv.key: kv.value for kv in status(probe.events[-1]).values}['event'] == \
        'invalid_residual'
    assert 'not finite' in reset(probe, executor).message


def test_heartbeat_repeats_an_unchanged_stop(rig):
    detector, probe, executor = rig
    count, late = len(probe.stops), detector.stop_signal.late
    assert spin_until(executor, lambda: len(probe.stops) >= count + 5, TIMEOUT)
    # False, but for the beats that found the detector's last decision too old to vouch
    # for (this test's executor stalled by a loaded machine): those say stop (fail-safe).
    assert probe.stops[count:].count(True) <= detector.stop_signal.late - late
    assert False in probe.stops[count:]


def test_a_late_heartbeats_stop_names_its_cause(rig):
    """The executor held (as a machine too loaded to run it would): the stop process says
    stop, since the node's last decision is too old, and tells the node; the next
    /diagnostics says why, at ERROR, though the stop is False again by then; the count is
    there too."""
    detector, probe, executor = rig
    statuses = diagnostics(probe)
    late = detector.stop_signal.late
    deadline = time.monotonic() + TIMEOUT
    while detector.stop_signal.late == late and time.monotonic() < deadline:
        time.sleep(0.01)  # nobody spins: no decision
    assert detector.stop_signal.late > late
    assert spin_until(executor, lambda: any('no decision for' in s.message for s in statuses),
                      TIMEOUT)
    told = next(s for s in statuses if 'no decision for' in s.message)
    values = {kv.key: kv.value for kv in told.values}
    assert told.level == DiagnosticStatus.ERROR and 'fell behind' in told.message
    assert int(values['late_heartbeat']) >= 1 and int(values['late_heartbeats']) >= 1


def test_bad_parameters_are_refused_at_run_time(rig):
    detector, probe, executor = rig
    results = detector.set_parameters([Parameter('thresholds_position', value=[-1.0])])
    assert not results[0].successful and 'thresholds_position' in results[0].reason
    results = detector.set_parameters([Parameter('joint_roles', value=['position'] * 3)])
    assert not results[0].successful and 'joint_roles' in results[0].reason
    results = detector.set_parameters([Parameter('persistence', value='cusum')])
    assert not results[0].successful and 'persistence' in results[0].reason
    assert list(detector.get_parameter('thresholds_position').value) == [4.0]

    results = detector.set_parameters([Parameter('joint_roles', value=['force'])])
    assert results[0].successful
    probe.residual[0] = 6.0  # over 4 N·m but under the force threshold of 8 N·m
    count = len(probe.sent)  # residuals, every 2 ms: far longer than eq. 7's 25 ms
    assert spin_until(executor, lambda: len(probe.sent) > count + 200, TIMEOUT)
    assert probe.stops[-1] is False


def test_bad_parameters_refuse_to_start(context):
    with pytest.raises(StartupError, match='thresholds_force'):
        CollisionDetectorNode(context=context, cli_args=['--ros-args', '--params-file', PARAMS],
                          parameter_overrides=[Parameter('thresholds_force', value=[8.0, -1.0])])


def test_diagnostics_report_the_stop_and_its_reason(rig):
    detector, probe, executor = rig
    statuses = diagnostics(probe)
    probe.residual[6] = 5.0
    assert spin_until(executor, lambda: statuses and statuses[-1].level == DiagnosticStatus.ERROR,
                      TIMEOUT)
    values = {kv.key: kv.value for kv in statuses[-1].values}
    assert 'panda_joint7' in statuses[-1].message
    assert values['stop'] == 'True' and values['collision'] == '1'
    assert values['colliding_joints'] == 'panda_joint7'


# ---------------------------------------------------------------- samples fed directly
def test_a_stamp_going_back_restarts_the_acceleration_term_and_is_counted(context):
    """The q̈ fit's rules are core/chain/detector.AccelerationEstimate's (test_detector.py);
    here the node feeds it every residual sample (`process_residual`, what the residual node
    calls in composed mode) and reports a restart on /diagnostics. The joint order of
    varying names: test_joint_order.py."""
    node = CollisionDetectorNode(context=context, cli_args=['--ros-args', '--params-file', PARAMS],
                             parameter_overrides=[Parameter('acceleration_gain', value=[1.0])])
    try:
        base = time.time()  # stamps on the node's clock
        for k in range(80):
            t = base + k * 1e-3 - (0.5 if k >= 40 else 0.0)  # the driver's clock jumps back
            node.process_residual(JointSample(t, np.full(7, (100.0 + k * 1e-3) ** 2),
                                              np.zeros(7), None, np.zeros(7),
                                              seconds_to_stamp(t)))
        assert node.problems.counts['stamp_order'] == 1
    finally:
        node.destroy_node()


def test_the_input_rate_and_what_the_time_settings_mean_at_it_are_reported(rig):
    """As the listener and the residual node do: the times are in seconds, the rate is the
    driver's, and the log and /diagnostics say what one comes to in samples."""
    detector, probe, executor = rig
    values = detector.problems.values
    assert spin_until(executor, lambda: 'time_settings' in values, TIMEOUT)
    rate = float(values['input_rate_hz'])
    steps = np.diff([t for t, _ in probe.sent])
    assert 1.0 / steps.max() <= rate <= 1.0 / steps.min()
    persistence = DEFAULTS.persistence_time
    said = values['time_settings']
    assert said.startswith('input at ') and 'input_timeout 1 s' in said
    periods = re.search(rf'persistence_time {persistence:g} s = ([\d.]+) periods', said)
    assert float(periods.group(1)) == pytest.approx(persistence * rate, rel=0.01)
