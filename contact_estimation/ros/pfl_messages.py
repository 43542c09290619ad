"""A power and force limit check (core/contact/pfl.PflResult) → its status on
`contact_estimation/pfl` (DiagnosticArray) and its rviz marker."""
from __future__ import annotations

from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from visualization_msgs.msg import Marker

from contact_estimation.core.contact.pfl import PflResult, margin_rgb
from contact_estimation.ros.diagnostics import ERROR, OK, WARN, level_byte
from contact_estimation.ros.markers import marker

PFL_NS = 'pfl'
NEAR_LIMIT = 0.9        # margin (force / limit) from which a contact is warned about
_SPHERE = 0.05          # m
_SHOWN_FOR = 1.0        # s a contact's marker stays without a newer one


def pfl_status(result: PflResult, frame: str, point, hardware_id: str,
               stamp: Time) -> DiagnosticArray:
    """One status: the contact's force against its region's limit, `margin` = force / limit
    (> 1: over, the stop), the region and body part, the link and the point (in `frame`)."""
    level = ERROR if result.over else WARN if result.margin >= NEAR_LIMIT else OK
    status = DiagnosticStatus(name='pfl', hardware_id=hardware_id, level=level_byte(level),
                              message=result.reason)
    values = {'margin': f'{result.margin:.3f}', 'force': f'{result.force:.1f}',
              'limit': f'{result.limit:.1f}', 'over': str(result.over),
              'region': result.region, 'part': result.part, 'phase': result.phase,
              'link': result.link, 'frame': frame,
              **{axis: f'{value:.4f}' for axis, value in zip('xyz', point)}}
    status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
    array = DiagnosticArray(status=[status])
    array.header.stamp = stamp
    return array


def pfl_marker(result: PflResult, frame: str, point, stamp: Time) -> Marker:
    """A sphere at the contact point coloured by its margin (`margin_rgb`)."""
    made = marker(Marker.SPHERE, PFL_NS, 0, point, frame, stamp, (*margin_rgb(result.margin), 0.9))
    made.scale.x = made.scale.y = made.scale.z = _SPHERE
    made.lifetime = Duration(sec=int(_SHOWN_FOR))
    return made
