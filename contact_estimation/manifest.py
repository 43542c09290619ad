"""The node set, read from `nodes.yaml`: the one place the launch file and
`contact-estimation up` share."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache

import yaml

from contact_estimation.core.chain.sample_ring import ORDERED_STORES

PACKAGE = 'contact_estimation'
_HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class NodeSpec:
    name: str
    group: str
    parameters: str  # relative to the package share directory
    publishes: dict[str, dict[str, str]] = field(default_factory=dict)
    subscribes: dict[str, dict[str, str]] = field(default_factory=dict)
    composed_only: bool = False  # a part of composed mode (the relay), not run separately

    @property
    def executable(self) -> str:
        """Console script name (setup.py declares one per node)."""
        return self.name

    @property
    def module(self) -> str:
        return f'{PACKAGE}.nodes.{self.name}'

    def topic(self, key: str) -> str:
        """Topic name for `key` (a publication or subscription of this node): relative, so
        that the node's namespace applies, but for the global /diagnostics and /clock."""
        return self._entry(key)['topic']

    def resolved_topic(self, key: str, namespace: str = '') -> str:
        """The fully qualified name of topic `key` for this node in `namespace`."""
        return resolve(self.topic(key), namespace)

    def message_type(self, key: str) -> str:
        """Message type of topic `key`, as `package/msg/Name`."""
        return self._entry(key)['type']

    def _entry(self, key: str) -> dict[str, str]:
        return self.publishes.get(key) or self.subscribes[key]

    def parameters_path(self) -> str:
        return os.path.join(share_directory(), self.parameters)

    @property
    def node_names(self) -> tuple[str, ...]:
        """The nodes this process runs: this one."""
        return (self.name,)


@dataclass(frozen=True)
class ComposedSpec:
    """One composed process (nodes.yaml `composed`): `nodes` in one process (console script
    `executable`), each handing its samples to the nodes that read them in the process by
    function call (contact_estimation/composed.py); `realtime`: how many steps below the
    priority `up --priority` and launch `priority:=` give the process runs at SCHED_FIFO (0:
    the top of the suite), None: normal priority."""

    key: str
    executable: str
    nodes: tuple[str, ...]
    realtime: int | None = None

    @property
    def name(self) -> str:
        """The process's name (the nodes inside keep their own names)."""
        return self.executable

    @property
    def module(self) -> str:
        return f'{PACKAGE}.composed'

    @property
    def node_names(self) -> tuple[str, ...]:
        return self.nodes


@dataclass(frozen=True)
class SharedSamples:
    """The joint samples one composed process hands to the others through shared memory
    (core/chain/sample_ring.py): what `source` (a topic) hands over in its process, every
    reader of `topics` in another process receives; the process `published_by` (a key of
    nodes.yaml `composed: processes`), their publisher, publishes `topics` for anyone who
    subscribes; a message on `woken_by` makes the readers take at once (a contact began)."""

    source: str
    topics: tuple[str, ...]
    published_by: str
    woken_by: str


def published_topics(names) -> set[str]:
    """The topics (relative) the nodes `names` publish."""
    return {s.topic(key) for s in map(node, names) for key in s.publishes}


def read_topics(names) -> set[str]:
    """The topics (relative) the nodes `names` read."""
    return {s.topic(key) for s in map(node, names) for key in s.subscribes}


def handed_over_topics(names: tuple[str, ...]) -> set[str]:
    """Topics one of the nodes `names` publishes and another of them reads: passed by
    function call when they run in one process."""
    return published_topics(names) & read_topics(names)


Process = NodeSpec | ComposedSpec


def resolve(topic: str, namespace: str = '') -> str:
    """The fully qualified name of `topic` in `namespace` ('' or '/': the root), as ROS
    resolves a relative name for a node there."""
    if topic.startswith('/'):
        return topic
    namespace = namespace.strip('/')
    return f'/{namespace}/{topic}' if namespace else f'/{topic}'


@lru_cache(maxsize=1)
def _declarations() -> dict:
    with open(os.path.join(_HERE, 'nodes.yaml'), encoding='utf-8') as f:
        return yaml.safe_load(f)


@lru_cache(maxsize=1)
def nodes() -> dict[str, NodeSpec]:
    return {name: NodeSpec(name=name, **spec) for name, spec in _declarations()['nodes'].items()}


def node(name: str) -> NodeSpec:
    return nodes()[name]


def topic(node_name: str, key: str, namespace: str = '') -> str:
    """Topic `key` of node `node_name`, fully qualified in `namespace` (for code outside the
    nodes: the replay, the recorder, the pictures, the bags)."""
    return node(node_name).resolved_topic(key, namespace)


@lru_cache(maxsize=1)
def composed() -> tuple[ComposedSpec, ...]:
    """The composed processes, in nodes.yaml order (the chain first)."""
    return tuple(ComposedSpec(key, raw['executable'], tuple(raw['nodes']), raw.get('realtime'))
                 for key, raw in _declarations()['composed']['processes'].items())


def composed_nodes() -> tuple[str, ...]:
    """Every node that runs composed, in process order."""
    return tuple(name for process in composed() for name in process.nodes)


def process_of(node_name: str) -> ComposedSpec:
    """The composed process that runs node `node_name` (the chain: the detector's)."""
    return next(p for p in composed() if node_name in p.nodes)


def stopping_processes() -> tuple[ComposedSpec, ...]:
    """The composed processes that raise a stop (a node of theirs publishes `stop`)."""
    return tuple(p for p in composed() if any('stop' in node(n).publishes for n in p.nodes))


def composed_process(name: str) -> ComposedSpec | None:
    """The composed process named `name` (its executable); None for a node's name."""
    return next((p for p in composed() if p.name == name), None)


@lru_cache(maxsize=1)
def shared_samples() -> SharedSamples:
    raw = _declarations()['composed']['shared_samples']
    return SharedSamples(raw['source'], tuple(raw['topics']), raw['published_by'],
                         raw['woken_by'])


def publishing_process() -> ComposedSpec:
    """The composed process that publishes the shared samples' topics (`published_by`)."""
    key = shared_samples().published_by
    process = next((p for p in composed() if p.key == key), None)
    if process is None:
        raise ValueError(f'nodes.yaml: shared_samples published_by = {key!r} names no composed '
                         f'process (one of {[p.key for p in composed()]})')
    return process


@dataclass(frozen=True)
class ProcessPlan:
    """What one process of composed mode does with the topics of its nodes, worked out from
    nodes.yaml (`process_plan`): a plain value, printed by `contact-estimation parameters
    --plan`. Topics are relative, sorted.

    - `from_outside`: what its nodes read that no suite node publishes (the driver's joint
      states, the sensors), each taken by this process itself;
    - `handed_over`: what passes from node to node inside it by function call;
    - `writes_ring`: it writes the shared samples (its `source` topic) into shared memory;
    - `reads_ring`: the shared topics it takes from shared memory;
    - `publishes`: every topic it is the publisher of (for anyone who subscribes);
    - `published_elsewhere`: topics it hands over inside but whose publisher is another
      process (it creates no publisher for them).
    """

    process: str
    nodes: tuple[str, ...]
    from_outside: tuple[str, ...]
    handed_over: tuple[str, ...]
    writes_ring: bool
    reads_ring: tuple[str, ...]
    publishes: tuple[str, ...]
    published_elsewhere: tuple[str, ...]


def process_plan(names: tuple[str, ...], shared_memory: bool = True,
                 process: str = '') -> ProcessPlan:
    """The plan of a process running nodes `names` (ProcessPlan). With `shared_memory` (a
    composed process of nodes.yaml, beside the others) the shared samples cross processes:
    written where their source is and some reader is not, read where the source is not and
    a reader, or their publisher, is. Without it (every node in one process: the replay)
    everything is handed over inside."""
    shared, here = shared_samples(), set(names)
    readers = {n for n in composed_nodes() if read_topics([n]) & set(shared.topics)}
    publisher = shared_memory and here == set(publishing_process().nodes)
    source_here = not publisher and shared.source in published_topics(names)
    writes = shared_memory and source_here and not readers <= here
    reads = shared_memory and not source_here and (publisher or bool(readers & here))
    ring = set(shared.topics) if publisher else set(shared.topics) & read_topics(names)
    handed_over = handed_over_topics(names)
    if writes:
        handed_over |= {shared.source}
    elif reads:
        handed_over |= ring & read_topics(names)
    elsewhere = set(shared.topics) if writes else set()
    suite = published_topics(n for n, spec in nodes().items() if spec.group == 'core')
    return ProcessPlan(
        process or '+'.join(names), tuple(names),
        from_outside=tuple(sorted(read_topics(names) - suite)),
        handed_over=tuple(sorted(handed_over)), writes_ring=writes,
        reads_ring=tuple(t for t in shared.topics if t in ring) if reads else (),
        publishes=tuple(sorted(published_topics(names) - elsewhere)),
        published_elsewhere=tuple(sorted(elsewhere)))


def plan() -> tuple[ProcessPlan, ...]:
    """The plan of every composed process of nodes.yaml, in its order."""
    return tuple(process_plan(p.nodes, process=p.name) for p in composed())


def share_directory() -> str:
    """Where launch/, config/ and urdf/ are: the source tree, or the installed share dir."""
    source_tree = os.path.dirname(_HERE)
    if os.path.isfile(os.path.join(source_tree, 'package.xml')):
        return source_tree
    try:
        from ament_index_python.packages import get_package_share_directory
        return get_package_share_directory(PACKAGE)
    except (ImportError, LookupError):
        return os.path.join(sys.prefix, 'share', PACKAGE)


def share_path(*parts: str) -> str:
    return os.path.join(share_directory(), *parts)


def selected(with_sim: bool) -> list[NodeSpec]:
    """The nodes to start beside a real arm (`core`), plus the simulated cobot if asked."""
    groups = {'core', 'sim'} if with_sim else {'core'}
    return [spec for spec in nodes().values() if spec.group in groups]


ROBOT_KEYS = ('robot', 'robot_description', 'base_link', 'tip_link')  # ros/params.ROBOT
WILDCARD = '/**'  # a parameter file section for every node


def robot_parameters_path() -> str:
    """config/robot.yaml: the suite's robot in a `/**` section, passed to every process
    after the nodes' own files and before the user's."""
    return share_path('config', 'robot.yaml')


def suite_robot(parameter_files: list[str], node_names: tuple[str, ...] | None = None
                ) -> dict[str, str]:
    """The robot parameters (ROBOT_KEYS) every node loads from `parameter_files` (the
    nodes' files, config/robot.yaml, then the user's), as rcl reads them there: the last
    `/**` value, over the nodes' own sections (rcl applies the sections in the order their
    names first appear, and every node's own file comes before config/robot.yaml).

    A node section of `node_names` (default all) that sets a robot states the robot it was
    made for (`calibrate` and `identify` write one): ValueError, naming the file, the node
    and both robots, when that is not the suite's.
    """
    names = set(node_names or nodes())
    suite: dict[str, str] = {}
    made_for: list[tuple[str, str, dict[str, str]]] = []  # (file, node, its robot keys)
    for path in parameter_files:
        with open(path, encoding='utf-8') as f:
            sections = yaml.safe_load(f) or {}
        for section, content in sections.items():
            given = {k: str(v) for k, v in
                     ((content or {}).get('ros__parameters') or {}).items() if k in ROBOT_KEYS}
            node_name = str(section).rstrip('/').split('/')[-1]
            if node_name in ('**', '*'):
                suite.update(given)
            elif given and node_name in names:
                made_for.append((path, node_name, given))
    for path, node_name, given in made_for:
        theirs = _robot_named({**suite, **given})
        if theirs != _robot_named(suite):
            raise ValueError(
                f'{path} was made for {theirs} (its {node_name} section says so), but the '
                f'suite\'s robot is {_robot_named(suite)}: set the robot once for every '
                'node (`up --robot NAME`, launch robot:=NAME, or robot: under `/**:` in your '
                'parameter file) and give only files made for it (`calibrate --robot NAME` '
                'and `identify ... --robot NAME` write them)')
    return {key: suite.get(key, '') for key in ROBOT_KEYS}


def _robot_named(values: dict[str, str]) -> str:
    """How robot parameters name the arm, for comparing and for messages."""
    name = ('the URDF in robot_description' if values.get('robot_description')
            else values.get('robot', ''))
    chain = [values.get(k, '') for k in ('base_link', 'tip_link')]
    return name + (f' ({chain[0] or "base"} → {chain[1] or "tip"})' if any(chain) else '')


def processes(with_sim: bool, separate: bool = False) -> list[Process]:
    """What to start, one entry per process: the `selected` nodes, each composed process
    where its first node stands, unless `separate` or the shared samples cannot cross
    processes here (core/chain/sample_ring.py: not on ARM)."""
    if separate or not ORDERED_STORES:
        return [spec for spec in selected(with_sim) if not spec.composed_only]
    result: list[Process] = []
    for spec in selected(with_sim):
        process = next((p for p in composed() if spec.name in p.nodes), None)
        if process is None:
            result.append(spec)
        elif spec.name == process.nodes[0]:
            result.append(process)
    return result
