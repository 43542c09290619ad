"""The stop contract a controller follows, written once for every node with a stop (the
collision detector, the proximity monitor); README "The stop contract" states it for users.

- `stop` (std_msgs/Bool, True = stop): reliable and transient local (a controller that starts
  late gets it at once), published on every change and as a heartbeat by a process of its
  own (ros/stop_process.py, `<node>_stop_<id>` in the graph), which says stop when the node's own
  decisions fall behind (ros/heartbeat.py). A controller treats `Heartbeat.MISSED` missed
  beats as stop. A replay publishes its stop itself, on changes.
- a speed scale (std_msgs/Float64: the detector's f_S, the proximity monitor's speed scale),
  published when it moves enough to matter (core/chain/time_scaling.worth_publishing: no
  chatter) and repeated at the heartbeat rate, by the same process (by a timer in a
  replay).
- `~/reset` (std_srvs/Trigger): the node's `reset()` says whether the stop may clear, and
  why not; it answers success only when the stop it then published is False (the reply and
  the published stop never disagree: issue 27), and its requests are queued deep enough for
  a flood of calls (ros/qos.SERVICE_QOS).
- one suite per stop topic (ros/stop_topic.py): the stop is raised until a look at the graph
  found no other publisher on its topic, and latched (`duplicate`) when one is found; the
  reset is refused while it is there. A replay (no graph) does not look.
"""
from __future__ import annotations

from typing import Callable

from std_msgs.msg import Bool, Float64
from std_srvs.srv import Trigger

from contact_estimation import manifest
from contact_estimation.core.chain.time_scaling import worth_publishing
from contact_estimation.ros.diagnostics import ERROR
from contact_estimation.ros.heartbeat import Heartbeat, outranking
from contact_estimation.ros.params import Parameter, ParameterTable
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.stop_process import StopProcess
from contact_estimation.ros.stop_topic import DISCOVERY_TIME, DuplicateWatch

STOP_PARAMETERS = ParameterTable(
    Parameter('heartbeat_rate', 'the stop and the speed scale are repeated this often, Hz (a '
              f'controller treats {Heartbeat.MISSED} missed beats as stop)', 20.0, (1.0, 1000.0),
              read_only=True),
    Parameter('discovery_time', "the stop stays raised until a look at the graph this long "
              "after the node's start finds no other publisher on the stop topic (another "
              "suite on it latches the stop: 'duplicate'); longer than DDS discovery takes on "
              'your network, s', DISCOVERY_TIME, (0.1, 60.0), read_only=True))


def heartbeat_steps(name: str) -> int:
    """How many SCHED_FIFO steps over the process of node `name` its stop process beats at:
    one over the suite's highest process (nodes.yaml `realtime`), so that no node's work can
    keep a stop's heartbeat from the CPU (ros/stop_process.py)."""
    top = min(p.realtime for p in manifest.composed() if p.realtime is not None)
    return (manifest.process_of(name).realtime or 0) - top + 1


def steps_below_stops(name: str) -> int:
    """How many SCHED_FIFO steps under the process of node `name` a helper process of its
    (the proximity monitor's cloud worker) runs, to be one step below every process that
    raises a stop: its heavy work never delays a stop."""
    lowest = max(p.realtime for p in manifest.stopping_processes())
    return lowest - (manifest.process_of(name).realtime or 0) + 1


class StopSignal:
    """The stop, speed scale and ~/reset of `node` (a SuiteNode whose table has
    STOP_PARAMETERS): topic `stop` and topic `scale_key` of its nodes.yaml entry.
    `reset()` returns (cleared, message)."""

    def __init__(self, node, scale_key: str, reset: Callable[[], tuple[bool, str]]):
        self._node, self._reset = node, reset
        rate = node.value('heartbeat_rate')
        self.stop: bool | None = None        # the node's decision (None before the first)
        self.scale: float | None = None      # the speed scale last published
        self.late = 0  # beats that said stop because the node's decision was too old
        node.problems.values['late_heartbeats'] = lambda: str(self.late)
        stop_topic = node.resolve_topic_name(node.spec.topic('stop'))
        scale_topic = node.resolve_topic_name(node.spec.topic(scale_key))
        self._watch: DuplicateWatch | None = None
        if node.runs_in_real_time:
            name = node.get_name()
            priority = outranking(heartbeat_steps(node.spec.name))
            self._out = StopProcess(name, node.get_namespace(), stop_topic, scale_topic, rate,
                                    node.simulated_time, priority, self._said_late,
                                    self._stop_process_died)
            self._watch = DuplicateWatch(node, stop_topic, self._publish,
                                         node.value('discovery_time'), self._out.node_name)
        else:
            self._out = ReplayedStop(node, stop_topic, scale_topic, rate)
        node.create_service(Trigger, '~/reset', self._on_reset)

    def decide(self, stop: bool, watching: bool = True) -> bool:
        """The node's stop now, published at once when it changed, which is returned;
        `watching`: the node vouches that it is watching now (a node deciding a batch of
        samples says so once, `watching()`, after the batch)."""
        if watching:
            self.watching()
        changed = stop != self.stop
        self.stop = stop
        if changed:
            self._publish()
        return changed

    @property
    def published(self) -> bool | None:
        """The stop on the topic: the node's, or True while the duplicate watch says stop."""
        if self.stop is None:
            return None
        return self.stop or (self._watch is not None and self._watch.stops)

    def watching(self) -> None:
        """The node has just decided: its heartbeat may vouch for its stop (ros/heartbeat.py)."""
        self._out.decision()

    def publish_scale(self, value: float) -> None:
        """The speed scale, published when worth it (and repeated at each beat)."""
        if worth_publishing(value, self.scale):
            self.scale = value
            self._out.publish_scale(value)

    def _publish(self) -> None:
        self._out.publish_stop(self.published)

    def _said_late(self, newly: bool, silence: float) -> None:
        """A beat said stop because the node's last decision was `silence` s old: counted,
        and, first in a stretch, logged (throttled) and shown at the head of the next
        /diagnostics status, so that this stop names its cause though it clears as soon as
        the node decides again."""
        self.late += 1
        if not newly:
            return
        text = (f'stop: no decision for {silence * 1e3:.0f} ms, more than '
                f'{Heartbeat.MISSED} heartbeats: this node fell behind (a loaded machine?); '
                'the stop follows its decisions again once it catches up')
        self._node.problems.report('late_heartbeat', text, ERROR)
        self._node.problems.passed_error(text)

    def _stop_process_died(self, text: str) -> None:
        self._node.problems.report('stop_process_died', text, ERROR)
        self._node.problems.passed_error(text)

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response):
        refusal = (self._watch and self._watch.refusal()
                   or (not self._out.ready and 'refused: the stop process is still starting'))
        if refusal:
            response.success, response.message = False, refusal
        else:
            response.success, response.message = self._reset()
            if response.success and self._watch is not None and self._watch.reset():
                self._publish()
        if response.success and self.published is not False:  # the contract, whatever the node
            response.success = False
            response.message = f'refused: the stop is still raised ({response.message})'
        if response.success:  # rclpy wants one severity per logging call site
            self._node.get_logger().info(f'~/reset: {response.message}')
        else:
            self._node.get_logger().warning(f'~/reset: {response.message}')
        return response

    @property
    def publisher_node(self) -> str | None:
        """The node that publishes the stop (its stop process's; None in a replay)."""
        return self._out.node_name

    def close(self) -> None:
        self._out.close()


class ReplayedStop:
    """A replay's stop and speed scale, published by the node itself: the stop on its changes
    (no wall time passes, so no beats), the scale also repeated by a timer on the replay's
    clock."""

    ready = True  # its publishers are the node's
    node_name = None

    def __init__(self, node, stop_topic: str, scale_topic: str, rate: float):
        self._stop = node.create_publisher(Bool, stop_topic, STOP_QOS)
        self._scale = node.create_publisher(Float64, scale_topic, PIPELINE_QOS)
        self._last_scale: float | None = None
        node.create_timer(1.0 / rate, self._repeat)

    def decision(self) -> None:
        """Nothing to vouch for: a replay's stop goes out on its changes only."""

    def publish_stop(self, stop: bool | None) -> None:
        if stop is not None:
            self._stop.publish(Bool(data=stop))

    def publish_scale(self, scale: float) -> None:
        self._last_scale = scale
        self._repeat()

    def _repeat(self) -> None:
        if self._last_scale is not None:
            self._scale.publish(Float64(data=self._last_scale))

    def close(self) -> None:
        """Nothing of its own to end: its publishers are the node's."""
