"""`up --sim --view`: the live view beside the running suite (the steady push of
config/scenarios/steady_push.yaml), watched by a real WebSocket client speaking Foxglove's
protocol: the channels are advertised, the push arrives as contact arrows (the simulator's
truth, the fused estimate, and a first estimate within a second of stamps of the truth), and
the stop the view shows is the one on the topic. Every wait is for an event, with a deadline."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import websockets
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Bool

from contact_estimation import manifest
from contact_estimation.launcher import stop_process
from contact_estimation.ros.qos import STOP_QOS
from contact_estimation.ros.testing import isolate_ros_domain

SUBPROTOCOL = 'foxglove.sdk.v1'   # the SDK's WebSocket protocol (Foxglove's v1 messages)
MESSAGE_DATA = 0x01               # binary opcode: one message of a subscribed channel
DEADLINE = 240.0                  # s: the suite on a loaded machine runs slower than real time
CHANNELS = {'/tf', '/view/scene', '/view/torque', '/view/stop', '/view/collision_events',
            '/view/proximity'}
PUSH = Path(__file__).resolve().parents[1] / 'config' / 'scenarios' / 'steady_push.yaml'


def _message_class(channel: dict):
    """The protobuf class of an advertised channel, from the schema it advertises (a
    FileDescriptorSet): the client knows nothing of the server's code."""
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel['schema']))
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(channel['schemaName']))


class FoxgloveClient:
    """A WebSocket client of the Foxglove protocol: the advertised channels, a subscription
    to each, and every message decoded (JSON or protobuf) to `on_message(topic, message)`."""

    def __init__(self, url: str):
        self.url, self.channels = url, {}

    async def run(self, done) -> None:
        """Receive until `done(topic, message)` says so."""
        async with websockets.connect(self.url, subprotocols=[SUBPROTOCOL],
                                      max_size=None) as ws:
            classes, by_subscription = {}, {}
            while True:
                frame = await ws.recv()
                if isinstance(frame, str):
                    message = json.loads(frame)
                    if message['op'] == 'advertise':
                        subscriptions = []
                        for channel in message['channels']:
                            self.channels[channel['topic']] = channel
                            if channel['encoding'] == 'protobuf':
                                classes[channel['id']] = _message_class(channel)
                            subscription = len(by_subscription)
                            by_subscription[subscription] = channel
                            subscriptions.append({'id': subscription, 'channelId': channel['id']})
                        await ws.send(json.dumps({'op': 'subscribe',
                                                  'subscriptions': subscriptions}))
                    continue
                opcode, subscription, _ = struct.unpack_from('<BIQ', frame)
                if opcode != MESSAGE_DATA:
                    continue
                channel, payload = by_subscription[subscription], frame[13:]
                decoded = (classes[channel['id']].FromString(payload)
                           if channel['id'] in classes else json.loads(payload))
                if done(channel['topic'], decoded):
                    return


class StopWatch(Node):
    """The stop as a controller reads it."""

    def __init__(self, context):
        super().__init__('view_test_stop', context=context)
        self.stops: list[bool] = []
        self.create_subscription(Bool, manifest.topic('collision_detector', 'stop'),
                                 lambda m: self.stops.append(m.data), STOP_QOS)


def _started(path: Path, pattern: str, proc: subprocess.Popen, deadline: float) -> re.Match:
    """Wait for `pattern` in the log at `path` (the process must stay alive)."""
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text())
        if found:
            return found
        assert proc.poll() is None, path.read_text()
        time.sleep(0.2)
    raise AssertionError(f'no {pattern!r} in {path}: {path.read_text()}')


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


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
             '--config', str(config), '--view', str(_free_port())],
            stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())
    try:
        found = _started(log, r'ws://(\S+):(\d+)', proc, time.monotonic() + 60)
        yield f'ws://{found[1]}:{found[2]}', proc, log
    finally:
        stop_process(proc)


def test_view_shows_channels_push_and_stop(suite_and_view, context):
    url, up, log = suite_and_view
    watch = StopWatch(context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(watch)
    spinning = threading.Event()
    spinning.set()
    thread = threading.Thread(target=lambda: [executor.spin_once(0.05)
                                              for _ in iter(spinning.is_set, False)])
    thread.start()
    client = FoxgloveClient(url)
    seen = {'arrows': {}, 'view_stop': None}

    def done(topic: str, message) -> bool:
        if topic == '/view/scene':
            for entity in message.entities:
                if entity.id.startswith('contact/') and entity.arrows:
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
        spinning.clear()
        thread.join()
        executor.shutdown()
        watch.destroy_node()
    assert CHANNELS <= set(client.channels), client.channels.keys()
    assert client.channels['/view/scene']['schemaName'] == 'foxglove.SceneUpdate'
    assert client.channels['/tf']['schemaName'] == 'foxglove.FrameTransforms'
    # The first estimate's arrow within a second (of the suite's stamps) of the truth's.
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
