"""When the contact localizer node estimates. No ROS.

An estimate (core/contact/contact_localization.py) costs milliseconds, the residual comes at up to
1 kHz, and the machine also runs the 1 kHz detection chain. So the node estimates
- only while a contact is present: some |τ_ext,i| over its gate ψ_i (by default the
  detector's position thresholds, seed 001 eq. 7 without its n samples in a row: an estimate
  raises no stop, and a person guiding the arm by hand, which raises none, gets estimates);
- at most `max_rate` times a second, the interval counted from the end of the previous
  estimate: a machine slower than an estimate gets fewer estimates, never a queue of work,
  and estimates take at most d / (d + 1/max_rate) of a core (d: one estimate's time).

DEFAULTS are the node's own parameters; ContactLocalizer's come from its own defaults
(LOCALIZER_DEFAULTS), the cloud's and the lidar pose's from ros/sensor_frames.py.
"""
from __future__ import annotations

import inspect

import numpy as np

from contact_estimation.core.chain import detector
from contact_estimation.core.contact.contact_localization import ContactLocalizer
from contact_estimation.core.per_joint import per_joint

DEFAULTS = {
    'gate_thresholds': [float(detector.DEFAULTS['thresholds_position'])],  # N·m
    'max_rate': 20.0,         # Hz: 20 estimates of ~10 ms use 20 % of a core during a contact
    # N·m: a larger gate threshold (1e308: never an estimate) is refused unless raised.
    'threshold_ceiling': detector.DEFAULTS['threshold_ceiling'],
    'point_spacing': 0.02,    # m between the surface samples the localizer scores
}

# ContactLocalizer's keyword parameters at their defaults (mu, delta_tau, delta_w, ...).
LOCALIZER_DEFAULTS = {name: p.default for name, p in
                      inspect.signature(ContactLocalizer).parameters.items()
                      if p.default is not inspect.Parameter.empty}


class LocalizationSchedule:
    """`due(now, τ)`: a contact is present and the rate allows an estimate; `finished(now)`
    after each estimate. `now` is a monotonic clock (s): the limit guards the CPU."""

    def __init__(self, gate_thresholds, n_joints: int, max_rate: float,
                 threshold_ceiling: float = DEFAULTS['threshold_ceiling']):
        self.thresholds = per_joint('gate_thresholds', gate_thresholds, n_joints,
                                    low=0.0, strict=True, unit=' N·m', high=threshold_ceiling,
                                    high_name='threshold_ceiling')
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
