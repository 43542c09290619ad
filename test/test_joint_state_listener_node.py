"""joint_state_listener over real rclpy: in-process node, its parameter file, Fast DDS on
localhost."""
import math
import time

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from contact_estimation import manifest
from contact_estimation.core.chain import joint_state_conditioning as jsc
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.nodes.joint_state_listener import JointStateListenerNode
from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds
from contact_estimation.ros.node_main import StartupError
from contact_estimation.ros.qos import STOP_QOS
from contact_estimation.ros.spinning import spin_until

SPEC = manifest.node('joint_state_listener')
PARAMS = SPEC.parameters_path()
ARM = [f'panda_joint{i}' for i in range(1, 8)]
FINGERS = ['panda_finger_joint1', 'panda_finger_joint2']
HOME = [0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.8]
DT = 1e-3
TIMEOUT = 30.0  # s: generous deadline for each awaited event
FEED_PERIOD = 0.005  # s between the joint states a fed driver sends


def joint_state(t, names=None, position=None, velocity=None, effort=None):
    """Fingers first, then the arm joints in reverse order: as a driver might send them."""
    msg = JointState()
    msg.header.stamp = seconds_to_stamp(t)
    msg.name = names if names is not None else FINGERS + ARM[::-1]
    count = len(msg.name)
    msg.position = position if position is not None else [0.04, 0.04] + HOME[::-1]
    msg.velocity = velocity if velocity is not None else [0.1 * i for i in range(count)]
    msg.effort = effort if effort is not None else [1.0 * i for i in range(count)]
    return msg


class Harness:
    """The listener plus a driver node that publishes joint states and records every output."""

    def __init__(self, context, **node_kwargs):
        self.listener = JointStateListenerNode(
            context=context, cli_args=['--ros-args', '--params-file', PARAMS], **node_kwargs)
        self.driver = Node('fake_driver', context=context)
        self.outputs, self.stale, self.diagnostics = [], [], []
        self.driver.create_subscription(JointState, SPEC.topic('joint_state'),
                                        self.outputs.append, 100)
        self.driver.create_subscription(Bool, SPEC.topic('input_stale'),
                                        lambda m: self.stale.append(m.data), STOP_QOS)
        self.driver.create_subscription(DiagnosticArray, SPEC.topic('diagnostics'),
                                        self.diagnostics.append, 10)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.listener)
        self.executor.add_node(self.driver)

    def publisher(self, reliable=True):
        reliability = ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT
        pub = self.driver.create_publisher(JointState, SPEC.topic('joint_states'),
                                           QoSProfile(depth=100, reliability=reliability))
        assert self.spin_until(lambda: pub.get_subscription_count() >= 1)
        assert self.spin_until(
            lambda: all(output.listened for output in self.listener.outputs))
        return pub

    def spin_until(self, done, timeout=TIMEOUT):
        return spin_until(self.executor, done, timeout)

    def feed_until(self, pub, message, done, timeout=TIMEOUT) -> bool:
        """Publish message(k) for k = 0, 1, ... as a driver would (a 200 Hz stream), with
        every callback due in between run (the watchdog's timer too), until done() or the
        deadline."""
        deadline, k = time.monotonic() + timeout, 0
        while not done() and time.monotonic() < deadline:
            pub.publish(message(k))
            self.spin_until(done, FEED_PERIOD)
            k += 1
        return done()

    def count(self, kind):
        """The listener's latest /diagnostics count of `kind` (0 if absent)."""
        name = self.listener.get_fully_qualified_name()
        for array in reversed(self.diagnostics):
            for status in array.status:
                if status.name == name:
                    return int({kv.key: kv.value for kv in status.values}.get(kind, 0))
        return 0

    def close(self):
        self.executor.shutdown()
        self.listener.destroy_node()
        self.driver.destroy_node()


@pytest.fixture
def harness(context):
    h = Harness(context)
    yield h
    h.close()


def stamp_seconds(msg):
    return msg.header.stamp.sec, msg.header.stamp.nanosec


def test_good_messages_come_out_in_model_order_with_the_same_stamp(harness):
    pub = harness.publisher()
    t0 = time.time()
    sent = [joint_state(t0 + k * DT) for k in range(5)]
    for msg in sent:
        pub.publish(msg)
    assert harness.spin_until(lambda: len(harness.outputs) == len(sent))
    for msg, out in zip(sent, harness.outputs):
        assert stamp_seconds(out) == stamp_seconds(msg)
        assert list(out.name) == ARM
        by_name = dict(zip(msg.name, zip(msg.position, msg.velocity, msg.effort)))
        assert list(out.position) == [by_name[j][0] for j in ARM]
        assert list(out.velocity) == [by_name[j][1] for j in ARM]
        assert list(out.effort) == [by_name[j][2] for j in ARM]


def test_the_frame_id_of_each_message_goes_out_with_it(harness):
    pub = harness.publisher()
    t0 = time.time()
    sent = [joint_state(t0 + k * DT) for k in range(3)]
    for msg, frame_id in zip(sent, ('base', '', 'world')):
        msg.header.frame_id = frame_id
        pub.publish(msg)
    assert harness.spin_until(lambda: len(harness.outputs) == len(sent))
    assert [out.header.frame_id for out in harness.outputs] == ['base', '', 'world']


def test_best_effort_and_reliable_publishers_are_both_received(harness):
    best_effort, reliable = harness.publisher(reliable=False), harness.publisher(reliable=True)
    t0 = time.time()

    def steps_out():
        return {round((stamp_to_seconds(out.header.stamp) - t0) / DT) for out in harness.outputs}
    for k in range(0, 20, 2):
        best_effort.publish(joint_state(t0 + k * DT))
        reliable.publish(joint_state(t0 + (k + 1) * DT))
        assert harness.spin_until(lambda: k + 1 in steps_out())  # the reliable one always comes
    received = steps_out()
    assert received & set(range(0, 20, 2)), 'nothing from the best-effort publisher'
    assert received & set(range(1, 20, 2)), 'nothing from the reliable publisher'


def _missing_joint7(t):
    names = FINGERS + ARM[:-1]
    return [joint_state(t + k * DT, names, [0.0] * 8, [0.0] * 8, [0.0] * 8) for k in range(2)]


def _with_duplicate(t):
    msg = joint_state(t)
    return [joint_state(t, msg.name + [ARM[0]], list(msg.position) + [0.0],
                        list(msg.velocity) + [0.0], list(msg.effort) + [0.0])]


# kind → (messages from a start time t, how many of them are good)
BAD_INPUTS = {
    jsc.NON_FINITE: (lambda t: [joint_state(t, position=[0.0, 0.0] + [math.nan] * 7)], 0),
    jsc.LENGTH_MISMATCH: (lambda t: [joint_state(t, position=[0.0] * 8)], 0),
    jsc.UNKNOWN_JOINT: (lambda t: [joint_state(t, names=FINGERS + ['left_' + j for j in ARM])], 0),
    jsc.MISSING_JOINTS: (_missing_joint7, 0),
    jsc.DUPLICATE_JOINT: (_with_duplicate, 0),
    jsc.REPEATED_STAMP: (lambda t: [joint_state(t), joint_state(t)], 1),
    jsc.OUT_OF_ORDER_STAMP: (lambda t: [joint_state(t), joint_state(t - DT)], 1),
    jsc.ZERO_STAMP: (lambda t: [joint_state(0.0)], 0),
    jsc.NO_NAMES: (lambda t: [joint_state(t, [], [], [], [])], 0),
    jsc.IMPLAUSIBLE: (lambda t: [joint_state(t, position=[0.0] * 8 + [1e300],
                                             effort=[0.0] * 8 + [1e300])], 0),
    # One stamp from far in the future must not make the good ones after it look old.
    jsc.FUTURE_STAMP: (lambda t: [joint_state(t), joint_state(t + 1e6), joint_state(t + DT)], 2),
}


@pytest.mark.parametrize('kind', sorted(BAD_INPUTS))
def test_bad_input_gives_no_output_and_a_count_on_diagnostics(harness, kind):
    make, good = BAD_INPUTS[kind]
    pub = harness.publisher()
    for msg in make(time.time()):
        pub.publish(msg)
    assert harness.spin_until(lambda: harness.count(kind) >= 1), f'no {kind} on /diagnostics'
    assert len(harness.outputs) == good


WARNING_INPUTS = {
    jsc.GAP: lambda t: [joint_state(t), joint_state(t + 0.5)],
    # panda_joint1 (listed last) 0.24 rad beyond its 2.8973 rad limit: within the hard margin.
    jsc.OUT_OF_LIMITS: lambda t: [joint_state(t, position=[0.04, 0.04] + HOME[:0:-1] + [3.14])],
}


@pytest.mark.parametrize('kind', sorted(WARNING_INPUTS))
def test_warnings_are_counted_and_the_sample_still_goes_out(harness, kind):
    sent = WARNING_INPUTS[kind](time.time())
    pub = harness.publisher()
    for msg in sent:
        pub.publish(msg)
    assert harness.spin_until(lambda: harness.count(kind) >= 1), f'no {kind} on /diagnostics'
    assert len(harness.outputs) == len(sent)


def test_a_warning_after_an_error_does_not_stop_the_node(harness):
    pub = harness.publisher()
    t0 = time.time()
    for msg in (joint_state(0.0), joint_state(t0), joint_state(t0 + 0.5)):  # error, ok, gap
        pub.publish(msg)
    assert harness.spin_until(lambda: harness.count(jsc.GAP) >= 1)
    assert harness.count(jsc.ZERO_STAMP) == 1 and len(harness.outputs) == 2


def test_driver_restart_is_taken_as_a_new_time_base_after_input_timeout(harness):
    """Stamps jump 0.5 s back and stay behind (a driver restarted with its clock behind, still
    within max_past): rejected until input_timeout has passed on the node's clock
    (input_stale goes True meanwhile), then taken as the new time base."""
    pub = harness.publisher()
    t0 = time.time()
    pub.publish(joint_state(t0))
    assert harness.spin_until(lambda: len(harness.outputs) == 1 and harness.stale
                              and harness.stale[-1] is False)
    fresh = len(harness.stale)
    assert harness.feed_until(pub, lambda k: joint_state(min(time.time() - 0.5, t0 - 1e-3)),
                              lambda: harness.count(jsc.TIME_RESET) >= 1)
    assert harness.count(jsc.TIME_RESET) == 1
    assert harness.count(jsc.OUT_OF_ORDER_STAMP) >= 1
    assert True in harness.stale[fresh:]  # stale while the old time base was defended
    assert harness.spin_until(lambda: len(harness.outputs) > 1)
    assert all(stamp_to_seconds(out.header.stamp) < t0 for out in harness.outputs[1:])


def test_a_driver_whose_stamps_are_long_past_is_refused_and_never_feeds_the_watchdog(harness):
    """Joint states stamped 1970 + 1000 s, advancing (issue 27): refused as past_stamp, so
    input_stale stays True."""
    pub = harness.publisher()
    assert harness.feed_until(pub, lambda k: joint_state(1000.0 + k * DT),
                              lambda: harness.count(jsc.PAST_STAMP) >= 50)
    assert harness.outputs == [] and not any(s is False for s in harness.stale)


def test_watchdog_flags_stale_input_and_clears_when_input_resumes(harness):
    pub = harness.publisher()
    timeout = harness.listener.get_parameter('input_timeout').value

    sent = []  # monotonic time of each sample sent

    def sample(_):
        sent.append(time.monotonic())
        return joint_state(time.time())

    def feed_until(done):
        return harness.feed_until(pub, sample, done)

    assert harness.spin_until(lambda: harness.stale[-1:] == [True]), 'not stale before input'
    assert feed_until(lambda: harness.stale[-1] is False)
    assert harness.spin_until(lambda: harness.stale[-1] is True)
    # Not before input_timeout after the last sample: the listener got it after it was sent,
    # so this lower bound holds however slow the machine is.
    assert time.monotonic() - sent[-1] >= timeout
    assert feed_until(lambda: harness.stale[-1] is False)


def test_two_partial_publishers_are_merged(harness):
    arm_half, wrist_and_gripper = harness.publisher(), harness.publisher()
    t0 = time.time()
    cycles = 5
    for k in range(cycles):
        t = t0 + k * DT
        arm_half.publish(joint_state(t, ARM[:4], HOME[:4], [0.0] * 4, [1.0] * 4))
        wrist_and_gripper.publish(joint_state(t, ARM[4:] + FINGERS, HOME[4:] + [0.04, 0.04],
                                              [0.0] * 5, [2.0] * 5))
        # Merged in either order; the next cycle's parts wait for this one's sample.
        assert harness.spin_until(lambda: len(harness.outputs) == k + 1)
    assert len(harness.outputs) == cycles
    for k, out in enumerate(harness.outputs):
        assert stamp_seconds(out) == stamp_seconds(joint_state(t0 + k * DT))
        assert list(out.position) == HOME
        assert list(out.effort) == [1.0] * 4 + [2.0] * 3


def test_robot_description_wins_over_robot_and_gives_the_named_robots_chain(context):
    ur5 = RobotModel.load('ur5')
    node = JointStateListenerNode(context=context, parameter_overrides=[
        Parameter('robot', value='no_such_robot'),
        Parameter('robot_description', value=ur5.urdf_xml)])
    try:
        assert node.robot.joint_names == ur5.joint_names
        assert node.robot.tip_link == 'tool0'
        assert node.robot.collision_model.ngeoms == ur5.collision_model.ngeoms > 0
    finally:
        node.destroy_node()


@pytest.mark.parametrize('override', [Parameter('robot', value='no_such_robot'),
                                      Parameter('gear_ratios', value=[1.0, 2.0]),
                                      Parameter('hard_limit_margin', value=0.01)])
def test_bad_parameters_refuse_to_start(context, override):
    with pytest.raises(StartupError):
        JointStateListenerNode(context=context, cli_args=['--ros-args', '--params-file', PARAMS],
                           parameter_overrides=[override])


def test_a_bad_run_time_change_is_refused(harness):
    result = harness.listener.set_parameters([Parameter('torque_constants', value=[0.0])])
    assert not result[0].successful
    assert harness.listener.get_parameter('torque_constants').value == [1.0]
