"""Hostile inputs against the composed suite: the stops' heartbeat gaps and memory (issues 27, 36).

    PYTHONPATH=$PWD python benchmarks/hostile.py [--seconds 5] [--phases burst ...]
                                                 [--burst 20000] [--priority 40]
                                                 [--join-settings suite] [--monitor-udp]

The core nodes run composed in their processes, as `contact-estimation up --priority 40`
starts them. A driver process at SCHED_FIFO 50 streams joint states of a Panda standing
still (gravity torques: no stop due) at 1 kHz and an empty skeleton (nobody tracked) at 50
Hz, and sends, one phase after another: nothing (`baseline`), 400 000-point clouds at 2 Hz
(`clouds`), 10 000-pose skeletons at 10 Hz (`skeletons`), `--burst` joint states at once
every 2 s, stamped 1 µs apart from now on (`burst`: the chain takes them in batches), a
parameter set on the residual node, the detector and the proximity monitor every 20 ms
(`parameters`: the residual is rebuilt on each), 500 `~/reset` calls at once on each stop
every 2 s (`resets`), another program joining the domain every 2 s for 1.5 s (`joins`: a
process with 70 topics that also subscribes to both stops, as a restarted node or a
controller starting does; both stops went ~300 ms silent when one of the suite's own
processes joined again after a kill, 1 in 18 times), the driver paused (SIGSTOP) for 0.3 s
every 2 s (`pauses`: both stops say `stale`, their input stopped), a second suite started in
the same domain and namespace for SECOND_RUNS s, stopped, then a reset, over and over
(`second`: the first latches `duplicate`; no cleared stop of the second may reach a
controller), kill -9 of one process of the suite every KILL_EVERY s in turn, started again
as `up` does (launcher.Supervisor: its stops latched `restarted` until the driver's ~/reset,
one every 2 s; `kills`), Ctrl-C on the whole suite every INTERRUPT_EVERY s, then started
again (`interrupts`: every process must end within 1 s with exit code 0), and nothing again
(`idle`: does the memory return?).
The suite runs as `up` runs it (launcher.NodeSet under a Supervisor). A monitor process at
SCHED_FIFO 60 listens to both stops, and tells the suite's messages from another's by their
publisher. A controller keeping the README's contract stops after 150 ms without a stop
message: reported per phase and stop, the gaps over 150 ms, the longest with the value last
heard before it, the cleared stops (False) heard from any publisher but the suite's, and the
composed processes' resident memory at the end of the phase. A stop's silence that spans a
kill of its own process, or a Ctrl-C, is not a gap: a controller keeping the contract stops
there, as it must; those are counted apart ("silences of its own death"), with whether the
stop came back latched (True). "monitor late" is the longest delay of the monitor's own 10
ms timer in the phase: over 150 ms, the machine was too loaded to judge the gaps, and the
table says so.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import LOG_DIR, join_domain, machine, realtime_priority, table  # noqa: E402

from contact_estimation import manifest  # noqa: E402
from contact_estimation.launcher import (STOP_GRACE, NodeSet, Supervisor,  # noqa: E402
                                         transport_environment)
from contact_estimation.ros.testing import composed_processes, isolate_ros_domain  # noqa: E402

CONTRACT = 0.150  # s without a stop message after which a controller stops (README)
STOPS = ('collision_detector', 'proximity_monitor')
PHASES = ('baseline', 'clouds', 'skeletons', 'burst', 'parameters', 'resets', 'joins', 'pauses',
          'second', 'kills', 'interrupts', 'idle')
RATE = 1000.0     # Hz: the driver's joint states
SKELETON_EVERY = 20  # joint states per empty skeleton (50 Hz)
BURST_EVERY = 2.0    # s between bursts in the `burst` phase
PAUSE = 0.3          # s that the driver is paused in the `pauses` phase
HOLD_TIME = 0.5      # s: the detector's stop clears this long after its cause, between phases
SECOND_RUNS = 30.0   # s that each second suite runs in the `second` phase (it starts in 3-20 s)
# s between kills in the `kills` phase: each of the four processes is killed every 4 ×
# KILL_EVERY s, longer than RestartPolicy.QUICK after its restart (a crash loop otherwise);
# a phase needs 2 × KILL_EVERY s for one kill (the first after KILL_EVERY s).
KILL_EVERY = 10.0
JOIN_EVERY = 2.0        # s between joins in the `joins` phase
INTERRUPT_EVERY = 20.0  # s between Ctrl-Cs in the `interrupts` phase (as KILL_EVERY)
ENDS_WITHIN = 1.0       # s: every process ends this soon after Ctrl-C (issue 36)


def _drive(commands, ready, burst_size: int) -> None:
    """The robot driver (SCHED_FIFO 50): joint states at RATE until told 'quit'; a phase
    name in `commands` switches what it adds."""
    import rclpy
    from geometry_msgs.msg import Pose, PoseArray
    from rcl_interfaces.srv import SetParameters
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState, PointCloud2
    from std_srvs.srv import Trigger

    from contact_estimation.core.robot.robot_model import RobotModel
    from contact_estimation.ros.conversions import seconds_to_stamp, xyz_to_cloud
    from contact_estimation.ros.qos import PIPELINE_QOS
    from contact_estimation.ros.testing import ros_context
    realtime_priority(50)
    robot = RobotModel.load('panda')
    q = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8])
    still = np.zeros(robot.n)
    with ros_context() as context:
        node = rclpy.create_node('hostile_driver', context=context)
        spec = manifest.node('proximity_monitor')
        joints = node.create_publisher(
            JointState, manifest.node('joint_state_listener').topic('joint_states'),
            PIPELINE_QOS)
        skeletons = node.create_publisher(PoseArray, spec.topic('skeleton'), PIPELINE_QOS)
        clouds = node.create_publisher(PointCloud2, spec.topic('lidar_points'), PIPELINE_QOS)
        msg = JointState(name=list(robot.joint_names), position=q.tolist(),
                         velocity=still.tolist(), effort=robot.rnea(q, still, still).tolist())
        empty, big = PoseArray(), PoseArray(poses=[Pose() for _ in range(10_000)])
        empty.header.frame_id = big.header.frame_id = robot.base_link
        points = np.random.default_rng(27).uniform(-1.0, 1.0, size=(400_000, 3))
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        setters = [(node.create_client(SetParameters, f'/{name}/set_parameters'),
                    SetParameters.Request(
                        parameters=[Parameter(key, value=value).to_parameter_msg()]))
                   for name, key, value in (('residual_node', 'observer_gain', [50.0]),
                                            ('collision_detector', 'hold_time', HOLD_TIME),
                                            ('proximity_monitor', 'joint_state_timeout', 0.1))]
        resets = [node.create_client(Trigger, f'/{name}/reset') for name in STOPS]
        extras = {'clouds': 0.5, 'skeletons': 0.1, 'burst': BURST_EVERY, 'parameters': 0.02,
                  'resets': 2.0, 'kills': 2.0, 'interrupts': 2.0}
        phase, next_extra = 'baseline', 0.0
        start, i = time.monotonic(), 0
        ready.set()
        while True:
            if not commands.empty():
                phase = commands.get()
                if phase == 'quit':
                    break
                next_extra = time.monotonic()
            delay = start + i / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            i += 1
            now = time.time()
            msg.header.stamp = seconds_to_stamp(now)
            joints.publish(msg)
            if i % SKELETON_EVERY == 0:
                empty.header.stamp = msg.header.stamp
                skeletons.publish(empty)
            if phase in extras and time.monotonic() >= next_extra:
                next_extra = time.monotonic() + extras[phase]
                if phase == 'clouds':
                    clouds.publish(xyz_to_cloud(msg.header.stamp, robot.base_link, points))
                elif phase == 'skeletons':
                    big.header.stamp = msg.header.stamp
                    skeletons.publish(big)
                elif phase == 'parameters':
                    for client, request in setters:
                        client.call_async(request)
                elif phase in ('resets', 'kills', 'interrupts'):
                    for client in resets:   # a flood, or what an operator does after a restart
                        for _ in range(500 if phase == 'resets' else 1):
                            client.call_async(Trigger.Request())
                else:
                    for k in range(1, burst_size + 1):
                        msg.header.stamp = seconds_to_stamp(now + k * 1e-6)
                        joints.publish(msg)
                start, i = time.monotonic(), 0  # the stream goes on from here
            if i % 10 == 0:
                executor.spin_once(timeout_sec=0.0)  # the replies
        node.destroy_node()


def _monitor(commands, results, ready, udp: bool) -> None:
    """The controller's view (SCHED_FIFO 60): every stop message's receipt time, value and
    publisher; on 'report', the phase's records and this process's own lateness go to
    `results`. On Fast DDS's defaults, or with `udp` on the stop processes' settings
    (UDPv4 only, ros/stop_process.stop_environment)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Bool

    from contact_estimation.ros.qos import STOP_QOS
    from contact_estimation.ros.stop_process import stop_environment
    from contact_estimation.ros.testing import ros_context
    realtime_priority(60)
    if udp:
        os.environ.update(stop_environment())
    heard = {name: [] for name in STOPS}
    late, last = [0.0], [time.monotonic()]

    def tick():
        now = time.monotonic()
        late[0], last[0] = max(late[0], now - last[0] - 0.01), now
    with ros_context() as context:
        node = rclpy.create_node('hostile_monitor', context=context)
        for name in STOPS:
            node.create_subscription(
                Bool, manifest.node(name).topic('stop'),
                lambda m, info, n=name: heard[n].append(
                    (time.monotonic(), m.data, bytes(info['publisher_gid']['data']))), STOP_QOS)
        node.create_timer(0.01, tick)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        ready.set()
        while True:
            executor.spin_once(timeout_sec=0.005)
            if commands.empty():
                continue
            command = commands.get()
            if command == 'quit':
                break
            results.put(({n: list(h) for n, h in heard.items()}, late[0]))
            for h in heard.values():
                h.clear()
            late[0] = 0.0
        node.destroy_node()


class Outages:
    """The suite as `up` runs it, kept running by its Supervisor, and the deaths this
    benchmark causes: (monotonic time, the processes it ended) for every kill and Ctrl-C,
    how long each Ctrl-C took to end every process, and their exit codes."""

    def __init__(self, nodes: NodeSet):
        self.nodes, self.supervisor = nodes, Supervisor(nodes, say=lambda line: None)
        self.ended: list[tuple[float, set[str]]] = []
        self.interrupts: list[tuple[float, list[int]]] = []  # (s until all gone, exit codes)

    def wait(self, seconds: float) -> None:
        """`seconds`, restarting the processes that died meanwhile."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.supervisor.step()
            time.sleep(min(Supervisor.POLL, max(end - time.monotonic(), 0.0)))

    def kill_in_turn(self, seconds: float) -> None:
        """kill -9 of each process in turn, one every KILL_EVERY s, for `seconds`."""
        end, turn = time.monotonic() + seconds, 0
        while time.monotonic() + 2 * KILL_EVERY <= end:
            self.wait(KILL_EVERY)
            name = self.nodes.names[turn % len(self.nodes.names)]
            turn += 1
            self.ended.append((time.monotonic(), {name}))
            self.nodes.processes[name].kill()
        self.wait(max(end - time.monotonic(), 0.0))

    def interrupt(self, seconds: float) -> None:
        """Ctrl-C on the whole suite every INTERRUPT_EVERY s, then started again."""
        end = time.monotonic() + seconds
        while time.monotonic() + 2 * INTERRUPT_EVERY <= end:
            self.wait(INTERRUPT_EVERY)
            start = time.monotonic()
            self.ended.append((start, set(self.nodes.names)))
            codes = self.nodes.stop()
            self.interrupts.append((time.monotonic() - start, list(codes.values())))
            self.nodes.start()
        self.wait(max(end - time.monotonic(), 0.0))

    def interrupt_cell(self) -> str:
        """The Ctrl-Cs so far: how many ended every process within ENDS_WITHIN s, exit code
        0, and the slowest."""
        if not self.interrupts:
            return '-'
        good = sum(took <= ENDS_WITHIN and not any(codes) for took, codes in self.interrupts)
        return (f'{good} of {len(self.interrupts)} within {ENDS_WITHIN:g} s, code 0; slowest '
                f'{max(took for took, _ in self.interrupts) * 1e3:.0f} ms')


def pause_driver(pid: int, seconds: float, outages: Outages) -> None:
    """SIGSTOP the driver for PAUSE s every BURST_EVERY s, for `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() + BURST_EVERY <= end:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(PAUSE)
        os.kill(pid, signal.SIGCONT)
        outages.wait(BURST_EVERY - PAUSE)
    outages.wait(max(end - time.monotonic(), 0.0))


def run_joins(seconds: float, outages: Outages, environment: dict | None) -> None:
    """A program joins the domain every JOIN_EVERY s (or as soon as the last one has ended),
    for `seconds`, its environment updated with `environment`."""
    from std_msgs.msg import Bool
    from contact_estimation.ros.qos import STOP_QOS
    stops = [(Bool, manifest.node(name).topic('stop'), STOP_QOS.depth) for name in STOPS]
    end = time.monotonic() + seconds
    spawn = multiprocessing.get_context('spawn')
    while time.monotonic() + JOIN_EVERY <= end:
        started = time.monotonic()
        joining = spawn.Process(target=join_domain, args=(stops, 1.5, environment),
                                daemon=True)
        joining.start()
        while joining.is_alive():
            outages.wait(Supervisor.POLL)
        outages.wait(max(started + JOIN_EVERY - time.monotonic(), 0.0))
    outages.wait(max(end - time.monotonic(), 0.0))


def rss_mib(pid: int) -> float:
    with open(f'/proc/{pid}/status', encoding='ascii') as f:
        return next(int(line.split()[1]) for line in f if line.startswith('VmRSS')) / 1024


def run_second_suites(seconds: float, to_driver, outages: Outages) -> None:
    """A second suite in the same domain and namespace for SECOND_RUNS s, stopped, then the
    driver's resets of the first (`resets` for a moment), until `seconds` are over."""
    end = time.monotonic() + seconds
    while time.monotonic() + SECOND_RUNS + 2 * BURST_EVERY <= end:
        with composed_processes(priority=0, log_path=lambda name: os.path.join(
                LOG_DIR, f"{name}_second.log")):
            outages.wait(SECOND_RUNS)
        outages.wait(BURST_EVERY)
        to_driver.put('resets')
        outages.wait(BURST_EVERY)
        to_driver.put('second')
    outages.wait(max(end - time.monotonic(), 0.0))


def gap_cells(heard: list[tuple[float, bool, bytes]], ours: set[bytes] | None,
              deaths: list[float], ended: list[tuple[float, set[str]]]) -> list[str]:
    """Gaps over the contract, the longest with the value heard before it (and, if a
    process of `ended` ended before it in the phase, which and how long before), the cleared
    stops of those heard from a publisher not in `ours` (None: every publisher is the
    suite's, no other suite runs), and the silences that span one of `deaths` (its process
    killed or Ctrl-C'd): how many, the longest, and how many came back latched."""
    ours = ours if ours is not None else {gid for _, _, gid in heard}
    others = [value for _, value, gid in heard if gid not in ours]
    cleared = f'{others.count(False)} of {len(others)}'
    heard = [h for h in heard if h[2] in ours]
    if len(heard) < 2:
        return ['silent', '-', cleared, '-']
    times = np.array([t for t, _, _ in heard])
    gaps = np.diff(times)
    # A process may still publish while it ends (its last stop, True), up to STOP_GRACE.
    own = np.array([gaps[k] > CONTRACT and any(
        d < times[k + 1] and times[k] < d + STOP_GRACE for d in deaths)
        for k in range(len(gaps))], dtype=bool)
    silences = '-'
    if own.any():
        back = [heard[k + 1][1] for k in np.flatnonzero(own)]
        silences = (f'{len(back)}, longest {gaps[own].max() * 1e3:.0f} ms, '
                    f'{sum(back)} latched')
    if own.all():
        return ['0', '-', cleared, silences]
    k = int(np.flatnonzero(~own)[np.argmax(gaps[~own])])
    before = [(times[k] - t, names) for t, names in ended if t <= times[k]]
    after = (f'; {min(before)[0]:.1f} s after {"+".join(sorted(min(before)[1]))} ended'
             if before and gaps[k] > CONTRACT else '')
    return [str(int(np.sum(gaps[~own] > CONTRACT))),
            f'{gaps[k] * 1e3:.0f} ({heard[k][1]}{after})', cleared, silences]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=5.0, help='length of each phase')
    parser.add_argument('--phases', nargs='+', choices=PHASES, default=list(PHASES))
    parser.add_argument('--burst', type=int, default=20_000, help='joint states per burst')
    parser.add_argument('--join-settings', choices=('default', 'suite'), default='default',
                        help="the joining program's Fast DDS settings (`joins`): Fast DDS's "
                        "defaults, or the suite's (launcher.transport_environment)")
    parser.add_argument('--priority', type=int, default=40,
                        help="the suite's SCHED_FIFO priority, as `up --priority` (0: none)")
    parser.add_argument('--monitor-udp', action='store_true',
                        help='the monitor on UDPv4 only (no shared memory), as the README '
                             'suggests for a controller')
    args = parser.parse_args()
    spawn = multiprocessing.get_context('spawn')
    to_driver, to_monitor, results = spawn.Queue(), spawn.Queue(), spawn.Queue()
    ready = [spawn.Event(), spawn.Event()]
    os.makedirs(LOG_DIR, exist_ok=True)
    rows = []
    isolate_ros_domain()
    nodes = NodeSet([spec.name for spec in manifest.composed()],
                    overrides={'collision_detector': {'hold_time': HOLD_TIME}},
                    priority=args.priority, log_dir=LOG_DIR)
    outages = Outages(nodes)
    owner = {name: manifest.process_of(name).name for name in STOPS}
    nodes.start()
    try:
        driver = spawn.Process(target=_drive, args=(to_driver, ready[0], args.burst),
                               daemon=True)
        monitor = spawn.Process(target=_monitor, daemon=True,
                                args=(to_monitor, results, ready[1], args.monitor_udp))
        driver.start()
        monitor.start()
        if not all(event.wait(60.0) for event in ready):
            raise RuntimeError('the driver or the monitor did not start')
        outages.wait(5.0)  # discovery, the stops clear
        to_monitor.put('report')
        heard = results.get(timeout=30.0)[0]
        for phase in args.phases:
            # Every publisher is the suite's, except while a second suite runs: then those
            # heard in the phase before (no second suite runs two phases in a row).
            ours = ({name: {gid for _, _, gid in h} for name, h in heard.items()}
                    if phase == 'second' else None)
            to_driver.put(phase)
            deaths_before = len(outages.ended)
            if phase == 'pauses':
                pause_driver(driver.pid, args.seconds, outages)
            elif phase == 'second':
                run_second_suites(args.seconds, to_driver, outages)
            elif phase == 'joins':
                run_joins(args.seconds, outages, transport_environment()
                          if args.join_settings == 'suite' else None)
            elif phase == 'kills':
                outages.kill_in_turn(args.seconds)
            elif phase == 'interrupts':
                outages.interrupt(args.seconds)
            else:
                outages.wait(args.seconds)
            to_monitor.put('report')
            heard, late = results.get(timeout=30.0)
            judged = 'yes' if late < CONTRACT else 'no: machine too loaded'
            deaths = {name: [t for t, ended in outages.ended[deaths_before:]
                             if owner[name] in ended] for name in STOPS}
            rows.append(' | '.join([
                phase, *(cell for name in STOPS for cell in gap_cells(
                    heard[name], ours and ours[name], deaths[name],
                    outages.ended[deaths_before:])),
                outages.interrupt_cell() if phase == 'interrupts' else '-',
                f'{late * 1e3:.0f}', judged,
                ' / '.join(f'{rss_mib(p.pid):.0f}' for p in nodes.processes.values())]))
        to_driver.put('quit')
        to_monitor.put('quit')
        driver.join(10.0)
        monitor.join(10.0)
    finally:
        nodes.stop()
    print(f'{machine()}; suite at SCHED_FIFO {args.priority}, bursts of {args.burst}; '
          f'RSS of {" / ".join(p.name for p in manifest.composed())}')
    print(table('phase | detector gaps > 150 ms | longest, ms (value before) | cleared of '
                "another's | silences of its own death | proximity gaps > 150 ms | longest, ms "
                "(value before) | cleared of another's | silences of its own death | Ctrl-C | "
                'monitor late, ms | judged | RSS, MiB', rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
