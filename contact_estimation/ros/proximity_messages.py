"""The proximity monitor's ProximityResult → part statuses (DiagnosticArray) and rviz markers;
a serialised skeleton's stamp and size, read before it is deserialised. The hands' links:
ros/hands_messages.py."""
from __future__ import annotations

import struct

import numpy as np
from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point
from scipy.spatial.transform import Rotation
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from contact_estimation.core.contact.proximity import Body, ProximityResult
from contact_estimation.ros.diagnostics import ERROR, OK, WARN, level_byte

ROBOT_NS, BODIES_NS = 'proximity_robot', 'proximity_bodies'
_RADIUS_STEP = 0.005  # m: spheres are drawn in groups of equal radius, rounded up to this
_STOP, _WARNING, _CLEAR = (1.0, 0.0, 0.0), (1.0, 0.6, 0.0), (0.3, 0.6, 1.0)


def _number(value: float) -> str:
    return f'{value:.4f}'


def part_statuses(result: ProximityResult, hardware_id: str, stamp: Time) -> DiagnosticArray:
    """One status per body (its signal, distance, margin, S_p and nearest link) and one for
    the robot (its signal, the speed scale, the source and the problem)."""
    statuses = []
    for k, name in enumerate(result.body_names):
        stop, warning = bool(result.body_stop[k]), bool(result.body_warning[k])
        status = DiagnosticStatus(
            name=f'proximity/{name}', hardware_id=hardware_id,
            level=level_byte(ERROR if stop else WARN if warning else OK),
            message='stop' if stop else 'slow down' if warning else 'clear')
        status.values = [
            KeyValue(key='signal', value=str(int(stop))),
            KeyValue(key='distance', value=_number(result.body_distance[k])),
            KeyValue(key='margin', value=_number(result.body_margin[k])),
            KeyValue(key='protective_distance',
                     value=_number(result.body_protective_distance[k])),
            KeyValue(key='link', value=result.body_link[k] or ''),
            # Power and force limiting: the fastest approach to it, as a share of its v_max.
            KeyValue(key='speed_share', value=_number(result.body_speed_share[k]))]
        statuses.append(status)
    stopping = [n for n, s in zip(result.body_names, result.body_stop) if s]
    message = (result.problem or result.starting
               or (f'stop: {", ".join(stopping)}' if result.stop else
                   'reset: moving away allowed' if result.reset_active else
                   'slow down' if result.speed_scale < 1 else 'clear'))
    robot = DiagnosticStatus(
        name='proximity/robot', hardware_id=hardware_id, message=message,
        level=level_byte(ERROR if result.stop else WARN if result.speed_scale < 1 else OK))
    nearest = float(np.min(result.body_distance, initial=np.inf))
    robot.values = [KeyValue(key='signal', value=str(int(result.stop))),
                    KeyValue(key='speed_scale', value=_number(result.speed_scale)),
                    KeyValue(key='pfl_ratio', value=_number(result.pfl_ratio)),
                    KeyValue(key='source', value=result.source),
                    KeyValue(key='distance', value=_number(nearest)),
                    KeyValue(key='reset_active', value=str(result.reset_active)),
                    KeyValue(key='problem', value=result.problem)]
    array = DiagnosticArray(status=statuses + [robot])
    array.header.stamp = stamp
    return array


class ProximityMarkers:
    """The robot's spheres coloured by distance (red touching → green at `full_range` or
    more, grey unknown), but those of a link approaching a tracked body part in its warning
    zone by the share of its v_max it moves at (power and force limiting: cyan slow →
    magenta at v_max or faster), and the bodies' spheres and boxes coloured by signal (red
    stop, orange slow down, blue clear), in namespaces of their own on a shared marker topic.
    Markers live `lifetime` seconds, so they vanish when the node stops publishing."""

    def __init__(self, frame_id: str, robot_radii: np.ndarray, sphere_link: np.ndarray,
                 full_range: float, lifetime: float):
        self._frame_id, self._robot_radii, self._full_range = frame_id, robot_radii, full_range
        self._sphere_link = sphere_link  # each robot sphere's link index
        seconds = int(lifetime)
        self._lifetime = Duration(sec=seconds, nanosec=int((lifetime - seconds) * 1e9))
        self._sent = {ROBOT_NS: 0, BODIES_NS: 0}

    def markers(self, result: ProximityResult, stamp: Time) -> MarkerArray:
        robot = []
        if len(result.robot_centres):
            closeness = np.clip(result.robot_sphere_distance / self._full_range, 0.0, 1.0)
            share = np.minimum(result.link_speed_share[self._sphere_link], 1.0)
            colours = [(s, 1.0 - s, 1.0) if s > 0 else (0.5, 0.5, 0.5) if np.isnan(c)
                       else (1.0 - c, c, 0.0) for c, s in zip(closeness, share)]
            robot = self._sphere_lists(ROBOT_NS, result.robot_centres, self._robot_radii,
                                       colours, stamp)
        bodies = []
        for k, body in enumerate(result.bodies):
            colour = (_STOP if result.body_stop[k] else _WARNING if result.body_warning[k]
                      else _CLEAR)
            bodies += self._body(body, colour, len(bodies), stamp)
        return MarkerArray(markers=self._numbered(ROBOT_NS, robot, stamp)
                           + self._numbered(BODIES_NS, bodies, stamp))

    def _numbered(self, ns: str, markers: list[Marker], stamp: Time) -> list[Marker]:
        """Ids 0 … n−1 in `ns`, and DELETE for the ids the last array had beyond them."""
        for marker_id, marker in enumerate(markers):
            marker.ns, marker.id = ns, marker_id
        gone = [self._marker(Marker.DELETE, ns, marker_id, stamp)
                for marker_id in range(len(markers), self._sent[ns])]
        self._sent[ns] = len(markers)
        return markers + gone

    def _body(self, body: Body, colour, first_id: int, stamp: Time) -> list[Marker]:
        if body.box_centre is None:
            return self._sphere_lists(BODIES_NS, body.centres, body.radii,
                                      [colour] * len(body.radii), stamp)
        box = self._marker(Marker.ADD, BODIES_NS, first_id, stamp, Marker.CUBE, colour)
        box.pose.position.x, box.pose.position.y, box.pose.position.z = (
            float(c) for c in body.box_centre)
        x, y, z, w = Rotation.from_matrix(body.box_rotation).as_quat()
        box.pose.orientation.x, box.pose.orientation.y = float(x), float(y)
        box.pose.orientation.z, box.pose.orientation.w = float(z), float(w)
        box.scale.x, box.scale.y, box.scale.z = (2 * float(h) for h in body.box_half_extents)
        return [box]

    def _sphere_lists(self, ns: str, centres: np.ndarray, radii: np.ndarray, colours,
                      stamp: Time) -> list[Marker]:
        """One SPHERE_LIST per radius, rounded up to _RADIUS_STEP (never drawn smaller)."""
        steps = np.ceil(np.asarray(radii) / _RADIUS_STEP - 1e-9).astype(int)
        lists = []
        for step in np.unique(steps):
            marker = self._marker(Marker.ADD, ns, 0, stamp, Marker.SPHERE_LIST, (1.0, 1.0, 1.0))
            marker.scale.x = marker.scale.y = marker.scale.z = 2 * _RADIUS_STEP * float(step)
            for k in np.flatnonzero(steps == step):
                marker.points.append(_point(centres[k]))
                marker.colors.append(_colour(colours[k]))
            lists.append(marker)
        return lists

    def _marker(self, action: int, ns: str, marker_id: int, stamp: Time,
                kind: int = Marker.SPHERE, colour=(1.0, 1.0, 1.0)) -> Marker:
        marker = Marker(action=action, ns=ns, id=marker_id, type=kind,
                        lifetime=self._lifetime)
        marker.header.frame_id, marker.header.stamp = self._frame_id, stamp
        marker.pose.orientation.w = 1.0
        marker.color = _colour(colour)
        return marker


def _point(xyz) -> Point:
    return Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def _colour(rgb, alpha: float = 0.6) -> ColorRGBA:
    return ColorRGBA(r=float(rgb[0]), g=float(rgb[1]), b=float(rgb[2]), a=alpha)


def pose_array_size(raw: bytes) -> tuple[Time, int]:
    """The header stamp and the number of poses of a serialised geometry_msgs/PoseArray (CDR),
    read from its first bytes: a skeleton of 10 000 poses is refused before rclpy builds
    30 000 Python objects from it (issue 27). ValueError when `raw` is too short."""
    try:
        order = '<' if raw[1] == 1 else '>'  # the encapsulation: CDR little or big endian
        sec, nanosec, frame_length = struct.unpack_from(order + 'iII', raw, 4)
        at = 16 + frame_length
        at += -(at - 4) % 4  # aligned from the end of the 4-byte encapsulation
        (count,) = struct.unpack_from(order + 'I', raw, at)
    except (IndexError, struct.error) as err:
        raise ValueError(f'a PoseArray of {len(raw)} bytes is truncated') from err
    return Time(sec=sec, nanosec=nanosec), count
