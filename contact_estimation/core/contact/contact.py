"""A contact on the arm, as every estimator and the simulator's ground truth report it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Contact:
    """One contacted link: `point` and `force` (on the robot) in the link's frame."""

    link: str
    point: np.ndarray
    force: np.ndarray


@dataclass(frozen=True)
class ContactError:
    """How far an estimate is from the truth: the link right or not, and on the right link
    the point error (m), the force magnitude error (share of the true force) and the angle
    between the forces (rad); NaN on a wrong link."""

    right_link: bool
    point: float
    force: float
    direction: float


def contact_error(estimate: Contact, truth: Contact) -> ContactError:
    """The error of `estimate` against `truth` (both in the link's frame)."""
    if estimate.link != truth.link:
        return ContactError(False, np.nan, np.nan, np.nan)
    true_size, size = np.linalg.norm(truth.force), np.linalg.norm(estimate.force)
    cosine = estimate.force @ truth.force / max(true_size * size, 1e-12)
    return ContactError(True, float(np.linalg.norm(estimate.point - truth.point)),
                        float(abs(size - true_size) / max(true_size, 1e-12)),
                        float(np.arccos(np.clip(cosine, -1.0, 1.0))))
