"""The `main()` every node shares: init, spin, and a clean shutdown on Ctrl-C or SIGTERM."""
from __future__ import annotations

import sys
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node


def run(make_node: Callable[[], Node], args: list[str] | None = None,
        threads: int = 1) -> int:
    """Run one node until shutdown; return the process exit code.

    A node that cannot start (bad parameters, a missing model file) raises in its
    constructor: the message is logged and the process exits 1, as `ros2 launch` reports.
    """
    rclpy.init(args=args if args is not None else sys.argv)
    node = None
    try:
        node = make_node()
        executor = MultiThreadedExecutor(threads) if threads > 1 else SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        if rclpy.ok():
            raise
        # Ctrl-C shut the context down while the executor was taking a message: a clean stop.
    except StartupError as err:
        print(f'[FATAL] {err}', file=sys.stderr, flush=True)
        return 1
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


class StartupError(RuntimeError):
    """A node refuses to start; the message says what to fix."""
