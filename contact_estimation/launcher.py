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
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import yaml

from contact_estimation import manifest


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


SIMULATED_MAX_LAG = 0.1  # s: the detector's max_lag on the simulated cobot's clock


def simulated_clock() -> dict[str, dict[str, object]]:
    """Parameter overrides, by node, that run the graph on the simulated cobot's clock: it
    publishes /clock and waits for the listener (nodes/sim_cobot.py), every other node runs
    with use_sim_time, so a machine that cannot keep up slows them all together."""
    overrides: dict[str, dict[str, object]] = {
        spec.name: {'use_sim_time': True} for spec in manifest.selected(with_sim=False)}
    # The simulated clock moves in steps of up to lockstep.lead (20 ms) and max_catch_up
    # (50 ms), ahead of or behind the samples by that much by design: not the detector behind.
    overrides['collision_detector']['max_lag'] = SIMULATED_MAX_LAG
    overrides.update({spec.name: {'publish_clock': True}
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


def stop_process(proc: subprocess.Popen, grace: float = 5.0) -> int:
    """SIGINT (what Ctrl-C and ros2 launch send), then SIGKILL after `grace` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


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
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)
    _scratch_files: list[str] = field(default_factory=list)
    _namespace_folder: str | None = None

    def start(self) -> None:
        for name in self.names:
            out = subprocess.DEVNULL if self.log_dir else None
            if self.log_dir:
                os.makedirs(self.log_dir, exist_ok=True)
                out = open(os.path.join(self.log_dir, f'{name}.log'), 'w')
            self.processes[name] = subprocess.Popen(
                realtime_prefix(process_priority(name, self.priority)) + self._command(name),
                stdout=out,
                stderr=subprocess.STDOUT, env=transport_environment())

    def _command(self, name: str) -> list[str]:
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

    def stop(self) -> dict[str, int]:
        """Ctrl-C every node at once, then wait for each; return the exit codes."""
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        codes = {name: stop_process(proc) for name, proc in self.processes.items()}
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


def wait_for_processes(nodes: NodeSet, poll: float = 0.2) -> None:
    """Block until every node has exited, reporting each death as it happens."""
    while nodes.alive():
        for name, code in nodes.newly_dead():
            print(f'[contact-estimation] node {name} exited with code {code}', flush=True)
        time.sleep(poll)
