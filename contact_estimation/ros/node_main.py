"""The `main()` every node shares: init, spin, and a clean shutdown on Ctrl-C or SIGTERM."""
from __future__ import annotations

import gc
import signal
import sys
import threading
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions
from rclpy.node import Node

try:  # rclpy ≥ 9 (Kilted): callbacks dispatched in C++
    from rclpy.experimental import EventsExecutor as FastExecutor
except ImportError:  # older distributions
    FastExecutor = SingleThreadedExecutor

# How long one spin_once may block: the loop checks for shutdown this often.
SPIN_PERIOD = 0.1  # s
# With several threads, the interpreter lets another thread run after this long (s; Python's
# default is 5 ms): a 1 kHz sample waits at most this for an estimator's Python code.
SWITCH_INTERVAL = 0.0002

Nodes = Node | list[Node] | list[list[Node]]


def run(make_nodes: Callable[[], Nodes], args: list[str] | None = None) -> int:
    """Run one node, or several (a list: one executor), or groups of nodes (a list of
    lists: one executor and thread each, the first group on this thread), until shutdown;
    return the process exit code.

    A node that cannot start (bad parameters, a missing model file) raises in its
    constructor: the message is logged and the process exits 1, as `ros2 launch` reports.

    The executor is rclpy's EventsExecutor where the distribution has it: at 1 kHz the
    Python SingleThreadedExecutor rebuilds its wait set on every wake-up, which cost these
    nodes ~40 % of a core each, more than their own work (benchmarks/end_to_end.py). It is
    spun with spin_once in a loop, because its spin() does not return on Ctrl-C.

    SIGINT (Ctrl-C, ros2 launch) and SIGTERM only ask the loops to end: a KeyboardInterrupt
    raised inside a callback would leave it half done and be logged as a crash.
    """
    stop_requested = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop_requested.set())
    rclpy.init(args=args if args is not None else sys.argv,
               signal_handler_options=SignalHandlerOptions.NO)
    groups: list[list[Node]] = []
    threads: list[threading.Thread] = []
    try:
        groups = _groups(make_nodes())
        # Everything built so far lives as long as the nodes: keep it out of the garbage
        # collector's scans, which would otherwise pause the 1 kHz callbacks for ms.
        gc.freeze()
        executors = []
        for group in groups:
            executors.append(FastExecutor())
            for node in group:
                executors[-1].add_node(node)
        if len(executors) > 1:
            sys.setswitchinterval(SWITCH_INTERVAL)
        failures: list[BaseException] = []
        threads = [threading.Thread(target=_spin, args=(executor, stop_requested, failures),
                                    name=f'executor-{k}', daemon=True)
                   for k, executor in enumerate(executors[1:], start=1)]
        for thread in threads:
            thread.start()
        _spin(executors[0], stop_requested, failures)
        for thread in threads:
            thread.join(timeout=5.0)
        if failures:
            raise failures[0]
    except StartupError as err:
        print(f'[FATAL] {err}', file=sys.stderr, flush=True)
        return 1
    finally:
        stop_requested.set()
        for thread in threads:
            thread.join(timeout=5.0)
        for node in (node for group in groups for node in group):
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def _groups(made: Nodes) -> list[list[Node]]:
    if isinstance(made, Node):
        return [[made]]
    if made and isinstance(made[0], list):
        return made
    return [made]


def _spin(executor, stop_requested: threading.Event, failures: list[BaseException]) -> None:
    """Spin until shutdown; an executor that fails ends the process (its error is kept for
    the main thread to raise: exit code 1, as in a single-threaded process)."""
    try:
        while rclpy.ok() and not stop_requested.is_set():
            executor.spin_once(timeout_sec=SPIN_PERIOD)
    except ExternalShutdownException:
        pass
    except BaseException as err:
        failures.append(err)
    finally:
        stop_requested.set()


class StartupError(RuntimeError):
    """A node refuses to start; the message says what to fix."""
