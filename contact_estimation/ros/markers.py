"""rviz markers the nodes share: one marker at a point, deletion of some or all of one
namespace's markers (a contact's: ros/contact_messages.py).

Several nodes draw on `/contact_estimate/markers`, each in its own namespace (`collision`,
`contact_estimate`, `ft_contact`, the proximity monitor's): a node deletes only its own. A
DELETEALL with `ns` set deletes only that namespace in rviz2 (Galactic and later: ros2/rviz
#685; visualization_msgs/Marker.msg: "deletes all objects (or those with the given ns if
any)"); without `ns` it would wipe every node's markers, so `cleared` refuses an empty one
and is the package's only DELETEALL (test/test_markers.py).
"""
from __future__ import annotations

from builtin_interfaces.msg import Time
from visualization_msgs.msg import Marker

RED = (1.0, 0.0, 0.0, 0.8)


def marker(kind: int, ns: str, marker_id: int, position, frame_id: str, stamp: Time,
           rgba=RED) -> Marker:
    """A marker of `kind` at `position` (in `frame_id`), identity orientation."""
    made = Marker(type=kind, action=Marker.ADD, ns=ns, id=marker_id)
    made.header.frame_id = frame_id
    made.header.stamp = stamp
    made.pose.position.x, made.pose.position.y, made.pose.position.z = (
        float(c) for c in position)
    made.pose.orientation.w = 1.0
    made.color.r, made.color.g, made.color.b, made.color.a = rgba
    return made


def deleted(ns: str, ids) -> list[Marker]:
    """DELETE of these ids of `ns` only."""
    return [Marker(action=Marker.DELETE, ns=ns, id=i) for i in ids]


def cleared(ns: str) -> Marker:
    """DELETEALL of the markers of namespace `ns` (not empty: that would be every node's)."""
    if not ns:
        raise ValueError('a DELETEALL marker needs a namespace: without one rviz deletes the '
                         "markers of every node on the topic")
    return Marker(action=Marker.DELETEALL, ns=ns)
