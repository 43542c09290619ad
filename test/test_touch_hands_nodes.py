"""Touch classification's hand rule over rclpy (issue 29): the real proximity monitor turns a
tracked skeleton into `proximity/hands`, and the real collision detector (touch on) takes
them. A slow push on link 4 stays a touch with the person's hand at link 4, and is an impact
that latches the stop, 'no hand at the contacted link', with the person's hands away. As
separate nodes (over DDS, as composed mode runs them: the monitor in a process of its own) and
built in one process (as the replay builds them: the hands handed over by function call)."""
import os

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Pose, PoseArray
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from contact_estimation import composed, manifest
from contact_estimation.core.contact.proximity import COCO_17, standing_skeleton
from contact_estimation.nodes.collision_detector import CollisionDetectorNode
from contact_estimation.nodes.proximity_monitor import ProximityMonitorNode
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import spinning

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config')
DETECTOR, MONITOR = manifest.node('collision_detector'), manifest.node('proximity_monitor')
TIMEOUT = 15.0
Q = np.array([0.3, -0.4, 0.2, -2.0, 0.1, 1.6, 0.5])
CONTACT = np.array([-0.05, 0.1, 0.0])  # on link 4's body, in its frame
NODES = (DETECTOR.name, MONITOR.name)
# A loaded machine may run these nodes late (max_lag, timeouts), which is not what this is
# about: the monitor must keep checking, and sending the hands, throughout.
OVERRIDES = {DETECTOR.name: {'max_lag': 1.0, 'input_timeout': 1.0, 'touch.enabled': True},
             MONITOR.name: {'max_lag': 1.0, 'joint_state_timeout': 1.0, 'body_timeout': 1.0}}


def separate(**kwargs):
    return [composed.node_class(name)(**kwargs) for name in NODES]


def one_process(**kwargs):
    """The two nodes built as the replay builds the suite (composed.build): the hands are
    handed over by function call."""
    return composed.build(NODES, **kwargs)


class Probe(Node):
    """Plays the listener (joint states), the residual node (τ_ext of a force ramping on link
    4) and a skeleton tracker; records the detector's stop and events, and the hands."""

    def __init__(self, context, robot, keypoints: np.ndarray):
        super().__init__('touch_hands_probe', context=context)
        self.names, self.base = list(robot.joint_names), robot.base_link
        self.keypoints = keypoints
        # τ_ext of 1 N pushing link 4 at CONTACT along the base's −y, N·m per N
        self.per_newton = robot.point_jacobian(Q, 'panda_link4', CONTACT).T @ [0.0, -1.0, 0.0]
        self.ramping = False
        self.newtons, self.last, self.ticks = 0.0, None, 0
        self.stops, self.events, self.hands = [], [], []
        self._residual = self.create_publisher(JointState, DETECTOR.topic('residual'),
                                               PIPELINE_QOS)
        self._joint_state = self.create_publisher(JointState, MONITOR.topic('joint_state'),
                                                  PIPELINE_QOS)
        self._skeleton = self.create_publisher(PoseArray, MONITOR.topic('skeleton'),
                                               PIPELINE_QOS)
        self.create_subscription(Bool, DETECTOR.topic('stop'),
                                 lambda m: self.stops.append(m.data), STOP_QOS)
        self.create_subscription(DiagnosticArray, DETECTOR.topic('events'), self.events.append,
                                 PIPELINE_QOS)
        self.create_subscription(DiagnosticArray, MONITOR.topic('hands'), self.hands.append,
                                 PIPELINE_QOS)
        self.create_timer(0.002, self._samples)
        self.create_timer(0.05, self._tracker)

    def _samples(self):
        stamp = self.get_clock().now().to_msg()
        t = stamp_to_seconds(stamp)
        if self.ramping and self.last is not None:
            self.newtons = min(40.0, self.newtons + 60.0 * (t - self.last))  # a hand: 0.7 s
        self.last = t
        residual = JointState(name=self.names, position=Q.tolist(), velocity=[0.0] * len(Q),
                              effort=(self.newtons * self.per_newton).tolist())
        residual.header.stamp = stamp
        self._residual.publish(residual)
        self.ticks += 1
        if self.ticks % 5 == 0:  # 100 Hz for the monitor
            state = JointState(name=self.names, position=Q.tolist(), velocity=[0.0] * len(Q))
            state.header.stamp = stamp
            self._joint_state.publish(state)

    def _tracker(self):
        msg = PoseArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.base
        for x, y, z in self.keypoints:
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = float(x), float(y), float(z)
            msg.poses.append(pose)
        self._skeleton.publish(msg)


def person(robot, hand_at_contact: bool) -> np.ndarray:
    """A person standing 0.7 m from the contact point, the right wrist on it, or 2 m away
    with the arms down."""
    rotation, origin = robot.link_pose(Q, 'panda_link4')
    contact = rotation @ CONTACT + origin
    if not hand_at_contact:
        return standing_skeleton(contact + [2.0, 0.0, 0.0], yaw=0.0)
    keypoints = standing_skeleton(contact + [0.7, 0.0, 0.0], yaw=0.0)
    keypoints[COCO_17.index('right_elbow')] = contact + [0.35, 0.0, -0.05]
    keypoints[COCO_17.index('right_wrist')] = contact + [0.05, 0.0, 0.0]
    return keypoints


def values(event: DiagnosticArray) -> dict[str, str]:
    return {kv.key: kv.value for kv in event.status[0].values}


@pytest.mark.parametrize('build', [separate, one_process])
@pytest.mark.parametrize('hand_at_contact', [True, False])
def test_a_slow_push_is_a_touch_only_with_a_hand_at_the_contacted_link(context, tmp_path,
                                                                       build, hand_at_contact):
    overrides = tmp_path / 'touch.yaml'
    overrides.write_text(yaml.safe_dump({name: {'ros__parameters': values}
                                         for name, values in OVERRIDES.items()}))
    files = [os.path.join(CONFIG, f'{name}.yaml') for name in NODES] + [str(overrides)]
    detector, monitor = build(context=context, cli_args=['--ros-args'] + [
        a for f in files for a in ('--params-file', f)])
    assert isinstance(detector, CollisionDetectorNode)
    assert isinstance(monitor, ProximityMonitorNode)
    # In one process the detector is a receiver of the monitor's hands, not a subscriber.
    assert any(output.receivers for output in monitor.outputs) == (build is one_process)
    probe = Probe(context, detector.robot, person(detector.robot, hand_at_contact))
    with spinning(context, detector, monitor, probe) as executor:
        assert spin_until(executor, lambda: probe.stops and probe.stops[-1] is False, TIMEOUT)
        # The hands have reached the detector before the push.
        assert spin_until(executor, lambda: probe.hands and detector.problems.traffic[
            'hands_received'] > 0, TIMEOUT)
        hands = {s.name: {kv.key: float(kv.value) for kv in s.values}
                 for s in probe.hands[-1].status}
        assert set(hands) == {'left_hand', 'right_hand'}
        near = min(hands['right_hand'].get('panda_link4', np.inf), 1e9)
        assert (near < 0.15) == hand_at_contact
        probe.events.clear()
        probe.ramping = True
        assert spin_until(executor, lambda: any(values(e).get('class') for e in probe.events),
                          TIMEOUT)
        decided = values(next(e for e in probe.events if values(e).get('class')))
        assert decided['class.link'] in ('panda_link3', 'panda_link4')
        assert decided['class.hand_distance'] != 'nan', decided  # the hands were recent
        if hand_at_contact:
            assert decided['event'] == 'touch' and decided['class'] == 'touch'
            assert decided['class.reason'].endswith('a hand at the contacted link')
            assert float(decided['class.hand_distance']) <= 0.15
            # Held by f_S, the stop not latched: the detector's decision (a heartbeat of a
            # loaded machine may say True while the node is late; ros/heartbeat.py).
            assert detector.stop_signal.stop is False
        else:
            assert decided['event'] == 'collision' and decided['class'] == 'impact'
            assert decided['class.reason'].startswith('no hand at the contacted link')
            assert spin_until(executor, lambda: probe.stops[-1] is True, TIMEOUT)
