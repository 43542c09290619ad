"""What the demo sees of a scenario's people (issue 38, power and force limiting): the arm
reaching a person's body part, and the proximity monitor's `pfl` stop; the verdict on them.

`PersonWatch` takes, as the demo monitor receives them, the simulator's joint states and true
contacts, the proximity monitor's stop and its force checks (`contact_estimation/pfl`). The
person's contact is the first true contact while no scripted force acts (the scenario's
people are its only solids besides its obstacles). The verdict (`verdict`), on simulated
stamps: no stop of either node before that contact; the arm's approach speed at it (its
contact point's velocity along the contact's normal, the person still) at most v_max of the
part's region at the arm's effective mass there (core/contact/pfl.py); the true peak force
within `transient_time` of its onset against the region's transient limit; no check over a
limit before the scripted force that is meant to be over; then the `pfl` stop, with its
reason (region, force, limit).
"""
from __future__ import annotations

import numpy as np

from contact_estimation.core.contact.pfl import (BODY_REGIONS, PflConfig, effective_mass,
                                                 permissible_speed)
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.scenario import Scenario
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.diagnostics import ERROR, level_byte

# How far (s) a joint state's stamp may be from the contact's onset to give its speed.
_NEAREST = 0.002


class PersonWatch:
    """The demo monitor's view of the scenario's people (module doc). `robot`: the arm as
    the simulator runs it (with the scenario's payload)."""

    def __init__(self, scenario: Scenario, robot: RobotModel):
        self.robot = robot
        self.regions = [person.region for person in scenario.people]
        self._windows = [(f.start, f.start + f.duration) for f in scenario.forces]
        self.clock_start = 0.0  # the stamp of simulated time 0 (sim_cobot's /diagnostics)
        self.joint_states: dict[float, tuple[np.ndarray, np.ndarray]] = {}  # stamp → q, q̇
        self.onset: tuple[float, float] | None = None  # the person's contact: stamp, receive
        self.checks: list[tuple[float, dict[str, str], str]] = []  # stamp, values, reason
        self.stop_changes: list[tuple[float, bool]] = []  # the proximity stop: receive, value
        self.stop_reason = ''   # the proximity monitor's latest reason while stopped

    def scripted(self, stamp: float) -> bool:
        """Whether a scripted force acts at `stamp` (the scenario's times: simulated s)."""
        t = stamp - self.clock_start
        return any(start <= t <= end for start, end in self._windows)

    def on_joint_state(self, msg) -> None:
        self.joint_states[stamp_to_seconds(msg.header.stamp)] = (np.array(msg.position),
                                                                 np.array(msg.velocity))

    def on_contact_onset(self, stamp: float, now: float) -> bool:
        """A true contact began at `stamp`: True when it is the person's (the first one
        while no scripted force acts)."""
        if self.onset is None and self.regions and not self.scripted(stamp):
            self.onset = (stamp, now)
            return True
        return False

    def on_check(self, msg) -> bool:
        """A force check of the proximity monitor: True when it is over its limit."""
        over = False
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            self.checks.append((stamp_to_seconds(msg.header.stamp), values, status.message))
            over |= values.get('over') == 'True'
        return over

    def on_stop(self, now: float, stop: bool) -> None:
        self.stop_changes.append((now, stop))

    def on_status(self, status) -> None:
        """The proximity monitor's /diagnostics status: its reason while stopped."""
        if status.level == level_byte(ERROR):
            self.stop_reason = status.message

    # ------------------------------------------------------------------ verdict
    def approach(self, contact) -> tuple[float, float] | None:
        """(approach speed m/s, v_max m/s) of the arm at the person's contact `contact`
        (the truth at its onset: link, point and force on the robot in the link frame);
        None without a joint state of its stamp."""
        stamp = self.onset[0]
        nearest = min(self.joint_states, key=lambda t: abs(t - stamp), default=None)
        if nearest is None or abs(nearest - stamp) > _NEAREST:
            return None
        q, v = self.joint_states[nearest]
        rotation, origin = self.robot.link_pose(q, contact.link)
        toward = -(rotation @ contact.force) / np.linalg.norm(contact.force)  # into the part
        velocity = self.robot.point_jacobian(q, contact.link, contact.point) @ v
        mass = effective_mass(self.robot, q, contact.link, rotation @ contact.point + origin,
                              toward)
        return float(velocity @ toward), permissible_speed(BODY_REGIONS[self.regions[0]], mass)

    def verdict(self, truth: dict, detector_stops: list) -> tuple[str, bool]:
        """The verdict (module doc) from the true contacts by stamp (`truth`) and the
        detector's latched stops (stamp, cause, message)."""
        if self.onset is None:
            return 'verdict: FAILED: the arm never reached the person while the demo watched', False
        stamp, received = self.onset
        early = [stop for stop in detector_stops if stop[0] < stamp]
        if early:
            return (f'verdict: FAILED: the collision detector stopped at {early[0][0]:.3f} s, '
                    f'before the arm reached the person at {stamp:.3f} s ({early[0][1]}: '
                    f'{early[0][2]})'), False
        cleared = next((i for i, (_, stop) in enumerate(self.stop_changes) if not stop), None)
        raised = [at for at, stop in self.stop_changes[cleared or 0:] if stop and at < received]
        if cleared is None or raised:
            return ('verdict: FAILED: the proximity monitor stopped before the arm reached '
                    f'the person ({self.stop_reason or "never cleared its start-up stop"})'), False
        region = BODY_REGIONS[self.regions[0]]
        speeds = self.approach(truth[stamp])
        if speeds is None:
            return 'verdict: FAILED: no joint state of the contact\'s stamp', False
        approach, v_max = speeds
        transient = PflConfig().transient_time
        peak = max(float(np.linalg.norm(c.force)) for t, c in truth.items()
                   if stamp <= t < stamp + transient)
        reached = (f'the {region.name} reached at {stamp - self.clock_start:.3f} s (simulated) '
                   'with no stop before it, at '
                   f'{approach:.2f} m/s toward it (v_max {v_max:.2f} m/s), true peak force '
                   f'{peak:.0f} N (transient limit {region.transient_force:.0f} N)')
        if approach > v_max:
            return f'verdict: FAILED: {reached}: faster than v_max', False
        push = self.clock_start + min((start for start, _ in self._windows), default=np.inf)
        over = [(t, reason) for t, values, reason in self.checks if values.get('over') == 'True']
        if over and over[0][0] < push:
            return (f'verdict: FAILED: {reached}; a check over its limit before the scripted '
                    f'force at {push - self.clock_start:.3f} s: {over[0][1]}'), False
        if not over:
            largest = max(self.checks, key=lambda check: float(check[1].get('margin', 0)),
                          default=(0.0, {}, 'none'))
            return (f'verdict: FAILED: {reached}; no contact stopped pfl ({len(self.checks)} '
                    f'checks, the largest share of its limit: {largest[2]})'), False
        if not any(stop for at, stop in self.stop_changes if at >= received):
            return f'verdict: FAILED: {reached}; the check over its limit raised no stop', False
        return (f'verdict: {reached}; the scripted force at {push - self.clock_start:.3f} s '
                f'stopped the arm '
                f'{(over[0][0] - push) * 1e3:.0f} ms after its start: pfl: {over[0][1]}'), True
