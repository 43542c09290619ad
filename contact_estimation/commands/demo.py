"""`contact-estimation demo`: the simulated cobot and every node, a scripted scenario, a report.

First, as a user does for a real arm, it identifies the arm's model and calibrates the
detector's thresholds from recordings of the simulated arm's free motion (joint states only:
demo_model.py, `identify fit`'s and `calibrate`'s code), writes their files in `--out`, and
gives the suite those instead of the simulator's friction and the shipped thresholds. Then it
starts the simulated cobot and the core nodes composed in four processes (as `ros2 launch ...
sim:=true` would; with --separate one process per node, as `separate:=true`), every node on
the simulator's clock (use_sim_time: a machine that cannot keep up slows the whole graph
together, with no gap in the stamps), and listens to every topic they declare until the
scenario has played out: the contact in the ground truth, the collision detector's event,
the hold and the resume of seed 003 once the contact is over. It ends anyway after
`--seconds` of simulated time (read from sim_cobot's /diagnostics), or when the simulation
stalls (STALL_DEADLINE of wall time with no simulated time, WALL_DEADLINE in all). Then it
prints what each node received and published and at which rate, how well the simulator
kept up with the wall clock, the detector's events and the reaction (hold, resume by itself
while the latched stop signal stays up until `~/reset`), the contact localizer's estimates
against the simulator's ground truth of the same stamps (link, point and force errors), and
writes a PNG: estimated against true external joint torque, the stop signal and the
time-scaling factor, with the contacts marked by their class.
Touch classification is on in the demo (issue 29; off by default): a scripted force that
ramps like a hand (TOUCH_RAMP or slower) is a touch the arm must yield to with no stop, a
faster one an impact that must stop it. Exits 1, saying why, if a node died, a node
published nothing, the stop latched before the scripted push (during the touch, or before
it: the demo then shows nothing of it), the touch was not classified a touch, or the push
was not detected.
"""
from __future__ import annotations

import argparse
import importlib
import os
import posixpath
import time
from functools import partial
from collections import defaultdict

import numpy as np
import yaml
from rclpy.serialization import deserialize_message

from contact_estimation import manifest
from contact_estimation.commands import demo_model, view
from contact_estimation.commands.demo_pfl import PersonWatch
from contact_estimation.commands.up import robot_files
from contact_estimation.core.contact.contact import Contact, contact_error
from contact_estimation.core.chain.contact_class import IMPACT, TOUCH
from contact_estimation.core.chain.detector import COLLISION, WAITING
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.scenario import Scenario
from contact_estimation.launcher import (SIMULATED_CLOCK_NOTE, NodeSet, namespace_arguments,
                                         simulated_clock)
from contact_estimation.nodes.sim_cobot import SPEED_INPUTS
from contact_estimation.ros import stop_topic
from contact_estimation.ros.collision_messages import CLEARED
from contact_estimation.ros.contact_messages import ContactPairs
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.diagnostics import ERROR, level_byte

DEFAULT_SCENARIO = 'config/scenarios/demo.yaml'  # the Panda's; another robot's: demo_<robot>.yaml
STARTUP_TIMEOUT = 30.0  # s for every node to import, start and connect
# The end if the simulation stalls: no simulated time for STALL_DEADLINE s of wall time, or
# WALL_DEADLINE s after start-up in all. A loaded machine only slows the graph, and the demo
# waits for it: at 0.04 × real time (a 2-core machine at a load of 25) its 13 s take 330 s.
STALL_DEADLINE = 60.0
WALL_DEADLINE = 600.0
SIM = 'sim_cobot'
LOCALIZER = 'contact_localizer'
PROXIMITY = 'proximity_monitor'
# What a scenario may show; its `shows:` lists the ones it does, in the order they happen
# (default SHOWS), and the demo ends once it has seen them all. Its verdict follows them:
# `collision` judges the touch and the push (`_verdict`), `pfl` the person reached and the
# contact over the limit (demo_pfl.py).
EVENTS = {'contact': 'the contact (ground truth)', 'collision': "the detector's collision event",
          'hold': 'the hold after the collision (f_S = 0)',
          'resume': 'the resume once the contact is over',
          'person_reached': "the arm inside the protective distance of the scripted person's "
                            "body part (the proximity monitor's part status)",
          'pfl': "the proximity monitor's stop pfl (a contact over its body region's limit)"}
SHOWS = ('contact', 'collision', 'hold', 'resume')
PERSON_EVENTS = {'person_reached', 'pfl'}  # judged by demo_pfl.py on the scenario's person
JUDGED = PERSON_EVENTS | {'collision'}  # the events a verdict follows (main: `verdicts`)
# A scripted force ramping up this slowly (s) or slower is a hand's touch (issue 29: hands
# ramp over 150–1000 ms); a faster one is an impact.
TOUCH_RAMP = 0.15
# The `event` of a detector event that decides a contact's class without changing the stop.
CONTACT_CLASSES = (IMPACT, TOUCH)


def _message_class(type_name: str):
    package, kind, name = type_name.split('/')
    return getattr(importlib.import_module(f'{package}.{kind}'), name)


class TopicMonitor:
    """Counts every manifest topic and keeps the time series the plot needs; notes, as they
    arrive, the scenario's EVENTS and sim_cobot's pace report on /diagnostics.

    `series`, `events` and `first_last` are by receive time, s since the monitor started: the
    order of what happened, never its delays (the monitor lags the suite). `stamped`, what
    the plot draws, is by the stamps the suite gave (simulated s), as the recording has it:
    - τ_ext and the true contact torque: their header stamps;
    - the stop (a Bool, with no header): its changes as the detector's events state them,
      each at the event's stamp (a collision's is the stamp of the sample it was decided on;
      a stale input's and a clearing's the detector's clock, simulated time here). The
      recording's own time for the Bool is when the recorder received it, which lags as
      this monitor does; the event says when the suite decided;
    - f_S (a Float64, with no header): at the stamp of the newest τ_ext this monitor had
      received when f_S came (the detector publishes f_S on the sample it just took, and
      both wait in this monitor's queue alike), so within a sample or two of its own.
    """

    def __init__(self, context, namespace: str = '', shows=SHOWS, people=None):
        from rclpy.node import Node
        from contact_estimation.suite_bag import suite_topics

        from contact_estimation.ros.qos import SENSOR_QOS
        # In the suite's namespace, so that the manifest's relative topics are the suite's.
        self.node = Node('contact_estimation_demo_monitor', context=context,
                         cli_args=['--ros-args', *namespace_arguments(namespace)])
        self.counts: dict[str, int] = defaultdict(int)
        self.first_last: dict[str, tuple[float, float]] = {}  # receive times, by topic
        self.series: dict[str, list] = defaultdict(list)
        self.stamped: dict[str, list] = defaultdict(list)  # by stamp: (s, value), the plot's
        self._newest_residual = None  # stamp of the newest τ_ext received (s)
        self.events: dict[str, float] = {}  # EVENTS: first receive time
        self.shows = tuple(shows)           # the events the scenario shows
        self.people: PersonWatch | None = people  # the scenario's people, if any
        # True contacts, one after another: [onset stamp, receive time, end stamp, receive
        # time] (simulated s; monitor s), the end None while it goes on.
        self.contact_spans: list[list] = []
        # Every stop the detector latched (a collision, stale input, behind, a fault, ...):
        # stamp, cause, message. The first before the push fails the demo (_verdict).
        self.stops: list[tuple[float, str, str]] = []
        # With touch on, a collision's hold (f_S = 0) comes on an earlier sample than its latch
        # (docs/collision_events.md `class.hold`): by the collision's stamp.
        self.holds: dict[float, float] = {}
        self.touches: list[tuple[float, float]] = []   # touch events: stamp, receive time
        # The proximity monitor's stop as it changed (receive time, stopped), and its reasons
        # while stopped (receive time, text): a stop of it before the push fails the demo too.
        self.proximity_stops: list[tuple[float, bool]] = []
        self.proximity_reasons: list[tuple[float, str]] = []
        # sim_cobot's first and latest pace reports: (receive time, simulated time, values)
        self.first_sim_report: tuple[float, float, dict[str, str]] | None = None
        self.sim_report: tuple[float, float, dict[str, str]] | None = None
        self._sim_name = posixpath.join('/', namespace, SIM)  # its /diagnostics status name
        self._proximity_name = posixpath.join('/', namespace, PROXIMITY)
        # A message this monitor could not read, by topic: its first error (the demo fails).
        self.errors: dict[str, str] = {}
        self.start = time.monotonic()
        self._handlers = {
            _topic('residual_node', 'residual'): self._on_residual,
            _topic(SIM, 'true_contact_torque'): self._on_truth,
            _topic('collision_detector', 'stop'): self._on_stop,
            _topic('collision_detector', 'time_scaling'): self._on_time_scaling,
            _topic('collision_detector', 'events'): self._on_event,
            _topic(SIM, 'diagnostics'): self._on_diagnostics,
            _topic(PROXIMITY, 'stop'): self._on_proximity_stop,
        }
        if people is not None:
            self._handlers.update({
                _topic(SIM, 'joint_states'):
                    lambda topic, now, msg: people.on_joint_state(now, msg),
                _topic(PROXIMITY, 'parts'): self._on_parts,
                _topic(PROXIMITY, 'pfl'): self._on_pfl})
        # Contacts by stamp, from a point and a wrench of the same stamp and link:
        # the simulator's truth and the localizer's estimates.
        self.contacts: dict[str, dict[float, Contact]] = {'truth': {}, 'estimate': {}}
        for source, node, point, wrench in (
                ('truth', SIM, 'true_contact_point', 'true_contact_wrench'),
                ('estimate', LOCALIZER, 'point', 'wrench')):
            on_half = partial(self._on_contact_half, source, ContactPairs())
            self._handlers[_topic(node, point)] = self._handlers[_topic(node, wrench)] = on_half
        # Every topic nodes.yaml names, by its name here and fully qualified. The recorder
        # passes on what it records (`take`, serialised: only what a handler reads is parsed);
        # the monitor subscribes to the rest itself (/clock).
        types, self._names = {}, {}
        for spec in manifest.nodes().values():
            for key in list(spec.publishes) + list(spec.subscribes):
                types[spec.topic(key)] = spec.message_type(key)
                self._names[spec.resolved_topic(key, namespace)] = spec.topic(key)
        self._classes = {topic: _message_class(kind) for topic, kind in types.items()}
        recorded = suite_topics(namespace)
        for name, topic in self._names.items():
            if name not in recorded:
                self.node.create_subscription(self._classes[topic], topic,
                                              partial(self._received, topic), SENSOR_QOS,
                                              raw=True)

    @property
    def simulated_time(self) -> float:
        """The simulated time sim_cobot last reported (s); 0 before its first report."""
        return self.sim_report[1] if self.sim_report else 0.0

    def seen_all_events(self) -> bool:
        return all(event in self.events for event in self.shows)

    def take(self, name: str, cdr: bytes) -> None:
        """A message the recorder recorded on topic `name` (fully qualified)."""
        topic = self._names.get(name)
        if topic is not None:
            self._received(topic, cdr)

    def _received(self, topic: str, cdr: bytes) -> None:
        now = time.monotonic() - self.start
        self.counts[topic] += 1
        self.first_last[topic] = (self.first_last.get(topic, (now,))[0], now)
        handler = self._handlers.get(topic)
        if handler:
            try:
                handler(topic, now, deserialize_message(cdr, self._classes[topic]))
            except Exception as err:  # noqa: BLE001 -- the demo says so and fails, never dies
                self.errors.setdefault(topic, f'{type(err).__name__}: {err}')

    def _on_residual(self, topic: str, now: float, msg) -> None:
        self._newest_residual = stamp_to_seconds(msg.header.stamp)
        self.stamped[topic].append((self._newest_residual, np.array(msg.effort)))

    def _on_truth(self, topic: str, now: float, msg) -> None:
        effort = np.array(msg.effort)
        stamp, spans = stamp_to_seconds(msg.header.stamp), self.contact_spans
        self.stamped[topic].append((stamp, effort))
        touching, going_on = np.any(effort != 0.0), bool(spans) and spans[-1][2] is None
        if touching and not going_on:
            self.events.setdefault('contact', now)
            spans.append([stamp, now, None, None])
        elif going_on and not touching:
            spans[-1][2:] = [stamp, now]

    def _on_stop(self, topic: str, now: float, msg) -> None:
        self.series[topic].append((now, float(msg.data)))

    def _on_time_scaling(self, topic: str, now: float, msg) -> None:
        """Hold: f_S = 0 once the collision was detected; resume: f_S > 0 after the hold and
        the end of the contact going on then."""
        self.series[topic].append((now, msg.data))
        if self._newest_residual is not None:
            self.stamped[topic].append((self._newest_residual, msg.data))
        if 'collision' in self.events and msg.data <= 0.0:
            self.events.setdefault('hold', now)
        spans = self.contact_spans
        if ('hold' in self.events and msg.data > 0.0 and spans and spans[-1][3] is not None
                and spans[-1][1] <= self.events['hold']):
            self.events.setdefault('resume', now)

    def _on_event(self, topic: str, now: float, msg) -> None:
        stamp = stamp_to_seconds(msg.header.stamp)
        for status in msg.status:
            self.series[topic].append((now, stamp, status.message))
            cause = next((kv.value for kv in status.values if kv.key == 'event'), '')
            if cause not in CONTACT_CLASSES:  # a change of the stop (not a class decided)
                self.stamped[_topic('collision_detector', 'stop')].append(
                    (stamp, float(cause != CLEARED)))
            if cause not in (*CONTACT_CLASSES, CLEARED, WAITING):  # a latched stop, any cause
                self.stops.append((stamp, cause, status.message))
            if cause == TOUCH:
                self.touches.append((stamp, now))
            if cause == COLLISION:
                self.events.setdefault('collision', now)
                hold = next((kv.value for kv in status.values if kv.key == 'class.hold'), '')
                if hold:
                    self.holds[stamp] = float(hold)

    def _on_contact_half(self, source: str, pairs: ContactPairs, topic: str, now: float,
                         msg) -> None:
        paired = pairs.add(msg)
        if paired is not None:
            self.contacts[source][paired[0]] = paired[1]

    def _on_proximity_stop(self, topic: str, now: float, msg) -> None:
        if not self.proximity_stops or self.proximity_stops[-1][1] != msg.data:
            self.proximity_stops.append((now, msg.data))
        if self.people is not None:
            self.people.on_stop(now, msg.data)

    def _on_parts(self, topic: str, now: float, msg) -> None:
        if self.people.on_parts(now, msg):
            self.events.setdefault('person_reached', now)

    def _on_pfl(self, topic: str, now: float, msg) -> None:
        self.people.on_check(msg)

    def _on_diagnostics(self, topic: str, now: float, msg) -> None:
        for status in msg.status:
            if status.name == self._proximity_name and status.level == level_byte(ERROR):
                self.proximity_reasons.append((now, status.message))
            if (self.people is not None and status.name == self._proximity_name
                    and self.people.on_status(now, status)):
                self.events.setdefault('pfl', now)
            if status.name != self._sim_name:
                continue
            values = {kv.key: kv.value for kv in status.values}
            if self.people is not None and 'clock_start' in values:
                self.people.clock_start = float(values['clock_start'])
            if 'simulated_time' in values:
                self.sim_report = (now, float(values['simulated_time']), values)
                self.first_sim_report = self.first_sim_report or self.sim_report


def residual_matching_the_sim() -> dict:
    """residual_node parameters that model the simulated joints' friction (seed 001 eq. 23):
    the simulator's truth, for benchmarks (the demo identifies its own: demo_model.py)."""
    with open(manifest.node(SIM).parameters_path()) as f:
        sim = yaml.safe_load(f)[SIM]['ros__parameters']
    return {'friction_model': 'continuous', 'friction_parameters': sim['friction']}


def _wait_for_residuals(monitor: TopicMonitor, executor, nodes: NodeSet,
                        timeout: float) -> bool:
    """Spin until the first residual arrives (every node imported and connected)."""
    residual = _topic('residual_node', 'residual')
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not monitor.counts.get(residual):
        executor.spin_once(timeout_sec=0.05)
        if len(nodes.alive()) < len(nodes.processes):
            return False
    return bool(monitor.counts.get(residual))


def _watch(monitor: TopicMonitor, executor, nodes: NodeSet, seconds: float) -> str:
    """Spin until the scenario's EVENTS have all happened, `seconds` have been simulated, a
    node died or the simulation stalled (STALL_DEADLINE, WALL_DEADLINE); returns how the
    watch ended."""
    from tqdm import tqdm

    deadline = time.monotonic() + WALL_DEADLINE
    progress_at, simulated = time.monotonic(), monitor.simulated_time
    with tqdm(total=len(monitor.shows), unit='event', desc='demo') as bar:
        while True:
            executor.spin_once(timeout_sec=0.01)
            progress = (sum(event in monitor.events for event in monitor.shows),
                        f'simulated {monitor.simulated_time:.0f} s')
            if progress != (bar.n, bar.postfix):
                bar.n = progress[0]
                bar.set_postfix_str(progress[1])
            for name, code in nodes.newly_dead():
                tqdm.write(f'demo: node {name} exited with code {code}:\n' + nodes.log_tail(name))
                return f'node {name} died'
            if monitor.seen_all_events():
                return 'the scenario played out'
            if monitor.simulated_time >= seconds:
                return f'{seconds:g} s simulated (--seconds)'
            now = time.monotonic()
            if monitor.simulated_time > simulated:
                progress_at, simulated = now, monitor.simulated_time
            if now - progress_at > STALL_DEADLINE:
                return (f'the simulation stalled: no simulated time for {STALL_DEADLINE:.0f} s '
                        'of wall time')
            if now > deadline:
                return f'deadline: {WALL_DEADLINE:.0f} s of wall time'


def _topic(node: str, key: str) -> str:
    return manifest.node(node).topic(key)


def _summary(monitor: TopicMonitor, exit_codes: dict[str, int]) -> tuple[str, bool]:
    """Per node: alive to the end, and every topic's count and achieved rate (first to last
    message as received)."""
    lines, healthy = [], True
    for spec in manifest.nodes().values():
        code = exit_codes.get(spec.name)
        status = 'ran to the end' if code in (0, -2, None) else f'DIED (exit code {code})'
        healthy &= code in (0, -2, None)
        lines.append(f'{spec.name}: {status}')
        for direction, entries in (('published', spec.publishes), ('received', spec.subscribes)):
            for key in entries:
                topic = spec.topic(key)
                n = monitor.counts.get(topic, 0)
                first, last = monitor.first_last.get(topic, (0.0, 0.0))
                rate = (n - 1) / (last - first) if n > 1 and last > first else 0.0
                lines.append(f'    {direction:9s} {topic:42s} {n:7d} msgs {rate:8.1f} Hz')
            if direction == 'published' and entries and not any(
                    monitor.counts.get(spec.topic(k)) for k in entries):
                healthy = False
                lines.append('    !! published nothing')
    for topic, error in monitor.errors.items():  # what it shows may be missing: not OK
        healthy = False
        lines.append(f'!! the demo monitor could not read a message on {topic}: {error}')
    return '\n'.join(lines), healthy


def _pace(monitor: TopicMonitor) -> str:
    """Whether the simulator kept up with the wall clock, from its /diagnostics reports
    (simulated time, `fell_behind` count, CPU load; nodes/sim_cobot.py)."""
    if monitor.sim_report is None:
        return f'simulation: no pace report from {SIM} on /diagnostics'
    (first_at, first_simulated, _), (at, simulated, values) = (monitor.first_sim_report,
                                                               monitor.sim_report)
    pace = f'simulated {simulated:.1f} s by its last report'
    if at > first_at:
        pace += (f' at {(simulated - first_simulated) / (at - first_at):.2f} × real time '
                 '(between its first and last report)')
    pace += f', {SIM} CPU load {values.get("cpu_load", "?")}'
    holds = {key: int(values.get(f'{key}_timeout', 0)) for key in SPEED_INPUTS}
    if any(holds.values()):  # the suite's reaction signal missing: the arm held, jolted
        pace += ('; it held the arm for lack of ' + ', '.join(
            f'{key.replace("_", " ")} ({count} times)' for key, count in holds.items() if count)
            + ' (more than its time_scaling.timeout without one: a jolt the detector sees)')
    behind = int(values.get('fell_behind', 0))
    if not behind:
        return f'simulation: kept up with the wall clock; {pace}'
    return (f'simulation: this machine could not keep up with the wall clock ({behind} '
            f'reports); {pace}. Every node runs on the simulated clock, so the whole graph '
            'slowed together: nothing was skipped, and the rates below, measured on the '
            'wall clock, are lower than configured.')


def scenario_settings(path: str) -> tuple[tuple[str, ...], dict[str, dict]]:
    """What the scenario file shows (`shows:`, default SHOWS; ValueError for an event not in
    EVENTS) and the suite's parameters it runs with (`suite:`, by node)."""
    with open(path, encoding='utf-8') as f:
        raw = yaml.safe_load(f) or {}
    shows, suite = tuple(raw.get('shows') or SHOWS), raw.get('suite') or {}
    unknown = [event for event in shows if event not in EVENTS]
    if unknown:
        raise ValueError(f'shows: {", ".join(unknown)}: not one of {", ".join(EVENTS)}')
    if PERSON_EVENTS & set(shows) and not raw.get('people'):
        raise ValueError(f'shows: {", ".join(PERSON_EVENTS & set(shows))}: needs `people:`')
    if not (JUDGED & set(shows)):  # else the demo would print OK having judged nothing
        raise ValueError(f'shows: {", ".join(shows)}: none that a verdict judges '
                         f'({", ".join(sorted(JUDGED))})')
    nodes = manifest.nodes()
    if not isinstance(suite, dict) or any(
            node not in nodes or not isinstance(values, dict) for node, values in suite.items()):
        raise ValueError(f'suite: a mapping of node name ({", ".join(nodes)}) to parameters')
    return shows, suite


def scripted_kinds(scenario: str) -> list[str]:
    """The class each scripted force of the scenario file should get, in the order they
    start: TOUCH when it ramps up over TOUCH_RAMP or longer, else an impact (COLLISION)."""
    with open(scenario, encoding='utf-8') as f:
        forces = (yaml.safe_load(f) or {}).get('forces') or []
    forces = sorted(forces, key=lambda force: force.get('start', 0.0))
    return [TOUCH if force.get('ramp', 0.05) >= TOUCH_RAMP else COLLISION for force in forces]


def _origin(monitor: TopicMonitor) -> float:
    """The stamp of the first τ_ext (0 before any): simulated time starts at the wall clock's
    epoch seconds, so times are said since it."""
    residual = monitor.stamped.get(_topic('residual_node', 'residual'), [])
    return residual[0][0] if residual else 0.0


def _verdict(monitor: TopicMonitor, kinds: list[str]) -> tuple[str, bool]:
    """Whether the demo showed what it is for, on simulated stamps: the true contacts, in
    order, are the scripted forces of `kinds` (scripted_kinds); no stop before the push (the
    first impact), none during a touch, each touch classified a touch, and the push detected
    (with the delay from its onset)."""
    spans = monitor.contact_spans
    if not spans:
        return 'verdict: no contact happened while the demo watched: nothing was shown', False
    origin = _origin(monitor)  # said in simulated s since the first τ_ext, as the plot is
    kinds = kinds[:len(spans)] + [COLLISION] * (len(spans) - len(kinds))
    push = kinds.index(COLLISION) if COLLISION in kinds else len(spans)
    onset = spans[push][0] if push < len(spans) else np.inf
    early = [stop for stop in monitor.stops if stop[0] < onset]
    if early:
        stamp, cause, message = early[0]
        during = next((f' during the touch from {span[0] - origin:.3f} s' for span, kind in zip(
            spans, kinds) if kind == TOUCH and span[0] <= stamp), '')
        return (f'verdict: FAILED: the stop latched at {stamp - origin:.3f} s{during}, before the '
                f'scripted push ({cause}: {message}); what follows shows nothing of it'), False
    received = spans[push][1] if push < len(spans) else np.inf
    early, held = _proximity_before(monitor, received)
    if early:
        return f'verdict: FAILED: {early}; what follows shows nothing of the push', False
    touches = []
    for span, kind in zip(spans[:push], kinds[:push]):
        end = span[2] if span[2] is not None else np.inf
        classified = [stamp for stamp, _ in monitor.touches if span[0] <= stamp <= end]
        if not classified:
            return (f'verdict: FAILED: the touch from {span[0] - origin:.3f} s was not '
                    'classified a touch'), False
        touches.append(f'the touch at {span[0] - origin:.3f} s yielded to with no stop '
                       f'(classified {(classified[0] - span[0]) * 1e3:.0f} ms after its onset); ')
    if push == len(spans):
        return 'verdict: FAILED: no push happened while the demo watched', False
    detected = [stop for stop in monitor.stops if stop[1] == COLLISION]
    if not detected:
        return f'verdict: FAILED: the push at {onset - origin:.3f} s was not detected', False
    latched = detected[0][0]
    hold = monitor.holds.get(latched, latched)
    latch = (f'; the stop latched {(latched - onset) * 1e3:.0f} ms after it, once the contact '
             'was decided an impact' if hold < latched else '')
    return (f'verdict: no stop before the push; {"".join(touches)}the push at '
            f'{onset - origin:.3f} s '
            f'detected {(hold - onset) * 1e3:.0f} ms later (simulated time: the arm held, '
            f'f_S = 0){latch}{held}'), True


def _proximity_before(monitor: TopicMonitor, received: float) -> tuple[str, str]:
    """The proximity monitor's stop before the monitor time `received` (the push's arrival):
    (why it stopped the arm once it had first released it, '' if it did not: its start-up
    stop is not one; a note said plainly when its start-up still held the arm then, waiting
    for its inputs (the cloud worker starts at normal priority, and comes late on a loaded
    machine), so that the contacts met an arm standing still, else ''). Both '' when it
    published no stop at all."""
    changes = [(t, stop) for t, stop in monitor.proximity_stops if t < received]
    if not changes:
        return '', ''
    released = next((t for t, stop in changes if not stop), None)
    if released is None:
        reasons = [text for t, text in monitor.proximity_reasons if t < received]
        return '', ('. Note: the proximity monitor was still starting when the push came (its '
                    f'last reason: {reasons[-1] if reasons else "none received"}): it held the '
                    'arm still through the contacts, so they met an arm standing, not moving')
    stopped = next((t for t, stop in changes if stop and t > released), None)
    if stopped is None:
        return '', ''
    reason = next((text for t, text in monitor.proximity_reasons if t >= stopped - 0.1),
                  'its reason not received')
    return (f'the proximity monitor stopped the arm at {stopped:.2f} s (demo monitor time), '
            f'before the push ({reason})'), ''


def _reaction(monitor: TopicMonitor) -> str:
    """The seed 003 reaction to the contacts, from the events the monitor noted.

    Times are the demo monitor's receive times (s since start): the order of events is
    right, the delays between them are not measurements (benchmarks/ measures those).
    """
    events, spans = monitor.events, monitor.contact_spans
    if not spans:
        return '    no contact while the demo watched: nothing to react to'
    lines = [f'    contact (ground truth) from {span[1]:6.2f} s to '
             + (f'{span[3]:6.2f} s' if span[3] is not None else 'the end') for span in spans]
    lines += [f'    touch:   classified a touch at {now:6.2f} s: no stop, f_S holds and yields '
              'while touched' for _, now in monitor.touches]
    if 'hold' not in events:
        return '\n'.join(lines + ['    hold: f_S never reached 0 after a collision (none '
                                  'detected)'])
    lines.append(f'    hold:    f_S = 0 from {events["hold"]:6.2f} s: the arm holds where it is')
    if 'resume' not in events:
        lines.append('    resume:  not yet (the contact lasted, or the demo ended first)')
    else:
        lines.append(f'    resume:  f_S > 0 again from {events["resume"]:6.2f} s, after the '
                     'contact ended: the motion resumes by itself')
    stops = monitor.series.get(_topic('collision_detector', 'stop'), [])
    if stops and stops[-1][1]:
        lines.append('    stop:    still latched (True) at the end: the stop signal is the safety '
                     'latch and clears only with ~/reset (hold_time 0); f_S is the seed 003 '
                     'reaction for controllers that re-time their trajectory')
    return '\n'.join(lines)


def _localization(monitor: TopicMonitor) -> str:
    """The localizer's estimates against the simulator's truth of the same stamp: link
    right or wrong, point error (mm), force magnitude error (%)."""
    truth, estimates = monitor.contacts['truth'], monitor.contacts['estimate']
    matched = [contact_error(e, truth[t]) for t, e in estimates.items() if t in truth]
    unmatched = len(estimates) - len(matched)
    if not matched:
        return (f'    no estimate of a true contact ({len(estimates)} estimates, '
                f'{len(truth)} true contact samples)')
    right = [e for e in matched if e.right_link]
    line = f'    link right in {len(right)} of {len(matched)} estimates of the true contact'
    if right:
        point = 1000 * np.array([e.point for e in right])
        force = 100 * np.array([e.force for e in right])
        line += (f'; on the right link: point error median {np.median(point):.1f} mm '
                 f'(max {point.max():.1f}), force error median {np.median(force):.1f} % '
                 f'(max {force.max():.1f})')
    return line + (f'\n    {unmatched} estimates at stamps without a true contact'
                   if unmatched else '')


def _plot(monitor: TopicMonitor, path: str) -> None:
    """Every series at its stamp (TopicMonitor.stamped says which stamp each has), in
    simulated s since the first τ_ext: a detection is drawn as far after its contact as the
    suite decided it, not as late as this monitor received it. A stop raised before the
    first sample (waiting for input, stamped by a clock that had not started yet) is drawn
    from it."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    stamped = monitor.stamped
    residual = stamped.get(_topic('residual_node', 'residual'), [])
    origin = _origin(monitor)

    def since(stamp: float) -> float:
        return max(stamp - origin, 0.0)

    residual = [(since(t), tau) for t, tau in residual]
    truth = [(since(t), tau) for t, tau in stamped.get(_topic('sim_cobot', 'true_contact_torque'),
                                                         [])]
    fig, (ax_tau, ax_stop) = plt.subplots(2, 1, figsize=(11, 7), sharex=True,
                                          gridspec_kw={'height_ratios': [3, 1]})
    if residual:
        t, tau = zip(*residual)
        tau = np.array(tau)
        for j in range(tau.shape[1]):
            line, = ax_tau.plot(t, tau[:, j], lw=0.8, label=f'τ_ext,{j + 1} estimated')
            if truth:
                tt, true = zip(*truth)
                ax_tau.plot(tt, np.array(true)[:, j], '--', color=line.get_color(), lw=1.2)
    touched = [since(stamp) for stamp, _ in monitor.touches]
    last = residual[-1][0] if residual else 0.0
    for onset, end in ((since(span[0]), span[2]) for span in monitor.contact_spans):
        end = since(end) if end is not None else max(last, onset)  # still going at the end
        touch = any(onset <= stamp <= end for stamp in touched)
        for ax in (ax_tau, ax_stop):
            ax.axvspan(onset, end, color='tab:green' if touch else 'tab:red', alpha=0.12)
        ax_tau.annotate('touch: no stop' if touch else 'impact: stop', (onset, 1.0),
                        xycoords=('data', 'axes fraction'), va='top', fontsize=8)
    ax_tau.set_ylabel('external joint torque (N·m)')
    ax_tau.set_title('estimated (solid) and true (dashed) external joint torque; true '
                     'contacts shaded by their class (green touch, red impact)')
    ax_tau.legend(ncol=4, fontsize=7, loc='lower left')
    ax_tau.grid(alpha=0.3)
    for key, node, label in (('stop', 'collision_detector', 'stop (1 = stop)'),
                             ('time_scaling', 'collision_detector', 'time scaling f_S')):
        # In stamp order; changes of one stamp in the order they came (a stop raised while
        # waiting and cleared by the first sample are both drawn at 0: the clear last).
        data = sorted(((since(t), v) for t, v in stamped.get(_topic(node, key), [])),
                      key=lambda change: change[0])
        if data:
            end = max(data[-1][0], last)
            t, v = zip(*data, (end, data[-1][1]))  # the last value holds to the end
            ax_stop.step(t, v, where='post', label=label)
    ax_stop.set_xlabel("simulated time since the first sample, by the messages' stamps (s)")
    ax_stop.legend(fontsize=8, loc='lower left')
    ax_stop.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='contact-estimation demo', description=__doc__)
    parser.add_argument('--seconds', type=float, default=30.0,
                        help='most simulated time to watch (s); the demo ends sooner, as soon '
                             'as the scenario has played out')
    parser.add_argument('--robot', metavar='NAME|URDF',
                        help="every node's and the simulated cobot's robot, as `up --robot` "
                             '(default: config/robot.yaml, the Panda)')
    parser.add_argument('--scenario',
                        help='scenario file for the simulated cobot (default: '
                             f'{DEFAULT_SCENARIO}, or config/scenarios/demo_<robot>.yaml with '
                             '--robot)')
    parser.add_argument('--out', default='out/demo', help='folder for the plot and node logs')
    parser.add_argument('--separate', action='store_true',
                        help='one process per node, as `contact-estimation up --separate`, '
                             'instead of the core nodes composed in four processes')
    parser.add_argument('--namespace', default='', metavar='NS',
                        help='run the simulated arm and its suite in ROS namespace NS')
    parser.add_argument('--view', nargs='?', const=str(view.DEFAULT_PORT), default='0',
                        metavar='PORT',
                        help='watch it live in Foxglove on ws://localhost:PORT (default '
                             f'{view.DEFAULT_PORT}); the view always runs, and records what it '
                             'shows to OUT/view.mcap')
    args = parser.parse_args(argv)
    if args.scenario is None:
        args.scenario = (f'config/scenarios/demo_{args.robot}.yaml' if args.robot
                         else DEFAULT_SCENARIO)
    scenario = args.scenario if os.path.isabs(args.scenario) else manifest.share_path(args.scenario)
    if not os.path.isfile(scenario):
        parser.error(f'--scenario {args.scenario}: no such file')
    if args.seconds <= 0:
        parser.error(f'--seconds {args.seconds:g}: must be positive')
    try:
        shows, suite = scenario_settings(scenario)
    except ValueError as err:
        parser.error(f'--scenario {args.scenario}: {err}')
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    refusal = stop_topic.refusal(args.namespace)  # e.g. the demo beside a real arm's suite
    if refusal:
        parser.error(refusal)

    import rclpy
    from rclpy.context import Context

    from contact_estimation import contact_pictures
    from contact_estimation.ros.bag_recorder import BagRecorder, write_parameters
    from contact_estimation.ros.node_main import FastExecutor

    os.makedirs(args.out, exist_ok=True)
    try:  # the model and thresholds, as a user makes them for a real arm
        model = demo_model.make(args.robot, args.out)
    except ValueError as err:
        print(f'demo: FAILED: no model and thresholds for the arm: {err}')
        return 1
    robot = {'robot': args.robot} if args.robot else {}
    people = None
    if PERSON_EVENTS & set(shows):
        arm = RobotModel.load(model.robot)
        played = Scenario.load(scenario, arm)
        if played.payload is not None:  # the arm as the simulator runs it
            arm = played.payload.carried_by(arm)
        people = PersonWatch(played, arm)
    context = Context()
    rclpy.init(context=context)
    monitor = TopicMonitor(context, args.namespace, shows, people)
    # The recorder takes every 1 kHz stream and hands each message to the monitor: the Python
    # executor's per-wake-up wait set would make them lose a third of the samples (the
    # recording then has gaps), and two subscriptions per topic lost more.
    executor = FastExecutor(context=context)
    executor.add_node(monitor.node)
    recorder = BagRecorder.for_suite(context, os.path.join(args.out, 'recording'),
                                     args.namespace, overrides=robot, tap=monitor.take)
    executor.add_node(recorder.node)
    processes = manifest.processes(with_sim=True, separate=args.separate)
    overrides = simulated_clock()
    overrides[SIM]['scenario'] = scenario
    overrides['residual_node'].update(model.overrides['residual_node'])
    # The lidar sees the cell's fixtures, no person: objects that do not move (a real cell
    # tracks people or keeps the default 1.6 m/s, the speed of a person it missed).
    overrides['proximity_monitor']['object_speed'] = 0.0
    overrides['collision_detector']['touch.enabled'] = True  # the demo shows touch and impact
    for node, values in suite.items():  # the scenario's own (demo_pfl.yaml: collaborative)
        overrides.setdefault(node, {}).update(values)
    robot_file = robot_files([], args.robot)  # a `/**` file with --robot
    # The live view, recording the scene it shows (port 0 without --view: any free one).
    view_path = os.path.join(args.out, 'view.mcap')
    commands = {view.PROCESS: view.command(args.view, args.namespace,
                                           [*model.parameter_files, *robot_file], view_path)}
    nodes = NodeSet([spec.name for spec in processes] + list(commands),
                    (*model.parameter_files, *robot_file), overrides=overrides,
                    log_dir=os.path.join(args.out, 'logs'), namespace=args.namespace,
                    commands=commands)
    write_parameters({**nodes.overrides, **({manifest.WILDCARD: robot} if robot else {})},
                     os.path.join(args.out, 'recording_parameters.yaml'))
    print(f'demo: starting {", ".join(nodes.names)}; scenario {args.scenario}; '
          f'{SIMULATED_CLOCK_NOTE}', flush=True)
    nodes.start()
    try:
        if not _wait_for_residuals(monitor, executor, nodes, STARTUP_TIMEOUT):
            print(f'demo: no residual within {STARTUP_TIMEOUT:.0f} s of start', flush=True)
        ending = _watch(monitor, executor, nodes, args.seconds)
    finally:
        # By node: the nodes of a composed process share its exit code.
        exit_codes = {node: nodes.processes[spec.name].returncode for spec in processes
                      for node in spec.node_names
                      if spec.name in nodes.processes and nodes.processes[spec.name].poll()
                      is not None}
        nodes.stop()
        for path in robot_file:
            os.remove(path)
        executor.shutdown()
        recorder.close()
        monitor.node.destroy_node()
        context.try_shutdown()
    missing = [EVENTS[event] for event in shows if event not in monitor.events]
    print(f'\ndemo: ended after {time.monotonic() - monitor.start:.1f} s: {ending}'
          + (f'; not seen: {", ".join(missing)}' if missing else ''))
    print(_pace(monitor))
    print('\n' + model.summary)
    text, healthy = _summary(monitor, exit_codes)
    print('\nWhat each node published and received (as seen by the demo monitor):\n' + text)
    events = monitor.series.get(_topic('collision_detector', 'events'), [])
    print('\nCollision detector events (received at; header stamp):' if events
          else '\nNo collision detector events.')
    for t, stamp, message in events:
        print(f'    {t:6.2f} s; {stamp:.3f}  {message}')
    print('\nReaction to the contact (seed 003 time scaling f_S; demo monitor receive times):\n'
          + _reaction(monitor))
    print('\nContact estimates against the ground truth (/sim/contact/*, same stamps):\n'
          + _localization(monitor))
    plot_path = os.path.join(args.out, 'demo.png')
    _plot(monitor, plot_path)
    print(f'\nplot: {plot_path}\nnode logs: {os.path.join(args.out, "logs")}')
    print(f'recording: {recorder.bag.path} ({sum(recorder.bag.counts.values())} messages; '
          'README "See the contact" opens it in Foxglove or rviz; replay it: '
          f'contact-estimation replay {recorder.bag.path} '
          + ' '.join(f'--config {path}' for path in (
              *model.parameter_files, os.path.join(args.out, 'recording_parameters.yaml')))
          + ')')
    print(f'the live view\'s scene: {view_path} (Foxglove: open it, then the layout '
          'config/foxglove_layout.json)')
    print(contact_pictures.summary(recorder.bag.path, args.out, recorder.bag.robot))
    verdicts = []
    if 'collision' in shows:
        verdicts.append(_verdict(monitor, scripted_kinds(scenario)))
    if people is not None:
        verdicts.append(people.verdict(monitor.contact_spans, monitor.stops))
    print('\n' + '\n'.join(text for text, _ in verdicts))
    shown = all(ok for _, ok in verdicts)
    ok = healthy and shown
    print('demo: OK' if ok else 'demo: FAILED (see above)')
    return 0 if ok else 1
