"""`contact-estimation up`: the node set of nodes.yaml (ros2 launch for pip users): the core
nodes composed in their processes, or with --separate one process per node. A process that
dies is started again, its stops latched until ~/reset (launcher.Supervisor); Ctrl-C stops
them all, and the summary says how each ended."""
from __future__ import annotations

import argparse
import os
import platform
import signal

from contact_estimation import manifest
from contact_estimation.core.chain.sample_ring import ORDERED_STORES
from contact_estimation.launcher import (DEFAULT_PRIORITY, SIMULATED_CLOCK_NOTE, NodeSet,
                                         Supervisor, chosen_priority, parameter_file,
                                         simulated_clock)
from contact_estimation.commands import view
from contact_estimation.ros import stop_topic


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='contact-estimation up', description=__doc__)
    parser.add_argument('--config', action='append', default=[], metavar='FILE',
                        help='parameter file (node_name: ros__parameters: form) applied over '
                             'the defaults; may be given several times')
    parser.add_argument('--robot', metavar='NAME|URDF',
                        help="every node's robot: an example-robot-data name (panda, ur5) or "
                             'a URDF file (default: config/robot.yaml, then --config files)')
    parser.add_argument('--sim', action='store_true',
                        help='also start the simulated cobot in place of a real arm; every '
                             'node then runs on its clock (use_sim_time)')
    parser.add_argument('--namespace', default='', metavar='NS',
                        help='run every node in ROS namespace NS (its topics move with it; '
                             '/diagnostics stays global): one suite per arm in one graph')
    parser.add_argument('--separate', action='store_true',
                        help='one process per node (e.g. for nodes on other machines) instead '
                             'of the core nodes composed in four processes, the chain, '
                             'the estimators, the proximity monitor and the relay of the '
                             '1 kHz streams (less CPU and latency, the same nodes, '
                             'parameters and topics)')
    parser.add_argument('--priority', default='auto', metavar='N',
                        help='run the processes that raise a stop at real-time priority N '
                             'and below (SCHED_FIFO, chrt -f, 1-99; nodes.yaml `realtime`), '
                             'below the robot driver\'s; auto (default): '
                             f'{DEFAULT_PRIORITY} where the OS allows it, else normal with a '
                             'warning; 0: normal')
    parser.add_argument('--view', nargs='?', const=str(view.DEFAULT_PORT), metavar='PORT',
                        help='also serve the live view for Foxglove (`contact-estimation '
                             f'view`) on ws://localhost:PORT (default {view.DEFAULT_PORT}), a '
                             'process of its own at normal priority')
    parser.add_argument('--log-dir', help='write each process\'s output to DIR/<name>.log')
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stops them as Ctrl-C does
    for path in args.config:
        if not os.path.isfile(path):
            parser.error(f'--config {path}: no such file')
    try:
        priority, meaning = chosen_priority(args.priority)
    except ValueError as err:
        parser.error(f'--{err}')
    refusal = stop_topic.refusal(args.namespace)  # one suite per stop topic (issue 36)
    if refusal:
        parser.error(refusal)
    files = robot_files(args.config, args.robot)
    processes = manifest.processes(args.sim, args.separate)
    if not args.separate and not ORDERED_STORES:
        say(f'{platform.machine()}: the nodes run separate, as the shared sample ring needs '
            "x86-64's memory order (core/chain/sample_ring.py)")
    started = tuple(n for spec in processes for n in spec.node_names)
    try:
        manifest.suite_robot([manifest.robot_parameters_path()] + files, started)
    except ValueError as err:
        if args.robot:
            os.remove(files[-1])
        parser.error(str(err))
    names = [spec.name for spec in processes]
    commands = {view.PROCESS: view.command(args.view, args.namespace, files)} if args.view \
        else {}
    nodes = NodeSet(names + list(commands), tuple(files), log_dir=args.log_dir,
                    priority=priority, namespace=args.namespace,
                    overrides=simulated_clock() if args.sim else {}, commands=commands)
    say(f'starting {", ".join(nodes.names)} (Ctrl-C stops them); {meaning}')
    if args.sim:
        say(SIMULATED_CLOCK_NOTE)
    supervisor = Supervisor(nodes, say)
    # Ctrl-C reaches the children through the process group, and `stop` sends it again.
    try:
        nodes.start()
        supervisor.run()
    except KeyboardInterrupt:
        say('stopping')
    codes = nodes.stop()
    if args.robot:
        os.remove(files[-1])
    lines, failed = supervisor.summary(codes)
    for line in lines:
        say(line)
    return 1 if failed else 0


def say(line: str) -> None:
    """A line for the user; one whose terminal or pipe has gone must not keep `up` from
    stopping its processes (they would run on, orphaned)."""
    try:
        print(f'[contact-estimation] {line}', flush=True)
    except OSError:
        pass


def robot_files(config: list[str], robot: str | None) -> list[str]:
    """The user's parameter files (absolute), then, with `robot`, a temporary `/**` file
    setting it for every node (the caller removes it)."""
    files = [os.path.abspath(p) for p in config]
    if robot:
        files.append(parameter_file({manifest.WILDCARD: {'robot': robot_value(robot)}}))
    return files


def robot_value(robot: str) -> str:
    """`--robot` as every node gets it: a URDF file's path made absolute, a name as it is."""
    return os.path.abspath(robot) if os.path.isfile(robot) else robot
