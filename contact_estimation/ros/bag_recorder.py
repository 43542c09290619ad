"""Record a running suite into a SuiteBag (suite_bag.py): every topic of nodes.yaml as it was
sent, /tf from the joint states and /robot_description, and `truth_markers_topic`: the
simulator's true contact drawn as the estimators draw theirs (green), for Foxglove and rviz.

The subscriptions are raw: rclpy hands over the CDR bytes DDS carried, which is what a rosbag2
stores, so nothing is parsed or serialised again (only /joint_states is parsed, for /tf).
Each is made once its topic has a publisher, with the reliability they offer (as rosbag2
adapts its QoS): reliable when every publisher is, and transient local when every one is
(the stops and events sent before it looked), so that a loaded machine delays the
recording rather than loses from it. A best-effort recording of the demo lost up to 100 ms
of joint states the suite had taken, and the replay, the oracle of what the suite did, then
judged the input stale where the live chain had not, and its residual drifted from the live
one (issue 39, 2026-11-28). A publisher that offers less, come later, turns the topic's
subscription down to what hears them all.
"""
from __future__ import annotations

import importlib
import os
import posixpath
from typing import Callable

import yaml

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message

from contact_estimation import manifest
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.ros.qos import SENSOR_QOS
from contact_estimation.suite_bag import (DEFAULT_TF_RATE, SuiteBag, remove_earlier_bag,
                                          stamp_ns, suite_topics)


MARKER_ARRAY = 'visualization_msgs/msg/MarkerArray'
DISCOVERY_PERIOD = 0.25  # s between looks for publishers on the topics not yet subscribed
_TRUTH_RGBA = (0.0, 0.8, 0.1, 0.8)


def truth_topics(namespace: str = '') -> tuple[str, str]:
    """The simulator's true contact point and wrench topics in `namespace` (nodes.yaml)."""
    return (manifest.topic('sim_cobot', 'true_contact_point', namespace),
            manifest.topic('sim_cobot', 'true_contact_wrench', namespace))


def truth_markers_topic(namespace: str = '') -> str:
    """Where the recorder draws the true contact: `markers` beside the truth's topics."""
    return posixpath.join(posixpath.dirname(truth_topics(namespace)[0]), 'markers')


TRUTH_MARKERS = truth_markers_topic()  # in the root namespace


class TruthMarkers:
    """Markers of the true contact (ns `truth`: a sphere at the point, the force arrow ending
    there, in the link's frame, 0.1 s lifetime) from the simulator's true contact point and
    wrench of the same stamp and link (`truth_topics` in `namespace`), as CDR for
    `truth_markers_topic`."""

    def __init__(self, namespace: str = ''):
        from geometry_msgs.msg import PointStamped, WrenchStamped

        from contact_estimation.ros.contact_messages import ContactPairs
        self.topic = truth_markers_topic(namespace)
        self._classes = dict(zip(truth_topics(namespace), (PointStamped, WrenchStamped)))
        self._pairs = ContactPairs()

    def feed(self, topic: str, cdr: bytes) -> bytes | None:
        """The markers' CDR once both halves of a contact have come, else None."""
        from builtin_interfaces.msg import Duration
        from rclpy.serialization import serialize_message
        from visualization_msgs.msg import MarkerArray

        from contact_estimation.ros.contact_messages import contact_markers
        if topic not in self._classes:
            return None
        msg = deserialize_message(cdr, self._classes[topic])
        paired = self._pairs.add(msg)
        if paired is None:
            return None
        markers = contact_markers('truth', paired[1], msg.header.stamp, _TRUTH_RGBA)
        for marker in markers:
            marker.lifetime = Duration(sec=0, nanosec=100_000_000)
            marker.frame_locked = True
        return serialize_message(MarkerArray(markers=markers))


def message_class(type_name: str):
    """The rclpy message class of 'package/msg/Name'."""
    package, kind, name = type_name.split('/')
    return getattr(importlib.import_module(f'{package}.{kind}'), name)


class BagRecorder:
    """A node on `context` that writes every suite topic to a new MCAP bag at `path`."""

    def __init__(self, context, path: str | os.PathLike, robot: RobotModel,
                 tf_rate: float = DEFAULT_TF_RATE,
                 node_name: str = 'contact_estimation_recorder', namespace: str = '',
                 tap: Callable[[str, bytes], None] | None = None):
        """`tap`: also given each message recorded (topic, CDR), as it is recorded."""
        self.node = Node(node_name, context=context)
        self._tap = tap
        self.bag = SuiteBag(path, robot, tf_rate)
        self._joint_state_class = message_class('sensor_msgs/msg/JointState')
        self._truth = TruthMarkers(namespace)
        self._joint_states = manifest.node('joint_state_listener').resolved_topic(
            'joint_states', namespace)
        self._topics = suite_topics(namespace)
        self._subscriptions: dict[str, tuple] = {}  # topic: (subscription, (reliable, latched))
        self._subscribe_published()
        self.node.create_timer(DISCOVERY_PERIOD, self._subscribe_published)

    def _subscribe_published(self) -> None:
        """Subscribe to each topic that has publishers, as reliably and as durably as all of
        them offer; a publisher that offers less, come later, turns the subscription down."""
        for topic, type_name in self._topics.items():
            offered = [info.qos_profile for info in self.node.get_publishers_info_by_topic(topic)]
            if not offered:
                continue
            subscription, current = self._subscriptions.get(topic, (None, (True, True)))
            reliable = current[0] and all(
                q.reliability == ReliabilityPolicy.RELIABLE for q in offered)
            latched = current[1] and reliable and all(  # the stops and events sent earlier
                q.durability == DurabilityPolicy.TRANSIENT_LOCAL for q in offered)
            if subscription is not None and (reliable, latched) == current:
                continue
            if subscription is not None:
                self.node.destroy_subscription(subscription)
            qos = QoSProfile(
                history=SENSOR_QOS.history, depth=SENSOR_QOS.depth,
                reliability=ReliabilityPolicy.RELIABLE if reliable else SENSOR_QOS.reliability,
                durability=DurabilityPolicy.TRANSIENT_LOCAL if latched
                else SENSOR_QOS.durability)
            self._subscriptions[topic] = (self.node.create_subscription(
                message_class(type_name), topic,
                lambda cdr, t=topic, m=type_name: self._received(t, m, cdr), qos,
                raw=True), (reliable, latched))

    @classmethod
    def for_suite(cls, context, path: str | os.PathLike, namespace: str = '',
                  node: str = 'sim_cobot', overrides: dict | None = None,
                  tap: Callable[[str, bytes], None] | None = None) -> 'BagRecorder':
        """A recorder of the suite in `namespace`, for the robot that `node`'s parameter file
        (and `overrides`) names; an earlier recording at `path` is replaced."""
        robot = robot_of(node, overrides)
        remove_earlier_bag(path)
        return cls(context, path, robot, namespace=namespace, tap=tap)

    def _received(self, topic: str, type_name: str, cdr: bytes) -> None:
        if self.bag.closed:
            return
        log_ns = self.node.get_clock().now().nanoseconds
        if topic != self._joint_states:
            self.bag.write(topic, type_name, log_ns, cdr)
            markers = self._truth.feed(topic, cdr)
            if markers is not None:
                self.bag.write(self._truth.topic, MARKER_ARRAY, log_ns, markers)
        else:
            msg = deserialize_message(cdr, self._joint_state_class)
            self.bag.write_joint_state(log_ns, stamp_ns(msg), list(msg.name), msg.position,
                                       cdr, topic)
        if self._tap is not None:
            self._tap(topic, cdr)

    def close(self) -> None:
        """Finish the bag (metadata.yaml) and leave the graph."""
        self.bag.close()
        self.node.destroy_node()


def robot_of(node: str, overrides: dict | None = None) -> RobotModel:
    """The robot model node `node` loads from config/robot.yaml, its parameter file and
    `overrides` (its `robot`, `robot_description`, `base_link`, `tip_link`, as
    ros/params.ROBOT)."""
    values = manifest.suite_robot([manifest.node(node).parameters_path(),
                                   manifest.robot_parameters_path()], (node,))
    values.update({k: v for k, v in (overrides or {}).items() if k in manifest.ROBOT_KEYS})
    return RobotModel.load(values['robot_description'] or values['robot'],
                           values['base_link'], values['tip_link'])


def write_parameters(overrides: dict[str, dict], path: str | os.PathLike) -> None:
    """The parameter values a run gave its nodes over their files (by node name), as a
    parameter file that `up --config` and `replay --config` take."""
    with open(path, 'w') as f:
        f.write('# The parameters this run set over config/<node>.yaml (replay --config).\n')
        yaml.safe_dump({node: {'ros__parameters': values}
                        for node, values in overrides.items()}, f, sort_keys=False)
