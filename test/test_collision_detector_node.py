"""collision_detector over rclpy: stop, reset, fail-safe, events, markers, parameters."""
import os

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
from contact_estimation.nodes.collision_detector import CollisionDetector
from contact_estimation.ros.node_main import StartupError
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.testing import spin_until

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
        self.streaming = True
        self.names, self.size = JOINTS, len(JOINTS)
        self.stops, self.events, self.markers, self.scaling = [], [], [], []
        self._residual_pub = self.create_publisher(JointState, SPEC.topic('residual'),
                                                   PIPELINE_QOS)
        self.stale_pub = self.create_publisher(Bool, SPEC.topic('input_stale'), STOP_QOS)
        self.create_subscription(Bool, SPEC.topic('stop'), lambda m: self.stops.append(m.data),
                                 STOP_QOS)
        self.create_subscription(DiagnosticStatus, SPEC.topic('events'), self.events.append,
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
                         position=[0.1] * self.size, velocity=[0.0] * self.size)
        msg.header.stamp = self.get_clock().now().to_msg()
        self._residual_pub.publish(msg)


@pytest.fixture
def rig(context, request):
    overrides = getattr(request, 'param', {'input_timeout': 1.0})
    detector = CollisionDetector(
        context=context, cli_args=['--ros-args', '--params-file', PARAMS],
        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
    probe = Probe(context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(detector)
    executor.add_node(probe)
    try:
        assert spin_until(executor, lambda: probe.stops and probe.stops[-1] is False, TIMEOUT), \
            'stop did not clear once residuals flowed'
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


def test_collision_stops_latches_and_reset_is_refused_until_it_is_over(rig):
    detector, probe, executor = rig
    probe.residual[3] = -6.0  # panda_joint4 over its 4 N·m position threshold
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
    assert spin_until(executor, lambda: probe.events and probe.markers, TIMEOUT)
    event = probe.events[-1]
    values = {kv.key: kv.value for kv in event.values}
    assert event.name == 'collision' and event.level == DiagnosticStatus.ERROR
    assert values['event'] == 'collision' and values['joints'] == 'panda_joint4'
    assert float(values['panda_joint4.residual']) == pytest.approx(-6.0)
    assert float(values['panda_joint4.threshold']) == pytest.approx(4.0)
    spheres = [m for m in probe.markers[-1].markers if m.type == Marker.SPHERE]
    assert [m.id for m in spheres] == [3] and spheres[0].header.frame_id == 'panda_link0'
    assert spin_until(executor, lambda: probe.scaling[-1] == 0.0, TIMEOUT)  # hold

    refused = reset(probe, executor)
    assert not refused.success and 'panda_joint4' in refused.message

    probe.residual[:] = 0.0
    assert spin_until(executor, lambda: probe.markers[-1].markers[-1].action == Marker.DELETEALL
                      and len(probe.markers[-1].markers) == 1, TIMEOUT)
    assert probe.stops[-1] is True  # latched (hold_time 0)
    assert reset(probe, executor).success
    assert spin_until(executor, lambda: probe.stops[-1] is False, TIMEOUT)
    assert spin_until(executor, lambda: probe.scaling[-1] > 0.0, TIMEOUT)  # recovering
    assert detector.problems.counts['collision'] == 1


@pytest.mark.parametrize('rig', [{'input_timeout': 0.1}], indirect=True)
def diagnostics(probe) -> list:
    """The detector's statuses on /diagnostics, as they arrive."""
    statuses = []
    probe.create_subscription(DiagnosticArray, SPEC.topic('diagnostics'),
                              lambda m: statuses.extend(
                                  s for s in m.status if s.name.endswith('collision_detector')),
                              PIPELINE_QOS)
    return statuses


def test_no_residual_for_input_timeout_stops_with_the_reason(rig):
    _, probe, executor = rig
    statuses = diagnostics(probe)
    probe.streaming = False
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
    assert spin_until(executor, lambda: probe.events, TIMEOUT)
    assert probe.events[-1].level == DiagnosticStatus.ERROR
    assert 'no residual' in probe.events[-1].message
    assert spin_until(executor, lambda: statuses and statuses[-1].level == DiagnosticStatus.ERROR,
                      TIMEOUT)
    assert 'no residual' in statuses[-1].message
    assert 'no residual' in reset(probe, executor).message


def test_listener_watchdog_stops(rig):
    detector, probe, executor = rig
    statuses = diagnostics(probe)
    probe.stale_pub.publish(Bool(data=True))
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
    assert spin_until(executor, lambda: probe.events, TIMEOUT)
    assert 'watchdog' in probe.events[-1].message
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
    assert {kv.key: kv.value for kv in probe.events[-1].values}['event'] == 'invalid_residual'
    assert 'not finite' in reset(probe, executor).message


def test_heartbeat_repeats_an_unchanged_stop(rig):
    _, probe, executor = rig
    count = len(probe.stops)
    assert spin_until(executor, lambda: len(probe.stops) >= count + 5, TIMEOUT)
    assert set(probe.stops[count:]) == {False}


def test_bad_parameters_are_refused_at_run_time(rig):
    detector, probe, executor = rig
    results = detector.set_parameters([Parameter('thresholds_position', value=[-1.0])])
    assert not results[0].successful and 'thresholds_position' in results[0].reason
    results = detector.set_parameters([Parameter('joint_roles', value=['position'] * 3)])
    assert not results[0].successful and 'joint_roles' in results[0].reason
    assert list(detector.get_parameter('thresholds_position').value) == [4.0]

    results = detector.set_parameters([Parameter('joint_roles', value=['force'])])
    assert results[0].successful
    probe.residual[0] = 6.0  # over 4 N·m but under the force threshold of 8 N·m
    count = len(probe.scaling)
    assert spin_until(executor, lambda: len(probe.scaling) > count + 100, TIMEOUT)
    assert probe.stops[-1] is False


def test_bad_parameters_refuse_to_start(context):
    with pytest.raises(StartupError, match='consecutive_samples|thresholds_force'):
        CollisionDetector(context=context, cli_args=['--ros-args', '--params-file', PARAMS],
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
