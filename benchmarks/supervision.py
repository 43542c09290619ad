"""Supervision by `contact-estimation up` (issue 36): Ctrl-C, and a chain killed with -9.

    PYTHONPATH=$PWD python benchmarks/supervision.py [--repeats 3] [--priority auto]

`up` runs as a user starts it, the foreground job of a terminal (a process group of its
own), fed the joint states of a Panda at rest, held against gravity, at 1 kHz by a driver
process (SCHED_FIFO 50 where the OS allows it), and watched by this process (SCHED_FIFO 60
where allowed) on both stops and /diagnostics.

- Ctrl-C (`--repeats` runs): SIGINT to the process group, as a terminal sends it, once every
  process has started, and with `--during-start S ...` S seconds after `up` was started
  (the processes import, and build their nodes); reported per run, the time from it until
  every process of the suite has gone, the slowest process, and `up`'s exit code and
  summary.
- kill -9 of the chain (once): the detector's stop's silence (its last message before the
  kill to its first after; a controller keeping the README's contract stopped after 150 ms
  of it), the time until the restarted chain publishes its stop again, the cause that stop
  is latched with (/diagnostics) and how long until ~/reset clears it; the proximity
  monitor's stop, in another process, is checked for silence over the same span.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import psutil
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import machine  # noqa: E402

from contact_estimation import manifest  # noqa: E402
from contact_estimation.core.robot.robot_model import RobotModel  # noqa: E402
from contact_estimation.ros.conversions import seconds_to_stamp  # noqa: E402
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS  # noqa: E402
from contact_estimation.ros.spinning import spin_until  # noqa: E402
from contact_estimation.ros.testing import isolate_ros_domain, ros_context  # noqa: E402

RATE = 1000.0          # Hz: the driver's joint states
CONTRACT = 0.150       # s: the README's "stop after 150 ms without a stop message"
START_TIMEOUT = 90.0   # s: the suite's start on a loaded 2-core machine
DRIVER_PRIORITY, MONITOR_PRIORITY = 50, 60   # SCHED_FIFO, where allowed
STOPS = ('collision_detector', 'proximity_monitor')
CHAIN = manifest.process_of('collision_detector').name


def realtime(priority: int) -> None:
    """This process at SCHED_FIFO `priority`, where the OS allows it."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        pass


def drive(stop_event) -> None:
    """The robot driver (a process): the Panda at rest, its efforts = gravity, at RATE."""
    realtime(DRIVER_PRIORITY)
    robot = RobotModel.load('panda')
    q = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8])
    still = np.zeros(robot.n)
    msg = JointState(name=list(robot.joint_names), position=q.tolist(),
                     velocity=still.tolist(), effort=robot.rnea(q, still, still).tolist())
    with ros_context() as context:
        node = rclpy.create_node('supervision_driver', context=context)
        publisher = node.create_publisher(
            JointState, manifest.node('joint_state_listener').topic('joint_states'),
            PIPELINE_QOS)
        start, i = time.monotonic(), 0
        while not stop_event.is_set():
            i += 1
            delay = start + i / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            msg.header.stamp = seconds_to_stamp(time.time())
            publisher.publish(msg)
        node.destroy_node()


class Monitor:
    """Both stops as a controller hears them (receipt times and values), the stopping
    nodes' /diagnostics, and ~/reset of the detector."""

    def __init__(self, context):
        self.node = rclpy.create_node('supervision_monitor', context=context)
        self.heard = {name: [] for name in STOPS}   # (monotonic time, value)
        self.status = {name: '' for name in STOPS}  # latest /diagnostics message
        for name in STOPS:
            self.node.create_subscription(
                Bool, manifest.node(name).topic('stop'),
                lambda m, n=name: self.heard[n].append((time.monotonic(), m.data)), STOP_QOS)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics,
                                      10)
        self.reset = self.node.create_client(
            Trigger, f'/{manifest.node("collision_detector").name}/reset')
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            for name in STOPS:
                if status.name.endswith(name):
                    self.status[name] = status.message

    def spin_until(self, done, timeout: float) -> bool:
        return spin_until(self.executor, done, timeout)

    def latest(self, name: str) -> bool | None:
        return self.heard[name][-1][1] if self.heard[name] else None

    def call_reset(self, timeout: float = 10.0) -> Trigger.Response | None:
        future = self.reset.call_async(Trigger.Request())
        self.spin_until(future.done, timeout)
        return future.result()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


class Suite:
    """`contact-estimation up` in a process group of its own, its processes by name."""

    def __init__(self, log_dir: str, priority: str):
        self.log_dir = log_dir
        self.up = subprocess.Popen(
            [sys.executable, '-m', 'contact_estimation', 'up', '--priority', priority,
             '--log-dir', log_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True, env=os.environ.copy())
        self.names = [spec.name for spec in manifest.processes(False, False)]

    def processes(self) -> dict[str, psutil.Process]:
        """`up`'s children by the process name on their command line."""
        found = {}
        for child in psutil.Process(self.up.pid).children():
            try:
                command = child.cmdline()
            except psutil.NoSuchProcess:
                continue
            found.update({name: child for name in self.names if name in command})
        return found

    def started(self) -> bool:
        """Every process has logged its nodes' first line."""
        for name in self.names:
            path = os.path.join(self.log_dir, f'{name}.log')
            if not os.path.exists(path) or '[INFO]' not in open(path, encoding='utf-8').read():
                return False
        return True

    def ctrl_c(self) -> tuple[float, str, dict[str, float]]:
        """SIGINT to the group as a terminal sends it; (s until every process of the suite
        has gone, `up`'s output, when each went), SIGKILL for the rest after 30 s."""
        watched = self.processes()
        sent = time.monotonic()
        os.killpg(self.up.pid, signal.SIGINT)
        gone: dict[str, float] = {}
        while len(gone) < len(watched) and time.monotonic() - sent < 30.0:
            for name, process in watched.items():
                if name not in gone and not _running(process):
                    gone[name] = time.monotonic() - sent
            time.sleep(0.002)
        out, _ = self.up.communicate(timeout=30.0)
        return max(gone.values(), default=float('nan')), out, gone

    def kill(self) -> None:
        try:
            os.killpg(self.up.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.up.wait()


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_started(suite: Suite, monitor: Monitor) -> None:
    """Until every process has started and both stops are heard."""
    if not monitor.spin_until(lambda: suite.started() and all(
            monitor.latest(name) is not None for name in STOPS), START_TIMEOUT):
        suite.kill()
        raise SystemExit('the suite did not start:\n' + suite.up.communicate()[0])


def clear_detector_stop(monitor: Monitor, timeout: float = START_TIMEOUT) -> bool:
    """~/reset until the detector's stop is False (a loaded machine's start may latch
    `behind`)."""
    deadline = time.monotonic() + timeout
    while monitor.latest('collision_detector') is not False:
        if time.monotonic() > deadline:
            return False
        _reset_cleared(monitor)
    return True


def ctrl_c_rows(monitor: Monitor, delays: list[float | None], priority: str) -> list[str]:
    """A Ctrl-C run for each of `delays`: s after `up` starts, None once all has started."""
    rows = []
    for run, delay in enumerate(delays):
        with tempfile.TemporaryDirectory() as logs:
            suite = Suite(logs, priority)
            if delay is None:
                wait_started(suite, monitor)
                monitor.spin_until(lambda: False, 1.0)  # settled
            else:
                monitor.spin_until(lambda: False, delay)
            everything, out, gone = suite.ctrl_c()
            slowest = max(gone, key=gone.get)
            summary = [line.split('] ', 1)[1] for line in out.splitlines()
                       if line.startswith('[contact-estimation]') and ':' in line
                       and any(n in line for n in suite.names)]
            rows.append(f'| {run + 1}: {"started" if delay is None else f"{delay:g} s"} | '
                        f'{everything * 1e3:.0f} | {slowest} '
                        f'{gone[slowest] * 1e3:.0f} | {suite.up.returncode} | '
                        f'{"; ".join(summary) or out[-300:]!r} |')
    return rows


def kill_row(monitor: Monitor, priority: str) -> str:
    """kill -9 of the chain, once the detector's stop has cleared: the row of the table."""
    detector = 'collision_detector'
    with tempfile.TemporaryDirectory() as logs:
        suite = Suite(logs, priority)
        try:
            wait_started(suite, monitor)
            if not clear_detector_stop(monitor):
                return f'| the detector\'s stop did not clear: {monitor.status[detector]} |'
            monitor.spin_until(lambda: False, 1.0)
            killed = time.monotonic()
            suite.processes()[CHAIN].kill()
            if not monitor.spin_until(lambda: monitor.heard[detector][-1][0] > killed,
                                      START_TIMEOUT):
                return f'| the chain was not restarted within {START_TIMEOUT:g} s |'
            times = [t for t, _ in monitor.heard[detector]]
            before = max(t for t in times if t <= killed)
            after = min(t for t in times if t > killed)
            value = next(v for t, v in monitor.heard[detector] if t > killed)
            monitor.spin_until(lambda: 'restarted' in monitor.status[detector], 10.0)
            cause = monitor.status[detector]
            proximity = np.diff([t for t, _ in monitor.heard['proximity_monitor']
                                 if before <= t <= after])
            cleared = clear_detector_stop(monitor)
            return (f'| {(after - before) * 1e3:.0f} | {(after - killed):.1f} | {value} | '
                    f'{cause} | {f"{time.monotonic() - after:.1f} s" if cleared else "no"} | '
                    f'{proximity.max() * 1e3 if len(proximity) else float("nan"):.0f} |')
        finally:
            suite.ctrl_c()


def _reset_cleared(monitor: Monitor) -> bool:
    """~/reset, once; True when it cleared the detector's stop."""
    response = monitor.call_reset()
    if response is not None and response.success:
        return monitor.spin_until(lambda: monitor.latest('collision_detector') is False, 5.0)
    monitor.spin_until(lambda: False, 0.5)
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--repeats', type=int, default=3, help='Ctrl-C runs')
    parser.add_argument('--during-start', type=float, nargs='*', default=[], metavar='S',
                        help='also a Ctrl-C S s after up starts (the processes still start)')
    parser.add_argument('--priority', default='auto', help="`up --priority`")
    parser.add_argument('--no-kill', action='store_true', help='only the Ctrl-C runs')
    args = parser.parse_args()
    isolate_ros_domain()
    spawn = multiprocessing.get_context('spawn')
    stop_driver = spawn.Event()
    driver = spawn.Process(target=drive, args=(stop_driver,), daemon=True)
    driver.start()
    realtime(MONITOR_PRIORITY)
    print(f'supervision: {machine()}; up --priority {args.priority}\n', flush=True)
    try:
        with ros_context() as context:
            monitor = Monitor(context)
            print('| Ctrl-C run: when | every process gone, ms | slowest, ms | up exit | '
                  'summary |\n|---|---|---|---|---|', flush=True)
            delays = [None] * args.repeats + args.during_start
            for row in ctrl_c_rows(monitor, delays, args.priority):
                print(row, flush=True)
            if not args.no_kill:
                print('\n| kill -9 of the chain: stop silent, ms | restarted stop heard '
                      'after, s | its value | its cause (/diagnostics) | ~/reset cleared it '
                      'after | proximity stop longest gap, ms |\n|---|---|---|---|---|---|',
                      flush=True)
                print(kill_row(monitor, args.priority), flush=True)
            monitor.close()
    finally:
        stop_driver.set()
        driver.join(5.0)
    return 0


if __name__ == '__main__':
    sys.exit(main())
