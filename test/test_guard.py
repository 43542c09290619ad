"""ros/guard.py over rclpy: an exception no node expects, in a timer or a sample handed
over in pipeline mode, is counted and raises the node's stop; the node keeps spinning
(issue 19). A service that raises: test_proximity_monitor_node.py."""
import os

from rclpy.node import Node
from sensor_msgs.msg import JointState
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import Bool

from contact_estimation import manifest
from contact_estimation.core.chain.detector import FAULT
from contact_estimation.nodes.collision_detector import CollisionDetectorNode
from contact_estimation.ros.handover import Handover
from contact_estimation.ros.qos import PIPELINE_QOS, SENSOR_QOS, STOP_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import spinning

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config')
TIMEOUT = 15.0
RESIDUAL = manifest.node('collision_detector').topic('residual')
STOP = manifest.node('collision_detector').topic('stop')


def params(name: str) -> list[str]:
    return ['--ros-args', '--params-file', os.path.join(CONFIG, f'{name}.yaml')]


def broken(*_):
    """A callback with a bug: what the guard is for."""
    return 1 / 0


def stop_listener(context) -> tuple[Node, list[bool], list[str]]:
    """A node that keeps every value the detector publishes on its stop topic, and what it
    says on /diagnostics."""
    node = Node('stop_probe', context=context)
    stops: list[bool] = []
    events: list[str] = []
    node.create_subscription(Bool, STOP, lambda msg: stops.append(msg.data), STOP_QOS)
    node.create_subscription(DiagnosticArray, '/diagnostics', lambda msg: events.extend(
        f'{status.message} {[(v.key, v.value) for v in status.values]}'
        for status in msg.status),
        SENSOR_QOS)
    return node, stops, events


def test_a_timer_that_raises_latches_the_detectors_stop_and_is_counted(context):
    detector = CollisionDetectorNode(  # its stop clears at once (test_one_suite has the hold)
        context=context, cli_args=params('collision_detector') + ['-p', 'discovery_time:=0.1'])
    probe = Node('residual_probe', context=context)  # a residual node at 100 Hz, no contact
    residuals = probe.create_publisher(JointState, RESIDUAL, PIPELINE_QOS)

    def residual():
        names = list(detector.robot.joint_names)
        msg = JointState(name=names, position=[0.0] * len(names), velocity=[0.0] * len(names),
                         effort=[0.0] * len(names))
        msg.header.stamp = probe.get_clock().now().to_msg()
        residuals.publish(msg)
    probe.create_timer(0.01, residual)
    watcher, stops, _ = stop_listener(context)
    with spinning(context, detector, probe, watcher) as executor:
        assert spin_until(executor, lambda: stops and not stops[-1], TIMEOUT)  # inputs: no stop
        detector.create_timer(0.01, broken)
        assert spin_until(executor, lambda: detector.problems.counts[FAULT] >= 1, TIMEOUT)
        assert detector.problems.counts['unexpected_ZeroDivisionError'] >= 1
        assert spin_until(executor, lambda: stops and stops[-1], TIMEOUT)  # the stop went out


def test_a_sample_handed_over_wrongly_is_counted_and_stops(context):
    """Composed mode: a bug in what one node hands another stays in the receiving node."""
    handover = Handover({RESIDUAL})
    detector = CollisionDetectorNode(context=context, cli_args=params('collision_detector'),
                                 handover=handover)
    watcher, stops, events = stop_listener(context)
    with spinning(context, detector, watcher) as executor:
        assert spin_until(executor, lambda: stops and watcher.count_publishers('/diagnostics'),
                          TIMEOUT)
        for receive in handover.receivers(RESIDUAL):
            receive('not', 'a', 'sample')
        assert detector.problems.counts['unexpected_TypeError'] == 1
        assert spin_until(executor, lambda: stops[-1] and any(
            'unexpected_TypeError' in event for event in events), TIMEOUT), (stops, events[-1:])
