"""What the demo sees of a scenario's people (issue 38, power and force limiting): the arm
brought inside the protective distance of a person's body part with no stop, and the
proximity monitor's `pfl` stop of a press over the part's limit; the verdict on them.

`PersonWatch` takes, as the demo monitor receives them, the simulator's joint states, the
proximity monitor's part statuses (`proximity/parts`), its stop and its force checks
(`contact_estimation/pfl`). The person is reached once, the arm moving, the monitor's status
of the person's part (core/sim/person.py `ScriptedPerson.part`) shows it inside its
protective distance (margin ≤ 0), where the separation rule would stop the arm (the arm may
start there: near the robot's base, a hand is within it). The verdict, on simulated
stamps, up to the scenario's first scripted force (the press):
- reached, and no true contact before the press (scene 1 shows no contact: at the Panda's
  ordinary speed a contact with a hand is an impact the detector rightly latches; the
  scenario file says why);
- no stop of either node while the arm moves to the part: from its first step to its rest
  there (or the press);
- the arm's approach speed toward the part while inside its protective distance (the joint
  states' speed of the arm's point nearest the part along the line to its centre; the
  person stands still) at most v_max of the part's region at the arm's effective mass there
  (core/contact/pfl.py), reported against it;
then no check over a limit before the press, and the `pfl` stop it raises, with its reason
(region, force, limit).
"""
from __future__ import annotations

import numpy as np

from contact_estimation.core.chain.input_gate import CAUSES as GATE_CAUSES
from contact_estimation.core.contact.pfl import (BODY_REGIONS, effective_mass,
                                                 permissible_speed)
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.sim.scenario import Scenario
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.nodes.proximity_monitor import INPUT, NEAR, PFL
from contact_estimation.ros.diagnostics import ERROR, level_byte

# Joint states the approach speed is computed on, at most one per this many s of stamps.
_APPROACH_STEP = 0.005
MOVED = 0.01  # rad of a joint from where the arm stood: it has started its path
RESTING = 0.02  # rad/s: every joint slower, the arm has come to rest
# The proximity monitor's stop causes, counted on its /diagnostics (nodes/proximity_monitor.py).
CAUSES = (*GATE_CAUSES, INPUT, NEAR, PFL)
# s: the press's first true contact may be stamped this much before its scripted start
# (clock_start has µs, the simulator's steps ms).
_STAMP_TOLERANCE = 0.001


class PersonWatch:
    """The demo monitor's view of the scenario's person (module doc; the first of its
    people). `robot`: the arm as the simulator runs it (with the scenario's payload)."""

    def __init__(self, scenario: Scenario, robot: RobotModel):
        self.robot = robot
        self.person = scenario.people[0]
        self.region = BODY_REGIONS[self.person.region]
        self._status_name = f'proximity/{self.person.part}'
        self._force_starts = sorted(f.start for f in scenario.forces)
        self.clock_start = 0.0  # the stamp of simulated time 0 (sim_cobot's /diagnostics)
        # stamp → q, q̇, receive time
        self.joint_states: dict[float, tuple[np.ndarray, np.ndarray, float]] = {}
        self._stood: np.ndarray | None = None  # where the arm stood: its first joint state
        self.moved = np.inf  # the stamp of the first one MOVED (rad) from there: it moves
        # The monitor's status of the part: (stamp, receive time, distance, margin,
        # protective distance).
        self.part_statuses: list[tuple[float, float, float, float, float]] = []
        self.checks: list[tuple[float, dict[str, str], str]] = []  # stamp, values, reason
        self.stop_changes: list[tuple[float, bool]] = []  # the proximity stop: receive, value
        self.stop_reasons: list[tuple[float, str]] = []  # receive time, the monitor's reason
        self.pfl_stop: tuple[float, str] | None = None  # its first stop for pfl: receive, reason
        self.stop_counts: list[tuple[float, dict[str, int]]] = []  # receive time, by cause

    @property
    def press(self) -> float:
        """The stamp of the scenario's first scripted force (inf without one)."""
        return self.clock_start + (self._force_starts[0] if self._force_starts else np.inf)

    def on_joint_state(self, now: float, msg) -> None:
        stamp, q = stamp_to_seconds(msg.header.stamp), np.array(msg.position)
        self.joint_states[stamp] = (q, np.array(msg.velocity), now)
        if self._stood is None:
            self._stood = q
        elif self.moved == np.inf and np.max(np.abs(q - self._stood)) >= MOVED:
            self.moved = stamp

    def on_parts(self, now: float, msg) -> bool:
        """The monitor's part statuses: True once the person's part is inside its protective
        distance."""
        for status in msg.status:
            if status.name == self._status_name:
                values = {kv.key: kv.value for kv in status.values}
                self.part_statuses.append(
                    (stamp_to_seconds(msg.header.stamp), now, float(values['distance']),
                     float(values['margin']), float(values['protective_distance'])))
        return self.reached() is not None

    def reached(self) -> tuple[float, float, float, float, float] | None:
        """The first status of the part inside its protective distance once the arm moves,
        before the press."""
        return next((s for s in self.part_statuses
                     if s[3] <= 0.0 and self.moved <= s[0] < self.press), None)

    def on_check(self, msg) -> None:
        """A force check of the proximity monitor."""
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            self.checks.append((stamp_to_seconds(msg.header.stamp), values, status.message))

    def on_stop(self, now: float, stop: bool) -> None:
        self.stop_changes.append((now, stop))

    def on_status(self, now: float, status) -> bool:
        """The proximity monitor's /diagnostics status, its reason while stopped and its
        stops counted by cause: True once it says it stopped for pfl."""
        self.stop_counts.append((now, {kv.key: int(kv.value) for kv in status.values
                                       if kv.key in CAUSES and kv.value.isdigit()}))
        if status.level == level_byte(ERROR):
            self.stop_reasons.append((now, status.message))
            if status.message.startswith(f'{PFL}:') and self.pfl_stop is None:
                self.pfl_stop = (now, status.message)
        return self.pfl_stop is not None

    def stop_causes(self, start: float, end: float) -> str:
        """The proximity monitor's stops counted between the receive times `start` and `end`
        by cause (its /diagnostics counts, from its last status before `start` to its first
        after `end`), and its reasons while stopped then."""
        before = next((c for t, c in reversed(self.stop_counts) if t <= start), {})
        after = next((c for t, c in self.stop_counts if t >= end),
                     self.stop_counts[-1][1] if self.stop_counts else {})
        causes = [f'{cause} {after[cause] - before.get(cause, 0)}' for cause in after
                  if after[cause] > before.get(cause, 0)]
        reasons = sorted({text for t, text in self.stop_reasons if start <= t <= end + 1.0})
        return (f'stops counted: {", ".join(causes) or "none yet"}'
                + (f'; its reasons: {"; ".join(reasons)}' if reasons else ''))

    # ------------------------------------------------------------------ verdict
    def approach(self, start: float, end: float) -> tuple[float, float, float] | None:
        """The arm's approach to the part over the joint states stamped in [start, end): the
        largest share of v_max, with its (approach speed m/s, v_max m/s), and the nearest
        the arm's surface came to the part (m); None without joint states there."""
        surfaces = LinkSurfaces(self.robot)
        points = {link: surfaces.surface_points(link)[0] for link in surfaces.links}
        centre = self.person.position
        worst, nearest, last = (-np.inf, 0.0, np.inf), np.inf, -np.inf  # share, speed, v_max
        for stamp in sorted(t for t in self.joint_states if start <= t < end):
            if stamp - last < _APPROACH_STEP:
                continue
            last = stamp
            q, v, _ = self.joint_states[stamp]
            link, local, point = min(
                ((link, local, point) for link, (rotation, origin) in
                 zip(surfaces.links, self.robot.link_poses(q, surfaces.links))
                 for local, point in [_nearest(points[link], rotation, origin, centre)]),
                key=lambda item: np.linalg.norm(centre - item[2]))
            distance = float(np.linalg.norm(centre - point))
            nearest = min(nearest, distance - self.person.radius)
            toward = (centre - point) / distance
            speed = float(self.robot.point_jacobian(q, link, local) @ v @ toward)
            v_max = permissible_speed(self.region,
                                      effective_mass(self.robot, q, link, point, toward))
            worst = max(worst, (speed / v_max, speed, v_max))
        if not np.isfinite(nearest):
            return None
        return worst[1], worst[2], nearest

    def verdict(self, contact_spans: list, detector_stops: list) -> tuple[str, bool]:
        """The verdict (module doc) from the true contacts ([onset stamp, receive time, end
        stamp, receive time]) and the detector's latched stops (stamp, cause, message)."""
        part = f'the {self.person.part} ({self.region.name})'
        reached = self.reached()
        if reached is None:
            nearest = min((s[3] for s in self.part_statuses), default=np.inf)
            return (f'verdict: FAILED: the arm never came inside the protective distance of '
                    f'{part} before the press (smallest margin {nearest:.3f} m)'), False
        stamp, reached_at, _, _, protective = reached
        press, at = self.press, self.clock_start
        touched = [span for span in contact_spans if span[0] < press - _STAMP_TOLERANCE]
        if touched:
            return (f'verdict: FAILED: a contact at {touched[0][0] - at:.3f} s (simulated), '
                    f'before the press at {press - at:.3f} s: this scene shows none'), False
        press_received = next((span[1] for span in contact_spans
                               if span[0] >= press - _STAMP_TOLERANCE), np.inf)
        # While the arm moves to the part: from its first step to its rest there (or the press).
        rest = next((t for t in sorted(self.joint_states) if stamp <= t < press
                     and np.max(np.abs(self.joint_states[t][1])) < RESTING), press)
        moved_at = self.joint_states[self.moved][2]
        rest_at = self.joint_states[rest][2] if rest in self.joint_states else press_received
        early = [stop for stop in detector_stops if self.moved <= stop[0] <= rest]
        if early:
            return (f'verdict: FAILED: the collision detector stopped at {early[0][0] - at:.3f} '
                    f's (simulated), while the arm moved to {part} ({early[0][1]}: '
                    f'{early[0][2]})'), False
        then = [stop for t, stop in self.stop_changes if t <= moved_at]
        raised = [t for t, stop in self.stop_changes if stop and moved_at < t <= rest_at]
        if not then or then[-1] or raised:
            return ('verdict: FAILED: the proximity monitor stopped the arm while it moved to '
                    f'{part} ({self.stop_causes(moved_at, rest_at)})'), False
        approach = self.approach(stamp, press)
        if approach is None:
            return 'verdict: FAILED: no joint states between the reach and the press', False
        speed, v_max, nearest = approach
        shown = (f'{part} inside its protective distance from {stamp - at:.3f} s (simulated; '
                 f'S_p {protective:.2f} m, where separation monitoring stops the arm), the arm '
                 f'at most {speed:.2f} m/s toward it there (v_max {v_max:.2f} m/s), nearest '
                 f'{nearest * 1e3:.0f} mm, no contact, no stop while it moved there (at rest '
                 f'from {rest - at:.3f} s)')
        if speed > v_max:
            return f'verdict: FAILED: {shown}: faster than v_max', False
        over = [(t, reason) for t, values, reason in self.checks if values.get('over') == 'True']
        if over and over[0][0] < press:
            return (f'verdict: FAILED: {shown}; a check over its limit before the press at '
                    f'{press - at:.3f} s: {over[0][1]}'), False
        if not over:
            largest = max(self.checks, key=lambda check: float(check[1].get('margin', 0)),
                          default=(0.0, {}, 'none'))
            return (f'verdict: FAILED: {shown}; no contact stopped pfl ({len(self.checks)} '
                    f'checks, the largest share of its limit: {largest[2]})'), False
        if self.pfl_stop is None or self.pfl_stop[0] < press_received:
            return (f'verdict: FAILED: {shown}; the check over its limit ({over[0][1]}) raised '
                    'no stop pfl'), False
        return (f'verdict: {shown}; the press at {press - at:.3f} s stopped the arm '
                f'{(over[0][0] - press) * 1e3:.0f} ms after its start: {self.pfl_stop[1]}'), True


def _nearest(points: np.ndarray, rotation: np.ndarray, origin: np.ndarray,
             centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The point of `points` (a link's, in its frame, posed at rotation, origin) nearest
    `centre` (base frame): in the link frame and in the base frame."""
    posed = points @ rotation.T + origin
    k = int(np.argmin(np.linalg.norm(posed - centre, axis=1)))
    return points[k], posed[k]
