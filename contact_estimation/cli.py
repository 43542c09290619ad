"""`contact-estimation`: run the node set without ros2 launch, the demo, and the offline tools.

    contact-estimation up [--config FILE] [--sim]   start the nodes as separate processes
    contact-estimation demo [--seconds S]           simulated cobot + every node, summary, plot
    contact-estimation identify ...                 dynamics identification (seed 001)
    contact-estimation calibrate ...                detector thresholds from free motion
    contact-estimation replay BAG [--config FILE]   the suite on a recording, faster than real time
    contact-estimation parameters [NODE ...]        every node's parameters (docs/parameters.md)
    contact-estimation view [--port 8765]           the running suite live in Foxglove
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    'up': ('contact_estimation.commands.up', 'start the node set as separate processes'),
    'demo': ('contact_estimation.commands.demo', 'run the simulated cobot scenario and report'),
    'identify': ('contact_estimation.commands.identify', 'identify gravity and friction'),
    'calibrate': ('contact_estimation.commands.calibrate', 'propose detector thresholds'),
    'replay': ('contact_estimation.commands.replay',
               'run the suite on a recorded bag, as fast as the CPU allows'),
    'view': ('contact_estimation.commands.view',
             'show the running suite live in Foxglove (WebSocket, default port 8765)'),
    'parameters': ('contact_estimation.commands.parameters',
                   "print every node's parameter table"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog='contact-estimation', description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('command', choices=sorted(COMMANDS),
                        help='; '.join(f'{k}: {v[1]}' for k, v in COMMANDS.items()))
    if not argv or argv[0] in ('-h', '--help'):
        parser.print_help()
        return 0 if argv else 2
    args = parser.parse_args(argv[:1])
    try:
        module = importlib.import_module(COMMANDS[args.command][0])
        return module.main(argv[1:])
    except KeyboardInterrupt:  # Ctrl-C that no command took (`up` stops its processes)
        return 130


if __name__ == '__main__':
    sys.exit(main())
