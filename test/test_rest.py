"""The proximity and relay processes at rest (issue 35): what their shared-memory feeds do
without a wake of their own (the proximity process) or without a subscriber (the relay)."""
import uuid

import numpy as np
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState

from contact_estimation import composed, manifest
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.sample_ring import (SampleRingReader, SampleRingWriter,
                                                       ring_name)
from contact_estimation.ros import sample_feed
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.qos import PIPELINE_QOS
from contact_estimation.ros.spinning import spin_until

TIMEOUT = 30.0  # s: generous deadline for each awaited event


def _sample(k: int, n: int = 7, t0: float = 100.0) -> JointSample:
    base = np.arange(n) + k
    t = t0 + k * 1e-3
    return JointSample(t, base * 0.1, base * 0.2, base * 0.3, base * 0.4,
                       (int(t), round((t - int(t)) * 1e9)), 'world')


def test_the_newest_sample_skips_the_others_without_counting_them_lost():
    name = f'contact_estimation_test_{uuid.uuid4().hex[:12]}'
    writer = SampleRingWriter(name, 7, capacity=64)
    reader = SampleRingReader(name)
    try:
        assert reader.newest() == []  # attached: nothing written since
        for k in range(40):
            writer.write(_sample(k))
        [newest] = reader.newest()
        assert newest.t == _sample(39).t
        np.testing.assert_array_equal(newest.tau_ext, _sample(39).tau_ext)
        assert reader.newest() == [] and reader.lost == 0
        for k in range(40, 43):
            writer.write(_sample(k))
        assert [s.t for s in reader.take()] == [_sample(k).t for k in range(40, 43)]
        assert reader.lost == 0
    finally:
        reader.close()
        writer.close()


def _process(name: str, context) -> list:
    files = [manifest.node(n).parameters_path() for n in manifest.composed_process(name).nodes]
    args = ['--ros-args'] + [a for f in files for a in ('--params-file', f)]
    return composed.build(manifest.composed_process(name).nodes, shared_memory=True,
                          context=context, cli_args=args)


def _feed_timers(node) -> list:
    """The node's timers that wake its process's shared-memory feed."""
    return [timer for timer in node.timers if isinstance(
        getattr(getattr(timer.callback, '__wrapped__', None), '__self__', None),
        sample_feed.SampleFeed)]


def test_the_proximity_process_takes_the_samples_when_its_check_decides(context):
    """No timer of the feed: the check's own take hands the monitor every sample written,
    its pose history has them all, and none is lost."""
    [monitor] = nodes = _process('contact_estimation_proximity', context)
    writer = SampleRingWriter(ring_name(monitor.get_namespace()), monitor.robot.n)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(monitor)
    try:
        assert _feed_timers(monitor) == []
        monitor.catch_up()  # the reader attaches
        t0 = stamp_to_seconds(monitor.get_clock().now().to_msg())
        for k in range(30):
            writer.write(_sample(k, monitor.robot.n, t0))
        last = _sample(29, monitor.robot.n, t0).t
        assert spin_until(executor, lambda: monitor._latest is not None
                          and monitor._latest.t == last, TIMEOUT)
        for k in range(30):
            t = _sample(k, monitor.robot.n, t0).t
            np.testing.assert_array_equal(monitor._history.at(t).q,
                                          _sample(k, monitor.robot.n).q)
        assert 'samples_lost' not in monitor.problems.values
    finally:
        writer.close()
        executor.shutdown()
        for node in nodes:
            node.destroy_node()


def test_the_relay_at_rest_builds_nothing_and_a_subscriber_gets_every_sample_from_its_match(
        context):
    """Nobody subscribed: the relay's feed wakes every IDLE_PERIOD and loses nothing it
    counts. A subscriber comes: the feed wakes every PERIOD again, and the subscriber gets
    the newest sample then (not the backlog of the rest) and every sample after it, in
    order, none twice."""
    [relay] = nodes = _process('contact_estimation_relay', context)
    writer = SampleRingWriter(ring_name(relay.get_namespace()), relay.robot.n)
    listener = Node('rest_test_listener', context=context)
    executor = SingleThreadedExecutor(context=context)
    for node in (relay, listener):
        executor.add_node(node)
    n = relay.robot.n
    try:
        [timer] = _feed_timers(relay)
        assert spin_until(executor, lambda: timer.timer_period_ns
                          == round(sample_feed.IDLE_PERIOD * 1e9), TIMEOUT)
        for k in range(50):
            writer.write(_sample(k, n))
        received: list[int] = []  # the samples' k, from their stamps
        listener.create_subscription(
            JointState, manifest.shared_samples().topics[0],
            lambda msg: received.append(round((stamp_to_seconds(msg.header.stamp) - 100.0)
                                              * 1e3)), PIPELINE_QOS)
        assert spin_until(executor, lambda: 49 in received, TIMEOUT), 'none after the match'
        assert timer.timer_period_ns == round(sample_feed.PERIOD * 1e9)
        for k in range(50, 80):
            writer.write(_sample(k, n))
        assert spin_until(executor, lambda: received[-1:] == [79], TIMEOUT)
        assert received == [49, *range(50, 80)]
        assert 'samples_lost' not in relay.problems.values
    finally:
        writer.close()
        executor.shutdown()
        for node in (*nodes, listener):
            node.destroy_node()

