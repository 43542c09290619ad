"""Start manifest nodes as processes, as `ros2 launch` would, for pip installs.

Each node runs `python -m contact_estimation.nodes <name> --ros-args -r __node:=<name>
--params-file config/<name>.yaml --params-file config/robot.yaml [--params-file EXTRA]
[-p key:=value]`; a later parameter file overrides an earlier one, so one user file with
sections for several nodes works; config/robot.yaml's `/**` section gives every node the
robot (after the nodes' files: rcl applies sections in the order their names first appear,
and `-p` values join the `/**` one, so they win over the nodes' files).
In composed mode (the default) the core nodes run in four processes (nodes.yaml `composed`),
`python -m contact_estimation.nodes contact_estimation_chain --ros-args --params-file
config/<node>.yaml ... --params-file config/robot.yaml [--params-file EXTRA]` and the same
for contact_estimation_estimation, _proximity and _relay: each node takes its own
section of every file, by name.
(contact_estimation/nodes/__main__.py: a process stopped while it still imports exits
quietly with code 0.)

`Supervisor` starts a process that died again (`RestartPolicy`: at once, after pauses while it
keeps dying soon after its start, never after MAX_QUICK_DEATHS such deaths in a row), with
the exit code of the one before in its environment: its stops come back latched
(core/restart.py). The launch file restarts with the same policy.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import yaml

from contact_estimation import manifest
from contact_estimation.core.chain.lag import MAX_LAG, SIMULATED_MAX_LAG
from contact_estimation.core.restart import RESTARTED_AFTER, exit_description


def node_command(name: str, params_file: str | None = None,
                 overrides: dict[str, object] | None = None,
                 extra_params_files: tuple[str, ...] = (), namespace: str = '') -> list[str]:
    """The command line that runs node `name` with this interpreter (in `namespace`)."""
    spec = manifest.node(name)
    cmd = _entry_command(spec) + ['-r', f'__node:={name}'] + namespace_arguments(namespace)
    for path in (params_file or spec.parameters_path(), manifest.robot_parameters_path(),
                 *extra_params_files):
        cmd += ['--params-file', path]
    for key, value in (overrides or {}).items():
        cmd += ['-p', f'{key}:={param_literal(value)}']
    return cmd


def composed_command(spec: manifest.ComposedSpec, extra_params_files: tuple[str, ...] = (),
                     namespace: str = '',
                     node_params_files: tuple[str, ...] | None = None) -> list[str]:
    """The command line that runs the composed process `spec` with this interpreter: each of
    its nodes' parameter file (`node_params_files`, default config/<node>.yaml),
    config/robot.yaml, then the extra ones.

    No `__node` remap (it would rename every node of the process) and no `-p` (it would set
    the parameter on every node that declares it): per-node values go in a parameter file
    (`parameter_file`).
    """
    cmd = _entry_command(spec) + namespace_arguments(namespace)
    if node_params_files is None:
        node_params_files = tuple(manifest.node(n).parameters_path() for n in spec.nodes)
    for path in (*node_params_files, manifest.robot_parameters_path(), *extra_params_files):
        cmd += ['--params-file', path]
    return cmd


def placed_in_namespace(path: str, namespace: str, folder: str) -> str:
    """A copy of parameter file `path`, written into `folder`, whose sections name the nodes
    in `namespace` (`node_name:` → `/ns/node_name:`): rcl applies a bare node name to the
    node of the root namespace only, so a suite in a namespace would silently run on its
    defaults. `path` itself without a namespace."""
    namespace = namespace.strip('/')
    if not namespace:
        return path
    with open(path, encoding='utf-8') as f:
        sections = yaml.safe_load(f) or {}
    placed = {name if str(name).startswith('/') else f'/{namespace}/{name}': section
              for name, section in sections.items()}
    copy = os.path.join(folder, f'{len(os.listdir(folder))}_{os.path.basename(path)}')
    with open(copy, 'w', encoding='utf-8') as f:
        yaml.safe_dump(placed, f)
    return copy


def namespace_arguments(namespace: str) -> list[str]:
    """ROS arguments that put every node of a process in `namespace` ('' = none): the
    node namespace, which moves every relative topic, and /clock, so that a simulated arm in
    each of two namespaces keeps its own clock."""
    namespace = namespace.strip('/')
    if not namespace:
        return []
    return ['-r', f'__ns:=/{namespace}', '-r', f'/clock:=/{namespace}/clock']


def _entry_command(spec: manifest.Process) -> list[str]:
    """Start `spec`'s process through the node entry (contact_estimation/nodes/__main__.py)."""
    return [sys.executable, '-m', 'contact_estimation.nodes', spec.name, '--ros-args']


def parameter_file(values: dict[str, dict[str, object]]) -> str:
    """A temporary parameter file (`node: ros__parameters: ...`) with `values` by node name;
    the caller removes it."""
    with tempfile.NamedTemporaryFile('w', suffix='.yaml', prefix='contact_estimation_',
                                     delete=False) as f:
        yaml.safe_dump({name: {'ros__parameters': dict(params)}
                        for name, params in values.items()}, f)
    return f.name


# What `simulated_clock` changes of a node's settings, said by every command that uses it.
SIMULATED_CLOCK_NOTE = (
    'on the simulated clock max_lag of collision_detector and proximity_monitor is '
    f'{SIMULATED_MAX_LAG * 1e3:g} ms, '
    f'not {MAX_LAG * 1e3:g} ms: the clock is up to 25 ms ahead of or behind the samples '
    '(core/chain/lag.SIMULATED_MAX_LAG)')


def simulated_clock() -> dict[str, dict[str, object]]:
    """Parameter overrides, by node, that run the graph on the simulated cobot's clock: it
    publishes /clock, waits for the listener and the suite's speed inputs, and moves the arm
    once both have spoken (nodes/sim_cobot.py), every other node runs
    with use_sim_time, so a machine that cannot keep up slows them all together; and the
    max_lag of the collision detector and the proximity monitor is
    core/chain/lag.SIMULATED_MAX_LAG (what SIMULATED_CLOCK_NOTE says at start)."""
    overrides: dict[str, dict[str, object]] = {
        spec.name: {'use_sim_time': True} for spec in manifest.selected(with_sim=False)}
    for lagging in ('collision_detector', 'proximity_monitor'):
        overrides[lagging]['max_lag'] = SIMULATED_MAX_LAG
    overrides.update({spec.name: {'publish_clock': True, 'lockstep.speed_inputs': True}
                      for spec in manifest.nodes().values() if spec.group == 'sim'})
    return overrides


# The Fast DDS settings of the suite's processes (issue 36): with Fast DDS's defaults a lidar
# cloud of 1 MB or more at 10 Hz is lost on localhost (its shared memory segment holds 512 KB);
# config/fastdds.xml gives shared memory a 16 MB segment (benchmarks/cloud_transport.py).
# rmw_fastrtps replaces the transports with its own under ROS_AUTOMATIC_DISCOVERY_RANGE=
# LOCALHOST, so there config/fastdds_localhost.xml does what that range does (discovery on
# 127.0.0.1 only) and the range becomes SYSTEM_DEFAULT (the profile's). A profile or builtin
# transports the user set are kept as they are.
TRANSPORT_VARIABLES = ('FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE',
                       'FASTDDS_BUILTIN_TRANSPORTS')


def transport_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with the shipped Fast DDS settings, the environment of
    every process of the suite (`up`, the demo, the launch file)."""
    env = dict(os.environ if env is None else env)
    if any(env.get(name) for name in TRANSPORT_VARIABLES):
        return env
    profile = 'fastdds.xml'
    if env.get('ROS_AUTOMATIC_DISCOVERY_RANGE') == 'LOCALHOST':
        profile = 'fastdds_localhost.xml'
        env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'SYSTEM_DEFAULT'
    env['FASTDDS_DEFAULT_PROFILES_FILE'] = manifest.share_path('config', profile)
    return env


DEFAULT_PRIORITY = 40  # SCHED_FIFO: below a robot driver's (ros2_control's 50)


def process_priority(process: str, priority: int) -> int:
    """The SCHED_FIFO priority of `process` (a composed process or a node) when the suite is
    given `priority` (0: every process at normal priority): nodes.yaml `realtime` steps
    below it for the processes that raise a stop, or in separate mode their nodes; else 0."""
    for spec in manifest.composed():
        if process == spec.name or process in spec.nodes:
            if priority and spec.realtime is not None:
                return max(priority - spec.realtime, 1)
    return 0


def realtime_allowed() -> bool:
    """Whether this user may start processes at SCHED_FIFO (root, CAP_SYS_NICE or an
    RLIMIT_RTPRIO, and a kernel that grants it)."""
    try:
        return subprocess.run(['chrt', '-f', '1', 'true'], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0
    except OSError:  # no chrt
        return False


def chosen_priority(asked: str) -> tuple[int, str]:
    """The priority for `--priority` / `priority:=` `asked` ('auto', or 0-99), and what it
    means in a line for the user: 'auto' is DEFAULT_PRIORITY where the OS allows real-time
    priority, else 0 with a warning."""
    if asked != 'auto':
        priority = int(asked)
        if not 0 <= priority <= 99:
            raise ValueError(f'priority {asked}: must be auto, 0 (normal) or 1-99')
        return priority, (f'stops raised at SCHED_FIFO {priority}' if priority else
                          'every process at normal priority (asked): on a busy machine a '
                          'stop may wait for the CPU and come late')
    if realtime_allowed():
        return DEFAULT_PRIORITY, f'stops raised at SCHED_FIFO {DEFAULT_PRIORITY} (auto)'
    return 0, ('WARNING: real-time priority is not allowed here (run as root, or give the '
               'user CAP_SYS_NICE / an rtprio limit in /etc/security/limits.conf): every '
               'process at normal priority, and on a busy machine a stop may wait for the '
               'CPU and come late (README, Real-time priority)')


def realtime_prefix(priority: int) -> list[str]:
    """The command prefix that runs a process at SCHED_FIFO `priority` (none for 0): chrt
    fails at once, with the OS's reason, where real-time priority is not allowed."""
    return ['chrt', '-f', str(priority)] if priority else []


def param_literal(value: object) -> str:
    """A Python value as a `-p name:=value` literal (YAML syntax)."""
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (list, tuple)):
        return '[' + ','.join(param_literal(v) for v in value) + ']'
    if isinstance(value, str):
        return f"'{value}'"
    return repr(value)


# s a process may take to end after SIGINT before it is killed: every process ends within
# 1 s (benchmarks/supervision.py); one still running after this is stuck.
STOP_GRACE = 3.0


def stop_process(proc: subprocess.Popen, grace: float = STOP_GRACE) -> int:
    """SIGINT (what Ctrl-C and ros2 launch send), then SIGKILL after `grace` seconds."""
    return stop_processes({'': proc}, grace)[0]['']


def stop_processes(processes: dict[str, subprocess.Popen],
                   grace: float = STOP_GRACE) -> tuple[dict[str, int], set[str]]:
    """SIGINT to every process at once, SIGKILL to those still running after `grace` s; the
    exit codes, and the names of the processes killed."""
    deadline = time.monotonic() + grace
    running = {name for name, proc in processes.items() if proc.poll() is None}
    for name in running:
        processes[name].send_signal(signal.SIGINT)
    killed = set()
    for name in running:
        try:
            processes[name].wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            processes[name].kill()
            killed.add(name)
    return {name: proc.wait() for name, proc in processes.items()}, killed


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """SIGINT held back (blocked: pending, not lost) in this process while it starts a
    child, which starts with it blocked too, until the node entry takes it
    (contact_estimation/nodes/__main__.py): a Ctrl-C while the child's interpreter starts
    (site-packages: 0.1-2 s on a loaded machine) ended that start with a fatal error (exit
    code 1); and this process gets its own once the child is started, never between its fork
    and its exec."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@dataclass
class RestartPolicy:
    """When a process that died is started again: at once, unless it died less than QUICK s
    after its start for the second time in a row or more, then after a pause doubling from
    FIRST_PAUSE; never after MAX_QUICK_DEATHS such deaths in a row (a crash loop: a bad
    parameter file, a missing model; its log says why)."""

    QUICK = 30.0             # s
    FIRST_PAUSE = 1.0        # s
    MAX_QUICK_DEATHS = 3
    quick_deaths: int = 0    # in a row

    def pause_after(self, ran_for: float) -> float | None:
        """Seconds to wait before starting again a process that died after running
        `ran_for` s; None: give up."""
        self.quick_deaths = self.quick_deaths + 1 if ran_for < self.QUICK else 0
        if self.quick_deaths >= self.MAX_QUICK_DEATHS:
            return None
        return self.FIRST_PAUSE * 2 ** (self.quick_deaths - 2) if self.quick_deaths > 1 else 0.0

    def verdict(self, name: str, code: int, ran_for: float) -> tuple[float | None, str]:
        """`pause_after`, and the line that tells the user."""
        pause = self.pause_after(ran_for)
        died = f'{name} died ({exit_description(code)}) after {ran_for:.1f} s'
        if pause is None:
            return None, (f'{died}: not restarted, it died within {self.QUICK:g} s of its '
                          f'start {self.quick_deaths} times in a row (see its log)')
        return pause, (f'{died}: restarting it{f" in {pause:g} s" if pause else ""}, its '
                       'stops latched until ~/reset')


def restart_environment(previous_code: int | None) -> dict[str, str]:
    """What a process started again after one that ended with `previous_code` gets in its
    environment (none on a first start): core/restart.py."""
    return {} if previous_code is None else {RESTARTED_AFTER: str(previous_code)}


@dataclass
class NodeSet:
    """A group of manifest nodes running as child processes: `names` are node names, or a
    composed process's name (manifest.processes) for its nodes in one process.
    `overrides` are parameter values by node name. `priority` is given to the processes that
    raise a stop (nodes.yaml `realtime`, `process_priority`)."""

    names: list[str]
    extra_params_files: tuple[str, ...] = ()
    overrides: dict[str, dict[str, object]] = field(default_factory=dict)
    log_dir: str | None = None
    priority: int = 0          # SCHED_FIFO priority (chrt -f) of the chain; 0: normal
    namespace: str = ''        # ROS namespace of every node ('' = the root)
    # Processes that are no node of nodes.yaml (`up --view`: the live view), by name: their
    # command; supervised as the nodes are, at normal priority.
    commands: dict[str, list[str]] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    started_at: dict[str, float] = field(default_factory=dict)  # monotonic, by name
    killed: set[str] = field(default_factory=set)  # by `stop`, for not ending in time
    _reported: set[str] = field(default_factory=set)
    _scratch_files: list[str] = field(default_factory=list)
    _namespace_folder: str | None = None

    def start(self) -> None:
        for name in self.names:
            self.launch(name)

    def launch(self, name: str, previous_code: int | None = None) -> None:
        """Start process `name`; again after one that ended with `previous_code` (its log
        continued, and its stops latched: `restart_environment`), with the suite's transport
        settings (`transport_environment`)."""
        out = None
        if self.log_dir:
            os.makedirs(self.log_dir, exist_ok=True)
            out = open(os.path.join(self.log_dir, f'{name}.log'),
                       'w' if previous_code is None else 'a')
        try:
            with ctrl_c_held():
                self.processes[name] = subprocess.Popen(
                    realtime_prefix(process_priority(name, self.priority)) + self._command(name),
                    stdout=out, stderr=subprocess.STDOUT,
                    env={**transport_environment(), **restart_environment(previous_code)})
        finally:
            if out is not None:
                out.close()
        self.started_at[name] = time.monotonic()
        self._reported.discard(name)

    def _command(self, name: str) -> list[str]:
        if name in self.commands:
            return self.commands[name]
        composed = manifest.composed_process(name)
        extra = tuple(map(self._placed, self.extra_params_files))
        if composed is None:
            return node_command(name, self._placed(manifest.node(name).parameters_path()),
                                overrides=self.overrides.get(name), extra_params_files=extra,
                                namespace=self.namespace)
        overrides = {n: self.overrides[n] for n in composed.nodes if n in self.overrides}
        if overrides:
            self._scratch_files.append(parameter_file(overrides))
            extra += (self._placed(self._scratch_files[-1]),)
        return composed_command(composed, extra, self.namespace, tuple(
            self._placed(manifest.node(n).parameters_path()) for n in composed.nodes))

    def _placed(self, path: str) -> str:
        """`path`, or its copy that names the nodes in this set's namespace."""
        if not self.namespace:
            return path
        if self._namespace_folder is None:
            self._namespace_folder = tempfile.mkdtemp(prefix='contact_estimation_ns_')
        return placed_in_namespace(path, self.namespace, self._namespace_folder)

    def newly_dead(self) -> list[tuple[str, int]]:
        """Nodes that exited since the last call, with their exit codes."""
        dead = [(n, p.returncode) for n, p in self.processes.items()
                if p.poll() is not None and n not in self._reported]
        self._reported.update(n for n, _ in dead)
        return dead

    def alive(self) -> list[str]:
        return [n for n, p in self.processes.items() if p.poll() is None]

    def stop(self, grace: float = STOP_GRACE) -> dict[str, int]:
        """Ctrl-C every node (`stop_processes`); the exit codes, `killed` those killed."""
        codes, self.killed = stop_processes(self.processes, grace)
        for path in self._scratch_files:
            os.remove(path)
        self._scratch_files.clear()
        if self._namespace_folder is not None:
            shutil.rmtree(self._namespace_folder, ignore_errors=True)
            self._namespace_folder = None
        return codes

    def log_tail(self, name: str, lines: int = 15) -> str:
        if not self.log_dir:
            return ''
        with open(os.path.join(self.log_dir, f'{name}.log'), encoding='utf-8',
                  errors='replace') as f:
            return ''.join(f.readlines()[-lines:])


class Supervisor:
    """Keeps the processes of `nodes` running: each that dies is reported and started again
    as its RestartPolicy says (`run`); `summary` says how each ended."""

    POLL = 0.05  # s between looks: part of the stop's silence when a process dies

    def __init__(self, nodes: NodeSet, say: Callable[[str], None]):
        self.nodes, self._say = nodes, say
        self._policies = {name: RestartPolicy() for name in nodes.names}
        self.deaths: dict[str, list[int]] = {name: [] for name in nodes.names}  # exit codes
        self._due: dict[str, tuple[float, int]] = {}  # name → (restart time, exit code)
        self.given_up: set[str] = set()

    def run(self) -> None:
        """Until no process runs nor is due to start again (Ctrl-C: KeyboardInterrupt)."""
        while self.nodes.alive() or self._due:
            self.step()
            time.sleep(self.POLL)

    def step(self) -> None:
        """Report the processes that died since the last step and start those due again."""
        now = time.monotonic()
        for name, code in self.nodes.newly_dead():
            self.deaths[name].append(code)
            pause, line = self._policies[name].verdict(name, code,
                                                       now - self.nodes.started_at[name])
            if pause is None:
                self.given_up.add(name)
            else:
                self._due[name] = (now + pause, code)
            self._say(line)  # once decided: a Ctrl-C right after the line finds it so
        for name, (when, code) in list(self._due.items()):
            if now >= when:
                del self._due[name]
                self.nodes.launch(name, code)

    def summary(self, codes: dict[str, int]) -> tuple[list[str], bool]:
        """One line per process, how it ended (`codes`: NodeSet.stop's) and how often it
        died before; and whether any failed (died, or had to be killed)."""
        lines, failed = [], False
        for name in self.nodes.names:
            code = codes.get(name)
            if code is None:
                ended = 'not started (Ctrl-C came first)'
            elif name in self.given_up:
                ended = f'given up after it died {len(self.deaths[name])} times'
            elif name in self.nodes.killed:
                ended = f'killed: still running {STOP_GRACE:g} s after Ctrl-C'
            elif code in (0, -signal.SIGINT):
                ended = 'stopped' + (' while starting' if code else '')
            else:
                ended = f'ended with {exit_description(code)}'
            deaths = self.deaths[name]
            if deaths and name not in self.given_up:
                ended += (f'; it had died {len(deaths)} time{"s" if len(deaths) > 1 else ""} '
                          f'({", ".join(map(exit_description, deaths))}) and was restarted')
            failed |= bool(deaths) or ended.startswith(('killed', 'ended'))
            lines.append(f'{name}: {ended}')
        return lines, failed
