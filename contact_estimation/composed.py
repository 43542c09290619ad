"""Composed mode, the default: the core nodes of nodes.yaml in four processes, as ROS 2
component containers run nodes in C++.

    python -m contact_estimation.nodes contact_estimation_chain \
        --ros-args --params-file config/<node>.yaml ...
    python -m contact_estimation.nodes contact_estimation_estimation --ros-args ...
    python -m contact_estimation.nodes contact_estimation_proximity --ros-args ...
    python -m contact_estimation.nodes contact_estimation_relay --ros-args ...
    (`contact-estimation up`, `ros2 launch contact_estimation contact_estimation.launch.py`)

rclpy has no intra-process transport, so nodes in one process would still serialise, send
and parse every 1 kHz message once per reader. Here the nodes of a process share a
`Handover` (ros/handover.py): the listener hands each core.chain.sample.JointSample to the
residual node, which hands it, with τ_ext, to the detector, all by function call within the
joint-state callback. Each stays a node of its own, with its name (so `--params-file`
sections apply), parameters, diagnostics, services and timers.

Python threads share one interpreter lock, so a thread of its own would not keep an
estimate's milliseconds from delaying a stop: the chain (listener, residual node, detector)
is a process of its own, with one executor, at real-time priority when asked (nodes.yaml
`realtime`), and so is the proximity monitor, whose per-part stops must not wait for the
estimators' clouds. The chain writes every sample into shared memory
(core/chain/sample_ring.py); the other processes take them in batches (ros/sample_feed.py)
and hand them to their nodes (the F/T estimator and the localizer; the proximity monitor),
and the relay's process publishes the 1 kHz streams for anyone who subscribes. `build`
with every node (the replay) hands everything over by function call in one process: the
same samples in the same order.
"""
from __future__ import annotations

import importlib
import os
import sys

from contact_estimation import manifest
from contact_estimation.core.chain.sample_ring import FRAME_BYTES, SampleRingWriter, ring_name
from contact_estimation.ros.handover import Handover
from contact_estimation.ros.node_main import run
from contact_estimation.ros.sample_feed import SampleFeed
from contact_estimation.ros.suite_node import SuiteNode


SOURCE_NODE = 'joint_state_listener'  # takes the driver's messages for its process


def node_class(name: str) -> type[SuiteNode]:
    """The SuiteNode subclass that node module `name` defines (one per module)."""
    module = importlib.import_module(manifest.node(name).module)
    return next(c for c in vars(module).values() if isinstance(c, type)
                and issubclass(c, SuiteNode) and c.__module__ == module.__name__)


def build(names: tuple[str, ...] | None = None, shared_memory: bool = False,
          **node_kwargs) -> list[SuiteNode]:
    """The nodes `names` (default: every composed node) in this process, wired by a Handover
    as their plan says (manifest.process_plan: what is handed over, whether this process
    writes or reads the shared samples and which topics it publishes); `node_kwargs` go to
    every node (context, cli_args...).

    Built from the last to the first, so that what a node hands over while starting (the
    listener's first input_stale) reaches its readers, as a transient-local topic would.
    """
    names = tuple(names or manifest.composed_nodes())
    plan = manifest.process_plan(names, shared_memory)
    shared = manifest.shared_samples()
    handover = Handover(set(plan.handed_over), frozenset(plan.published_elsewhere))
    built: dict[str, SuiteNode] = {}
    try:
        for name in reversed(names):
            built[name] = node_class(name)(handover=handover, **node_kwargs)
        nodes = [built[n] for n in names]
        if plan.writes_ring:
            _write_samples(nodes, handover, shared.source)
        feeds = bool(plan.reads_ring)
        if feeds:
            feed = SampleFeed(nodes, handover, ring_name(nodes[0].get_namespace()),
                              plan.reads_ring, shared.source,
                              publishes=bool(set(plan.reads_ring) & set(plan.publishes)),
                              woken_by=shared.woken_by)
            nodes[0].closing(feed.close)
        # What waits for this process: the driver's messages where the listener is (the
        # chain, the replay), else the shared samples.
        listener = next((n for n in nodes if n.get_name() == SOURCE_NODE), None)
        catch_up = listener.take_waiting if listener is not None else feeds and feed.take
        if catch_up:
            for node in nodes:
                node.catch_up = catch_up
        unreceived = handover.unreceived()
        if unreceived:
            raise RuntimeError(f'composed: nobody in the process reads {unreceived}')
    except BaseException:
        for node in built.values():
            node.destroy_node()
        raise
    return nodes


def _write_samples(nodes: list[SuiteNode], handover: Handover, source: str) -> None:
    """Every sample handed over on `source`, also into the shared memory of this suite; a
    frame_id too long for it is said on the first node's /diagnostics (`frame_id_cut`)."""
    def said(frame_id: str) -> None:
        nodes[0].problems.report('frame_id_cut', f'joint state frame_id {frame_id[:80]!r} is '
                                 f'longer than {FRAME_BYTES} bytes: the other processes get '
                                 'it cut to that')

    writer = SampleRingWriter(ring_name(nodes[0].get_namespace()), nodes[0].robot.n,
                              on_cut=said)
    handover.receivers(source).append(writer.write_batch)
    nodes[0].closing(writer.close)


def main(args=None):
    """Run the composed process that the command line names (its console script, or the
    argument after `python -m contact_estimation.nodes`)."""
    argv = sys.argv if args is None else args
    names = {p.name for p in manifest.composed()}
    name = next(os.path.basename(a) for a in argv if os.path.basename(a) in names)
    return run(lambda: build(manifest.composed_process(name).nodes, shared_memory=True), args)


if __name__ == '__main__':
    sys.exit(main())
