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

A stamp more than `max_offset` behind the node's clock is refused outright (`past_stamp`),
as core/chain/stamps.py refuses one ahead of it: such a sample was sent long ago (a replayed
log, a clock set to 1970) and must never feed a watchdog.
"""
from __future__ import annotations

import math
from collections import deque

PAST_STAMP, BEHIND = 'past_stamp', 'behind'
ROBUST_SAMPLES = 3
MAX_LAG = 0.02      # s: the detector's default (issue 26)
MAX_OFFSET = 1.0    # s: the listener's default max_future, the other way
DRIFT = 1e-4        # s per s that the learned offset may rise


class ClockLag:
    """`update(now, t)`: the lag (s) of the sample stamped `t` decided on at `now`, both on
    the node's clock (ROS time); `past(now, t)` says why a stamp is too old, or None."""

    def __init__(self, max_lag: float = MAX_LAG, max_offset: float = MAX_OFFSET,
                 drift: float = DRIFT):
        if not (max_lag > 0 and max_offset > 0 and drift >= 0):
            raise ValueError(f'max_lag {max_lag}, max_offset {max_offset}, drift {drift}: '
                             'must be > 0, > 0 and >= 0')
        self.max_lag, self.max_offset, self.drift = max_lag, max_offset, drift
        self.offset: float | None = None
        self.lag = 0.0
        self._recent: deque = deque(maxlen=ROBUST_SAMPLES)
        self._last_now = -math.inf

    def past(self, now: float, t: float) -> str | None:
        """Why the stamp `t` is too far behind `now` to believe, or None."""
        if now - t > self.max_offset:
            return (f'stamp {t:.6f} s is {now - t:.3f} s behind this node\'s clock (more than '
                    f'{self.max_offset:g} s): sent long ago, or the sender\'s clock is not '
                    'synchronised')
        return None

    def update(self, now: float, t: float) -> float:
        """The lag of this sample (s, >= 0); learns the offset (module docstring)."""
        delay = now - t
        self._recent.append(delay)
        if self.offset is None:
            self.offset = delay
        else:
            rise = self.drift * max(now - self._last_now, 0.0)
            self.offset = min(max(self._recent), self.offset + rise)
        self._last_now = now
        self.lag = max(delay - self.offset, 0.0)
        return self.lag

    def behind(self) -> bool:
        """The last sample's lag exceeded max_lag."""
        return self.lag > self.max_lag

    def reason(self, t: float) -> str:
        return (f'the sample stamped {t:.6f} s was decided on {self.lag * 1e3:.1f} ms late '
                f'(beyond the {self.offset * 1e3:.1f} ms clock offset; max_lag '
                f'{self.max_lag * 1e3:g} ms): this node is behind its input')

    def restart(self) -> None:
        """Forget the offset (the sender's time base changed)."""
        self.offset = None
        self._recent.clear()
