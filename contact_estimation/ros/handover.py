"""Samples passed from node to node by function call in composed mode, and published topics
that cost nothing while nobody listens.

rclpy has no intra-process transport: two nodes in one process still serialise every message,
hand it to DDS and parse it again. In composed mode (contact_estimation/composed.py) the
nodes of one process share a `Handover`: a node that produces a topic another member reads
hands each sample (a core.sample.JointSample, or the message itself for low-rate topics) to
that member's receiver (`Output.hand_over`), and the reader does not subscribe to the topic.
Every topic is still published, with the same stamps and QoS, for anyone else who
subscribes. In separate mode (no Handover) the same node code publishes and subscribes as
usual, so each node keeps one "process one sample" method that both modes call.

A receiver of the 1 kHz chain is called at once, on the producer's thread. A consumer that
works at its own rate on another thread (the estimators, the proximity check) gets a
`Mailbox` instead: putting a sample in costs a deque append, and the consumer takes what it
needs on its own thread, so its milliseconds of work never delay the stop.
"""
from __future__ import annotations

from collections import deque
from typing import Callable

from rclpy.event_handler import PublisherEventCallbacks, QoSPublisherMatchedInfo
from rclpy.node import Node
from rclpy.qos import QoSProfile


class Handover:
    """The topics passed by function call inside one process, and their receivers."""

    def __init__(self, topics: set[str]):
        self._receivers: dict[str, list[Callable]] = {topic: [] for topic in topics}

    def receivers(self, topic: str) -> list[Callable] | None:
        """The (growing) list of in-process receivers of `topic`; None if it is not handed over."""
        return self._receivers.get(topic)

    def unreceived(self) -> list[str]:
        """Handed-over topics nobody in the process receives (a wiring error)."""
        return [topic for topic, receivers in self._receivers.items() if not receivers]


class Mailbox:
    """The samples one consumer has not taken yet, at most `capacity` (the oldest go first
    and are counted in `overflowed`). `put` may be called from any thread (deque appends
    and pops are atomic); the consumer drains it on its own thread."""

    def __init__(self, capacity: int):
        self._samples: deque = deque(maxlen=capacity)
        self.overflowed = 0

    @property
    def capacity(self) -> int:
        return self._samples.maxlen

    def put(self, sample) -> None:
        if len(self._samples) == self.capacity:
            self.overflowed += 1
        self._samples.append(sample)

    def take(self) -> list:
        """Every sample waiting, oldest first."""
        taken = []
        while True:
            try:
                taken.append(self._samples.popleft())
            except IndexError:
                return taken


class Output:
    """A topic a node produces: its publisher, and the in-process receivers it hands each
    sample to (none in separate mode).

    With `only_when_listened` (the 1 kHz streams), `listened` says whether any subscription
    is matched, and the node builds and publishes the message only then. It follows the
    publisher's matched events (the subscription count, without asking the middleware per
    sample).
    Latched, low-rate topics (the stop, input_stale: transient local) are always published,
    so that their last value is what a late subscriber gets.
    """

    def __init__(self, node: Node, topic: str, msg_type, qos: QoSProfile,
                 receivers: list[Callable], only_when_listened: bool):
        events = PublisherEventCallbacks(matched=self._on_matched) if only_when_listened \
            else None
        self.publisher = node.create_publisher(msg_type, topic, qos, event_callbacks=events)
        self.receivers = receivers
        self.listened = not only_when_listened

    def hand_over(self, sample) -> None:
        """Give this sample to every in-process receiver."""
        for receive in self.receivers:
            receive(sample)

    def _on_matched(self, info: QoSPublisherMatchedInfo) -> None:
        self.listened = info.current_count > 0
