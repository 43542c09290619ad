"""The `main()` every node shares: init, spin, and a clean shutdown on Ctrl-C or SIGTERM."""
from __future__ import annotations

import gc
import signal
import sys
import threading
import time
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

Nodes = Node | list[Node]


def run(make_nodes: Callable[[], Nodes], args: list[str] | None = None) -> int:
    """Run one node, or several (a list), on one executor on this thread until shutdown;
    return the process exit code. One executor per process: Python threads share one
    interpreter lock, so a second executor thread would only take turns with the first
    (composed.py puts what must not wait in a process of its own).

    A node that cannot start (bad parameters, a missing model file) raises in its
    constructor: the message is logged and the process exits 1, as `ros2 launch` reports.

    The executor is rclpy's EventsExecutor where the distribution has it: at 1 kHz the
    Python SingleThreadedExecutor rebuilds its wait set on every wake-up, which cost these
    nodes ~40 % of a core each, more than their own work (benchmarks/end_to_end.py). It is
    spun with spin_once in a loop, because its spin() does not return on Ctrl-C.

    SIGINT (Ctrl-C, ros2 launch) and SIGTERM while the nodes are built end the process at
    once (the node entry's handler, contact_estimation/nodes/__main__.py). Once the nodes
    spin they only ask the loop to end: a KeyboardInterrupt raised inside a callback would
    leave it half done and be logged as a crash. The signals that follow are ignored: Ctrl-C
    in a terminal reaches each process and `up` sends it again, and a second SIGINT that came
    while the interpreter exits (its handlers gone) killed the process (exit code -2).
    """
    stop_requested = threading.Event()

    def stop_spinning(signum, frame) -> None:
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_IGN)
        stop_requested.set()

    rclpy.init(args=args if args is not None else sys.argv,
               signal_handler_options=SignalHandlerOptions.NO)
    nodes: list[Node] = []
    try:
        made = make_nodes()
        nodes = [made] if isinstance(made, Node) else list(made)
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, stop_spinning)
        # Everything built so far lives as long as the nodes: keep it out of the garbage
        # collector's scans, which would otherwise pause the 1 kHz callbacks for ms.
        gc.freeze()
        executor = FastExecutor()
        for node in nodes:
            executor.add_node(node)
        suite_nodes = [n for n in nodes if hasattr(n, 'rest_after_wake')]  # not a viewer
        try:
            while rclpy.ok() and not stop_requested.is_set():
                executor.spin_once(timeout_sec=SPIN_PERIOD)
                rest_after_wake(suite_nodes)
        except ExternalShutdownException:
            pass
    except StartupError as err:
        print(f'[FATAL] {err}', file=sys.stderr, flush=True)
        return 1
    finally:
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def rest_after_wake(nodes: list[Node]) -> None:
    """Sleep as long as a node of the process asks after it woke (SuiteNode.rest_after_wake:
    the chain's listener, `wake_period`; its 1 kHz input then waits and is taken as one
    batch), unless a node says a contact lasts (`contact_lasts`: the detector, while a
    residual nears its threshold)."""
    rest = max((node.rest_after_wake() for node in nodes), default=0.0)
    if rest > 0.0 and not any(node.contact_lasts for node in nodes):
        time.sleep(rest)


class StartupError(RuntimeError):
    """A node refuses to start; the message says what to fix."""
