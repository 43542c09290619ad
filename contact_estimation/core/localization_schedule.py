"""When the contact localizer node estimates, and the arm's pose at a cloud's time. No ROS.

An estimate (core/contact_localization.py) costs milliseconds, the residual comes at up to
1 kHz, and the machine also runs the 1 kHz detection chain. So the node estimates
- only while a contact is present: some |τ_ext,i| over its gate ψ_i (by default the
  detector's position thresholds, seed 001 eq. 7 without its n samples in a row: an estimate
  raises no stop, and a person guiding the arm by hand, which raises none, gets estimates);
- at most `max_rate` times a second, the interval counted from the end of the previous
  estimate: a machine slower than an estimate gets fewer estimates, never a queue of work,
  and estimates take at most d / (d + 1/max_rate) of a core (d: one estimate's time).

A cloud is older than the residual it is used with; `PoseHistory` keeps the joint positions
of the last seconds so the cloud's own robot points are removed at the pose it saw.

DEFAULTS are the node's parameters; those of ContactLocalizer and CloudConfig come from
their own defaults (LOCALIZER_DEFAULTS, CLOUD_DEFAULTS).
"""
from __future__ import annotations

import dataclasses
import inspect
from collections import deque

import numpy as np

from contact_estimation.core import detector
from contact_estimation.core.contact_localization import ContactLocalizer
from contact_estimation.core.lidar_fusion import CloudConfig

DEFAULTS = {
    'gate_thresholds': [float(detector.DEFAULTS['thresholds_position'])],  # N·m
    'max_rate': 20.0,         # Hz: 20 estimates of ~10 ms use 20 % of a core during a contact
    'point_spacing': 0.02,    # m between the surface samples the localizer scores
    'lidar.frame': '',        # the sensor frame whose pose the two parameters below give
    'lidar.position': [0.0, 0.0, 0.0],         # m, in the base frame
    'lidar.orientation': [0.0, 0.0, 0.0, 1.0],  # quaternion x, y, z, w, in the base frame
}

# ContactLocalizer's keyword parameters at their defaults (mu, delta_tau, delta_w, ...).
LOCALIZER_DEFAULTS = {name: p.default for name, p in
                      inspect.signature(ContactLocalizer).parameters.items()
                      if p.default is not inspect.Parameter.empty}
# CloudConfig's fields at their defaults (workspace box, voxel size, max_age, ...).
CLOUD_DEFAULTS = dataclasses.asdict(CloudConfig())


class LocalizationSchedule:
    """`due(now, τ)`: a contact is present and the rate allows an estimate; `finished(now)`
    after each estimate. `now` is a monotonic clock (s): the limit guards the CPU."""

    def __init__(self, gate_thresholds, n_joints: int, max_rate: float):
        self.thresholds = detector.per_joint('gate_thresholds', gate_thresholds, n_joints,
                                             strict=True, unit=' N·m')
        if not np.isfinite(max_rate) or max_rate <= 0:
            raise ValueError(f'max_rate = {max_rate} Hz: must be > 0')
        self.interval = 1.0 / max_rate
        self._next = -np.inf

    def contact(self, tau: np.ndarray) -> bool:
        """Some |τ_ext,i| exceeds its gate ψ_i."""
        return bool(np.any(np.abs(tau) > self.thresholds))

    def due(self, now: float, tau: np.ndarray) -> bool:
        return now >= self._next and self.contact(tau)

    def finished(self, now: float) -> None:
        self._next = now + self.interval


class PoseHistory:
    """The joint positions of the last `span` seconds, by stamp (s)."""

    def __init__(self, span: float):
        self.span = span
        self._samples: deque[tuple[float, np.ndarray]] = deque()

    def add(self, t: float, q: np.ndarray) -> None:
        self._samples.append((t, q))
        while self._samples and self._samples[0][0] < t - self.span:
            self._samples.popleft()

    def at(self, t: float) -> np.ndarray | None:
        """The positions stamped nearest t; None when none is within `span` of it."""
        if not self._samples:
            return None
        stamp, q = min(self._samples, key=lambda sample: abs(sample[0] - t))
        return q if abs(stamp - t) <= self.span else None
