"""Counted problems with throttled log lines, and message counts, published on /diagnostics.

diagnostic_updater is not on PyPI; this is the small part of it we need: one
DiagnosticStatus per node whose values are the count of each kind of problem.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

# DiagnosticStatus levels as ints (the message constants are one-byte `bytes`).
OK, WARN, ERROR, STALE = (int.from_bytes(level) for level in (
    DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR, DiagnosticStatus.STALE))


def level_byte(level: int) -> bytes:
    """The `level` field value of a DiagnosticStatus."""
    return bytes([level])


class ProblemCounter:
    """Counts problems by kind; logs each kind at most once per `log_period` seconds of
    `steady` (the node's: SuiteNode.steady)."""

    def __init__(self, node: Node, topic: str = '/diagnostics', period: float = 1.0,
                 log_period: float = 2.0, hardware_id: str = '',
                 steady: Callable[[], float] = time.monotonic):
        self._node, self._steady = node, steady
        self._log_period = log_period
        self._last_logged: dict[str, float] = {}
        self.counts: Counter[str] = Counter()
        self.traffic: Counter[str] = Counter()  # messages handled, by kind (not problems)
        self.level = OK
        self.message = 'ok'
        # Key values by name: a string, or a function that gives it when /diagnostics is
        # published (a figure that costs to format is not formatted at the 1 kHz rate).
        self.values: dict[str, str | Callable[[], str]] = {}
        # A stop latched over the node's own decisions (ros/stop_topic.py: `duplicate`): an
        # error shown before the node's own status until it is released.
        self.above: str | None = None
        self._passed: str | None = None  # an error that passed since the last publication
        self._hardware_id = hardware_id
        self._conditions: list[Callable[[], str]] = []
        self._pub = node.create_publisher(DiagnosticArray, topic, 10)
        self._timer = node.create_timer(period, self.publish)

    def value(self, key: str, default: str = '') -> str:
        """Key value `key` as /diagnostics shows it."""
        value = self.values.get(key, default)
        return value() if callable(value) else value

    def report(self, kind: str, detail: str, level: int = WARN) -> None:
        """Count one problem of `kind`; log `detail` unless this kind was logged recently."""
        self.counts[kind] += 1
        now = self._steady()
        if now - self._last_logged.get(kind, -1e9) >= self._log_period:
            self._last_logged[kind] = now
            # Two call sites: rclpy refuses a logging call site that changes severity.
            text = f'{detail} [{kind}: {self.counts[kind]} so far]'
            if level >= ERROR:
                self._node.get_logger().error(text)
            else:
                self._node.get_logger().warning(text)

    def set_status(self, level: int, message: str) -> None:
        self.level, self.message = level, message

    def passed_error(self, message: str) -> None:
        """An error that may pass before the next publication (a heartbeat late for a few
        beats): that publication shows it first, at ERROR, whatever the status is by then."""
        self._passed = message

    def condition(self, check: Callable[[], str]) -> None:
        """A condition judged at each publication, whatever the callbacks set (an input
        that stopped arriving calls none): while `check()` says something, the status is at
        least WARN and it leads the message."""
        self._conditions.append(check)

    def publish(self) -> None:
        level, message = self.level, self.message
        if self.above is not None:
            level, message = ERROR, f'{self.above} (and: {message})'
        passed, self._passed = self._passed, None
        if passed is not None:
            level, message = ERROR, f'{passed} (now: {message})'
        for problem in filter(None, (check() for check in self._conditions)):
            level, message = max(level, WARN), f'{problem}; {message}'
        status = DiagnosticStatus(
            level=level_byte(level), name=self._node.get_fully_qualified_name(),
            message=message, hardware_id=self._hardware_id)
        status.values = [KeyValue(key=k, value=str(v)) for k, v in sorted(
            (self.counts + self.traffic).items())]
        status.values += [KeyValue(key=k, value=self.value(k)) for k in sorted(self.values)]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._pub.publish(array)
