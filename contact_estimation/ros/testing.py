"""Helpers for tests and benchmarks that run real nodes over rclpy (Fast DDS, localhost).

Every run gets its own ROS_DOMAIN_ID and stays on localhost, so parallel runs on one
machine never hear each other. Nodes run either in-process, each test with its own
rclpy Context, or as real processes started the way `ros2 launch` would start them.
"""
from __future__ import annotations

import os
import subprocess
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, Mapping

import rclpy
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import SetParametersResult
from rcl_interfaces.srv import SetParameters
from rclpy.context import Context
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from contact_estimation import manifest
from contact_estimation.launcher import (composed_command, node_command, parameter_file,
                                         process_priority, realtime_prefix, stop_process)
from contact_estimation.ros.spinning import spin_until


def isolate_ros_domain() -> int:
    """Pick a domain id for this process tree (unless one is set) and keep DDS on localhost."""
    if 'CONTACT_ESTIMATION_TEST_DOMAIN' not in os.environ:
        os.environ['CONTACT_ESTIMATION_TEST_DOMAIN'] = str(1 + os.getpid() % 200)
    os.environ['ROS_DOMAIN_ID'] = os.environ['CONTACT_ESTIMATION_TEST_DOMAIN']
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')
    return int(os.environ['ROS_DOMAIN_ID'])


@contextmanager
def ros_context() -> Iterator[Context]:
    """An initialised rclpy Context of its own, shut down on exit."""
    context = Context()
    rclpy.init(context=context, domain_id=isolate_ros_domain())
    try:
        yield context
    finally:
        context.try_shutdown()


def set_remotely(probe: Node, executor: Executor, node_name: str,
                 values: list[tuple[str, Any]] | Mapping[str, Any],
                 timeout: float = 30.0) -> list[SetParametersResult]:
    """`ros2 param set`'s way: `values` (name, value) sent from `probe` to the
    set_parameters service of node `node_name`, which sets each on its own (the values
    arrive as the service gives them: arrays as array.array); its result for each."""
    pairs = list(values.items()) if isinstance(values, Mapping) else list(values)
    client = probe.create_client(SetParameters, f'/{node_name}/set_parameters')
    try:
        assert client.wait_for_service(timeout_sec=timeout), f'no /{node_name}/set_parameters'
        future = client.call_async(SetParameters.Request(parameters=[
            ParameterMsg(name=name, value=Parameter(name, value=value).get_parameter_value())
            for name, value in pairs]))
        assert spin_until(executor, future.done, timeout), f'{node_name}: no reply'
        return list(future.result().results)
    finally:
        probe.destroy_client(client)


@contextmanager
def spinning(context: Context, *nodes: Node) -> Iterator[SingleThreadedExecutor]:
    """An executor of `context` with `nodes` added; on exit it shuts down and the nodes are
    destroyed, the last first."""
    executor = SingleThreadedExecutor(context=context)
    for node in nodes:
        executor.add_node(node)
    try:
        yield executor
    finally:
        executor.shutdown()
        for node in reversed(nodes):
            node.destroy_node()


@contextmanager
def node_process(name: str, params_file: str | None = None,
                 overrides: dict[str, object] | None = None,
                 log_path: str | None = None, priority: int = 0) -> Iterator[subprocess.Popen]:
    """Run node `name` as a separate process for the duration of the block (at SCHED_FIFO
    `priority`, if not 0)."""
    cmd = realtime_prefix(priority) + node_command(name, params_file, overrides)
    with process(cmd, log_path) as proc:
        yield proc


@contextmanager
def composed_processes(overrides: dict[str, dict[str, object]] | None = None,
                       log_path: Callable[[str], str] | None = None,
                       priority: int = 0) -> Iterator[dict[str, subprocess.Popen]]:
    """Run the composed processes (composed mode: the chain at SCHED_FIFO `priority` if not
    0, and the estimators) for the duration of the block, by process name; `overrides` are
    parameter values by node name, `log_path(process)` where each logs."""
    extra = (parameter_file(overrides),) if overrides else ()
    try:
        with ExitStack() as stack:
            yield {spec.name: stack.enter_context(process(
                realtime_prefix(process_priority(spec.name, priority))
                + composed_command(spec, extra), log_path and log_path(spec.name)))
                for spec in manifest.composed()}
    finally:
        for path in extra:
            os.remove(path)


@contextmanager
def process(cmd: list[str], log_path: str | None) -> Iterator[subprocess.Popen]:
    """Run `cmd` on this run's ROS domain for the duration of the block, its output to
    `log_path` (or nowhere); stopped as `up` stops it (Ctrl-C, then a kill)."""
    isolate_ros_domain()
    log = open(log_path, 'w') if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
    try:
        yield proc
    finally:
        stop_process(proc)
        if log_path:
            log.close()
