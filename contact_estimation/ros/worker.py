"""Heavy work off the safety path: one background thread, a queue of one, the latest wins.

A 43 000-point cloud costs ~0.1 s of decoding, voxels, self-filter and DBSCAN (more on a
busy machine); done in a subscription callback it holds the executor, and with it the 100 Hz
proximity check, the stop's heartbeat and, in composed mode, every node of the process. A
node gives such work to a `LatestWorker` instead: `submit(job)` returns at once (a job not
yet started is replaced by the newer one: a cloud that is already late is worth nothing),
the thread runs `work(job)`, and the node collects the outcome with `take()` in its own
callbacks, so that everything the node keeps is changed on the executor's thread only.

It also keeps to a CPU budget: after a job that took c seconds of its thread's CPU, it rests
c (1/max_duty − 1) seconds before the next, so that it uses at most `max_duty` of a core
(half, by default) and a stream of heavy clouds cannot starve the 1 kHz chain of CPU on a
small machine; the clouds that come meanwhile are skipped but for the latest.

`work` must touch nothing the executor's thread changes meanwhile (pass it what it needs in
the job). Python runs one thread at a time: a single C call that keeps the GIL (an open3d
DBSCAN of tens of thousands of points: tens of ms) still delays the executor that long, but
no longer the whole job: a node bounds its jobs (a cloud is decimated to `cloud.budget_points`
before decoding: ros/sensor_frames.py).

Memory returns after a big job: the thread keeps no reference to a job once done, and gives
the C heap's free memory back to the system (glibc's malloc_trim, which runs without the
interpreter lock): a 400 000-point cloud no longer leaves the process hundreds of MiB
larger for good (issue 27).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from typing import Any, Callable


def _malloc_trim() -> Callable[[], None]:
    """glibc's malloc_trim(0), or nothing where the C library has none."""
    trim = getattr(ctypes.CDLL(ctypes.util.find_library('c')), 'malloc_trim', None)
    return (lambda: trim(0)) if trim else (lambda: None)


_TRIM = _malloc_trim()


class LatestWorker:
    """Runs `work(job)` on a daemon thread for the latest job submitted."""

    def __init__(self, work: Callable[[Any], Any], name: str, max_duty: float = 0.5):
        self._work = work
        self._rest_per_cpu_second = 1.0 / max_duty - 1.0
        self._wake = threading.Condition()
        self._job: tuple[Any] | None = None      # (job,) waiting to start
        self._outcome: tuple[Any, Exception | None] | None = None
        self._closed = False
        self.replaced = 0                         # jobs dropped for a newer one
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Any) -> None:
        """Queue `job`, replacing one that has not started."""
        with self._wake:
            self.replaced += self._job is not None
            self._job = (job,)
            self._wake.notify()

    def take(self) -> tuple[Any, Exception | None] | None:
        """The latest finished job's (result, None) or (None, exception it raised); None when
        nothing finished since the last call."""
        with self._wake:
            outcome, self._outcome = self._outcome, None
        return outcome

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._job is not None or self._closed)
                if self._closed:
                    return
                (job,), self._job = self._job, None
            cpu = time.thread_time()
            try:
                outcome = (self._work(job), None)
            except Exception as err:  # noqa: BLE001 -- handed to the node's thread (take)
                outcome = (None, err)
            del job  # the biggest message is not kept until the next one
            _TRIM()
            with self._wake:
                self._outcome = outcome
                self._wake.wait_for(lambda: self._closed, timeout=(
                    time.thread_time() - cpu) * self._rest_per_cpu_second)
