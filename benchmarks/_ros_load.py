"""Sustained-rate load on one node run as a real process: messages lost, latency percentiles.

Shared by the benchmarks that feed a node a fixed-rate stream (joint states at 1 kHz, as a
Panda driver does) and time what comes out. The node runs the way `ros2 launch` starts it
(`ros/testing.node_process`), on its own ROS domain on localhost. A publisher thread sends
input i at its deadline with the wall-clock time as its stamp; the node keeps the stamp, so
latency = receipt time − stamp, across both DDS hops and the node's work. The first
`warmup` seconds (discovery, first-call costs) are not counted.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor

from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds
from contact_estimation.ros.qos import PIPELINE_QOS
from contact_estimation.ros.testing import node_process, ros_context, spin_for, spin_until


@dataclass
class LoadResult:
    rate: float          # Hz asked
    sent: int            # inputs published in the measured period
    latencies: np.ndarray  # s, one per output received for a measured input

    @property
    def received(self) -> int:
        return len(self.latencies)

    @property
    def lost(self) -> int:
        return self.sent - self.received

    def percentile(self, p: float) -> float:
        return float(np.percentile(self.latencies, p)) if self.received else float('nan')

    def row(self) -> str:
        return (f'{self.rate:8.0f} | {self.sent:7d} | {self.lost:6d} '
                f'({100.0 * self.lost / max(self.sent, 1):5.2f} %) | '
                f'{1e3 * self.percentile(50):7.3f} | {1e3 * self.percentile(99):7.3f} | '
                f'{1e3 * self.percentile(100):7.3f}')

    HEADER = ('rate, Hz |    sent |   lost           | p50, ms | p99, ms | max, ms\n'
              '---------+---------+------------------+---------+---------+--------')


def sustained_load(node_name: str, input_type, input_topic: str,
                   make_input: Callable[[int, object], object], output_type, output_topic: str,
                   rate: float, duration: float, warmup: float = 1.0,
                   overrides: dict | None = None, log_path: str | None = None,
                   input_qos=PIPELINE_QOS, output_qos=PIPELINE_QOS) -> LoadResult:
    """Feed node `node_name` `make_input(i, stamp)` at `rate` Hz for warmup + duration s.

    Outputs must carry their input's stamp in `header.stamp`.
    """
    with node_process(node_name, overrides=overrides, log_path=log_path) as proc, \
            ros_context() as context:
        node = rclpy.create_node('load_generator', context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        publisher = node.create_publisher(input_type, input_topic, input_qos)
        latencies = []
        measure_from = [float('inf')]

        def on_output(msg):
            stamp = stamp_to_seconds(msg.header.stamp)
            if stamp >= measure_from[0]:
                latencies.append(time.time() - stamp)

        node.create_subscription(output_type, output_topic, on_output, output_qos)
        try:
            if not spin_until(executor, lambda: (publisher.get_subscription_count() > 0
                                                 and node.count_publishers(output_topic) > 0),
                              30.0):
                raise RuntimeError(f'{node_name} did not come up (exit code {proc.poll()})')
            sent = [0]
            done = threading.Event()

            def publish():
                period, start = 1.0 / rate, time.monotonic()
                measure_from[0] = time.time() + warmup
                for i in range(int((warmup + duration) * rate)):
                    delay = start + i * period - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    now = time.time()
                    publisher.publish(make_input(i, seconds_to_stamp(now)))
                    if now >= measure_from[0]:
                        sent[0] += 1
                done.set()

            thread = threading.Thread(target=publish, daemon=True)
            thread.start()
            spin_until(executor, done.is_set, warmup + duration + 30.0)
            while True:  # drain: until nothing more arrives for 0.5 s
                before = len(latencies)
                spin_for(executor, 0.5)
                if len(latencies) == before:
                    break
            thread.join()
        finally:
            executor.shutdown()
            node.destroy_node()
        if proc.poll() is not None:
            raise RuntimeError(f'{node_name} exited with code {proc.returncode} under load')
        return LoadResult(rate, sent[0], np.array(latencies))
