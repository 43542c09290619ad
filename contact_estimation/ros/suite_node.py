"""What every node of nodes.yaml (the node suite) shares at start-up, so that a node is its
topics and its translation only.

    class MyNode(SuiteNode):
        PARAMETERS = ROBOT + rows(CoreConfig) + ParameterTable(  # ros/params.py: a row
            Parameter('rate', 'what it does, unit', 50.0, (1.0, 100.0)))  # per setting(...)

        def __init__(self, **kwargs):
            super().__init__('my_node', **kwargs)      # parameters, robot, diagnostics
            with self.starting():                      # bad values → StartupError
                self.method = CoreMethod(self.PARAMETERS.build(CoreConfig, self.values()))
            self.publisher('estimate', PointStamped)
            self.subscribe('joint_state', JointState, self._on_joint_state)

    def main(args=None):
        return run(MyNode, args)   # ros/node_main.py: executor, signals, exit code

A node reads a topic of the chain with `receive` (a subscription, or in composed mode a
function call from the node in the same process that produces it: ros/handover.py) and
writes with `output`, whose `send` passes each sample on by function call in composed
mode and publishes it while anyone listens; both call the same "process one sample" method
of the node.

Watchdogs and schedules read `seconds()`: simulated time when the node runs with
use_sim_time (a simulator that falls behind slows the whole graph together), else the
node's steady clock, continuous when use_sim_time changes at run time
(core/chain/watchdog_clock.py); use_sim_time cannot be switched on while nobody publishes
/clock (ros/params.ParameterGuard). Whatever a node times on the wall (a hold, a log
throttle, what a computation cost) reads `steady()`: time.monotonic(), or the `steady_clock`
it was given. `contact-estimation replay` gives every node the stamp being replayed, so
that the nodes run in the recording's time; such a node starts no thread that beats on the
wall clock (`runs_in_real_time` is False: the stop's heartbeat, ros/stop_signal.py), and
`outputs` lists its topics, which the replay records whether anyone listens or not.

The node's `PARAMETERS` table (ros/params.py) is declared here, before anything else, and
its values checked against the robot model as every run-time set is (ParameterGuard); its
defaults come from core, and what config/<node>.yaml sets is at those defaults
(test/test_node_defaults.py checks every node against its table).

A parameter file (or override) that sets a parameter the node does not declare makes it
refuse to start: rclpy would keep the value without complaint and the node run without it,
while the user believes it is in force. A table's `renamed` (old name → new name) makes the
refusal name the new one, at start and at run time (`set_parameters_atomically`).
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from rcl_interfaces.msg import SetParametersResult
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.parameter import Parameter as RclpyParameter
from rclpy.qos import QoSProfile

from contact_estimation import manifest
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.stamps import stamp_problem
from contact_estimation.core.input_rejected import InputRejected
from contact_estimation.core.chain.watchdog_clock import WatchdogClock
from contact_estimation.ros import params
from contact_estimation.ros.params import ROBOT, ParameterTable
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.diagnostics import ProblemCounter
from contact_estimation.ros.guard import CallbackGuard
from contact_estimation.ros.handover import Handover, Output
from contact_estimation.ros.joint_states import JointStateReader
from contact_estimation.ros.node_main import StartupError
from contact_estimation.ros.qos import PIPELINE_QOS, SENSOR_QOS, SERVICE_QOS

POLL_PERIOD = 0.005  # s between takes of a polled subscription: its messages wait this long


def waiting_messages(subscription, limit: int) -> list:
    """The messages (bytes, for a raw subscription) `subscription` has received and no
    callback has taken yet, at most `limit`, in arrival order: an executor that wakes for
    them later finds them taken."""
    taken = []
    with subscription.handle:
        while len(taken) < limit:
            message = subscription.handle.take_message(subscription.msg_type,
                                                       subscription.raw)
            if message is None:
                break
            taken.append(message[0])
    return taken


def _nothing_taken() -> None:
    """`catch_up` of a node whose messages its executor delivers (separate mode)."""


class SuiteNode(Node):
    """A node named in nodes.yaml: `spec` (its topics), `robot` (the shared robot parameters,
    loaded), `problems` (counts and status on its diagnostics topic). `handover` is given in
    composed mode: the samples its in-process peers pass it by function call."""

    PARAMETERS: ParameterTable = ROBOT  # every parameter of the node (ros/params.py)

    def __init__(self, name: str, handover: Handover | None = None,
                 steady_clock: Callable[[], float] | None = None, **kwargs):
        self.steady: Callable[[], float] = steady_clock or time.monotonic
        self.runs_in_real_time = steady_clock is None
        self.created = self.steady()  # before its DDS participant can be (ros/stop_topic.py)
        self.guard = CallbackGuard(self)  # before Node.__init__: it creates services
        super().__init__(name, **kwargs)
        self._watchdog_clock = WatchdogClock()
        self.spec = manifest.node(name)
        self._handover = handover
        try:
            self.PARAMETERS.declare(self)
        except ParameterException as err:
            raise StartupError(f'{name}: {err}') from err
        self.robot = params.load_robot(self)  # StartupError when it cannot be loaded
        self.PARAMETERS.check(self, self.robot)  # as every run-time set: sized for this arm
        self._parameter_guard = params.ParameterGuard(self, self.PARAMETERS, self.robot)
        self.problems = ProblemCounter(self, topic=self.spec.topic('diagnostics'),
                                       hardware_id=self.robot.name, steady=self.steady)
        self._closers: list[Callable[[], None]] = []
        self.raw_topics: set[str] = set()  # subscribed with raw=True: callbacks take bytes
        self.polled_subscriptions: list = []  # made by `subscribe(..., polled=True)`
        self._poller: Node | None = None
        self._poll_timer = None  # takes the polled subscriptions, until `poll_elsewhere`
        # A contact lasts, as this node knows it (the localizer's gate, the F/T estimator's
        # estimate): the shared-memory feed of its process then wakes at once (sample_feed.py).
        self.contact_lasts = False
        self.outputs: list[Output] = []    # made by `output`
        # Takes the samples waiting for this node now (composed mode: the listener's or the
        # shared-memory feed's take, ros/sample_feed.py), e.g. before a check decides on the
        # newest; `catches_up` says whether it does (else the executor delivers them).
        self.catch_up: Callable[[], None] = _nothing_taken

    # Decides on its own timer and calls `catch_up` first (the proximity monitor's check):
    # a process of such nodes alone needs no wake of its feed's own (ros/sample_feed.py).
    PACES_ITSELF = False

    def rest_after_wake(self) -> float:
        """How long (s) this node asks its process to sleep after a wake of the executor
        (ros/node_main.py): none, but for the chain's listener (`wake_period`)."""
        return 0.0

    @property
    def catches_up(self) -> bool:
        """`catch_up` takes what waits for this node: when it hands over nothing, nothing
        was waiting."""
        return self.catch_up is not _nothing_taken

    def closing(self, close: Callable[[], None]) -> None:
        """Call `close` when this node is destroyed (threads, shared memory), the last
        registered first."""
        self._closers.append(close)

    def destroy_node(self):
        while getattr(self, '_closers', None):
            self._closers.pop()()
        return super().destroy_node()

    @contextmanager
    def starting(self) -> Iterator[None]:
        """Turn a bad parameter or model file met while starting into StartupError (the
        process then exits 1 with the message, as `ros2 launch` reports); once the block has
        declared the parameters, refuse those set but never declared (`unknown_parameters`)."""
        try:
            yield
        except (ValueError, OSError, ParameterException) as err:
            raise StartupError(f'{self.get_name()}: {err}') from err
        unknown = self.unknown_parameters()
        if unknown:
            raise StartupError(
                f'{self.get_name()}: the parameter file sets parameters this node does not '
                f'have, so they would do nothing: {"; ".join(unknown)} (`ros2 param list` '
                'and config/ show the parameters)')

    def unknown_parameters(self) -> list[str]:
        """Each parameter given to this node (parameter file, override) that it did not
        declare, with its new name where it was renamed."""
        # rclpy has no public accessor for the overrides it holds for undeclared names.
        return self.PARAMETERS.unknown(sorted(set(self._parameter_overrides)
                                              - set(self._parameters)))

    def set_parameters_atomically(self, parameter_list) -> SetParametersResult:
        """rclpy's (every remote set comes here), but a parameter this node does not have is
        refused by name, with its new name where it was renamed (rclpy raises 'undeclared
        parameter(s): []', naming none), and so is a value of the wrong type (rclpy: 'Wrong
        parameter type, expected 1 got 4') or none (which would delete the parameter)."""
        unknown = self.PARAMETERS.unknown(sorted({p.name for p in parameter_list}
                                                 - set(self._parameters)))
        if unknown:
            return SetParametersResult(successful=False, reason=(
                f'{self.get_name()} has no parameter {", ".join(unknown)}: nothing set '
                '(`ros2 param list` shows its parameters)'))
        wrong = [f'{p.name} = {p.value!r} refused: a {p.type_.name.lower()}, not the '
                 f'{RclpyParameter.Type(self.describe_parameter(p.name).type).name.lower()} '
                 'it takes (nor can it be deleted)' for p in parameter_list
                 if p.type_.value != self.describe_parameter(p.name).type]
        if wrong:
            return SetParametersResult(successful=False, reason='; '.join(wrong))
        return super().set_parameters_atomically(parameter_list)

    def value(self, name: str) -> Any:
        return self.get_parameter(name).value

    def values(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every parameter of the table by name, with run-time `changes` applied."""
        return self.PARAMETERS.values(self, changes)

    def seconds(self) -> float:
        """Now, s, on the clock of this node's watchdogs and schedules: simulated time under
        use_sim_time, else the steady clock (a step of the wall clock can neither fake nor
        hide a timeout)."""
        if self.simulated_time:  # a plain attribute; the clock's is a call
            ns = self.get_clock().now().nanoseconds  # 0: no /clock received yet
            return self._watchdog_clock.read('ros', ns * 1e-9 if ns else None)
        return self._watchdog_clock.read('monotonic', self.steady())

    @property
    def simulated_time(self) -> bool:
        """The node runs on simulated time (use_sim_time): ROS time is the /clock's."""
        return self._time_source.ros_time_is_active

    def stamp_clock(self) -> float:
        """Now, s, on the clock that stamps are judged on: ROS time (simulated time under
        use_sim_time, else the system clock, read without rclpy's Time object)."""
        if self.simulated_time:
            return self.get_clock().now().nanoseconds * 1e-9
        return time.time()

    def on_parameter_change(self, apply: Callable[[dict[str, Any]], str | None]) -> None:
        """`apply({name: value})` on every run-time set that passes the table's checks
        (ros/params.ParameterGuard): None to accept, or why not."""
        self._parameter_guard.apply = apply

    def publisher(self, key: str, msg_type, qos: QoSProfile = PIPELINE_QOS):
        """A publisher on the topic nodes.yaml gives this node under `key`."""
        return self.create_publisher(msg_type, self.spec.topic(key), qos)

    def subscribe(self, key: str, msg_type, callback, qos: QoSProfile = SENSOR_QOS,
                  raw: bool = False, polled: bool = False):
        """A subscription to the topic nodes.yaml gives this node under `key` (best effort
        by default: it hears best-effort and reliable publishers alike); `raw`: the callback
        gets the serialised bytes (ros/cdr.py decodes the 1 kHz ones cheaper than rclpy).

        `polled`, for a fast stream that no stop waits on (an F/T sensor at 1 kHz): the node
        is not woken for each message; every POLL_PERIOD s it takes those received, in
        order, each to `callback` (issue 35: at 1 kHz the wakes cost more than the work).
        Such a subscription belongs to a node of its own that no executor spins,
        `<name>_polled` in the graph, and is listed in `polled_subscriptions`; in composed
        mode the shared-memory feed takes them on its wake instead (`poll_elsewhere`)."""
        if polled:
            return self._polled(key, msg_type, callback, qos, raw)
        subscription = self.create_subscription(msg_type, self.spec.topic(key), callback, qos,
                                                raw=raw)
        if raw:
            self.raw_topics.add(subscription.topic_name)
        return subscription

    def _polled(self, key: str, msg_type, callback, qos: QoSProfile, raw: bool):
        if self._poller is None:
            self._poller = Node(f'{self.get_name()}_polled', context=self.context,
                                namespace=self.get_namespace(),
                                start_parameter_services=False, enable_rosout=False)
            self.closing(self._poller.destroy_node)
            self._poll_timer = self.create_timer(POLL_PERIOD, self.take_polled)
        topic = self.spec.topic(key)
        subscription = self._poller.create_subscription(
            msg_type, topic, self.guard.wrap(callback, topic), qos, raw=raw)
        if raw:
            self.raw_topics.add(subscription.topic_name)
        self.polled_subscriptions.append(subscription)
        return subscription

    def take_polled(self) -> None:
        """Every message the polled subscriptions received since the last take, in order
        (at most one queue's depth each)."""
        for subscription in self.polled_subscriptions:
            for message in waiting_messages(subscription, subscription.qos_profile.depth):
                subscription.callback(message)

    def poll_elsewhere(self) -> None:
        """Stop this node's own POLL_PERIOD timer: a caller that wakes anyway calls
        `take_polled` (composed mode: the shared-memory feed's take, so that a reading and
        the joint sample of its stamp meet in one wake, and the process wakes once)."""
        if self._poll_timer is not None:
            self.destroy_timer(self._poll_timer)
            self._poll_timer = None

    def receive(self, key: str, msg_type, on_message: Callable, on_sample: Callable,
                qos: QoSProfile = SENSOR_QOS,
                on_batch: Callable[[Sequence], None] | None = None) -> None:
        """Read topic `key`: what a node of the same process hands over (composed mode: on
        the producer's thread, or the shared-memory feed's: ros/sample_feed.py) goes to
        `on_batch(samples)`, or sample by sample to `on_sample(sample)`; or else each
        message to `on_message(msg)` by a subscription."""
        receivers = self._handover and self._handover.receivers(self.spec.topic(key))
        if receivers is None:
            self.subscribe(key, msg_type, on_message, qos)
            return
        if on_batch is None:
            def on_batch(samples: Sequence) -> None:
                for sample in samples:
                    on_sample(sample)
        receivers.append(self.guard.wrap(on_batch, f'{key} (handed over)'))

    def create_subscription(self, msg_type, topic, callback, *args, **kwargs):
        """Every callback runs guarded (ros/guard.py): subscriptions, timers, services."""
        return super().create_subscription(msg_type, topic, self.guard.wrap(callback, topic),
                                           *args, **kwargs)

    def create_timer(self, period, callback, *args, **kwargs):
        guarded = callback and self.guard.wrap(callback, getattr(callback, '__name__', 'timer'))
        return super().create_timer(period, guarded, *args, **kwargs)

    def create_service(self, srv_type, name, callback, *args, **kwargs):
        """Guarded, and with a request queue that holds a flood (ros/qos.SERVICE_QOS)."""
        kwargs.setdefault('qos_profile', SERVICE_QOS)
        return super().create_service(srv_type, name,
                                      self.guard.wrap(callback, name, service=True),
                                      *args, **kwargs)

    def believed(self, stamp, source: str, max_past: float = math.inf) -> float | None:
        """The stamp (s) of a message from `source` when it is believable on this node's
        clock (core/chain/stamps.py), else None: the message is to be dropped, and it is counted
        and logged here. An input that feeds a watchdog (joint states, residuals) gives a
        `max_past` too: a stamp that far behind the clock was sent long ago."""
        return self.believable(stamp_to_seconds(stamp), source, max_past)

    def joint_sample(self, msg, reader: JointStateReader, source: str, residual: bool = False,
                     max_past: float = math.inf, **read) -> JointSample | None:
        """The JointSample of a JointState `msg` (a residual's, with `residual`: its effort is
        τ_ext), or None when its stamp is not believed (`believed`) or `reader` cannot use it
        (`read`: JointStateReader.read's required/optional/finite): counted and logged under
        its kind, and dropped."""
        t = self.believed(msg.header.stamp, source, max_past)
        if t is None:
            return None
        try:
            q, v, effort = reader.read(msg, **read)
        except InputRejected as err:
            self.problems.report(err.kind, f'{source}: {err}')
            return None
        return JointSample(t, q, v, None if residual else effort, effort if residual else None,
                           msg.header.stamp, msg.header.frame_id)

    def believable(self, t: float, source: str, max_past: float = math.inf) -> float | None:
        """`believed` for a stamp already in seconds."""
        problem = stamp_problem(t, self.stamp_clock(), max_past=max_past)
        if problem is None:
            return t
        kind, why = problem
        self.problems.report(kind, f'{source}: {why}: dropped')
        return None

    def fail_safe(self, reason: str) -> None:
        """Called after an unexpected exception in a callback (ros/guard.py): a node with a
        stop raises it here; the others have nothing to stop (it is counted and logged)."""

    def output(self, key: str, msg_type, qos: QoSProfile = PIPELINE_QOS,
               only_when_listened: bool = False) -> Output:
        """Topic `key` as an Output: published, and handed to in-process readers (composed
        mode). `only_when_listened` for 1 kHz streams: see ros/handover.Output."""
        topic = self.spec.topic(key)
        receivers = self._handover and self._handover.receivers(topic)
        elsewhere = bool(self._handover) and topic in self._handover.published_elsewhere
        output = Output(self, topic, msg_type, qos, [] if receivers is None else receivers,
                        only_when_listened, elsewhere)
        self.outputs.append(output)
        return output
