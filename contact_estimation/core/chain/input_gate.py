"""One input gate for the nodes that raise a stop (issue 39): what makes a stop fail safe,
judged in one order for the collision detector and the proximity monitor alike. No ROS.

A node feeds the gate what it knows of its input and of itself (`restarted`, `fault`,
`arrived`, `upstream`; the lag of its samples: `sample_lag` for samples decided on as they
come, `newest` for a check on the newest sample, `late` for a check that came late) and
asks it `judge(now)`. The verdict is the first of these that holds, with its reason:

    1. RESTARTED  the process was started again after it died (core/restart.py)
    2. FAULT      an unexpected error less than `fault_hold` s ago (ros/guard.py)
    3. WAITING    no input yet (or a watchdog upstream that has never seen it fresh)
    4. BAD_STAMP  at a check: the newest sample's stamp went back (a restarted driver, a
                  clock stepped back: core/chain/lag.py)
    5. STALE      the input stopped: an upstream watchdog says so, the newest sample at a
                  check is older than `max_lag` beyond the clocks' offset, nothing for
                  `input_timeout`, or another input the node needs is stale (`judge`'s `stale`)
    6. BEHIND     this node is late: it decided on samples (core/chain/lag.py) or ran its
                  check (core/contact/check_lateness.py) more than `max_lag` late

The input is judged before the node (issue 36: a node whose input paused is not `behind`).
A node that decides on every sample as it comes (the detector) gets the verdict on those
samples as it takes them: `arrived` (a gap longer than `input_timeout`: STALE) and the lag
of a batch (ClockLag.check_batch, unchanged: BAD_STAMP, LATE_INPUT = STALE, BEHIND), and
latches it before their evidence counts; `judge` then says what stands.

What a verdict does to the stop is each node's latch; the gate itself holds RESTARTED (until
`reset`) and FAULT (for `fault_hold`). How long each cause stops (the detector names two of
them `node_fault` and `stale_input`):

    cause      collision detector (core/chain/detector.py)    proximity monitor
    ---------  ---------------------------------------------  ------------------------------
    restarted  latched until ~/reset (never by hold_time)      latched until ~/reset
    fault      latched until ~/reset or hold_time; neither     while held (fault_hold), then
               clears it while held                            clears by itself
    waiting    not latched: clears when the input arrives      the same
    bad_stamp  latched until ~/reset or hold_time              the one check that finds it
    stale      latched until ~/reset or hold_time; neither     while it lasts
               clears it while stale
    behind     latched until ~/reset or hold_time; neither     while it lasts (the next
               clears it while behind                          check in time clears it)

Reset is refused while `judge` (the restart aside) names a cause: `refusal`. In the
detector a collision keeps its name over a batch's lag verdict, and a restart's name stays
over everything but a collision until ~/reset.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from contact_estimation.core.chain.lag import BAD_STAMP, BEHIND, MAX_LAG, ClockLag
from contact_estimation.core.restart import RESTARTED

FAULT, WAITING, STALE = 'fault', 'waiting', 'stale'
CAUSES = (RESTARTED, FAULT, WAITING, BAD_STAMP, STALE, BEHIND)  # the order of `judge`
# s: after an unexpected error in a callback (ros/guard.py) the gate says FAULT this long past
# the last one: what the node decided meanwhile is unknown.
FAULT_HOLD = 1.0


@dataclass(frozen=True)
class GateConfig:
    """What the gate judges by; `input` and `timeout_name` name the input and its timeout
    parameter in the reasons ('residual', 'input_timeout')."""

    input: str = 'input'
    input_timeout: float = 0.1      # s without an input → STALE
    timeout_name: str = 'input_timeout'
    max_lag: float = MAX_LAG        # s (core/chain/lag.LagBudget)
    fault_hold: float = FAULT_HOLD  # s


@dataclass(frozen=True)
class Verdict:
    """The first cause that holds (CAUSES, '' when none) and one line for people."""

    cause: str = ''
    reason: str = ''


CLEAR = Verdict()


class InputGate:
    """The fail-safe facts of one node's input (module docstring); `lag` measures its
    samples' stamps against the node's clock (core/chain/lag.ClockLag)."""

    def __init__(self, config: GateConfig = GateConfig()):
        self.config = config
        self.lag = ClockLag(config.max_lag)
        self._restarted = ''
        self._fault_at, self._fault = -math.inf, ''
        self._arrived: float | None = None      # the latest input's arrival (node clock, s)
        self._upstream = ''                     # why a watchdog upstream says stale
        self._upstream_fresh_once = False
        self._bad_stamp = self._behind = ''     # of the latest check or samples
        self._age: float | None = None          # the newest sample's at the latest check, s

    # ------------------------------------------------------------------ facts
    def restarted(self, reason: str) -> None:
        """This process was started again after it died: RESTARTED until `reset`."""
        self._restarted = reason

    def fault(self, now: float, reason: str) -> None:
        """An unexpected error at `now`: FAULT until `fault_hold` s after the last one."""
        self._fault_at, self._fault = now, reason

    def upstream(self, reason: str) -> None:
        """A watchdog upstream (the joint-state listener's) says the input is stale for
        `reason` ('' = fresh). Until it has once said fresh, its stale means the input has
        not started: WAITING."""
        self._upstream = reason
        self._upstream_fresh_once |= not reason

    def arrived(self, now: float) -> Verdict:
        """An input arrived at `now` (node clock): STALE when it came more than
        `input_timeout` after the one before (what happened between is unknown), else
        CLEAR."""
        last, self._arrived = self._arrived, now
        timeout = self.config.input_timeout
        if last is None or now - last <= timeout:
            return CLEAR
        return Verdict(STALE, f'gap of {now - last:.3f} s between {self.config.input}s '
                              f'({self.config.timeout_name} {timeout:g} s)')

    def sample_lag(self, cause: str, reason: str) -> None:
        """The lag of samples decided on at once, as core/chain/lag.ClockLag.check_batch judged
        it (`cause` '' = in time, BAD_STAMP, LATE_INPUT or BEHIND, with its `reason`): a verdict
        on those samples, which the node latches as it takes them (LATE_INPUT as STALE);
        BEHIND stands in `judge` until samples come in time again."""
        self._behind = reason if cause == BEHIND else ''

    def newest(self, stamp_now: float, t: float) -> None:
        """A check on the newest sample, stamped `t`, at `stamp_now` (the clock stamps are
        judged on): its age beyond the clocks' offset (`lag`), judged by `judge` until the
        next check (a stamp that went back is BAD_STAMP for this check)."""
        self._age = self.lag.update(stamp_now, t)
        self.lag.statistics.add(self._age)
        self._bad_stamp = self.lag.went_back_reason(t) if self.lag.went_back else ''

    def late(self, reason: str) -> None:
        """Why this node's check came late ('' = in time: core/contact/check_lateness.py)."""
        self._behind = reason

    def refusal(self, now: float, stale: str = '') -> str:
        """Why ~/reset may not release a stop now ('cannot reset: ...'; '' when it may): any
        cause but the restart, which a reset is for."""
        restarted, self._restarted = self._restarted, ''
        verdict = self.judge(now, stale)
        self._restarted = restarted
        if not verdict.cause:
            return ''
        no_input = self._arrived is None and not self._upstream
        return (f'cannot reset: no {self.config.input} received yet' if no_input
                else f'cannot reset: {verdict.reason}')

    def reset(self) -> str:
        """~/reset released the stop: the restart's latch goes; its reason ('' if none)."""
        restarted, self._restarted = self._restarted, ''
        return restarted

    # ---------------------------------------------------------------- verdict
    @property
    def waiting(self) -> str:
        """Why the input has not started ('' once it has)."""
        if self._arrived is None:
            return self._upstream or f'waiting for the first {self.config.input}'
        if self._upstream and not self._upstream_fresh_once:
            return f'waiting for the input to start: {self._upstream}'
        return ''

    def stale(self, now: float, stale: str = '') -> str:
        """Why the input is stale at `now` ('' when fresh); `stale`: why another input the
        node needs is (judged last)."""
        config = self.config
        if self._upstream:
            return self._upstream
        if self._age is not None and self._age > config.max_lag:
            return (f'{config.input}s stale: the latest is {self._age * 1e3:.0f} ms old '
                    f'beyond the {self.lag.offset * 1e3:.1f} ms clock offset (max_lag '
                    f'{config.max_lag * 1e3:g} ms)')
        if self._arrived is not None and now - self._arrived > config.input_timeout:
            return (f'no {config.input} for {now - self._arrived:.3f} s '
                    f'({config.timeout_name} {config.input_timeout:g} s)')
        return stale

    def judge(self, now: float, stale: str = '') -> Verdict:
        """The first cause that holds at `now`, in the order of the module docstring;
        `stale`: why another input the node needs is stale ('' = fresh)."""
        if self._restarted:
            return Verdict(RESTARTED, self._restarted)
        if now - self._fault_at < self.config.fault_hold:
            return Verdict(FAULT, self._fault)
        waiting = self.waiting
        if waiting:
            return Verdict(WAITING, waiting)
        if self._bad_stamp:
            return Verdict(BAD_STAMP, self._bad_stamp)
        stale = self.stale(now, stale)
        if stale:
            return Verdict(STALE, stale)
        if self._behind:
            return Verdict(BEHIND, self._behind)
        return CLEAR
