"""A node's watchdogs (`Watchdog`) and their clock (`WatchdogClock`): continuous when its time
source changes.

A node times its watchdogs on simulated time under use_sim_time, else on the monotonic
clock. Both are compared only with earlier readings of the same clock (`now - arrived`), so
a switch between them at run time would set every age to the difference of two unrelated
clocks: simulated time starting at 0 after days of monotonic time makes every input look
fresh for days (issue 27: a fail-safe switched off by a parameter). `WatchdogClock` keeps
time continuous instead: after a switch it goes on from where it was, at the new source's
pace, and while the new source has no time yet (no /clock received: reading None) it holds.
A source that stands still is caught by the stop's heartbeat (ros/heartbeat.py), which also
judges on the monotonic clock.
"""
from __future__ import annotations

import threading


class WatchdogClock:
    """`read(source, reading)`: now, s, from `reading` of the clock named `source`."""

    def __init__(self):
        self._lock = threading.Lock()  # the heartbeat's thread reads it too
        self._source: str | None = None
        self._offset = 0.0
        self._now = 0.0

    def read(self, source: str, reading: float | None) -> float:
        """`reading` (s) of `source` plus the offset that makes time continuous across a
        change of source (0 until the first change); the last time while `reading` is None."""
        with self._lock:
            if reading is None:
                return self._now
            if source != self._source:
                self._offset = 0.0 if self._source is None else self._now - reading
                self._source = source
            self._now = reading + self._offset
            return self._now


class Watchdog:
    """Stale when nothing was fed for longer than `timeout` seconds (and before the first feed)."""

    def __init__(self, timeout: float):
        self.timeout = float(timeout)
        self._last: float | None = None

    def feed(self, now: float) -> None:
        self._last = now

    def stale(self, now: float) -> bool:
        return self._last is None or now - self._last > self.timeout
