"""The stop's heartbeat from a thread of its own, fail-safe when the node falls behind.

A controller keeping the README's contract stops after 150 ms without a stop message. A
heartbeat on an executor timer waits behind every message queued before it: on a loaded
machine, a backlog of 1 kHz joint states held it for seconds (issue 19's soak: 244 gaps over
150 ms in 10 min). Here a thread publishes the stop `rate` times a second whatever the
executor is doing, and says what the node can vouch for: the stop it decided last, or True
(stop) when its last decision is older than three heartbeat periods, the silence a controller
tolerates (its executor has fallen behind, so nobody is watching), on the `clock` of the
node's watchdogs (under simulated time, a simulation slower than real time is no delay). That
clock may stand still (a simulated clock whose /clock stopped: the node's timers and its
timeouts stop with it), so a decision is also too old after SLOWEST_CLOCK's share of that
silence on the monotonic clock (issue 27). `beat()` is also how
the node publishes a change: one lock orders
the thread's messages and the node's, so a beat read before a change is never sent after it.
The node's speed scale rides on the same beats (`repeat`, under the same lock): repeated by an
executor timer on the simulated clock, it waited behind the chain's backlog, the simulated
cobot went 150 ms of its time without f_S and held the arm at once, and that jolt was taken
for a collision (a demo run of issue 39, 2026-11-28).

A thread of its own is not enough at real-time priority (issue 36): SCHED_FIFO never takes
the CPU from a thread for another of the same priority, so while the node's executor worked
through a burst of 20 000 joint states, its heartbeat thread, runnable, waited 250-300 ms for
a CPU (its run-queue time, /proc/<pid>/task/<tid>/schedstat). So in a real-time process the
thread beats `above` steps over its process's priority (StopSignal: one over the suite's
highest process): it takes a CPU from the node's work at once, and the interpreter lock
within one switch interval (5 ms); a beat costs well under a millisecond every period.
That holds only while the lock's holder can run: a thread of the process kept off the CPU by
a higher process holds the lock, and the heartbeat waits for it (the proximity monitor one
step below the chain, 300 ms through a burst). So the process whose work is bounded (the
proximity monitor's check) runs above the one whose work is not (the chain's backlog).
"""
from __future__ import annotations

import os
import threading
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
                 clock: Callable[[], float], name: str,
                 steady: Callable[[], float] = time.monotonic, beating: bool = True,
                 above: int = 0, repeat: Callable[[], None] = lambda: None,
                 on_late: Callable[[float], None] = lambda silence: None):
        """`clock`: the node's watchdog clock; `steady`: its monotonic clock (a replay's
        stands for both); without `beating` (a replay: no wall time passes) no thread
        beats, and the stop goes out on its changes only (`beat`); `above`: SCHED_FIFO
        steps over its process's that the thread beats at, when the process is real-time;
        `repeat`: publishes what else the thread repeats at each beat (the speed scale);
        `on_late(silence)`: told, with the seconds since the node last decided, when a beat
        first says stop because that decision is too old (the node says why it stopped)."""
        self._publisher, self._period, self._repeat = publisher, 1.0 / rate, repeat
        self._decided, self._clock, self._steady = decided, clock, steady
        self.lock = threading.Lock()  # held while a beat publishes; `repeat`'s changes take it
        self._closed = threading.Event()
        self.decided_at = clock()           # when the node last decided (`decision`)
        self._decided_wall = steady()
        self.late = 0                       # beats that said stop because it was late
        self._on_late = on_late
        self._was_late = False              # the latest beat said stop because it was late
        self._thread = None
        self._above = above
        self.priority = 0                   # the thread's SCHED_FIFO priority (0: none)
        if beating:
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def decision(self) -> None:
        """The node has just decided its stop (it is watching)."""
        self.decided_at = self._clock()
        self._decided_wall = self._steady()

    def beat(self, repeat: bool = False) -> None:
        """Publish the stop now (on a change, and from the thread with `repeat`)."""
        newly_late = False
        with self.lock:
            stop = self._decided()
            if stop is not None:
                late = not stop and self._late()
                if late:
                    stop = True
                    self.late += 1
                self._publisher.publish(Bool(data=stop))
                newly_late, self._was_late = late and not self._was_late, late
            if repeat:
                self._repeat()
        if newly_late:  # told outside the lock: its log line never delays a change
            self._on_late(max(self._clock() - self.decided_at,
                              self._steady() - self._decided_wall))

    def _late(self) -> bool:
        """The node's decision is too old to vouch for, on its clock or on the monotonic."""
        silence = self.MISSED * self._period
        return (self._clock() - self.decided_at > silence
                or self._steady() - self._decided_wall > silence / self.SLOWEST_CLOCK)

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        """Beats on a fixed schedule (not a sleep after each: the rate would fall short by
        the time a beat takes); after a stall, the schedule starts over."""
        self.priority = outrank(self._above)
        due = time.monotonic()
        while True:
            due = max(due + self._period, time.monotonic())
            if self._closed.wait(due - time.monotonic()):
                return
            try:
                self.beat(repeat=True)
            except Exception:  # noqa: BLE001 -- the node is gone; silence means stop
                return


def outrank(above: int) -> int:
    """The calling thread, when its process runs at SCHED_FIFO (or RR) priority P, at
    SCHED_FIFO P + `above` (at most the highest there is, or the OS allows: RLIMIT_RTPRIO);
    its priority (0: not real-time, left as it is)."""
    if os.sched_getscheduler(0) not in (os.SCHED_FIFO, os.SCHED_RR):
        return 0
    priority = os.sched_getparam(0).sched_priority
    wanted = min(priority + above, os.sched_get_priority_max(os.SCHED_FIFO))
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(wanted))  # this thread only
    except PermissionError:
        return priority
    return wanted
