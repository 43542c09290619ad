"""`up --sim --view`: the live view beside the running suite (the steady push of
config/scenarios/steady_push.yaml), watched by a real WebSocket client speaking Foxglove's
protocol: the channels are advertised, the push arrives as contact arrows (the simulator's
truth, the fused estimate, and a first estimate within a second of stamps of the truth), and
the stop the view shows is the one on the topic. Every wait is for an event, with a deadline."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from geometry_msgs.msg import PointStamped, WrenchStamped
from mcap.reader import make_reader
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from contact_estimation import manifest, view_picture
from contact_estimation.core.contact.contact import Contact
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.foxglove_client import FoxgloveClient, free_port, message_class
from contact_estimation.launcher import stop_process
from contact_estimation.ros.contact_messages import contact_messages
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.testing import isolate_ros_domain, process

DEADLINE = 240.0                  # s: the suite on a loaded machine runs slower than real time
CHANNELS = {'/tf', '/view/scene', '/view/torque', '/view/stop', '/view/collision_events',
            '/view/proximity'}
PUSH = Path(__file__).resolve().parents[1] / 'config' / 'scenarios' / 'steady_push.yaml'


class StopWatch(Node):
    """The stop as a controller reads it."""

    def __init__(self, context):
        super().__init__('view_test_stop', context=context)
        self.stops: list[bool] = []
        self.create_subscription(Bool, manifest.topic('collision_detector', 'stop'),
                                 lambda m: self.stops.append(m.data), STOP_QOS)


def _arrows(message) -> set[str]:
    """The contact entities of a SceneUpdate that carry an arrow."""
    return {e.id for e in message.entities if e.id.startswith('contact/') and e.arrows}


def _spun(context, *nodes: Node):
    """An executor spinning `nodes` on a thread of its own; call the result to stop it."""
    executor = SingleThreadedExecutor(context=context)
    for node in nodes:
        executor.add_node(node)
    spinning = threading.Event()
    spinning.set()
    thread = threading.Thread(target=lambda: [executor.spin_once(0.05)
                                              for _ in iter(spinning.is_set, False)])
    thread.start()

    def stop() -> None:
        spinning.clear()
        thread.join()
        executor.shutdown()
    return stop


def _started(path: Path, pattern: str, proc: subprocess.Popen, deadline: float) -> re.Match:
    """Wait for `pattern` in the log at `path` (the process must stay alive)."""
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text())
        if found:
            return found
        assert proc.poll() is None, path.read_text()
        time.sleep(0.2)
    raise AssertionError(f'no {pattern!r} in {path}: {path.read_text()}')


@pytest.fixture
def suite_and_view(tmp_path, context):
    """`up --sim --view PORT` with the simulated push: (url, `up`, its log)."""
    isolate_ros_domain()
    config = tmp_path / 'push.yaml'
    config.write_text(f'sim_cobot:\n  ros__parameters:\n    scenario: {PUSH}\n')
    log = tmp_path / 'up.log'
    with open(log, 'w') as out:
        proc = subprocess.Popen(
            [sys.executable, '-m', 'contact_estimation', 'up', '--sim', '--priority', '0',
             '--config', str(config), '--view', str(free_port())],
            stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())
    try:
        found = _started(log, r'ws://(\S+):(\d+)', proc, time.monotonic() + 60)
        yield f'ws://{found[1]}:{found[2]}', proc, log
    finally:
        stop_process(proc)


def test_view_shows_channels_push_and_stop(suite_and_view, context):
    url, up, log = suite_and_view
    watch = StopWatch(context)
    stop_spinning = _spun(context, watch)
    client = FoxgloveClient(url)
    seen = {'arrows': {}, 'view_stop': None}

    def done(topic: str, message) -> bool:
        if topic == '/view/scene':
            for entity in message.entities:
                if entity.id in _arrows(message):
                    stamp = entity.timestamp.seconds + entity.timestamp.nanos * 1e-9
                    seen['arrows'].setdefault(entity.id, stamp)
        elif topic == '/view/stop' and 'stop' in message:
            seen['view_stop'] = message['stop']
        return ({'contact/truth', 'contact/fused'} <= set(seen['arrows'])
                and bool(watch.stops) and watch.stops[-1] and seen['view_stop'] is True)

    try:
        asyncio.run(asyncio.wait_for(client.run(done), DEADLINE))
    except TimeoutError:
        pytest.fail(f'seen {seen}, stop topic {watch.stops[-3:]}; view log:\n'
                    f'{log.read_text()[-3000:]}')
    finally:
        stop_spinning()
        watch.destroy_node()
    assert CHANNELS <= set(client.channels), client.channels.keys()
    assert client.channels['/view/scene']['schemaName'] == 'foxglove.SceneUpdate'
    assert client.channels['/tf']['schemaName'] == 'foxglove.FrameTransforms'
    # The first estimate's arrow within a second of the truth's, by their own stamps (each
    # contact's entity has its estimate's; they once had the frame's joint state's).
    arrows = seen['arrows']
    first_estimate = min(t for entity, t in arrows.items() if entity != 'contact/truth')
    assert first_estimate - arrows['contact/truth'] < 1.0, seen
    # The view's stop is the topic's: latched True after the push.
    assert seen['view_stop'] is watch.stops[-1] is True
    assert up.poll() is None, log.read_text()
    # Ctrl-C ends the view with the suite (it once held SIGINT back as `up` started it, and
    # was killed after the grace time, or outlived an `up` killed meanwhile).
    assert stop_process(up) == 0, log.read_text()
    assert 'contact_estimation_view: stopped' in log.read_text(), log.read_text()


def test_the_shipped_layout_is_the_views(tmp_path):
    """config/foxglove_layout.json is what `view --write-layout` writes (regenerate it)."""
    written = tmp_path / 'layout.json'
    subprocess.run([sys.executable, '-m', 'contact_estimation', 'view', '--write-layout',
                    str(written)], check=True)
    shipped = PUSH.parents[1] / 'foxglove_layout.json'
    assert json.loads(written.read_text()) == json.loads(shipped.read_text())


PUSHED = Contact('panda_link5', [0.055, 0.0, -0.13], [-35.0, 0.0, 0.0])  # N on the forearm
PUSHED_AT = 1.0   # s: the estimate's stamp, not the joint states' (their clock's now)


class FakeSuite(Node):
    """What the view reads of a suite with a contact: the arm's joint states and the fused
    estimate's point and wrench (a push on the forearm, stamped PUSHED_AT), at 50 Hz."""

    def __init__(self, context, robot: RobotModel):
        super().__init__('view_test_suite', context=context)
        joint_state = self.create_publisher(
            JointState, manifest.topic('sample_relay', 'joint_state'), PIPELINE_QOS)
        point = self.create_publisher(PointStamped, manifest.topic('contact_localizer', 'point'),
                                      PIPELINE_QOS)
        wrench = self.create_publisher(WrenchStamped,
                                       manifest.topic('contact_localizer', 'wrench'), PIPELINE_QOS)

        def publish() -> None:
            state = JointState(name=robot.joint_names, position=[0.0] * len(robot.joint_names))
            state.header.stamp = self.get_clock().now().to_msg()
            joint_state.publish(state)
            for half, publisher in zip(contact_messages(PUSHED, seconds_to_stamp(PUSHED_AT)),
                                       (point, wrench)):
                publisher.publish(half)
        self.create_timer(0.02, publish)


def test_view_records_what_it_shows(tmp_path, context):
    """`view --mcap FILE` (as the demo runs it): a contact the view shows is in the file,
    on the same channels and schemas, for Foxglove to open later."""
    isolate_ros_domain()
    recording, log = tmp_path / 'view.mcap', tmp_path / 'view.log'
    suite = FakeSuite(context, RobotModel.load('panda'))
    stop_spinning = _spun(context, suite)
    try:
        with process([sys.executable, '-m', 'contact_estimation', 'view', '--robot', 'panda',
                      '--port', str(free_port()), '--mcap', str(recording)], str(log)) as view:
            found = _started(log, r'ws://(\S+):(\d+)', view, time.monotonic() + 60)
            client = FoxgloveClient(f'ws://{found[1]}:{found[2]}')
            try:
                asyncio.run(asyncio.wait_for(client.run(
                    lambda topic, m: topic == '/view/scene' and 'contact/fused' in _arrows(m)),
                    DEADLINE))
            except TimeoutError:
                pytest.fail(f'no fused arrow in the live view; its log:\n{log.read_text()}')
            assert stop_process(view) == 0, log.read_text()
    finally:
        stop_spinning()
        suite.destroy_node()
    with open(recording, 'rb') as f:
        recorded = list(make_reader(f).iter_messages())
    topics = {channel.topic: schema.name for schema, channel, _ in recorded}
    assert {topic: topics.get(topic) for topic in ('/view/scene', '/tf')} == {
        '/view/scene': 'foxglove.SceneUpdate', '/tf': 'foxglove.FrameTransforms'}, topics
    scene = [message_class(schema.name, schema.data).FromString(message.data)
             for schema, channel, message in recorded if channel.topic == '/view/scene']
    shown = [e for m in scene for e in m.entities if e.id in _arrows(m)]
    assert shown, scene[-1:]
    # Each contact stamped as its estimate was; the arm as its joint state.
    assert {(e.timestamp.seconds, e.timestamp.nanos) for e in shown} == {(int(PUSHED_AT), 0)}
    assert all(e.timestamp.seconds > PUSHED_AT for m in scene for e in m.entities
               if e.id == 'arm')
    # The README's picture is drawn from such a recording, at the contact.
    assert 'contact/fused' in view_picture.render(str(recording), str(tmp_path / 'view.png'))
