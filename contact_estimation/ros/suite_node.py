"""What every node of nodes.yaml (the node suite) shares at start-up, so that a node is its
topics and its translation only.

    class MyNode(SuiteNode):
        PARAMETERS = ROBOT + ParameterTable(          # ros/params.py: one row each
            Parameter('gain', 'what it does, unit', range=(0.0, 10.0),
                      field=(CoreConfig, 'gain')))   # default: CoreConfig's

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
writes with `output`, whose `hand_over` passes each sample on by function call in composed
mode; both call the same "process one sample" method of the node.

Watchdogs and schedules read `seconds()`: simulated time when the node runs with
use_sim_time (a simulator that falls behind slows the whole graph together), else the
monotonic clock.

The node's `PARAMETERS` table (ros/params.py) is declared here, before anything else; its
defaults come from core, and what config/<node>.yaml sets is at those defaults
(test/test_node_defaults.py checks every node against its table).

A parameter file (or override) that sets a parameter the node does not declare makes it
refuse to start: rclpy would keep the value without complaint and the node run without it,
while the user believes it is in force. A table's `renamed` (old name → new name) makes the
refusal name the new one.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.qos import QoSProfile

from contact_estimation import manifest
from contact_estimation.core.chain.stamps import stamp_problem
from contact_estimation.ros import params
from contact_estimation.ros.params import ROBOT, ParameterTable
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.diagnostics import ProblemCounter
from contact_estimation.ros.guard import CallbackGuard
from contact_estimation.ros.handover import Handover, Mailbox, Output
from contact_estimation.ros.node_main import StartupError
from contact_estimation.ros.qos import PIPELINE_QOS, SENSOR_QOS


class SuiteNode(Node):
    """A node named in nodes.yaml: `spec` (its topics), `robot` (the shared robot parameters,
    loaded), `problems` (counts and status on its diagnostics topic). `handover` is given in
    composed mode: the samples its in-process peers pass it by function call."""

    PARAMETERS: ParameterTable = ROBOT  # every parameter of the node (ros/params.py)

    def __init__(self, name: str, handover: Handover | None = None, **kwargs):
        self.guard = CallbackGuard(self)  # before Node.__init__: it creates services
        super().__init__(name, **kwargs)
        self.spec = manifest.node(name)
        self._handover = handover
        try:
            self.PARAMETERS.declare(self)
        except ParameterException as err:
            raise StartupError(f'{name}: {err}') from err
        self.robot = params.load_robot(self)  # StartupError when it cannot be loaded
        params.check_joint_counts(self, self.PARAMETERS, self.robot)  # sized for this arm
        self.problems = ProblemCounter(self, topic=self.spec.topic('diagnostics'),
                                       hardware_id=self.robot.name)

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
        given = sorted(set(self._parameter_overrides) - set(self._parameters))
        renamed = self.PARAMETERS.renamed
        return [f'{name} (renamed: now {renamed[name]})' if name in renamed else name
                for name in given]

    def value(self, name: str) -> Any:
        return self.get_parameter(name).value

    def values(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every parameter of the table by name, with run-time `changes` applied."""
        return self.PARAMETERS.values(self, changes)

    def seconds(self) -> float:
        """Now, s, on the clock of this node's watchdogs and schedules: simulated time under
        use_sim_time, else time.monotonic() (a step of the wall clock can neither fake nor
        hide a timeout)."""
        clock = self.get_clock()
        if clock.ros_time_is_active:
            return clock.now().nanoseconds * 1e-9
        return time.monotonic()

    def on_parameter_change(self, apply: Callable[[dict[str, Any]], str | None]) -> None:
        """params.on_change on this node: `apply` returns None to accept, or why not."""
        params.on_change(self, apply)

    def publisher(self, key: str, msg_type, qos: QoSProfile = PIPELINE_QOS):
        """A publisher on the topic nodes.yaml gives this node under `key`."""
        return self.create_publisher(msg_type, self.spec.topic(key), qos)

    def subscribe(self, key: str, msg_type, callback, qos: QoSProfile = SENSOR_QOS):
        """A subscription to the topic nodes.yaml gives this node under `key` (best effort
        by default: it hears best-effort and reliable publishers alike)."""
        return self.create_subscription(msg_type, self.spec.topic(key), callback, qos)

    def receive(self, key: str, msg_type, on_message: Callable, on_sample: Callable,
                qos: QoSProfile = SENSOR_QOS, period: float | None = None,
                capacity: int = 1) -> None:
        """Read topic `key`: `on_sample(sample)` is called for what the node that produces it
        in the same process hands over (composed mode), or else `on_message(msg)` by a
        subscription.

        With `period` None (the 1 kHz chain) the producer calls `on_sample` itself, on its
        thread. With a `period` (s), for a node that works at its own rate on its own thread,
        the producer only drops each sample in a Mailbox of `capacity` places (1: the newest
        only), and this node's timer gives `on_sample` what is waiting every `period`.
        """
        receivers = self._handover and self._handover.receivers(self.spec.topic(key))
        if receivers is None:
            self.subscribe(key, msg_type, on_message, qos)
        elif period is None:
            receivers.append(self.guard.wrap(on_sample, f'{key} (handed over)'))
        else:
            mailbox = Mailbox(capacity)
            receivers.append(mailbox.put)
            guarded = self.guard.wrap(on_sample, f'{key} (handed over)')
            self.create_timer(period, lambda: self._empty(mailbox, key, guarded))

    def _empty(self, mailbox: Mailbox, key: str, on_sample: Callable) -> None:
        for sample in mailbox.take():
            on_sample(sample)
        if mailbox.overflowed and mailbox.capacity > 1:
            self.problems.values[f'{key}_samples_overflowed'] = str(mailbox.overflowed)

    def create_subscription(self, msg_type, topic, callback, *args, **kwargs):
        """Every callback runs guarded (ros/guard.py): subscriptions, timers, services."""
        return super().create_subscription(msg_type, topic, self.guard.wrap(callback, topic),
                                           *args, **kwargs)

    def create_timer(self, period, callback, *args, **kwargs):
        guarded = callback and self.guard.wrap(callback, getattr(callback, '__name__', 'timer'))
        return super().create_timer(period, guarded, *args, **kwargs)

    def create_service(self, srv_type, name, callback, *args, **kwargs):
        return super().create_service(srv_type, name,
                                      self.guard.wrap(callback, name, service=True),
                                      *args, **kwargs)

    def believed(self, stamp, source: str) -> float | None:
        """The stamp (s) of a message from `source` when it is believable on this node's
        clock (core/chain/stamps.py), else None: the message is to be dropped, and it is counted
        and logged here."""
        t = stamp_to_seconds(stamp)
        problem = stamp_problem(t, self.get_clock().now().nanoseconds * 1e-9)
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
        return Output(self, topic, msg_type, qos, [] if receivers is None else receivers,
                      only_when_listened)
