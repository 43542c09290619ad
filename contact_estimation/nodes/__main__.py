"""Start a node of nodes.yaml, or a composed process: `python -m contact_estimation.nodes
NAME [--ros-args ...]` (`contact-estimation up`), or NAME's console script (`ros2 launch`),
which names it.

A node's module takes seconds to import (rclpy, pinocchio, open3d). A Ctrl-C or SIGTERM in
that time ends the process quietly with exit code 0, as one while it runs does: a node
stopped while starting has not crashed (a KeyboardInterrupt traceback and exit code 1 would
say it had). ros/node_main.run takes over the signals once it starts building the node.
"""
from __future__ import annotations

import importlib
import os
import signal
import sys


def _stopped_while_starting(signum, frame) -> None:
    for number in (signal.SIGINT, signal.SIGTERM):  # the next (`up` sends it again) ignored
        signal.signal(number, signal.SIG_IGN)
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    """Run the process that argv[0] (a console script) or else argv[1] names; its exit code."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _stopped_while_starting)
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
