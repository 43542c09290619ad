"""Spinning an executor until something happens, with a deadline (tools, benchmarks, tests)."""
from __future__ import annotations

import time
from typing import Callable

from rclpy.executors import Executor


def spin_until(executor: Executor, done: Callable[[], bool], timeout: float) -> bool:
    """Spin until `done()` or the deadline; True if `done()` became true."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        executor.spin_once(timeout_sec=0.01)
    return True


def spin_for(executor: Executor, seconds: float) -> None:
    """Spin for `seconds` of wall-clock time (recording a live stream for that long)."""
    spin_until(executor, lambda: False, seconds)
