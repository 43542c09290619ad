"""Power and force limiting (ISO/TS 15066:2016, clause 5.5.5 and Annex A), no ROS.

Three pieces, each a pure function or a small immutable object, for the nodes to wire in:

- `BODY_REGIONS`: per body region, the maximum permissible quasi-static and transient contact
  force (Annex A, Table A.2) and the effective spring constant k and effective mass m_H of the
  body model (Table A.3). Sources and which values two of them confirm: `BodyRegion`.
- `PflCheck`: a contact estimate (link, point and force on the robot in the base frame) against
  the limit of the body region it touches: the tracked body part nearest the contact point
  (or `PflConfig.default_region` without one), its transient limit for the first
  `transient_time` after the contact's onset, its quasi-static limit after that.
- The speed that keeps a transient contact within the limit (Annex A.3.2): the energy a free
  collision transfers, E = ½ μ v², with the reduced mass μ = (1/m_H + 1/m_R)⁻¹, may not
  exceed the energy that compresses the body region to its transient force, E = F²/(2k), so

      v_max = F_transient / √(μ k)                        (derived from the two energies)

  The standard's robot mass is m_R = M/2 + m_L (M: the moving mass of the arm, m_L: the
  payload); `effective_mass` takes instead the arm's own inertia at the contact point along the
  approach direction u, m_R = 1 / (uᵀ J M(q)⁻¹ Jᵀ u) (J: the 3×n translational Jacobian of the
  point, M(q) the joint-space inertia with the payload), the mass the point shows to an impulse
  along u. `approach_speed_scale` turns v_max into the speed scale of one robot part.

Forces follow the project's convention (DEVELOPERS.md): F is the force ON the robot; its
magnitude is what the body region bears. What this does not cover, and stays with the
integrator's risk assessment: pressure (Table A.2's N/cm², which needs the contact area of the
tool's edges), clamping geometry (a quasi-static contact is detected here only by its duration),
the person's own speed beyond what the tracker reports, and the body regions the tracker cannot
tell apart (a `BodyPart` may list several regions: the strictest applies).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from contact_estimation.core.input_rejected import (IMPLAUSIBLE, NOT_FINITE, WRONG_SIZE,
                                                    InputRejected)
from contact_estimation.core.settings import checked, setting

TRANSIENT, QUASI_STATIC = 'transient', 'quasi-static'


@dataclass(frozen=True)
class BodyRegion:
    """One body region of ISO/TS 15066 Annex A: forces in N, `stiffness` k in N/m (the
    standard gives N/mm), `effective_mass` m_H in kg. `transient_allowed` False: the standard
    allows no transient (impact) contact there, so its transient limit is the quasi-static one.

    Sources (the standard itself is not open; each value is taken from open reproductions):
    - Table A.2 quasi-static forces: issue 38's list (from open references); the products
      F_transient²/(2k) for upper arm (1.5 J), lower arm (1.3 J), chest (1.6 J) and face
      (0.11 J) agree with the transient energy limits sara-shield cites from ISO/TS 15066
      (github.com/JakobThumm/sara-shield, safety_shield/config/cmu_mocap_no_hand.yaml,
      `max_contact_energy`), which confirms F and k of those four regions together. The hand's
      0.49 J there is below 2·140 N's 280²/(2·75 000) = 0.52 J: its transient force or k is
      unconfirmed, so the safer of the two is kept, the force that compresses 75 N/mm by
      0.49 J, √(2·75 000·0.49) = 271 N (a 3 % lower force limit and v_max).
      Skull, neck, back, abdomen, pelvis, thigh and lower leg: one source only.
    - Transient = 2 × quasi-static (Table A.2's multiplier) except head and neck. The open
      references give no transient value for skull/forehead, face and neck, and practitioners'
      guides say contact with the head is to be avoided; until the standard's text is at hand,
      those three regions get transient = quasi-static (`transient_allowed` False), the safe side.
    - Table A.3 k and m_H: the body-model constants of human_robot_collision_RL (Vaibhav Gupta,
      `eff_spring_const_human`, `eff_mass_human`, "Based on ISO/TS 15066 for 75 kg") for all
      regions; k of skull 150, face 75, neck 50, back 35, chest 25 and abdomen 10 N/mm also in
      inmotion's ISO/TS 15066 body-region reference (inmotion-v2-preview.pages.dev,
      resources/cobot-safety/iso-ts-15066-body-region-force-limits). m_H: one source; another
      open body model gives 1.5 kg (lower arm) and 12 kg (thigh), but a larger m_H gives a lower
      v_max, so the larger values (2 kg, 75 kg) are kept.
    """

    name: str
    quasi_static_force: float
    transient_force: float
    stiffness: float
    effective_mass: float
    transient_allowed: bool = True

    def force_limit(self, phase: str) -> float:
        """The permissible force (N) in `phase` (TRANSIENT or QUASI_STATIC)."""
        return self.transient_force if phase == TRANSIENT else self.quasi_static_force


def _region(name: str, quasi_static: float, k_per_mm: float, mass: float,
            transient_allowed: bool = True, energy: float = math.inf) -> BodyRegion:
    """A region with transient = 2 × quasi-static (quasi-static where `transient_allowed` is
    False), capped where a second source's transient `energy` (J) allows less: √(2 k E)."""
    transient = 2.0 * quasi_static if transient_allowed else quasi_static
    transient = min(transient, math.sqrt(2.0 * k_per_mm * 1e3 * energy))
    return BodyRegion(name, quasi_static, transient, k_per_mm * 1e3, mass, transient_allowed)


# name, Table A.2 quasi-static force (N), Table A.3 k (N/mm) and m_H (kg); sources: BodyRegion.
BODY_REGIONS: dict[str, BodyRegion] = {r.name: r for r in (
    _region('skull_forehead', 130.0, 150.0, 4.4, transient_allowed=False),
    _region('face', 65.0, 75.0, 4.4, transient_allowed=False),
    _region('neck', 150.0, 50.0, 1.2, transient_allowed=False),
    _region('back_shoulders', 210.0, 35.0, 40.0),
    _region('chest', 140.0, 25.0, 40.0),
    _region('abdomen', 110.0, 10.0, 40.0),
    _region('pelvis', 180.0, 25.0, 40.0),
    _region('upper_arm_elbow', 150.0, 30.0, 3.0),
    _region('lower_arm_wrist', 160.0, 40.0, 2.0),
    _region('hand_fingers', 140.0, 75.0, 0.6, energy=0.49),  # sara-shield's 0.49 J: 271 N
    _region('thigh_knee', 220.0, 50.0, 75.0),
    _region('lower_leg', 130.0, 60.0, 75.0),
)}
REGION_NAMES = tuple(BODY_REGIONS)

# The regions a tracked body part (core/contact/proximity.DEFAULT_PARTS, without its side) may
# touch with. Where a part covers several (the trunk box, the head), the strictest applies.
PART_REGIONS: dict[str, tuple[str, ...]] = {
    'upper_arm': ('upper_arm_elbow',),
    'forearm': ('lower_arm_wrist',),
    'hand': ('hand_fingers',),
    'neck': ('neck',),
    'head': ('skull_forehead', 'face'),
    'trunk': ('back_shoulders', 'chest', 'abdomen', 'pelvis'),
}


def part_regions(part: str) -> tuple[str, ...]:
    """The regions of a proximity body part ('left_hand' → ('hand_fingers',)); () when the
    name is no known part (a lidar cluster: the caller uses the default region)."""
    for side in ('left_', 'right_'):
        if part.startswith(side):
            part = part[len(side):]
    return PART_REGIONS.get(part, ())


def contact_allowed(regions: Sequence[str]) -> bool:
    """Whether collaborative operation may let the arm touch a body part of `regions` (names
    in BODY_REGIONS) at its v_max: it has regions, and the standard allows transient contact
    with every one of them (not the head, face or neck: `BodyRegion.transient_allowed`)."""
    return bool(regions) and all(BODY_REGIONS[r].transient_allowed for r in regions)


# ------------------------------------------------------------------------ speed
def reduced_mass(human_mass: float, robot_mass: float) -> float:
    """μ = (1/m_H + 1/m_R)⁻¹, kg (Annex A.3.2); m_R = inf (a direction the arm cannot move
    along) gives μ = m_H."""
    return 1.0 / (1.0 / human_mass + 1.0 / robot_mass)


def permissible_speed(region: BodyRegion, robot_mass: float) -> float:
    """v_max (m/s): the relative speed at which a free collision of a robot part of effective
    mass `robot_mass` (kg) with `region` transfers the energy that compresses it to its
    transient force limit, F_T / √(μ k) (module docstring)."""
    if not (robot_mass > 0.0):
        raise ValueError(f'robot effective mass must be > 0 kg, got {robot_mass}')
    return region.transient_force / math.sqrt(
        reduced_mass(region.effective_mass, robot_mass) * region.stiffness)


def strictest_speed(regions: Sequence[str], robot_mass: float) -> float:
    """The lowest v_max (m/s) over `regions` (names in BODY_REGIONS): a body part the tracker
    cannot resolve further (the trunk, the head) is as fragile as its most fragile region."""
    if not regions:
        raise ValueError('no body region given')
    return min(permissible_speed(BODY_REGIONS[r], robot_mass) for r in regions)


def effective_mass(robot, q, link: str, point, direction) -> float:
    """m_R (kg) = 1 / (uᵀ J M(q)⁻¹ Jᵀ u): the arm's mass at `point` (base frame, fixed on
    `link`) along the unit vector `direction` u (base frame), from its joint-space inertia. A
    payload counts when `robot` carries it (`Payload.carried_by`). inf when no joint moves the
    point along u (the arm is rigid that way)."""
    return float(effective_masses(robot, q, [link], [point], [direction])[0])


def effective_masses(robot, q, links: Sequence[str], points, directions) -> np.ndarray:
    """`effective_mass` of K points at once (links K, points and directions K×3, base frame),
    from one kinematics pass and one solve with M(q): what a proximity check needs for every
    robot part in a cycle."""
    points = np.asarray(points, dtype=float).reshape(-1, 3)
    units = np.asarray(directions, dtype=float).reshape(-1, 3)
    if not (len(links) == len(points) == len(units)):
        raise ValueError(f'{len(links)} links, {len(points)} points, {len(units)} directions')
    if not (np.isfinite(points).all() and np.isfinite(units).all()):
        raise InputRejected(NOT_FINITE, 'a point or direction for the effective mass is not '
                                        'finite')
    lengths = np.sqrt(np.einsum('ki,ki->k', units, units))
    if np.any(lengths < 1e-9):
        raise InputRejected(IMPLAUSIBLE, 'a direction for the effective mass has no length')
    units = units / lengths[:, None]
    names = sorted(set(links))
    rotations, origins, jacobians = robot.link_kinematics(q, names)
    index = np.array([names.index(link) for link in links], dtype=int)
    rotations, origins, jacobians = rotations[index], origins[index], jacobians[index]
    # The point's base-frame Jacobian R (J_v − [p_local]× J_ω) = R J_v − [p − o]× R J_ω, so
    # uᵀ J = (R ᵀu)ᵀ J_v + ((p − o) × u)ᵀ R J_ω.
    local_u = np.einsum('kji,kj->ki', rotations, units)
    local_moment = np.einsum('kji,kj->ki', rotations, _cross(points - origins, units))
    projected = (np.einsum('ki,kin->kn', local_u, jacobians[:, :3])
                 + np.einsum('ki,kin->kn', local_moment, jacobians[:, 3:]))
    inverse = np.einsum('kn,nk->k', projected, np.linalg.solve(robot.mass_matrix(q), projected.T))
    masses = np.full(len(points), math.inf)
    moving = inverse > 1e-12
    masses[moving] = 1.0 / inverse[moving]
    return masses


def permissible_speeds(robot, q, links: Sequence[str], points, directions,
                       regions: Sequence[Sequence[str]]) -> np.ndarray:
    """v_max (m/s) of K robot points (`effective_masses`' arguments) each approaching a body
    part of `regions` (its strictest, `strictest_speed`): one kinematics pass for all."""
    masses = effective_masses(robot, q, links, points, directions)
    return np.array([strictest_speed(names, mass) for names, mass in zip(regions, masses)])


def standard_effective_mass(robot, payload_mass: float = 0.0) -> float:
    """The standard's m_R = M/2 + m_L (kg): half the mass the chain's joints move plus the
    payload. `robot` without the payload (else it counts in M as well)."""
    moving = sum(robot.model.inertias[j].mass for j in range(1, robot.model.njoints))
    return moving / 2.0 + payload_mass


def approach_speed_scale(velocity, direction, v_max: float,
                         body_velocity=(0.0, 0.0, 0.0)) -> tuple[float, float]:
    """(approach speed m/s, speed scale in [0, 1]) of one robot part: the relative speed
    (v_robot − v_body)·u along the unit vector u from the part's closest point toward the body
    part, and the scale that keeps it ≤ v_max (1 while it moves away or slower)."""
    u = _unit(direction, 'direction')
    relative = _vector(velocity, 'velocity') - _vector(body_velocity, 'body velocity')
    approach = float(relative @ u)
    if not (np.isfinite(v_max) and v_max >= 0.0):
        raise ValueError(f'v_max must be finite and ≥ 0 m/s, got {v_max}')
    return approach, (1.0 if approach <= v_max else v_max / approach)


# ------------------------------------------------------------------------ check
@dataclass(frozen=True)
@checked
class PflConfig:
    """Settings of the online force check."""

    default_region: str = setting(
        'face', 'body region assumed where no tracked body part is near the contact (no '
        'tracker, a lidar object): the strictest, face, unless the risk assessment excludes '
        'the head', choices=REGION_NAMES)
    transient_time: float = setting(
        0.5, 's after a contact\'s onset during which the transient limit applies (ISO/TS 15066: '
        'a transient contact lasts under 0.5 s); the quasi-static limit after', range=(0.0, 5.0))
    region_distance: float = setting(
        0.3, 'm: a tracked body part farther than this from the contact point is not the one '
        'touched (default_region applies)', range=(0.0, 5.0))
    enabled: bool = setting(
        True, 'check every contact estimate against its body region\'s force limit; one over '
        'it latches the stop with the cause pfl (off: no check and no speed_limit)')
    contact_gap: float = setting(
        1.0, 's without a contact estimate after which the next one is a new contact (its '
        'onset: the transient limit applies again); shorter gaps belong to the same contact',
        range=(0.0, 10.0))
    peak_window: float = setting(
        0.1, 's: a contact estimate is checked with the largest base force peak (the F/T '
        "estimator's peak_force, a fast observer's) stamped this close to it when larger: the "
        "localizer's estimates (20 Hz, low-passed) miss an impact's 9-60 ms peak; 0: not used",
        range=(0.0, 1.0))
    estimate_share: float = setting(
        0.95, 'share of the limit at which an estimated force counts as over it: the '
        'estimate errs by a few % (benchmarks/pfl_sim.py: held pushes p90 3.9 %, up to 4 % '
        'low), so a force just over the limit must not pass for one under it; a force under '
        '90 % of the limit still never stops', range=(0.8, 1.0))
    speed_limit: bool = setting(
        True, 'slow each robot part approaching a tracked body part to the speed v_max that '
        'keeps a collision within the transient limit (folded into the speed scale)')
    collaborative: bool = setting(
        False, 'collaborative operation by power and force limiting (ISO/TS 15066 5.5.5): a '
        'tracked body part inside its protective distance no longer stops the arm, whose '
        'approach to it is held at its v_max by speed_limit (required), and contact is '
        'allowed; a contact over the limit still stops (pfl). Head and neck, lidar objects '
        'and anything untracked keep the protective stop. Off by default: only the '
        "integrator's risk assessment of the cell may turn it on")

    def __post_init__(self):
        """Collaborative operation rests on the speed limit: without it nothing would keep an
        approach inside the protective distance within v_max."""
        if self.collaborative and not (self.enabled and self.speed_limit):
            raise ValueError(
                'pfl.collaborative = true needs pfl.enabled and pfl.speed_limit on (they are '
                f'{str(self.enabled).lower()} and {str(self.speed_limit).lower()}): without the '
                'speed limit nothing holds the approach to a person inside the protective '
                'distance at v_max')


class ContactOnset:
    """The onset of the contact an estimate belongs to: the stamp of the first estimate after
    more than `gap` s without one. A stamp before the onset (the source started again) begins
    a new contact."""

    def __init__(self, gap: float):
        self.gap = gap
        self._onset = self._last = -math.inf

    def __call__(self, stamp: float) -> float:
        """The onset of the contact estimated at `stamp` (s)."""
        if stamp < self._onset or stamp - self._last > self.gap:
            self._onset = self._last = stamp
        else:
            self._last = max(self._last, stamp)
        return self._onset


@dataclass(frozen=True)
class BodyPart:
    """A tracked body part: its `name`, the `regions` it may touch with (names in
    BODY_REGIONS; `part_regions` gives them for the proximity monitor's parts) and `points`
    (K×3, base frame: the sphere centres or the segment's ends)."""

    name: str
    regions: tuple[str, ...]
    points: np.ndarray


def tracked_parts(bodies) -> list[BodyPart]:
    """The proximity monitor's bodies (core/contact/proximity.Body: sphere centres, or the
    trunk's box) as BodyParts: a box by its centre and the 26 centres of its faces, edges and
    corners (every point of the box within half its half-diagonal of one: 0.22 m for the
    default trunk), a lidar cluster with no regions (never chosen: the default region
    applies)."""
    grid = np.array(np.meshgrid(*[(-1.0, 0.0, 1.0)] * 3)).reshape(3, -1).T
    parts = []
    for body in bodies:
        if body.box_centre is not None:
            points = body.box_centre + (grid * body.box_half_extents) @ body.box_rotation.T
        else:
            points = body.centres
        parts.append(BodyPart(body.name, part_regions(body.name), np.asarray(points, float)))
    return parts


@dataclass(frozen=True)
class PflResult:
    """One contact against its body region's limit. `margin` = force / limit (over from
    PflConfig.estimate_share); `part` is the body part it was attributed to ('' = none near:
    the default region)."""

    stamp: float
    link: str
    point: np.ndarray
    force: float          # |F|, N
    region: str
    part: str
    phase: str            # TRANSIENT or QUASI_STATIC
    limit: float          # N
    margin: float
    over: bool
    reason: str


class PeakForces:
    """The base F/T's peak forces (stamp, |F|; ft_contact_stream.PeakForce: for one contact the
    base force is the contact force, seed 004 eqs. 4–6) for the check of the contact
    estimates: `raised(force, t)` is the estimated force scaled up to the largest peak stamped
    within `window` s of t, when that is over `RECHECK_RISE` × its force (its direction and
    point stay the estimate's). An impact of a few ms is over before a low-passed estimate
    rises; a held force's peaks sit on the peak residual's noise (a few %: raised by every
    one, the held error's p90 rose from 3.6 % to 5.6 %, over pfl.estimate_share's 5 %), so a
    peak within the estimate's own error does not raise it. A peak that comes after the last
    estimate near it and is over `RECHECK_RISE` × that estimate's force asks for its check
    again (`add` → True): the impact's last estimate may come first.

    A peak no estimate of the localizer is near (none within `window` when it came, nor
    since) waits for the F/T estimator's own estimate (`from_ft`): a contact the localizer
    does not estimate (its τ_ext under the localizer's gate: a hand hit at 0.2 m/s) is then
    checked on the F/T point and link, raised the same way, so no peak goes unchecked for
    want of a localizer estimate."""

    # The held estimates err by < 4 % (p90, benchmarks/pfl_sim.py): a larger rise is the
    # contact's. At 1.05 the pushes' peaks (~6 % over the truth on the thigh) raised the held
    # estimates: held error p90 6.5 %, and no impact more within ±10 %.
    RECHECK_RISE = 1.1
    _KEPT = 128   # peaks, and the localizer's estimates' stamps: seconds of either

    def __init__(self, window: float):
        self.window = float(window)
        self._peaks: deque[tuple[float, float]] = deque(maxlen=self._KEPT)
        self._last: tuple[float, float] | None = None   # the last estimate: stamp, |F| checked
        self._estimated: deque[float] = deque(maxlen=self._KEPT)  # the estimates' stamps
        self._waiting: list[tuple[float, float]] = []   # peaks no estimate is near

    def add(self, stamp: float, force) -> bool:
        """A peak stamped `stamp` (s); whether the last estimate is to be checked again (the
        peak waits for an F/T estimate when no estimate is near). InputRejected if not 3
        finite values."""
        if not np.isfinite(stamp):
            raise InputRejected(NOT_FINITE, f'peak force stamp {stamp} not finite')
        magnitude = float(np.linalg.norm(_vector(force, 'peak force')))
        self._peaks.append((float(stamp), magnitude))
        if self.window <= 0.0:
            return False
        if not any(abs(t - stamp) <= self.window for t in self._estimated):
            self._waiting = [*self._waiting[-self._KEPT + 1:], (float(stamp), magnitude)]
        return bool(self._last and abs(self._last[0] - stamp) <= self.window
                    and magnitude > self.RECHECK_RISE * self._last[1])

    def raised(self, force: np.ndarray, t: float) -> np.ndarray:
        """The localizer's estimate at t, raised to its peak; the peaks near t wait no more.
        InputRejected (nothing changed) if the force is not 3 finite values."""
        force = self._scaled(_vector(force, 'contact force'), t)
        self._last = (t, float(np.linalg.norm(force)))
        self._estimated.append(t)
        self._waiting = [peak for peak in self._waiting if abs(peak[0] - t) > self.window]
        return force

    def from_ft(self, force: np.ndarray, t: float) -> np.ndarray | None:
        """The F/T estimator's estimate at t raised as `raised` does, when a peak within
        `window` of t waits (the peaks near t then wait no more); None when none does.
        InputRejected (nothing taken) if the force is not 3 finite values."""
        force = _vector(force, 'F/T contact force')
        waiting = [abs(peak[0] - t) <= self.window for peak in self._waiting]
        if not any(waiting):
            return None
        self._waiting = [peak for peak, near in zip(self._waiting, waiting) if not near]
        return self._scaled(force, t)

    def _scaled(self, force: np.ndarray, t: float) -> np.ndarray:
        magnitude = float(np.linalg.norm(force))
        peak = max((m for s, m in self._peaks if abs(s - t) <= self.window),
                   default=0.0) if self.window > 0.0 else 0.0
        if peak > self.RECHECK_RISE * magnitude and magnitude > 0.0:
            force = force * (peak / magnitude)
        return force


class PflCheck:
    """The online check of one contact estimate after another (module docstring). Stateless:
    the caller tracks the contact's onset (the stamp of its first estimate)."""

    def __init__(self, config: PflConfig = PflConfig()):
        self.config = config

    def region_of(self, point: np.ndarray, parts: Sequence[BodyPart],
                  phase: str = QUASI_STATIC) -> tuple[str, str]:
        """(part, region) touched at `point`: the nearest part within `region_distance`, its
        strictest region (lowest force limit in `phase`); ('', default_region) without one. A
        part without regions or points, or with a point that is not finite, is not considered."""
        usable = [p for p in parts if p.regions and np.size(p.points)
                  and np.isfinite(p.points).all()]
        if usable:
            stacked = np.concatenate([np.reshape(p.points, (-1, 3)) for p in usable])
            owner = np.repeat(np.arange(len(usable)), [np.size(p.points) // 3 for p in usable])
            distance = np.linalg.norm(stacked - point, axis=1)
            nearest = int(np.argmin(distance))
            if distance[nearest] <= self.config.region_distance:
                return self._strictest(usable[owner[nearest]], phase)
        return '', self.config.default_region

    @staticmethod
    def _strictest(part: BodyPart, phase: str) -> tuple[str, str]:
        unknown = [r for r in part.regions if r not in BODY_REGIONS]
        if unknown:
            raise ValueError(f'body part {part.name!r}: unknown region(s) {unknown} (one of '
                             f'{", ".join(REGION_NAMES)})')
        return part.name, min(part.regions, key=lambda r: BODY_REGIONS[r].force_limit(phase))

    def check(self, link: str, point, force, stamp: float, onset: float,
              parts: Sequence[BodyPart] = ()) -> PflResult:
        """The contact at `point` (base frame, m) on `link`, force `force` on the robot (base
        frame, N), estimated at `stamp`, in contact since `onset` (s, same clock), against the
        limit of the region it touches. InputRejected for a point or force that is not 3
        finite values, or a stamp before the onset."""
        point, force_vector = _vector(point, 'contact point'), _vector(force, 'contact force')
        if not (np.isfinite(stamp) and np.isfinite(onset)):
            raise InputRejected(NOT_FINITE, f'contact stamp {stamp} / onset {onset} not finite')
        if stamp < onset:
            raise InputRejected(IMPLAUSIBLE, f'contact stamp {stamp} s is before its onset '
                                             f'{onset} s')
        phase = TRANSIENT if stamp - onset < self.config.transient_time else QUASI_STATIC
        part, name = self.region_of(point, parts, phase)
        region = BODY_REGIONS[name]
        limit = region.force_limit(phase)
        magnitude = float(np.linalg.norm(force_vector))
        margin = magnitude / limit
        over = magnitude > self.config.estimate_share * limit
        where = f'{part} ({name})' if part else f'{name} (default region: no body part near)'
        reason = (f'{magnitude:.0f} N on {link} against {where}: {"over" if over else "within"} '
                  f'its {phase} limit {limit:.0f} N ({100 * margin:.0f} %, over from '
                  f'{100 * self.config.estimate_share:.0f} %: pfl.estimate_share)')
        return PflResult(stamp, link, point, magnitude, name, part, phase, limit, margin, over,
                         reason)


def margin_rgb(margin: float) -> tuple[float, float, float]:
    """The colour a contact is shown in by its margin (force / limit): green at no force,
    yellow at half the limit, red at and over it (rviz markers and the contact pictures)."""
    share = min(max(float(margin), 0.0), 1.0)
    return min(1.0, 2.0 * share), min(1.0, 2.0 * (1.0 - share)), 0.0


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise a × b of K×3 arrays (np.cross costs ~50 µs a call in axis handling)."""
    return np.column_stack([a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
                            a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
                            a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]])


def _vector(value, what: str) -> np.ndarray:
    vector = np.asarray(value, dtype=float).ravel()
    if vector.shape != (3,):
        raise InputRejected(WRONG_SIZE, f'{what} must be 3 values, got {vector.size}')
    if not np.isfinite(vector).all():
        raise InputRejected(NOT_FINITE, f'{what} is not finite: {vector.tolist()}')
    return vector


def _unit(value, what: str) -> np.ndarray:
    vector = _vector(value, what)
    norm = float(np.linalg.norm(vector))
    if norm < 1e-9:
        raise InputRejected(IMPLAUSIBLE, f'{what} has no length: {vector.tolist()}')
    return vector / norm
