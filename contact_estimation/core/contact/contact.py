"""A contact on the arm, as every estimator reports it and the simulator's ground truth gives it.

`Contact` is the one contact type: what the nodes publish (ros/contact_messages.py) and what
the benchmarks score. `ContactEstimate` is a localizer's whole answer: the contact, when it
found one, and the evidence for it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Where the point of an estimate came from (`ContactEstimate.source`; a fused estimate names
# its sensors instead).
SOURCE_TORQUE = 'torque'                  # the torques alone
SOURCE_TORQUE_LIDAR = 'torque+lidar'      # the torques, the link (and a prior point) from the cloud
SOURCE_LIDAR_FALLBACK = 'lidar fallback'  # the torques explain no surface point: point from the
#                                           cloud, force from the torques (seed 000, end of §4)
SOURCE_NONE = 'none'                      # no contact, or no point


@dataclass(frozen=True)
class Contact:
    """One contacted link: `point` and `force` (on the robot) in the link's frame, and the same
    in the base frame where the estimator knows them. `ambiguous_with`: other links that
    explain the data about as well (the estimate cannot tell them apart)."""

    link: str
    point: np.ndarray
    force: np.ndarray
    point_base: np.ndarray | None = None
    force_base: np.ndarray | None = None
    ambiguous_with: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContactEstimate:
    """A localizer's answer: the `contact` (None when no point was found) and its evidence.

    `link_range` is the links of joints k_min … k_max (seed 000 eq. 13), None without a
    contact. `candidates` are the points (base frame, K×3) on `candidate_links` that explain
    the data within the noise (more than one: the data alone cannot tell them apart).
    `residual` is ‖τ − J(p)ᵀF‖ over all joints (N·m; without torques the base moment's
    ‖m − p × F‖); `consistent` is False when no single point contact explains the data.
    A fused estimate (core/contact/fused_contact.py) names the `sensors` it used in `source`,
    and gives `chi2`, the weighted squared residual of the `equations` it used.
    """

    contact: Contact | None
    link_range: tuple[str, str] | None
    source: str
    residual: float
    consistent: bool
    candidates: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    candidate_links: list[str] = field(default_factory=list)
    message: str = ''
    sensors: tuple[str, ...] = ()
    chi2: float = 0.0
    equations: int = 0

    @property
    def found(self) -> bool:
        """A point and a force are known."""
        return self.contact is not None

    @property
    def ambiguous(self) -> bool:
        """More than one link explains the data within the noise."""
        return len(set(self.candidate_links)) > 1


def no_contact() -> ContactEstimate:
    """The estimate when no joint torque reaches δ_τ."""
    return ContactEstimate(None, None, SOURCE_NONE, 0.0, True,
                           message='no joint torque reaches delta_tau')


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
