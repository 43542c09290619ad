"""How late a periodic check decides: the time between two decisions beyond the check's
period. No ROS.

A node that decides at its own pace on the newest sample (the proximity monitor's check, on
the latest joint state) is late when its process was not scheduled, was paused or waited
for the interpreter lock: then the arm went that much longer unchecked. What the input does
is a separate question (issue 35): a chain that stops writing samples leaves the newest one
aging (stale input), while a node that wakes late finds the samples that came meanwhile and
decides on the newest, fresh one (it catches up), but it decided late. So the node's own
lateness is measured on its own clock, from its decisions, never from the samples' stamps:

    lag_k = max(now_k − now_{k−1} − period, 0)     (s; 0 for the first decision)

and the node is behind when lag_k > `max_lag`. A decision that comes early (a timer that
keeps its phase fires sooner after a late one, a reset that checks at once) has lag 0.
`statistics` (core/chain/lag.LagStatistics) keeps p50, p99 and max for /diagnostics.
"""
from __future__ import annotations

from contact_estimation.core.chain.lag import LagStatistics


class CheckLateness:
    """`check(now)` at every decision, `now` on the clock of the node's timer (s)."""

    def __init__(self, period: float, max_lag: float):
        if not (period > 0 and max_lag > 0):
            raise ValueError(f'period {period} s, max_lag {max_lag} s: must be > 0')
        self.period, self.max_lag = period, max_lag
        self.lag = 0.0
        self.statistics = LagStatistics()
        self._last: float | None = None

    def check(self, now: float) -> str:
        """Record a decision at `now`: '' when it came within `max_lag` of when it was due,
        else why the node is behind."""
        if self._last is not None:
            self.lag = max(now - self._last - self.period, 0.0)
            self.statistics.add(self.lag)
        self._last = now
        if self.lag <= self.max_lag:
            return ''
        return (f'this check came {self.lag * 1e3:.1f} ms after it was due (max_lag '
                f'{self.max_lag * 1e3:g} ms): this node is behind')
