"""Composed mode (contact_estimation/composed.py): the core nodes in one process, handing
samples over by function call, against the same nodes as separate nodes that talk over DDS.
Both run in-process here, on the same input."""
import time

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from contact_estimation import composed, manifest
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.sample_ring import SampleRingWriter, ring_name
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.identification.trajectory import SmoothRandomTrajectory
from contact_estimation.nodes.ft_contact_estimator import NEAR
from contact_estimation.ros import sample_feed
from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds, wrench_stamped
from contact_estimation.ros.handover import Output
from contact_estimation.ros.qos import PIPELINE_QOS, SENSOR_QOS, STOP_QOS
from contact_estimation.ros.spinning import spin_until

CHAIN = ('joint_state_listener', 'residual_node', 'collision_detector')
LISTENER, RESIDUAL, DETECTOR = (manifest.node(n) for n in CHAIN)
TIMEOUT = 30.0   # s: generous deadline for each awaited event
RATE = 1000.0    # Hz
SAMPLES, CONTACT = 160, (60, 160)  # a 30 N·m push on joint 4 over these samples
OFFSET, JOINT = 30.0, 3


def _separate(**kwargs):
    return [composed.node_class(name)(**kwargs) for name in CHAIN]


def _composed(names=None, **kwargs):
    """The composed nodes, all on one executor here (the test spins them)."""
    return composed.build(names, **kwargs)


def _cli_args(*extra_files):
    files = [manifest.node(n).parameters_path() for n in manifest.composed_nodes()]
    return ['--ros-args'] + [a for f in (*files, *extra_files) for a in ('--params-file', f)]


@pytest.fixture(scope='module')
def joint_states():
    """(q, q̇, τ) of a Panda in smooth motion at RATE, τ from its inverse dynamics plus the
    push: the residual is ~0 before the push and ~OFFSET on joint 4 during it."""
    robot = RobotModel.load('panda')
    trajectory = SmoothRandomTrajectory(robot, seed=3, speed_scale=0.3, amplitude=0.5)
    samples = [trajectory.sample(k / RATE) for k in range(SAMPLES)]
    effort = np.array([robot.rnea(*s) for s in samples])
    effort[CONTACT[0]:CONTACT[1], JOINT] += OFFSET
    return robot.joint_names, [s[0] for s in samples], [s[1] for s in samples], effort


@pytest.fixture(scope='module')
def standing():
    """A joint state of the Panda standing still, held against gravity."""
    robot = RobotModel.load('panda')
    q = SmoothRandomTrajectory(robot, seed=3).sample(0.0)[0]
    still = np.zeros(robot.n)
    return JointState(name=list(robot.joint_names), position=q.tolist(),
                                         velocity=still.tolist(),
                                         effort=robot.rnea(q, still, still).tolist())


class Driver(Node):
    """Plays the robot driver, one joint state at a time, and records the composed residual,
    stop and collision events."""

    def __init__(self, context):
        super().__init__('composed_test_driver', context=context)
        self.residuals: dict[float, np.ndarray] = {}  # by stamp
        self.stops, self.events = [], []
        self.joint_states = self.create_publisher(
            JointState, LISTENER.topic('joint_states'),
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        self.create_subscription(JointState, RESIDUAL.topic('residual'), self._on_residual,
                                 SENSOR_QOS)
        self.create_subscription(Bool, DETECTOR.topic('stop'),
                                 lambda m: self.stops.append(m.data), STOP_QOS)
        self.create_subscription(DiagnosticArray, DETECTOR.topic('events'),
                                 self.events.append, STOP_QOS)

    def _on_residual(self, msg):
        self.residuals[stamp_to_seconds(msg.header.stamp)] = np.array(msg.effort)

    def event_kinds(self):
        return [{kv.key: kv.value for kv in e.status[0].values}['event'] for e in self.events]


def _play(context, nodes, joint_states, t0):
    """Feed every joint state (stamp t0 + k / RATE), each once the residual of the previous
    one came out; return (residuals in input order, stamp index of each collision event)."""
    driver = Driver(context)
    executor = SingleThreadedExecutor(context=context)
    for node in (*nodes, driver):
        executor.add_node(node)
    residual_node = next(n for n in nodes if n.get_name() == RESIDUAL.name)
    try:
        assert spin_until(executor, lambda: driver.joint_states.get_subscription_count() > 0
                          and all(o.listened for o in residual_node.outputs)
                          and driver.count_publishers(DETECTOR.topic('stop')) > 0, TIMEOUT)
        names, positions, velocities, efforts = joint_states
        for k, (q, v, tau) in enumerate(zip(positions, velocities, efforts)):
            stamp = seconds_to_stamp(t0 + k / RATE)
            msg = JointState(name=list(names), position=q.tolist(), velocity=v.tolist(),
                             effort=tau.tolist())
            msg.header.stamp = stamp
            driver.joint_states.publish(msg)
            t = stamp_to_seconds(stamp)
            assert spin_until(executor, lambda: t in driver.residuals, TIMEOUT), \
                f'no residual for sample {k}'
        assert spin_until(executor, lambda: 'collision' in driver.event_kinds(), TIMEOUT)
        collisions = [round((stamp_to_seconds(e.header.stamp) - t0) * RATE)
                      for e, kind in zip(driver.events, driver.event_kinds())
                      if kind == 'collision']
        assert driver.stops[-1] is True
        residuals = np.array([driver.residuals[t] for t in sorted(driver.residuals)])
        return residuals, collisions
    finally:
        executor.shutdown()
        driver.destroy_node()
        for node in nodes:
            node.destroy_node()


def test_composed_mode_gives_the_residual_and_stop_of_separate_mode(context, tmp_path,
                                                                    joint_states):
    # Timeouts far beyond any pause a shared machine may take between two samples here: the
    # comparison is of the estimates and the collision, not of this machine's pace. Each
    # sample waits for the previous one's residual, so the stamps fall behind the clock by
    # the pace's excess over 1 ms a sample; past max_lag that is late input (stale), which
    # restarts eq. 7's evidence, at a sample that depends on the pace ([106] against [69]
    # on a loaded CI machine): max_lag at its most.
    patient = tmp_path / 'patient.yaml'
    patient.write_text(yaml.safe_dump({
        LISTENER.name: {'ros__parameters': {'input_timeout': 10.0, 'max_past': 3600.0}},
        DETECTOR.name: {'ros__parameters': {'input_timeout': 10.0, 'max_lag': 1.0}}}))
    args = dict(context=context, cli_args=_cli_args(str(patient)))
    t0 = time.time() - 0.5  # the same stamps in both modes
    separate, separate_collisions = _play(context, _separate(**args), joint_states, t0)
    together, together_collisions = _play(context, _composed(CHAIN, **args), joint_states, t0)

    assert separate.shape == together.shape == (SAMPLES, 7)
    np.testing.assert_allclose(together, separate, rtol=0, atol=1e-9)
    # The push is seen (30 N·m more measured torque than the motion needs: τ_ext ≈ −30 N·m).
    assert separate[CONTACT[1] - 1, JOINT] < -OFFSET / 2
    assert together_collisions == separate_collisions
    assert len(separate_collisions) == 1 and CONTACT[0] < separate_collisions[0] < CONTACT[1]


def test_composed_mode_stops_on_stale_joint_states_and_keeps_the_heartbeat(context, standing):
    # The chain's process, as `up` starts it (manifest.processes): the estimators, in one
    # thread with it here, held the chain 70 ms and more at their start, a true `behind`.
    nodes = _composed(CHAIN, context=context, cli_args=_cli_args())
    driver = Driver(context)
    executor = SingleThreadedExecutor(context=context)
    for node in (*nodes, driver):
        executor.add_node(node)
    try:
        assert spin_until(executor, lambda: driver.joint_states.get_subscription_count() > 0,
                          TIMEOUT)
        msg = standing
        deadline = time.monotonic() + TIMEOUT
        while not (driver.stops and driver.stops[-1] is False):  # the stop clears
            assert time.monotonic() < deadline, 'the stop did not clear on joint states'
            msg.header.stamp = driver.get_clock().now().to_msg()
            driver.joint_states.publish(msg)
            executor.spin_once(timeout_sec=0.001)
        # The driver goes quiet: the listener's watchdog (or the detector's own input
        # timeout) stops the arm, and the stop is repeated as a heartbeat.
        assert spin_until(executor, lambda: driver.stops[-1] is True, TIMEOUT)
        assert spin_until(executor, lambda: 'stale_input' in driver.event_kinds(), TIMEOUT)
        count = len(driver.stops)
        assert spin_until(executor, lambda: len(driver.stops) >= count + 3, TIMEOUT)
        assert all(driver.stops[count:])
    finally:
        executor.shutdown()
        driver.destroy_node()
        for node in nodes:
            node.destroy_node()


def test_an_output_is_listened_to_exactly_while_a_subscription_is_matched(context):
    node = Node('output_owner', context=context)
    reader = Node('output_reader', context=context)
    output = Output(node, '/composed_test/stream', Bool, PIPELINE_QOS, [],
                    only_when_listened=True)
    always = Output(node, '/composed_test/latched', Bool, STOP_QOS, [],
                    only_when_listened=False)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(reader)
    try:
        assert not output.listened and always.listened and not output.joined()
        subscription = reader.create_subscription(Bool, '/composed_test/stream',
                                                  lambda m: None, SENSOR_QOS)
        assert spin_until(executor, lambda: output.listened, TIMEOUT)
        assert output.joined() and not output.joined()  # said once
        # A second subscriber while the first listens: the stream stays listened, and the
        # publisher learns that one came (the shared-samples feed sends it the latest sample).
        second = reader.create_subscription(Bool, '/composed_test/stream', lambda m: None,
                                            SENSOR_QOS)
        assert spin_until(executor, output.joined, TIMEOUT)
        reader.destroy_subscription(second)
        reader.destroy_subscription(subscription)
        assert spin_until(executor, lambda: not output.listened, TIMEOUT)
        assert always.listened and not output.joined()
    finally:
        executor.shutdown()
        reader.destroy_node()
        node.destroy_node()


def _wait_until_received(context, subscription, timeout: float) -> bool:
    """A message waits in `subscription`, untaken (no executor spins its node)."""
    wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, context.handle)
    wait_set.add_subscription(subscription.handle)
    wait_set.wait(round(timeout * 1e9))
    return bool(wait_set.get_ready_entities('subscription'))


class EstimationProcess:
    """The estimation process's nodes as composed builds them (the F/T estimator, the
    localizer), reading the shared samples this test writes and a driver's F/T readings;
    nothing spins them: the test wakes the feed itself (`take`)."""

    def __init__(self, context):
        self.nodes = self.ft, self.localizer = _composed(manifest.composed_process(
            'contact_estimation_estimation').nodes, shared_memory=True, context=context,
            cli_args=_cli_args())
        self.robot = robot = self.ft.robot
        self.writer = SampleRingWriter(ring_name(self.ft.get_namespace()), robot.n)
        self.driver = Node('estimation_test_driver', context=context)
        self._readings = self.driver.create_publisher(
            WrenchStamped, self.ft.spec.topic('ft_wrench'), PIPELINE_QOS)
        self.q = SmoothRandomTrajectory(robot, seed=3).sample(0.0)[0]
        self.still = np.zeros(robot.n)
        self._weight = np.concatenate(robot.base_wrench(self.q, self.still, self.still))
        [self.polled] = self.ft.polled_subscriptions
        self.feed_timer = next(timer for timer in self.ft.timers if timer.timer_period_ns
                               == round(sample_feed.REST_PERIOD * 1e9))
        self._context = context
        self.take()  # the reader attaches to the ring
        deadline = time.monotonic() + TIMEOUT
        while not self._readings.get_subscription_count():
            assert time.monotonic() < deadline, 'the F/T subscription was never matched'
            time.sleep(0.01)

    def take(self) -> None:
        """One wake of the shared-memory feed."""
        self.ft.catch_up()

    def publish_reading(self, t: float, push=(0.0, 0.0, 0.0)) -> None:
        """An F/T reading of the arm's weight and a `push` (N, at the sensor) stamped t (s),
        once it waits in the F/T estimator's polled subscription."""
        self._readings.publish(wrench_stamped(seconds_to_stamp(t), self.robot.base_link,
                                              self._weight[:3] + push, self._weight[3:]))
        assert _wait_until_received(self._context, self.polled, TIMEOUT), \
            'the reading never came'

    def write(self, t: float, tau_ext: np.ndarray) -> None:
        """The joint sample stamped t (s) into shared memory, the arm still, with `tau_ext`."""
        stamp = seconds_to_stamp(t)
        self.writer.write(JointSample(stamp_to_seconds(stamp), self.q, self.still,
                                      self.robot.rnea(self.q, self.still, self.still),
                                      tau_ext, (stamp.sec, stamp.nanosec),
                                      self.robot.base_link))

    def close(self) -> None:
        self.writer.close()
        self.driver.destroy_node()
        for node in self.nodes:
            node.destroy_node()


@pytest.fixture
def estimation(context):
    process = EstimationProcess(context)
    try:
        yield process
    finally:
        process.close()


def test_the_estimation_process_takes_a_reading_and_its_joint_sample_in_one_wake(estimation):
    """The shared-memory feed's take also takes the F/T readings (issue 35): a reading and
    the joint sample of its stamp, both waiting, are compensated in that one take, and the
    feed wakes every CONTACT_PERIOD exactly while the localizer's gate is open."""
    ft, localizer, feed_timer = estimation.ft, estimation.localizer, estimation.feed_timer
    t = time.time()
    estimation.publish_reading(t)
    estimation.write(t, estimation.still)
    estimation.take()  # one wake: the reading, then the joint sample and residual
    assert ft.problems.traffic['base_wrenches_published'] == 1
    assert localizer.problems.traffic['base_wrenches_received'] == 1
    assert feed_timer.timer_period_ns == round(sample_feed.REST_PERIOD * 1e9)
    # a residual over the localizer's gate: a contact lasts, the feed wakes sooner
    estimation.write(t + 0.001, np.full(estimation.robot.n, 50.0))
    estimation.take()
    assert localizer.contact_lasts
    assert feed_timer.timer_period_ns == round(sample_feed.CONTACT_PERIOD * 1e9)
    estimation.write(t + 0.002, estimation.still)
    estimation.take()
    assert not localizer.contact_lasts
    assert feed_timer.timer_period_ns == round(sample_feed.REST_PERIOD * 1e9)


def test_a_force_the_ft_sensor_feels_wakes_the_estimation_process_sooner(estimation):
    """A force over NEAR of the F/T estimator's presence_force, under presence_force and
    with τ_ext under the threshold (a contact nearing, not one yet), makes the feed wake
    every CONTACT_PERIOD: a contact only the sensor sees waits a rest for its first take at
    most once, not at every slot of its rise."""
    ft, feed_timer = estimation.ft, estimation.feed_timer
    felt = (NEAR + 0.1) * ft.value('presence_force')
    t = time.time()

    def held(push: float, seconds: float) -> None:
        """`push` held for `seconds` of readings and joint samples 1 ms apart (the momentum
        observer follows it in about 1/gain), one take each, until contact_lasts says so."""
        nonlocal t
        for _ in range(round(seconds / 0.001)):
            t += 0.001
            estimation.publish_reading(t, (0.0, 0.0, push))
            estimation.write(t, estimation.still)
            estimation.take()
            if ft.contact_lasts is bool(push):
                return

    held(0.0, 0.01)
    assert not ft.contact_lasts
    assert feed_timer.timer_period_ns == round(sample_feed.REST_PERIOD * 1e9)
    held(felt, 0.5)
    assert ft.contact_lasts
    assert feed_timer.timer_period_ns == round(sample_feed.CONTACT_PERIOD * 1e9)
    assert ft.problems.traffic['estimates_published'] == 0  # not a contact yet
    held(0.0, 0.5)
    assert not ft.contact_lasts
    assert feed_timer.timer_period_ns == round(sample_feed.REST_PERIOD * 1e9)


def test_a_collision_event_wakes_the_estimation_process_at_once(estimation):
    """A collision event (nodes.yaml `shared_samples: woken_by`) makes the feed take the
    samples at once and wake every CONTACT_PERIOD (issue 35: a contact's first estimate
    waited up to a rest for the take that saw it), though no node sees a contact yet."""
    ft, localizer, feed_timer = estimation.ft, estimation.localizer, estimation.feed_timer
    estimation.write(time.time(), estimation.still)
    events = estimation.driver.create_publisher(
        DiagnosticArray, manifest.shared_samples().woken_by, STOP_QOS)
    executor = SingleThreadedExecutor(context=estimation.driver.context)
    executor.add_node(ft)
    try:
        assert spin_until(executor, lambda: events.get_subscription_count() > 0, TIMEOUT)
        assert feed_timer.timer_period_ns == round(sample_feed.REST_PERIOD * 1e9)
        events.publish(DiagnosticArray())
        assert spin_until(executor, lambda: feed_timer.timer_period_ns
                          == round(sample_feed.CONTACT_PERIOD * 1e9), TIMEOUT)
        assert not localizer.contact_lasts
    finally:
        executor.remove_node(ft)
        executor.shutdown()


def test_the_estimation_process_hands_a_batch_over_sample_by_sample(estimation):
    """Samples taken in one wake reach the estimators as a replay hands them (issue 35):
    each sample to every receiver before the next. The localizer estimating on the first
    sample of a batch of three uses the base wrench of that sample's reading (a replay's),
    not the last sample's, which the F/T estimator would have compensated already had it
    taken the whole batch first."""
    ft, localizer = estimation.ft, estimation.localizer
    localizer.set_parameters([Parameter('wrench_max_age', value=1e-4)])  # only its own
    t = time.time()
    stamps = [t + k * 0.005 for k in range(3)]  # each a slot of the F/T compensation rate
    for stamp in stamps:
        estimation.publish_reading(stamp)
        estimation.ft.take_polled()  # each waits in the F/T estimator for its joint sample
    for k, stamp in enumerate(stamps):  # a contact on the first: the localizer estimates
        estimation.write(stamp, np.full(estimation.robot.n, 50.0 if k == 0 else 0.0))
    estimation.take()
    assert ft.problems.traffic['base_wrenches_published'] == 3
    assert localizer.problems.traffic['estimates'] == 1
    assert localizer.problems.values['base_wrench'] == 'used'
