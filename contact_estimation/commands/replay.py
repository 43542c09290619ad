"""`contact-estimation replay BAG`: what the node suite detects and estimates on a recording,
computed as fast as the CPU allows, not in real time.

    contact-estimation replay out/demo/recording [--config FILE]... [--out DIR]

BAG is a rosbag2 (MCAP or sqlite3) with /joint_states and optionally /ft_sensor/wrench,
/lidar/points, /wrist_ft_sensor/wrench and /human/skeleton (the inputs nodes.yaml names): a
recording of a real arm, or the demo's. A recording of a suite in a namespace
(/left/joint_states ...) is replayed from that namespace's topics (`--namespace`, by default
the one its joint states are in); the suite and the output bag are in the root namespace.
The core nodes of nodes.yaml are built in this process, composed as `contact-estimation up`
builds them (samples handed from node to node by function call: composed.py), with their
shipped parameter files and the `--config` files a user gives `up`, and `use_sim_time`. The
bag's input messages are handed to the nodes' subscription callbacks
in header-stamp order; before each, the nodes' ROS time is set to its stamp and the timers due
by then fire, as an executor would fire them. What a node publishes goes, by
function call, to the nodes that read it, and into the output bag; nothing goes over DDS
(discovery is off).

Every node is given the replay's clock as its steady clock (ros/suite_node.SuiteNode
`steady_clock`: the stamp being replayed), so that what it times on the wall (a hold, what a
computation cost) runs in the recording's time, and no heartbeat thread beats on the wall
clock, which a replay does not have; every `output` of a node is recorded, listened or not.

Writes DIR/replay (an MCAP bag: the inputs, /tf, /robot_description, every suite output, and
the recording's ground truth /sim/contact/* when it has one), DIR/replay.png (external joint
torque, stop and time scaling against time) and DIR/contact_<k>.png, and prints the stops
with their times and causes, the estimates and the sensors each estimator used.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from contact_estimation import manifest
from contact_estimation.core.chain.stamps import nanoseconds

OUTPUT_BAG = 'replay'
# The suite runs in the root namespace here; a recording's namespace is taken off its topics.
# What a recording brings beside the suite's inputs: the simulator's truth, by its keys in
# nodes.yaml (they give the topics and the message types alike).
TRUTH_KEYS = ('true_contact_point', 'true_contact_wrench', 'true_contact_torque')
TRUTH_TOPICS = tuple(manifest.topic('sim_cobot', key) for key in TRUTH_KEYS)
JOINT_STATES = manifest.topic('joint_state_listener', 'joint_states')
LIDAR_POINTS = manifest.topic('contact_localizer', 'lidar_points')
FT_WRENCH = manifest.topic('ft_contact_estimator', 'ft_wrench')
STOP = manifest.topic('collision_detector', 'stop')
PROXIMITY_STOP = manifest.topic('proximity_monitor', 'stop')
TIME_SCALING = manifest.topic('collision_detector', 'time_scaling')
EVENTS = manifest.topic('collision_detector', 'events')
RESIDUAL = manifest.topic('residual_node', 'residual')


def input_topics() -> dict[str, str]:
    """Topics the core nodes read and none of them publishes, with their types."""
    core = manifest.selected(with_sim=False)
    published = {spec.resolved_topic(key) for spec in core for key in spec.publishes}
    return {spec.resolved_topic(key): spec.message_type(key) for spec in core
            for key in spec.subscribes if spec.resolved_topic(key) not in published}


class ReplayClock:
    """The nodes' steady clock in a replay (SuiteNode `steady_clock`): the stamp being
    replayed, s."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Replay:
    """The core nodes in this process, driven by `step`; what they publish is recorded."""

    nodes: list
    clock: ReplayClock
    on_publish: object  # (topic, message type name, msg) → None
    subscribers: dict[str, list] = field(default_factory=dict)
    timers: list = field(default_factory=list)

    def step(self, stamp_ns: int, topic: str | None = None, msg=None,
             raw: bytes | None = None) -> None:
        """Set every node's ROS time to `stamp_ns`, fire the timers due, then deliver `msg`
        (on `topic`; `raw`, its bytes) to the callbacks of the nodes that read it."""
        from rclpy.time import Time
        self.clock.now = stamp_ns * 1e-9
        for node in self.nodes:
            node.get_clock().set_ros_time_override(Time(nanoseconds=stamp_ns))
        self._fire_due_timers()
        if topic is not None:
            self.deliver(topic, msg, raw)

    def _fire_due_timers(self) -> None:
        """Call every timer due at the nodes' ROS time, the most overdue first, as an executor
        would (one call for the periods a time jump skipped), without building a wait set,
        which costs more than most callbacks."""
        while True:
            due = [t for t in self.timers if not t.is_canceled() and t.is_ready()]
            if not due:
                return
            timer = min(due, key=lambda t: t.time_until_next_call())
            with timer.handle:
                timer.handle.call_timer_with_info()  # the next call: a period later
            timer.callback()

    def deliver(self, topic: str, msg, raw: bytes | None = None) -> None:
        """`msg` to the callbacks reading `topic`; its bytes (`raw`, or serialised here) to
        those that read it raw (ros/cdr.py)."""
        from rclpy.serialization import serialize_message
        for callback, reads_raw in self.subscribers.get(topic, []):
            if reads_raw and raw is None:
                raw = serialize_message(msg)
            callback(raw if reads_raw else msg)

    def close(self) -> None:
        for node in reversed(self.nodes):
            node.destroy_node()


def build(context, parameter_files: list[str], on_publish) -> Replay:
    """The core nodes of nodes.yaml on `context` (composed, as `up` runs them),
    with use_sim_time, their shipped parameter files then `parameter_files`; every publisher
    replaced by delivery to the nodes that read the topic and `on_publish`."""
    from rclpy.parameter import Parameter

    from contact_estimation import composed

    clock = ReplayClock()
    core = manifest.selected(with_sim=False)
    files = ([spec.parameters_path() for spec in core] + [manifest.robot_parameters_path()]
             + list(parameter_files))
    manifest.suite_robot(files, tuple(spec.name for spec in core))  # one robot, or why not
    kwargs = {'context': context,
              'cli_args': ['--ros-args', *[a for f in files for a in ('--params-file', f)]],
              'parameter_overrides': [Parameter('use_sim_time', Parameter.Type.BOOL, True)],
              'steady_clock': clock}
    together = manifest.composed_nodes()
    nodes = composed.build(**kwargs)
    try:
        for spec in core:
            if spec.name not in together:
                nodes.append(composed.node_class(spec.name)(**kwargs))
    except BaseException:
        for node in nodes:
            node.destroy_node()
        raise
    replay = Replay(nodes, clock, on_publish)
    for node in nodes:
        replay.timers += node.timers
        for subscription in (*node.subscriptions, *node.polled_subscriptions):
            replay.subscribers.setdefault(subscription.topic_name, []).append(
                (subscription.callback, subscription.topic_name in node.raw_topics))
        for publisher in node.publishers:
            publisher.publish = _forwarder(replay, publisher)
        for output in node.outputs:  # the 1 kHz streams go out only while listened to
            output.listened = True
    return replay


def _forwarder(replay: Replay, publisher):
    topic = publisher.topic_name
    type_name = _type_name(publisher.msg_type)

    def publish(msg) -> None:
        replay.on_publish(topic, type_name, msg)
        replay.deliver(topic, msg)
    return publish


def _type_name(msg_class) -> str:
    package = msg_class.__module__.split('.')[0]
    return f'{package}/msg/{msg_class.__name__}'


class _Sink:
    """Where the nodes' publications go: into the outcome, and serialised into the output bag
    (held until it is open: the nodes publish while they start)."""

    def __init__(self, outcome: 'Outcome', recorded: set[str], now_ns: int):
        self.outcome, self.recorded, self.now_ns = outcome, recorded, now_ns
        self._bag = None
        self._pending: list[tuple] = []

    def __call__(self, topic: str, type_name: str, msg) -> None:
        from rclpy.serialization import serialize_message
        self.outcome.record(topic, self.now_ns * 1e-9, msg)
        if topic in self.recorded:
            entry = (topic, type_name, self.now_ns, serialize_message(msg))
            if self._bag is None:
                self._pending.append(entry)
            else:
                self._bag.write(*entry)

    def open(self, bag) -> None:
        self._bag = bag
        for entry in self._pending:
            bag.write(*entry)
        self._pending.clear()


# ------------------------------------------------------------------------------ report
@dataclass
class Outcome:
    """What the replay saw, for the summary and the plot (times: s since the first input)."""

    start: float = 0.0
    end: float = 0.0
    inputs: dict[str, int] = field(default_factory=dict)
    residual: list = field(default_factory=list)      # (t, τ_ext)
    truth_torque: list = field(default_factory=list)  # (t, τ_ext)
    stop: list = field(default_factory=list)          # (t, bool) on change
    proximity_stop: list = field(default_factory=list)
    time_scaling: list = field(default_factory=list)  # (t, f_S)
    events: list = field(default_factory=list)        # (t, message)

    def record(self, topic: str, t: float, msg) -> None:
        t -= self.start
        self.end = max(self.end, t)
        if topic == RESIDUAL:
            self.residual.append((t, np.array(msg.effort)))
        elif topic == TRUTH_TOPICS[2]:
            self.truth_torque.append((t, np.array(msg.effort)))
        elif topic in (STOP, PROXIMITY_STOP):
            series = self.stop if topic == STOP else self.proximity_stop
            if not series or series[-1][1] != msg.data:
                series.append((t, bool(msg.data)))
        elif topic == TIME_SCALING:
            self.time_scaling.append((t, msg.data))
        elif topic == EVENTS:
            header = msg.header.stamp
            stamp = nanoseconds(header.sec, header.nanosec) * 1e-9 - self.start
            self.events.extend((stamp, status.message) for status in msg.status)


def _summary(outcome: Outcome, found) -> str:
    """Inputs, stops and their causes, and each estimator's estimates (against the truth
    when `found`, the output bag's BagContacts, has it) with the sensors it used."""
    from contact_estimation.core.contact.contact import contact_error
    lines = ['Inputs replayed: ' + ', '.join(f'{t} {n}' for t, n in outcome.inputs.items())]
    lines.append('\nStops (s since the first input; cause):')
    for t, message in outcome.events:
        lines.append(f'    {t:8.3f} s  {message}')
    if not outcome.events:
        lines.append('    no collision detector event')
    for name, series in (('stop', outcome.stop), ('proximity stop', outcome.proximity_stop)):
        changes = ', '.join(f'{"raised" if v else "cleared"} at {t:.3f} s' for t, v in series)
        lines.append(f'    {name}: {changes or "never published"}')
    held = [t for t, v in outcome.time_scaling if v <= 0.0]
    lines.append(f'    time scaling f_S = 0 from {held[0]:.3f} s' if held
                 else '    time scaling: never 0 (no hold)')
    truth = found.contacts['truth']
    lines.append('\nEstimates (sensors used):')
    uses = {'localizer': ('contact_localizer', 'joint torques (residual)'
                          + (f' and {outcome.inputs[LIDAR_POINTS]} lidar clouds'
                             if outcome.inputs.get(LIDAR_POINTS) else ', no lidar cloud')),
            'F/T': ('ft_contact_estimator', 'the base F/T sensor '
                    + (f'({outcome.inputs[FT_WRENCH]} wrenches)'
                       if outcome.inputs.get(FT_WRENCH) else '(none in the bag)')
                    + ' and the joint states')}
    for label, (node, sensors) in uses.items():
        estimates = found.contacts[label]
        line = f'    {label} ({node}, from {sensors}): {len(estimates)} estimates'
        matched = [contact_error(e, truth[s]) for s, e in estimates.items() if s in truth]
        if matched:
            right = [e for e in matched if e.right_link]
            line += f'; link right in {len(right)} of {len(matched)} with a true contact'
            if right:
                line += (f', point error median {np.median([e.point for e in right]) * 1e3:.1f}'
                         f' mm, force error median '
                         f'{np.median([e.force for e in right]) * 100:.1f} %')
        links = sorted({e.link for e in estimates.values()})
        lines.append(line + (f'; links {", ".join(links)}' if links else ''))
    if not truth:
        lines.append('    (no ground truth /sim/contact/* in the recording: no errors)')
    return '\n'.join(lines)


def _plot(outcome: Outcome, found, path: str) -> None:
    """Against time since the first input (stamps): the external joint torque (estimated
    solid, true dashed; collision events red), the contact force magnitude of the truth and
    of each estimator, and the stop signals and f_S."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(3, 1, figsize=(11, 9), sharex=True,
                             gridspec_kw={'height_ratios': [3, 2, 1]})
    torque, force, signals = axes
    colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
    for series, style in ((outcome.residual, '-'), (outcome.truth_torque, '--')):
        if series:
            t, values = zip(*series)
            for j, column in enumerate(np.array(values).T):
                torque.plot(t, column, style, color=colors[j % len(colors)], lw=0.9,
                            label=f'τ_ext,{j + 1}' if style == '-' else None)
    for t, _ in outcome.events:
        torque.axvline(t, color='red', lw=0.8, alpha=0.6)
    for label, contacts in found.contacts.items():
        stamps = sorted(contacts)
        if stamps:
            force.plot(np.array(stamps) - outcome.start,
                       [np.linalg.norm(contacts[s].force) for s in stamps], '.', ms=3,
                       label=label)
    for label, series in (('stop', outcome.stop), ('proximity stop', outcome.proximity_stop),
                          ('time scaling f_S', outcome.time_scaling)):
        if series:  # changes only: held to the last input
            t, values = zip(*series, (outcome.end, series[-1][1]))
            signals.step(t, np.asarray(values, dtype=float), where='post', label=label)
    for ax, ylabel in zip(axes, ('external joint torque (N·m)', 'contact force |F| (N)',
                                 'stop (1), f_S')):
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(ncol=4, fontsize=7, loc='upper left')
    torque.set_title('replay: estimated (solid) and true (dashed) τ_ext, collision events (red)')
    signals.set_xlabel('time since the first input (s, header stamps)')
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------ main
def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='contact-estimation replay', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('bag', help='rosbag2 directory (or its .mcap / .db3 file)')
    parser.add_argument('--config', '--params-file', action='append', default=[],
                        metavar='FILE', help='parameter file (node_name: ros__parameters: '
                        'form) over the defaults, as given to `up`; may be given several times')
    parser.add_argument('--out', default='out/replay', help='folder for the bag and pictures')
    parser.add_argument('--namespace', metavar='NS',
                        help='the namespace of the suite the recording holds (default: the '
                             'one its joint states are in); the output bag is in the root')
    args = parser.parse_args(argv)
    if not os.path.exists(args.bag):
        parser.error(f'{args.bag}: no such bag')
    for path in args.config:
        if not os.path.isfile(path):
            parser.error(f'--config {path}: no such file')
    # Nothing of the replay may reach a live graph, nor a live graph the replay.
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'OFF'
    import rclpy
    from rclpy.context import Context
    from rclpy.serialization import deserialize_message

    from contact_estimation import contact_pictures
    from contact_estimation.ros.bag_recorder import MARKER_ARRAY, TruthMarkers, message_class
    from contact_estimation.suite_bag import (SuiteBag, messages_by_stamp, recorded_namespace,
                                              remove_earlier_bag, suite_topics)

    simulator = manifest.node('sim_cobot')
    types = {**input_topics(), **{topic: simulator.message_type(key)
                                  for topic, key in zip(TRUTH_TOPICS, TRUTH_KEYS, strict=True)}}
    try:
        namespace = (args.namespace if args.namespace is not None
                     else recorded_namespace(args.bag)).strip('/')
        prefix = f'/{namespace}' if namespace else ''
        entries, skipped = messages_by_stamp(
            args.bag, {prefix + topic: name for topic, name in types.items()})
    except Exception as err:  # noqa: BLE001 - rosbags' errors are varied; the user gets why
        print(f'replay: cannot read {args.bag}: {type(err).__name__}: {err}', file=sys.stderr)
        return 1
    entries = [(stamp, topic[len(prefix):], raw) for stamp, topic, raw in entries]
    for line in skipped:
        print(f'replay: {line}', file=sys.stderr)
    if not any(topic == JOINT_STATES for _, topic, _ in entries):
        print(f'replay: {args.bag} has no {prefix}{JOINT_STATES}: nothing to replay',
              file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    out_bag = os.path.join(args.out, OUTPUT_BAG)
    try:
        remove_earlier_bag(out_bag)
    except FileExistsError as err:
        print(f'replay: {err}', file=sys.stderr)
        return 1
    classes = {topic: message_class(name) for topic, name in types.items()}
    outcome = Outcome(start=entries[0][0] * 1e-9)
    sink = _Sink(outcome, set(suite_topics()), entries[0][0])
    truth_markers = TruthMarkers()
    context = Context()
    rclpy.init(context=context, args=[])
    replay = None
    try:
        try:
            replay = build(context, [os.path.abspath(p) for p in args.config], sink)
        except ValueError as err:  # files made for different robots (manifest.suite_robot)
            print(f'replay: {err}', file=sys.stderr)
            return 1
        robot = replay.nodes[0].robot
        with SuiteBag(out_bag, robot) as bag:
            sink.open(bag)
            started, started_cpu = time.perf_counter(), time.process_time()
            for stamp, topic, raw in entries:
                sink.now_ns = stamp
                msg = deserialize_message(raw, classes[topic])
                outcome.inputs[topic] = outcome.inputs.get(topic, 0) + 1
                outcome.record(topic, stamp * 1e-9, msg)
                if topic == JOINT_STATES:
                    bag.write_joint_state(stamp, stamp, list(msg.name), msg.position, raw)
                else:
                    bag.write(topic, types[topic], stamp, raw)
                    markers = truth_markers.feed(topic, raw)
                    if markers is not None:
                        bag.write(truth_markers.topic, MARKER_ARRAY, stamp, markers)
                if topic not in TRUTH_TOPICS:
                    replay.step(stamp, topic, msg, raw)
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - started_cpu
    finally:
        if replay is not None:
            replay.close()
        context.try_shutdown()
    plot = os.path.join(args.out, 'replay.png')
    found = contact_pictures.BagContacts.read(out_bag)
    _plot(outcome, found, plot)
    duration = (entries[-1][0] - entries[0][0]) * 1e-9
    print(f'replay: {len(entries)} messages, {duration:.2f} s of {args.bag}, replayed in '
          f'{elapsed:.2f} s ({duration / max(elapsed, 1e-9):.1f} × real time; {cpu:.2f} s of CPU '
          f'time: {duration / max(cpu, 1e-9):.1f} × real time on an unshared core)')
    print(_summary(outcome, found))
    print(f'\nbag: {out_bag}\nplot: {plot}')
    print(contact_pictures.summary(out_bag, args.out, robot))
    return 0
