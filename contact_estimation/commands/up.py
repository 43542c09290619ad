"""`contact-estimation up`: the node set of nodes.yaml (ros2 launch for pip users): the core
nodes composed in one process, or with --separate one process per node."""
from __future__ import annotations

import argparse
import os
import signal

from contact_estimation import manifest
from contact_estimation.launcher import NodeSet, simulated_clock, wait_for_processes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='contact-estimation up', description=__doc__)
    parser.add_argument('--config', action='append', default=[], metavar='FILE',
                        help='parameter file (node_name: ros__parameters: form) applied over '
                             'the defaults; may be given several times')
    parser.add_argument('--sim', action='store_true',
                        help='also start the simulated cobot in place of a real arm; every '
                             'node then runs on its clock (use_sim_time)')
    parser.add_argument('--namespace', default='', metavar='NS',
                        help='run every node in ROS namespace NS (its topics move with it; '
                             '/diagnostics stays global): one suite per arm in one graph')
    parser.add_argument('--separate', action='store_true',
                        help='one process per node (e.g. for nodes on other machines) instead '
                             'of the core nodes composed in two processes, the chain and '
                             'the estimators (less CPU and latency, the same nodes, '
                             'parameters and topics)')
    parser.add_argument('--priority', type=int, default=0, metavar='N',
                        help='run the chain that raises the stop at real-time priority N '
                             '(SCHED_FIFO, chrt -f N, 1-99), below the robot driver\'s; 0 '
                             '(default): normal')
    parser.add_argument('--log-dir', help='write each process\'s output to DIR/<name>.log')
    args = parser.parse_args(argv)
    for path in args.config:
        if not os.path.isfile(path):
            parser.error(f'--config {path}: no such file')
    if not 0 <= args.priority <= 99:
        parser.error(f'--priority {args.priority}: must be 0 (normal) or 1-99')
    names = [spec.name for spec in manifest.processes(args.sim, args.separate)]
    nodes = NodeSet(names, tuple(os.path.abspath(p) for p in args.config), log_dir=args.log_dir,
                    priority=args.priority, namespace=args.namespace,
                    overrides=simulated_clock() if args.sim else {})
    print(f'[contact-estimation] starting {", ".join(names)} (Ctrl-C stops them)', flush=True)
    # Ctrl-C reaches the children through the process group; we wait for them to finish.
    signal.signal(signal.SIGTERM, lambda *_: nodes.stop())
    nodes.start()
    try:
        wait_for_processes(nodes)
    except KeyboardInterrupt:
        print('[contact-estimation] stopping', flush=True)
    codes = nodes.stop()
    failed = {n: c for n, c in codes.items() if c not in (0, -signal.SIGINT)}
    for name, code in failed.items():
        print(f'[contact-estimation] node {name} exited with code {code}', flush=True)
    return 1 if failed else 0
