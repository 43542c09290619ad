"""The collision detector's DetectorState → collision event and rviz markers
(docs/collision_events.md has the fields and what a controller does with them)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from visualization_msgs.msg import Marker, MarkerArray

from contact_estimation.core.chain.contact_class import TOUCH
from contact_estimation.core.chain.detector import COLLISION, NONE, WAITING, DetectorState
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.diagnostics import ERROR, OK, WARN, level_byte
from contact_estimation.ros.markers import cleared, marker

_EVENT_LEVELS = {NONE: OK, WAITING: WARN, TOUCH: WARN}
CLEARED = 'cleared'  # the `event` of a stop that cleared (its cause is NONE)
MARKER_NS = 'collision'
_SPHERE_SIZE = 0.12   # m
_LABEL_HEIGHT = 0.05  # m, text size; the label floats one sphere size above the joint


def collision_event(state: DetectorState, joint_names: Sequence[str], message: str,
                    stamp: Time, hardware_id: str, kind: str = '') -> DiagnosticArray:
    """One DiagnosticArray with one status for a change of the stop (or, with `kind`, for a
    contact's class decided without one: 'touch', or 'impact' before eq. 7 holds again): the
    cause, the stamp, for a collision each joint over threshold with its τ_ext and ψ, and the
    class decided at that sample with its evidence (touch.enabled)."""
    cause = kind or state.cause
    event = DiagnosticStatus(name='collision', message=message, hardware_id=hardware_id,
                             level=level_byte(_EVENT_LEVELS.get(cause, ERROR)))
    joints = state.colliding_joints if state.cause == COLLISION and not kind else ()
    event.values = [KeyValue(key='event', value=cause or CLEARED),
                    KeyValue(key='stamp', value=f'{stamp_to_seconds(stamp):.9f}'),
                    KeyValue(key='joints', value=','.join(joint_names[i] for i in joints))]
    for i in joints:
        event.values += [
            KeyValue(key=f'{joint_names[i]}.residual', value=f'{state.residuals[i]:.4f}'),
            KeyValue(key=f'{joint_names[i]}.threshold', value=f'{state.thresholds[i]:.4f}')]
    decision = state.decision
    if decision is not None:
        event.values += [KeyValue(key=key, value=value) for key, value in (
            ('class', decision.kind), ('class.rule', decision.rule),
            ('class.reason', decision.reason),
            ('class.onset', f'{decision.onset:.9f}'),
            ('class.hold', f'{decision.hold:.9f}'),
            ('class.decided', f'{decision.stamp:.9f}'),
            ('class.decision_time', f'{decision.delay:.4f}'),
            ('class.link', decision.link), ('class.force', f'{decision.force:.1f}'),
            ('class.torque', f'{decision.torque:.3f}'),
            ('class.rise_share', f'{decision.rise_share:.3f}'),
            ('class.rise_rate', f'{decision.rise_rate:.2f}'),
            ('class.roughness', f'{decision.roughness:.4f}'),
            ('class.opposing_speed', f'{decision.opposing_speed:.3f}'),
            ('class.power', f'{decision.power:.3f}'),
            ('class.torque_share', f'{decision.torque_share:.3f}'),
            ('class.hand_distance', f'{decision.hand_distance:.3f}'))]
    array = DiagnosticArray(status=[event])
    array.header.stamp = stamp
    return array


def collision_markers(state: DetectorState, joint_names: Sequence[str],
                      joint_origins: np.ndarray | None, frame_id: str,
                      stamp: Time) -> MarkerArray:
    """A red sphere and a label (τ_ext and ψ) at each joint of the latched collision, at
    `joint_origins` (n × 3 in `frame_id`; None: positions unknown, nothing drawn); a DELETEALL
    of namespace `collision` first clears the last set (and alone, the collision)."""
    markers = [cleared(MARKER_NS)]
    if state.colliding_joints and joint_origins is not None:
        for i in state.colliding_joints:
            sphere = marker(Marker.SPHERE, MARKER_NS, i, joint_origins[i], frame_id, stamp)
            sphere.scale.x = sphere.scale.y = sphere.scale.z = _SPHERE_SIZE
            label = marker(Marker.TEXT_VIEW_FACING, MARKER_NS, len(joint_names) + i,
                           joint_origins[i] + [0.0, 0.0, _SPHERE_SIZE], frame_id, stamp)
            label.scale.z = _LABEL_HEIGHT
            label.text = (f'{joint_names[i]} {state.residuals[i]:+.1f} N·m '
                          f'(ψ {state.thresholds[i]:.1f})')
            markers += [sphere, label]
    return MarkerArray(markers=markers)
