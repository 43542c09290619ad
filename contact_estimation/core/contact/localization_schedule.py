"""When the contact localizer node estimates. No ROS.

An estimate (core/contact/contact_localization.py) costs milliseconds, the residual comes at up to
1 kHz, and the machine also runs the 1 kHz detection chain. So the node estimates
- only while a contact is present: some |τ_ext,i| over its gate ψ_i (by default the
  detector's position thresholds, seed 001 eq. 7 without its n samples in a row: an estimate
  raises no stop, and a person guiding the arm by hand, which raises none, gets estimates);
- at most `max_rate` times a second of sample stamps: the first sample at least 1/max_rate
  after the previous estimate's, so that a replay of the same samples estimates on the same
  ones (issue 26); and an estimate that took d s of CPU moves the next one at least d later,
  so a machine slower than an estimate gets fewer estimates (it degrades by rate), never a
  queue of work, and estimates take at most about half a core.

`ScheduleConfig` holds the schedule's settings (the node's rows feed it); ContactLocalizer's
are core/contact/contact_localization.LocalizerConfig, the cloud's and the lidar pose's come
from ros/sensor_frames.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contact_estimation.core.chain import detector
from contact_estimation.core.compiled import kernel
from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.settings import checked, setting


@dataclass(frozen=True)
@checked
class ScheduleConfig:
    """When to localize (the contact localizer's settings). max_rate: 20 estimates of ~10 ms
    use 20 % of a core during a contact; a 1e308 gate threshold (never an estimate) is
    refused unless threshold_ceiling is raised."""

    gate_thresholds: tuple = setting(
        (float(detector.DEFAULTS.thresholds_position),), 'estimate while some |τ_ext,i| '
        "exceeds this, N·m (default: the detector's ψ_0)", range=detector.TORQUE_THRESHOLDS,
        per_joint=1)
    max_rate: float = setting(20.0, 'most estimates per second, Hz (each costs ms of CPU)',
                              range=(0.1, 1000.0))
    threshold_ceiling: float = setting(
        detector.DEFAULTS.threshold_ceiling, 'N·m: gate thresholds above this are refused '
        '(they would never let an estimate through); raise it explicitly for a stronger arm',
        range=(1.0, 1e4))


class LocalizationSchedule:
    """`due(t, τ)`: a contact is present in the sample stamped `t` (s) and the rate allows an
    estimate (`open`: whether a contact was present, whatever the rate); `finished(t, took)`
    after the estimate on it, which took `took` s of CPU."""

    def __init__(self, config: ScheduleConfig, n_joints: int):
        self.thresholds = np.ascontiguousarray(per_joint(
            'gate_thresholds', config.gate_thresholds, n_joints, unit=' N·m',
            high=config.threshold_ceiling, high_name='threshold_ceiling'), dtype=float)
        self.interval = 1.0 / config.max_rate
        self._next = -np.inf
        self.open = False
        self.contact(np.zeros(n_joints))  # numba compiles (or loads its cache) here

    def contact(self, tau: np.ndarray) -> bool:
        """Some |τ_ext,i| exceeds its gate ψ_i (ValueError for another number of joints)."""
        return _over_gate(tau, self.thresholds)

    def due(self, t: float, tau: np.ndarray) -> bool:
        if t < self._next - self.interval - 1.0:  # the stamps went back (a new time base)
            self._next = -np.inf
        self.open = self.contact(tau)
        return self.open and t >= self._next

    def finished(self, t: float, took: float = 0.0) -> None:
        self._next = t + max(self.interval, took)


@kernel
def _over_gate(tau, thresholds):
    """np.any(np.abs(tau) > thresholds), one joint at a time (a sample each ms: numpy's
    calls cost 10 times the comparisons); NaN is over no gate, as in numpy."""
    if tau.shape[0] != thresholds.shape[0]:
        raise ValueError('τ_ext and the gate thresholds have different numbers of joints')
    for i in range(tau.shape[0]):
        if abs(tau[i]) > thresholds[i]:
            return True
    return False
