"""No message, timer or service call ends a node: every callback of a SuiteNode runs guarded.

rclpy lets an exception escape a callback out of the executor's spin, and the process exits
(in composed mode, every node of the process with it). A node catches the
problems it expects (bad messages: counted, logged, dropped); `CallbackGuard.wrap` catches
the rest, so that a bug met by one odd message cannot take the safety function down:

- the exception is counted on /diagnostics by kind, `unexpected_<ExceptionType>`;
- it is logged through ProblemCounter.report, throttled per kind, always at error severity
  (rclpy refuses one log call site at two severities: a second severity would itself raise);
- the node fails safe: `SuiteNode.fail_safe(reason)` is called, which raises the stop of the
  nodes that have one (collision_detector, proximity_monitor);
- a service answers with `success = False` and the reason, when its response has those
  fields, instead of never answering.

KeyboardInterrupt and SystemExit are not caught: they end the process on purpose.

rclpy's executors look at a timer callback's signature on every call (`inspect.signature`,
for a TimerInfo parameter), which would follow the wrapper to the callback each time. The
wrapper carries the callback's signature, taken once at wrap time (`__signature__`), so
that look-up ends at once, and rclpy sees the parameters the callback has.
"""
from __future__ import annotations

import functools
import inspect
import traceback
from typing import Any, Callable

# Log at most one line per kind of unexpected exception this often (s).
LOG_PERIOD = 2.0


class CallbackGuard:
    """Wraps callbacks of `node` (a SuiteNode: `problems` and `fail_safe`, which holds the
    stop: core/chain/input_gate.py)."""

    def __init__(self, node):
        self._node = node

    def wrap(self, callback: Callable, where: str, service: bool = False) -> Callable:
        """`callback`, guarded; `where` names it in the log (topic, timer, service). A
        `service` callback (request, response) that raises returns the response refused."""
        @functools.wraps(callback)
        def guarded(*args):
            try:
                return callback(*args)
            except Exception as err:  # noqa: BLE001 -- the point of the guard
                self.failed(where, err)
                return _refused(args[1], f'{type(err).__name__}: {err}') if service else None
        guarded.__signature__ = inspect.signature(callback)
        return guarded

    def failed(self, where: str, err: Exception) -> None:
        """Count, log and fail safe for `err`, raised in the callback `where`."""
        frame = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
        at = f' at {frame.filename.rsplit("/", 1)[-1]}:{frame.lineno}' if frame else ''
        reason = f'unexpected {type(err).__name__} in {where}{at}: {err}'
        problems = getattr(self._node, 'problems', None)  # None while the node starts
        try:
            if problems is not None:
                from contact_estimation.ros.diagnostics import ERROR
                problems.report(f'unexpected_{type(err).__name__}', f'{reason}: stop', ERROR)
            self._node.fail_safe(reason)
        except Exception as second:  # noqa: BLE001 -- failing safe must not end the node
            # Counted where it can be; a log line of its own call site and severity.
            if problems is not None:
                problems.counts['fail_safe_errors'] += 1
            self._node.get_logger().fatal(f'failing safe after {reason} failed too: {second!r}',
                                          throttle_duration_sec=LOG_PERIOD)


def _refused(response: Any, reason: str) -> Any:
    """A service response, refused with `reason` where it has the fields to say so."""
    if hasattr(response, 'success'):
        response.success = False
    if hasattr(response, 'message'):
        response.message = f'failed: {reason}'
    return response
