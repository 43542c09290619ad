"""Composed mode, the default: every core node of nodes.yaml in one process, as ROS 2
component containers do in C++.

    python -m contact_estimation.nodes contact_estimation_composed \
        --ros-args --params-file config/<node>.yaml ...
    (`contact-estimation up`, `ros2 launch contact_estimation contact_estimation.launch.py`)

rclpy has no intra-process transport, so nodes in one process would still serialise, send
and parse every 1 kHz message once per reader. Here they share a `Handover`
(ros/handover.py): the listener hands each core.sample.JointSample to the residual node,
which hands it, with τ_ext, to the detector, all by function call within the joint-state
callback. Each stays a node of its own, with its name (so `--params-file` sections apply),
parameters, diagnostics, services and timers, and publishes every topic it publishes in
separate mode, with the same stamps and QoS, for anyone who subscribes.

The nodes run on the threads nodes.yaml gives (`composed.threads`), each with its own
executor: the 1 kHz chain that raises the torque stop on the first, the estimators and the
proximity monitor, whose work takes milliseconds, on the second. They take the samples
they need from mailboxes on their own thread (SuiteNode.receive's `period`), so an
estimate never delays a stop. The interpreter switches threads every `SWITCH_INTERVAL`,
so a sample waits at most that long for the other thread's Python code.
"""
from __future__ import annotations

import importlib
import sys

from contact_estimation import manifest
from contact_estimation.ros.handover import Handover
from contact_estimation.ros.node_main import run
from contact_estimation.ros.suite_node import SuiteNode


def node_class(name: str) -> type[SuiteNode]:
    """The SuiteNode subclass that node module `name` defines (one per module)."""
    module = importlib.import_module(manifest.node(name).module)
    return next(c for c in vars(module).values() if isinstance(c, type)
                and issubclass(c, SuiteNode) and c.__module__ == module.__name__)


def build(names: tuple[str, ...] | None = None, **node_kwargs) -> list[list[SuiteNode]]:
    """The composed nodes (`names`, default all of nodes.yaml `composed`), wired by a
    Handover, grouped by thread; `node_kwargs` go to every node (context, cli_args...).

    Built from the last to the first, so that what a node hands over while starting (the
    listener's first input_stale) reaches its readers, as a transient-local topic would.
    """
    spec = manifest.composed()
    names = names or spec.nodes
    handover = Handover(spec.handed_over_topics(names))
    built: dict[str, SuiteNode] = {}
    try:
        for name in reversed(names):
            built[name] = node_class(name)(handover=handover, **node_kwargs)
    except BaseException:
        for node in built.values():
            node.destroy_node()
        raise
    unreceived = handover.unreceived()
    if unreceived:
        for node in built.values():
            node.destroy_node()
        raise RuntimeError(f'composed: nobody in the process reads {unreceived}')
    return [[built[n] for n in thread if n in built] for thread in spec.threads.values()
            if any(n in built for n in thread)]


def main(args=None):
    return run(build, args)


if __name__ == '__main__':
    sys.exit(main())
