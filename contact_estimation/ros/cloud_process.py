"""Cloud work in a process of its own, so that a node that must decide on time never waits on
it (issue 35).

A lidar cloud's decoding, crop, voxels, self-filter and clusters (core/contact/lidar_fusion.py)
cost 10-100 ms, and open3d's voxel grid and DBSCAN keep the interpreter lock for their whole
call. Python threads share that lock: on a worker thread of the proximity monitor's process
they delayed its 100 Hz check (benchmarks/proximity_load.py, a 43 000-point cloud at 10 Hz:
p99 2-4 ms late against 0.2 ms without the cloud, and in one run up to 950 ms, 17 `behind`
stops in 2 minutes). A process of its own shares nothing with the node:

    clouds = CloudProcess(CloudRecipe(*robot_arguments(node), {'sphere_spacing': s}),
                          surfaces, node.get_name(), node.runs_in_real_time,
                          node.problems.report, node.get_logger().info)
    clouds.submit(CloudJob(t, q, CloudLayout.of(msg), pose, config, budget), msg.data)
    result = clouds.take()  # the CloudResult of the latest cloud finished since, or None

`submit` returns at once: the cloud's bytes go into a memfd (one copy; the worker maps it) and
a small pickled job onto a Unix socket; `take`, called from the node's own callbacks,
reads the worker's answer from its non-blocking end of the socket, so neither ever blocks
the node. Bounded: one cloud in the worker and one waiting; a newer cloud replaces the one
waiting (counted: `dropped`), since a cloud that is already late is worth nothing. After a
cloud that took c s of its CPU the worker is given the next one only c (1/max_duty − 1) s
later, so that it uses at most `max_duty` of a core (half by default) and a stream of heavy
clouds cannot starve the rest of a small machine; the clouds that come meanwhile are
skipped but for the latest. The worker returns the C heap's free memory to the system
after each cloud (glibc's malloc_trim): a 400 000-point cloud does not leave it hundreds of
MiB larger for good (issue 27).

The worker is `python -m contact_estimation.ros.cloud_process`, started by the node when it
starts; it builds its own robot model, link surfaces and LidarFusion from the `CloudRecipe`,
then processes one cloud at a time. Its start-up (benchmarks/cloud_worker.py, the Panda):
1.1-1.4 s to ready on an idle 2-core Xeon, 3-15 s on a loaded one, mostly importing open3d
and pinocchio, during which the node's thread is held ~0.5 ms; it takes ~400 MiB resident,
~160 MiB of them its own (the libraries' pages are shared with the node). Per cloud
(43 000 points, 516 kB): ~0.4 ms of the node's CPU, 12-14 ms of the worker's.

It starts at normal scheduling even when the node runs at SCHED_FIFO (set by the node as
soon as it exists: seconds of imports must not take a real-time core; not
SCHED_RESET_ON_FORK, which would also put the threads the node starts later, its
executor's among them, at normal scheduling), and once ready runs `below` priority steps
below the node (the proximity monitor's: one step below every process that raises a stop,
SCHED_FIFO 38 under `up --priority 40`): the stops' work preempts it, and it preempts the
other programs, so that its obstacles stay fresh on a busy machine; beside a node at normal
priority it stays there. It is in a
process group of its own (Ctrl-C in a terminal reaches the node, which ends it), and the
kernel kills it when the node's thread that started it ends (PR_SET_PDEATHSIG): no orphan
when the node is killed.

Supervision, in `take` and `submit`: a worker that exits, or hangs, is killed, reported on
the node's /diagnostics (counted as `cloud_worker_died` / `cloud_worker_hung`,
`cloud_worker` says what it is doing; `fault` is set until a new worker is ready) and
started again, after a pause that doubles from RESTART_PAUSE up to MAX_RESTART_PAUSE while
it keeps failing. Hung is judged on the worker's CPU time (/proc), not on the wall clock
alone: a worker that has not answered HANG_TIMEOUT s after it was handed a cloud hangs if
it used no CPU in the last HANG_TIMEOUT s (stopped, or waiting on something that never
comes) or more than HANG_TIMEOUT s of CPU on that cloud (START_TIMEOUT to start); one that
is slow because the machine is busy is left to finish, since a new one would first spend
seconds of CPU starting.
Meanwhile no obstacles come: the clouds grow stale and the node's rules for stale clouds
apply (the proximity monitor stops while the clusters are what it checks against).
`close` (destroy_node, on Ctrl-C or SIGTERM) ends the worker within a second.

In a node that does not run in real time (`runs_in_real_time` False: `contact-estimation
replay`), the cloud is processed in `submit`, in the node's thread, with the node's own
link surfaces: the result is there at the next `take`, whatever the machine's speed, so a
replay gives the same obstacles every time.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from contact_estimation.core.contact.lidar_fusion import CloudConfig, CloudError, LidarFusion
from contact_estimation.core.input_rejected import InputRejected
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.ros.conversions import CloudLayout, xyz_layout
from contact_estimation.ros.sensor_frames import IDENTITY, points_in_base_frame

# A worker that has not answered this long after it was handed a cloud, and used no CPU in
# as long or more CPU than this on the cloud, hangs: killed and started again (s). A 10 000-
# point cloud (`cloud.budget_points`) takes 10-100 ms of CPU.
HANG_TIMEOUT = 2.0
START_TIMEOUT = 30.0      # s of CPU to start, for the same judgement (it takes ~2.5 s)
RESTART_PAUSE = 0.5       # s before the first restart after a fault; doubles while failing
MAX_RESTART_PAUSE = 30.0  # s
_HEADER = struct.Struct('!Q')  # the length of each pickled frame on the socket
_PR_SET_PDEATHSIG = 1
_TICK = os.sysconf('SC_CLK_TCK')


@dataclass(frozen=True)
class CloudRecipe:
    """What the worker builds once: the robot (RobotModel.load's source, base and tip link),
    its link surfaces (LinkSurfaces keyword arguments, as the node's) and a LidarFusion."""

    robot: str
    base_link: str
    tip_link: str
    surfaces: dict = field(default_factory=dict)

    def build(self) -> LidarFusion:
        robot = RobotModel.load(self.robot, self.base_link, self.tip_link)
        return LidarFusion(LinkSurfaces(robot, **self.surfaces))


@dataclass(frozen=True)
class CloudJob:
    """One cloud to process but its bytes: its stamp t (s), the joint positions at t, where
    its points lie in its bytes, the pose of its frame in the base frame (translation,
    rotation), the cloud settings in force and `cloud.budget_points`."""

    t: float
    q: np.ndarray
    layout: CloudLayout
    pose: tuple[np.ndarray, np.ndarray]
    config: CloudConfig
    budget: int | None

    @classmethod
    def of_points(cls, t: float, q: np.ndarray, points: np.ndarray,
                  config: CloudConfig) -> tuple['CloudJob', np.ndarray]:
        """A cloud already decoded into the base frame (N×3), and the bytes to submit."""
        points = np.ascontiguousarray(points, dtype='<f8').reshape(-1, 3)
        return cls(t, q, xyz_layout(len(points)), IDENTITY, config, None), points


@dataclass(frozen=True)
class CloudResult:
    """A processed cloud: its stamp t, and its `obstacles` (core/contact/lidar_fusion.py), or
    why it was `rejected` (InputRejected, CloudError: the cloud is unusable), or how the work
    `failed` (an unexpected error: a bug, the node fails safe); `cpu`: the worker's CPU
    seconds for it."""

    t: float
    obstacles: Any = None
    rejected: Exception | None = None
    failed: Exception | None = None
    cpu: float = 0.0


class CloudWorkError(RuntimeError):
    """An unexpected error in the worker, as text (the original may not survive pickling)."""


def process_cloud(fusion: LidarFusion, job: CloudJob, data) -> CloudResult:
    """Decode `data` (the cloud's bytes), turn it into the base frame and process it at
    job.q: the worker's work, and a replay's in the node's thread."""
    try:
        points = points_in_base_frame(job.layout, data, job.pose, job.budget)
        fusion.config = job.config
        return CloudResult(job.t, fusion.update(job.t, job.q, points))
    except (InputRejected, CloudError) as err:
        return CloudResult(job.t, rejected=err.with_traceback(None))


class CloudProcess:
    """The clouds of node `name` processed in a worker process (module doc) built as `recipe`
    says; when the node does not run `in_real_time`, in `submit` with `surfaces` (the
    node's, built as `recipe` says). Faults go to `report(kind, detail)` (the node's
    ProblemCounter.report), news to `log(text)`."""

    def __init__(self, recipe: CloudRecipe, surfaces: LinkSurfaces, name: str,
                 in_real_time: bool, report: Callable[[str, str], None],
                 log: Callable[[str], None], max_duty: float = 0.5, below: int = 1):
        self.in_real_time = in_real_time
        self._below = below
        self._report, self._log = report, log
        self.dropped = 0          # clouds replaced by a newer one before the worker took them
        self.processed = 0
        self.restarts = 0
        self.fault = ''           # what went wrong, until a new worker is ready
        self._result: CloudResult | None = None
        self._process: subprocess.Popen | None = None
        if not in_real_time:
            self._fusion = LidarFusion(surfaces)
            return
        self._recipe = pickle.dumps(recipe)
        self._rest_per_cpu_second = 1.0 / max_duty - 1.0
        self._memory_fd = os.memfd_create(f'{name} clouds')
        self._memory: mmap.mmap | None = None
        self._waiting: tuple[CloudJob, Any] | None = None  # the next cloud, and its bytes
        self._killed: list[subprocess.Popen] = []           # reaped when they have exited
        self._socket: socket.socket | None = None
        self._inbox = bytearray()
        self._state = 'down'
        self._since = 0.0         # when the state or the last sign of life began (monotonic)
        self._cpu = (0.0, 0.0, 0.0)  # the worker's CPU time then, at its last reading, when
        self._rest_until = 0.0
        self._pause = RESTART_PAUSE
        self._startup = float('nan')
        self._real_time: tuple[int, int] | None = None  # of the thread that starts the worker
        self._scheduling = ''     # what the ready worker runs at
        self._start()

    # ------------------------------------------------------------------ the node's side
    def submit(self, job: CloudJob, data) -> None:
        """Process the cloud whose bytes are `data` (contiguous: bytes, array('B'), an
        array), as soon as the worker is free; a cloud still waiting is replaced."""
        data = memoryview(data).cast('B')
        if not self.in_real_time:
            self._result = process_cloud(self._fusion, job, data)
            self.processed += 1
            return
        self.dropped += self._waiting is not None
        self._waiting = (job, data)
        self._supervise()

    def take(self) -> CloudResult | None:
        """The latest cloud finished since the last call, or None."""
        if self.in_real_time:
            self._supervise()
        result, self._result = self._result, None
        return result

    def status(self) -> str:
        """What the worker is doing, for /diagnostics."""
        if not self.in_real_time:
            return f'in the node (not real time): {self.processed} clouds'
        pid = self._process.pid if self._process else None
        ready = f'pid {pid}, started in {self._startup:.2f} s, at {self._scheduling}'
        state = {'starting': f'starting (pid {pid})', 'idle': f'ready ({ready})',
                 'busy': f'processing ({ready})',
                 'down': f'down, restarting: {self.fault}'}[self._state]
        return (f'{state}; {self.processed} clouds, {self.dropped} dropped for a newer one, '
                f'{self.restarts} restarts')

    @property
    def pid(self) -> int | None:
        """The worker's process id (None: none running, or in the node)."""
        return self._process.pid if self._process is not None else None

    def close(self) -> None:
        """End the worker (within a second) and free the memory."""
        if not self.in_real_time:
            return
        self._stop(kill=False)
        for process in self._killed:
            _wait(process, 1.0)
        self._killed.clear()
        if self._memory is not None:
            self._memory.close()
            self._memory = None
        os.close(self._memory_fd)

    # ------------------------------------------------------------------ supervision
    def _supervise(self) -> None:
        """Read the worker's answers; restart it if it died or hangs; hand it the waiting
        cloud when it is free and has rested."""
        now = time.monotonic()
        self._killed = [p for p in self._killed if p.poll() is None]
        if self._state == 'down':
            if now - self._since >= self._pause:
                self._start()
            return
        try:
            if not self._receive(now):
                return
            if self._state in ('starting', 'busy'):
                self._judge(now)
            elif self._state == 'idle' and self._waiting is not None \
                    and now >= self._rest_until:
                self._hand_over(now)
        except OSError as err:  # its end of the socket closed as it died
            self._died(f'failed on its socket: {err}')

    def _judge(self, now: float) -> None:
        """Whether the worker, which owes an answer since `_since`, hangs (module doc)."""
        first, last, when = self._cpu
        if now - when < HANG_TIMEOUT:
            return
        cpu = _cpu_seconds(self._process.pid)
        limit = START_TIMEOUT if self._state == 'starting' else HANG_TIMEOUT
        doing = 'starting' if self._state == 'starting' else 'on a cloud'
        if cpu == last:
            self._fault('cloud_worker_hung', f'made no progress (no CPU in the last '
                        f'{now - when:.1f} s, {doing} for {now - self._since:.1f} s)')
        elif cpu - first > limit:
            self._fault('cloud_worker_hung', f'used {cpu - first:.1f} s of CPU {doing} (more '
                        f'than {limit:g} s)')
        else:
            self._cpu = (first, cpu, now)

    def _receive(self, now: float) -> bool:
        """Take the frames the worker sent; False when it has gone (reported)."""
        while True:
            try:
                chunk = self._socket.recv(1 << 20)
            except BlockingIOError:
                break
            if not chunk:
                self._died('exited')
                return False
            self._inbox += chunk
            self._since = now  # a sign of life: a large answer comes in pieces
            self._cpu = (self._cpu[0], self._cpu[1], now)
        while len(self._inbox) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._inbox)
            if len(self._inbox) < _HEADER.size + size:
                break
            message = pickle.loads(self._inbox[_HEADER.size:_HEADER.size + size])
            del self._inbox[:_HEADER.size + size]
            self._answer(message, now)
        return True

    def _answer(self, message, now: float) -> None:
        if isinstance(message, CloudResult):
            self._result = message
            self.processed += 1
            self._pause = RESTART_PAUSE  # working again
            self._rest_until = now + message.cpu * self._rest_per_cpu_second
        else:  # ready
            self._startup = now - self._started
            self.fault = ''
            self._scheduling = _just_below(self._process.pid, self._real_time, self._below)
            self._log(f'cloud worker (pid {self._process.pid}) ready {self._startup:.2f} s after '
                      f'its start, at {self._scheduling}')
        self._state, self._since = 'idle', now

    def _hand_over(self, now: float) -> None:
        (job, data), self._waiting = self._waiting, None
        size = len(data)
        if self._memory is None or len(self._memory) < size:
            self._map(size)
        self._memory[:size] = data
        frame = pickle.dumps((job, size), protocol=pickle.HIGHEST_PROTOCOL)
        self._socket.sendall(_HEADER.pack(len(frame)) + frame)  # small: never blocks
        self._state, self._since = 'busy', now
        cpu = _cpu_seconds(self._process.pid)
        self._cpu = (cpu, cpu, now)

    def _map(self, size: int) -> None:
        """The memfd mapped with room for `size` bytes (grown by whole MiB)."""
        if self._memory is not None:
            self._memory.close()
        size = max(size, 1) + (-max(size, 1)) % (1 << 20)
        if os.fstat(self._memory_fd).st_size < size:
            os.ftruncate(self._memory_fd, size)
        self._memory = mmap.mmap(self._memory_fd, size)

    def _died(self, how: str) -> None:
        code = self._process.poll() if self._process else None
        self._fault('cloud_worker_died', how + (f' (exit code {code})' if code is not None
                                                 else ''))

    def _fault(self, kind: str, detail: str) -> None:
        """Report, kill the worker and wait before starting a new one."""
        self.fault = f'the cloud worker (pid {self.pid}) {detail}'
        self._report(kind, f'{self.fault}: restarting it; clouds stale until then')
        self._stop(kill=True)
        self._state, self._since = 'down', time.monotonic()
        self.restarts += 1

    def _start(self) -> None:
        """A new worker, given the recipe through the memfd."""
        if self._memory is None or len(self._memory) < len(self._recipe):
            self._map(len(self._recipe))
        self._memory[:len(self._recipe)] = self._recipe
        ours, theirs = socket.socketpair()
        self._real_time = _real_time_of_this_thread()
        try:
            self._process = subprocess.Popen(
                [sys.executable, '-m', __name__, str(theirs.fileno()), str(self._memory_fd),
                 str(len(self._recipe)), str(os.getpid())],
                pass_fds=(theirs.fileno(), self._memory_fd), stdin=subprocess.DEVNULL,
                process_group=0)
        finally:
            theirs.close()
        if self._real_time is not None:  # its imports at normal scheduling (lowering is free)
            os.sched_setscheduler(self._process.pid, os.SCHED_OTHER, os.sched_param(0))
        ours.setblocking(False)
        self._socket, self._inbox = ours, bytearray()
        self._state = 'starting'
        self._started = self._since = time.monotonic()
        self._cpu = (0.0, 0.0, self._since)
        if self.restarts:  # the pause before the next start, should this worker fail too
            self._pause = min(2 * self._pause, MAX_RESTART_PAUSE)

    def _stop(self, kill: bool) -> None:
        """End the worker: SIGKILL (a fault: reaped later) or SIGTERM, waited for."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        if kill:
            process.kill()
            self._killed.append(process)
        else:
            process.terminate()
            _wait(process, 1.0)


def _wait(process: subprocess.Popen, timeout: float) -> None:
    """Wait up to `timeout` s for `process`, killing it halfway."""
    try:
        process.wait(timeout / 2)
    except subprocess.TimeoutExpired:
        process.kill()
        try:
            process.wait(timeout / 2)
        except subprocess.TimeoutExpired:
            pass


def _cpu_seconds(pid: int) -> float:
    """The CPU time (user + system, s) process `pid` has used, from /proc; 0 once it is gone."""
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii') as f:
            fields = f.read().rsplit(')', 1)[1].split()  # after "pid (comm)"
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # fields 14, 15 of proc(5)


def _real_time_of_this_thread() -> tuple[int, int] | None:
    """This thread's real-time (policy, priority), None at normal scheduling."""
    policy = os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK
    if policy not in (os.SCHED_FIFO, os.SCHED_RR):
        return None
    return policy, os.sched_getparam(0).sched_priority


def _just_below(pid: int, real_time: tuple[int, int] | None, below: int) -> str:
    """Every thread of process `pid` `below` priority steps below `real_time` (policy,
    priority), if it is real-time and above the lowest step; says what the process runs at."""
    if real_time is None or real_time[1] <= below:
        return 'normal scheduling'
    policy, priority = real_time[0], real_time[1] - below
    name = 'SCHED_FIFO' if policy == os.SCHED_FIFO else 'SCHED_RR'
    try:
        for thread in os.listdir(f'/proc/{pid}/task'):
            os.sched_setscheduler(int(thread), policy, os.sched_param(priority))
    except OSError as err:
        return f'normal scheduling ({name} {priority} refused: {err})'
    return f'{name} {priority}'


def _malloc_trim():
    """glibc's malloc_trim(0), or nothing where the C library has none."""
    trim = getattr(ctypes.CDLL(ctypes.util.find_library('c')), 'malloc_trim', None)
    return (lambda: trim(0)) if trim else (lambda: None)


# ---------------------------------------------------------------------- the worker's side
def _serve(channel: socket.socket, memory_fd: int, recipe_size: int) -> None:
    """Build the fusion, say ready, then answer each cloud until the node closes the socket."""
    memory = mmap.mmap(memory_fd, 0)
    fusion = pickle.loads(memory[:recipe_size]).build()
    trim = _malloc_trim()
    reader = channel.makefile('rb')
    _send(channel, 'ready')
    while True:
        header = reader.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return  # the node closed its end
        job, size = pickle.loads(reader.read(_HEADER.unpack(header)[0]))
        if size > len(memory):
            memory.close()
            memory = mmap.mmap(memory_fd, 0)
        cpu = time.process_time()
        with memoryview(memory) as view:
            try:
                result = process_cloud(fusion, job, view[:size])
            except Exception as err:  # noqa: BLE001 -- handed to the node, which fails safe
                where = traceback.extract_tb(err.__traceback__)[-1]
                result = CloudResult(job.t, failed=CloudWorkError(
                    f'{type(err).__name__} at {where.filename.rsplit("/", 1)[-1]}:'
                    f'{where.lineno}: {err}'))
                del err
        _send(channel, replace(result, cpu=time.process_time() - cpu))
        del result, job
        trim()


def _send(channel: socket.socket, message) -> None:
    frame = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    channel.sendall(_HEADER.pack(len(frame)) + frame)


def main(argv: list[str]) -> int:
    socket_fd, memory_fd, recipe_size, parent = (int(a) for a in argv)
    libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the node ended before the line above
        return 0
    with socket.socket(fileno=socket_fd) as channel:
        try:
            _serve(channel, memory_fd, recipe_size)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the node closed its end
    return 0


if __name__ == '__main__':
    # As the module proper, not __main__: what the worker pickles must name this module's
    # classes, which the node unpickles.
    from contact_estimation.ros import cloud_process
    sys.exit(cloud_process.main(sys.argv[1:]))
