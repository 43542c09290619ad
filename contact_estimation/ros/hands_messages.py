"""The tracked hands' links (DiagnosticArray): written by the proximity monitor, read back by
the collision detector. Apart from ros/proximity_messages.py so that the chain's process,
which reads them, does not load the proximity geometry (open3d: ~200 MiB and ~1.5 s).

Why a DiagnosticArray and no other standard type (issue 39 asked): what travels is a relation,
each (hand, link) pair → the distance between them (m) that the monitor's check measured on its
sphere pairs at its own q, stamped with the skeleton's stamp. geometry_msgs/PoseArray or
PointStamped would carry where the hands are, and the detector would have to measure each
link's distance itself, with the geometry kept out of its process; visualization_msgs is for
display; sensor_msgs/JointState names joints; std_msgs/Float32MultiArray has no header and
names neither hands nor links (their order would be a convention beside the message).
DiagnosticArray is the standard type with a header and named values: a status per hand, a
KeyValue per link. Its price, a decimal string a value: benchmarks/hand_evidence.py."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from contact_estimation.core.chain.contact_class import HandsSeen
from contact_estimation.core.input_rejected import MALFORMED, NOT_FINITE, InputRejected
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.diagnostics import OK, level_byte

if TYPE_CHECKING:
    from contact_estimation.core.contact.proximity import ProximityResult


def hands_message(result: ProximityResult, hardware_id: str) -> DiagnosticArray | None:
    """Which links each tracked hand is near: one status per hand (name: its part) whose
    values are link → distance (m) for every link within the distances the check computes
    (at least `report_range`), stamped with the skeleton's stamp; None without a tracked
    skeleton."""
    hands = result.hand_distances()
    if not hands:
        return None
    array = DiagnosticArray(status=[
        DiagnosticStatus(name=hand, hardware_id=hardware_id, level=level_byte(OK), values=[
            KeyValue(key=link, value=f'{d:.4f}')
            for link, d in zip(result.link_names, distances) if np.isfinite(d)])
        for hand, distances in hands.items()])
    array.header.stamp = seconds_to_stamp(result.bodies_stamp)
    return array


def hands_seen(msg: DiagnosticArray, t: float) -> HandsSeen:
    """`hands_message` read back, stamped `t` (s): each link's distance to its nearest
    hand. InputRejected when a distance is no number (malformed) or NaN (not finite)."""
    nearest: dict[str, float] = {}
    for status in msg.status:
        for value in status.values:
            try:
                distance = float(value.value)
            except ValueError:
                raise InputRejected(MALFORMED, f'{status.name} at {value.key}: distance '
                                               f'{value.value!r} is no number') from None
            if np.isnan(distance):
                raise InputRejected(NOT_FINITE, f'{status.name} at {value.key}: distance NaN')
            nearest[value.key] = min(distance, nearest.get(value.key, np.inf))
    return HandsSeen(t, nearest)
