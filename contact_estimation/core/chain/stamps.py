"""Is a stamp believable on this node's clock? The one check every input of the suite passes.

A stamp decides which samples pair, which input is fresh and how far time moved. One message
stamped in 2038 (a driver whose clock jumped, a replay, a malicious publisher) must therefore
never be believed: it would become the newest time (nothing after it is fresh: outputs stop
for good; a fail-safe that waits for something newer never fires; a buffer trimmed by age
keeps everything; a residual takes it as a new time base). A stamp is refused when it is not
positive and finite, or more than `max_future` ahead of the node's clock (clocks of one
machine or of PTP/NTP-synchronised machines differ by far less). The clock is the node's
(simulated time when use_sim_time is on).

A stamp more than `max_past` behind the clock is refused the same way (issue 27): it was sent
long ago (a log played into the live graph, a clock set to 1970), and believed it would feed
a watchdog with samples that say nothing about now. Within that bound a constant offset
between the sender's clock and the node's is allowed; how late a node decides on a sample
beyond it is core/chain/lag.py's `behind`.
"""
from __future__ import annotations

import math

ZERO_STAMP, FUTURE_STAMP, PAST_STAMP = 'zero_stamp', 'future_stamp', 'past_stamp'

MAX_FUTURE = 1.0   # s ahead of the node's clock (the listener's max_future default)
MAX_PAST = 1.0     # s behind it (the listener's max_past default)


def stamp_problem(t: float, now: float, max_future: float = MAX_FUTURE,
                  max_past: float = MAX_PAST) -> tuple[str, str] | None:
    """None when the stamp `t` (s) is believable at `now` (s, the node's clock), else
    (kind, why): ZERO_STAMP, FUTURE_STAMP or PAST_STAMP."""
    if not (math.isfinite(t) and t > 0.0):
        return ZERO_STAMP, f'stamped {t} s: the sender sets no time'
    if t > now + max_future:
        return FUTURE_STAMP, (f'stamp {t:.6f} s is {t - now:.3f} s ahead of this node\'s clock '
                              f'(max_future {max_future:g} s): is the sender\'s clock '
                              'synchronised?')
    if t < now - max_past:
        return PAST_STAMP, (f'stamp {t:.6f} s is {now - t:.3f} s behind this node\'s clock '
                            f'(max_past {max_past:g} s): sent long ago, or the sender\'s clock '
                            'is not synchronised')
    return None


NS_PER_S = 1_000_000_000


def nanoseconds(sec: int, nanosec: int) -> int:
    """A header stamp's sec and nanosec (rclpy's, a bag reader's, raw CDR's) as whole ns: the
    exact key the bags and the replay order and pair messages by."""
    return sec * NS_PER_S + nanosec


def sec_nanosec(ns: int) -> tuple[int, int]:
    """Whole ns as a header stamp's (sec, nanosec)."""
    return ns // NS_PER_S, ns % NS_PER_S
