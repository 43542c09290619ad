"""End to end at 1 kHz: the whole suite, composed against separate, in the same run.

/joint_states and the base F/T readings → listener → residual_node → collision_detector →
stop, beside ft_contact_estimator, contact_localizer and proximity_monitor: every core node
of nodes.yaml, with their config/ files (the detector with hold_time = 0.1 s so that the
stop clears by itself, and a fast time-scaling recovery so that f_S is back at 1 before the
next contact). The load generator plays a robot driver from a process of its own at
real-time priority (SCHED_FIFO, as ros2_control runs one; it says when the OS refuses):
Panda joint states at 1 kHz (7 arm + 2 finger joints, as the franka driver) and the base
F/T sensor's readings of the same samples, and every PERIOD s a physical contact burst of
CONTACT s: FORCE on LINK, which gives τ_ext = J(p)ᵀF and [F; p × F] on the sensor, the kind
of contact the localizer and the F/T estimator estimate.

stop carries no stamp and is only published on change (plus a heartbeat), so its latency
is measured per contact: the detector's collision event carries the stamp of the residual
sample that raised the stop (= the publish time of the joint state that triggered it);
latency = receipt of stop = True (resp. the first f_S ≤ 0) − that publish time.
Live against offline: the same samples, stamps and parameters run through core/ alone
(conditioner, residual, detector) give the sample that raises each stop offline; the live
stop's receipt − that sample's publish time is how much later the live chain stops than
the algorithm allows (0 if it keeps up; it also counts contacts where the live chain
stopped on another sample). Messages lost = joint states published − residuals the
detector counted (its /diagnostics). The monitor does not take the 1 kHz streams itself.
--mode runs the nodes composed in their three processes (the default of `up`), as separate
processes, or both, one after the other in each of --runs runs.
Aims (issue 18): composed, all six nodes ≤ 35 % of one core in free motion (see
--free-motion), stop p50 ≤ 0.5 ms and p99 ≤ 2 ms; live within 2 ms of offline at p50 and
p95.

    .venv/bin/python benchmarks/end_to_end.py [--quick] [--duration S] [--rate HZ]
                                              [--mode composed|separate|both] [--runs N]
                                              [--free-motion] [--wake-period S]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import Bool, Float64
from tqdm import tqdm

from _ros_load import (Contacts, LoadResult, Output, PandaStream, cpu_table, machine,
                       run_load, second_job, suite_names, table)
from contact_estimation import manifest
from contact_estimation.core.chain import residual
from contact_estimation.core.chain.detector import (BEHIND, COLLISION, FAULT, STALE,
                                                    CollisionDetector, DetectorConfig)
from contact_estimation.core.chain.joint_state_conditioning import JointStateConditioner
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds
from contact_estimation.ros.qos import STOP_QOS

RATE = 1000.0
STOP_CAUSES = (COLLISION, BEHIND, STALE, FAULT)  # counted on the detector's /diagnostics
WARMUP = 3.0
PERIOD, CONTACT = 0.25, 0.05  # s: a contact every 0.25 s, lasting 0.05 s
LINK, POINT = 'panda_link5', (0.0, 0.06, -0.12)  # on the forearm, link frame (m)
FORCE = (0.0, 60.0, -30.0)   # N ON the robot, base frame: 5-20 N·m on joints 1-4
DETECTOR = {'hold_time': 0.1, 'time_scaling.resume_delay': 0.05,
            'time_scaling.recovery_rate': 100.0}
NODES = {name: DETECTOR if name == 'collision_detector' else {}
         for name in manifest.composed_nodes()}


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
    collision event, and (receipt time, cause) of every event."""

    def __init__(self):
        self.stamps = []
        self.causes: list[tuple[float, str]] = []

    def __call__(self, msg: DiagnosticArray, now: float) -> None:
        for status in msg.status:
            cause = {kv.key: kv.value for kv in status.values}.get('event')
            self.causes.append((now, cause))
            if cause == COLLISION:
                self.stamps.append(stamp_to_seconds(msg.header.stamp))

    def stops(self, start: float, end: float) -> dict[str, int]:
        """Stops by cause (STOP_CAUSES) received from `start` to `end` (wall time): the
        stale input after the driver's last message is the end of the run, not counted."""
        return {cause: sum(start <= t <= end and c == cause for t, c in self.causes)
                for cause in STOP_CAUSES}


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


def offline_stops(robot: RobotModel, stream: PandaStream, stamps: list[float]) -> np.ndarray:
    """The stamps of the samples that raise a collision stop when the nodes' defaults (and
    DETECTOR) run through core/ alone on these samples and stamps, with the stop cleared as
    hold_time clears it."""
    conditioner = JointStateConditioner.for_robot(robot)
    model = residual.ResidualConfig().residual(robot)
    detector = CollisionDetector(DetectorConfig.build(robot.joint_names,
                                                      hold_time=DETECTOR['hold_time']))
    names, stopped, triggers = stream.names, False, []
    for i, t in enumerate(stamps):
        msg = stream.message(i, seconds_to_stamp(t))
        result = conditioner.condition(t, names, msg.position, msg.velocity, msg.effort,
                                       now=t)
        if result.sample is None:
            continue
        sample = result.sample
        tau_ext = model.update(t, sample.q, sample.v, sample.tau)
        state = detector.update(t, tau_ext, sample.v, stamp=t)
        if state.stop and state.cause == COLLISION and not stopped:
            triggers.append(t)
        stopped = state.stop and state.cause == COLLISION
    return np.array(triggers)


MODES = ('composed', 'separate')


@dataclass
class ModeRun:
    """One run of one mode: the stop latencies, the messages lost, CPU per process."""

    mode: str
    stop: LoadResult
    hold: LoadResult
    lost: int
    published: int
    cpu: dict[str, float]
    behind_offline: np.ndarray   # per contact: live stop − offline trigger sample, s
    other_sample: int            # contacts the live chain stopped on another sample
    priority: str

    @property
    def nodes_cpu(self) -> float:
        """CPU of the nodes' process(es), % of one core (not the monitor or the publisher)."""
        return sum(cpu for name, cpu in self.cpu.items() if name in suite_names(self.cpu))


def measure(mode: str, rate: float, duration: float, free_motion: bool,
            priority: int, wake_period: float | None = None) -> ModeRun:
    """One run of the suite in `mode` (composed, or separate processes), the listener's
    `wake_period` if given; prints its tables."""
    nodes = NODES if wake_period is None else {
        **NODES, 'joint_state_listener': {'wake_period': wake_period}}
    listener, detector = manifest.node('joint_state_listener'), manifest.node('collision_detector')
    robot = RobotModel.load('panda')
    contacts = None if free_motion else Contacts(0, 0.0, PERIOD, CONTACT, LINK, POINT, FORCE)
    stream = PandaStream(robot, rate, int((WARMUP + duration) * rate), contacts=contacts,
                         wrenches=True)
    counters, events = NodeCounters(), CollisionEvents()
    stops, holds = Rises(lambda m: m.data), Rises(lambda m: m.data <= 0.0)
    outputs = [Output(DiagnosticArray, detector.topic('diagnostics'), counters),
               Output(DiagnosticArray, detector.topic('events'), events),
               Output(Bool, detector.topic('stop'), stops, STOP_QOS),
               Output(Float64, detector.topic('time_scaling'), holds)]
    with tqdm(total=int(WARMUP + duration), unit='s', desc=f'end to end, {mode}') as bar:
        run = run_load(nodes, stream, listener.topic('joint_states'), outputs, duration, WARMUP,
                       bar.update, composed=mode == 'composed',
                       wrench_topic=manifest.node('ft_contact_estimator').topic('ft_wrench'),
                       priority=priority)

    triggers = np.array([s for s in events.stamps if s >= run.measure_from])
    stop = LoadResult(rate, len(triggers), latencies(triggers, stops.times))
    hold = LoadResult(rate, len(triggers), latencies(triggers, holds.times))
    offline = offline_stops(robot, stream, run.stamps)
    offline = offline[offline >= run.measure_from]
    behind = latencies(offline, stops.times)
    other_sample = len(set(np.round(offline, 6)) ^ set(np.round(triggers, 6)))
    hops = [('listener published', counters.count(listener.name, 'samples_published')),
            ('residual_node published', counters.count('residual_node', 'residuals_published')),
            ('detector received', counters.count(detector.name, 'residuals_received'))]
    lost = run.published - hops[-1][1]
    processes = 'composed (chain, estimation)' if mode == 'composed' else 'as separate processes'

    what = ('free motion' if free_motion else f'a {np.linalg.norm(FORCE):.0f} N contact on '
            f'{LINK} every {PERIOD} s for {CONTACT} s')
    print(f'\nend to end: {rate:.0f} Hz for {duration:.0f} s (after {WARMUP:.0f} s warm-up), '
          f'the {len(NODES)} core nodes {processes} at '
          f'{f"SCHED_FIFO {priority}" if priority else "normal priority"}; {what}; driver at '
          f'{run.priority}')
    print(table(f'output, latency from the input publish     | {LoadResult.HEADER}', [
        f'stop = True, per contact (from trigger)    | {stop.cells()}',
        f'time_scaling ≤ 0, per contact (from trig.) | {hold.cells()}',
        f'stop = True, from the offline trigger      | '
        f'{LoadResult(rate, len(offline), behind).cells()}']))
    print(f'joint states published {run.published} (warm-up included); '
          + ', '.join(f'{hop} {count}' for hop, count in hops)
          + f': {lost} lost ({100.0 * lost / max(run.published, 1):.2f} %)')
    print(f'collision stops: {len(triggers)} live, {len(offline)} offline; samples that '
          f'differ {other_sample}')
    causes = events.stops(run.measure_from, run.stamps[-1] + 0.05)
    print('detector stops by cause while the driver published: '
          + ', '.join(f'{c} {n}' for c, n in causes.items())
          + f"; lag p50 / p99 / max since start: "
          f"{counters.values.get(detector.name, {}).get('lag', '-')}")
    print(f'\n{cpu_table(run)}')
    return ModeRun(mode, stop, hold, lost, run.published, run.cpu, behind, other_sample,
                   run.priority)


def summary(runs: list[ModeRun]) -> str:
    """Every run of every mode, one line each, and the aims (issue 18)."""
    rows = []
    for r in sorted(runs, key=lambda r: MODES.index(r.mode)):
        behind = (f'{1e3 * np.percentile(r.behind_offline, 50):6.2f} / '
                  f'{1e3 * np.percentile(r.behind_offline, 95):6.2f}'
                  if r.behind_offline.size else '     - /      -')
        rows.append(f'{r.mode:9s} | {r.stop.sent:8d} | {r.stop.lost:6d} | '
                    f'{1e3 * r.stop.percentile(50):7.2f} | {1e3 * r.stop.percentile(99):7.2f} | '
                    f'{1e3 * r.stop.percentile(100):7.2f} | {behind} | {r.other_sample:5d} | '
                    f'{r.lost:5d} of {r.published:6d} | {r.nodes_cpu:6.1f} | ' + ', '.join(
                        f'{name} {cpu:.1f}' for name, cpu in r.cpu.items()))
    text = table('mode      | contacts | missed | p50, ms | p99, ms | max, ms | behind offline '
                 'p50 / p95, ms | other sample | lost           | CPU, % | CPU per process, '
                 '% of one core', rows)
    aims = []
    for mode in MODES:
        mine = [r for r in runs if r.mode == mode]
        if not mine:
            continue
        met = sum(r.stop.percentile(50) <= 0.5e-3 and r.stop.percentile(99) <= 2e-3
                  for r in mine)
        live = sum(r.behind_offline.size > 0 and np.percentile(r.behind_offline, 95) <= 2e-3
                   for r in mine)
        cpu = sum(r.nodes_cpu <= 35.0 for r in mine)
        aims.append(f'{mode}: stop p50 ≤ 0.5 ms and p99 ≤ 2 ms in {met} of {len(mine)} runs; '
                    f'live within 2 ms of offline (p95) in {live}; nodes ≤ 35 % of one core '
                    f'in {cpu} (the aim is for free motion: --free-motion)')
    return text + '\n' + '\n'.join(aims)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=60.0, help='measured seconds')
    parser.add_argument('--quick', action='store_true', help='10 s instead of 60 s')
    parser.add_argument('--rate', type=float, default=RATE, help='joint states per second')
    parser.add_argument('--mode', choices=(*MODES, 'both'), default='both',
                        help='the nodes composed in one process, as separate processes, or '
                             'both, one after the other in each run')
    parser.add_argument('--runs', type=int, default=1, help='runs of each mode')
    parser.add_argument('--priority', type=int, default=0, metavar='N',
                        help='run the suite at SCHED_FIFO N (below the driver\'s 50), as the '
                             'README advises beside a real arm; 0: normal priority')
    parser.add_argument('--free-motion', action='store_true',
                        help='no contact: the CPU the suite needs at rest (the 35 %% aim)')
    parser.add_argument('--wake-period', type=float, default=None, metavar='S',
                        help="the chain's joint_state_listener wake_period (default: its "
                             'config file): the least time between two of its wakes at rest')
    parser.add_argument('--second-job', action='store_true',
                        help='another program taking one core at normal priority meanwhile')
    args = parser.parse_args(argv)
    duration = 10.0 if args.quick else args.duration
    modes = MODES if args.mode == 'both' else (args.mode,)
    print(f'machine: {machine()}')
    with second_job(args.second_job):
        runs = [measure(mode, args.rate, duration, args.free_motion, args.priority,
                        args.wake_period)
                for _ in range(args.runs) for mode in modes]
    print(f'\nall runs: {args.rate:.0f} Hz for {duration:.0f} s each; stop latency per contact; '
          'CPU = the nodes\' processes, % of one core\n' + summary(runs))
    return 0


if __name__ == '__main__':
    sys.exit(main())
