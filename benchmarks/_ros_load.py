"""Sustained-rate load on nodes run as real processes: messages lost, latency, CPU use.

Shared by the benchmarks that feed the pipeline a fixed-rate stream (joint states at 1 kHz,
as the Panda's franka driver publishes them) and time what comes out. The nodes run the way
`ros2 launch` starts them (`ros/testing.node_process`), on a ROS domain of their own on
localhost. A publisher thread sends input i at its deadline with the wall-clock time as its
stamp; the nodes keep the stamp, so latency = receipt time − stamp, across every DDS hop and
every node's work. The first `warmup` seconds (discovery, first-call costs) are not counted.
CPU use is each node process's utime + stime (/proc/<pid>/stat) over the measured period.
"""
from __future__ import annotations

import os
import platform
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState

from contact_estimation.core.robot_model import RobotModel
from contact_estimation.core.trajectory import SmoothRandomTrajectory
from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds
from contact_estimation.ros.qos import PIPELINE_QOS
from contact_estimation.ros.testing import node_process, ros_context, spin_for, spin_until

DRAIN = 1.0  # s of listening after the last input (stop has a heartbeat: never quiet)
LOG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'out')


def machine() -> str:
    """CPU model, cores, Python version and load average: the context of every figure."""
    model = 'unknown CPU'
    with open('/proc/cpuinfo', encoding='utf-8') as f:
        for line in f:
            if line.startswith('model name'):
                model = line.split(':', 1)[1].strip()
                break
    load = ', '.join(f'{x:.2f}' for x in os.getloadavg())
    return (f'{model}, {os.cpu_count()} cores, Python {platform.python_version()}, '
            f'load average before the run {load}')


class CpuClock:
    """CPU time (user + system, s) a process has used, from /proc/<pid>/stat."""

    TICK = os.sysconf('SC_CLK_TCK')

    def __init__(self, pid: int):
        self.path = f'/proc/{pid}/stat'

    def read(self) -> float:
        with open(self.path, encoding='ascii') as f:
            fields = f.read().rsplit(')', 1)[1].split()  # after "pid (comm)"
        return (int(fields[11]) + int(fields[12])) / self.TICK  # fields 14, 15 of proc(5)


class PandaStream:
    """Joint states of a Panda in smooth motion, as the franka driver publishes them.

    Position, velocity and effort of the 7 arm joints (effort = the URDF inverse dynamics of
    the motion, so the residual is ~0 without an added offset) plus the two finger joints,
    precomputed for `count` samples at `rate` so that publishing costs only the message.
    """

    FINGERS = ['panda_finger_joint1', 'panda_finger_joint2']

    def __init__(self, robot: RobotModel, rate: float, count: int, fingers: bool = True):
        trajectory = SmoothRandomTrajectory(robot, seed=0, speed_scale=0.3, amplitude=0.5)
        samples = [trajectory.sample(i / rate) for i in range(count)]
        self.q = np.array([s[0] for s in samples])
        self.v = np.array([s[1] for s in samples])
        self.effort = np.array([robot.rnea(*s) for s in samples])
        extra = len(self.FINGERS) if fingers else 0
        self.names = list(robot.joint_names) + (self.FINGERS if fingers else [])
        self._extra = [0.02] * extra, [0.0] * extra, [0.0] * extra

    def message(self, i: int, stamp, effort_offset: np.ndarray | None = None) -> JointState:
        effort = self.effort[i] if effort_offset is None else self.effort[i] + effort_offset
        msg = JointState(name=self.names)
        msg.header.stamp = stamp
        msg.header.frame_id = ''
        msg.position = self.q[i].tolist() + self._extra[0]
        msg.velocity = self.v[i].tolist() + self._extra[1]
        msg.effort = effort.tolist() + self._extra[2]
        return msg


class StampLatencies:
    """Output callback: (stamp, receipt time) of every message with a `header.stamp`."""

    def __init__(self):
        self.pairs: list[tuple[float, float]] = []

    def __call__(self, msg, now: float) -> None:
        self.pairs.append((stamp_to_seconds(msg.header.stamp), now))

    def since(self, start: float) -> np.ndarray:
        """Latencies (s) of the outputs whose input was published at or after `start`."""
        pairs = np.array(self.pairs).reshape(-1, 2)
        measured = pairs[pairs[:, 0] >= start]
        return measured[:, 1] - measured[:, 0]


@dataclass
class Output:
    """A topic the load generator listens to; `callback(msg, receipt_wall_time)`."""

    msg_type: type
    topic: str
    callback: Callable
    qos: object = field(default_factory=lambda: PIPELINE_QOS)


@dataclass
class Run:
    """What one load run measured, for the benchmark to summarise."""

    measure_from: float = float('inf')  # wall time of the first measured input
    sent: int = 0                       # inputs published in the measured period
    cpu: dict[str, float] = field(default_factory=dict)  # % of one core, per node process


@dataclass
class LoadResult:
    rate: float
    sent: int
    latencies: np.ndarray  # s, one per output received for a measured input

    @property
    def received(self) -> int:
        return len(self.latencies)

    @property
    def lost(self) -> int:
        return self.sent - self.received

    def percentile(self, p: float) -> float:
        return float(np.percentile(self.latencies, p)) if self.received else float('nan')

    def cells(self) -> str:
        return (f'{self.sent:7d} | {self.lost:6d} ({100.0 * self.lost / max(self.sent, 1):5.2f} %)'
                f' | {1e3 * self.percentile(50):7.3f} | {1e3 * self.percentile(99):7.3f} | '
                f'{1e3 * self.percentile(100):7.3f}')

    HEADER = '   sent |   lost           | p50, ms | p99, ms | max, ms'


def run_load(nodes: dict[str, dict], input_type, input_topic: str,
             make_input: Callable[[int, object], object], outputs: list[Output],
             rate: float, duration: float, warmup: float = 2.0, progress=None,
             input_qos=PIPELINE_QOS) -> Run:
    """Start `nodes` (name → parameter overrides) as processes and feed them
    `make_input(i, stamp)` on `input_topic` at `rate` Hz for warmup + duration s.

    Logs go to out/<node>_load.log. `progress(k)` is called every second of publishing.
    """
    run = Run()
    os.makedirs(LOG_DIR, exist_ok=True)
    with ExitStack() as stack:
        procs = {name: stack.enter_context(node_process(
            name, overrides=overrides, log_path=os.path.join(LOG_DIR, f'{name}_load.log')))
            for name, overrides in nodes.items()}
        context = stack.enter_context(ros_context())
        node = rclpy.create_node('load_generator', context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        stack.callback(node.destroy_node)
        stack.callback(executor.shutdown)
        publisher = node.create_publisher(input_type, input_topic, input_qos)
        for out in outputs:
            node.create_subscription(out.msg_type, out.topic,
                                     lambda msg, cb=out.callback: cb(msg, time.time()), out.qos)
        if not spin_until(executor, lambda: publisher.get_subscription_count() > 0 and all(
                node.count_publishers(out.topic) > 0 for out in outputs), 30.0):
            raise RuntimeError('nodes did not come up: exit codes '
                               f'{ {n: p.poll() for n, p in procs.items()} }, logs in {LOG_DIR}')
        clocks = {name: CpuClock(proc.pid) for name, proc in procs.items()}
        clocks['load generator'] = CpuClock(os.getpid())
        done = threading.Event()

        def feed():
            period, start = 1.0 / rate, time.monotonic()
            run.measure_from = time.time() + warmup
            cpu_start, wall_start = None, 0.0
            for i in range(int((warmup + duration) * rate)):
                delay = start + i * period - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                now = time.time()
                if cpu_start is None and now >= run.measure_from:
                    cpu_start = {name: c.read() for name, c in clocks.items()}
                    wall_start = time.monotonic()
                publisher.publish(make_input(i, seconds_to_stamp(now)))
                if cpu_start is not None:
                    run.sent += 1
                if progress is not None and (i + 1) % int(rate) == 0:
                    progress(1)
            elapsed = time.monotonic() - wall_start
            run.cpu = {name: 100.0 * (c.read() - cpu_start[name]) / elapsed
                       for name, c in clocks.items()}

        failure: list[BaseException] = []

        def publish():
            try:
                feed()
            except BaseException as err:  # re-raised in the caller's thread
                failure.append(err)
            finally:
                done.set()

        thread = threading.Thread(target=publish, daemon=True)
        thread.start()
        spin_until(executor, done.is_set, warmup + duration + 60.0)
        spin_for(executor, DRAIN)
        thread.join()
        if failure:
            raise failure[0]
        exited = {n: p.returncode for n, p in procs.items() if p.poll() is not None}
        if exited:
            raise RuntimeError(f'nodes exited under load: {exited}, logs in {LOG_DIR}')
    return run


def table(header: str, rows: list[str]) -> str:
    """A plain table: the header, a rule under it (+ at each |), the rows."""
    rule = ''.join('+' if c == '|' else '-' for c in header)
    return '\n'.join([header, rule, *rows])


def cpu_table(run: Run) -> str:
    """CPU use per process over the measured period."""
    return table('process              | CPU, % of one core',
                 [f'{name:20s} | {cpu:8.1f}' for name, cpu in run.cpu.items()])
