"""What a hostile or careless user tried in issue 27, on real nodes over rclpy: no parameter
switches a fail-safe off, every refusal names what it refused, a ~/reset reply tells what
the node published, a flood of resets is answered, and a huge skeleton is refused unread."""
import importlib
import os

import pytest
from geometry_msgs.msg import Pose, PoseArray
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from contact_estimation import manifest
from contact_estimation.nodes.collision_detector import CollisionDetectorNode
from contact_estimation.nodes.proximity_monitor import ProximityMonitorNode
from contact_estimation.nodes.residual_node import ResidualNode
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.qos import PIPELINE_QOS, SERVICE_QOS, STOP_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros import testing
from contact_estimation.ros.testing import spinning

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config')
TIMEOUT = 30.0
JOINTS = [f'panda_joint{i}' for i in range(1, 8)]
# Parameters of the safety nodes that set how long something may last or be old.
TIME_WORDS = ('timeout', 'time', 'age', 'delay', 'duration')


def make(node_class, name, context, **overrides):
    return node_class(context=context, cli_args=[
        '--ros-args', '--params-file', os.path.join(CONFIG, f'{name}.yaml')],
        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])


def set_remotely(probe, executor, node_name: str, name: str, value) -> tuple[bool, str]:
    """`ros2 param set`'s way: the node's set_parameters service."""
    result, = testing.set_remotely(probe, executor, node_name, {name: value}, TIMEOUT)
    return result.successful, result.reason


class Residuals(Node):
    """Plays the residual node for the detector: quiet residuals, stamped on `clock`'s time
    (this node's clock), while `streaming`; records the stops."""

    def __init__(self, context):
        super().__init__('hostile_probe', context=context)
        self.streaming, self.sim_time = True, None  # sim_time: stamps and /clock, s
        self.stops: list[bool] = []
        spec = manifest.node('collision_detector')
        self._pub = self.create_publisher(JointState, spec.topic('residual'), PIPELINE_QOS)
        self.create_subscription(Bool, spec.topic('stop'), lambda m: self.stops.append(m.data),
                                 STOP_QOS)
        self.clock_pub = None
        self.create_timer(0.002, self._publish)

    def start_clock(self, t0: float) -> None:
        self.sim_time = t0
        self.clock_pub = self.create_publisher(Clock, '/clock', 10)

    def _publish(self):
        if self.sim_time is not None and self.clock_pub is not None:
            self.sim_time += 0.002
            self.clock_pub.publish(Clock(clock=seconds_to_stamp(self.sim_time)))
        if not self.streaming:
            return
        msg = JointState(name=JOINTS, effort=[0.0] * 7, position=[0.1] * 7,
                         velocity=[0.0] * 7)
        msg.header.stamp = (seconds_to_stamp(self.sim_time) if self.sim_time is not None
                            else self.get_clock().now().to_msg())
        self._pub.publish(msg)


@pytest.fixture
def detector_rig(context):
    # discovery_time: the stop clears as soon as residuals flow, before a loaded machine's
    # first hiccup latches it (the hold at start is test_one_suite's).
    detector = make(CollisionDetectorNode, 'collision_detector', context, input_timeout=0.2,
                    discovery_time=0.1)
    probe = Residuals(context)
    with spinning(context, detector, probe) as executor:
        assert spin_until(executor, lambda: probe.stops and probe.stops[-1] is False, TIMEOUT)
        yield detector, probe, executor


def test_use_sim_time_is_refused_without_a_clock_and_time_stays_continuous_with_one(
        detector_rig):
    detector, probe, executor = detector_rig
    ok, reason = set_remotely(probe, executor, 'collision_detector', 'use_sim_time', True)
    assert not ok and 'use_sim_time' in reason and '/clock' in reason
    assert not detector.get_clock().ros_time_is_active
    # A simulated clock days behind the monotonic one: ages must stay true after the switch.
    probe.start_clock(1000.0)
    assert spin_until(executor, lambda: detector.count_publishers('/clock') > 0, TIMEOUT)
    assert set_remotely(probe, executor, 'collision_detector', 'use_sim_time', True)[0]
    count = len(probe.stops)
    assert spin_until(executor, lambda: len(probe.stops) > count + 5, TIMEOUT)
    probe.streaming = False  # the residuals stop; the simulated clock runs on
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT), \
        'no stop for missing residuals after use_sim_time was switched on'


@pytest.mark.xfail(strict=False, reason='open defect: switching use_sim_time at run time '
                   'steps the time base back; when the first simulated stamp latches '
                   'bad_stamp (or the new /clock subscription is late and the input goes '
                   'stale) before the heartbeat judges, no beat is counted late (CI, load)')
def test_the_stop_rises_when_the_simulated_clock_stops(detector_rig):
    """Issue 27: on simulated time whose /clock stops, the node's timers and timeouts stand
    still; the stop's heartbeat still judges on the monotonic clock."""
    detector, probe, executor = detector_rig
    probe.start_clock(1000.0)
    assert spin_until(executor, lambda: detector.count_publishers('/clock') > 0, TIMEOUT)
    assert set_remotely(probe, executor, 'collision_detector', 'use_sim_time', True)[0]
    assert spin_until(executor, lambda: probe.stops[-1] is False, TIMEOUT)
    probe.streaming, probe.clock_pub = False, None  # the simulation pauses: nothing moves
    # Waited for, not read at once: on a loaded machine the stop may rise for another cause
    # (behind) before the heartbeat's own judgement does.
    assert spin_until(executor, lambda: detector.stop_signal.late >= 1
                      and probe.stops[-1] is True, TIMEOUT)


@pytest.mark.parametrize('node_class, name', [(CollisionDetectorNode, 'collision_detector'),
                                              (ProximityMonitorNode, 'proximity_monitor')])
def test_no_time_parameter_of_a_stop_can_be_set_beyond_its_range(context, node_class, name):
    """Every writable parameter of a node with a stop that says how long something may last
    or be old: 1e308 s, inf, NaN and -1 s are refused, naming it."""
    node = make(node_class, name, context)
    table = importlib.import_module(node_class.__module__).PARAMETERS
    timed = [row.name for row in table.rows if not row.read_only
             and any(word in row.name for word in TIME_WORDS)
             and isinstance(row.default, float)]
    assert timed
    try:
        for parameter in timed:
            before = node.value(parameter)
            for bad in (1e308, float('inf'), float('nan'), -1.0):
                result = node.set_parameters_atomically([Parameter(parameter, value=bad)])
                assert not result.successful and parameter in result.reason, (parameter, bad)
                assert node.value(parameter) == before
    finally:
        node.destroy_node()


@pytest.mark.parametrize('node_class, name, parameter, value', [
    (ResidualNode, 'residual_node', 'payload.centre_of_mass', [1e308, 0.0, 0.0]),
    (ProximityMonitorNode, 'proximity_monitor', 'skeleton.rpy', [1e308, 0.0, 0.0]),
    (ProximityMonitorNode, 'proximity_monitor', 'cloud.workspace_max', [float('nan'), 1.0, 1.0])])
def test_an_absurd_element_of_a_vector_is_refused_naming_the_value(context, node_class, name,
                                                                   parameter, value):
    node = make(node_class, name, context)
    try:
        result = node.set_parameters_atomically([Parameter(parameter, value=value)])
        assert not result.successful
        assert parameter in result.reason and f'{value[0]:g}' in result.reason
        assert node.value(parameter) != value
    finally:
        node.destroy_node()


@pytest.mark.parametrize('parameter, words', [
    ('time_scaling_alpha', ['time_scaling_alpha', 'now time_scaling.alpha']),
    ('no_such.parameter', ['no_such.parameter'])])
def test_an_unknown_or_renamed_parameter_set_at_run_time_is_named(detector_rig, parameter,
                                                                  words):
    detector, probe, executor = detector_rig
    ok, reason = set_remotely(probe, executor, 'collision_detector', parameter, 1.0)
    assert not ok
    for word in words:
        assert word in reason


def test_a_refused_reset_says_so_and_the_stop_stays_raised(detector_rig):
    detector, probe, executor = detector_rig
    client = probe.create_client(Trigger, '/collision_detector/reset')
    assert client.wait_for_service(timeout_sec=TIMEOUT)

    def reset() -> Trigger.Response:
        future = client.call_async(Trigger.Request())
        assert spin_until(executor, future.done, TIMEOUT)
        return future.result()

    probe.streaming = False  # stale: the detector cannot clear
    assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
    reply = reset()
    count = len(probe.stops)
    assert spin_until(executor, lambda: len(probe.stops) > count + 2, TIMEOUT)
    assert not reply.success and 'refused' in reply.message
    assert all(probe.stops[count:]), 'the stop fell after a refused reset'
    probe.streaming = True
    assert spin_until(executor, lambda: (lambda r: r.success)(reset()), TIMEOUT)
    assert spin_until(executor, lambda: probe.stops[-1] is False, TIMEOUT)


def test_a_flood_of_200_resets_at_once_is_answered_in_full(detector_rig):
    """Issue 27: rclpy's default service queue kept 10 requests, and 190 of 200 calls sent at
    once were never answered."""
    detector, probe, executor = detector_rig
    client = probe.create_client(Trigger, '/collision_detector/reset', qos_profile=SERVICE_QOS)
    assert client.wait_for_service(timeout_sec=TIMEOUT)
    futures = [client.call_async(Trigger.Request()) for _ in range(200)]
    assert spin_until(executor, lambda: all(f.done() for f in futures), TIMEOUT), \
        f'{sum(not f.done() for f in futures)} of 200 resets unanswered'
    assert all(f.result().message for f in futures)


def test_a_skeleton_of_10000_poses_is_refused_unread(context):
    monitor = make(ProximityMonitorNode, 'proximity_monitor', context)
    probe = Node('skeleton_probe', context=context)
    publisher = probe.create_publisher(
        PoseArray, manifest.node('proximity_monitor').topic('skeleton'), QoSProfile(depth=10))
    huge = PoseArray(poses=[Pose() for _ in range(10_000)])
    huge.header.frame_id = monitor.robot.base_link
    with spinning(context, monitor, probe) as executor:
        def sent() -> bool:
            huge.header.stamp = probe.get_clock().now().to_msg()
            publisher.publish(huge)
            return monitor.problems.counts['wrong_size'] > 0
        assert spin_until(executor, sent, TIMEOUT)
