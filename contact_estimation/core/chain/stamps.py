"""Is a stamp believable on this node's clock? The one check every input of the suite passes.

A stamp decides which samples pair, which input is fresh and how far time moved. One message
stamped in 2038 (a driver whose clock jumped, a replay, a malicious publisher) must therefore
never be believed: it would become the newest time (nothing after it is fresh: outputs stop
for good; a fail-safe that waits for something newer never fires; a buffer trimmed by age
keeps everything; a residual takes it as a new time base). A stamp is refused when it is not
positive and finite, or more than `max_future` ahead of the node's clock (clocks of one
machine or of PTP/NTP-synchronised machines differ by far less). The clock is the node's
(simulated time when use_sim_time is on).

Stamps behind the clock are not refused here: the listener accepts a driver whose clock is
behind (a restarted simulator, an unsynchronised controller: core/chain/joint_state_conditioning.py
takes a new time base), so the nodes downstream must too. An old stamp makes its input stale
by every node's own rule (timeouts, body_timeout, stamp pairing), and stale input stops.
"""
from __future__ import annotations

import math

ZERO_STAMP, FUTURE_STAMP = 'zero_stamp', 'future_stamp'

MAX_FUTURE = 1.0   # s ahead of the node's clock (the listener's max_future default)


def stamp_problem(t: float, now: float, max_future: float = MAX_FUTURE) -> tuple[str, str] | None:
    """None when the stamp `t` (s) is believable at `now` (s, the node's clock), else
    (kind, why): ZERO_STAMP or FUTURE_STAMP."""
    if not (math.isfinite(t) and t > 0.0):
        return ZERO_STAMP, f'stamped {t} s: the sender sets no time'
    if t > now + max_future:
        return FUTURE_STAMP, (f'stamp {t:.6f} s is {t - now:.3f} s ahead of this node\'s clock '
                              f'(max_future {max_future:g} s): is the sender\'s clock '
                              'synchronised?')
    return None
