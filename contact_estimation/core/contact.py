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
