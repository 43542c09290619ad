"""Samples passed from node to node by function call in composed mode, and published topics
that cost nothing while nobody listens.

rclpy has no intra-process transport: two nodes in one process still serialise every message,
hand it to DDS and parse it again. In composed mode (contact_estimation/composed.py) the
nodes of one process share a `Handover`: a node that produces a topic another member reads
hands each sample (a core.chain.sample.JointSample, or the message itself for low-rate
topics) to that member's receiver (`Output.send`), and the reader does not subscribe to
the topic. Every topic is still published, with the same stamps and QoS, for anyone else who
subscribes, by the one process that is its publisher (manifest.process_plan): a topic
`published_elsewhere` (the joint samples the relay process takes from shared memory and
publishes: ros/sample_feed.py) has no publisher here at all. In separate mode (no Handover)
the same node code publishes and subscribes as usual, so each node keeps one "process one
sample" method that both modes call.

A receiver is called at once, on the producer's thread, with every batch of samples, in
stamp order: a producer that woke late hands its whole backlog on at once (issue 35: one
wake costs the same for 1 sample or 20; the shared-memory feed, where several receivers
share its samples, hands them one at a time to each in turn: ros/sample_feed.py), and the
replay hands them one at a time. Which
samples a consumer works on is its own rule, on the stamps (an estimator's rate), so a
replay that hands over the same samples gets the same estimates.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from rclpy.event_handler import PublisherEventCallbacks, QoSPublisherMatchedInfo
from rclpy.node import Node
from rclpy.qos import QoSProfile


class Handover:
    """The topics passed by function call inside one process, and their receivers;
    `published_elsewhere`: topics this process hands over but another process publishes."""

    def __init__(self, topics: set[str], published_elsewhere: frozenset[str] = frozenset()):
        self._receivers: dict[str, list[Callable]] = {topic: [] for topic in topics}
        self.published_elsewhere = published_elsewhere

    def receivers(self, topic: str) -> list[Callable] | None:
        """The (growing) list of in-process receivers of `topic`; None if it is not handed over."""
        return self._receivers.get(topic)

    def unreceived(self) -> list[str]:
        """Handed-over topics nobody in the process receives (a wiring error)."""
        return [topic for topic, receivers in self._receivers.items() if not receivers]


class Output:
    """A topic a node produces: its publisher, and the in-process receivers it hands each
    sample to (none in separate mode).

    With `only_when_listened` (the 1 kHz streams), `listened` says whether any subscription
    is matched, and the node builds and publishes the message only then. It follows the
    publisher's matched events (the subscription count, without asking the middleware per
    sample), and asks the middleware every RECOUNT s as well: a match that happens while
    the process is still building its nodes, before their executor runs, may never arrive
    as an event (a simulated cobot waiting for the joint states published from shared
    memory then waited for nothing).
    Latched, low-rate topics (the stop, input_stale: transient local) are always published,
    so that their last value is what a late subscriber gets. A topic another process
    publishes (`published_elsewhere`) has no publisher here and is never `listened`.
    """

    RECOUNT = 0.5  # s

    def __init__(self, node: Node, topic: str, msg_type, qos: QoSProfile,
                 receivers: list[Callable], only_when_listened: bool,
                 published_elsewhere: bool = False):
        events = PublisherEventCallbacks(matched=self._on_matched) if only_when_listened \
            else None
        self.publisher = None if published_elsewhere else node.create_publisher(
            msg_type, topic, qos, event_callbacks=events)
        self.receivers = receivers
        self._listened = not (only_when_listened or published_elsewhere)
        self._recount = (only_when_listened and not published_elsewhere)
        self._recount_at = 0.0
        self._subscribers = 0   # matched subscriptions as last counted (only_when_listened)
        self._joined = False    # one came since `joined` was last asked
        self.on_joined: Callable[[], None] = lambda: None  # told when a subscriber comes

    @property
    def listened(self) -> bool:
        if self._recount and time.monotonic() >= self._recount_at:
            self._recount_at = time.monotonic() + self.RECOUNT
            self._count(self.publisher.get_subscription_count())
        return self._listened

    def joined(self) -> bool:
        """Whether a subscriber has come since the last call (only_when_listened: by the
        matched events and the recount; a publisher that a subscriber of the same stream
        already listened to would otherwise never know a second one came)."""
        joined, self._joined = self._joined, False
        return joined

    @listened.setter
    def listened(self, value: bool) -> None:
        """Fixed from now on (replay: every stream goes to its bag)."""
        self._listened, self._recount = value, False

    @property
    def wanted(self) -> bool:
        """Someone takes what is sent: an in-process receiver, or a subscriber."""
        return bool(self.receivers) or self.listened

    def send(self, sample, message: Callable[[], Any] | None = None) -> None:
        """Hand `sample` over to the in-process receivers, then publish it while listened
        to: `message()` builds the message only then (None: the sample is the message)."""
        self.send_batch((sample,), message and (lambda _: message()))

    def send_batch(self, samples: Sequence, message: Callable[[Any], Any] | None = None
                   ) -> None:
        """Hand `samples` (in stamp order) over to the in-process receivers as one batch,
        then publish each while listened to: `message(sample)` builds its message only then
        (None: the sample is the message)."""
        for receive in self.receivers:
            receive(samples)
        if self.listened:
            for sample in samples:
                self.publisher.publish(sample if message is None else message(sample))

    def _on_matched(self, info: QoSPublisherMatchedInfo) -> None:
        self._joined |= info.current_count_change > 0
        self._count(info.current_count)

    def _count(self, subscribers: int) -> None:
        if subscribers > self._subscribers:
            self._joined = True
            self.on_joined()
        self._subscribers = subscribers
        self._listened = subscribers > 0
