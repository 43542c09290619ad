"""A WebSocket client of Foxglove's protocol (the SDK's `foxglove.sdk.v1`), as the Foxglove
app speaks it: the tests and benchmarks of the live view (`contact-estimation view`) watch it
through this, knowing nothing of the server's code but what it advertises."""
from __future__ import annotations

import asyncio
import base64
import json
import socket
import struct
from typing import Callable

import websockets
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

SUBPROTOCOL = 'foxglove.sdk.v1'   # the SDK's WebSocket protocol (Foxglove's v1 messages)
MESSAGE_DATA = 0x01               # binary opcode: one message of a subscribed channel


def message_class(name: str, schema: bytes):
    """The protobuf class `name` from its schema (a FileDescriptorSet, as a channel is
    advertised with and an MCAP file holds it)."""
    files = descriptor_pb2.FileDescriptorSet.FromString(schema)
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


class FoxgloveClient:
    """The advertised channels, a subscription to each, and every message decoded (JSON or
    protobuf) to `done(topic, message)`; `subscribed()` is called after each subscription."""

    def __init__(self, url: str, subscribed: Callable[[], None] = lambda: None):
        self.url, self.subscribed, self.channels = url, subscribed, {}

    async def run(self, done: Callable[[str, object], bool]) -> None:
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
                                classes[channel['id']] = message_class(
                                    channel['schemaName'], base64.b64decode(channel['schema']))
                            subscription = len(by_subscription)
                            by_subscription[subscription] = channel
                            subscriptions.append({'id': subscription, 'channelId': channel['id']})
                        await ws.send(json.dumps({'op': 'subscribe',
                                                  'subscriptions': subscriptions}))
                        self.subscribed()
                    continue
                opcode, subscription, _ = struct.unpack_from('<BIQ', frame)
                if opcode != MESSAGE_DATA:
                    continue
                channel, payload = by_subscription[subscription], frame[13:]
                decoded = (classes[channel['id']].FromString(payload)
                           if channel['id'] in classes else json.loads(payload))
                if done(channel['topic'], decoded):
                    return

    async def run_when_served(self, done: Callable[[str, object], bool],
                              retry: float = 0.2) -> None:
        """`run`, once the server accepts connections (it may still be starting)."""
        while True:
            try:
                return await self.run(done)
            except OSError:
                await asyncio.sleep(retry)


def free_port() -> int:
    """A TCP port free on this machine now, for a view to serve on."""
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]
