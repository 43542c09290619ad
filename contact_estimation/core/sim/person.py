"""A scripted person in the simulated cell (issue 38): where it reaches in, and the tracked
skeleton a tracker would report. The part it reaches with is solid in the simulation, with
the compliance of its ISO/TS 15066 body region (core/sim/body_parts.py).

The skeleton (COCO-17, core/contact/proximity.py): the person reaches in with the right arm,
straight along `reach`, the part of `region` centred at `position`; the rest of the body
stands behind the shoulder, upright. Only the reaching arm's regions are supported (hand,
lower arm, upper arm); the other parts are tracked, not solid: a scenario keeps the arm away
from them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contact_estimation.core.contact.proximity import COCO_17

PERSON_PREFIX = 'person/'

# Segment lengths (m) of an adult's arm, and where along it each region's part is centred
# (m from the shoulder). The hand is the proximity monitor's: beyond the wrist over 0.4 of
# the forearm (core/contact/proximity.py `_arm`).
UPPER_ARM, FOREARM = 0.30, 0.26
REACHING_REGIONS = {'upper_arm_elbow': UPPER_ARM / 2,
                    'lower_arm_wrist': UPPER_ARM + FOREARM / 2,
                    'hand_fingers': UPPER_ARM + 1.2 * FOREARM}
# The proximity monitor's body part (core/contact/proximity.py DEFAULT_PARTS) of each region.
TRACKED_PARTS = {'upper_arm_elbow': 'right_upper_arm', 'lower_arm_wrist': 'right_forearm',
                 'hand_fingers': 'right_hand'}
SHOULDER_WIDTH, NECK, HEAD, TRUNK, THIGH, SHIN = 0.38, 0.22, 0.08, 0.5, 0.45, 0.45


@dataclass(frozen=True)
class ScriptedPerson:
    """A person reaching into the cell with the right arm (module doc): the part of `region`
    (a key of REACHING_REGIONS) centred at `position` (base frame, m), a sphere of `radius`
    (m), the arm straight along the unit vector `reach` (shoulder → hand)."""

    name: str
    region: str
    position: np.ndarray
    reach: np.ndarray
    radius: float = 0.05

    def __post_init__(self):
        if self.region not in REACHING_REGIONS:
            raise ValueError(f'person {self.name!r}: region {self.region!r} is not one of the '
                             f'reaching arm\'s ({", ".join(REACHING_REGIONS)})')
        reach = np.asarray(self.reach, dtype=float)
        if reach.shape != (3,) or not np.all(np.isfinite(reach)) or np.linalg.norm(reach) < 1e-6:
            raise ValueError(f'person {self.name!r}: reach must be 3 finite numbers, not all 0')
        if abs(reach[2]) > 0.95 * np.linalg.norm(reach):
            raise ValueError(f'person {self.name!r}: reach {reach.tolist()} is (near) vertical: '
                             'a standing person reaches forward')
        if not 0.0 < self.radius <= 0.3:
            raise ValueError(f'person {self.name!r}: radius must be in (0, 0.3] m')
        object.__setattr__(self, 'reach', reach / np.linalg.norm(reach))

    @property
    def part(self) -> str:
        """The proximity monitor's body part that holds `position`."""
        return TRACKED_PARTS[self.region]

    def keypoints(self) -> np.ndarray:
        """The COCO-17 keypoints (17 × 3, base frame, COCO_17 order) of the person."""
        u = self.reach
        right = np.cross(u, (0.0, 0.0, 1.0))
        right /= np.linalg.norm(right)
        forward = np.cross((0.0, 0.0, 1.0), right)   # horizontal, the way the person faces
        up = np.array([0.0, 0.0, 1.0])
        shoulder = self.position - REACHING_REGIONS[self.region] * u
        left_shoulder = shoulder - SHOULDER_WIDTH * right
        centre = (shoulder + left_shoulder) / 2
        head = centre + NECK * up
        hip, left_hip = shoulder - TRUNK * up, left_shoulder - TRUNK * up
        points = {
            'nose': head + HEAD * forward, 'left_eye': head + HEAD * forward - 0.03 * right,
            'right_eye': head + HEAD * forward + 0.03 * right,
            'left_ear': head - HEAD * right, 'right_ear': head + HEAD * right,
            'left_shoulder': left_shoulder, 'right_shoulder': shoulder,
            'left_elbow': left_shoulder - UPPER_ARM * up,
            'right_elbow': shoulder + UPPER_ARM * u,
            'left_wrist': left_shoulder - (UPPER_ARM + FOREARM) * up,
            'right_wrist': shoulder + (UPPER_ARM + FOREARM) * u,
            'left_hip': left_hip, 'right_hip': hip,
            'left_knee': left_hip - THIGH * up, 'right_knee': hip - THIGH * up,
            'left_ankle': left_hip - (THIGH + SHIN) * up, 'right_ankle': hip - (THIGH + SHIN) * up,
        }
        return np.array([points[name] for name in COCO_17])
