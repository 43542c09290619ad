"""Falling behind is a fault (issue 26): the chain's detector stops with the cause `behind`
when it decides on samples later than `max_lag` after their stamps, beyond a constant clock
offset, which is not lag. In process (composed, as replay builds it) and, for a paused
process, as `up` runs it."""
import os
import signal
import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from contact_estimation import composed, manifest
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.qos import STOP_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import composed_processes, ros_context, spinning

CHAIN = next(p for p in manifest.composed() if p.realtime)
LISTENER, DETECTOR = manifest.node('joint_state_listener'), manifest.node('collision_detector')
TIMEOUT = 60.0


@pytest.fixture(scope='module')
def standing():
    """(names, q, τ) of the Panda standing still, held against gravity: τ_ext ≈ 0."""
    robot = RobotModel.load('panda')
    q = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8])
    still = np.zeros(robot.n)
    return list(robot.joint_names), q, robot.rnea(q, still, still)


class Driver(Node):
    """Plays the robot driver (stamps = its clock + `offset`), records the stop and the
    collision events' causes."""

    def __init__(self, context, standing):
        super().__init__('behind_test_driver', context=context)
        self.names, self.q, self.tau = standing
        self.offset = 0.0
        self.stops, self.causes = [], []
        self.publisher = self.create_publisher(
            JointState, LISTENER.topic('joint_states'),
            QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        self.create_subscription(Bool, DETECTOR.topic('stop'),
                                 lambda m: self.stops.append(m.data), STOP_QOS)
        self.create_subscription(DiagnosticArray, DETECTOR.topic('events'), self._on_event,
                                 STOP_QOS)

    def _on_event(self, msg: DiagnosticArray) -> None:
        self.causes += [{kv.key: kv.value for kv in s.values}['event'] for s in msg.status]

    def send(self, stamp: float | None = None, push: float = 0.0) -> None:
        tau = self.tau.copy()
        tau[3] += push
        msg = JointState(name=self.names, position=self.q.tolist(),
                         velocity=[0.0] * len(self.names), effort=tau.tolist())
        now = self.get_clock().now().nanoseconds * 1e-9
        msg.header.stamp = seconds_to_stamp(now + self.offset if stamp is None else stamp)
        self.publisher.publish(msg)


def _stream_until(executor, driver: Driver, done, deadline: float = TIMEOUT) -> bool:
    """Send a joint state every ~1 ms until `done()` (False at the deadline)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        driver.send()
        executor.spin_once(timeout_sec=0.001)
        if done():
            return True
    return False


def _chain(context, **detector):
    files = [manifest.node(n).parameters_path() for n in CHAIN.nodes]
    args = ['--ros-args'] + [a for f in files for a in ('--params-file', f)]
    for key, value in detector.items():
        args += ['-p', f'{DETECTOR.name}:{key}:={value}']
    return composed.build(CHAIN.nodes, context=context, cli_args=args)


def _run(context, standing, test, **detector):
    driver = Driver(context, standing)
    with spinning(context, *_chain(context, **detector), driver) as executor:
        assert spin_until(executor, lambda: driver.publisher.get_subscription_count() > 0,
                          TIMEOUT)
        test(executor, driver)


@pytest.mark.parametrize('offset', [-0.8, 0.5])
def test_a_constant_clock_offset_is_neither_behind_nor_a_stop(context, standing, offset):
    """A driver whose clock is 0.8 s behind (or 0.5 s ahead of) the suite's: max_lag is set
    to 0.3 s, under the offset, so the offset is told from lag without assuming this
    machine keeps up within 20 ms."""
    def test(executor, driver):
        driver.offset = offset
        assert _stream_until(executor, driver, lambda: driver.stops and not driver.stops[-1]), \
            f'the stop did not clear with a {offset} s clock offset: {driver.causes}'
        count = len(driver.stops)
        assert _stream_until(executor, driver, lambda: len(driver.stops) > count + 5)
        assert not any(driver.stops[count:]) and 'behind' not in driver.causes
    _run(context, standing, test, max_lag=0.3)


def test_a_backlog_of_old_samples_is_behind_before_any_late_collision(context, standing):
    def test(executor, driver):
        assert _stream_until(executor, driver, lambda: driver.stops and not driver.stops[-1])
        driver.causes.clear()
        # 300 samples that waited 0.5 s in a queue, the last 200 of them a push: they all
        # arrive at once.
        now = driver.get_clock().now().nanoseconds * 1e-9
        for k in range(300):
            driver.send(stamp=now - 0.5 + k * 1e-3, push=20.0 if k >= 100 else 0.0)
        stops = ('behind', 'collision')
        assert spin_until(executor, lambda: set(driver.causes) & set(stops), TIMEOUT)
        assert [c for c in driver.causes if c in stops][0] == 'behind', driver.causes
        assert spin_until(executor, lambda: driver.stops[-1] is True, TIMEOUT)
    _run(context, standing, test)


def test_pausing_the_chains_process_stops_the_arm_and_says_why(standing):
    """SIGSTOP the chain's process for 0.3 s while the driver streams: when it runs again it
    finds its samples late (behind) or none fresh (stale input): a stop with its cause."""
    with composed_processes() as processes, ros_context() as context:
        driver = Driver(context, standing)
        with spinning(context, driver) as executor:
            assert spin_until(executor, lambda: driver.publisher.get_subscription_count() > 0,
                              TIMEOUT)
            assert _stream_until(executor, driver,
                                 lambda: driver.stops and not driver.stops[-1]), \
                f'the stop did not clear on joint states: {driver.causes}'
            driver.causes.clear()
            chain = processes[CHAIN.name]
            os.kill(chain.pid, signal.SIGSTOP)
            try:
                paused = time.monotonic() + 0.3
                while time.monotonic() < paused:
                    driver.send()
                    executor.spin_once(timeout_sec=0.001)
            finally:
                os.kill(chain.pid, signal.SIGCONT)
            assert _stream_until(executor, driver, lambda: set(driver.causes) & {
                'behind', 'stale_input'}), f'no stop with its cause: {driver.causes}'
            assert True in driver.stops


def test_the_proximity_monitor_keeps_its_own_process_and_stop(standing):
    """Composed as `up` runs it, the proximity monitor is a process of its own (nodes.yaml
    `proximity`) fed by the chain's shared memory: it runs and publishes its stop, and
    pausing the estimators' process does not pause it."""
    proximity = manifest.node('proximity_monitor')
    process = next(p for p in manifest.composed() if proximity.name in p.nodes)
    assert process.nodes == (proximity.name,)
    estimation = next(p for p in manifest.composed() if 'contact_localizer' in p.nodes)
    with composed_processes() as processes, ros_context() as context:
        driver = Driver(context, standing)
        heard = []
        driver.create_subscription(Bool, proximity.topic('stop'), heard.append, STOP_QOS)
        with spinning(context, driver) as executor:
            assert _stream_until(executor, driver, lambda: heard), \
                f'no proximity stop heard: exit codes {[p.poll() for p in processes.values()]}'
            os.kill(processes[estimation.name].pid, signal.SIGSTOP)
            try:
                count = len(heard)
                assert _stream_until(executor, driver, lambda: len(heard) > count + 3), \
                    'the proximity stop paused with the estimators'
            finally:
                os.kill(processes[estimation.name].pid, signal.SIGCONT)
            assert all(p.poll() is None for p in processes.values())
