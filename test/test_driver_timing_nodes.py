"""joint_state_listener + residual_node with their shipped parameter files, fed a real
driver's timing over rclpy: ~100 Hz, stamps 4-10 ms apart, a few messages lost and a few
out of order (test_driver_timing.jittered_driver).

Each message goes out at its time on the wall clock, but never before the nodes have handled
the previous one (this test spins them in one process on a shared machine, where a
best-effort queue could otherwise overflow: a loss this test did not plan)."""
import time

import numpy as np
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from contact_estimation import manifest
from contact_estimation.nodes.joint_state_listener import JointStateListenerNode
from contact_estimation.nodes.residual_node import ResidualNode
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.qos import PIPELINE_QOS
from contact_estimation.ros.spinning import spin_until
from test_driver_timing import REORDERED, jittered_driver
from test_residual import Trajectory

LISTENER, RESIDUAL = manifest.node('joint_state_listener'), manifest.node('residual_node')
TIMEOUT = 30.0  # s: generous deadline for each awaited event


def _params(spec):
    return ['--ros-args', '--params-file', spec.parameters_path()]


def test_listener_and_residual_take_a_jittered_100_hz_driver_with_their_defaults(context):
    listener = JointStateListenerNode(context=context, cli_args=_params(LISTENER))
    residual = ResidualNode(context=context, cli_args=_params(RESIDUAL))
    driver = Node('jittered_driver', context=context)
    residuals = []
    driver.create_subscription(JointState, RESIDUAL.topic('residual'), residuals.append,
                               PIPELINE_QOS)
    publisher = driver.create_publisher(JointState, LISTENER.topic('joint_states'),
                                        QoSProfile(depth=100,
                                                   reliability=ReliabilityPolicy.RELIABLE))
    executor = SingleThreadedExecutor(context=context)
    for node in (listener, residual, driver):
        executor.add_node(node)
    try:
        assert spin_until(executor, lambda: (
            publisher.get_subscription_count() > 0
            and all(output.listened for output in listener.outputs + residual.outputs)),
            TIMEOUT)
        robot = listener.robot
        rng = np.random.default_rng(12)
        traj = Trajectory(robot, rng, amplitude=0.3, frequency=0.3)
        t0 = time.time()  # stamps on this machine's clock, as from a synchronised driver
        arrivals = jittered_driver(rng, duration=3.0) - 1000.0 + t0
        counts, traffic = listener.problems.counts, listener.problems.traffic

        def handled(messages):
            return (traffic['samples_published'] + counts['out_of_order_stamp'] == messages
                    and residual.problems.traffic['residuals_published']
                    == traffic['samples_published'] == len(residuals))

        def wait_handled(k):
            assert spin_until(executor, lambda: handled(k), TIMEOUT), (
                k, dict(counts), dict(traffic), dict(residual.problems.traffic), len(residuals))

        start = time.monotonic()
        for k, (stamp, due) in enumerate(zip(arrivals, start + np.sort(arrivals) - t0)):
            wait_handled(k)
            while (now := time.monotonic()) < due:
                executor.spin_once(timeout_sec=due - now)
            q, v, a = traj.state(stamp - t0)
            msg = JointState(name=robot.joint_names, position=q.tolist(), velocity=v.tolist(),
                             effort=robot.rnea(q, v, a).tolist())  # free motion, no friction
            msg.header.stamp = seconds_to_stamp(stamp)
            publisher.publish(msg)
        wait_handled(len(arrivals))
        assert spin_until(executor, lambda: 'input_rate_hz' in listener.problems.values,
                          TIMEOUT)
    finally:
        executor.shutdown()
        for node in (listener, residual, driver):
            node.destroy_node()
    # Reordered messages are dropped and counted, nothing else is a problem: no gap, no restart.
    assert dict(counts) == {'out_of_order_stamp': REORDERED}
    assert dict(residual.problems.counts) == {}
    assert 100.0 < float(listener.problems.values['input_rate_hz']) < 200.0
    # What the time settings come to at that rate, said by each node.
    assert 'velocity_filter.window_duration' in listener.problems.values['time_settings']
    assert 'observer time constant 0.02 s' in residual.problems.values['time_settings']
    effort = np.array([m.effort for m in residuals])
    assert np.abs(effort).max() < 0.5  # free motion: a quiet residual
