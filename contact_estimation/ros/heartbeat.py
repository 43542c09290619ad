"""The stop's beats: the node's stop repeated at a fixed rate, fail-safe when the node falls
behind.

A controller keeping the README's contract stops after 150 ms without a stop message. A
heartbeat on an executor timer waits behind every message queued before it: on a loaded
machine, a backlog of 1 kHz joint states held it for seconds (issue 19's soak: 244 gaps over
150 ms in 10 min). A thread of the node's own was not enough either (issue 36): SCHED_FIFO
never takes the CPU from a thread for another of the same priority (a burst of 20 000 joint
states held it 250-300 ms), and rclpy holds the interpreter lock through each publish, which
Fast DDS's shared-memory transport can make last 333 ms. So a live node's beats come from a
process of their own (ros/stop_process.py), and a replay, where no wall time passes, publishes
its stop on changes only.

Each beat says what the node can vouch for: the stop it decided last, or True (stop) when its
last decision is older than three heartbeat periods, the silence a controller tolerates (its
executor has fallen behind, so nobody is watching). Under simulated time the node's clock
may run slower than real time, so the beats there wait `slowest_clock`'s share of that
silence (issue 27). The node's speed scale rides on the same beats (`repeat`): repeated by
an executor timer, it waited behind the chain's backlog, the simulated cobot went 150 ms of
its time without f_S and held the arm at once, and that jolt was taken for a collision (a
demo run of issue 39, 2026-11-28).
"""
from __future__ import annotations

import os
import time
from typing import Callable

from std_msgs.msg import Bool


class Heartbeat:
    """Publishes `decided()` (the node's stop, None before the first) on `publisher`."""

    MISSED = 3  # heartbeat periods of silence after which a controller stops (README)
    # The node's clock may run this much slower than real time (a loaded simulation) before
    # its decisions count as late on the monotonic clock: 1.5 s of real time at 20 Hz.
    SLOWEST_CLOCK = 0.1

    def __init__(self, publisher, rate: float, decided: Callable[[], bool | None],
                 clock: Callable[[], float] = time.monotonic,
                 repeat: Callable[[], None] = lambda: None,
                 on_late: Callable[[bool, float], None] = lambda newly, silence: None,
                 slowest_clock: float = 1.0):
        """`clock`: the clock decisions are timed on; `repeat`: publishes what else each beat
        repeats (the speed scale); `on_late(newly, silence)`: told of each beat that says stop
        because the node's decision is `silence` s old, `newly` for the first of a stretch
        (the node says why it stopped); `slowest_clock`: the share of real time the clock
        may run at (SLOWEST_CLOCK under simulated time, else 1)."""
        self._publisher, self._repeat, self._on_late = publisher, repeat, on_late
        self._decided, self._clock = decided, clock
        self._silence = self.MISSED / rate / slowest_clock
        self.decided_at = clock()   # when the node last decided (`decision`)
        self.late = 0               # beats that said stop because it was late
        self._was_late = False      # the latest beat said stop because it was late

    def decision(self, at: float | None = None) -> None:
        """The node decided its stop (it is watching): now, or `at` on the clock."""
        self.decided_at = self._clock() if at is None else at

    def beat(self, repeat: bool = False) -> None:
        """Publish the stop now (on a change, and at each beat with `repeat`)."""
        stop = self._decided()
        if stop is not None:
            silence = self._clock() - self.decided_at
            late = not stop and silence > self._silence
            self._publisher.publish(Bool(data=stop or late))
            if late:
                self.late += 1
                self._on_late(not self._was_late, silence)
            self._was_late = late
        if repeat:
            self._repeat()


def outranking(above: int) -> int:
    """The SCHED_FIFO priority `above` steps over this process's, when it runs at SCHED_FIFO
    (or RR) (at most the highest there is); 0 when it does not."""
    if os.sched_getscheduler(0) not in (os.SCHED_FIFO, os.SCHED_RR):
        return 0
    priority = os.sched_getparam(0).sched_priority
    return min(priority + above, os.sched_get_priority_max(os.SCHED_FIFO))
