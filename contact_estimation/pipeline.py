"""Pipeline mode: the pipeline nodes of nodes.yaml in one process, on one executor.

    python -m contact_estimation.nodes contact_estimation_pipeline --ros-args --params-file config/<node>.yaml ...
    (`contact-estimation up --pipeline`, `ros2 launch ... pipeline:=true`)

rclpy has no intra-process transport, so three nodes in one process would still serialise,
send and parse every 1 kHz message three times. Here they share a `Handover`
(ros/handover.py): within the joint-state callback the listener calls the residual node,
which calls the detector, with arrays; the topics between them are not subscribed to. Each
stays a node of its own, with its name (so `--params-file` sections apply), parameters,
diagnostics, services and timers, and publishes every topic it publishes in separate mode,
with the same stamps and QoS, for anyone who subscribes.
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


def build(**node_kwargs) -> list[SuiteNode]:
    """The pipeline's nodes, wired by a Handover; `node_kwargs` go to every node (context,
    cli_args...).

    Built from the last to the first, so that what a node hands over while starting (the
    listener's first input_stale) reaches its readers, as a transient-local topic would.
    """
    spec = manifest.pipeline()
    handover = Handover(spec.handed_over_topics())
    built: list[SuiteNode] = []
    try:
        for name in reversed(spec.nodes):
            built.insert(0, node_class(name)(handover=handover, **node_kwargs))
    except BaseException:
        for node in built:
            node.destroy_node()
        raise
    unreceived = handover.unreceived()
    if unreceived:
        raise RuntimeError(f'pipeline: nobody in the process reads {unreceived}')
    return built


def main(args=None):
    return run(build, args)


if __name__ == '__main__':
    sys.exit(main())
