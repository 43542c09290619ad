"""The contact localizer's ContactEstimate (core/contact/contact.py) → rviz markers and its
/diagnostics values.

Markers live in namespace `contact_estimate` on the topic the collision detector
(namespace `collision`) and the F/T estimator (`ft_contact`) also draw on: each marker has a
fixed id and is replaced or deleted by id (never an un-namespaced DELETEALL, which would wipe
the others' markers too: ros/markers.py), and lives `LIFETIME` seconds, so the drawing fades once
the contact is over
and estimates stop.
"""
from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point
from visualization_msgs.msg import Marker, MarkerArray

from contact_estimation.core.contact.contact import ContactEstimate
from contact_estimation.ros.contact_messages import contact_markers
from contact_estimation.ros.markers import deleted, marker

MARKER_NS = 'contact_estimate'
LIFETIME = Duration(sec=0, nanosec=500_000_000)
# Ids 0 and 1 are ros/contact_messages.contact_markers' sphere and force arrow.
_CONTACT, _LINK, _CANDIDATES, OBSTACLE_ID, _LABEL = (0, 1), 2, 3, 4, 5
_COLOURS = {_CONTACT: (1.0, 0.2, 0.1, 1.0), _LINK: (1.0, 0.6, 0.0, 0.35),
            _CANDIDATES: (0.2, 0.6, 1.0, 0.9), OBSTACLE_ID: (0.6, 0.2, 0.9, 0.8),
            _LABEL: (1.0, 1.0, 1.0, 1.0)}


def estimate_markers(estimate: ContactEstimate, stamp: Time, base_frame: str,
                     link_spheres: tuple[np.ndarray, np.ndarray] | None,
                     obstacle: np.ndarray | None, note: str) -> MarkerArray:
    """The contact point and the force arrow ending there (link frame), the contacted link's
    cover spheres (`link_spheres`: centres and radii in the link's frame), the candidate
    points when there is more than one, the obstacle cluster (N×3, base frame) and a label
    with the link, force, source and `note`. What the estimate lacks is deleted."""
    markers = []
    found = estimate.contact
    if found is not None:
        contact = contact_markers(MARKER_NS, found, stamp, _COLOURS[_CONTACT])
        label = _marker(_LABEL, Marker.TEXT_VIEW_FACING, found.link, stamp)
        label.pose.position = _point(found.point)
        label.pose.position.z += 0.06
        label.scale.z = 0.04
        label.text = (f'{found.link} {np.linalg.norm(found.force):.1f} N '
                      f'({estimate.source}{"; " + note if note else ""})')
        for made in contact:
            made.lifetime, made.frame_locked = LIFETIME, True
        markers += contact + [label]
    else:
        markers += deleted(MARKER_NS, [*_CONTACT, _LABEL])
    if found is not None and link_spheres is not None:
        centres, radii = link_spheres
        link = _marker(_LINK, Marker.SPHERE_LIST, found.link, stamp)
        link.points = [_point(c) for c in centres]
        link.scale.x = link.scale.y = link.scale.z = 2.0 * float(np.max(radii))
        markers.append(link)
    else:
        markers.append(_delete(_LINK))
    markers.append(_points_marker(_CANDIDATES, estimate.candidates, base_frame, stamp, 0.015)
                   if len(estimate.candidates) > 1 else _delete(_CANDIDATES))
    markers.append(_points_marker(OBSTACLE_ID, obstacle, base_frame, stamp, 0.02)
                   if obstacle is not None and len(obstacle) else _delete(OBSTACLE_ID))
    return MarkerArray(markers=markers)


def estimate_values(estimate: ContactEstimate, seconds: float, cloud: str) -> dict[str, str]:
    """The /diagnostics values of one estimate: link range (seed 000 eq. 13), source,
    ambiguity, fit residual, the time it took and what the cloud contributed."""
    span = estimate.link_range
    return {
        'link': estimate.contact.link if estimate.found else '',
        'link_range': f'{span[0]} … {span[1]}' if span else '',
        'source': estimate.source,
        'ambiguity': (f'{len(estimate.candidates)} points on '
                      f'{",".join(sorted(set(estimate.candidate_links)))}'
                      if len(estimate.candidates) > 1 else 'none'),
        'fit_residual': f'{estimate.residual:.4f} N·m',
        'consistent': str(estimate.consistent),
        'estimate_time': f'{1000 * seconds:.1f} ms',
        'cloud': cloud,
    }


def _marker(marker_id: int, kind: int, frame_id: str, stamp: Time) -> Marker:
    made = marker(kind, MARKER_NS, marker_id, (0.0, 0.0, 0.0), frame_id, stamp,
                  _COLOURS[marker_id])
    made.lifetime, made.frame_locked = LIFETIME, True
    return made


def _points_marker(marker_id: int, points: np.ndarray, frame_id: str, stamp: Time,
                   size: float) -> Marker:
    made = _marker(marker_id, Marker.SPHERE_LIST, frame_id, stamp)
    made.points = [_point(p) for p in points]
    made.scale.x = made.scale.y = made.scale.z = size
    return made


def _delete(marker_id: int) -> Marker:
    return deleted(MARKER_NS, [marker_id])[0]


def _point(p) -> Point:
    return Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))
