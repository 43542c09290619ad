"""One suite per stop topic (issue 36), on real nodes over rclpy: a second stop publisher on a
topic latches both stops with the cause `duplicate`, naming the other; no cleared stop comes
from a suite that started beside another; the latch outlives the other until ~/reset, refused
while it is there; a second `up` in the domain is refused; namespaces keep suites apart."""
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Callable

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from contact_estimation import manifest
from contact_estimation.nodes.collision_detector import CollisionDetectorNode
from contact_estimation.ros import stop_topic
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.testing import ros_context

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARAMS = os.path.join(ROOT, 'config', 'collision_detector.yaml')
SPEC = manifest.node('collision_detector')
JOINTS = [f'panda_joint{i}' for i in range(1, 8)]
TIMEOUT = 30.0


class Rig(Node):
    """Plays the residual node (quiet residuals) and records every stop message with its
    publisher: (publisher gid, value, time it was sent on the system clock, s)."""

    def __init__(self, context):
        super().__init__('one_suite_probe', context=context)
        self.stops: list[tuple[bytes, bool, float]] = []
        self._residuals = self.create_publisher(JointState, SPEC.topic('residual'),
                                                PIPELINE_QOS)
        self.create_subscription(Bool, SPEC.topic('stop'), lambda m, info: self.stops.append(
            (bytes(info['publisher_gid']['data']), m.data, info['source_timestamp'] * 1e-9)),
            STOP_QOS)
        self.create_timer(0.005, self._publish)

    def _publish(self):
        msg = JointState(name=JOINTS, effort=[0.0] * 7, position=[0.1] * 7, velocity=[0.0] * 7)
        msg.header.stamp = self.get_clock().now().to_msg()
        self._residuals.publish(msg)

    def gids(self, node: Node) -> set[bytes]:
        """The gid of the publisher on `node`'s stop topic, its stop process's
        (ros/stop_process.py), as the graph has it."""
        topic = manifest.resolve(SPEC.topic('stop'), node.get_namespace())
        return {bytes(info.endpoint_gid) for info in self.get_publishers_info_by_topic(topic)
                if (info.node_name, info.node_namespace)
                == (node.stop_signal.publisher_node, node.get_namespace())}

    def values(self, gids: set[bytes] | None = None, sent_after: float = 0.0) -> list[bool]:
        """The stops from the publishers `gids` (default all) sent after `sent_after`."""
        return [value for gid, value, sent in self.stops
                if (gids is None or gid in gids) and sent > sent_after]


def detector(context, name: str = 'collision_detector', namespace: str = '/'):
    """A collision detector named `name` in `namespace` (max_lag 1 s and input_timeout 5 s:
    a loaded machine may run this process late, which is not what these tests are about)."""
    return CollisionDetectorNode(context=context, cli_args=[
        '--ros-args', '--params-file', PARAMS, '-r', f'__node:={name}',
        '-r', f'__ns:={namespace}'],
        parameter_overrides=[Parameter('max_lag', value=1.0),
                             Parameter('input_timeout', value=5.0)])


class Spinner:
    """Executors of several contexts (suites in processes of their own) spun in turn."""

    def __init__(self):
        self.executors: list[SingleThreadedExecutor] = []

    def add(self, context, *nodes: Node) -> None:
        executor = SingleThreadedExecutor(context=context)
        for node in nodes:
            executor.add_node(node)
        self.executors.append(executor)

    def until(self, done, timeout: float = TIMEOUT) -> bool:
        """Spin each in turn until `done()` or the deadline; True if `done()` came."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                return False
            for executor in self.executors:
                executor.spin_once(timeout_sec=0.005)
        return True

    def started(self, make: Callable[[], Node]) -> Node:
        """`make()` (a node that takes a while to start: its robot model) on a thread while
        the executors spin, as a second suite starts in a process of its own."""
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(make)
            assert self.until(future.done)
            return future.result()

    def call(self, client, timeout: float = TIMEOUT) -> Trigger.Response:
        assert client.wait_for_service(timeout_sec=timeout)
        future = client.call_async(Trigger.Request())
        assert self.until(future.done, timeout)
        return future.result()


@pytest.fixture
def spinner(context):
    spinner = Spinner()
    with ExitStack() as stack:
        stack.callback(lambda: [e.shutdown() for e in spinner.executors])
        yield spinner, stack


def latched(node) -> str:
    """What the node's /diagnostics status says above its own: the duplicate latch."""
    return node.problems.above or ''


def test_two_detectors_on_one_stop_topic_both_latch_duplicate_and_never_both_say_go(
        context, spinner):
    """As two suites in one domain and namespace: nodes of the same name, in two
    participants. The second starts while the first has cleared its stop: from then on no
    False comes from the second, and once both have latched none from either."""
    spinner, stack = spinner
    first = detector(context)
    stack.callback(first.destroy_node)
    rig = Rig(context)
    stack.callback(rig.destroy_node)
    spinner.add(context, first, rig)
    assert spinner.until(lambda: rig.stops and rig.stops[-1][1] is False), \
        'the first detector alone never cleared its stop'
    assert not latched(first)
    first_gids = rig.gids(first)  # the second's node has the same name: told apart by gid
    second_context = stack.enter_context(ros_context())
    second = spinner.started(lambda: detector(second_context))
    stack.callback(second.destroy_node)
    spinner.add(second_context, second)
    # Latched at once, and named once ROS has told the other's node (DDS may tell first).
    named = (f'{stop_topic.DUPLICATE}: /contact_estimation/stop is also published by node '
             'collision_detector_stop_')
    assert spinner.until(lambda: all(latched(n).startswith(named) for n in (first, second))), \
        f'not both latched naming the other: {latched(first)!r}, {latched(second)!r}'
    for node in (first, second):
        assert node.problems.counts[stop_topic.DUPLICATE] == 1
    both = time.time()
    assert spinner.until(lambda: len(rig.values(sent_after=both)) > 20)  # 0.5 s of heartbeats
    assert all(rig.values(sent_after=both)), 'a cleared stop while both were latched'
    second_gids = rig.gids(second) - first_gids
    assert second_gids and rig.values(second_gids) and all(rig.values(second_gids)), \
        'the second detector published a cleared stop beside the first'


def test_the_latch_outlives_the_other_publisher_until_reset_refused_while_it_is_there(
        context, spinner):
    spinner, stack = spinner
    first = detector(context)
    stack.callback(first.destroy_node)
    rig = Rig(context)
    stack.callback(rig.destroy_node)
    reset = rig.create_client(Trigger, '/collision_detector/reset')
    spinner.add(context, first, rig)
    assert spinner.until(lambda: rig.stops and rig.stops[-1][1] is False)
    other_context = stack.enter_context(ros_context())
    other = spinner.started(lambda: detector(other_context, 'collision_detector_b'))
    spinner.add(other_context, other)
    assert spinner.until(lambda: 'node collision_detector_b_stop_' in latched(first)
                         and 'node collision_detector_stop_' in latched(other)), \
        f'not both latched naming the other: {latched(first)!r}, {latched(other)!r}'
    response = spinner.call(reset)
    assert not response.success
    assert 'also published by node collision_detector_b_stop_' in response.message
    assert '--namespace' in response.message and 'ROS_DOMAIN_ID' in response.message

    other.destroy_node()
    assert spinner.until(lambda: 'this node alone' in first.problems.values['stop_topic'])
    alone = time.time()
    assert spinner.until(lambda: len(rig.values(sent_after=alone)) > 10)  # 0.5 s of heartbeats
    assert latched(first) and all(rig.values(sent_after=alone)), \
        'the latch fell with the other publisher'
    response = spinner.call(reset)
    assert response.success, response.message
    assert not latched(first)
    assert spinner.until(lambda: rig.stops[-1][1] is False)


def test_detectors_in_two_namespaces_do_not_interfere(context, spinner):
    spinner, stack = spinner
    root = detector(context)
    stack.callback(root.destroy_node)
    left_context = stack.enter_context(ros_context())
    left = detector(left_context, namespace='/left')
    stack.callback(left.destroy_node)
    spinner.add(context, root)
    spinner.add(left_context, left)
    topics = {root: '/contact_estimation/stop', left: '/left/contact_estimation/stop'}

    def alone() -> bool:
        return all(node.problems.values['stop_topic'] == f'{topic}: this node alone'
                   for node, topic in topics.items())
    assert spinner.until(alone), [n.problems.values['stop_topic'] for n in topics]
    assert spinner.until(lambda: False, 1.0) is False  # 4 looks more each
    assert alone() and not latched(root) and not latched(left)
    assert stop_topic.refusal('right') is None  # where `up --namespace right` would start
    assert re.search(r'/left/contact_estimation/stop by node collision_detector_stop_\w+ in '
                     'namespace /left', stop_topic.refusal('left') or '')


def test_a_second_up_in_the_domain_is_refused_with_what_to_do(context, spinner):
    spinner, stack = spinner
    running = detector(context)
    stack.callback(running.destroy_node)
    spinner.add(context, running)
    proc = subprocess.Popen([sys.executable, '-m', 'contact_estimation', 'up'],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=os.environ.copy(), cwd=ROOT)
    try:
        out = proc.stdout.readline()
        while out and not ('error' in out or 'starting' in out):
            out += proc.stdout.readline()
        assert 'starting' not in out, f'a second suite was started:\n{out}'
        out += proc.communicate(timeout=TIMEOUT)[0]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 2, out
    assert 'another suite already publishes a stop here' in out
    assert re.search(r'/contact_estimation/stop by node collision_detector_stop_\w+ in '
                     'namespace /', out)
    assert '--namespace' in out and 'ROS_DOMAIN_ID' in out
