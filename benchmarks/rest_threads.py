"""The proximity and relay processes at rest, thread by thread (issue 35): CPU and wakes.

    PYTHONPATH=$PWD python benchmarks/rest_threads.py [--seconds 20] [--runs 2]

A driver process (SCHED_FIFO 50 where allowed) writes a Panda's free motion at 1 kHz into
the shared samples, as the chain's process does (core/chain/sample_ring.py), and publishes
the same joint states for the rclpy floor (`_ros_load.floor`: a bare EventsExecutor process
receiving one 1 kHz JointState stream as messages). Beside it the composed `proximity` and
`relay` processes (nodes.yaml; no lidar, no skeleton, nobody subscribed to the relay's
streams) run as `up` runs them. Their threads' CPU time and voluntary context switches
(wakes) are read from /proc over `--seconds` after a warm-up: CPU time, not wall time, so a
busy machine changes these figures little. Printed per run: each process and its busiest
threads (% of one core, wakes per second), as a ratio to the floor's CPU in the same run.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from contextlib import ExitStack

import numpy as np
import rclpy
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import floor, machine, realtime_priority, table  # noqa: E402
from soak import Q0  # noqa: E402

from contact_estimation import manifest  # noqa: E402
from contact_estimation.core.chain.sample import JointSample  # noqa: E402
from contact_estimation.core.chain.sample_ring import SampleRingWriter, ring_name  # noqa: E402
from contact_estimation.core.robot.robot_model import RobotModel  # noqa: E402
from contact_estimation.launcher import composed_command  # noqa: E402
from contact_estimation.ros.conversions import seconds_to_stamp  # noqa: E402
from contact_estimation.ros.qos import SENSOR_QOS  # noqa: E402
from contact_estimation.ros.testing import isolate_ros_domain, process  # noqa: E402

TOPIC = 'rest_threads_joint_states'
PROCESSES = ('contact_estimation_proximity', 'contact_estimation_relay')
WARMUP = 3.0  # s after the processes spin
SPINNING = 100  # wakes per second of a process that spins
RATE = 1000.0


def drive(stop) -> None:
    """Free motion at 1 kHz into the ring and on TOPIC, until `stop` is set."""
    realtime_priority()
    robot = RobotModel.load('panda')
    rclpy.init()
    node = rclpy.create_node('rest_threads_driver')
    publisher = node.create_publisher(JointState, TOPIC, SENSOR_QOS)
    writer = SampleRingWriter(ring_name(), robot.n)
    zero = np.zeros(robot.n)
    names = list(robot.joint_names)
    start, k = time.monotonic(), 0
    while not stop.is_set():
        k += 1
        time.sleep(max(start + k / RATE - time.monotonic(), 0.0))
        now = time.time()
        q = Q0 + 0.3 * np.sin(0.5 * now + np.arange(robot.n))
        v = 0.15 * np.cos(0.5 * now + np.arange(robot.n))
        stamp = seconds_to_stamp(now)
        writer.write(JointSample(now, q, v, zero, zero, (stamp.sec, stamp.nanosec), 'base'))
        publisher.publish(JointState(header=Header(stamp=stamp), name=names, position=list(q),
                                     velocity=list(v), effort=list(zero)))
    writer.close()


def threads(pid: int) -> dict[int, tuple[float, int]]:
    """CPU seconds and voluntary context switches of every thread of `pid` (and, summed under
    -1, of its child processes: the cloud worker)."""
    ticks = os.sysconf('SC_CLK_TCK')
    found = {}
    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{tid}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
            with open(f'/proc/{pid}/task/{tid}/status') as f:
                switches = next(int(line.split()[1]) for line in f
                                if line.startswith('voluntary_ctxt_switches'))
        except (OSError, StopIteration):
            continue
        found[int(tid)] = ((int(fields[11]) + int(fields[12])) / ticks, switches)
    return found


def measure(pids: dict[str, int], seconds: float) -> dict[str, dict[int, tuple[float, float]]]:
    """Per process, per thread: % of one core and wakes per second over `seconds`."""
    before = {name: threads(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    after = {name: threads(pid) for name, pid in pids.items()}
    return {name: {tid: (100.0 * (cpu - before[name][tid][0]) / seconds,
                         (wakes - before[name][tid][1]) / seconds)
                   for tid, (cpu, wakes) in after[name].items() if tid in before[name]}
            for name in pids}


def settle(pids: dict[str, int], deadline: float = 120.0) -> None:
    """Wait until every process spins (its threads wake over SPINNING times a second: it
    has started and the samples flow), then WARMUP s more."""
    end = time.monotonic() + deadline
    while not all(sum(w for _, w in per_thread.values()) > SPINNING
                  for per_thread in measure(pids, 1.0).values()):
        if time.monotonic() > end:
            raise RuntimeError(f'the processes did not start within {deadline:g} s')
    time.sleep(WARMUP)


def one_run(seconds: float) -> list[str]:
    isolate_ros_domain()
    spawn = multiprocessing.get_context('spawn')
    with ExitStack() as stack:
        stop = spawn.Event()
        driver = spawn.Process(target=drive, args=(stop,), daemon=True)
        driver.start()
        stack.callback(driver.kill)
        stack.callback(driver.join, 5.0)
        stack.callback(stop.set)
        bare = spawn.Process(target=floor, args=(TOPIC,), daemon=True)
        bare.start()
        stack.callback(bare.kill)
        procs = {spec.name: stack.enter_context(process(composed_command(spec), None))
                 for spec in manifest.composed() if spec.name in PROCESSES}
        pids = {name: proc.pid for name, proc in procs.items()} | {'floor': bare.pid}
        settle(pids)
        figures = measure(pids, seconds)
        exited = {n: p.returncode for n, p in procs.items() if p.poll() is not None}
        if exited:
            raise RuntimeError(f'processes exited: {exited}')
    base = sum(cpu for cpu, _ in figures['floor'].values())
    rows = []
    for name, per_thread in figures.items():
        total = sum(cpu for cpu, _ in per_thread.values())
        wakes = sum(w for _, w in per_thread.values())
        label = name.removeprefix('contact_estimation_')
        rows.append(f'{label:<26} | {total:6.1f} | {wakes:7.0f} | {total / base:5.2f}')
        busiest = sorted(per_thread.items(), key=lambda item: -item[1][0] - item[1][1] / 1e4)
        for tid, (cpu, wakes) in busiest[:3]:
            if cpu >= 0.1 or wakes >= 20:
                role = 'main' if tid == pids[name] else 'thread'
                rows.append(f'  {role + " " + str(tid):<24} | {cpu:6.1f} | {wakes:7.0f} | '
                            f'{cpu / base:5.2f}')
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seconds', type=float, default=20.0, help='measured seconds per run')
    parser.add_argument('--runs', type=int, default=2)
    args = parser.parse_args()
    print(machine())
    for run in range(args.runs):
        print(f'\nrun {run + 1}: {args.seconds:g} s at 1 kHz after the start and {WARMUP:g} s')
        print(table('process, thread            | CPU, % | wakes/s | × floor',
                    one_run(args.seconds)))


if __name__ == '__main__':
    main()
