"""The live view never costs the stop: the suite's CPU at 1 kHz free motion without the view,
with the view and no client, and with the view and a client subscribed to every channel.

The suite runs as `end_to_end.py --mode composed --free-motion` runs it (its four composed
processes, the driver in a process of its own at real-time priority where the OS allows,
Panda joint states and base F/T readings at 1 kHz); the view is `contact-estimation view`
as `up --view` starts it (a process of its own, normal priority), and the client a real
WebSocket client of Foxglove's protocol (contact_estimation/foxglove_client.py) in a process
of its own, subscribed to every channel the view advertises and decoding every message, as
the Foxglove app does. Each case is one run; every CPU figure is beside the rclpy floor of
the same run (_ros_load.floor), and the chain's messages lost say whether it kept up.

    .venv/bin/python benchmarks/view_cost.py [--duration S] [--runs N]
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
import sys
import time
from contextlib import contextmanager
from typing import Iterator

from diagnostic_msgs.msg import DiagnosticArray
from tqdm import tqdm

from _ros_load import (FLOOR, LOG_DIR, Output, PandaStream, machine, run_load, table)
from end_to_end import NODES, RATE, WARMUP, NodeCounters
from contact_estimation import manifest
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.foxglove_client import FoxgloveClient, free_port
from contact_estimation.ros.testing import process

CASES = ('no view', 'view, no client', 'view + client')
VIEW, CLIENT = 'view', 'view client'
READY = 60.0   # s: for the view to serve and the client to subscribe (a loaded machine)


def _watch(url: str, received, subscribed) -> None:
    """The client's process: every channel subscribed, every message decoded and counted."""

    def count(topic: str, message) -> bool:
        with received.get_lock():
            received.value += 1
        return False

    asyncio.run(FoxgloveClient(url, subscribed.set).run_when_served(count))


def _served(log: str, view) -> str:
    """The view's URL once it serves (from its log)."""
    deadline = time.monotonic() + READY
    while time.monotonic() < deadline:
        with open(log, encoding='utf-8') as f:
            found = re.search(r'ws://\S+:\d+', f.read())
        if found:
            return found[0]
        if view.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f'the view did not serve: see {log}')


@contextmanager
def viewing(client: bool, received) -> Iterator[dict[str, int]]:
    """The view (and, with `client`, a client subscribed to it) for the block: their pids."""
    log = os.path.join(LOG_DIR, 'view_load.log')
    command = [sys.executable, '-m', 'contact_estimation', 'view', '--port', str(free_port())]
    with process(command, log) as view:
        url = _served(log, view)
        if not client:
            yield {VIEW: view.pid}
            return
        spawn = multiprocessing.get_context('spawn')
        subscribed = spawn.Event()
        watcher = spawn.Process(target=_watch, args=(url, received, subscribed), daemon=True)
        watcher.start()
        try:
            if not subscribed.wait(READY):
                raise RuntimeError(f'no client subscribed to {url}')
            yield {VIEW: view.pid, CLIENT: watcher.pid}
        finally:
            watcher.kill()
            watcher.join()


def measure(case: str, stream: PandaStream, duration: float) -> dict[str, object]:
    """One run of the composed suite in free motion, with the view as `case` says."""
    detector = manifest.node('collision_detector')
    counters = NodeCounters()
    received = multiprocessing.get_context('spawn').Value('q', 0)
    beside = None if case == 'no view' else (
        lambda: viewing(case == 'view + client', received))
    with tqdm(total=int(WARMUP + duration), unit='s', desc=case) as bar:
        run = run_load(NODES, stream, manifest.topic('joint_state_listener', 'joint_states'),
                       [Output(DiagnosticArray, detector.topic('diagnostics'), counters)],
                       duration, WARMUP, bar.update, composed=True,
                       wrench_topic=manifest.topic('ft_contact_estimator', 'ft_wrench'),
                       beside=beside)
    suite = [spec.name for spec in manifest.composed()]
    return {'case': case, 'cpu': run.cpu, 'suite': sum(run.cpu[name] for name in suite),
            'lost': run.published - counters.count(detector.name, 'residuals_received'),
            'published': run.published, 'received': received.value,
            'load': os.getloadavg()[0], 'driver': run.priority}


def rows(results: list[dict[str, object]]) -> list[str]:
    """One line per run: each CPU figure (% of one core) and its ratio to the run's floor."""

    def cell(cpu: dict[str, float], value: float | None) -> str:
        if value is None:
            return f'{"-":>13s}'
        return f'{value:5.1f} ({value / cpu[FLOOR]:4.2f}×)'

    chain, relay = manifest.composed()[0].name, manifest.publishing_process().name
    lines = []
    for r in results:
        cpu = r['cpu']
        lines.append(
            f'{r["case"]:15s} | {cpu[FLOOR]:5.1f} | {cell(cpu, cpu[chain])} | '
            f'{cell(cpu, cpu[relay])} | {cell(cpu, r["suite"])} | {cell(cpu, cpu.get(VIEW))} | '
            f'{cell(cpu, cpu.get(CLIENT))} | {r["received"]:8d} | {r["lost"]:4d} | '
            f'{r["load"]:4.2f}')
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=20.0, help='measured seconds a run')
    parser.add_argument('--runs', type=int, default=1, help='runs of each case')
    args = parser.parse_args(argv)
    print(f'machine: {machine()}')
    stream = PandaStream(RobotModel.load('panda'), RATE, int((WARMUP + args.duration) * RATE),
                         wrenches=True)
    results = [measure(case, stream, args.duration) for _ in range(args.runs) for case in CASES]
    print(f'\nthe composed suite at {RATE:.0f} Hz in free motion for {args.duration:.0f} s a '
          f'run (after {WARMUP:.0f} s warm-up), normal priority, driver at '
          f'{results[0]["driver"]}; CPU in % of one core (× the rclpy floor of the same run); '
          'suite = chain + estimation + proximity + relay; lost = joint states the detector '
          'did not receive; load = 1-min load average after the run')
    print(table('case            | floor | chain         | relay         | suite         | '
                'view          | client        | messages | lost | load', rows(results)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
