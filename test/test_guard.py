"""ros/guard.py over rclpy: an exception no node expects, in a timer, a service or a sample
handed over in pipeline mode, is counted, answered, and raises the node's stop; the node
keeps spinning (issue 19)."""
import os
import time

import numpy as np
from std_srvs.srv import Trigger

from contact_estimation import manifest
from contact_estimation.core.detector import FAULT, WAITING
from contact_estimation.nodes.collision_detector import CollisionDetector
from contact_estimation.nodes.proximity_monitor import ProximityMonitorNode
from contact_estimation.ros.handover import Handover
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import spinning

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config')
TIMEOUT = 15.0


def params(name: str) -> list[str]:
    return ['--ros-args', '--params-file', os.path.join(CONFIG, f'{name}.yaml')]


def broken(*_):
    """A callback with a bug: what the guard is for."""
    return 1 / 0


def test_a_timer_that_raises_stops_the_detector_and_is_counted(context):
    topic = manifest.node('collision_detector').topic('residual')
    detector = CollisionDetector(context=context, cli_args=params('collision_detector'),
                                 handover=Handover({topic}))
    (receive,) = detector._handover.receivers(topic)  # composed mode: a function call
    zero = np.zeros(detector.robot.n)
    receive(detector.get_clock().now().to_msg(), '', zero, zero, zero)  # one valid residual
    assert detector.detector.state(time.monotonic()).cause != WAITING
    ticks = []
    with spinning(context, detector) as executor:
        detector.create_timer(0.01, broken)
        detector.create_timer(0.01, lambda: ticks.append(1))
        assert spin_until(executor, lambda: len(ticks) > 20, TIMEOUT)
        assert detector.problems.counts['unexpected_ZeroDivisionError'] > 1
        assert detector.problems.counts[FAULT] >= 1 and detector._published.stop
        receive('not', 'a', 'sample')  # handed over with the wrong arguments
        assert detector.problems.counts['unexpected_TypeError'] == 1


def test_a_service_that_raises_answers_refused_and_stops_the_proximity_monitor(context):
    monitor = ProximityMonitorNode(context=context, cli_args=params('proximity_monitor'))
    monitor.create_service(Trigger, '~/broken', broken)
    client = monitor.create_client(Trigger, '/proximity_monitor/broken')
    with spinning(context, monitor) as executor:
        assert client.wait_for_service(timeout_sec=TIMEOUT)
        future = client.call_async(Trigger.Request())
        assert spin_until(executor, future.done, TIMEOUT)
        response = future.result()
        assert not response.success and 'ZeroDivisionError' in response.message
        assert monitor.problems.counts['unexpected_ZeroDivisionError'] == 1
        assert monitor._result.stop and 'unexpected ZeroDivisionError' in monitor._result.problem
        assert np.isfinite(monitor.guard.last_fault[0])
