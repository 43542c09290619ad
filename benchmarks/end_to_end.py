"""End to end at 1 kHz: /joint_states → listener → residual_node → collision_detector → stop.

The three core nodes run as real processes (their config/ files; the detector with
hold_time = 0.1 s so that the stop clears by itself, and a fast time-scaling recovery so that
f_S is back at 1 before the next contact). The load generator plays Panda joint states at
1 kHz (7 arm + 2 finger joints, as the franka driver) and, every PERIOD s, adds a
collision-level torque (OFFSET N·m on joint 4) for CONTACT s. --rate runs another rate
(the detector's persistence is in seconds: the same at every rate) to see where the
pipeline keeps up.

stop and time_scaling carry no stamp, and stop is only published on change (plus a
heartbeat), so their latency is measured per contact: the detector's collision event carries
the stamp of the residual sample that raised the stop (= the publish time of the joint state
that triggered it); latency = receipt of stop = True (resp. the first f_S ≤ 0) − that publish
time. Messages lost = joint states published − residuals the detector counted (its
/diagnostics). The monitor does not take the 1 kHz τ_ext stream itself, so that it does not
load the 2 cores the pipeline runs on (benchmarks/residual_load.py times τ_ext per sample).
--mode runs the nodes as separate processes, in one process (pipeline mode, issue 13:
nobody here subscribes to the 1 kHz joint_state and residual streams, so they are handed
over and not published), or both, one after the other in each of --runs runs.
Aims: separate mode stop p99 < 5 ms (issue 4); pipeline mode stop p99 < 2 ms in every run
and < 50 % of one core (issue 13).

    .venv/bin/python benchmarks/end_to_end.py [--quick] [--duration S] [--rate HZ]
                                              [--mode separate|pipeline|both] [--runs N]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import Bool, Float64
from tqdm import tqdm

from _ros_load import (Contacts, LoadResult, Output, PandaStream, cpu_table,
                       machine, run_load, table)
from contact_estimation import manifest
from contact_estimation.core.detector import COLLISION
from contact_estimation.core.robot_model import RobotModel
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.qos import STOP_QOS

RATE = 1000.0
WARMUP = 3.0
PERIOD, CONTACT = 0.25, 0.05  # s: a contact every 0.25 s, lasting 0.05 s
OFFSET, JOINT = 30.0, 3     # N·m on joint 4 (threshold 4 N·m)
NODES = {'joint_state_listener': {}, 'residual_node': {},
         'collision_detector': {'hold_time': 0.1, 'time_scaling_resume_delay': 0.05,
                                'time_scaling_recovery_rate': 100.0}}


class Rises:
    """Output callback: receipt times at which `active(msg)` turns true; message count."""

    def __init__(self, active):
        self.active, self.last, self.times, self.received = active, True, [], []

    def __call__(self, msg, now: float) -> None:
        active = self.active(msg)
        if active and not self.last:
            self.times.append(now)
        self.last = active
        self.received.append(now)


class NodeCounters:
    """Output callback on /diagnostics: the latest message counters of every node."""

    def __init__(self):
        self.values: dict[str, dict[str, str]] = {}

    def __call__(self, msg: DiagnosticArray, now: float) -> None:
        for status in msg.status:
            self.values[status.name.lstrip('/')] = {kv.key: kv.value for kv in status.values}

    def count(self, node: str, key: str) -> int:
        return int(self.values.get(node, {}).get(key, 0))


class CollisionEvents:
    """Output callback: the stamp (= publish time of the triggering joint state) of every
    collision event."""

    def __init__(self):
        self.stamps = []

    def __call__(self, msg: DiagnosticArray, now: float) -> None:
        for status in msg.status:
            if {kv.key: kv.value for kv in status.values}.get('event') == COLLISION:
                self.stamps.append(stamp_to_seconds(msg.header.stamp))


def latencies(triggers: np.ndarray, rises: list[float]) -> np.ndarray:
    """Per trigger, the first rise after it − the trigger (a rise after the next trigger,
    or none, is a miss and not counted)."""
    rises = np.asarray(rises)
    result = []
    for k, t in enumerate(triggers):
        later = rises[rises >= t]
        limit = triggers[k + 1] if k + 1 < len(triggers) else np.inf
        if later.size and later[0] < limit:
            result.append(later[0] - t)
    return np.array(result)


MODES = ('separate', 'pipeline')


@dataclass
class ModeRun:
    """One run of one mode: the stop latencies, the messages lost, CPU per process."""

    mode: str
    stop: LoadResult
    hold: LoadResult
    lost: int
    published: int
    cpu: dict[str, float]

    @property
    def nodes_cpu(self) -> float:
        """CPU of the nodes' process(es), % of one core (not the monitor or the publisher)."""
        return sum(cpu for name, cpu in self.cpu.items()
                   if name not in ('monitor', 'load publisher'))


def measure(mode: str, rate: float, duration: float) -> ModeRun:
    """One run of the three nodes in `mode` (separate processes, or pipeline mode); prints
    its tables."""
    listener, detector = manifest.node('joint_state_listener'), manifest.node('collision_detector')
    stream = PandaStream(RobotModel.load('panda'), rate, int((WARMUP + duration) * rate),
                         contacts=Contacts(JOINT, OFFSET, PERIOD, CONTACT))
    counters, events = NodeCounters(), CollisionEvents()
    stops, holds = Rises(lambda m: m.data), Rises(lambda m: m.data <= 0.0)
    outputs = [Output(DiagnosticArray, detector.topic('diagnostics'), counters),
               Output(DiagnosticArray, detector.topic('events'), events),
               Output(Bool, detector.topic('stop'), stops, STOP_QOS),
               Output(Float64, detector.topic('time_scaling'), holds)]
    with tqdm(total=int(WARMUP + duration), unit='s', desc=f'end to end, {mode}') as bar:
        run = run_load(NODES, stream, listener.topic('joint_states'), outputs, duration, WARMUP,
                       bar.update, pipeline=mode == 'pipeline')

    contacts = int(np.ceil(run.sent / (PERIOD * rate)))  # onsets in the measured period (±1)
    triggers = np.array([s for s in events.stamps if s >= run.measure_from])
    stop = LoadResult(rate, len(triggers), latencies(triggers, stops.times))
    hold = LoadResult(rate, len(triggers), latencies(triggers, holds.times))
    hops = [('listener published', counters.count(listener.name, 'samples_published')),
            ('residual_node published', counters.count('residual_node', 'residuals_published')),
            ('detector received', counters.count(detector.name, 'residuals_received'))]
    lost = run.published - hops[-1][1]
    processes = ('in one process (pipeline mode)' if mode == 'pipeline'
                 else 'as separate processes')

    print(f'\nend to end: {rate:.0f} Hz for {duration:.0f} s (after {WARMUP:.0f} s warm-up), '
          f'nodes {", ".join(NODES)} {processes}; a {OFFSET:.0f} N·m contact on joint '
          f'{JOINT + 1} every {PERIOD} s for {CONTACT} s')
    print(table(f'output, latency from the input publish     | {LoadResult.HEADER}', [
        f'stop = True, per contact (from trigger)    | {stop.cells()}',
        f'time_scaling ≤ 0, per contact (from trig.) | {hold.cells()}']))
    print(f'joint states published {run.published} (warm-up included); '
          + ', '.join(f'{hop} {count}' for hop, count in hops)
          + f': {lost} lost ({100.0 * lost / max(run.published, 1):.2f} %)')
    print(f'contacts published ≈ {contacts}, collision events received {len(triggers)}')
    print(f'\n{cpu_table(run)}')
    return ModeRun(mode, stop, hold, lost, run.published, run.cpu)


def summary(runs: list[ModeRun]) -> str:
    """Every run of every mode, one line each, and the aims (issues 4 and 13)."""
    rows = []
    for r in sorted(runs, key=lambda r: MODES.index(r.mode)):
        rows.append(f'{r.mode:9s} | {r.stop.sent:8d} | {r.stop.lost:6d} | '
                    f'{1e3 * r.stop.percentile(50):7.2f} | {1e3 * r.stop.percentile(99):7.2f} | '
                    f'{1e3 * r.stop.percentile(100):7.2f} | {r.lost:5d} of {r.published:6d} | '
                    f'{r.nodes_cpu:6.1f} | ' + ', '.join(
                        f'{name} {cpu:.1f}' for name, cpu in r.cpu.items()))
    text = table('mode      | contacts | missed | p50, ms | p99, ms | max, ms | lost           '
                 '| CPU, % | CPU per process, % of one core', rows)
    aims = []
    for mode, p99_aim, cpu_aim in (('separate', 5e-3, None), ('pipeline', 2e-3, 50.0)):
        mine = [r for r in runs if r.mode == mode]
        if not mine:
            continue
        p99_met = sum(r.stop.percentile(99) < p99_aim for r in mine)
        line = f'{mode}: stop p99 < {1e3 * p99_aim:g} ms in {p99_met} of {len(mine)} runs'
        if cpu_aim is not None:
            cpu_met = sum(r.nodes_cpu < cpu_aim for r in mine)
            line += f'; CPU < {cpu_aim:g} % of one core in {cpu_met} of {len(mine)} runs'
        aims.append(line)
    return text + '\n' + '\n'.join(aims)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=60.0, help='measured seconds')
    parser.add_argument('--quick', action='store_true', help='10 s instead of 60 s')
    parser.add_argument('--rate', type=float, default=RATE, help='joint states per second')
    parser.add_argument('--mode', choices=(*MODES, 'both'), default='both',
                        help='the nodes as separate processes, in one (pipeline mode), or '
                             'both, one after the other in each run')
    parser.add_argument('--runs', type=int, default=1, help='runs of each mode')
    args = parser.parse_args(argv)
    duration = 10.0 if args.quick else args.duration
    modes = MODES if args.mode == 'both' else (args.mode,)
    print(f'machine: {machine()}')
    runs = [measure(mode, args.rate, duration) for _ in range(args.runs) for mode in modes]
    print(f'\nall runs: {args.rate:.0f} Hz for {duration:.0f} s each; stop latency per contact; '
          'CPU = the nodes\' processes, % of one core\n' + summary(runs))
    return 0


if __name__ == '__main__':
    sys.exit(main())
