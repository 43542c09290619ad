"""Power and force limiting (issue 38) on the simulated cobot, ROS-free: the true contact force
on compliant body parts against ISO/TS 15066's limits, with and without the speed limit, and
the online force check (estimated force against the truth).

The body parts (core/contact/pfl.py, BODY_REGIONS): hand, lower arm, chest, thigh, a sphere
of 4, 4, 12, 8 cm under the Panda's gripper, touched by the arm descending onto it (the hand's
fingers lead). Each contact is MuJoCo's soft contact in its direct form, frictionless
(condim 1): solref = (−k/μ, −b/μ), solimp d = 0.99 flat. MuJoCo's solref is a reference
acceleration, not a force: the contact force is μ (k_in r + b_in ṙ) with μ the reduced mass
its constraint sees (1/μ = 1/m_R + 1/m_H, m_R the arm's mass at the contact point along the
approach, `pfl.effective_mass`), so k_in = k/μ makes it a spring of the region's k (N/m)
between the arm and the part; b: a damping ratio of 0.1 in the contact's own oscillation.
`calibration` checks it: the peak force of a free collision against v √(μ k).

1. Impacts: the part is a free body of mass m_H sliding along the approach (gravity
   compensated: a person holds it), held at its place by a spring of 1 Hz (ζ = 0.5). The arm
   approaches it at 0.2-1 m/s (a constant joint velocity that moves the flange straight down
   at the contact, after a 0.25 s smooth start), the suite's reaction in the loop (momentum
   observer → CollisionDetector, ψ_0 = 4 N·m → TimeScaling's f_S, as core/sim/harness.py).
   With the speed limit, every 10 ms (the proximity check's 100 Hz) the robot sphere with the
   smallest margin to the part (LinkSurfaces, as the proximity monitor) gives v_max =
   `permissible_speeds` at its centre along the direction to the part, and
   `approach_speed_scale` the scale of the planned (unscaled) reference that keeps the
   sphere's approach ≤ v_max; the reference's time scaling is the smaller of it and f_S (the
   monitor's limit from halfway into its warning zone on, w = 1; its protective-distance stop
   is left out: it would stop the arm before any contact, this measures the second layer).
   True peak |F| on the part within `transient_time` of the onset against the transient
   limit, after it against the quasi-static limit.
2. Quasi-static pushes: the part fixed (a body part clamped against a table, infinite mass),
   the arm pressing its reference into it (true forces ~0.55-1.6 × the quasi-static limit) over
   0.4 s and holding it (≥ 0.8 s), the detector not reacting (the push is the test).
Every contact (impacts and pushes) also feeds the online check as the suite runs it: the base
F/T's contact wrench from `MomentumWrenchObserver` (the F/T estimator's, K = observer_gain)
on the first reading of each 1/compensation_rate s (250 Hz, as the node), at most `max_rate`
(100 Hz) estimates while |F̂| ≥ 5 N (the first of each slot), `ContactOnset` and `PflCheck`
with the part as the tracked body part. Stopped `pfl`: some check over. Against the truth:
the true margin max(peak / limit) over both phases; the estimate's error at the peak (the
largest compensated estimate, and the largest checked one, against the true peak), for
pushes over the hold (medians), and the largest estimate before the contact (free motion:
what a faster observer must keep far below every limit). `--observer-gain`,
`--compensation-rate` and `--peak-hold` (each check sees the largest estimate since the last
one, not its slot's first) measure what a faster F/T estimate would give the check.
`--source fused`: the check on the contact localizer's estimates, as the proximity monitor
gets them; with `--peak-hold` each raised to the F/T estimator's `peak_force`
(`PeakForceTracker`: the base force residual over `peak_force.window`, every reading from half
its floor on, the skipped ones backfilled) stamped within `pfl.peak_window`, as the monitor
does; its free-motion column is then the largest of that residual on every reading before the
contact (what a burst would see), and the bursts before any contact are counted. A peak no
localizer estimate is near is checked, as the monitor does, on the F/T estimator's own
estimate (`FtContactLocator`, the first residual of each 1/max_rate s, on the localizer's link
while its point is recent) raised to it; `--localizer-only` leaves that out.

    PYTHONPATH=$PWD MUJOCO_GL=egl nice -n 10 .venv/bin/python benchmarks/pfl_sim.py [--quick]
        [--observer-gain K] [--compensation-rate HZ] [--peak-hold] [--source fused]
        [--localizer-only]
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from contact_estimation.core.chain.contact_class import TouchConfig
from contact_estimation.core.chain.detector import CollisionDetector, DetectorConfig
from contact_estimation.core.chain.residual import make_residual
from contact_estimation.core.chain.time_scaling import TimeScaling, TimeScalingConfig
from contact_estimation.core.contact.ft_compensation import (BaseForceResidual,
                                                             BaseWrenchCompensator,
                                                             MomentumWrenchObserver)
from contact_estimation.core.contact.contact_localization import LocalizerConfig
from contact_estimation.core.contact.ft_contact import FtContactLocator, FtLocatorConfig
from contact_estimation.core.contact.ft_contact_stream import (FtEstimatorConfig,
                                                               PeakForceTracker, RateSlots)
from contact_estimation.core.contact.fused_contact import FusedContactEstimator, SensorNoise
from contact_estimation.core.contact.localization_schedule import (LocalizationSchedule,
                                                                   ScheduleConfig)
from contact_estimation.core.contact.pfl import (BODY_REGIONS, QUASI_STATIC, TRANSIENT,
                                                 BodyPart, ContactOnset, PeakForces, PflCheck,
                                                 PflConfig, approach_speed_scale, effective_mass,
                                                 permissible_speeds, reduced_mass)
from contact_estimation.core.identification.trajectory import WaypointTrajectory
from contact_estimation.core.robot.body_surfaces import make_surfaces
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.mjcf import OBSTACLE_PREFIX
from contact_estimation.core.sim.body_parts import compliant_part
from contact_estimation.core.sim.scenario import Obstacle, Scenario

PARTS = {'hand_fingers': 0.04, 'lower_arm_wrist': 0.04, 'chest': 0.12, 'thigh_knee': 0.08}  # m
SPEEDS = (0.2, 0.4, 0.6, 0.8, 1.0)      # m/s planned at the contact
Q_CONTACT = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785])  # flange above the part, down
DOWN = np.array([0.0, 0.0, -1.0])
FINGER_REACH = 0.11     # m below the flange to the fingertips: the part's top sits here
START, LEAD = 0.25, 0.1  # s of smooth start, s at full speed before the contact
AFTER = 0.6             # s simulated after the planned contact
PUSH_RAMP, PUSH_HOLD, PUSH_ABOVE = 0.4, 0.8, 0.01   # s, s, m above the contact at the start
# Aimed-at forces, share of the quasi-static limit: the controller presses ~1.35 × harder than
# the depth computed from its nominal stiffness m_R ω_n² asks (its feedforward and gravity
# terms), so the true forces spread over ~0.55-1.6 × the limit.
PUSH_AIM = (0.4, 1.2)
ESTIMATE_FLOOR = 5.0    # N: an estimate this large is a contact the suite checks
CHECK_PERIOD = 0.01     # s: the proximity check's period (100 Hz)
PSI = 4.0               # N·m, the detector's threshold on every joint (seed 001)


@dataclass
class Run:
    region: str
    kind: str           # 'impact' or 'push'
    limited: bool
    planned: float      # m/s planned (impact) or N aimed at (push)
    speed: float        # m/s of the arm toward the part at the onset
    v_max: float        # m/s, the speed limit at the onset (nan without it)
    model: float        # N, v √(μ k) at the speed at onset (Annex A.3.2's free collision)
    peak: dict          # phase → true peak |F| (N)
    estimate_peak: float
    checked_peak: float  # N, the largest estimate the check saw (0: none)
    free_peak: float     # N, the largest estimate before the contact (free motion)
    free_bursts: int     # readings in a peak burst before the contact (fused)
    hold_error: float   # median relative error of the estimate over the hold (pushes)
    stopped: bool       # some PflCheck over
    checks: int
    ft_checks: int      # of them on the F/T estimate (no localizer estimate near a peak)


class ConstantApproach:
    """q(t) = q_c + φ(t) dq: a straight line in joint space through `q_c` whose tangent
    moves the flange along `direction` at φ̇ m/s there; φ̇ rises smoothly from 0 to `speed`
    over START s, reaching q_c at START + LEAD."""

    def __init__(self, robot: RobotModel, q_c: np.ndarray, direction: np.ndarray, speed: float):
        jacobian = robot.jacobian(q_c, robot.tip_link)
        self.q_c, self.speed = q_c, speed
        self.dq = np.linalg.pinv(jacobian) @ np.concatenate([direction, np.zeros(3)])
        self.start = -(speed * (START / 2 + LEAD))
        self.duration = START + LEAD + AFTER

    def sample(self, t: float):
        s = min(max(t / START, 0.0), 1.0)
        blend = s ** 3 * (10 - 15 * s + 6 * s ** 2)
        phi = self.start + self.speed * START * (2.5 * s ** 4 - 3 * s ** 5 + s ** 6)
        phi += self.speed * max(t - START, 0.0)
        rate = self.speed * blend
        acceleration = self.speed * 30 * s ** 2 * (1 - s) ** 2 / START if s < 1 else 0.0
        return self.q_c + phi * self.dq, rate * self.dq, acceleration * self.dq


def part_centre(robot: RobotModel, radius: float) -> np.ndarray:
    _, flange = robot.link_pose(Q_CONTACT, robot.tip_link)
    return flange + (FINGER_REACH + radius) * DOWN


def obstacle(robot: RobotModel, region: str, free: bool) -> tuple[Obstacle, float]:
    """The body part (free: mass m_H on its holding spring along the approach; else fixed)
    and the arm's m_R at the fingertips along the approach."""
    radius = PARTS[region]
    centre = part_centre(robot, radius)
    m_r = effective_mass(robot, Q_CONTACT, robot.tip_link, centre - radius * DOWN, DOWN)
    # The part's x axis along the approach (down): pitch π/2.
    return compliant_part(region, region, radius, centre, m_r, free,
                          rpy=(0.0, math.pi / 2, 0.0), axes='x'), m_r


def part_force(sim: SimulatedCobot) -> float:
    """|F| (N) the arm exerts on the part: the sum over its contacts."""
    total = np.zeros(3)
    for contact in sim.true_contacts():
        rotation, _ = sim.robot.link_pose(sim.q, contact.link)
        total += rotation @ contact.force
    return float(np.linalg.norm(total))


class SpeedLimit:
    """The proximity monitor's power and force limit on one tracked part (module doc)."""

    def __init__(self, robot: RobotModel, surfaces: LinkSurfaces, region: str,
                 centre: np.ndarray, radius: float):
        self.robot, self.surfaces = robot, surfaces
        self.region, self.centre, self.radius = region, centre, radius

    def scale(self, q: np.ndarray, planned_velocity: np.ndarray) -> tuple[float, float, float]:
        """(scale, v_max, planned approach speed) at q for the planned joint velocity."""
        centres = self.surfaces.sphere_centres(q)
        offset = self.centre - centres
        distance = np.linalg.norm(offset, axis=1)
        nearest = int(np.argmin(distance - self.surfaces.sphere_radii))
        u = offset[nearest] / distance[nearest]
        step = 1e-4
        velocity = (self.surfaces.sphere_centres(q + step * planned_velocity)[nearest]
                    - centres[nearest]) / step
        link = self.surfaces.links[self.surfaces.sphere_link[nearest]]
        v_max = float(permissible_speeds(self.robot, q, [link], [centres[nearest]], [u],
                                         [(self.region,)])[0])
        approach, scale = approach_speed_scale(velocity, u, v_max)
        return scale, v_max, approach


class OnlineCheck:
    """The suite's check of one contact: F/T momentum observer of gain `gain` (1/s) on the
    readings of each 1/compensation_rate s slot (as the F/T estimator) → estimates at
    max_rate while |F̂| ≥ ESTIMATE_FLOOR → ContactOnset → PflCheck against the part. With
    `fused` (a FusedContactEstimator) the check gets what the proximity monitor gets: the
    contact localizer's estimate from τ_ext and that base wrench, on its schedule (20 Hz while
    some |τ_ext,i| is over its gate), without the base wrench when it is inconsistent with
    τ_ext, nothing when neither is consistent (nodes/contact_localizer.py)."""

    def __init__(self, robot: RobotModel, part: BodyPart, gain: float, compensation_rate: float,
                 peak_hold: bool, fused: FusedContactEstimator | None = None,
                 ft_locator: FtContactLocator | None = None):
        stream = FtEstimatorConfig()
        self.fused, self.schedule = fused, LocalizationSchedule(ScheduleConfig(), robot.n)
        self.wrench, self.last = None, None
        self.ft_locator, self.ft_slots = ft_locator, RateSlots(stream.max_rate)
        self.ft_threshold, self.ft_timeout = stream.thresholds(robot.n), stream.localizer_timeout
        self.ft_contact, self.ft_checks = None, 0   # the latest F/T estimate (t, Contact);
        # checks on it: a peak no localizer estimate was near
        compensator = BaseWrenchCompensator(robot)
        self.observer = MomentumWrenchObserver(compensator, gain)
        self.tracker = PeakForceTracker(compensator, stream.peak_window, stream.max_rate,
                                        stream.peak_floor)
        self.skipped, self.free = [], BaseForceResidual(stream.peak_window)
        self.free_peak, self.free_bursts, self.touched = 0.0, 0, False
        self.peaks = PeakForces(PflConfig().peak_window if peak_hold else 0.0)
        self.compensating = RateSlots(compensation_rate)
        self.peak_hold, self._held = peak_hold, np.zeros(3)
        self.locating = RateSlots(stream.max_rate)
        self.check, self.part = PflCheck(PflConfig()), part
        self.onset = ContactOnset(PflConfig().contact_gap)
        self.results, self.estimates = [], []   # PflResult; (t, |F̂|) of every compensation

    def update(self, t: float, sim: SimulatedCobot, q: np.ndarray, v: np.ndarray,
               tau_ext: np.ndarray, touched: bool) -> None:
        if self.fused is not None and self.wrench is not None and self.schedule.due(t, tau_ext):
            self.schedule.finished(t)
            estimate = self.fused.estimate(q, tau_ext, self.wrench)
            if not estimate.consistent:
                estimate = self.fused.estimate(q, tau_ext, None)
            if estimate.consistent and estimate.contact is not None:
                self.last = (t, estimate.contact)
                self.check_fused(*self.last)
        if self.ft_locator is not None and self.wrench is not None and self.ft_slots.take(t):
            self.locate_ft(t, q, tau_ext)
        reading = np.concatenate(sim.ft_wrench())
        compensated = self.compensating.take(t)
        if self.fused is not None:
            self.peak_terms(t, reading, q, v, compensated, touched)
        if not compensated:
            return
        wrench = self.wrench = self.observer.update(t, reading, q, v)
        if self.fused is not None:
            self.peak_check(self.tracker.add(t, self.observer.static[:3],
                                             self.observer.momentum[:3], self.backfill))
            return
        force = wrench[:3]
        magnitude = float(np.linalg.norm(force))
        self.estimates.append((t, magnitude))
        if self.peak_hold and magnitude > np.linalg.norm(self._held):
            self._held = force   # the largest since the last check
        if magnitude < ESTIMATE_FLOOR or not self.locating.take(t):
            return
        if self.peak_hold:
            force, self._held = self._held, np.zeros(3)
        point = self.part.points[0] + PARTS[self.part.regions[0]] * -DOWN
        self.results.append(self.check.check('panda_hand', point, force, t, self.onset(t),
                                             [self.part]))

    def peak_terms(self, t, reading, q, v, compensated: bool, touched: bool) -> None:
        """The F/T estimator's peak: a reading the rate skips is buffered, or used at once in a
        burst; free motion's largest residual on every reading, and its bursts."""
        self.touched |= touched
        if not self.touched:
            terms = self.tracker.terms(t, reading, q, v)
            free = self.free.add(*terms)
            self.free_peak = max(self.free_peak, float(np.linalg.norm(free)) if free is not None
                                 else 0.0)
            self.free_bursts += self.tracker.bursting(t)
        if compensated:
            return
        if self.tracker.bursting(t):
            self.peak_check(self.tracker.add(*self.tracker.terms(t, reading, q, v)))
        else:
            self.skipped = [*self.skipped[-7:], (t, reading, q, v)]

    def locate_ft(self, t: float, q: np.ndarray, tau_ext: np.ndarray) -> None:
        """The F/T estimator's own estimate (nodes/ft_contact_estimator.py: the first residual
        of each 1/max_rate s, on the localizer's link while its point is recent), checked as
        the monitor does: only when a peak no localizer estimate is near waits for it."""
        if self.last is not None and abs(self.last[0] - t) <= self.ft_timeout:
            joint = self.ft_locator.robot.link_joint[self.last[1].link]
            contact = self.ft_locator.locate(q, self.wrench, joint)
        else:
            contact = self.ft_locator.locate_from_residual(q, self.wrench, tau_ext,
                                                           self.ft_threshold)
        if contact is not None:
            self.ft_contact = (t, contact)
            self.check_ft()

    def check_ft(self) -> None:
        if self.ft_contact is None:
            return
        t, contact = self.ft_contact
        force = self.peaks.from_ft(contact.force_base, t)
        if force is not None:
            self.ft_checks += 1
            self.record(contact.link, contact.point_base, force, t)

    def backfill(self, after: float, before: float):
        return [sample for sample in self.skipped if after < sample[0] < before]

    def peak_check(self, peaks) -> None:
        for peak in peaks:
            if self.peaks.add(*peak):
                self.check_fused(*self.last)   # as the monitor: its last estimate again
            elif self.ft_locator is not None:
                self.check_ft()

    def check_fused(self, t: float, contact) -> None:
        self.record(contact.link, contact.point_base, self.peaks.raised(contact.force_base, t),
                    t)

    def record(self, link: str, point: np.ndarray, force: np.ndarray, t: float) -> None:
        self.results.append(self.check.check(link, point, force, t, self.onset(t), [self.part]))
        self.estimates.append((t, self.results[-1].force))


def simulate(robot, surfaces, region: str, kind: str, planned: float, limited: bool,
             args, fused: FusedContactEstimator | None,
             ft_locator: FtContactLocator | None = None) -> Run:
    """One contact (module doc): an impact at `planned` m/s, or a push aiming at `planned` N."""
    free = kind == 'impact'
    part, m_r = obstacle(robot, region, free)
    if free:
        trajectory = ConstantApproach(robot, Q_CONTACT, DOWN, planned)
        seconds = trajectory.duration
    else:
        body = BODY_REGIONS[region]
        controller = m_r * SimConfig().natural_frequency ** 2   # N/m along the approach
        depth = planned * (1 / body.stiffness + 1 / controller)
        line = ConstantApproach(robot, Q_CONTACT, DOWN, 1.0)
        trajectory = WaypointTrajectory([Q_CONTACT - PUSH_ABOVE * line.dq,
                                         Q_CONTACT + depth * line.dq], [PUSH_RAMP])
        seconds = PUSH_RAMP + PUSH_HOLD + 0.1
    sim = SimulatedCobot(robot, trajectory, Scenario(obstacles=[part]))
    residual = make_residual('momentum_observer', robot, friction_model='continuous',
                             friction_params=sim.config.friction)
    detector = CollisionDetector(DetectorConfig.build(robot.joint_names, hold_time=1.0,
                                                      thresholds_position=PSI),
                                 TouchConfig(), robot)
    reaction = TimeScaling(TimeScalingConfig())
    limit = (SpeedLimit(robot, surfaces, region, part.position, PARTS[region]) if limited
             else None)
    check = OnlineCheck(robot, BodyPart(region, (region,), part.position[None, :]),
                        args.observer_gain, args.compensation_rate, args.peak_hold, fused,
                        ft_locator)
    pfl_scale, v_max, onset, speed = 1.0, math.nan, None, math.nan
    forces = []
    joint = OBSTACLE_PREFIX + region
    part_velocity = (sim.model.jnt_dofadr[sim.model.joint(joint).id] if free else None)
    for k in range(int(seconds / sim.dt)):
        if limit is not None and k % round(CHECK_PERIOD / sim.dt) == 0 and onset is None:
            planned_velocity = trajectory.sample(sim.scaler.path_time)[1]
            pfl_scale, v_max, _ = limit.scale(sim.data.qpos[:robot.n].copy(), planned_velocity)
        sim.step()
        q, v, tau = sim.joint_state()
        tau_ext = residual.update(sim.time, q, v, tau)
        state = detector.update(sim.time, tau_ext, v, None, position=q)
        f_s = reaction.react(sim.time, state, tau_ext, v) if free else 1.0
        sim.set_time_scaling(min(f_s, pfl_scale))
        force = part_force(sim)
        if onset is None and force > 0.0:
            onset = sim.time
            flange_velocity = robot.point_jacobian(sim.q, robot.tip_link, np.zeros(3)) @ sim.v
            part_speed = sim.data.qvel[part_velocity] if free else 0.0
            speed = float(flange_velocity @ DOWN - part_speed)
        forces.append((sim.time, force))
        check.update(sim.time, sim, q, v, tau_ext, onset is not None)
    body = BODY_REGIONS[region]
    model = speed * math.sqrt(reduced_mass(body.effective_mass, m_r) * body.stiffness)
    return score(region, kind, planned, limited, speed, v_max, model, onset, np.array(forces),
                 check)


def score(region, kind, planned, limited, speed, v_max, model, onset, forces, check) -> Run:
    transient_time = PflConfig().transient_time
    peak = {TRANSIENT: 0.0, QUASI_STATIC: 0.0}
    if onset is not None:
        after = forces[:, 0] - onset
        peak[TRANSIENT] = float(forces[(after >= 0) & (after < transient_time), 1].max())
        late = after >= transient_time
        peak[QUASI_STATIC] = float(forces[late, 1].max()) if late.any() else 0.0
    estimates = np.array(check.estimates or [(0.0, 0.0)])
    hold_error = math.nan
    if kind == 'push':
        hold = (forces[:, 0] >= forces[-1, 0] - PUSH_HOLD + 0.3) & (forces[:, 1] > 0.0)
        truth = forces[hold, 1]
        held = np.interp(forces[hold, 0], estimates[:, 0], estimates[:, 1])
        hold_error = float(np.median((held - truth) / truth))
    free = estimates[estimates[:, 0] < (onset if onset is not None else np.inf), 1]
    free_peak = (check.free_peak if check.fused is not None else
                 float(free.max()) if len(free) else 0.0)
    return Run(region, kind, limited, planned, speed, v_max, model, peak,
               float(estimates[:, 1].max()), max((r.force for r in check.results), default=0.0),
               free_peak, check.free_bursts, hold_error,
               any(r.over for r in check.results), len(check.results), check.ft_checks)


def margin(run: Run) -> float:
    """The true peak over its limit, the larger of the two phases."""
    body = BODY_REGIONS[run.region]
    return max(run.peak[phase] / body.force_limit(phase) for phase in run.peak)


def impact_table(runs: list[Run]) -> None:
    print('\nImpacts: true peak |F| on the part within 0.5 s of the onset (transient limit), '
          'the arm at the planned speed, and with the speed limit:\n')
    print('| region | F_T N | planned m/s | without: speed at onset m/s | peak N | over | '
          'with: v_max m/s | speed at onset | peak N | over |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    by_key = {(r.region, r.planned, r.limited): r for r in runs if r.kind == 'impact'}
    for region in PARTS:
        limit = BODY_REGIONS[region].transient_force
        for speed in sorted({key[1] for key in by_key if key[0] == region}):
            free, held = by_key[(region, speed, False)], by_key[(region, speed, True)]
            cells = []
            for run in (free, held):
                over = 'yes' if run.peak[TRANSIENT] > limit else 'no'
                lead = [f'{run.v_max:.2f}'] if run.limited else []
                cells += lead + [f'{run.speed:.2f}', f'{run.peak[TRANSIENT]:.0f}', over]
            print(f'| {region} | {limit:.0f} | {speed:.1f} | ' + ' | '.join(cells) + ' |')
    for limited in (False, True):
        chosen = [r for r in runs if r.kind == 'impact' and r.limited == limited]
        over = sum(r.peak[TRANSIENT] > BODY_REGIONS[r.region].transient_force for r in chosen)
        print(f'\n{"with" if limited else "without"} the speed limit: {over} of {len(chosen)} '
              f'impacts over the transient limit', end='')
    print()


def check_table(runs: list[Run]) -> None:
    print('\nOnline check against the truth (every contact; true margin = true peak / limit, '
          'the larger phase):\n')
    print('| region | contacts | over (true > 1) | stopped pfl | 0.9-1 | under 0.9 | stopped '
          '(false) | peak estimate error median / p90 | checked peak error median / p90 | '
          'checked peak within ±10 % | hold error median / p90 | within ±10 % (hold) | '
          'largest free-motion estimate N | free-motion readings in a peak burst |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
    for region in list(PARTS) + ['impact', 'push', 'all']:
        chosen = [r for r in runs if region in ('all', r.region, r.kind)]
        margins = np.array([margin(r) for r in chosen])
        stopped = np.array([r.stopped for r in chosen])
        over, under = margins > 1.0, margins < 0.9
        peak_error, checked_error = (
            np.array([(estimate(r) - max(r.peak.values())) / max(r.peak.values())
                      for r in chosen if max(r.peak.values()) > 0])
            for estimate in (lambda r: r.estimate_peak, lambda r: r.checked_peak))
        hold = np.array([r.hold_error for r in chosen if r.kind == 'push'])
        within = f'{np.mean(np.abs(hold) <= 0.1):.0%} of {len(hold)}' if len(hold) else '-'
        print(f'| {region} | {len(chosen)} | {over.sum()} | {(stopped & over).sum()} | '
              f'{(~over & ~under).sum()} | {under.sum()} | {(stopped & under).sum()} | '
              f'{percentiles(peak_error)} | {percentiles(checked_error)} | '
              f'{np.sum(np.abs(checked_error) <= 0.1)} of {len(checked_error)} | '
              f'{percentiles(hold)} | {within} | {max(r.free_peak for r in chosen):.1f} | '
              f'{sum(r.free_bursts for r in chosen)} |')
    print('\nOver the limit, not stopped:\n')
    for run in runs:
        if margin(run) > 1.0 and not run.stopped:
            unit = 'm/s' if run.kind == 'impact' else 'N aimed'
            limit = 'on' if run.limited else 'off'
            print(f'- {run.region} {run.kind} ({run.planned:.1f} {unit}, speed limit {limit}): '
                  f'true peak '
                  f'{run.peak[TRANSIENT]:.0f} N transient / {run.peak[QUASI_STATIC]:.0f} N after, '
                  f'margin {margin(run):.2f}; largest estimate {run.estimate_peak:.0f} N')


def off_list(runs: list[Run]) -> None:
    print('\nThe checked peak off the true one by more than 10 %:\n')
    for run in runs:
        truth = max(run.peak.values())
        if truth > 0 and abs(run.checked_peak - truth) > 0.1 * truth:
            print(f'- {run.region} {run.kind} ({run.planned:.1f}): true {truth:.0f} N, checked '
                  f'{run.checked_peak:.0f} N in {run.checks} checks ({run.ft_checks} on the F/T '
                  'estimate)')
    on_ft = [run for run in runs if run.ft_checks]
    print(f'\nChecked on the F/T estimate (a peak no localizer estimate was near): {len(on_ft)} '
          f'runs, {sum(run.ft_checks for run in on_ft)} checks: '
          + ', '.join(f'{run.region} {run.kind} {run.planned:.1f}' for run in on_ft))


def percentiles(errors: np.ndarray) -> str:
    if not len(errors):
        return '-'
    return (f'{100 * np.median(errors):+.1f} % / '
            f'{100 * np.percentile(np.abs(errors), 90):.1f} %')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='3 speeds, 4 pushes a region')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--every', type=int, default=5, help='a progress line per N runs')
    parser.add_argument('--observer-gain', type=float, default=FtEstimatorConfig.observer_gain,
                        help="the F/T momentum observer's K (1/s; default the node's)")
    parser.add_argument('--compensation-rate', type=float,
                        default=FtEstimatorConfig.compensation_rate,
                        help='F/T readings compensated a second (Hz; default the node\'s)')
    parser.add_argument('--source', choices=('ft', 'fused'), default='ft',
                        help="the check's estimates: the F/T estimator's at 100 Hz, or the "
                        "contact localizer's fused ones (the proximity monitor's)")
    parser.add_argument('--peak-hold', action='store_true',
                        help='ft: each check sees the largest estimate since the last one; '
                        "fused: each estimate is raised to the F/T estimator's peak_force "
                        'stamped within pfl.peak_window (the node)')
    parser.add_argument('--localizer-only', action='store_true',
                        help="fused, peak held: no check on the F/T estimator's own estimate "
                        'for a peak no localizer estimate is near (before issue 38\'s last '
                        'change)')
    args = parser.parse_args()
    robot = RobotModel.load('panda')
    surfaces = LinkSurfaces(robot)
    rng = np.random.default_rng(args.seed)
    config = LocalizerConfig()
    fused = (FusedContactEstimator(surfaces, noise=SensorNoise(config.delta_w / 5),
                                   **dataclasses.asdict(config))
             if args.source == 'fused' else None)
    ft_locator = (FtContactLocator(make_surfaces(FtEstimatorConfig.surface_model, surfaces),
                                   FtLocatorConfig())
                  if fused is not None and args.peak_hold and not args.localizer_only else None)
    speeds = (0.2, 0.6, 1.0) if args.quick else SPEEDS
    pushes = 4 if args.quick else 16
    plan = [(region, 'impact', speed, limited) for region in PARTS for speed in speeds
            for limited in (False, True)]
    for region in PARTS:
        limit = BODY_REGIONS[region].quasi_static_force
        plan += [(region, 'push', float(rng.uniform(*PUSH_AIM)) * limit, False)
                 for _ in range(pushes)]
    runs, started = [], time.monotonic()
    for i, (region, kind, planned, limited) in enumerate(plan):
        runs.append(simulate(robot, surfaces, region, kind, planned, limited, args, fused,
                             ft_locator))
        if (i + 1) % args.every == 0 or i + 1 == len(plan):
            print(f'... {i + 1}/{len(plan)} runs, {time.monotonic() - started:.0f} s',
                  file=sys.stderr, flush=True)
    impact_table(runs)
    check_table(runs)
    off_list(runs)


if __name__ == '__main__':
    main()
