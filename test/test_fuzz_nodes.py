"""Every input of every node, malformed, extreme, non-finite and far-stamped (issue 19).

The six nodes of the suite run in one process on one executor (as in composed mode): an
exception that escaped a callback would end the spin and this test. Rounds of bad messages
go to every topic a node reads, bad values to every parameter it lets change, and its
services are called; then valid input returns. Asserted:
- no callback raised anything its node did not expect (the guard, ros/guard.py, would have
  counted it as `unexpected_<Type>`: a bug, even though the node survived it);
- every stop published while the input was bad is True, and the heartbeats kept coming;
- the outputs resume on valid input (the detector's latched stop after ~/reset);
- memory stays bounded: the process does not keep growing from one round of bad input to the
  next, and returns after 400 000-point clouds.

Issue 29 adds the proximity monitor's hands, read by the detector.

Issue 27 adds the hostile round: use_sim_time set at run time with nobody publishing /clock,
400 000-point clouds, 10 000-pose skeletons, bursts of 10 000 joint states, 200 resets at
once and extra subscribers on every 1 kHz output; every reset is answered and the stops stay
True. The heartbeats are counted as events, not timed: benchmarks/hostile.py measures their
gaps against the 150 ms contract and says when the machine is too loaded to judge.
"""
import os
import resource

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, PointStamped, Pose, PoseArray, Vector3, WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState, PointCloud2, PointField
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from contact_estimation import manifest
from contact_estimation.nodes.collision_detector import CollisionDetectorNode
from contact_estimation.nodes.contact_localizer import ContactLocalizerNode
from contact_estimation.nodes.ft_contact_estimator import FtContactEstimatorNode
from contact_estimation.nodes.joint_state_listener import JointStateListenerNode
from contact_estimation.nodes.proximity_monitor import ProximityMonitorNode
from contact_estimation.nodes.residual_node import ResidualNode
from contact_estimation.ros.conversions import seconds_to_stamp, xyz_to_cloud
from contact_estimation.ros.qos import PIPELINE_QOS, SERVICE_QOS, STOP_QOS
from contact_estimation.ros.spinning import spin_until

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config')
NODES = {'joint_state_listener': JointStateListenerNode, 'residual_node': ResidualNode,
         'collision_detector': CollisionDetectorNode,
         'ft_contact_estimator': FtContactEstimatorNode,
         'contact_localizer': ContactLocalizerNode, 'proximity_monitor': ProximityMonitorNode}
TIMEOUT = 30.0
Q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
BAD_FLOATS = [np.nan, np.inf, -np.inf, 1e308, -1e308, 1e200, -1e200, 5e-324, 0.0, 1e-300]
ROUNDS = 3          # rounds of bad input; memory is compared between the first and the last
ROUND_TICKS = 30    # sensor ticks (20 ms each when the machine keeps up) of bad input a round


def topic(node: str, key: str) -> str:
    return manifest.node(node).topic(key)


class Fuzzer(Node):
    """Publishes bad (or, when `valid`, good) messages on every node input; records stops."""

    def __init__(self, context, robot, seed: int = 19):
        super().__init__('fuzzer', context=context)
        self.robot, self.rng, self.valid = robot, np.random.default_rng(seed), False
        self.names = list(robot.joint_names)
        self.stops: dict[str, list[bool]] = {'collision_detector': [], 'proximity_monitor': []}
        for name, stops in self.stops.items():
            self.create_subscription(Bool, topic(name, 'stop'),
                                     lambda msg, s=stops: s.append(msg.data), STOP_QOS)
        self.base_wrenches = 0
        self.create_subscription(WrenchStamped, topic('ft_contact_estimator', 'base_wrench'),
                                 self._count_base_wrench, PIPELINE_QOS)
        kinds = {'joint_states': JointState, 'joint_state': JointState, 'residual': JointState,
                 'wrist_wrench': WrenchStamped, 'ft_wrench': WrenchStamped,
                 'localizer_point': PointStamped, 'contact_wrench': WrenchStamped,
                 'skeleton': PoseArray,
                 'lidar_points': PointCloud2, 'input_stale': Bool, 'hands': DiagnosticArray}
        owner = {'joint_states': 'joint_state_listener', 'joint_state': 'residual_node',
                 'residual': 'collision_detector', 'wrist_wrench': 'residual_node',
                 'ft_wrench': 'ft_contact_estimator', 'localizer_point': 'ft_contact_estimator',
                 'skeleton': 'proximity_monitor', 'lidar_points': 'proximity_monitor',
                 'contact_wrench': 'proximity_monitor', 'input_stale': 'collision_detector',
                 'hands': 'collision_detector'}
        self.pub = {key: self.create_publisher(kind, topic(owner[key], key), PIPELINE_QOS)
                    for key, kind in kinds.items()}
        self.services_called = [self.create_client(Trigger, name) for name in (
            '/collision_detector/reset', '/proximity_monitor/reset', '/ft_contact_estimator/zero')]
        self.calls = []
        self.ticks = 0  # sensor ticks of bad input sent
        self.flood = self.create_client(Trigger, '/collision_detector/reset',
                                        qos_profile=SERVICE_QOS)
        self.extra = 0  # messages the extra subscribers received
        self.extra_subscriptions = [
            self.create_subscription(WrenchStamped if key == 'base_wrench' else JointState,
                                     topic(node, key), self._count_extra, PIPELINE_QOS)
            for node, key in (('joint_state_listener', 'joint_state'),
                              ('residual_node', 'residual'),
                              ('ft_contact_estimator', 'base_wrench'))
            for _ in range(5)]
        self.create_timer(0.005, self._joint_states)
        self.create_timer(0.02, self._sensors)

    def _count_base_wrench(self, _):
        self.base_wrenches += 1

    def _count_extra(self, _):
        self.extra += 1

    # ------------------------------------------------------------------ values
    def now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def stamp(self) -> Time:
        """Now, or one of the stamps that broke the nodes (2038, 0, far past, bad nanosec)."""
        if self.valid:
            return seconds_to_stamp(self.now())
        choice = self.rng.integers(6)
        return [Time(sec=2 ** 31 - 1), Time(), Time(sec=1, nanosec=4_294_967_295),
                seconds_to_stamp(self.now() - 1e6), seconds_to_stamp(self.now() + 30.0),
                seconds_to_stamp(self.now())][choice]

    def floats(self, size: int) -> list[float]:
        values = self.rng.normal(size=size)
        bad = self.rng.random(size) < 0.5
        values[bad] = self.rng.choice(BAD_FLOATS, size=int(bad.sum()))
        return [float(x) for x in values]

    def names_of(self) -> list[str]:
        choice = self.rng.integers(5)
        return [self.names, self.names[::-1], self.names[:3], [], self.names + ['ghost']][choice]

    # ------------------------------------------------------------------ messages
    def _joint_states(self):
        if self.valid:
            msg = JointState(name=self.names, position=Q.tolist(), velocity=[0.0] * len(Q),
                             effort=self.robot.gravity(Q).tolist())
            msg.header.stamp = self.stamp()
            self.pub['joint_states'].publish(msg)
            return
        for key in ('joint_states', 'joint_state', 'residual'):
            names = self.names_of()
            sizes = self.rng.integers(0, len(self.names) + 3, size=3)
            msg = JointState(name=names, position=self.floats(sizes[0]),
                             velocity=self.floats(sizes[1]), effort=self.floats(sizes[2]))
            msg.header.stamp = self.stamp()
            self.pub[key].publish(msg)

    def _sensors(self):
        if self.valid:
            wrench = WrenchStamped()
            wrench.header.stamp, wrench.header.frame_id = self.stamp(), self.robot.base_link
            wrench.wrench.force.z = -30.0
            self.pub['ft_wrench'].publish(wrench)
            skeleton = PoseArray()  # nobody tracked
            skeleton.header.stamp, skeleton.header.frame_id = self.stamp(), self.robot.base_link
            self.pub['skeleton'].publish(skeleton)
            # The lidar seen during the rounds sends again (issue 36: silent, it is stale).
            self.pub['lidar_points'].publish(xyz_to_cloud(
                self.stamp(), self.robot.base_link, np.array([[3.0, 0.0, 0.5]])))
            return
        self.ticks += 1
        for key in ('ft_wrench', 'wrist_wrench'):
            msg = WrenchStamped()
            msg.header.stamp = self.stamp()
            msg.header.frame_id = str(self.rng.choice([self.robot.base_link, 'panda_hand', '',
                                                       'nowhere', '/' * 300]))
            f = self.floats(6)
            msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = f[:3]
            msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z = f[3:]
            self.pub[key].publish(msg)
        point = PointStamped()
        point.header.stamp = self.stamp()
        point.header.frame_id = str(self.rng.choice(['panda_link4', 'panda_link0', 'x']))
        point.point = Point(**dict(zip('xyz', self.floats(3))))
        self.pub['localizer_point'].publish(point)
        # Its other half, for the proximity monitor's force check (issue 38): a bad force.
        wrench = WrenchStamped(header=point.header)
        wrench.wrench.force = Vector3(**dict(zip('xyz', self.floats(3))))
        self.pub['contact_wrench'].publish(wrench)
        self.pub['skeleton'].publish(self.skeleton())
        self.pub['lidar_points'].publish(self.cloud())
        self.pub['input_stale'].publish(Bool(data=bool(self.rng.integers(2))))
        self.pub['hands'].publish(self.hands())
        for client in self.services_called:
            if client.service_is_ready() and self.rng.random() < 0.2:
                self.calls.append(client.call_async(Trigger.Request()))

    def year_2038(self) -> None:
        """One message stamped in 2038 on every stamped input: an empty skeleton, an F/T
        reading, a joint state and a residual of the right joints, a cloud (issue 19)."""
        stamp = Time(sec=2 ** 31 - 1)
        for key in ('joint_state', 'residual'):
            msg = JointState(name=self.names, position=Q.tolist(), velocity=[0.0] * len(Q),
                             effort=[0.0] * len(Q))
            msg.header.stamp = stamp
            self.pub[key].publish(msg)
        wrench, skeleton = WrenchStamped(), PoseArray()
        wrench.header.stamp = skeleton.header.stamp = stamp
        wrench.header.frame_id = skeleton.header.frame_id = self.robot.base_link
        self.pub['ft_wrench'].publish(wrench)
        self.pub['skeleton'].publish(skeleton)
        self.pub['lidar_points'].publish(xyz_to_cloud(stamp, self.robot.base_link,
                                                      np.ones((10, 3))))

    def hostile(self) -> None:
        """Issue 27's round: two 400 000-point clouds, a 10 000-pose skeleton, a burst of
        10 000 (non-finite) joint states and 200 resets at once."""
        stamp = seconds_to_stamp(self.now())
        points = self.rng.uniform(-1.0, 1.0, size=(400_000, 3))
        for _ in range(2):
            self.pub['lidar_points'].publish(xyz_to_cloud(stamp, self.robot.base_link, points))
        skeleton = PoseArray(poses=[Pose() for _ in range(10_000)])
        skeleton.header.stamp, skeleton.header.frame_id = stamp, self.robot.base_link
        self.pub['skeleton'].publish(skeleton)
        burst = JointState(name=self.names, position=[float('nan')] * len(Q),  # still bad
                           velocity=[0.0] * len(Q), effort=[0.0] * len(Q))
        for k in range(10_000):
            burst.header.stamp = seconds_to_stamp(self.now() - 1.0 + k * 1e-4)
            self.pub['joint_states'].publish(burst)
        self.calls += [self.flood.call_async(Trigger.Request()) for _ in range(200)]

    def skeleton(self) -> PoseArray:
        msg = PoseArray()
        msg.header.stamp = self.stamp()
        msg.header.frame_id = str(self.rng.choice([self.robot.base_link, 'camera', '']))
        count = int(self.rng.choice([0, 17, 17, 16, 40]))
        for _ in range(count):
            pose = Pose()
            pose.position = Point(**dict(zip('xyz', self.floats(3))))
            msg.poses.append(pose)
        return msg

    def hands(self) -> DiagnosticArray:
        """The proximity monitor's hands, with bad distances (no number, NaN, extreme) at
        links real and unknown."""
        msg = DiagnosticArray()
        msg.header.stamp = self.stamp()
        for hand in ('left_hand', 'right_hand', ''):
            links = [str(self.rng.choice(['panda_link4', 'ghost', ''])) for _ in range(3)]
            values = [str(self.rng.choice(['x', '', 'nan', '-inf', '1e308', '0.01']))
                      for _ in links]
            msg.status.append(DiagnosticStatus(name=hand, values=[
                KeyValue(key=k, value=v) for k, v in zip(links, values)]))
        return msg

    def cloud(self) -> PointCloud2:
        """A cloud broken one way or another (or a plain 2 000-point one)."""
        points = np.asarray(self.floats(3 * 2000)).reshape(-1, 3)
        msg = xyz_to_cloud(self.stamp(), self.robot.base_link, points)
        spoil = self.rng.integers(9)
        if spoil == 0:
            msg.width, msg.height = 0, 2_000_000
        elif spoil == 1:
            msg.width, msg.height = 4_000_000_000, 4_000_000_000
        elif spoil == 2:
            msg.data = bytes(msg.data)[:100]
        elif spoil == 3:
            msg.fields = [PointField(name='x', offset=0, datatype=99, count=1)]
        elif spoil == 4:  # new fields: xyz_to_cloud's are shared by every cloud it makes
            msg.fields = [PointField(name=n, offset=4 * k if n != 'z' else 4_000_000,
                                     datatype=PointField.FLOAT32, count=1)
                          for k, n in enumerate('xyz')]
        elif spoil == 5:
            msg.point_step, msg.row_step = 0, 0
        elif spoil == 6:
            msg.row_step = 1
        elif spoil == 7:
            msg.is_bigendian = True
        return msg


def parameter_values(value):
    """Bad values for a parameter whose current value is `value` (of its type and others)."""
    if isinstance(value, bool):
        return [not value, 'yes']
    if isinstance(value, (int, float)):
        return [type(value)(v) if isinstance(value, float) else v for v in (
            1e308, -1e308, float('nan'), float('inf'), 0.0, -1.0)] + [2 ** 62, 'x']
    if isinstance(value, str):
        return ['', 'nonsense', '/' * 1000, 1.0]
    if isinstance(value, list):
        return [[], [float('nan')], [1e308], [-1e308] * 50, ['a'], [0.0, 0.0, 0.0, 0.0]]
    return []


def fuzz_parameters(node: Node) -> list[str]:
    """Every writable parameter of `node` set to bad values, one by one and in pairs with a
    valid one, then all restored (which must be accepted); use_sim_time, with nobody
    publishing /clock, must be refused (issue 27). Returns the refusals that did not name
    the parameter they refused."""
    names = node.list_parameters([], 0).names
    saved = {name: node.get_parameter(name).value for name in names
             if not node.describe_parameter(name).read_only and name != 'use_sim_time'}
    unnamed = []
    for name, value in saved.items():
        for bad in parameter_values(value):
            for values in ({name: bad}, {name: bad, **dict([next(iter(saved.items()))])}):
                result = node.set_parameters_atomically([Parameter(k, value=v)
                                                         for k, v in values.items()])
                if not result.successful and not any(k in result.reason for k in values):
                    unnamed.append(f'{node.get_name()} {values}: {result.reason}')
    result = node.set_parameters_atomically([Parameter(k, value=v) for k, v in saved.items()])
    assert result.successful, f'{node.get_name()}: restoring its parameters: {result.reason}'
    sim_time = node.set_parameters_atomically([Parameter('use_sim_time', value=True)])
    assert not sim_time.successful and 'use_sim_time' in sim_time.reason, node.get_name()
    return unnamed


def rss_mib() -> float:
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20


def unexpected(nodes) -> dict:
    return {f'{n.get_name()}.{k}': c for n in nodes for k, c in n.problems.counts.items()
            if k.startswith('unexpected_') or k == 'fail_safe_errors'}


@pytest.fixture
def suite(context):
    # max_lag 1 s: six nodes on one executor of a loaded machine decide late, and a node
    # behind keeps its stop raised; lag is test_behind's subject, not this test's.
    lag = {name: ['-p', 'max_lag:=1.0'] for name in ('collision_detector', 'proximity_monitor')}
    nodes = [cls(context=context, cli_args=['--ros-args', '--params-file',
                                             os.path.join(CONFIG, f'{name}.yaml'),
                                             *lag.get(name, [])])
             for name, cls in NODES.items()]
    fuzzer = Fuzzer(context, nodes[0].robot)
    executor = SingleThreadedExecutor(context=context)
    for node in (*nodes, fuzzer):
        executor.add_node(node)
    try:
        yield {n.get_name(): n for n in nodes}, fuzzer, executor
    finally:
        executor.shutdown()
        for node in (fuzzer, *reversed(nodes)):
            node.destroy_node()


def a_round(executor, fuzzer, ticks: int) -> bool:
    """Spin until the fuzzer has sent `ticks` more ticks of bad input and each stop has beaten
    at least 3 more times (a heartbeat that stopped would never get there)."""
    goal = fuzzer.ticks + ticks
    beats = {name: len(stops) + 3 for name, stops in fuzzer.stops.items()}
    return spin_until(executor, lambda: fuzzer.ticks >= goal and all(
        len(fuzzer.stops[name]) >= n for name, n in beats.items()), TIMEOUT)


def test_no_input_ends_a_node_or_lowers_a_stop_and_valid_input_brings_the_outputs_back(suite):
    nodes, fuzzer, executor = suite
    rss, unnamed = [], []
    for k in range(ROUNDS):
        assert a_round(executor, fuzzer, ROUND_TICKS), f'round {k}: a heartbeat stopped'
        for node in nodes.values():
            unnamed += fuzz_parameters(node)
        rss.append(rss_mib())
    assert not unnamed, unnamed
    assert spin_until(executor, fuzzer.flood.service_is_ready, TIMEOUT)
    fuzzer.hostile()
    assert a_round(executor, fuzzer, ROUND_TICKS), 'a heartbeat stopped after the hostile round'
    assert spin_until(executor, lambda: all(c.done() for c in fuzzer.calls), TIMEOUT), \
        f'{sum(not c.done() for c in fuzzer.calls)} service calls never answered'
    assert not unexpected(nodes.values()), unexpected(nodes.values())
    for name, stops in fuzzer.stops.items():
        assert all(stops), f'{name} lowered its stop while every input was bad'
    assert fuzzer.extra > 0, 'the extra subscribers heard nothing'
    for subscription in fuzzer.extra_subscriptions:  # they share this test's one executor
        fuzzer.destroy_subscription(subscription)
    for node in ('proximity_monitor', 'contact_localizer'):
        assert nodes[node].problems.counts['future_stamp'] + nodes[node].problems.counts[
            'zero_stamp'] > 0
    assert nodes['proximity_monitor'].problems.counts['wrong_size'] > 0
    assert a_round(executor, fuzzer, ROUND_TICKS)
    rss.append(rss_mib())
    assert rss[-1] - rss[0] < 64, f'memory kept growing or did not return: {rss} MiB'

    fuzzer.year_2038()  # the last bad messages, each of which once stopped an output for good
    fuzzer.valid = True
    proximity, detector = fuzzer.stops['proximity_monitor'], fuzzer.stops['collision_detector']

    def accepted(reset) -> bool:
        future = reset.call_async(Trigger.Request())
        spin_until(executor, future.done, TIMEOUT)
        return future.result().success

    # A bad contact over its force limit latched the proximity stop (pfl) until a reset.
    assert spin_until(executor, lambda: accepted(fuzzer.services_called[1]), TIMEOUT), \
        'the proximity monitor never became resettable'
    assert spin_until(executor, lambda: proximity and proximity[-1] is False, TIMEOUT)
    assert nodes['proximity_monitor'].problems.counts['pfl'] > 0
    assert spin_until(executor, lambda: accepted(fuzzer.services_called[0]), TIMEOUT), \
        'the detector never became resettable'
    assert spin_until(executor, lambda: detector and detector[-1] is False, TIMEOUT)
    wrenches = fuzzer.base_wrenches
    assert spin_until(executor, lambda: fuzzer.base_wrenches > wrenches + 10, TIMEOUT)
    assert not unexpected(nodes.values()), unexpected(nodes.values())
