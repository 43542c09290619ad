"""Sustained-rate load on nodes run as real processes: messages lost, latency, CPU use.

Shared by the benchmarks that feed the pipeline a fixed-rate stream (joint states at 1 kHz,
as the Panda's franka driver publishes them) and time what comes out. The nodes run the way
`ros2 launch` starts them (`ros/testing.node_process`), on a ROS domain of their own on
localhost. A publisher process of its own (as a robot driver would be) sends input i at its
deadline with the wall-clock time as its stamp; the nodes keep the stamp, so latency =
receipt time in the monitor (this process) − stamp, across every DDS hop and every node's
work. Publisher and monitor are separate processes so that neither's Python work delays the
other. The first `warmup` seconds (discovery, first-call costs) are not counted. CPU use is
each process's utime + stime with its child processes' (/proc/<pid>/stat: a node's cloud
worker, ros/cloud_process.py, counts with its node's process) over the measured period, beside the
rclpy floor measured in the same run (`floor`): a bare process that receives the same 1 kHz
joint states as messages on an EventsExecutor with an empty callback, so that a figure reads
as a ratio that holds from one machine to the next (issue 35: machines differ by 1.5× and
more).
"""
from __future__ import annotations

import multiprocessing
import os
import platform
import queue
import subprocess
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Callable, ContextManager

import numpy as np
import rclpy
from contact_estimation.ros.node_main import FastExecutor
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState, PointCloud2

from contact_estimation import manifest
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.identification.trajectory import SmoothRandomTrajectory
from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds
from contact_estimation.ros.qos import PIPELINE_QOS
from contact_estimation.ros.spinning import spin_for, spin_until
from contact_estimation.ros.conversions import wrench_stamped, xyz_to_cloud
from contact_estimation.ros.testing import composed_processes, node_process, ros_context

# s of listening after the last input: the last outputs and one more /diagnostics (1 Hz)
# with the nodes' final message counts.
DRAIN = 2.5
REALTIME_PRIORITY = 50  # SCHED_FIFO priority of the load publisher, the "driver"
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
    """CPU time (user + system, s) a process has used, with its child processes' (a node's
    cloud worker, ros/cloud_process.py: the live ones, and those it has waited for) unless
    not `children`, from /proc/<pid>/stat and /proc/<pid>/task/*/children."""

    TICK = os.sysconf('SC_CLK_TCK')

    def __init__(self, pid: int, children: bool = True):
        self.pid, self.children = pid, children

    def read(self) -> float:
        return self._tree(self.pid)

    def _tree(self, pid: int) -> float:
        try:
            with open(f'/proc/{pid}/stat', encoding='ascii') as f:
                fields = f.read().rsplit(')', 1)[1].split()  # after "pid (comm)"
        except FileNotFoundError:  # a child that has just exited
            return 0.0
        # utime, stime, cutime, cstime: fields 14-17 of proc(5)
        if not self.children:
            return (int(fields[11]) + int(fields[12])) / self.TICK
        seconds = sum(int(x) for x in fields[11:15]) / self.TICK
        for task in os.listdir(f'/proc/{pid}/task'):
            try:
                with open(f'/proc/{pid}/task/{task}/children', encoding='ascii') as f:
                    children = f.read().split()
            except FileNotFoundError:
                continue
            seconds += sum(self._tree(int(child)) for child in children)
        return seconds


@dataclass(frozen=True)
class Contacts:
    """A collision-level torque `offset` (N·m) added to the effort of `joint` for `duration`
    s every `period` s, so the pipeline sees a contact (the residual is ~0 otherwise).

    With a `link`, the contact is physical instead: the force `force` (N, base frame) ON the
    robot at `point` (link frame) of `link`, which gives τ_ext = J(p)ᵀF (so the measured
    effort is τ − J(p)ᵀF) and, on the base F/T sensor, [F; p × F] more: what the contact
    localizer and the F/T estimator estimate."""

    joint: int
    offset: float
    period: float
    duration: float
    link: str = ''
    point: tuple = (0.0, 0.0, 0.0)
    force: tuple = (0.0, 0.0, 0.0)

    def active(self, i: int, rate: float) -> bool:
        return i % int(self.period * rate) < int(self.duration * rate)

    def onsets(self, count: int, rate: float) -> np.ndarray:
        """Sample indices at which a contact starts."""
        return np.arange(0, count, int(self.period * rate))


class JointStream:
    """Joint states of `count` samples at `rate`, as a robot driver publishes them, with the
    base F/T sensor's readings (`wrench`: count × 6, force and torque, or None) and lidar
    clouds (`clouds`: sample index → N × 3 points, base frame) of the same samples.

    Precomputed so that publishing costs only the message; picklable: the publisher process
    gets it whole. With `fingers`, the two finger joints of the franka driver are appended.
    """

    FINGERS = ['panda_finger_joint1', 'panda_finger_joint2']

    def __init__(self, robot: RobotModel, rate: float, q: np.ndarray, v: np.ndarray,
                 effort: np.ndarray, wrench: np.ndarray | None = None,
                 clouds: dict[int, np.ndarray] | None = None, fingers: bool = True):
        self.rate, self.q, self.v, self.effort, self.wrench = rate, q, v, effort, wrench
        self.clouds = clouds or {}
        self.base_link = robot.base_link
        extra = len(self.FINGERS) if fingers else 0
        self.names = list(robot.joint_names) + (self.FINGERS if fingers else [])
        self._extra = [0.0] * extra

    def __len__(self) -> int:
        return len(self.q)

    def message(self, i: int, stamp) -> JointState:
        msg = JointState(name=self.names)
        msg.header.stamp = stamp
        msg.header.frame_id = ''
        msg.position = self.q[i].tolist() + [0.02] * len(self._extra)
        msg.velocity = self.v[i].tolist() + self._extra
        msg.effort = self.effort[i].tolist() + self._extra
        return msg

    def wrench_message(self, i: int, stamp) -> WrenchStamped | None:
        """The base F/T reading of sample i (None without wrenches)."""
        if self.wrench is None:
            return None
        return wrench_stamped(stamp, self.base_link, self.wrench[i, :3], self.wrench[i, 3:])

    def cloud_message(self, i: int, stamp) -> PointCloud2 | None:
        """The lidar cloud taken at sample i (None: no scan then)."""
        points = self.clouds.get(i)
        return None if points is None else xyz_to_cloud(stamp, self.base_link, points)


class PandaStream(JointStream):
    """Joint states of a Panda in smooth motion, as the franka driver publishes them, and the
    base F/T sensor's readings (robot on sensor, as sim_cobot's) of the same samples.

    Position, velocity and effort of the 7 arm joints (effort = the URDF inverse dynamics of
    the motion, so the residual is ~0 without a contact) plus the two finger joints.
    """

    def __init__(self, robot: RobotModel, rate: float, count: int, fingers: bool = True,
                 contacts: Contacts | None = None, wrenches: bool = False):
        trajectory = SmoothRandomTrajectory(robot, seed=0, speed_scale=0.3, amplitude=0.5)
        samples = [trajectory.sample(i / rate) for i in range(count)]
        super().__init__(
            robot, rate, np.array([s[0] for s in samples]), np.array([s[1] for s in samples]),
            np.array([robot.rnea(*s) for s in samples]),
            np.array([np.concatenate(robot.base_wrench(*s)) for s in samples])
            if wrenches else None, fingers=fingers)
        if contacts is not None:
            touched = np.flatnonzero([contacts.active(i, rate) for i in range(count)])
            if contacts.link:
                self._touch(robot, contacts, touched)
            else:
                self.effort[touched, contacts.joint] += contacts.offset

    def _touch(self, robot: RobotModel, contacts: Contacts, touched: np.ndarray) -> None:
        for i in touched:
            tau_ext, wrench = contact_effect(robot, self.q[i], contacts)
            self.effort[i] -= tau_ext  # τ + τ_ext = τ_model
            if self.wrench is not None:
                self.wrench[i] += wrench


def contact_effect(robot: RobotModel, q: np.ndarray, contacts: Contacts
                   ) -> tuple[np.ndarray, np.ndarray]:
    """What the physical contact of `contacts` does at q: τ_ext = J(p)ᵀF, and the wrench
    [F; p × F] it adds on a base F/T sensor (base frame)."""
    force = np.asarray(contacts.force, dtype=float)
    jacobian = robot.jacobian(q, contacts.link, np.asarray(contacts.point))
    rotation, position = robot.link_pose(q, contacts.link)
    at = rotation @ np.asarray(contacts.point) + position
    return jacobian[:3].T @ force, np.concatenate([force, np.cross(at, force)])


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
    published: int = 0                  # inputs published in all, warm-up included
    cpu: dict[str, float] = field(default_factory=dict)  # % of one core, per node process
    stamps: list[float] = field(default_factory=list)    # stamp of input i (wall time, s)
    priority: str = ''                  # the publisher's scheduling (realtime_priority)


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


@dataclass(frozen=True)
class DriverTopics:
    """Where the driver publishes: joint states, and the base F/T readings and lidar clouds
    if given ('' = not published)."""

    joint_states: str
    wrench: str = ''
    cloud: str = ''


def run_load(nodes: dict[str, dict], stream: JointStream, input_topic: str,
             outputs: list[Output], duration: float, warmup: float = 2.0,
             progress=None, composed: bool = False, wrench_topic: str = '',
             priority: int = 0,
             beside: Callable[[], ContextManager[dict[str, int]]] | None = None) -> Run:
    """Start `nodes` (name → parameter overrides) as processes, listen to `outputs` here, and
    publish `stream.message(i, stamp)` on `input_topic` (and its F/T reading on
    `wrench_topic`, if given) at `stream.rate` Hz for warmup + duration s from a publisher
    process of its own, at real-time priority where the OS allows it (as a robot driver
    runs). With `composed`, `nodes` are the composed ones and run in their processes (the
    chain at `priority`).

    `beside()`: more processes for the run (a viewer, say), started once the nodes are and
    ready when it returns, their pids by name: their CPU is reported with the nodes'.
    Logs go to out/<process>_load.log. `progress(k)` is called every second of publishing.
    """
    os.makedirs(LOG_DIR, exist_ok=True)
    together = manifest.composed_nodes()
    with ExitStack() as stack:
        if composed:
            assert set(nodes) == set(together), f'composed mode runs {together}'
            procs = stack.enter_context(composed_processes(
                nodes, log_path=lambda name: os.path.join(LOG_DIR, f'{name}_load.log'),
                priority=priority))
        else:
            procs = {name: stack.enter_context(node_process(
                name, overrides=overrides, log_path=os.path.join(LOG_DIR, f'{name}_load.log'),
                priority=priority)) for name, overrides in nodes.items()}
        pids = {name: proc.pid for name, proc in procs.items()}
        if beside is not None:
            pids |= stack.enter_context(beside())
        # Every output and every node's inputs connected, so that no input is lost to
        # discovery: the counts then compare with what was sent.
        inputs = manifest.read_topics(nodes)
        if composed:  # handed over by function call or shared memory, not subscribed to
            inputs -= manifest.handed_over_topics(together) | set(
                manifest.shared_samples().topics)
        return drive(procs, pids, stream,
                     DriverTopics(input_topic, wrench_topic), outputs, inputs, duration,
                     warmup, progress, LOG_DIR)


def drive(procs: dict[str, subprocess.Popen], pids: dict[str, int], stream: JointStream,
          topics: DriverTopics, outputs: list[Output], inputs: set[str], duration: float,
          warmup: float, progress=None, logs: str = LOG_DIR) -> Run:
    """Once every `outputs` topic has a publisher and every `inputs` topic a subscriber,
    publish `stream` on `topics` at `stream.rate` Hz for warmup + duration s from a publisher
    process of its own (`_publish`), listening to `outputs` here, then DRAIN s more.

    `procs` are the nodes' processes (an exit fails the run, see `logs`); `pids` the
    processes whose CPU use the Run reports, by name.
    """
    with ExitStack() as stack:
        context = stack.enter_context(ros_context())
        node = rclpy.create_node('load_monitor', context=context)
        # Callbacks dispatched in C++, as a controller would hear the stop: the Python
        # executor's wait set, built again on every wake, added ~1-2 ms to every latency here.
        executor = FastExecutor(context=context)
        executor.add_node(node)
        stack.callback(node.destroy_node)
        stack.callback(executor.shutdown)
        for out in outputs:
            node.create_subscription(out.msg_type, out.topic,
                                     lambda msg, cb=out.callback: cb(msg, time.time()), out.qos)
        if not spin_until(executor, lambda: all(
                node.count_publishers(out.topic) > 0 for out in outputs) and all(
                node.count_subscribers(topic) > 0 for topic in inputs), 30.0):
            raise RuntimeError('nodes did not come up: exit codes '
                               f'{ {n: p.poll() for n, p in procs.items()} }, logs in {logs}')
        spawn = multiprocessing.get_context('spawn')
        bare = spawn.Process(target=floor, args=(topics.joint_states,), daemon=True)
        bare.start()
        stack.callback(bare.kill)
        if not spin_until(executor, lambda: node.count_subscribers(topics.joint_states)
                          > len(inputs & {topics.joint_states}), 30.0):
            raise RuntimeError('the floor process did not subscribe')
        reports = spawn.Queue()
        publisher = spawn.Process(target=_publish, daemon=True, args=(
            stream, topics, duration, warmup,
            pids | {'monitor': os.getpid(), FLOOR: bare.pid}, reports))
        publisher.start()
        stack.callback(publisher.join, 5.0)
        deadline = time.monotonic() + warmup + duration + 60.0
        run = None
        while run is None and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.01)
            try:
                report = reports.get_nowait()
            except queue.Empty:
                continue
            if isinstance(report, BaseException):
                raise report
            if isinstance(report, Run):
                run = report
            elif progress is not None:
                progress(report)
        if run is None:
            raise RuntimeError('the load publisher did not finish in time')
        spin_for(executor, DRAIN)
        exited = {n: p.returncode for n, p in procs.items() if p.poll() is not None}
        if exited:
            raise RuntimeError(f'nodes exited under load: {exited}, logs in {logs}')
    return run


FLOOR = 'floor'  # the name of the rclpy floor's process in Run.cpu


def _burn() -> None:
    """Another program on the robot PC: one core, busy, at normal priority."""
    while True:
        pass


@contextmanager
def second_job(wanted: bool = True):
    """A process taking one core at normal priority for the block (issue 35: the suite must
    fit a 2-core PC with other jobs), when `wanted`."""
    if not wanted:
        yield
        return
    job = multiprocessing.get_context('spawn').Process(target=_burn, daemon=True)
    job.start()
    try:
        yield
    finally:
        job.kill()
        job.join()


def floor(topic: str) -> None:
    """The rclpy floor: a bare node that receives `topic` (JointState) as messages, not raw,
    on an EventsExecutor with an empty callback, until killed. Every CPU figure is also
    given as a ratio to this process's, measured in the same run."""
    from contact_estimation.ros.qos import SENSOR_QOS
    rclpy.init()
    node = rclpy.create_node('rclpy_floor')
    node.create_subscription(JointState, topic, lambda msg: None, SENSOR_QOS)
    executor = FastExecutor()
    executor.add_node(node)
    while True:
        executor.spin_once(timeout_sec=0.1)


def realtime_priority(priority: int = REALTIME_PRIORITY) -> str:
    """Run this process at SCHED_FIFO `priority`, as ros2_control runs a robot driver; says
    what it got (the OS may refuse: no root, no CAP_SYS_NICE, a container's limits)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as err:
        return f'normal priority (SCHED_FIFO refused: {err})'
    return f'SCHED_FIFO {priority}'


@contextmanager
def realtime(priority: int):
    """This process at SCHED_FIFO `priority` for the block (`realtime_priority` says what it
    got), then back at normal priority."""
    try:
        yield realtime_priority(priority)
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def _publish(stream: JointStream, topics: DriverTopics, duration: float, warmup: float,
             pids: dict[str, int], reports) -> None:
    """The publisher process: input i (and its F/T reading and cloud, if any) at start +
    i / rate, stamped with the wall clock.

    Reports to the monitor through `reports`: 1 per second published (progress), then the Run
    (CPU of every process over the measured period), or the exception that stopped it.
    """
    try:
        priority = realtime_priority()
        with ros_context() as context:
            node = rclpy.create_node('load_publisher', context=context)
            publisher = node.create_publisher(JointState, topics.joint_states, PIPELINE_QOS)
            wrenches = (node.create_publisher(WrenchStamped, topics.wrench, PIPELINE_QOS)
                        if topics.wrench else None)
            clouds = (node.create_publisher(PointCloud2, topics.cloud, PIPELINE_QOS)
                      if topics.cloud else None)
            deadline = time.monotonic() + 30.0
            while publisher.get_subscription_count() == 0:
                if time.monotonic() > deadline:
                    raise RuntimeError(f'no subscriber on {topics.joint_states}')
                time.sleep(0.05)
            # The monitor started the nodes' processes: its own CPU only.
            clocks = {name: CpuClock(pid, children=name != 'monitor')
                      for name, pid in pids.items()}
            clocks['load publisher'] = CpuClock(os.getpid())
            run = Run(priority=priority)
            period, start = 1.0 / stream.rate, time.monotonic()
            run.measure_from = time.time() + warmup
            cpu_start, wall_start = None, 0.0
            for i in range(int((warmup + duration) * stream.rate)):
                delay = start + i * period - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                now = time.time()
                if cpu_start is None and now >= run.measure_from:
                    cpu_start = {name: c.read() for name, c in clocks.items()}
                    wall_start = time.monotonic()
                stamp = seconds_to_stamp(now)
                publisher.publish(stream.message(i, stamp))
                if wrenches is not None:
                    wrenches.publish(stream.wrench_message(i, stamp))
                cloud = stream.cloud_message(i, stamp) if clouds is not None else None
                if cloud is not None:
                    clouds.publish(cloud)
                run.stamps.append(now)
                run.published += 1
                if cpu_start is not None:
                    run.sent += 1
                if (i + 1) % int(stream.rate) == 0:
                    reports.put(1)
            elapsed = time.monotonic() - wall_start
            run.cpu = {name: 100.0 * (c.read() - cpu_start[name]) / elapsed
                       for name, c in clocks.items()}
            node.destroy_node()
        reports.put(run)
    except BaseException as err:  # re-raised in the monitor
        reports.put(err)


JOIN_ENDPOINTS = 70  # publishers and subscriptions of a program that joins the domain


def stop_qos(depth: int):
    """ros/qos.py STOP_QOS (reliable, transient local) keeping `depth` messages."""
    from rclpy.qos import QoSProfile
    from contact_estimation.ros.qos import STOP_QOS
    return QoSProfile(history=STOP_QOS.history, depth=depth, reliability=STOP_QOS.reliability,
                      durability=STOP_QOS.durability)


def join_domain(subscriptions, seconds: float = 1.5, environment: dict | None = None) -> None:
    """Another program in this ROS domain for `seconds`, at normal priority with the Fast DDS
    settings of the environment (updated with `environment`): JOIN_ENDPOINTS topics of its
    own and `subscriptions` ((message type, topic, depth) each, with `stop_qos(depth)`), as
    a restarted node or a controller starting (issue 36: a participant joining stalled what
    others heard)."""
    import rclpy
    from std_msgs.msg import Float64
    os.environ.update(environment or {})
    rclpy.init()
    node = rclpy.create_node('joining_program')
    for message_type, topic, depth in subscriptions:
        node.create_subscription(message_type, topic, lambda m: None, stop_qos(depth))
    for k in range(JOIN_ENDPOINTS // 2):
        node.create_publisher(Float64, f'joining_program/out{k}', 10)
        node.create_subscription(Float64, f'joining_program/in{k}', lambda m: None, 10)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    rclpy.shutdown()


def table(header: str, rows: list[str]) -> str:
    """A plain table: the header, a rule under it (+ at each |), the rows."""
    rule = ''.join('+' if c == '|' else '-' for c in header)
    return '\n'.join([header, rule, *rows])


HARNESS = ('monitor', 'load publisher', FLOOR)  # the processes of Run.cpu not the suite's


def suite_names(cpu: dict[str, float]) -> tuple[str, ...]:
    """The suite's processes among those whose CPU a run measured."""
    return tuple(name for name in cpu if name not in HARNESS)


def cpu_table(run: Run) -> str:
    """CPU use per process over the measured period, the suite's sum, and each as a ratio
    to the rclpy floor of the same run."""
    base = run.cpu.get(FLOOR, float('nan'))
    rows = [(name, cpu) for name, cpu in run.cpu.items()]
    rows.append(('suite', sum(run.cpu[name] for name in suite_names(run.cpu))))
    return table('process (+ children)  | CPU, % of one core | × floor',
                 [f'{name:21s} | {cpu:18.1f} | {cpu / base:7.2f}' for name, cpu in rows])
