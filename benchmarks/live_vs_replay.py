"""Live against replay (issue 26): the suite run live at 1 kHz must stop and estimate on the
same samples as `contact-estimation replay` of the same inputs, its own algorithm.

1. Contacts on the simulated cobot (core/sim, ROS-free): the Panda in smooth random motion,
   one contact every slot, on links 2-7, 10-80 N. Pushes of 0.5-2 s ramping in 20-50 ms
   (`ft_contact.random_push`: within 30° of the inward normal, turning with the link), and
   impacts: a link running head-on into a ball set in its path LEAD s before, which gives
   way (is taken away) IMPACT s later; the ball's softness (MuJoCo's contact time constant)
   is sized, over two more simulations, for the drawn peak force. Recorded at 1 kHz: joint
   states (the sim's noise), the base F/T readings, the lidar's clouds (10 Hz), and the
   truth: per sample the strongest true contact (link, point, force), per contact its onset
   (the first sample over ONSET_FORCE) and link (the most force over its slot).
2. Live: the suite started the README's way, `contact-estimation up --config PARAMETERS
   [--priority N]` (composed; PARAMETERS: the residual models the sim's friction, as
   `identify` would give it, and each stop clears HOLD_TIME after its contact, so that every
   contact raises its own). A driver process at SCHED_FIFO 50 (`_ros_load.drive`) plays the
   recording with the wall clock as stamps, and this process listens to the stop, the
   collision events and both estimators' estimates. Twice: without, and with a user's
   subscriber on the residual (a process of its own, as a plot would be). What the driver
   published is written to OUT/<run>/inputs, a rosbag.
3. Replay: `contact-estimation replay OUT/<run>/inputs --config PARAMETERS` (the same nodes,
   parameters and samples, driven by the stamps); its bag holds every output, logged at the
   stamp being replayed.
4. Per contact, live against its replay: the sample whose collision event raised the stop
   (the event's stamp), when that stop came (the stop topic's rise to True the event
   explains, which the detector publishes first; live: received here; replay: the stamp
   being replayed), so the stop after the onset and live − replay; each estimator's first estimate
   after the onset, right link and point error against the truth of the estimate's sample.
   A live stop later than replay + MAX_LAG without an earlier `behind` stop (an event of that
   cause since the slot began) is late; so is none where the replay stopped.
Aims (issue 26): live − replay p50 ≤ 1 ms and p95 ≤ 2 ms, no late stop, with the residual
subscribed too; estimates as in the replay: right link within 1 point, point median within
1 mm, first estimate within 5 ms.

`--touch` (issue 29: the classification made live must be the replay's): `touch.enabled`
true in the parameters of both, and every third contact (the third of three) a hand's touch
instead of a push: the same drawing on a link's surface, with touch_classification.py's
ranges (ramps of 150-1000 ms to 5-40 N, held 0.3-1 s, ramped down as slowly). Per contact,
the classes decided (the collision events with a `class`: docs/collision_events.md), live
against the replay: the first class, the decision sample (the event's stamp), the hold's
sample (issue 37: f_S = 0 on the sample eq. 7 fires, the latch up to touch.decision_time
later), every later decision (a touch that became an impact), and when the decision came.
The recording is open-loop (the arm does not follow f_S), so live and replay see the same
inputs: that is what is compared, not the closed-loop reaction of touch_classification.py.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/live_vs_replay.py [--contacts N]
        [--quick] [--subscriber | --no-subscriber] [--out DIR] [--priority N] [--touch]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import mujoco
import numpy as np
from ft_contact import random_push
from tqdm import tqdm
from touch_classification import TOUCH_FORCE, TOUCH_HOLD, TOUCH_RAMP

from _ros_load import (REALTIME_PRIORITY, DriverTopics, JointStream, Output, cpu_table, drive,
                       machine, realtime, second_job, table)
from contact_estimation import manifest
from contact_estimation.commands.demo import residual_matching_the_sim
from contact_estimation.core.chain.contact_class import IMPACT as IMPACT_CLASS, TOUCH
from contact_estimation.core.chain.detector import BEHIND, COLLISION, FAULT, STALE
from contact_estimation.core.chain.lag import MAX_LAG
from contact_estimation.core.chain.stamps import nanoseconds
from contact_estimation.core.contact.contact import Contact, contact_error
from contact_estimation.core.identification.trajectory import make_trajectory
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.mjcf import OBSTACLE_PREFIX
from contact_estimation.core.sim.scenario import Obstacle, Scenario
from contact_estimation.ros.bag_recorder import message_class, write_parameters
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.suite_bag import SuiteBag, messages, remove_earlier_bag

RATE = 1000.0          # Hz: joint states and F/T readings, one per physics step
LIDAR_EVERY = 100      # samples between lidar scans (10 Hz)
SETTLE = 3.0           # s of motion before the first contact (start-up, warm-up)
GAP = 1.2              # s after each contact
LINKS = [f'panda_link{k}' for k in range(2, 8)]
FORCE = (10.0, 80.0)   # N
PUSH_DURATION, PUSH_RAMP = (0.5, 2.0), (0.02, 0.05)  # s
IMPACT_WINDOW = 1.0    # s of motion in which an impact's moment is chosen
BALL = 0.03            # m, radius of an impact's ball
LEAD, IMPACT = 0.05, 0.03  # s an impact's ball is in place before and after the link hits
CANDIDATES = 40        # brushes tried per impact
ONSET_FORCE = 1.0      # N: a contact begins at its first sample with more true force
HOLD_TIME = 0.1        # s: the detector releases the stop this long after a contact
# Stops with no contact behind them (issue 35): the detector's causes other than a collision.
CAUSELESS = (BEHIND, STALE, FAULT)
PARKED = np.array([0.0, 0.0, -100.0])  # m: where a ball waits, out of reach
MOTION = {'type': 'smooth_random', 'seed': 3, 'speed_scale': 0.4, 'amplitude': 0.5}
DETECTOR, RESIDUAL = manifest.node('collision_detector'), manifest.node('residual_node')
ESTIMATORS = {'localizer': manifest.node('contact_localizer'),
              'F/T': manifest.node('ft_contact_estimator')}
SUBSCRIBER_RUNS = {False: 'without subscriber', True: 'residual subscribed'}
KINDS = ('push', 'impact', TOUCH)  # the contacts drawn (`Truth.kind`)
PLURAL = {'push': 'pushes', 'impact': 'impacts', TOUCH: 'touches'}


# ---------------------------------------------------------------------- the recording
@dataclass
class Impact:
    """A link running into a ball at `time`: the ball touches the surface point `point`
    (link frame) of `link` then, along its outward normal, and gives way IMPACT s later;
    `softness`: its contact time constant (s, MuJoCo's solref)."""

    time: float
    link: str
    point: np.ndarray
    at: np.ndarray      # the point at `time`, base frame
    normal: np.ndarray  # its outward normal then, base frame
    target: float       # N, the peak force aimed at
    softness: float = 0.02

    def ball(self, k: int) -> Obstacle:
        return Obstacle(f'ball{k}', 'sphere', (BALL,),
                        self.at + BALL * self.normal)

    def placed(self, t: float) -> bool:
        return -LEAD <= t - self.time <= IMPACT


@dataclass
class Truth:
    """One contact: kind, link, onset and last sample, peak force, and the samples its
    events belong to (`slot`: from, to)."""

    kind: str
    link: str
    onset: int
    end: int
    peak: float
    slot: tuple[int, int]


@dataclass
class Recording:
    """What the driver plays and what really happened, per sample."""

    stream: JointStream
    links: list[str]      # per sample the strongest true contact's link ('' none)
    points: np.ndarray    # its point and force, link frame
    forces: np.ndarray
    contacts: list[Truth]

    def truth(self, i: int) -> Contact | None:
        return Contact(self.links[i], self.points[i], self.forces[i]) if self.links[i] else None


def impact_candidates(robot, surfaces, trajectory, start: float) -> list[Impact]:
    """Moments and surface points of links 2-7 in [start, start + IMPACT_WINDOW] moving
    into their outward normal (within 45° of it), CANDIDATES of the fastest quarter, fastest
    first: where a ball in the path is hit head-on."""
    found = []
    for t in np.arange(start, start + IMPACT_WINDOW, 0.02):
        q, v, _ = trajectory.sample(t)
        for link in LINKS:
            points, normals = surfaces.surface_points(link)
            rotation, origin = robot.link_pose(q, link)
            later, moved = robot.link_pose(q + 1e-3 * v, link)
            at = points @ rotation.T + origin
            velocity = (points @ later.T + moved - at) / 1e-3
            normal = normals @ rotation.T
            speed = np.linalg.norm(velocity, axis=1)
            ahead = np.sum(normal * velocity, axis=1) > 0.7 * speed
            for i in np.flatnonzero(ahead):
                found.append((speed[i], Impact(t, link, points[i], at[i], normal[i], 0.0)))
    found.sort(key=lambda item: -item[0])
    fastest = found[:len(found) // 4]  # spread over them: neighbours fail together
    return [impact for _, impact in fastest[::max(1, len(fastest) // CANDIDATES)]]


def first_clear(surfaces, trajectory, candidates: list[Impact]) -> Impact | None:
    """The first candidate whose ball no part of the arm's reference path touches before
    its moment (from LEAD s before)."""
    for impact in candidates:
        ball = impact.ball(0).position
        if all(surfaces.closest_points(trajectory.sample(impact.time - t)[0], ball).distance[0]
               > BALL + 0.002 for t in (LEAD, LEAD / 2)):
            return impact
    return None


def plan(robot, surfaces, trajectory, count: int, rng,
         touches: bool) -> tuple[list, list, list[Impact], float]:
    """Every third contact (the second of three) an impact, the others pushes (with
    `touches`, the third of three a hand's touch), one after another with GAP between;
    returns the pushes, the touches, the impacts and the recording's length."""
    pushes, hands, impacts, t = [], [], [], SETTLE
    for k in range(count):
        if touches and k % 3 == 2:
            ramp = rng.uniform(*TOUCH_RAMP)
            hand = random_push(surfaces, rng, LINKS, TOUCH_FORCE, t,
                               2 * ramp + rng.uniform(*TOUCH_HOLD), ramp)
            hands.append(hand)
            t += hand.duration + GAP
            continue
        if k % 3 == 1:
            impact = first_clear(surfaces, trajectory,
                                 impact_candidates(robot, surfaces, trajectory, t))
            if impact is None:
                raise RuntimeError(f'no clear impact from {t:.1f} s: try another --seed')
            impact.target = rng.uniform(*FORCE)
            impacts.append(impact)
            t = impact.time + GAP
        else:
            push = random_push(surfaces, rng, LINKS, FORCE, t, rng.uniform(*PUSH_DURATION),
                               rng.uniform(*PUSH_RAMP))
            pushes.append(push)
            t += push.duration + GAP
    return pushes, hands, impacts, t


def simulate(robot, pushes, impacts: list[Impact], seconds: float, progress) -> dict:
    """The sim cobot through the pushes and impacts (each ball in place only near its moment:
    the arm's motion comes back everywhere): per sample q, q̇, τ, F/T reading and strongest
    true contact; a lidar cloud every LIDAR_EVERY samples."""
    balls = [impact.ball(k) for k, impact in enumerate(impacts)]
    sim = SimulatedCobot(robot, make_trajectory(robot, MOTION), Scenario(forces=pushes,
                                                                          obstacles=balls))
    geoms = [mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_GEOM, OBSTACLE_PREFIX + b.name)
             for b in balls]
    for impact, geom in zip(impacts, geoms):
        sim.model.geom_solref[geom, 0] = impact.softness
    steps = int(seconds * RATE)
    out = {name: np.zeros((steps, size)) for name, size in
           (('q', robot.n), ('v', robot.n), ('tau', robot.n), ('wrench', 6), ('point', 3),
            ('force', 3))}
    out['link'], out['clouds'] = [''] * steps, {}
    for i in range(steps):
        for impact, ball, geom in zip(impacts, balls, geoms):  # in place only near its moment
            sim.model.geom_pos[geom] = ball.position if impact.placed(i / RATE) else PARKED
        sim.step()
        out['q'][i], out['v'][i], out['tau'][i] = sim.joint_state()
        out['wrench'][i] = np.concatenate(sim.ft_wrench())
        contacts = sim.true_contacts()
        if contacts:
            strongest = max(contacts, key=lambda c: np.linalg.norm(c.force))
            out['link'][i] = strongest.link
            out['point'][i], out['force'][i] = strongest.point, strongest.force
        if i % LIDAR_EVERY == 0:
            out['clouds'][i] = sim.lidar_points()
        if (i + 1) % 1000 == 0:
            progress(1)
    return out


def record(robot, count: int, seed: int, touches: bool) -> Recording:
    """`count` contacts on the sim cobot (with `touches`, hands' touches among them);
    impacts sized by two simulations' peaks (the softer the ball, the weaker the hit)."""
    surfaces = LinkSurfaces(robot, point_spacing=0.02)
    trajectory = make_trajectory(robot, MOTION)
    pushes, hands, impacts, seconds = plan(robot, surfaces, trajectory, count,
                                           np.random.default_rng(seed), touches)
    with tqdm(total=3 * int(seconds), unit='s', desc='simulating contacts') as bar:
        for sizing in (True, True, False):
            run = simulate(robot, pushes + hands, impacts, seconds, bar.update)
            for impact in impacts if sizing else ():
                near = slice(int((impact.time - LEAD) * RATE),
                             int((impact.time + IMPACT + 0.05) * RATE))
                peak = np.linalg.norm(run['force'][near], axis=1).max()
                impact.softness = float(np.clip(impact.softness * (
                    peak / impact.target if peak > 0 else 0.5), 0.004, 0.5))
    starts = sorted([(p.start, 'push') for p in pushes] + [(h.start, TOUCH) for h in hands]
                    + [(i.time - LEAD, 'impact') for i in impacts])
    size = np.linalg.norm(run['force'], axis=1)
    bounds = [int((s - 0.3) * RATE) for s, _ in starts] + [len(size)]
    contacts = []
    for (_, kind), begin, finish in zip(starts, bounds, bounds[1:]):
        touching = begin + np.flatnonzero(size[begin:finish] > ONSET_FORCE)
        if not touching.size:
            continue  # an impact whose ball the arm missed
        force_by_link = {}
        for i in touching:
            force_by_link[run['link'][i]] = force_by_link.get(run['link'][i], 0.0) + size[i]
        contacts.append(Truth(kind, max(force_by_link, key=force_by_link.get),
                              int(touching[0]), int(touching[-1]),
                              float(size[begin:finish].max()), (begin, finish)))
    stream = JointStream(robot, RATE, run['q'], run['v'], run['tau'], run['wrench'],
                         run['clouds'], fingers=False)
    return Recording(stream, run['link'], run['point'], run['force'], contacts)


# ---------------------------------------------------------------------- what the suite said
@dataclass
class Seen:
    """The stop, collision events and estimates of one run, live or replayed. Times (s):
    live, when received here (wall clock); replayed, the stamp being replayed. Stamps: ns."""

    stops: list[tuple[float, bool]] = field(default_factory=list)
    # time, stamp, cause, the contact's class decided then ('' none; touch.enabled) and the
    # stamp of its hold (f_S = 0: docs/collision_events.md `class.hold`; '' none)
    events: list[tuple[float, int, str, str, str]] = field(default_factory=list)
    halves: dict[str, dict] = field(default_factory=lambda: {label: {} for label in ESTIMATORS})

    def handlers(self, topic) -> dict[str, tuple[str, object]]:
        """Topic (as `topic(spec, key)` names it) → (message type, callback(msg, time))."""
        found = {topic(DETECTOR, 'stop'): (DETECTOR.message_type('stop'), self._stop),
                 topic(DETECTOR, 'events'): (DETECTOR.message_type('events'), self._event)}
        for label, spec in ESTIMATORS.items():
            for key in ('point', 'wrench'):
                found[topic(spec, key)] = (spec.message_type(key),
                                           lambda msg, t, h=(label, key): self._half(h, msg, t))
        return found

    def _stop(self, msg, t: float) -> None:
        self.stops.append((t, bool(msg.data)))

    def stop_came(self, event: float) -> float:
        """When the stop that a collision event received at `event` explains came: the stop
        topic's rise to True just before it (the detector publishes the stop first, then
        the event: a controller acts on the stop), else the event's own time (the stop was
        already raised, by another cause)."""
        risen = [t for (t, stop), (_, before) in zip(self.stops[1:], self.stops)
                 if stop and not before and event - EVENT_AFTER_STOP <= t <= event]
        return risen[-1] if risen else event

    def _event(self, msg, t: float) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            self.events.append((t, _ns(msg.header.stamp), values['event'],
                                values.get('class', ''), values.get('class.hold', '')))

    def _half(self, half: tuple[str, str], msg, t: float) -> None:
        label, key = half
        value = msg.point if key == 'point' else msg.wrench.force
        entry = self.halves[label].setdefault((_ns(msg.header.stamp), msg.header.frame_id), {})
        entry[key] = (t, np.array([value.x, value.y, value.z]))

    def estimates(self, label: str) -> list[tuple[int, float, Contact]]:
        """(stamp, time, estimate) of `label`'s estimates whose point and wrench both came."""
        return [(stamp, max(e['point'][0], e['wrench'][0]),
                 Contact(link, e['point'][1], e['wrench'][1]))
                for (stamp, link), e in self.halves[label].items() if len(e) == 2]

    @classmethod
    def from_bag(cls, path: str) -> 'Seen':
        seen = cls()
        handlers = seen.handlers(lambda spec, key: spec.resolved_topic(key))
        for topic, _, log_ns, msg in messages(path, list(handlers)):
            handlers[topic][1](msg, log_ns * 1e-9)
        return seen


# s: the longest a collision event may come after the stop it explains (both published on
# the same decision, the stop first).
EVENT_AFTER_STOP = 0.05


def _ns(stamp) -> int:
    return nanoseconds(stamp.sec, stamp.nanosec)


# ---------------------------------------------------------------------- live and replay
def plot_residual(topic: str, ready, stop, results) -> None:
    """A user's plot of the residual, in a process of its own: subscribes as rclpy's
    default (reliable, depth 10) and notes how late each residual arrives after its stamp.
    At normal priority, as a user's plot runs (a spawned process inherits this monitor's
    real-time priority: at SCHED_FIFO 45 it held the estimators off the CPU)."""
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    import rclpy

    from contact_estimation.ros.testing import ros_context
    with ros_context() as context:
        node = rclpy.create_node('residual_plot', context=context)
        lags = []
        node.create_subscription(message_class(RESIDUAL.message_type('residual')), topic,
                                 lambda msg: lags.append(time.time() - _ns(msg.header.stamp)
                                                         * 1e-9), 10)
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.05)
            if not ready.is_set() and node.count_publishers(topic):
                ready.set()
        results.put(np.array(lags))
        node.destroy_node()


@dataclass
class LiveRun:
    """A live run: what it saw, the driver's Run (stamps, CPU), the user's residual lags."""

    seen: Seen
    run: object
    lags: np.ndarray | None


def suite_processes(pid: int, timeout: float = 30.0) -> dict[str, int]:
    """The node processes `up` (pid) started, by the name they run under, once they run."""
    deadline = time.monotonic() + timeout
    while True:
        with open(f'/proc/{pid}/task/{pid}/children', encoding='ascii') as f:
            children = [int(p) for p in f.read().split()]
        names = {}
        for child in children:
            with open(f'/proc/{child}/cmdline', encoding='utf-8') as f:
                args = f.read().split('\0')
            if 'contact_estimation.nodes' in args:  # not still in chrt
                names[args[args.index('contact_estimation.nodes') + 1]] = child
        # every process `up` starts, not those started so far (one at a time)
        if len(names) == len(manifest.composed()) or time.monotonic() > deadline:
            return names
        time.sleep(0.1)


def live(recording: Recording, parameters: str, out: str, subscriber: bool,
         priority: str) -> LiveRun:
    """`contact-estimation up` with `parameters`, the recording played at 1 kHz by a
    real-time driver, the outputs heard here (and the residual by a user's plot)."""
    stream = recording.stream
    listener = manifest.node('joint_state_listener')
    topics = DriverTopics(listener.topic('joint_states'),
                          ESTIMATORS['F/T'].topic('ft_wrench'),
                          ESTIMATORS['localizer'].topic('lidar_points'))
    seen = Seen()
    outputs = [Output(message_class(kind), topic, callback,
                      STOP_QOS if topic in (DETECTOR.topic('stop'), DETECTOR.topic('events'))
                      else PIPELINE_QOS)
               for topic, (kind, callback) in seen.handlers(
                   lambda spec, key: spec.topic(key)).items()]
    command = [sys.executable, '-m', 'contact_estimation', 'up', '--config', parameters,
               '--log-dir', os.path.join(out, 'logs'), '--priority', priority]
    suite = subprocess.Popen(command)
    spawn = multiprocessing.get_context('spawn')
    ready, stop, results = spawn.Event(), spawn.Event(), spawn.Queue()
    plot = None
    try:
        if subscriber:
            plot = spawn.Process(target=plot_residual, daemon=True,
                                 args=(RESIDUAL.topic('residual'), ready, stop, results))
            plot.start()
            if not ready.wait(60.0):
                raise RuntimeError('the residual plot found no residual publisher')
        with tqdm(total=int(len(stream) / RATE), unit='s', desc=f'live, '
                  f'{SUBSCRIBER_RUNS[subscriber]}') as bar:
            run = drive({'up': suite}, suite_processes(suite.pid), stream, topics, outputs,
                        set(topics.__dict__.values()), len(stream) / RATE - SETTLE, SETTLE,
                        bar.update, os.path.join(out, 'logs'))
    finally:
        stop.set()
        lags = None
        if plot is not None:
            try:
                lags = results.get(timeout=30.0)
            except queue.Empty:
                pass
            plot.join(10.0)
        suite.send_signal(signal.SIGTERM)  # `up` stops its nodes as on Ctrl-C
        suite.wait(30.0)
    return LiveRun(seen, run, lags)



def write_inputs(robot, stream: JointStream, stamps: list[float], path: str) -> None:
    """What the driver published (the same messages of the same stamps) as a rosbag, each
    logged at its stamp."""
    from rclpy.serialization import serialize_message
    joint_states = manifest.node('joint_state_listener').resolved_topic('joint_states')
    others = {ESTIMATORS['F/T'].resolved_topic('ft_wrench'): (
        ESTIMATORS['F/T'].message_type('ft_wrench'), stream.wrench_message),
        ESTIMATORS['localizer'].resolved_topic('lidar_points'): (
        ESTIMATORS['localizer'].message_type('lidar_points'), stream.cloud_message)}
    remove_earlier_bag(path)
    with SuiteBag(path, robot) as bag:
        for i, now in enumerate(tqdm(stamps, desc='writing the inputs', leave=False)):
            stamp = seconds_to_stamp(now)
            ns = _ns(stamp)
            msg = stream.message(i, stamp)
            bag.write_joint_state(ns, ns, list(msg.name), msg.position, serialize_message(msg),
                                  joint_states)
            for topic, (kind, make) in others.items():
                msg = make(i, stamp)
                if msg is not None:
                    bag.write(topic, kind, ns, serialize_message(msg))


def replay(inputs: str, parameters: str, out: str) -> Seen:
    """`contact-estimation replay` of the inputs with the same parameters; what it said."""
    with open(os.path.join(out, 'replay.log'), 'w') as log:
        code = subprocess.run([sys.executable, '-m', 'contact_estimation', 'replay', inputs,
                               '--config', parameters, '--out', out], stdout=log,
                              stderr=subprocess.STDOUT).returncode
    if code:
        raise RuntimeError(f'replay failed ({code}): see {out}/replay.log')
    return Seen.from_bag(os.path.join(out, 'replay'))


# ---------------------------------------------------------------------- per contact
@dataclass
class Scored:
    """One contact in one run (live or its replay); times in s after the onset."""

    stop_stamp: int | None = None    # the sample (stamp, ns) that raised the stop
    stop: float = np.nan             # when the stop it raised came (`Seen.stop_came`)
    behind: bool = False             # a `behind` stop came in the slot before it
    first: dict[str, float] = field(default_factory=dict)      # estimator → first estimate
    first_sample: dict[str, float] = field(default_factory=dict)  # → the first one's sample
    errors: dict[str, list] = field(default_factory=dict)      # estimator → ContactErrors
    # class, stamp (ns), the hold's stamp (class.hold, s as sent; '' none)
    decisions: list[tuple[str, int, str]] = field(default_factory=list)
    decided: float = np.nan          # when the first decision's event came

    @property
    def kind(self) -> str:
        """The first class decided ('' none)."""
        return self.decisions[0][0] if self.decisions else ''


def score(seen: Seen, recording: Recording, stamps: np.ndarray) -> list[Scored]:
    """Every contact of the recording in one run; `stamps`: ns of each sample in it."""
    index = {stamp: i for i, stamp in enumerate(stamps)}
    estimates = {label: sorted(seen.estimates(label), key=lambda e: e[1]) for label in ESTIMATORS}
    result = []
    for truth in recording.contacts:
        begin, finish = stamps[truth.slot[0]], stamps[truth.slot[1] - 1]
        onset = stamps[truth.onset] * 1e-9
        scored = Scored()
        collisions = [(t, stamp) for t, stamp, cause, *_ in seen.events
                      if cause == COLLISION and begin <= stamp <= finish]
        decisions = sorted((stamp, t, kind, hold) for t, stamp, _, kind, hold in seen.events
                           if kind and begin <= stamp <= finish)
        scored.decisions = [(kind, stamp, hold) for stamp, _, kind, hold in decisions]
        if decisions:
            scored.decided = decisions[0][1] - onset
        if collisions:
            t, scored.stop_stamp = min(collisions, key=lambda c: c[1])
            scored.stop = seen.stop_came(t) - onset
        until = onset + (scored.stop if collisions else (finish - stamps[truth.onset]) * 1e-9)
        scored.behind = any(cause == BEHIND and begin * 1e-9 <= t <= until
                            for t, _, cause, *_ in seen.events)
        for label, found in estimates.items():
            mine = [(t, stamp, e) for stamp, t, e in found if stamps[truth.onset] <= stamp
                    <= finish]
            scored.first[label] = mine[0][0] - onset if mine else np.nan
            scored.first_sample[label] = mine[0][1] * 1e-9 - onset if mine else np.nan
            scored.errors[label] = [contact_error(e, recording.truth(index[stamp]))
                                    for _, stamp, e in mine if stamp in index
                                    and recording.truth(index[stamp]) is not None]
        result.append(scored)
    return result


def late(live: Scored, replayed: Scored) -> bool:
    """A live stop later than the replay's + MAX_LAG (or none) with no `behind` stop first."""
    if replayed.stop_stamp is None or live.behind:
        return False
    return live.stop_stamp is None or live.stop > replayed.stop + MAX_LAG


# ---------------------------------------------------------------------- report
def _ms(values, *percentiles) -> str:
    values = np.asarray([v for v in values if np.isfinite(v)])
    if not values.size:
        return '-'
    return ' / '.join(f'{1e3 * np.percentile(values, p):.0f}' for p in percentiles)


def _estimator(scored: list[Scored], label: str) -> str:
    errors = [e for s in scored for e in s.errors[label]]
    right = [e.point for e in errors if e.right_link]
    if not errors:
        return 'no estimate on a true contact'
    return (f'{len(right) / len(errors):.2f} of {len(errors)}, '
            f'{1e3 * np.median(right) if right else np.nan:.1f} mm, '
            f'{_ms([s.first[label] for s in scored], 50)} ms')


def _classes(scored: Scored) -> str:
    """The classes decided in a contact, in order ('-' none)."""
    return '→'.join(kind for kind, *_ in scored.decisions) or '-'


def _holds(scored: Scored) -> list[str]:
    """The hold samples the contact's decisions name."""
    return [hold for *_, hold in scored.decisions if hold]


def touch_report(recording: Recording, live_scored: list[Scored],
                 replayed: list[Scored]) -> list[tuple[str, str, str]]:
    """Rows (what, replay, live) of the classification live against its replay (--touch)."""
    kinds = [truth.kind for truth in recording.contacts]

    def per_kind(count) -> tuple[str, str]:
        return tuple(' / '.join(f'{count([s[k] for k, c in enumerate(kinds) if c == kind])}'
                                for kind in KINDS) for s in (replayed, live_scored))

    touches = [k for k, c in enumerate(kinds) if c == TOUCH]
    decided = [(lv, rp) for lv, rp in zip(live_scored, replayed) if lv.kind or rp.kind]
    both = [(lv, rp) for lv, rp in decided if lv.kind and rp.kind]
    hits = [(lv, rp) for lv, rp, c in zip(live_scored, replayed, kinds) if c != TOUCH
            and lv.stop_stamp is not None and rp.stop_stamp is not None]
    return [
        (f'contacts ({" / ".join(PLURAL[k] for k in KINDS)})', *(
            ' / '.join(str(kinds.count(k)) for k in KINDS),) * 2),
        ('  with a class decided (eq. 7 fired)', *per_kind(lambda s: sum(bool(x.kind) for x in s))),
        ('  classified touch first', *per_kind(lambda s: sum(x.kind == TOUCH for x in s))),
        ('  classified impact first', *per_kind(lambda s: sum(x.kind == IMPACT_CLASS for x in s))),
        ('touches yielded without a stop (of those decided)', *(
            f'{sum(s[k].kind != "" and s[k].stop_stamp is None for k in touches)} of '
            f'{sum(s[k].kind != "" for k in touches)}' for s in (replayed, live_scored))),
        ('the same class as the replay (first decision)', '',
         f'{sum(lv.kind == rp.kind for lv, rp in decided)} of {len(decided)}'),
        ('the same decision sample as the replay', '',
         f'{sum(lv.decisions[0][1] == rp.decisions[0][1] for lv, rp in both)} of {len(both)}'),
        ('the same hold sample as the replay (class.hold of its latch)', '',
         f'{sum(_holds(lv) == _holds(rp) for lv, rp in decided)} of {len(decided)}'),
        ('the same decisions (every class, sample and hold)', '',
         f'{sum(lv.decisions == rp.decisions for lv, rp in decided)} of {len(decided)}'),
        ('decision live − replay, p50 / p95 / max, ms', '',
         _ms([lv.decided - rp.decided for lv, rp in both], 50, 95, 100)),
        ('pushes and impacts stopped on the same sample as the replay', '',
         f'{sum(lv.stop_stamp == rp.stop_stamp for lv, rp in hits)} of {len(hits)}')]


def report(recording: Recording, live_run: LiveRun, live_scored: list[Scored],
           replayed: list[Scored], title: str) -> str:
    """The summary table (with the classification's, when a class was decided) and one row
    per contact."""
    kinds = [truth.kind for truth in recording.contacts]
    rows = []
    for kind in KINDS:
        pick = [k for k, c in enumerate(kinds) if c == kind]
        if not pick:
            continue
        cells = []
        for scored in (replayed, live_scored):
            stopped = [scored[k].stop for k in pick if scored[k].stop_stamp is not None]
            cells.append(f'{len(stopped)} of {len(pick)}, {_ms(stopped, 50, 95)} ms')
        rows.append((f'{PLURAL[kind]}: stopped, stop after onset p50 / p95', *cells))
    both = [(lv, rp) for lv, rp in zip(live_scored, replayed)
            if lv.stop_stamp is not None and rp.stop_stamp is not None]
    # The driver's last sample (wall time): its end is the input stopping, `stale_input`.
    streamed = max(live_run.run.stamps, default=np.inf)
    delays = [lv.stop - rp.stop for lv, rp in both]
    rows += [('the same stop sample as the replay', '',
              f'{sum(lv.stop_stamp == rp.stop_stamp for lv, rp in both)} of {len(both)}'),
             ('live − replay, p50 / p95 / max, ms', '', _ms(delays, 50, 95, 100)),
             (f'late: > replay + {MAX_LAG * 1e3:.0f} ms, no behind stop first', '',
              str(sum(late(lv, rp) for lv, rp in zip(live_scored, replayed)))),
             ('stops with no contact while the driver streamed: '
              + ' / '.join(f'`{c}`' for c in CAUSELESS), '',
              ' / '.join(str(sum(cause == c and t <= streamed
                                 for t, _, cause, *_ in live_run.seen.events))
                         for c in CAUSELESS))]
    for label in ESTIMATORS:
        rows.append((f'{label}: right link, point median, first estimate p50',
                     _estimator(replayed, label), _estimator(live_scored, label)))
        # Where the first estimate's delay goes: on a later sample, or later after its sample.
        rows.append((f'{label}: first estimate, its sample after the onset / came after its '
                     'sample, p50', *(
                         f'{_ms([x.first_sample[label] for x in scored], 50)} / '
                         f'{_ms([x.first[label] - x.first_sample[label] for x in scored], 50)}'
                         ' ms' for scored in (replayed, live_scored))))
    if live_run.lags is not None:
        rows.append(('the user\'s residual plot: received, lag p50 / p99 / max', '',
                     f'{live_run.lags.size}, {_ms(live_run.lags, 50, 99, 100)} ms'))
    if any(s.decisions for s in live_scored + replayed):
        rows += touch_report(recording, live_scored, replayed)
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    text = f'\n{title}\n' + table(
        f'{"":{width[0]}s} | {"replay (the oracle)":{width[1]}s} | live at 1 kHz',
        [f'{a:{width[0]}s} | {b:{width[1]}s} | {c}' for a, b, c in rows])
    per_contact = []
    for k, (truth, lv, rp) in enumerate(zip(recording.contacts, live_scored, replayed)):
        onset = live_run.run.stamps[truth.onset]
        shift = ('-' if lv.stop_stamp is None or rp.stop_stamp is None
                 else f'{(lv.stop_stamp - rp.stop_stamp) * 1e-6:+.0f}')
        decided = ('-' if not (lv.decisions and rp.decisions) else
                   f'{(lv.decisions[0][1] - rp.decisions[0][1]) * 1e-6:+.0f}')
        per_contact.append(
            f'{k:3d} | {truth.kind:6s} | {truth.link:11s} | {truth.peak:5.1f} | '
            f'{onset - live_run.run.stamps[0]:8.3f} | {1e3 * rp.stop:6.1f} | '
            f'{1e3 * lv.stop:6.1f} | {shift:>6s} | {1e3 * (lv.stop - rp.stop):+13.1f} | '
            f'{"yes" if lv.behind else "":6s} | {"LATE" if late(lv, rp) else "":4s} | '
            f'{_classes(rp):12s} | {_classes(lv):12s} | {decided:>7s}')
    text += ('\n\nper contact (ms after the onset; stop and decision sample: live − replay, ms '
             'of stamps; class: every class decided, in order)\n')
    return text + table('  k | kind   | link        |  F, N | onset, s | replay | live   | '
                        'sample | live − replay | behind | late | class replay | class live   | '
                        'decided', per_contact)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--contacts', type=int, default=60,
                        help='contacts (every third an impact, the others pushes)')
    parser.add_argument('--quick', action='store_true', help='6 contacts')
    runs = parser.add_mutually_exclusive_group()
    runs.add_argument('--subscriber', action='store_const', const=(True,), dest='runs',
                      help='only the run with the residual subscribed')
    runs.add_argument('--no-subscriber', action='store_const', const=(False,), dest='runs',
                      help='only the run without')
    parser.add_argument('--out', default='out/live_vs_replay', help='folder for the bags')
    parser.add_argument('--priority', default='auto', metavar='N',
                        help="`up --priority N`: what raises a stop at SCHED_FIFO N, below the "
                             "driver's 50; auto (up's default): 40 where allowed; 0: normal")
    parser.add_argument('--second-job', action='store_true',
                        help='another program taking one core at normal priority meanwhile')
    parser.add_argument('--seed', type=int, default=0, help='of the contacts drawn')
    parser.add_argument('--touch', action='store_true',
                        help='touch.enabled in both runs, and every third contact a hand\'s '
                             'touch instead of a push (issue 29)')
    args = parser.parse_args(argv)
    count = 6 if args.quick else args.contacts
    from contact_estimation.ros.testing import isolate_ros_domain
    isolate_ros_domain()  # before `up`: the suite and this process on a domain of their own
    print(f'machine: {machine()}')
    print('command: ' + ' '.join(sys.argv if argv is None else ['live_vs_replay.py', *argv]))
    os.makedirs(args.out, exist_ok=True)
    robot = RobotModel.load('panda')
    recording = record(robot, count, args.seed, args.touch)
    np.savez_compressed(
        os.path.join(args.out, 'recording.npz'), q=recording.stream.q, v=recording.stream.v,
        effort=recording.stream.effort, wrench=recording.stream.wrench,
        truth_link=np.array(recording.links), truth_point=recording.points,
        truth_force=recording.forces, contacts=np.array([
            (c.kind, c.link, c.onset, c.end, c.peak) for c in recording.contacts], dtype=object))
    parameters = os.path.join(args.out, 'parameters.yaml')
    write_parameters({RESIDUAL.name: residual_matching_the_sim(),
                      DETECTOR.name: {'hold_time': HOLD_TIME, 'touch.enabled': args.touch}},
                     parameters)
    kinds = [c.kind for c in recording.contacts]
    print(f'{len(recording.contacts)} contacts ('
          + ', '.join(f'{kinds.count(k)} {PLURAL[k]}' for k in KINDS[:3 if args.touch else 2])
          + '; peak '
          f'{min(c.peak for c in recording.contacts):.0f}-'
          f'{max(c.peak for c in recording.contacts):.0f} N) in '
          f'{len(recording.stream) / RATE:.0f} s on the sim cobot; driver at '
          f'SCHED_FIFO {REALTIME_PRIORITY} where allowed; suite: '
          f'contact-estimation up --config {parameters} --priority {args.priority}')
    for subscriber in args.runs or (False, True):
        out = os.path.join(args.out, SUBSCRIBER_RUNS[subscriber].replace(' ', '_'))
        os.makedirs(out, exist_ok=True)
        # This process hears the stops live as a controller would: real-time, below the
        # driver (at normal priority beside a second job it heard them up to 0.3 s late).
        with second_job(args.second_job), realtime(REALTIME_PRIORITY - 5) as monitor:
            print(f'live run: this monitor at {monitor}')
            live_run = live(recording, parameters, out, subscriber, args.priority)
        inputs = os.path.join(out, 'inputs')
        write_inputs(robot, recording.stream, live_run.run.stamps, inputs)
        replayed = replay(inputs, parameters, out)
        stamps = np.array([_ns(seconds_to_stamp(t)) for t in live_run.run.stamps])
        title = (f'live ({SUBSCRIBER_RUNS[subscriber]}; driver at {live_run.run.priority}) '
                 f'against its replay; inputs {inputs}')
        print(report(recording, live_run, score(live_run.seen, recording, stamps),
                     score(replayed, recording, stamps), title))
        print(f'\n{cpu_table(live_run.run)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
