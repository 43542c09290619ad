"""The live view's node: the suite's topics taken at a display rate and shown as Foxglove
channels (core/view_scene.py makes the messages; commands/view.py serves them).

It never queues: every subscription keeps only the newest messages (depth 1 for the 1 kHz
streams) in a node that no executor wakes; one timer at `rate` Hz takes what is waiting and
logs one frame. A client that is slow or absent costs nothing here: the Foxglove server
drops its oldest frames (commands/view.py). Topic names are nodes.yaml's, in the suite's
namespace.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from foxglove import Channel
from foxglove.channels import FrameTransformsChannel, SceneUpdateChannel
from geometry_msgs.msg import PointStamped, WrenchStamped
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64
from visualization_msgs.msg import Marker, MarkerArray

from contact_estimation import manifest
from contact_estimation.core.chain.joint_order import JointOrder
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.view_scene import (ContactArrow, Sphere, ViewFrame,
                                                frame_transforms, scene_update)
from contact_estimation.ros.contact_messages import ContactPairs
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.proximity_messages import BODIES_NS, ROBOT_NS
from contact_estimation.ros.qos import STOP_QOS
from contact_estimation.ros.suite_node import waiting_messages

DEFAULT_RATE = 30.0    # Hz: frames a second
CONTACT_HOLD = 0.3     # s: a contact no longer estimated stays shown this long
PROXIMITY_GROUPS = (BODIES_NS, ROBOT_NS)


def _newest(depth: int) -> QoSProfile:
    """Best effort (matches every publisher), the newest `depth` messages kept."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.BEST_EFFORT)


# (node, key in nodes.yaml, type, QoS): what the view reads. Streams keep their newest
# message; contacts enough of both halves to pair them; the stop and the events as a
# controller reads them (reliable, transient local: the latched value at once).
STREAMS = {
    'joint_state': ('sample_relay', 'joint_state', JointState, _newest(1)),
    'residual': ('sample_relay', 'residual', JointState, _newest(1)),
    'stop': ('collision_detector', 'stop', Bool, STOP_QOS),
    'time_scaling': ('collision_detector', 'time_scaling', Float64, _newest(1)),
    'events': ('collision_detector', 'events', DiagnosticArray, STOP_QOS),
    'proximity_stop': ('proximity_monitor', 'stop', Bool, STOP_QOS),
    'speed_scale': ('proximity_monitor', 'speed_scale', Float64, _newest(1)),
    'parts': ('proximity_monitor', 'parts', DiagnosticArray, _newest(1)),
    'markers': ('proximity_monitor', 'markers', MarkerArray, _newest(50)),
}
# Contact sources of core/view_scene.CONTACT_SOURCES: their point and wrench topics.
CONTACTS = {
    'fused': ('contact_localizer', 'point', 'wrench'),
    'ft': ('ft_contact_estimator', 'point', 'wrench'),
    'truth': ('sim_cobot', 'true_contact_point', 'true_contact_wrench'),
}
CONTACT_DEPTH = 50  # of each half: a 1 kHz truth's pairs over a 30 Hz frame


def _schema(properties: dict[str, dict]) -> dict:
    return {'type': 'object', 'properties': properties}


_NUMBERS = {'type': 'array', 'items': {'type': 'number'}}
_TEXTS = {'type': 'array', 'items': {'type': 'string'}}


class ViewChannels:
    """The Foxglove channels of the view (their topics are the layout's,
    config/foxglove_layout.json)."""

    def __init__(self):
        self.tf = FrameTransformsChannel('/tf')
        self.scene = SceneUpdateChannel('/view/scene')
        self.torque = Channel('/view/torque', schema=_schema({
            'stamp': {'type': 'number'}, 'joints': _TEXTS, 'tau_ext': _NUMBERS,
            'psi': _NUMBERS, 'ratio': _NUMBERS}))
        self.stop = Channel('/view/stop', schema=_schema({
            'stop': {'type': 'boolean'}, 'time_scaling': {'type': 'number'},
            'proximity_stop': {'type': 'boolean'}, 'speed_scale': {'type': 'number'}}))
        self.events = Channel('/view/collision_events', schema=_schema({
            'stamp': {'type': 'number'}, 'level': {'type': 'integer'},
            'message': {'type': 'string'}, 'values': {'type': 'object'}}))
        self.proximity = Channel('/view/proximity', schema=_schema({
            'parts': {'type': 'array', 'items': {'type': 'object'}}}))


@dataclass
class _Seen:
    """A contact and when (monotonic s) the view last received it."""

    contact: ContactArrow
    received: float


class SuiteView(Node):
    """Takes the suite's topics at `rate` Hz and logs one frame to `channels`.

    `thresholds(velocity)`: ψ per joint at that q̇ (the detector's parameters), or None
    until they are known."""

    def __init__(self, robot: RobotModel, channels: ViewChannels, namespace: str = '',
                 rate: float = DEFAULT_RATE,
                 thresholds: Callable[[np.ndarray], np.ndarray] | None = None, **kwargs):
        super().__init__('suite_view', namespace=namespace or '/', **kwargs)
        self.robot, self.channels, self.thresholds = robot, channels, thresholds
        self._order = JointOrder(robot.joint_names)
        self._links = [robot.base_link, *robot.joint_links]
        if robot.tip_link not in self._links:
            self._links.append(robot.tip_link)
        # A node no executor wakes: its subscriptions are taken by the frame timer only.
        self._taker = Node('suite_view_taken', namespace=namespace or '/',
                           context=self.context, start_parameter_services=False,
                           enable_rosout=False)
        self._streams = {
            name: self._take_from(manifest.node(node).topic(key), kind, qos)
            for name, (node, key, kind, qos) in STREAMS.items()}
        self._contact_streams = {
            source: [self._take_from(manifest.node(node).topic(key), kind, _newest(CONTACT_DEPTH))
                     for key, kind in ((point, PointStamped), (wrench, WrenchStamped))]
            for source, (node, point, wrench) in CONTACTS.items()}
        self._pairs = {source: ContactPairs() for source in CONTACTS}
        self._contacts: dict[str, _Seen] = {}
        self._markers: dict[tuple[str, int], Marker] = {}
        self._q: np.ndarray | None = None
        self._stamp = 0.0
        self._values: dict[str, object] = {}
        self.frames = 0
        self.create_timer(1.0 / rate, self.frame)

    def _take_from(self, topic: str, kind, qos: QoSProfile):
        return self._taker.create_subscription(kind, topic, lambda _: None, qos)

    def _taken(self, name: str) -> list:
        subscription = self._streams[name]
        return waiting_messages(subscription, subscription.qos_profile.depth)

    def destroy_node(self) -> None:
        self._taker.destroy_node()
        super().destroy_node()

    # -------------------------------------------------------------------- the frame
    def frame(self) -> None:
        """Take what is waiting and log one frame."""
        now = time.monotonic()
        for msg in self._taken('joint_state')[-1:]:
            self._pose_from(msg)
        for msg in self._taken('residual')[-1:]:
            self._log_torque(msg)
        for msg in self._taken('events'):
            self._log_event(msg)
        for name in ('stop', 'time_scaling', 'proximity_stop', 'speed_scale'):
            for msg in self._taken(name)[-1:]:
                self._values[name] = msg.data
        for msg in self._taken('parts')[-1:]:
            self.channels.proximity.log({'parts': [
                {'name': s.name, 'level': _level(s.level), 'message': s.message,
                 **{kv.key: kv.value for kv in s.values}} for s in msg.status]})
        for msg in self._taken('markers'):
            self._keep_markers(msg)
        self._take_contacts(now)
        if self._values:
            self.channels.stop.log(self._values)
        if self._q is not None:
            frame = self.view_frame()
            self.channels.tf.log(frame_transforms(frame))
            self.channels.scene.log(scene_update(frame, lifetime=CONTACT_HOLD))
        self.frames += 1

    def view_frame(self) -> ViewFrame:
        """What the 3D panel shows now (None of it before the first joint state)."""
        poses = self.robot.link_poses(self._q, self._links)
        return ViewFrame(
            base_link=self.robot.base_link, stamp=self._stamp, links=self._links,
            rotations=[r for r, _ in poses], origins=np.array([p for _, p in poses]),
            stop=self._values.get('stop'),
            contacts=[self._in_base(seen.contact) for seen in self._contacts.values()],
            spheres=self._spheres())

    def _in_model_order(self, msg: JointState, values) -> np.ndarray | None:
        """`values` (a field of `msg`) in the model's joint order; None when it lacks some."""
        order = self._order.map(msg.name).model_order
        if order is None or len(values) != len(msg.name):
            return None
        return np.asarray(values, dtype=float)[order]

    def _pose_from(self, msg: JointState) -> None:
        q = self._in_model_order(msg, msg.position)
        if q is not None and np.all(np.isfinite(q)):
            self._q, self._stamp = q, stamp_to_seconds(msg.header.stamp)

    def _log_torque(self, msg: JointState) -> None:
        tau = self._in_model_order(msg, msg.effort)
        if tau is None:
            return
        velocity = self._in_model_order(msg, msg.velocity)
        psi = self.thresholds(velocity) if self.thresholds else None
        self.channels.torque.log({
            'stamp': stamp_to_seconds(msg.header.stamp), 'joints': self.robot.joint_names,
            'tau_ext': _finite(tau),
            'psi': _finite(psi) if psi is not None else [],
            'ratio': _finite(np.abs(tau) / psi) if psi is not None else []})

    def _log_event(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            self.channels.events.log({
                'stamp': stamp_to_seconds(msg.header.stamp), 'level': _level(status.level),
                'message': status.message, 'values': {kv.key: kv.value for kv in status.values}})

    def _take_contacts(self, now: float) -> None:
        for source, subscriptions in self._contact_streams.items():
            for subscription in subscriptions:
                for msg in waiting_messages(subscription, CONTACT_DEPTH):
                    paired = self._pairs[source].add(msg)
                    if paired is not None and paired[1].link in self.robot.link_joint:
                        stamp, contact = paired
                        self._contacts[source] = _Seen(ContactArrow(
                            source, contact.link, np.asarray(contact.point, dtype=float),
                            np.asarray(contact.force, dtype=float), stamp), now)
        for source in [s for s, seen in self._contacts.items()
                       if now - seen.received > CONTACT_HOLD]:
            del self._contacts[source]

    def _in_base(self, contact: ContactArrow) -> ContactArrow:
        """`contact` (in its link's frame, as the suite sends it) in the base frame."""
        rotation, origin = self.robot.link_pose(self._q, contact.link)
        return ContactArrow(contact.source, contact.link, rotation @ contact.point + origin,
                            rotation @ contact.force, contact.stamp)

    def _keep_markers(self, msg: MarkerArray) -> None:
        for marker in msg.markers:
            if marker.action == Marker.DELETEALL:
                self._markers = {k: m for k, m in self._markers.items() if k[0] != marker.ns}
            elif marker.ns not in PROXIMITY_GROUPS:
                continue
            elif marker.action == Marker.DELETE:
                self._markers.pop((marker.ns, marker.id), None)
            else:
                self._markers[marker.ns, marker.id] = marker

    def _spheres(self) -> list[Sphere]:
        """The proximity monitor's spheres (its markers are in the base frame)."""
        spheres = []
        for (ns, _), marker in self._markers.items():
            if marker.type == Marker.SPHERE_LIST:
                centres = [(p.x, p.y, p.z) for p in marker.points]
                offset = np.array([marker.pose.position.x, marker.pose.position.y,
                                   marker.pose.position.z])
            elif marker.type in (Marker.SPHERE, Marker.CUBE):
                centres, offset = [(0.0, 0.0, 0.0)], np.array([
                    marker.pose.position.x, marker.pose.position.y, marker.pose.position.z])
            else:
                continue
            colours = marker.colors or [marker.color] * len(centres)
            spheres += [Sphere(ns, np.asarray(c) + offset, float(marker.scale.x),
                               (colour.r, colour.g, colour.b, colour.a))
                        for c, colour in zip(centres, colours)]
        return spheres


def _finite(values: np.ndarray) -> list:
    """Numbers for JSON: None where not finite."""
    return [float(v) if np.isfinite(v) else None for v in values]


def _level(level) -> int:
    return level[0] if isinstance(level, bytes) else int(level)
