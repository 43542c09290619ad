"""A node's stop and speed scale, published by a process of their own (issue 36).

A thread of the node's process was not enough for the stop's heartbeat. rclpy holds the
interpreter lock through `publish()`, and Fast DDS's shared-memory transport can sleep a
third of a port's health-check timeout (333 ms by default) in the thread that first sends
to the port of a participant that joined or was restarted. Any of the node's other
publishers could thus hold the heartbeat for 333 ms (docs/performance.md, "The restart
stall"). So the stop of a node that runs in real time is published by a child process,
`<node>_stop_<6 hex digits>` in the graph, that sends nothing else and whose DDS participant has no
shared-memory transport (UDPv4 only: `stop_environment`). The node tells it:

- each change of the stop and of the speed scale, at once, on a Unix socket (a few bytes);
- when it last decided, in 16 bytes of shared memory that the child reads at each beat
  (no message, no wake: the node decides up to 1000 times a second).

The child publishes a change at once and beats the stop and the scale at the heartbeat rate,
saying stop while the node's last decision is too old (ros/heartbeat.py). It runs one
SCHED_FIFO step over the suite's highest process (its imports at normal scheduling), in a
process group of its own. The kernel kills it when the node's process ends
(PR_SET_PDEATHSIG), so no orphan beats a stop for a dead node. It also ends when the node
closes its end of the socket. A child that dies is reported on the node's /diagnostics and
started again; meanwhile the stop is silent, which a controller takes as stop.

Lateness is judged on the monotonic clock: three heartbeat periods, or under simulated time
Heartbeat.SLOWEST_CLOCK's share of them (the child does not hear /clock). A node on simulated
time that runs but does not decide stops on its own stale-input rules.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import hashlib
import mmap
import os
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from typing import Callable

from contact_estimation.launcher import transport_environment

RESTART_PAUSE = 1.0  # s between the death of a child and its successor
_DECIDED = struct.Struct('=d')  # the monotonic time of the node's last decision
_STOP = struct.Struct('=cb')     # b'S', the stop: 0, 1, or -1 (none decided yet)
_SCALE = struct.Struct('=cd')    # b'F', the speed scale
_LATE = struct.Struct('=c?d')    # b'L', whether newly late, the silence in s
_PR_SET_PDEATHSIG = 1
_FAST_DDS = '{http://www.eprosima.com}'


def stop_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The suite's Fast DDS settings (launcher.transport_environment) without shared memory:
    the profile file copied with its shared-memory transports left out, or the builtin
    transports UDPv4 only."""
    env = transport_environment(env)
    path = env.get('FASTDDS_DEFAULT_PROFILES_FILE') or env.get('FASTRTPS_DEFAULT_PROFILES_FILE')
    if not path:
        env['FASTDDS_BUILTIN_TRANSPORTS'] = 'UDPv4'
        return env
    ElementTree.register_namespace('', _FAST_DDS[1:-1])  # Fast DDS reads no prefixes
    tree = ElementTree.parse(path)
    shared = {d.findtext(f'{_FAST_DDS}transport_id')
              for d in tree.iter(f'{_FAST_DDS}transport_descriptor')
              if d.findtext(f'{_FAST_DDS}type') == 'SHM'}
    for transports in tree.iter(f'{_FAST_DDS}userTransports'):
        for transport in list(transports):
            if transport.text in shared:
                transports.remove(transport)
    text = ElementTree.tostring(tree.getroot())
    copy = os.path.join(tempfile.gettempdir(),
                        f'contact_estimation_stop_{hashlib.sha1(text).hexdigest()[:12]}.xml')
    if not os.path.exists(copy):
        with tempfile.NamedTemporaryFile('wb', dir=os.path.dirname(copy), delete=False) as f:
            f.write(text)
        os.replace(f.name, copy)
    env.pop('FASTRTPS_DEFAULT_PROFILES_FILE', None)
    env['FASTDDS_DEFAULT_PROFILES_FILE'] = copy
    return env


class StopProcess:
    """The child that publishes `stop_topic` (std_msgs/Bool) and `scale_topic` (Float64) as
    node `node_name` (`<name>_stop_<id>`) in `namespace`, beating `rate` times a second at
    SCHED_FIFO `priority` (0: normal scheduling); `ready` once it has made its publishers
    (until then ~/reset is refused). `on_late(newly, silence)` is told of each beat that
    said stop because the node's decision was `silence` s old; `on_fault(text)` of a child
    that died (it is started again)."""

    def __init__(self, name: str, namespace: str, stop_topic: str, scale_topic: str,
                 rate: float, simulated: bool, priority: int,
                 on_late: Callable[[bool, float], None], on_fault: Callable[[str], None]):
        # Unique: a second suite's stop process of the same node is another publisher.
        self.node_name = f'{name}_stop_{secrets.token_hex(3)}'
        self.ready = False  # the child has made its publishers
        self._arguments = [self.node_name, namespace, stop_topic, scale_topic, str(rate),
                           str(int(simulated)), str(priority)]
        self._on_late, self._on_fault = on_late, on_fault
        self._memory_fd = os.memfd_create('contact_estimation_stop_decided')
        os.ftruncate(self._memory_fd, _DECIDED.size)
        self._decided = mmap.mmap(self._memory_fd, _DECIDED.size)
        self._stop: bool | None = None
        self._scale: float | None = None
        self._unsent = True  # a change not sent yet: the child is not started, or was full
        self._closed = threading.Event()
        self._process: subprocess.Popen | None = None
        self._socket: socket.socket | None = None
        self.decision()
        # The thread starts the child, and starts it again: the kernel kills a child when the
        # thread that started it ends (PR_SET_PDEATHSIG), and this one lasts as the node.
        self._reader = threading.Thread(target=self._run, name=f'{name} stop process',
                                        daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def decision(self) -> None:
        """The node has just decided (it is watching)."""
        _DECIDED.pack_into(self._decided, 0, time.monotonic())
        if self._unsent:
            self._send_state()

    def publish_stop(self, stop: bool | None) -> None:
        self._stop = stop
        self._send_state()

    def publish_scale(self, scale: float) -> None:
        self._scale = scale
        self._send_state()

    def close(self) -> None:
        """End the child: it ends when its socket is shut (killed after 1 s more)."""
        self._closed.set()
        if self._socket is not None:
            with contextlib.suppress(OSError):  # wakes the reader; the child reads EOF
                self._socket.shutdown(socket.SHUT_RDWR)
        self._reader.join(timeout=1.0)
        if self._socket is not None:
            self._socket.close()
        if self._process is not None:
            try:
                self._process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._decided.close()
        os.close(self._memory_fd)

    def _send_state(self) -> None:
        """The stop and the scale to the child; kept for the next decision if its socket is
        full (a child that does not read is silent: a controller stops)."""
        if self._socket is None:
            return  # sent once the child is started
        try:
            if self._scale is not None:
                self._socket.send(_SCALE.pack(b'F', self._scale))
            self._socket.send(_STOP.pack(b'S', -1 if self._stop is None else self._stop))
            self._unsent = False
        except (BlockingIOError, OSError):
            self._unsent = True

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = subprocess.Popen(
                [sys.executable, '-m', __name__, str(theirs.fileno()), str(self._memory_fd),
                 str(os.getpid()), *self._arguments],
                pass_fds=(theirs.fileno(), self._memory_fd), stdin=subprocess.DEVNULL,
                env=stop_environment(), process_group=0)
        finally:
            theirs.close()
        if os.sched_getscheduler(0) != os.SCHED_OTHER:  # its imports at normal scheduling
            os.sched_setscheduler(self._process.pid, os.SCHED_OTHER, os.sched_param(0))
        ours.setblocking(False)
        return ours

    def _run(self) -> None:
        """Start the child; report one that died and start it again; tell the node of the
        late beats the child tells of."""
        while not self._closed.is_set():
            self.ready = False
            self._socket = self._start()
            self._send_state()
            self._read()
            if self._closed.is_set():
                return
            code = self._process.wait()
            self._on_fault(f'the stop process (pid {self._process.pid}) exited with code '
                           f'{code}: the stop is silent until it is started again')
            if self._closed.wait(RESTART_PAUSE):
                return

    def _read(self) -> None:
        """What the child says, until it ends or the node closes."""
        while not self._closed.is_set():
            try:
                select.select([self._socket], [], [], 1.0)
                message = self._socket.recv(64)
            except BlockingIOError:
                continue
            except (OSError, ValueError):
                return  # closed by the node
            if not message:
                return
            if message[:1] == b'R':
                self.ready = True
            else:
                self._on_late(*_LATE.unpack(message)[1:])


def _serve(channel: socket.socket, decided: mmap.mmap, name: str, namespace: str,
           stop_topic: str, scale_topic: str, rate: float, simulated: bool,
           priority: int) -> None:
    """The child's node: each change the node sends published at once, a beat every period
    (on a fixed schedule that starts over after a stall), until the node closes its end."""
    import rclpy
    from rclpy.parameter import Parameter
    from std_msgs.msg import Bool, Float64

    from contact_estimation.ros.heartbeat import Heartbeat
    from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS

    if priority:  # after the imports, before rclpy's threads: they inherit it
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        except PermissionError:
            pass
    rclpy.init(args=[])
    node = rclpy.create_node(name, namespace=namespace, enable_rosout=False,
                             start_parameter_services=False, parameter_overrides=[
                                 Parameter('start_type_description_service', value=False)])
    scale_publisher = node.create_publisher(Float64, scale_topic, PIPELINE_QOS)
    stop: list[bool | None] = [None]
    scale: list[float | None] = [None]

    def repeat_scale() -> None:
        if scale[0] is not None:
            scale_publisher.publish(Float64(data=scale[0]))

    heartbeat = Heartbeat(
        node.create_publisher(Bool, stop_topic, STOP_QOS), rate, lambda: stop[0],
        time.monotonic, repeat=repeat_scale,
        on_late=lambda newly, silence: _tell(channel, _LATE.pack(b'L', newly, silence)),
        slowest_clock=Heartbeat.SLOWEST_CLOCK if simulated else 1.0)
    _tell(channel, b'R')
    due = time.monotonic()
    try:
        while True:
            due = max(due + 1.0 / rate, time.monotonic())
            while (wait := due - time.monotonic()) > 0:
                if not select.select([channel], [], [], wait)[0]:
                    break
                message = channel.recv(64)
                if not message:
                    return  # the node has closed its end
                if message[:1] == b'F':
                    scale[0] = _SCALE.unpack(message)[1]
                    repeat_scale()
                elif message[:1] == b'S':
                    value = _STOP.unpack(message)[1]
                    stop[0] = None if value < 0 else bool(value)
                    heartbeat.decision(_DECIDED.unpack_from(decided)[0])
                    heartbeat.beat()
            heartbeat.decision(_DECIDED.unpack_from(decided)[0])
            heartbeat.beat(repeat=True)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def _tell(channel: socket.socket, message: bytes) -> None:
    """A note to the node, dropped when its socket is full: the beats never wait on it."""
    try:
        channel.send(message, socket.MSG_DONTWAIT)
    except BlockingIOError:
        pass


def main(argv: list[str]) -> int:
    """The child: socket and memory descriptors, the node's pid, then StopProcess's
    arguments."""
    socket_fd, memory_fd, parent = (int(a) for a in argv[:3])
    name, namespace, stop_topic, scale_topic, rate, simulated, priority = argv[3:]
    libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the node ended before the line above
        return 0
    with socket.socket(fileno=socket_fd) as channel, mmap.mmap(memory_fd, _DECIDED.size) as d:
        try:
            _serve(channel, d, name, namespace, stop_topic, scale_topic, float(rate),
                   simulated == '1', int(priority))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the node closed its end
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
