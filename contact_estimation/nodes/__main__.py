"""Start a node of nodes.yaml, or a composed process: `python -m contact_estimation.nodes
NAME [--ros-args ...]` (`contact-estimation up`), or NAME's console script (`ros2 launch`),
which names it.

A node's module takes seconds to import (rclpy, pinocchio, open3d), and its nodes seconds to
build (models, surfaces, a cloud worker). A Ctrl-C or SIGTERM in that time ends the process
at once, quietly, with exit code 0, as one while it runs does: a node stopped while starting
has not crashed. At once: waiting for the build kept a chain publishing its stop for seconds
after Ctrl-C, until `up` killed it (issue 36); and an exception raised into an import or a
build (SystemExit, KeyboardInterrupt) came out of open3d's as an ImportError, exit code 1.
Nothing is left to clean up then (no shared memory yet; the cloud worker dies with its
node: ros/cloud_process.py). ros/node_main.run takes over the signals once the nodes are
built.
"""
from __future__ import annotations

import importlib
import os
import signal
import sys


def _stopped_while_starting(signum, frame) -> None:
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """Run the process that argv[0] (a console script) or else argv[1] names; its exit code."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _stopped_while_starting)
    # `up` starts a process with SIGINT held back until here (launcher.ctrl_c_held).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    from contact_estimation import manifest
    argv = sys.argv if argv is None else argv
    processes = {**manifest.nodes(), **{p.name: p for p in manifest.composed()}}
    name = os.path.basename(argv[0])
    if name not in processes:
        name = argv[1] if len(argv) > 1 else ''
    if name not in processes:
        print(f'usage: python -m {__package__} NAME [--ros-args ...], NAME one of '
              f'{", ".join(sorted(processes))}', file=sys.stderr)
        return 2
    return importlib.import_module(processes[name].module).main()


if __name__ == '__main__':
    sys.exit(main())
