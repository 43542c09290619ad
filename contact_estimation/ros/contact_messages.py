"""A contact (core/contact/contact.Contact) to its messages and back.

The DEVELOPERS.md contract: a `geometry_msgs/PointStamped` and a `geometry_msgs/WrenchStamped`
with the same stamp and `frame_id` = the contacted link, the point in that link's frame and
the force on the robot in that frame (torque zero: the force acts at the point); in rviz a
sphere at the point and the force's arrow ending there. Every node that publishes a contact
(F/T estimator, localizer, simulated cobot's truth) builds them here, and every reader
(demo, pictures, the recording's truth markers) pairs them back here.
"""
from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, PointStamped, WrenchStamped
from visualization_msgs.msg import Marker

from contact_estimation.core.contact.contact import Contact
from contact_estimation.ros.conversions import point_stamped, stamp_to_seconds, wrench_stamped
from contact_estimation.ros.markers import RED, marker

_CONTACT_SPHERE = 0.03   # m
_ARROW_PER_NEWTON = 0.005  # m of arrow per N of force
_ARROW_SHAFT = 0.01      # m


def contact_messages(contact: Contact, stamp: Time, ns: str | None = None, rgba=RED
                     ) -> tuple[PointStamped, WrenchStamped, list[Marker]]:
    """The point and the wrench of `contact`, stamped `stamp`, in the contacted link's frame,
    and its markers in namespace `ns` (`contact_markers`; none without `ns`)."""
    return (point_stamped(stamp, contact.link, contact.point),
            wrench_stamped(stamp, contact.link, contact.force, np.zeros(3)),
            contact_markers(ns, contact, stamp, rgba) if ns else [])


def contact_markers(ns: str, contact: Contact, stamp: Time, rgba=RED) -> list[Marker]:
    """A sphere at the contact point and an arrow of the force on the robot, ending at the
    point (the push comes from outside), ids 0 and 1 of `ns`, in the link's frame."""
    point, force = np.asarray(contact.point, dtype=float), np.asarray(contact.force, dtype=float)
    sphere = marker(Marker.SPHERE, ns, 0, point, contact.link, stamp, rgba)
    sphere.scale.x = sphere.scale.y = sphere.scale.z = _CONTACT_SPHERE
    arrow = marker(Marker.ARROW, ns, 1, (0.0, 0.0, 0.0), contact.link, stamp, rgba)
    tail = point - _ARROW_PER_NEWTON * force
    arrow.points = [Point(x=float(a), y=float(b), z=float(c)) for a, b, c in (tail, point)]
    arrow.scale.x, arrow.scale.y, arrow.scale.z = _ARROW_SHAFT, 2 * _ARROW_SHAFT, 3 * _ARROW_SHAFT
    return [sphere, arrow]


class ContactPairs:
    """The inverse of `contact_messages`: PointStamped and WrenchStamped messages paired by
    stamp and frame (the link) into contacts. A half waits until its other half comes; at
    most WAITING of each wait (the oldest is dropped: its other half was lost)."""

    WAITING = 64

    def __init__(self):
        self._points: dict[tuple[float, str], np.ndarray] = {}
        self._forces: dict[tuple[float, str], np.ndarray] = {}

    def add(self, msg: PointStamped | WrenchStamped) -> tuple[float, Contact] | None:
        """Keep one half (an rclpy message or a bag reader's of the same fields); the stamp
        (s) and the contact once both halves have come."""
        key = stamp_to_seconds(msg.header.stamp), msg.header.frame_id
        if hasattr(msg, 'point'):
            value, mine, other = msg.point, self._points, self._forces
        else:
            value, mine, other = msg.wrench.force, self._forces, self._points
        mine[key] = np.array([value.x, value.y, value.z])
        if key not in other:
            if len(mine) > self.WAITING:
                del mine[next(iter(mine))]
            return None
        point, force = self._points.pop(key), self._forces.pop(key)
        return key[0], Contact(key[1], point, force)
