"""How fast and how evenly a node's samples come, measured on their stamps, no ROS.

`StepStatistics` sums the steps up per period into an `InputRate`; `timing_report` says what
the node's time settings come to at that rate (ros/input_rate.py logs it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contact_estimation.core.chain.derivatives import DerivativeEstimator


@dataclass(frozen=True)
class InputRate:
    """How fast and how evenly samples came over a period: what the time settings mean."""

    rate: float            # Hz, 1 / the median step
    step_min: float        # s
    step_max: float        # s
    irregular: int         # steps more than 50 % off the median (jitter, a lost message)
    steps: int

    def periods(self, seconds: float) -> float:
        """`seconds` in input periods at this rate."""
        return seconds * self.rate

    def describe(self) -> str:
        return (f'{self.rate:.4g} Hz (steps {1e3 * self.step_min:.1f}–{1e3 * self.step_max:.1f} '
                f'ms, {self.irregular} of {self.steps} more than 50 % off the median)')

    def values(self) -> dict[str, str]:
        """For /diagnostics."""
        return {'input_rate_hz': f'{self.rate:.1f}',
                'input_step_min_ms': f'{1e3 * self.step_min:.2f}',
                'input_step_max_ms': f'{1e3 * self.step_max:.2f}',
                'input_steps_irregular': str(self.irregular)}


def timing_report(rate: InputRate, windows: dict[str, float], timeouts: dict[str, float],
                  durations: dict[str, float] | None = None,
                  min_periods: float = 3.0) -> tuple[str, list[str]]:
    """What the time settings (name → s) mean at the measured `rate`: one line, and a warning
    for each of the `timeouts` shorter than `min_periods` input periods (one late message
    would then trip it). `windows` are DerivativeEstimator durations (at least 3 samples);
    `durations` any other time, said in periods."""
    minimum = DerivativeEstimator.DEGREE + 1
    parts = [f'{name} {seconds:g} s ≈ {max(minimum, int(rate.periods(seconds)) + 1)} samples'
             for name, seconds in windows.items()]
    parts += [f'{name} {seconds:g} s = {rate.periods(seconds):.3g} periods'
              for name, seconds in {**timeouts, **(durations or {})}.items()]
    warnings = [f'{name} {seconds:g} s is only {rate.periods(seconds):.2g} periods at '
                f'{rate.rate:.3g} Hz: raise it to at least {min_periods / rate.rate:.3g} s'
                for name, seconds in timeouts.items() if rate.periods(seconds) < min_periods]
    return f'input at {rate.describe()}: {", ".join(parts)}', warnings


class StepStatistics:
    """Steps between the stamps of the samples a node handles, summed up per period."""

    def __init__(self):
        self._last: float | None = None
        self._steps: list[float] = []

    def add(self, t: float) -> None:
        if self._last is not None and t > self._last:
            self._steps.append(t - self._last)
        self._last = t

    def take(self, minimum: int = 2) -> InputRate | None:
        """The period's `InputRate` (None with fewer than `minimum` steps); starts a new one."""
        steps, self._steps = np.asarray(self._steps), []
        if steps.size < max(minimum, 1):
            return None
        median = float(np.median(steps))
        return InputRate(1.0 / median, float(steps.min()), float(steps.max()),
                         int(np.count_nonzero(np.abs(steps - median) > 0.5 * median)), steps.size)
