"""Soak: the whole suite for N minutes at 1 kHz; heartbeat gaps, memory and stops (issue 19).

    PYTHONPATH=$PWD nice -n 10 python benchmarks/soak.py --minutes 10 [--contact-every 5]
                                       [--subscribe-residual] [--priority auto|N]

The core nodes run composed in their processes, as `contact-estimation up` starts them (at
its default `--priority auto`: the stops' processes at SCHED_FIFO 40 and below where the OS
allows it). Two driver processes publish what a cell would (the arm's at SCHED_FIFO 50, as
ros2_control runs a robot driver):
- joint states at 1 kHz of a Panda in free motion (every joint a sine, the effort its inverse
  dynamics, so that the residual is ~0 and no stop is due), and the wrist F/T readings of that
  motion at 1 kHz, both stamped with the wall clock;
- an empty skeleton (nobody tracked) and a lidar cloud of `--cloud-points` points (43 000 by
  default) at 10 Hz each: a cell (floor, wall, table, a person beside it) or, with
  `--cloud uniform`, points strewn through the workspace (the worst case for the processing).
With `--contact-every S`, a push of CONTACT s (FORCE on the forearm, ramping in RAMP s)
every S s: the measured torques and the F/T readings carry it (τ_ext = J(p)ᵀF), so the
detector stops (and clears HOLD_TIME after) and the estimators work as in a real contact
(issue 26: a 50 ms contact hides what a 1 s push shows). With `--subscribe-residual`, this
process also subscribes to the 1 kHz residual, as a user plotting it would.
This process listens to both stops. A controller keeping the README's contract stops after
150 ms without a stop message, so every gap over 150 ms between two messages of a stop
(heartbeats at 20 Hz: 50 ms apart) would have stopped the arm. Reported: for each stop, its
gaps over 150 ms and the longest, how often it was raised; each node process's resident
memory over the run; each process's CPU against the rclpy floor of the same run
(`_ros_load.floor`); every stop each stopping node counted, by cause, from its /diagnostics
(issue 35: with no push, any stop is one without a cause). The gaps are measured in this
process, at SCHED_FIFO 60 as a controller would be (its own delays still count in them: an
upper bound); "at the same time" counts those that overlap a gap of the other stop (two
processes silent at once: this process or the whole machine stalled). The arm driver reports
its own silences over the listener's input_timeout: a `stale_input` stop it caused has a
cause.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import sys
import time
from contextlib import ExitStack

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseArray, WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Bool

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import (FLOOR, LOG_DIR, Contacts, CpuClock, contact_effect, floor,  # noqa: E402
                       machine, realtime_priority, table)

from contact_estimation import manifest  # noqa: E402
from contact_estimation.core.contact.ft_compensation import SensorMount  # noqa: E402
from contact_estimation.core.robot.robot_model import RobotModel  # noqa: E402
from contact_estimation.launcher import chosen_priority  # noqa: E402
from contact_estimation.ros.conversions import seconds_to_stamp, xyz_to_cloud  # noqa: E402
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS  # noqa: E402
from contact_estimation.ros.spinning import spin_until  # noqa: E402
from contact_estimation.ros.testing import (composed_processes,  # noqa: E402
                                            ros_context)

RATE = 1000.0          # Hz: joint states and F/T readings
SENSOR_RATE = 10.0     # Hz: skeletons and clouds
DRIVER_STALL = 0.05    # s: the listener's input_timeout (config/joint_state_listener.yaml)
MONITOR_PRIORITY = 60  # SCHED_FIFO of this process once its children run: a controller's
PERIOD = 20.0          # s: the motion repeats exactly (every joint's frequency is k / PERIOD)
CONTRACT = 0.150       # s: the README's "stop after 150 ms without a stop message"
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
CONTACT, RAMP, HOLD_TIME = 1.0, 0.03, 0.5   # s
PUSH = Contacts(joint=3, offset=0.0, period=PERIOD, duration=CONTACT, link='panda_link5',
                point=(0.0, 0.06, -0.12), force=(0.0, 40.0, -20.0))  # N on the robot, base frame
SENSOR_NODES = ('ft_contact_estimator', 'contact_localizer', 'proximity_monitor')


def cell_cloud(rng, count: int) -> np.ndarray:
    """What a lidar sees of a cell: the floor, a wall, a table top and a person standing at
    it (a 0.2 m cylinder, 1.7 m tall), `count` points in all (base frame, m). The table and
    the person are behind the arm, beyond its protective distance: no stop is due."""
    floor = rng.uniform([-2.0, -2.0, 0.0], [2.0, 2.0, 0.0], (count * 3 // 10, 3))
    wall = np.column_stack([np.full(count // 5, -1.8), rng.uniform(-2, 2, count // 5),
                            rng.uniform(0, 2.2, count // 5)])
    table = rng.uniform([-1.2, 0.4, 0.7], [-0.9, 1.2, 0.7], (count // 5, 3))
    rest = count - len(floor) - len(wall) - len(table)
    angle, height = rng.uniform(0, 2 * np.pi, rest), rng.uniform(0, 1.7, rest)
    person = np.column_stack([-0.95 + 0.2 * np.cos(angle), -0.95 + 0.2 * np.sin(angle),
                              height])
    return np.vstack([floor, wall, table, person])


def uniform_cloud(rng, count: int) -> np.ndarray:
    """The worst case for the processing: `count` points strewn through the workspace box
    (none cropped, none merged by the voxels), 0.6 m or more from the base."""
    points = rng.uniform([-1.2, -1.2, 0.02], [1.2, 1.2, 1.6], (3 * count, 3))
    return points[np.linalg.norm(points[:, :2], axis=1) > 0.6][:count]


CLOUDS = {'cell': cell_cloud, 'uniform': uniform_cloud}


class CellStreams:
    """One period of the motion (joint states and F/T readings) and a cloud, precomputed so
    that publishing costs only the message; picklable for the driver process."""

    def __init__(self, robot: RobotModel, cloud: str, cloud_points: int,
                 contact_every: float = 0.0):
        t = np.arange(int(PERIOD * RATE)) / RATE
        cycles = np.array([1, 2, 1, 3, 2, 3, 4])          # per PERIOD: commensurate
        omega = 2 * np.pi * cycles / PERIOD
        amplitude = np.array([0.4, 0.2, 0.4, 0.3, 0.5, 0.3, 0.6])
        self.q = Q0 + amplitude * np.sin(np.outer(t, omega))
        self.v = amplitude * omega * np.cos(np.outer(t, omega))
        a = -amplitude * omega ** 2 * np.sin(np.outer(t, omega))
        self.effort = np.array([robot.rnea(q, v, acc) for q, v, acc in zip(self.q, self.v, a)])
        base = np.array([np.concatenate(robot.base_wrench(q, v, acc))
                         for q, v, acc in zip(self.q, self.v, a)])
        if contact_every:
            # The push's force: a ramp up and down of RAMP s, every `contact_every` s.
            since = t % contact_every
            scale = np.clip(np.minimum(since, CONTACT - since) / RAMP, 0.0, 1.0)
            for i in np.flatnonzero(scale > 0):
                tau_ext, wrench = contact_effect(robot, self.q[i], PUSH)
                self.effort[i] -= scale[i] * tau_ext
                base[i] += scale[i] * wrench
        mount = SensorMount()
        self.wrench = np.array([mount.from_base(w) for w in base])
        self.names = list(robot.joint_names)
        self.base = robot.base_link
        self.cloud = CLOUDS[cloud](np.random.default_rng(0), cloud_points)


def _drive(streams: CellStreams, seconds: float, reports, part: str) -> None:
    """A driver process: `part` 'arm' publishes the 1 kHz joint states and F/T readings,
    'sensors' the 10 Hz skeleton and cloud (a process each, as separate drivers would be, so
    that serialising a 0.5 MB cloud never delays a joint state); the arm's at SCHED_FIFO 50
    where allowed, as ros2_control runs a robot driver."""
    try:
        if part == 'arm':
            realtime_priority()
        with ros_context() as context:
            node = rclpy.create_node(f'soak_{part}_driver', context=context)
            spec = {name: manifest.node(name) for name in ('joint_state_listener', *SENSOR_NODES)}
            if part == 'arm':
                joints = node.create_publisher(JointState, spec['joint_state_listener'].topic(
                    'joint_states'), PIPELINE_QOS)
                ft = node.create_publisher(WrenchStamped, spec['ft_contact_estimator'].topic(
                    'ft_wrench'), PIPELINE_QOS)
                msg, reading = JointState(name=streams.names), WrenchStamped()
                reading.header.frame_id = streams.base
                rate = RATE
            else:
                skeleton = node.create_publisher(PoseArray, spec['proximity_monitor'].topic(
                    'skeleton'), PIPELINE_QOS)
                lidar = node.create_publisher(PointCloud2, spec['proximity_monitor'].topic(
                    'lidar_points'), PIPELINE_QOS)
                cloud = xyz_to_cloud(seconds_to_stamp(0.0), streams.base, streams.cloud)
                empty = PoseArray()
                empty.header.frame_id = streams.base
                rate = SENSOR_RATE
            samples, start = len(streams.q), time.monotonic()
            stalls, last = [], None  # the driver's own silences over DRIVER_STALL, s
            for i in range(int(seconds * rate)):
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                now = time.monotonic()
                if last is not None and now - last > DRIVER_STALL:
                    stalls.append(now - last)
                last = now
                stamp = seconds_to_stamp(time.time())
                if part == 'arm':
                    k = i % samples
                    msg.header.stamp = reading.header.stamp = stamp
                    msg.position, msg.velocity = streams.q[k].tolist(), streams.v[k].tolist()
                    msg.effort = streams.effort[k].tolist()
                    joints.publish(msg)
                    f, m = reading.wrench.force, reading.wrench.torque
                    (f.x, f.y, f.z), (m.x, m.y, m.z) = streams.wrench[k, :3], streams.wrench[k, 3:]
                    ft.publish(reading)
                else:
                    empty.header.stamp = cloud.header.stamp = stamp
                    skeleton.publish(empty)
                    lidar.publish(cloud)
            node.destroy_node()
        reports.put((part, stalls))
    except BaseException as err:  # re-raised in the monitor
        reports.put(err)


def _plot_residual(seconds: float, received) -> None:
    """A user's plot of the 1 kHz residual: subscribes for `seconds`, counts what arrives."""
    with ros_context() as context:
        node = rclpy.create_node('soak_residual_plot', context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)

        def count(_msg) -> None:
            received.value += 1
        node.create_subscription(JointState, manifest.node('residual_node').topic('residual'),
                                 count, PIPELINE_QOS)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.1)
        node.destroy_node()


class StopRecord:
    """Receipt times (monotonic) and values of one stop topic."""

    def __init__(self):
        self.times: list[float] = []
        self.values: list[bool] = []

    def __call__(self, msg: Bool) -> None:
        self.times.append(time.monotonic())
        self.values.append(msg.data)

    def measured(self, since: float) -> tuple[np.ndarray, np.ndarray]:
        times = np.array(self.times)
        keep = times >= since
        return times[keep], np.array(self.values, dtype=bool)[keep]

    def gaps(self, since: float) -> np.ndarray:
        """(start, end) of every gap over the contract between two messages."""
        times, _ = self.measured(since)
        over = np.flatnonzero(np.diff(times) > CONTRACT)
        return np.column_stack([times[over], times[over + 1]])

    def row(self, name: str, since: float, other: np.ndarray) -> str:
        """`other`: the other stop's gaps; a gap that overlaps one of them is the monitor's
        (this process) or the whole machine's, not this node's."""
        times, values = self.measured(since)
        gaps = self.gaps(since)
        shared = sum(bool(np.any((other[:, 0] < end) & (other[:, 1] > start)))
                     for start, end in gaps)
        raised = int(np.count_nonzero(values[1:] & ~values[:-1]))
        longest = 1e3 * np.diff(times).max() if len(times) > 1 else float('nan')
        rate = len(times) / (times[-1] - times[0]) if len(times) > 1 else float('nan')
        return (f'{name:18s} | {rate:6.1f} | {len(gaps):13d} | {shared:12d} | '
                f'{longest:11.0f} | {raised:6d} | {100 * values.mean():16.1f}')


def counts_text(diagnosed: dict[str, dict[str, str]]) -> str:
    """What each stopping node counted on its /diagnostics: stops by cause and problems by
    kind (late_heartbeats: beats sent as stop because the node had fallen behind)."""
    lines = ['counted on /diagnostics as the joint states stopped, since start:']
    for name in STOPPING:
        values = diagnosed.get(name)
        counts = [f'{k} {v}' for k, v in sorted((values or {}).items()) if v.isdigit()
                  and int(v) and not k.endswith(('_received', '_published'))]
        lines.append(f'  {name}: ' + (', '.join(counts) or 'nothing' if values is not None
                                      else 'no diagnostics'))
    return '\n'.join(lines)


def rss_mib(pid: int) -> float:
    with open(f'/proc/{pid}/status', encoding='ascii') as f:
        return next(int(line.split()[1]) for line in f if line.startswith('VmRSS')) / 1024


STOPPING = ('collision_detector', 'proximity_monitor')


def soak(minutes: float, cloud: str, cloud_points: int, contact_every: float = 0.0,
         subscribe_residual: bool = False, warmup: float = 5.0, priority: int = 0) -> str:
    load_before = ', '.join(f'{x:.2f}' for x in os.getloadavg())
    robot = RobotModel.load('panda')
    if contact_every and PERIOD % contact_every:
        raise ValueError(f'--contact-every {contact_every}: must divide {PERIOD:g} s')
    streams = CellStreams(robot, cloud, cloud_points, contact_every)
    os.makedirs(LOG_DIR, exist_ok=True)
    log = lambda name: os.path.join(LOG_DIR, f'{name}_soak.log')  # noqa: E731
    stops = {name: StopRecord() for name in STOPPING}
    with ExitStack() as stack:
        procs = stack.enter_context(composed_processes(
            {'collision_detector': {'hold_time': HOLD_TIME}}, log_path=log, priority=priority))
        context = stack.enter_context(ros_context())
        node = rclpy.create_node('soak_monitor', context=context)
        stack.callback(node.destroy_node)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        diagnosed: dict[str, dict[str, str]] = {}  # node → key values of its latest status

        def on_diagnostics(msg: DiagnosticArray) -> None:
            for status in msg.status:
                if status.name.lstrip('/') in stops:
                    diagnosed[status.name.lstrip('/')] = {kv.key: kv.value
                                                          for kv in status.values}
        for name, record in stops.items():
            node.create_subscription(Bool, manifest.node(name).topic('stop'), record, STOP_QOS)
        node.create_subscription(DiagnosticArray, manifest.node('proximity_monitor').topic(
            'diagnostics'), on_diagnostics, PIPELINE_QOS)
        spawn = multiprocessing.get_context('spawn')
        floor_process = spawn.Process(target=floor, daemon=True, args=(
            manifest.node('joint_state_listener').topic('joint_states'),))
        floor_process.start()
        stack.callback(floor_process.kill)

        if not spin_until(executor, lambda: all(r.times for r in stops.values()), 60.0):
            raise RuntimeError(f'no stop heartbeat: exit codes '
                               f'{ {n: p.poll() for n, p in procs.items()} }, logs in {LOG_DIR}')
        others = {name: node.count_publishers(manifest.node(name).topic('stop')) - 1
                  for name in stops}
        if any(others.values()):  # a graph of someone else's on this ROS domain
            raise RuntimeError(f'other publishers of the stops on ROS_DOMAIN_ID '
                               f'{os.environ["ROS_DOMAIN_ID"]}: {others}; set '
                               'CONTACT_ESTIMATION_TEST_DOMAIN to a free one')
        reports = spawn.Queue()
        for part in ('arm', 'sensors'):
            driver = spawn.Process(target=_drive, daemon=True, args=(
                streams, warmup + 60 * minutes, reports, part))
            driver.start()
            stack.callback(driver.join, 5.0)
        residuals = spawn.Value('q', 0)
        if subscribe_residual:  # a process of its own, as a plotting tool would be
            plot = spawn.Process(target=_plot_residual, daemon=True,
                                 args=(warmup + 60 * minutes, residuals))
            plot.start()
            stack.callback(plot.join, 10.0)
        monitor = realtime_priority(MONITOR_PRIORITY)  # after the children: they inherit it
        measure_from = time.monotonic() + warmup
        clocks = {**{n: CpuClock(p.pid) for n, p in procs.items()},
                  FLOOR: CpuClock(floor_process.pid)}
        cpu_from: dict[str, float] = {}
        memory: list[tuple[float, dict[str, float]]] = []
        next_sample, finished = measure_from, set()
        stalls: dict[str, list[float]] = {}
        while finished != {'arm', 'sensors'}:
            executor.spin_once(timeout_sec=0.01)
            if not cpu_from and time.monotonic() >= measure_from:
                cpu_from = {n: clock.read() for n, clock in clocks.items()}
                cpu_start = time.monotonic()
            if time.monotonic() >= next_sample:
                memory.append((time.monotonic() - measure_from,
                               {n: rss_mib(p.pid) for n, p in procs.items()}))
                next_sample += max(10.0, 60 * minutes / 10)
            try:
                outcome = reports.get_nowait()
            except queue.Empty:
                continue
            if isinstance(outcome, BaseException):
                raise outcome
            part, stalls[part] = outcome
            finished.add(part)
            if part == 'arm':  # up to 1 s before the joint states stopped (then stale)
                counted = dict(diagnosed)
        cpu = {n: 100 * (clock.read() - cpu_from[n]) / (time.monotonic() - cpu_start)
               for n, clock in clocks.items()}
        memory.append((time.monotonic() - measure_from,
                       {n: rss_mib(p.pid) for n, p in procs.items()}))
        exited = {n: p.returncode for n, p in procs.items() if p.poll() is not None}
    names = list(procs)
    gaps = [record.gaps(measure_from) for record in stops.values()]
    rows = [f'{t:6.0f} | ' + ' | '.join(f'{m[n]:{len(n)}.0f}' for n in names)
            for t, m in memory]
    return '\n\n'.join([
        f'{minutes:g} min at {RATE:.0f} Hz (joint states + F/T), skeleton and '
        f'{cloud_points}-point {cloud} cloud at {SENSOR_RATE:.0f} Hz; '
        + (f'a {CONTACT:g} s push every {contact_every:g} s; ' if contact_every else '')
        + (f'the residual subscribed ({residuals.value} received); ' if subscribe_residual
           else '')
        + f'{machine().split(", load average")[0]}; load average before the run {load_before}, '
        f'after it {", ".join(f"{x:.2f}" for x in os.getloadavg())}; the stops\' processes '
        + (f'at SCHED_FIFO {priority} and below' if priority else 'at normal priority')
        + f'; this monitor at {monitor}',
        table('stop               | msg/s  | gaps > 150 ms | at same time |'
              ' longest, ms | raised | % of time raised',
              [record.row(name, measure_from, gaps[1 - k]) for k, (name, record)
               in enumerate(stops.items())]),
        table('   t, s | ' + ' | '.join(names) + '  (RSS, MiB)', rows),
        table('process (+ children) | CPU, % of one core | × floor',
              [f'{n:20s} | {c:18.1f} | {c / cpu[FLOOR]:7.2f}' for n, c in cpu.items()]
              + [f'{"suite":20s} | {sum(cpu[n] for n in names):18.1f} | '
                 f'{sum(cpu[n] for n in names) / cpu[FLOOR]:7.2f}']),
        counts_text(counted),
        'the arm driver itself (SCHED_FIFO 50) silent for over '
        f'{DRIVER_STALL * 1e3:.0f} ms (a stale input it causes): {len(stalls["arm"])} times'
        + (f', longest {max(stalls["arm"]) * 1e3:.0f} ms' if stalls['arm'] else ''),
        f'node processes that exited: {exited or "none"}'])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--minutes', type=float, default=10.0)
    parser.add_argument('--cloud', choices=sorted(CLOUDS), default='cell',
                        help='a cell (floor, wall, table, person) or points strewn through '
                        'the workspace (the worst case)')
    parser.add_argument('--cloud-points', type=int, default=43_000)
    parser.add_argument('--contact-every', type=float, default=0.0, metavar='S',
                        help=f'a {CONTACT:g} s push every S s (a divisor of {PERIOD:g}); 0: none')
    parser.add_argument('--subscribe-residual', action='store_true',
                        help='subscribe to the 1 kHz residual too, as a user plotting it')
    parser.add_argument('--priority', default='auto', metavar='auto|N',
                        help="the stops' processes' SCHED_FIFO priority, as `up --priority` "
                             '(default auto, as `up`; 0: normal)')
    args = parser.parse_args()
    priority, meaning = chosen_priority(args.priority)
    print(meaning, flush=True)
    print(soak(args.minutes, args.cloud, args.cloud_points, args.contact_every,
               args.subscribe_residual, priority=priority))


if __name__ == '__main__':
    main()
