"""The rate of the samples a node handles, measured on their stamps: on /diagnostics every
`RATE_PERIOD` s, and logged with what the node's time settings mean at that rate
(core/chain/rate_statistics.timing_report) when first known and when it changes by more
than `RATE_CHANGE`. Every time setting is in seconds, the same at 1 kHz and at a real
driver's ~100 Hz; this says what they come to in samples, and warns when one is too short.
The time settings are the rows of the node's table with a `timing` (ros/params.py).
"""
from __future__ import annotations

from typing import Callable, Iterable

from contact_estimation.core.chain.rate_statistics import StepStatistics, timing_report

RATE_PERIOD = 1.0   # s between measurements
RATE_CHANGE = 0.25  # a rate this much off the last logged one is logged again
_MIN_STEPS = 10     # steps in a period for a measurement


class InputRateLog:
    """`add_batch(samples)` for the samples handled (their stamps). The time settings in
    force are the timed rows of `node.PARAMETERS` (a SuiteNode's) but those `unused()` names,
    and the `derived()` durations by name (s) that no parameter gives. The last report is
    also on /diagnostics (`time_settings`)."""

    def __init__(self, node, unused: Callable[[], Iterable[str]] = tuple,
                 derived: Callable[[], dict[str, float]] = dict):
        self._node, self._unused, self._derived = node, unused, derived
        self._steps = StepStatistics()
        self._logged_rate: float | None = None
        node.create_timer(RATE_PERIOD, self._measure)

    def add_batch(self, samples) -> None:
        """The stamp of each of `samples` (JointSample), handled."""
        for sample in samples:
            self._steps.add(sample.t)

    def _measure(self) -> None:
        rate = self._steps.take(minimum=_MIN_STEPS)
        if rate is None:
            return
        problems = self._node.problems
        problems.values.update(rate.values())
        if self._logged_rate and abs(rate.rate / self._logged_rate - 1.0) <= RATE_CHANGE:
            return
        self._logged_rate = rate.rate
        windows, timeouts, durations = self._node.PARAMETERS.time_settings(
            self._node.values(), self._unused())
        line, warnings = timing_report(rate, windows, timeouts,
                                       {**durations, **self._derived()})
        problems.values['time_settings'] = line
        logger = self._node.get_logger()
        logger.info(f'{line} (every time setting is in seconds: nothing to retune for the '
                    'rate)')
        for warning in warnings:
            logger.warning(warning)
