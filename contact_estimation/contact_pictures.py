"""Pictures of a recording's contacts (suite_bag.py → core/sim/render.py): for each contact,
a PNG and a GIF animation of the arm as it was, the simulator's true contact (sim_cobot's
true_contact_*) beside the estimates of the contact localizer (contact_estimate/*) and of
the F/T estimator (contact_estimate/ft/*), with their links and errors, on the topics of
nodes.yaml in the namespace the recording's suite ran in. Without ground truth (a real
arm's bag), the estimates alone. Where the proximity monitor checked the contact against its
body region's force limit (its `pfl` topic, issue 38), a sphere at the checked point in the
colour of its margin (force / limit: green, yellow at half, red at and over the limit, as
rviz shows it), with a colour bar and a table line (region, force, limit, over or not).

A contact is a run of stamps with a true contact (or, without truth, with an estimate) no
more than `GAP` apart; its picture is at the localizer estimate nearest the middle of the run.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contact_estimation import manifest
from contact_estimation.core.chain.joint_order import JointOrder
from contact_estimation.core.contact.contact import Contact, contact_error
from contact_estimation.core.contact.pfl import margin_rgb
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.ros.contact_messages import ContactPairs
from contact_estimation.suite_bag import messages, recorded_namespace, stamp_ns

GAP = 1.0           # s between stamps that ends a contact (a loaded simulator skips time)
MATCH = 0.02        # s: an estimate this near in stamp belongs to the pictured instant
MAX_PICTURES = 6
ANIMATION_FRAMES = 30
ANIMATION_HOLD = 0.1  # s an estimate stays drawn in an animation
PFL_RADIUS = 0.045  # m: the sphere of a power and force limit check, around the point
PFL_ALPHA = 0.55
SOURCES = {  # label → (node, its point topic's key, its wrench topic's key), truth first
    'truth': ('sim_cobot', 'true_contact_point', 'true_contact_wrench'),
    'localizer': ('contact_localizer', 'point', 'wrench'),
    'F/T': ('ft_contact_estimator', 'point', 'wrench'),
}


def source_topics(label: str, namespace: str = '') -> tuple[str, str]:
    """The point and wrench topics of SOURCES[`label`] in `namespace`."""
    node, point, wrench = SOURCES[label]
    return manifest.topic(node, point, namespace), manifest.topic(node, wrench, namespace)


@dataclass(frozen=True)
class PflMark:
    """One power and force limit check of a contact estimate (ros/pfl_messages.pfl_status):
    `point` in the frame of `link`; `margin` = force / limit."""

    link: str
    point: np.ndarray
    margin: float
    force: float
    limit: float
    region: str
    phase: str
    over: bool

    @classmethod
    def of(cls, status) -> 'PflMark':
        """From the status on the proximity monitor's `pfl` topic (rclpy's or a bag's)."""
        values = {kv.key: kv.value for kv in status.values}
        return cls(values['frame'], np.array([float(values[axis]) for axis in 'xyz']),
                   float(values['margin']), float(values['force']), float(values['limit']),
                   values['region'], values['phase'], values['over'] == 'True')


@dataclass
class BagContacts:
    """A bag's joint positions, contacts and power and force limit checks, by stamp (s)."""

    joint_names: list[str] = field(default_factory=list)
    positions: dict[float, np.ndarray] = field(default_factory=dict)
    contacts: dict[str, dict[float, Contact]] = field(default_factory=dict)
    pfl: dict[float, PflMark] = field(default_factory=dict)

    @classmethod
    def read(cls, bag: str | os.PathLike, namespace: str | None = None) -> 'BagContacts':
        """The contacts `bag` recorded of the suite in `namespace` (None: the recording's,
        suite_bag.recorded_namespace)."""
        if namespace is None:
            namespace = recorded_namespace(bag)
        joint_states = manifest.topic('joint_state_listener', 'joint_states', namespace)
        pfl = manifest.topic('proximity_monitor', 'pfl', namespace)
        found = cls()
        pairs = {}
        for label in SOURCES:
            found.contacts[label] = {}
            pairs.update(dict.fromkeys(source_topics(label, namespace),
                                       (label, ContactPairs())))
        for topic, _, _, msg in messages(bag, [joint_states, pfl, *pairs]):
            if topic == joint_states:
                stamp = stamp_ns(msg) * 1e-9
                found.joint_names = found.joint_names or list(msg.name)
                found.positions[stamp] = np.array(msg.position, dtype=float)
                continue
            if topic == pfl:
                found.pfl.update((stamp_ns(msg) * 1e-9, PflMark.of(s)) for s in msg.status)
                continue
            label, pairing = pairs[topic]
            paired = pairing.add(msg)
            if paired is not None:
                found.contacts[label][paired[0]] = paired[1]
        return found

    def q(self, robot: RobotModel, stamp: float) -> np.ndarray | None:
        """The joint angles (robot's joint order) of the joint state nearest `stamp`."""
        order = JointOrder(robot.joint_names).map(self.joint_names).model_order
        if not self.positions or order is None:
            return None
        nearest = min(self.positions, key=lambda s: abs(s - stamp))
        return self.positions[nearest][order]

    def episodes(self) -> list[list[float]]:
        """The stamps of each contact (truth if the bag has it, else any estimate)."""
        basis = self.contacts['truth'] or {**self.contacts['F/T'], **self.contacts['localizer']}
        runs: list[list[float]] = []
        for stamp in sorted(basis):
            if runs and stamp - runs[-1][-1] <= GAP:
                runs[-1].append(stamp)
            else:
                runs.append([stamp])
        return runs

    def at(self, label: str, stamp: float, within: float = MATCH
           ) -> tuple[float, Contact] | None:
        """`label`'s contact nearest `stamp`, if it is `within` s of it."""
        return _nearest(self.contacts[label], stamp, within)


def _nearest(by_stamp: dict, stamp: float, within: float) -> tuple[float, object] | None:
    """(stamp, value) of `by_stamp` nearest `stamp`, if it is `within` s of it."""
    if not by_stamp:
        return None
    nearest = min(by_stamp, key=lambda s: abs(s - stamp))
    return (nearest, by_stamp[nearest]) if abs(nearest - stamp) <= within else None


def _instant(found: BagContacts, run: list[float]) -> float:
    """The stamp to draw a contact at: the localizer's estimate nearest its middle (else the
    F/T estimator's, else the middle)."""
    middle = run[len(run) // 2]
    for label in ('localizer', 'F/T'):
        stamps = [s for s in found.contacts[label] if run[0] - MATCH <= s <= run[-1] + MATCH]
        if stamps:
            return min(stamps, key=lambda s: abs(s - middle))
    return middle


def _describe(label: str, contact: Contact, truth: Contact | None, offset: float) -> str:
    size = np.linalg.norm(contact.force)
    line = f'{label:9s} {contact.link:12s} |F| {size:5.1f} N'
    if label == 'truth' or truth is None:
        return line
    error = contact_error(contact, truth)
    when = f'   (stamp {offset * 1e3:+.0f} ms)' if abs(offset) > 5e-4 else ''
    if not error.right_link:
        return f'{line}   WRONG LINK (true: {truth.link}){when}'
    return (f'{line}   point {error.point * 1e3:5.1f} mm off, |F| {error.force * 100:4.1f} % '
            f'off, direction {np.degrees(error.direction):4.1f}° off{when}')


def _arrows(found: BagContacts, robot: RobotModel, q: np.ndarray, stamp: float,
            within: float = MATCH) -> tuple[list, list[str], list[str]]:
    """The truth and each estimate nearest `stamp` (within `within` s) as render Arrows in
    the base frame, and the power and force limit check nearest it as a sphere coloured by
    its margin; a table line for each (links, errors; region, limit) and a caption of each
    for an animation."""
    from contact_estimation.core.sim.render import ESTIMATE_RGBA, TRUTH_RGBA, Arrow
    truth = found.at('truth', stamp, within)
    arrows, table, captions = [], [], []
    for (label, _), rgba in zip(SOURCES.items(), (TRUTH_RGBA, *ESTIMATE_RGBA)):
        entry = found.at(label, stamp, within)
        if entry is None:
            if label != 'truth' or found.contacts['truth']:
                table.append(f'{label:9s} none within {within * 1e3:.0f} ms')
            continue
        at, contact = entry
        rotation, translation = robot.link_pose(q, contact.link)
        arrows.append(Arrow(label, rotation @ contact.point + translation,
                            rotation @ contact.force, rgba))
        captions.append(f'{label}: {contact.link} {np.linalg.norm(contact.force):.0f} N')
        table.append(_describe(label, contact, truth and truth[1], at - stamp))
    checked = _nearest(found.pfl, stamp, within)
    if checked is not None:
        mark = checked[1]
        rotation, translation = robot.link_pose(q, mark.link)
        arrows.append(Arrow(f'PFL {mark.margin:.0%}', rotation @ mark.point + translation,
                            np.zeros(3), (*margin_rgb(mark.margin), PFL_ALPHA), PFL_RADIUS))
        captions.append(f'PFL {mark.margin:.0%} of {mark.limit:.0f} N')
        table.append(f'{"PFL":9s} {mark.link:12s} |F| {mark.force:5.1f} N = '
                     f'{mark.margin:.0%} of the {mark.phase} limit of {mark.region}, '
                     f'{mark.limit:.0f} N' + (': OVER, stop pfl' if mark.over else ''))
    return arrows, table, captions


def _animation_frames(found: BagContacts, robot: RobotModel, run: list[float],
                      start: float) -> list[tuple]:
    """Up to ANIMATION_FRAMES (q, arrows, caption) evenly over a contact, the estimates of
    the last ANIMATION_HOLD s (as a viewer keeps a marker shown)."""
    frames = []
    for stamp in np.linspace(run[0], run[-1], ANIMATION_FRAMES):
        q = found.q(robot, stamp)
        arrows, _, captions = _arrows(found, robot, q, stamp, ANIMATION_HOLD)
        caption = f'{stamp - start:6.2f} s  ' + '  '.join(captions)
        frames.append((q, arrows, caption))
    return frames


def draw(bag: str | os.PathLike, out_dir: str | os.PathLike, robot: RobotModel,
         obstacles=(), prefix: str = 'contact') -> tuple[list[Path], str]:
    """Draw each contact of `bag` (at most MAX_PICTURES) as `out_dir/<prefix>_<k>.png` and an
    animation of it, `<prefix>_<k>.gif`; returns the files and, when none could be drawn,
    why."""
    from contact_estimation.core.sim.render import (ColourScale, render_unavailable,
                                                    save_contact_animation,
                                                    save_contact_picture)
    reason = render_unavailable()
    if reason:
        return [], reason
    found = BagContacts.read(bag)
    runs = found.episodes()
    if not runs:
        return [], 'no contact in the recording'
    start = min(found.positions) if found.positions else runs[0][0]
    scale = (ColourScale('PFL margin: force / body region limit (red: at or over it)',
                         margin_rgb)
             if found.pfl else None)
    paths = []
    for k, run in enumerate(runs[:MAX_PICTURES], start=1):
        stamp = _instant(found, run)
        q = found.q(robot, stamp)
        if q is None:
            return paths, f'no joint states of {robot.joint_names} in the recording'
        arrows, table, _ = _arrows(found, robot, q, stamp)
        path = Path(out_dir, f'{prefix}_{k}.png')
        title = (f'contact {k} ({run[0] - start:.2f}-{run[-1] - start:.2f} s), at '
                 f'{stamp - start:.3f} s: force on the robot, arrow ending at its point')
        save_contact_picture(str(path), robot, q, arrows, title, table, obstacles, scale)
        animation = path.with_suffix('.gif')
        save_contact_animation(str(animation), robot, _animation_frames(found, robot, run,
                                                                        start), obstacles)
        paths += [path, animation]
    return paths, ''


def summary(bag: str | os.PathLike, out_dir: str | os.PathLike, robot: RobotModel,
            obstacles=()) -> str:
    """`draw`, and one line for a command's printout that names the pictures or says why
    there are none."""
    try:
        paths, reason = draw(bag, out_dir, robot, obstacles)
    except Exception as err:  # noqa: BLE001 - a failed picture must not fail the run
        paths, reason = [], f'drawing failed: {type(err).__name__}: {err}'
    if not paths:
        return f'contact pictures: none: {reason}'
    return 'contact pictures: ' + ', '.join(map(str, paths)) + (f' ({reason})' if reason else '')
