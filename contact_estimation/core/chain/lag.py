"""How late a node decides on a sample: its clock minus the sample's stamp, less the offset
between the sender's clock and the node's. No ROS.

A node that raises a stop must know when it has fallen behind its input (issue 26): a
backlog of samples queued while it was busy or paused makes every decision late by the
backlog's depth, and a stop that comes a second after its contact is a safety fault even
though every sample still arrives. So each decision measures

    d_k = now_k − t_k          (node clock at the decision − the sample's stamp, s)
    lag_k = d_k − offset_k     (what the sample waited beyond the clocks' offset)

and the node stops with the reason `behind` when lag_k > `max_lag`.

A constant offset between two clocks (a driver on another host whose clock is 50 ms off,
a driver that stamps on its own cycle) is not lag: `offset` is the smallest delay seen, so a
sample that waits no longer than the quickest one has lag 0. It is learned from the samples
themselves:
- down at once, to the largest d of the last `ROBUST_SAMPLES` samples (one sample stamped
  late by jitter, or a single hostile stamp, cannot move it);
- up at most `drift` s per s (clock drift between synchronised hosts is far less than
  1e-4 = 100 ppm), so a backlog that builds up is never learned as an offset.

Only the node's own share of a lag is `behind` (issue 36): a sample that reached the node
late, because its input paused (a driver stopped for a moment, a process upstream paused),
was not kept waiting by the node. A node that knows when it last found nothing waiting
(`looked`: it took every message queued then) bounds its own share of any later sample's
wait by the time since; the rest was the input's: `LATE_INPUT`, which a node reports as its
stale input. And stamps that go back (a driver restarted with an older time base, a clock
stepped back: its samples look late by the step, and would for step / drift seconds) are
no lag at all: `BAD_STAMP`, named once, and the offset is learned anew from the new base.

A stamp far behind the node's clock (more than `max_past`, 1 s) never gets here:
core/chain/stamps.py refuses it as `past_stamp`, as one ahead of the clock, so the offset
learned is at most that.

A node that woke late takes its whole backlog as one batch (issue 35) and decides on every
sample of it at once: `check_batch` measures the batch's lag on its oldest sample (the one
that waited longest) and learns the offset from its newest (the one that waited least), so
a backlog is caught up, not stopped on, unless its oldest sample waited beyond `max_lag`.
`max_lag` is then a budget: a stop is never later than the replay's by more than it.
`LagStatistics` keeps p50, p99 and max since start for /diagnostics, so that a user sees
how close to its budget the node runs before it ever stops.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from contact_estimation.core.settings import checked, setting

# Why a sample's lag is over max_lag (`ClockLag.cause`): this node is late; its input came
# late (the node's own share is within max_lag); the stamps went back.
BEHIND, LATE_INPUT, BAD_STAMP = 'behind', 'late_input', 'bad_stamp'
ROBUST_SAMPLES = 3
# s: the one default of `max_lag`, for the collision detector and the proximity monitor alike.
# - The detector (issue 35): a budget no scheduling hiccup reaches. With the chain at
#   SCHED_FIFO 40 beside a second job burning a core, its batches' lag was p99 0.2 ms, max
#   11 ms (benchmarks/end_to_end.py --second-job); at 20 ms ordinary hiccups on a loaded 2-core
#   machine stopped the arm every few seconds. It stays under the input timeout (0.1 s) and
#   the heartbeat's 150 ms: a stop is never later than the replay's by more than this.
# - The proximity monitor adds it to the reaction time, so it is a trade-off there: 100 ms
#   would grow the protective distance by 16 cm more at 1.6 m/s, and then a person standing
#   at a table in the soak's cell was always too near. Measured (benchmarks/proximity_load.py,
#   2 min, 2-core Xeon, chain at SCHED_FIFO 40, a second job burning a core): with the 10 Hz
#   43 000-point cloud the check's lateness is p50 0.1 / p99 72 / max 950 ms (17 `behind`
#   stops); without it p99 1.2 ms: the cloud worker's open3d/numpy calls, which hold the
#   interpreter in that process, delay the check, not the scheduler. No budget short enough
#   for the protective distance covers that, so it stays 50 ms until the cloud work leaves.
MAX_LAG = 0.05
# s: max_lag of the collision detector and the proximity monitor on the simulated cobot's
# clock (`up --sim`, the demo), which is up to lockstep.lead (20 ms) plus its tick (sim_cobot
# CLOCK_PERIOD, 5 ms) ahead of or behind the samples by design: not the node behind. (Until
# issue 37 it ticked once per batch of up to max_catch_up, 50 ms: a spread of 100 ms and more
# between a batch's stamps and the clock, `stale_input` stops on a loaded machine; now 100 ms
# is twice the spread.) The proximity monitor's checks came 55-67 ms late on that clock on
# the loaded 2-core machine: at 50 ms a `behind` stop braked the simulated arm in one step,
# and the detector took the jolt for an impact before the demo's touch (issue 37). Its
# protective distance grows with it (the reaction time includes max_lag), so it stays
# consistent. launcher.simulated_clock sets it and says so at start.
SIMULATED_MAX_LAG = 0.1
DRIFT = 1e-4        # s per s that the learned offset may rise


@dataclass(frozen=True)
@checked
class LagBudget:
    """`max_lag`, declared once for the nodes that raise a stop (the collision detector and
    the proximity monitor: rows(LagBudget) in each table) and given to their ClockLag and
    CheckLateness."""

    max_lag: float = setting(
        MAX_LAG, "a decision later than this after its sample's stamp (beyond the constant "
        "offset between the driver's clock and this node's, learned), or a check later than "
        "this after it was due → stop with the cause 'behind' (this node is late); in the "
        'proximity monitor also: the latest joint state older than this at a check → stop, '
        "'stale' (the input stopped), and it is added to reaction_time (a body may come that "
        'much nearer), s', range=(0.001, 1.0))


class ClockLag:
    """`update(now, t)`: the lag (s) of the sample stamped `t` decided on at `now`, both on
    the node's clock (ROS time); `went_back`: how much older (s) that sample's stamp is than
    the newest before it, 0 if it is not (a new time base: the offset is learned anew)."""

    def __init__(self, max_lag: float = MAX_LAG, drift: float = DRIFT):
        if not (max_lag > 0 and drift >= 0):
            raise ValueError(f'max_lag {max_lag} s, drift {drift}: must be > 0 and >= 0')
        self.max_lag, self.drift = max_lag, drift
        self.offset: float | None = None
        self.lag = 0.0
        self._recent: deque = deque(maxlen=ROBUST_SAMPLES)
        self._last_now = -math.inf
        self._newest = -math.inf            # the newest stamp seen
        self.went_back = 0.0
        self.cause = ''                     # why the last check was over max_lag ('' if not)
        self.statistics = LagStatistics()

    def update(self, now: float, t: float) -> float:
        """The lag of this sample (s, >= 0); learns the offset (module docstring)."""
        delay = now - t
        self.went_back = max(self._newest - t, 0.0)
        if self.went_back:
            self.offset = None
            self._recent.clear()
        self._newest = t
        self._recent.append(delay)
        if self.offset is None:
            self.offset = delay
        else:
            rise = self.drift * max(now - self._last_now, 0.0)
            self.offset = min(max(self._recent), self.offset + rise)
        self._last_now = now
        self.lag = max(delay - self.offset, 0.0)
        return self.lag

    def went_back_reason(self, t: float) -> str:
        """Why the sample stamped `t` is BAD_STAMP (`went_back` > 0)."""
        return (f'the stamps went back {self.went_back * 1e3:.1f} ms (to {t:.6f} s): '
                'a restarted driver or a clock stepped back; the clock offset is learned anew')

    def check(self, now: float, t: float) -> str:
        """`update`, then '' when the sample is in time, else why the node is behind."""
        return self.check_batch(now, t, t)

    def check_batch(self, now: float, oldest: float, newest: float,
                    looked: float = -math.inf) -> str:
        """The lag of a batch of samples stamped `oldest` … `newest`, all decided on at `now`:
        the offset learned from the newest, the lag that of the oldest, this node's share of
        it at most `now − looked` (module docstring); '' when it is within `max_lag`, else
        why not, with `cause` BEHIND, LATE_INPUT or BAD_STAMP."""
        self.update(now, newest)
        if self.went_back:
            self.lag, self.cause = 0.0, BAD_STAMP
            return self.went_back_reason(newest)
        waited = max(now - oldest - self.offset, 0.0)
        self.lag = min(waited, max(now - looked, 0.0))
        self.statistics.add(self.lag)
        self.cause = (BEHIND if self.lag > self.max_lag
                      else LATE_INPUT if waited > self.max_lag else '')
        if self.cause == BEHIND:
            return (f'the sample stamped {oldest:.6f} s was decided on {self.lag * 1e3:.1f} ms '
                    f'late (beyond the {self.offset * 1e3:.1f} ms clock offset; max_lag '
                    f'{self.max_lag * 1e3:g} ms): this node is behind its input')
        if self.cause == LATE_INPUT:
            return (f'the sample stamped {oldest:.6f} s arrived {waited * 1e3:.1f} ms after '
                    f'it (beyond the {self.offset * 1e3:.1f} ms clock offset; max_lag '
                    f'{self.max_lag * 1e3:g} ms), though this node was watching: its input '
                    'paused')
        return ''


class LagStatistics:
    """p50, p99 and max of the lags `add`ed since start, in fixed memory: a histogram of
    BIN-wide bins up to LIMIT (a lag beyond it counts in the last bin; the max is exact)."""

    BIN = 1e-4    # s
    LIMIT = 1.0   # s

    def __init__(self):
        self._counts = np.zeros(int(round(self.LIMIT / self.BIN)) + 1, dtype=np.int64)
        self.count = 0
        self.max = 0.0

    def add(self, lag: float) -> None:
        self._counts[min(int(lag / self.BIN), self._counts.size - 1)] += 1
        self.count += 1
        self.max = max(self.max, lag)

    def percentile(self, p: float) -> float:
        """The lag (s, to BIN) that p % of those added are at or under; 0 before any."""
        return self._percentiles((p,))[0]

    def _percentiles(self, ps: tuple[float, ...]) -> list[float]:
        """`percentile` of each of `ps`, on one cumulative count (10 001 bins)."""
        if not self.count:
            return [0.0] * len(ps)
        ranks = np.searchsorted(np.cumsum(self._counts), np.array(ps) / 100.0 * self.count)
        return [min((int(rank) + 1) * self.BIN, self.max) for rank in ranks]

    def summary(self) -> str:
        """'p50 / p99 / max' in ms, for /diagnostics ('none yet' before any)."""
        if not self.count:
            return 'none yet'
        p50, p99 = self._percentiles((50, 99))
        return f'{p50 * 1e3:.1f} / {p99 * 1e3:.1f} / {self.max * 1e3:.1f} ms'
