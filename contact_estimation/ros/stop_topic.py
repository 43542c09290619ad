"""One suite per stop topic (issue 36): another publisher on a stop topic hides the stop.

Two suites in one ROS domain and namespace (a second `up`, the demo or a test started on the
robot PC, two arms without namespaces) publish on the same stop topics: a controller that
follows the latest value then sees one suite's latched True and the other's False in turn,
and moves while the first is stopped. So:

- every stop (ros/stop_signal.py) watches the graph for another publisher on its topic
  (`DuplicateWatch`): it says stop from its start until a look at the graph `discovery_time`
  (a parameter, DISCOVERY_TIME by default) after the node's creation found the topic its own
  (a suite that starts beside another publishes no cleared stop before it could see the
  other), then looks every WATCH_PERIOD. Another publisher latches the stop, cause
  `duplicate`, naming it; both suites see each other, so both say stop. The latch stays
  after the other has gone, until `~/reset`, which is refused while another publisher is
  there.
- `contact-estimation up` refuses to start where a stop topic it would use already has a
  publisher (`refusal`).

A look at the graph reads the DDS participant's cache (`get_publishers_info_by_topic`): about
35 µs of CPU, 4 times a second (benchmarks/second_suite.py measures it).
"""
from __future__ import annotations

import os
import time
from typing import Callable

from contact_estimation import manifest

DUPLICATE = 'duplicate'  # the cause of a stop latched by another publisher on its topic
# Time after a participant starts by which it has discovered the others of its domain, s.
# Fast DDS announces a participant 5 times in its first 0.5 s, then every 3 s: on localhost
# discovery takes 10-150 ms; on a 2-core machine at a load of 19 (5 tries) 0.09-0.15 s three
# times, 1.6 and 3.4 s twice (a first exchange missed), while the nodes there stopped
# `behind` every few seconds. Counted from the node's creation: a composed process's
# participant is older (its first node's), and a node takes 1-4 s more to start.
DISCOVERY_TIME = 2.0
WATCH_PERIOD = 0.25  # s between two looks at the graph while running
UNKNOWN = '_NODE_NAME_UNKNOWN_'  # rmw's node name of an endpoint whose node is not known yet
UNNAMED = 'a publisher whose node is not known yet'
ADVICE = ('run one suite per stop topic: another namespace (`contact-estimation up '
          '--namespace NAME`, launch namespace:=NAME) or another ROS_DOMAIN_ID')


def other_publishers(node, topic: str, own: str | None = None) -> list[str]:
    """Each publisher on `topic` (fully qualified) but the one of node `own` (default:
    `node`'s name) in `node`'s namespace, named by its node and namespace. That own publisher
    is the one endpoint with that name and namespace: a second suite's node of the same name
    is a second endpoint. DDS may report an endpoint before ROS has told its node (rmw's
    _NODE_NAME_UNKNOWN_): it counts, unnamed."""
    own_node, found, skipped = (own or node.get_name(), node.get_namespace()), [], False
    for info in node.get_publishers_info_by_topic(topic):
        if not skipped and (info.node_name, info.node_namespace) == own_node:
            skipped = True
        elif info.node_name.startswith(UNKNOWN):
            found.append(UNNAMED)
        else:
            found.append(f'node {info.node_name} in namespace {info.node_namespace}')
    return sorted(found)


class DuplicateWatch:
    """Whether a publisher other than node `own` (the node's stop process) shares `node`'s stop
    `topic`, looked at on the node's executor every WATCH_PERIOD. `stops` says the stop must
    be raised: while not yet `checked` (no look `discovery_time` s after the node's creation
    has found the topic its own; meanwhile also while a publisher's node is not known yet),
    or while `latched` (the reason, from the
    first other publisher named until `reset`). `changed()` is called when `stops` changed;
    the log and the node's /diagnostics say what was found."""

    def __init__(self, node, topic: str, changed: Callable[[], None],
                 discovery_time: float, own: str):
        self._node, self._topic, self._changed, self._own = node, topic, changed, own
        self._discovery_time = discovery_time
        self._started = node.created
        self.checked = False
        self.latched: str | None = None
        self.others: list[str] = []       # the other publishers at the last look
        self.unnamed = False              # one of them had no node name yet
        node.create_timer(WATCH_PERIOD, self.look)
        self.look()

    @property
    def stops(self) -> bool:
        return not self.checked or self.unnamed or self.latched is not None

    def look(self) -> None:
        """The graph now: latch on another publisher (and name it again when the graph names
        it better); note one that left."""
        stopped = self.stops
        others = other_publishers(self._node, self._topic, self._own)
        # Before the first clean look only: after it an endpoint is briefly unnamed as ROS
        # names it (the stop process's too), and it latches once named if it is another's.
        self.unnamed = UNNAMED in others and not self.checked
        others = [name for name in others if name != UNNAMED]
        gone = [name for name in self.others if name not in others]
        if others and others != self.others:
            if self.latched is None:
                self._node.problems.counts[DUPLICATE] += 1
            self.latched = (f'{DUPLICATE}: {self._topic} is also published by '
                            f'{", ".join(others)}: a controller would hear both; {ADVICE}')
            self._node.problems.above = self.latched
            self._node.get_logger().error(f'stop latched until ~/reset: {self.latched}')
        elif gone and self.latched is not None:
            self._node.get_logger().warning(
                f'{", ".join(gone)} no longer publishes {self._topic}; the stop stays latched '
                f'({DUPLICATE}) until ~/reset')
        self.others = others
        if not self.checked and not others and not self.unnamed:
            self.checked = self._node.steady() - self._started >= self._discovery_time
        self._status(f'also published by {", ".join(others)}' if others
                     else f'also published by {UNNAMED}' if self.unnamed
                     else 'this node alone' if self.checked
                     else 'looking for another publisher on it')
        if self.stops != stopped:
            self._changed()

    def refusal(self) -> str | None:
        """Why `~/reset` may not clear the stop now (None: it may)."""
        if self.others:
            return (f'refused: {self._topic} is also published by {", ".join(self.others)}; '
                    f'{ADVICE}')
        if not self.checked:
            return (f'refused: still looking for another publisher on {self._topic} '
                    f'(discovery_time: {self._discovery_time:g} s after the node\'s start)')
        return None

    def reset(self) -> bool:
        """Release the latch (`refusal()` was None); whether there was one."""
        if self.latched is None:
            return False
        self.latched = None
        self._node.problems.above = None
        self._node.get_logger().info(f'~/reset: the {DUPLICATE} latch released')
        return True

    def _status(self, text: str) -> None:
        self._node.problems.values['stop_topic'] = f'{self._topic}: {text}'


def refusal(namespace: str = '') -> str | None:
    """Why a suite must not start in `namespace` of this ROS domain: each of its stop topics
    that already has a publisher, with who publishes it (None: none has). Looks at the graph
    from a short-lived participant for up to DISCOVERY_TIME."""
    import rclpy
    from rclpy.context import Context

    topics = [spec.resolved_topic('stop', namespace) for spec in manifest.nodes().values()
              if 'stop' in spec.publishes]
    context = Context()
    rclpy.init(context=context, args=[])
    try:
        node = rclpy.create_node('contact_estimation_up_check', context=context,
                                 start_parameter_services=False, enable_rosout=False)
        deadline = time.monotonic() + DISCOVERY_TIME
        while True:
            taken = {topic: other_publishers(node, topic) for topic in topics}
            taken = {topic: names for topic, names in taken.items() if names}
            named = UNNAMED not in (name for names in taken.values() for name in names)
            if (taken and named) or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        node.destroy_node()
    finally:
        context.try_shutdown()
    if not taken:
        return None
    found = '; '.join(f'{topic} by {", ".join(names)}' for topic, names in taken.items())
    return (f'another suite already publishes a stop here (ROS_DOMAIN_ID '
            f'{os.environ.get("ROS_DOMAIN_ID", "0")}, namespace {namespace or "/"}): {found}. '
            'Two suites on one stop topic hide each other\'s stop from a controller: '
            f'{ADVICE}.')
