"""Proximity monitor: robot spheres against body parts and lidar objects (seed 002). No ROS.

Seed 002 covers the robot and each body part with spheres whose centres are evenly spaced on
the segment between two joints, the trunk with a box, and flags a collision between link l of
one object and link l' of another when some pair of spheres overlaps:

    r + r' ≥ ‖c − c'‖                                      (seed 002, its one equation)

checked only between objects (robot vs each body part, never a part against another), giving
one signal per body part, 0 go on / 1 stop, so a collision of the right hand does not stop the
left. It inflates the radii for a pre-contact buffer. Here:

- The robot's spheres are `LinkSurfaces.spheres` (core/robot/surfaces.py), which enclose the links.
- A body part's spheres enclose the capsule of its radius on its segment (`HumanModel`); a
  lidar cluster's spheres enclose its points (`cluster_spheres`); the trunk is a box.
- The inflation is a protective separation distance in the spirit of ISO/TS 15066 speed and
  separation monitoring, per pair of robot sphere i and body sphere (or box) j:

      S_p = v_h (T_r + T_s) + v_r T_r + B + C + Z,   B = v_r T_s / 2

  v_h: the speed at which the body may approach (a parameter: `human_speed` for skeleton
  parts, `object_speed` for lidar objects); v_r = max(0, v_i · u_ij), the speed of robot
  sphere i toward j (u_ij the unit vector from c_i to c_j), with v_i = J(c_i) q̇ taken as a
  finite difference of the sphere centres along q̇; T_r reaction time; T_s stopping time, B the
  stopping distance at a constant deceleration; C intrusion distance; Z position uncertainty.
  The margin of the pair is m_ij = (‖c_i − c_j‖ − r_i − r_j) − S_p,ij: the seed's collision
  with radii inflated by S_p is m_ij ≤ 0, and m ≤ 0 follows from any real overlap.
- Stop, per body: its smallest margin m ≤ 0. It is latched and released only once m has stayed
  above `release_distance` for `release_time` seconds (hysteresis, no chatter). The robot's
  stop: some body stops (under the same latch on the smallest margin of all), or the input is
  unusable (invalid, missing or stale): fail safe.
- Start (issue 35): the robot's first release (its stop raised by `fail` before the inputs
  came, or by a body) waits `start_hold` s, if longer than `release_time`, of fresh inputs
  and clear margins, on the stamps' clock: any stale or invalid input meanwhile (`fail`)
  starts it again. The inputs of a start may come unsteadily for a while (a node's cloud
  worker and the suite's other processes still loading on a small machine): released at the
  first fresh clusters, the stop came back a check later for clusters gone stale, a flicker
  counted as a stop no contact caused. Once released, or reset, `release_time` rules.
- Reset (`reset`, an operator's acknowledgement): a stop beside something that does not go
  away (a fixture, a person working there) never clears by itself, since the arm stopped
  inside the protective distance. A reset releases the robot's stop, and from then on what
  matters is the arm's approach: each robot sphere may not get more than `reset_tolerance`
  nearer (in margin, which falls with the speed toward the body as well as with the
  distance) than it has been since the reset, while its margin is ≤ 0; if one does, the
  stop is raised and latched again. Spheres away from everything keep the plain rule
  (margin ≤ 0 stops). The speed scale is then at least `reset_speed_scale`, so the arm can
  move away slowly; once the smallest margin has cleared (as a latch releases), the plain
  rules are back. Part signals keep showing the parts inside their protective distance.
- Hands (issue 29, for touch classification): each hand part's (HANDS) distance to each
  robot link, from the same sphere pairs (`ProximityResult.hand_distances`).
- Speed scale in [0, 1] for the controller's trajectory time scaling (the smaller of it and the
  detector's f_S wins): for each body clip(m / slowdown_distance, 0, 1), i.e. 1 beyond
  S_p + slowdown_distance, falling linearly to 0 at S_p; the smallest over bodies; 0 while
  the robot's stop is raised. It falls at once and rises at most `recovery_rate` per second.
  As the arm slows, v_r and with it S_p shrink, so the arm creeps no closer than the static
  part of S_p (v_h (T_r + T_s) + C + Z) and stops there. A body is warned about when its scale
  is below 1.
- Power and force limiting (issue 38, core/contact/pfl.py), with `speed_limit_robot` set:
  each robot link approaching a tracked body part (one with body regions) within its warning
  zone (m < slowdown_distance) at v_r, at the pair of the two with the smallest margin, may
  approach at most v_max = F_T / √(μ k) of the part's strictest region, m_R the arm's
  effective mass at the robot sphere's centre along u (`pfl.permissible_speeds`). v_r is
  measured at the scale s already published, so the scale that brings it to a permitted
  speed v_p is s v_p / v_r: the pair's ratio v_p / v_r. The permitted speed falls from
  unlimited where the warning zone begins to v_max halfway into it, v_p = v_max / w with w
  rising linearly from 0 at m = slowdown_distance to 1 at m = slowdown_distance / 2 and
  beyond, so that the limit sets in continuously as a body comes near, never as a step. The
  scale is then min(target, s + recovery_rate dt, s · ratio), the smallest ratio over pairs:
  it falls at once when a part approaches too fast, rises at the recovery rate, and never
  above the scale that brings the approach to v_p (while s = 0 the arm's speed says nothing
  of its path's, and the rise alone applies). `pfl_ratio` reports min(1, ratio), and
  `body_speed_share` and `link_speed_share` v_r / v_max (the largest per body part and per
  robot link). The body's own speed
  is not in v_r (the tracker's keypoints carry none): the risk assessment's. Lidar objects
  keep the plain rule: what they are is not known.
- Collaborative operation by power and force limiting (issue 38, `limit_speed(robot,
  collaborative=True)`, ISO/TS 15066 5.5.5 instead of 5.5.4's separation): a tracked body
  part that contact is allowed with (`pfl.contact_allowed`: a skeleton's part whose regions
  all allow transient contact; not the head or neck) stops nothing by its margin: neither its
  own signal, nor the robot's, nor the reset's approach rule, nor the speed scale's ramp
  count it. The speed limit alone keeps the arm's approach to it at most v_max, inside the
  protective distance as well (there w = 1), and the arm may touch it; a contact over the
  force limit is the force check's (a `pfl` stop, in the node). Head and neck, lidar objects
  and a failed or stale input stop as before. It needs the speed limit (refused without).

Inputs are arrays in the robot's base frame (REP 103, metres, seconds; t is the stamp of the
input on one clock). The pairs within the watched range are found and their margins reduced
in one compiled pass over the robot's spheres and the body elements (`_check`,
core/compiled.py; issue 35: ~10x faster than the array formula with a KD-tree it replaced,
giving the same bits), the bodies' spheres in blocks that are skipped whole when beyond reach.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from contact_estimation.core.compiled import kernel
from contact_estimation.core.contact.pfl import (contact_allowed, part_regions,
                                                 permissible_speeds)
from contact_estimation.core.input_rejected import (IMPLAUSIBLE, NOT_FINITE, WRONG_SIZE,
                                                    InputRejected)
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.settings import checked, setting

# The keypoints of the COCO-17 skeleton, in its order (most 2-D/3-D pose trackers use it).
COCO_17 = ('nose', 'left_eye', 'right_eye', 'left_ear', 'right_ear', 'left_shoulder',
           'right_shoulder', 'left_elbow', 'right_elbow', 'left_wrist', 'right_wrist',
           'left_hip', 'right_hip', 'left_knee', 'right_knee', 'left_ankle', 'right_ankle')

SKELETON, CLUSTERS = 'skeleton', 'clusters'
# The body parts that are a person's hands (DEFAULT_PARTS: beyond each wrist): the touch
# classifier asks which of the robot's links a hand is at (`ProximityResult.hand_distances`).
HANDS = ('left_hand', 'right_hand')

SPHERE_SPACING = 0.02  # m between a body part's sphere centres (HumanModel)
# The check's pair search takes the bodies' spheres in blocks of this many neighbours (ordered
# by cells of BLOCK_CELL m), and skips a block beyond its cut-off whole.
BLOCK, BLOCK_CELL = 16, 0.1
# Time step of the finite difference that turns q̇ into sphere velocities (s): v = (c(q + h q̇) −
# c(q)) / h, exact to O(h |q̇|² · reach), far below the lidar's noise.
_VELOCITY_STEP = 1e-3
# Keypoints farther than this from the base (m) are a tracker's garbage, not a person in the
# cell, and a body segment longer than this (m) is no human limb: the skeleton is refused
# (stop) before spheres are counted along it (1e200 m made the count infinite, and a long
# segment would cost millions of spheres).
MAX_KEYPOINT_DISTANCE = 1000.0
MAX_SEGMENT_LENGTH = 5.0


class ProximityConfigError(ValueError):
    """A proximity parameter or body model is unusable."""


# ------------------------------------------------------------------------ human body
@dataclass(frozen=True)
class SegmentPart:
    """A body part swept by spheres along a segment (seed 002: spheres evenly spaced between
    joints).

    `start`, `end`: keypoint names; each end of the segment is the mean of its keypoints (the
    neck runs from the shoulders' midpoint to the ears'). `span`: the stretch of start → end
    covered, as fractions of it (a hand beyond the wrist: elbow → wrist over (1.0, 1.4)).
    `radius`: of the part (m).
    """

    name: str
    start: tuple[str, ...]
    end: tuple[str, ...]
    radius: float
    span: tuple[float, float] = (0.0, 1.0)


@dataclass(frozen=True)
class BoxPart:
    """The trunk as a box (seed 002: the body is a parallelepiped) from shoulders and hips.

    Height along the hips' midpoint → the shoulders', width along left → right, depth across
    both; `half_depth` (m) is the trunk's half thickness, `padding` (m) widens and heightens it.
    """

    name: str
    top: tuple[str, str] = ('left_shoulder', 'right_shoulder')
    bottom: tuple[str, str] = ('left_hip', 'right_hip')
    half_depth: float = 0.12
    padding: float = 0.05


def _arm(side: str) -> tuple[SegmentPart, ...]:
    return (SegmentPart(f'{side}_upper_arm', (f'{side}_shoulder',), (f'{side}_elbow',), 0.06),
            SegmentPart(f'{side}_forearm', (f'{side}_elbow',), (f'{side}_wrist',), 0.05),
            SegmentPart(f'{side}_hand', (f'{side}_elbow',), (f'{side}_wrist',), 0.06, (1.0, 1.4)))


# Seed 002's parts: arms (here upper arm, forearm and hand, each with its own signal), neck,
# head and trunk; legs are out of the robot's workspace. Radii of an adult with some margin.
DEFAULT_PARTS = (_arm('left') + _arm('right') + (
    SegmentPart('neck', ('left_shoulder', 'right_shoulder'), ('left_ear', 'right_ear'), 0.06),
    SegmentPart('head', ('left_ear',), ('right_ear',), 0.12),
    BoxPart('trunk')))


@dataclass
class Body:
    """One thing the robot must not touch: spheres (centres N×3, radii N, base frame), or a box
    (`box_rotation` columns: its axes in the base frame; `box_centre`; `box_half_extents`)."""

    name: str
    centres: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    radii: np.ndarray = field(default_factory=lambda: np.zeros(0))
    box_rotation: np.ndarray | None = None
    box_centre: np.ndarray | None = None
    box_half_extents: np.ndarray | None = None


class HumanModel:
    """Turns a tracked skeleton (keypoints in `keypoint_names` order, base frame) into body parts.

    `sphere_spacing`: at most this far between neighbouring sphere centres on a segment (m).
    """

    def __init__(self, parts: Sequence[SegmentPart | BoxPart] = DEFAULT_PARTS,
                 keypoint_names: Sequence[str] = COCO_17,
                 sphere_spacing: float = SPHERE_SPACING):
        self.parts = tuple(parts)
        self.keypoint_names = tuple(keypoint_names)
        self.sphere_spacing = float(sphere_spacing)
        self.part_names = [part.name for part in self.parts]
        self._index = {name: i for i, name in enumerate(self.keypoint_names)}
        self._validate()
        used = {name for part in self.parts for name in _keypoints_of(part)}
        self._used = np.array(sorted(self._index[name] for name in used), dtype=int)

    def _validate(self) -> None:
        if len(set(self.keypoint_names)) != len(self.keypoint_names):
            raise ProximityConfigError('keypoint names must be unique')
        if not self.parts or len(set(self.part_names)) != len(self.part_names):
            raise ProximityConfigError('body parts must be given, with unique names')
        if not (np.isfinite(self.sphere_spacing) and self.sphere_spacing > 0):
            raise ProximityConfigError(f'sphere_spacing = {self.sphere_spacing} m: must be > 0')
        for part in self.parts:
            unknown = [k for k in _keypoints_of(part) if k not in self._index]
            if unknown:
                raise ProximityConfigError(
                    f'body part {part.name!r} uses keypoints {unknown} that are not in the '
                    f'keypoint order ({", ".join(self.keypoint_names)})')
            segment = isinstance(part, SegmentPart)
            size, extras = ((part.radius, part.span) if segment
                            else (part.half_depth, (part.padding,)))
            if not (np.isfinite([size, *extras]).all() and size > 0
                    and (part.span[0] <= part.span[1] if segment else part.padding >= 0)):
                raise ProximityConfigError(
                    f'body part {part.name!r}: sizes must be finite, the radius (half depth) '
                    f'> 0, the span ascending (the padding >= 0): {part}')

    def bodies(self, keypoints) -> list[Body]:
        """The body parts of one person. InputRejected 'wrong_size' on a wrong count,
        'not_finite' on a keypoint that is no number or NaN and that some part uses (keypoints
        no part uses, e.g. knees and ankles, may be NaN), 'implausible' on one too far away or
        a part too long."""
        try:
            points = np.asarray(keypoints, dtype=float)
        except (TypeError, ValueError) as err:
            raise InputRejected(NOT_FINITE, f'skeleton keypoints are not numbers: {err}') from err
        if points.shape != (len(self.keypoint_names), 3):
            raise InputRejected(
                WRONG_SIZE, f'skeleton has shape {points.shape}, expected '
                f'{len(self.keypoint_names)} keypoints × 3 (order: '
                f'{", ".join(self.keypoint_names)})')
        bad = self._used[~np.isfinite(points[self._used]).all(axis=1)]
        if len(bad):
            raise InputRejected(NOT_FINITE, 'skeleton keypoints not finite: '
                                + ', '.join(self.keypoint_names[i] for i in bad))
        far = self._used[np.abs(points[self._used]).max(axis=1) > MAX_KEYPOINT_DISTANCE]
        if len(far):
            raise InputRejected(IMPLAUSIBLE, f'skeleton keypoints farther than '
                                f'{MAX_KEYPOINT_DISTANCE:g} m: '
                                + ', '.join(self.keypoint_names[i] for i in far))
        return [self._segment(part, points) if isinstance(part, SegmentPart)
                else self._box(part, points) for part in self.parts]

    def _mean(self, names: tuple[str, ...], points: np.ndarray) -> np.ndarray:
        return points[[self._index[name] for name in names]].mean(axis=0)

    def _segment(self, part: SegmentPart, points: np.ndarray) -> Body:
        """Spheres evenly spaced on the segment (seed 002) enclosing the capsule of `radius`:
        with n spheres h ≤ sphere_spacing apart, radius √(r² + (h/2)²) covers every point of
        the capsule (within h/2 along the axis of some centre, and within r across)."""
        a, b = self._mean(part.start, points), self._mean(part.end, points)
        a, b = a + part.span[0] * (b - a), a + part.span[1] * (b - a)
        length = float(np.linalg.norm(b - a))
        if length > MAX_SEGMENT_LENGTH:
            raise InputRejected(IMPLAUSIBLE, f'body part {part.name!r} is {length:.3g} m long '
                                f'(a human segment is < {MAX_SEGMENT_LENGTH:g} m)')
        count = int(np.ceil(length / self.sphere_spacing)) + 1
        gap = length / max(count - 1, 1)
        centres = a + np.linspace(0.0, 1.0, count)[:, None] * (b - a)
        return Body(part.name, centres, np.full(count, np.hypot(part.radius, gap / 2)))

    def _box(self, part: BoxPart, points: np.ndarray) -> Body:
        """Box with height hips → shoulders, width left → right (made orthogonal to the height)."""
        top_left, top_right = (points[self._index[k]] for k in part.top)
        bottom_left, bottom_right = (points[self._index[k]] for k in part.bottom)
        up = (top_left + top_right - bottom_left - bottom_right) / 2
        height = float(np.linalg.norm(up))
        up = up / height if height > 0 else np.array([0.0, 0.0, 1.0])
        across = top_right - top_left + bottom_right - bottom_left
        across = across - (across @ up) * up
        if np.linalg.norm(across) < 1e-9:  # shoulders and hips on one line with the height
            across = np.cross(up, [1.0, 0.0, 0.0] if abs(up[0]) < 0.9 else [0.0, 1.0, 0.0])
        across /= np.linalg.norm(across)
        rotation = np.column_stack([across, np.cross(up, across), up])
        corners = np.array([top_left, top_right, bottom_left, bottom_right])
        centre = corners.mean(axis=0)
        half_width = np.max(np.abs((corners - centre) @ across))
        half_extents = np.array([half_width + part.padding, part.half_depth,
                                 height / 2 + part.padding])
        return Body(part.name, box_rotation=rotation, box_centre=centre,
                    box_half_extents=half_extents)


def _keypoints_of(part: SegmentPart | BoxPart) -> tuple[str, ...]:
    return (part.start + part.end) if isinstance(part, SegmentPart) else (part.top + part.bottom)


def standing_skeleton(centre, yaw: float = 0.0, reach: float = 0.5) -> np.ndarray:
    """COCO-17 keypoints (17×3, base frame) of an adult standing with the shoulders' midpoint
    at `centre`, facing −x turned by `yaw` (rad, about z), both arms straight forward at
    shoulder height over `reach` (m): a known person for simulations, tests and benchmarks."""
    half = reach / 2
    local = {
        'nose': (-0.1, 0, 0.22), 'left_eye': (-0.08, -0.03, 0.27),
        'right_eye': (-0.08, 0.03, 0.27), 'left_ear': (0, -0.08, 0.25),
        'right_ear': (0, 0.08, 0.25), 'left_shoulder': (0, -0.2, 0),
        'right_shoulder': (0, 0.2, 0), 'left_elbow': (-half, -0.2, 0),
        'right_elbow': (-half, 0.2, 0), 'left_wrist': (-reach, -0.2, 0),
        'right_wrist': (-reach, 0.2, 0), 'left_hip': (0, -0.15, -0.5),
        'right_hip': (0, 0.15, -0.5), 'left_knee': (0, -0.15, -0.95),
        'right_knee': (0, 0.15, -0.95), 'left_ankle': (0, -0.15, -1.4),
        'right_ankle': (0, 0.15, -1.4)}
    c, s = np.cos(yaw), np.sin(yaw)
    turn = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return np.array([local[name] for name in COCO_17]) @ turn.T + np.asarray(centre, dtype=float)


# ------------------------------------------------------------------------ lidar objects
def cluster_spheres(points, voxel_size: float) -> tuple[np.ndarray, np.ndarray]:
    """Spheres enclosing a cluster of points (N×3, base frame): one per occupied voxel of side
    `voxel_size`, at the mean of its points, its radius reaching the farthest of them.
    Non-finite points (no return) are dropped."""
    points = np.asarray(points, dtype=float).reshape(-1, 3)
    points = points[np.isfinite(points).all(axis=1)]
    if not len(points):
        return np.zeros((0, 3)), np.zeros(0)
    cells = np.floor(points / voxel_size).astype(np.int64)
    cells -= cells.min(axis=0)
    return _voxel_spheres(points, np.ravel_multi_index(cells.T, cells.max(axis=0) + 1))


@kernel
def _voxel_spheres(points, key):
    """`cluster_spheres` of the points whose voxels are numbered `key`: the spheres in the
    order of their keys, each at the mean of its points (summed in the points' order) with
    the radius reaching the farthest (compiled: a lidar's objects come on the check's
    thread, issue 35)."""
    order = np.argsort(key, kind='mergesort')
    voxel = np.empty(len(key), dtype=np.int64)
    count = 0
    for k in range(len(key)):
        if k == 0 or key[order[k]] != key[order[k - 1]]:
            count += 1
        voxel[order[k]] = count - 1
    centres, members = np.zeros((count, 3)), np.zeros(count)
    for i in range(len(key)):
        for axis in range(3):
            centres[voxel[i], axis] += points[i, axis]
        members[voxel[i]] += 1.0
    for v in range(count):
        for axis in range(3):
            centres[v, axis] /= members[v]
    reach = np.zeros(count)
    for i in range(len(key)):
        v = voxel[i]
        dx, dy, dz = (points[i, 0] - centres[v, 0], points[i, 1] - centres[v, 1],
                      points[i, 2] - centres[v, 2])
        reach[v] = max(reach[v], np.sqrt(dx * dx + dy * dy + dz * dz))
    return centres, reach


# ------------------------------------------------------------------------ monitor
@dataclass(frozen=True)
@checked
class ProximityConfig:
    """Parameters of the protective separation distance (ISO/TS 15066 in spirit) and the signals."""

    reaction_time: float = setting(
        0.1, 'T_r, s: sensing and the stop reaching the arm (the check period 1/check_rate '
        'and max_lag are added to it)', range=(0.0, 5.0))
    stopping_time: float = setting(
        0.3, "T_s, s: the arm's stop from speed (stopping distance v_r T_s / 2)",
        range=(0.0, 5.0))
    human_speed: float = setting(
        1.6, 'v_h, m/s: how fast a tracked body part may approach (ISO 13855: 1.6)',
        range=(0.0, 10.0))
    object_speed: float = setting(  # a person the tracker missed
        1.6, 'm/s: how fast a lidar object may approach (0: the cell holds only fixtures)',
        range=(0.0, 10.0))
    intrusion_distance: float = setting(0.0, 'C, m: reach past the modelled body surface',
                                        range=(0.0, 2.0))
    position_uncertainty: float = setting(0.05, 'Z, m: sensing and robot position errors',
                                          range=(0.0, 1.0))
    slowdown_distance: float = setting(
        0.3, 'm beyond the protective distance over which the speed scale falls from 1 to 0',
        range=(1e-3, 5.0))
    release_distance: float = setting(
        0.05, 'm: a stop releases only with every margin above this ...', range=(0.0, 2.0))
    release_time: float = setting(0.5, 's: ... for this long', range=(0.0, 60.0))
    start_hold: float = setting(
        1.0, "s: at a start, the stop is released only once the inputs have been fresh and "
        'every margin clear for this long (release_time if longer), so that a start never '
        'releases and stops again while its inputs settle', range=(0.0, 60.0))
    recovery_rate: float = setting(1.0, '1/s: the speed scale rises at most this fast',
                                   range=(1e-3, 100.0))
    reset_tolerance: float = setting(
        0.02, 'm: after ~/reset, how much nearer (in margin) than it has been since the reset '
        'a robot sphere may get before the stop returns', range=(0.0, 0.5))
    reset_speed_scale: float = setting(
        0.1, 'speed scale after ~/reset while still inside the protective distance (to move '
        'away slowly)', range=(0.0, 1.0))
    body_timeout: float = setting(
        0.3, "s: a skeleton or cloud older than this (by stamp, on the joint states' clock) "
        'is stale: stop', range=(1e-3, 10.0))
    voxel_size: float = setting(  # `cluster_spheres`
        0.05, 'm: lidar cluster → spheres of about this size', range=(1e-3, 1.0))
    report_range: float = setting(  # see ProximityMonitor._check
        0.5, 'm: distances are exact at least this far (farther: inf)', range=(0.0, 10.0))


@dataclass
class ProximityResult:
    """The monitor's verdict at time `t`. Per-body arrays follow `body_names`, per-link arrays
    `link_names`; distances are between sphere (or box) surfaces, m, negative where they
    overlap, exact up to the watched range (at least `report_range`), inf beyond it, NaN when
    unknown (a `problem`)."""

    t: float
    stop: bool                      # the robot's signal (seed 002: 1 stop, 0 go on)
    speed_scale: float              # [0, 1], for the trajectory time scaling
    problem: str                    # why the input is unusable ('' when it is fine)
    source: str                     # SKELETON, CLUSTERS or '' (no fresh source)
    bodies_stamp: float             # s, stamp of the skeleton or cloud checked (nan: none)
    body_names: list[str]
    body_stop: np.ndarray           # bool per body, latched (seed 002's per-part signal)
    body_warning: np.ndarray        # bool per body: within S_p + slowdown_distance
    body_distance: np.ndarray       # smallest surface distance to the robot
    body_margin: np.ndarray         # smallest (distance − S_p) over its pairs
    body_protective_distance: np.ndarray  # S_p of the pair with the smallest margin
    body_link: list[str | None]     # the robot link of that pair
    link_names: list[str]
    link_distance: np.ndarray       # per robot link, to the nearest body
    body_link_distance: np.ndarray  # bodies × links: each body to each link
    robot_centres: np.ndarray       # M×3, the robot's spheres (radii: LinkSurfaces.sphere_radii)
    robot_sphere_distance: np.ndarray  # M, each robot sphere to the nearest body
    bodies: list[Body]              # the bodies checked (their spheres and boxes, for markers)
    reset_active: bool              # a reset is in force: the approach rule (module doc: Reset)
    starting: str                   # why the start holds the stop ('' when it does not)
    # Power and force limiting (module doc): per body, the largest share v_r / v_max of the
    # robot links approaching it in its warning zone (0: none); the scale's ratio from it.
    body_speed_share: np.ndarray
    link_speed_share: np.ndarray
    pfl_ratio: float

    def hand_distances(self) -> dict[str, np.ndarray]:
        """Each tracked hand (HANDS) → its distance to each link (`link_names` order), m;
        empty unless the bodies checked are a tracked skeleton's (and the check was made)."""
        if self.source != SKELETON or self.problem:
            return {}
        return {name: self.body_link_distance[k] for k, name in enumerate(self.body_names)
                if name in HANDS}

    def part_signals(self) -> dict[str, int]:
        """Seed 002's signals: body name → 0 go on / 1 stop, and 'robot' → the robot's."""
        return {**{n: int(s) for n, s in zip(self.body_names, self.body_stop)},
                'robot': int(self.stop)}


@dataclass
class _BodySet:
    """The bodies from one source at one stamp, flattened for the compiled check."""

    t: float
    source: str
    names: list[str]
    bodies: list[Body] = field(default_factory=list)
    problem: str = ''

    def __post_init__(self):
        spheres = [k for k, b in enumerate(self.bodies) if b.box_centre is None]
        boxes = [k for k, b in enumerate(self.bodies) if b.box_centre is not None]
        centres = np.vstack([self.bodies[k].centres for k in spheres] or [np.zeros((0, 3))])
        # In blocks of BLOCK neighbours, each with its bounding box: the check skips a block
        # whose box is beyond the cut-off from a robot sphere (`_pair_kernel`).
        order = _block_order(centres)
        self.centres = centres[order]
        self.radii = np.concatenate([self.bodies[k].radii for k in spheres]
                                    or [np.zeros(0)])[order]
        self.sphere_body = np.repeat(np.array(spheres, dtype=int),
                                     [len(self.bodies[k].radii) for k in spheres])[order]
        starts = np.arange(0, len(order), BLOCK)
        self.block_low, self.block_high = (
            (np.minimum.reduceat(self.centres, starts), np.maximum.reduceat(self.centres, starts))
            if len(order) else (np.zeros((0, 3)), np.zeros((0, 3))))
        self.box_body = np.array(boxes, dtype=int)
        self.box_rotation = np.array([self.bodies[k].box_rotation for k in boxes]).reshape(-1, 3, 3)
        self.box_centre = np.array([self.bodies[k].box_centre for k in boxes]).reshape(-1, 3)
        self.box_half = np.array([self.bodies[k].box_half_extents for k in boxes]).reshape(-1, 3)
        self.largest_radius = float(np.max(self.radii, initial=0.0))
        # Power and force limiting: the body regions of each tracked part (a lidar object has
        # none), and whether collaborative operation may touch it (module doc).
        self.regions = [part_regions(n) if self.source == SKELETON else () for n in self.names]
        self.touchable = np.array([contact_allowed(r) for r in self.regions], dtype=bool)
        self._room: tuple | None = None

    def room(self, robot_spheres: int) -> tuple[tuple, _Approach]:
        """Room for every pair of `robot_spheres` spheres with these bodies' elements
        (`_check`): row, body, distance, direction; and for the approaching ones. Made at the
        first check with them and reused: MiBs allocated at every check cost page faults."""
        capacity = robot_spheres * (len(self.radii) + len(self.box_body))
        if self._room is None or len(self._room[0][0]) != capacity:
            self._room = ((np.empty(capacity, np.int64), np.empty(capacity, np.int64),
                           np.empty(capacity), np.empty((capacity, 3))),
                          _Approach(np.empty(capacity, np.int64), np.empty(capacity, np.int64),
                                    np.empty((capacity, 3)), np.empty(capacity),
                                    np.empty(capacity)))
        return self._room


def _block_order(points: np.ndarray) -> np.ndarray:
    """The order of `points` (N×3) by cells of BLOCK_CELL m (x, then y, then z), so that runs
    of BLOCK of them are neighbours."""
    return np.lexsort((points // BLOCK_CELL).T[::-1])


class ProximityMonitor:
    """Seed 002's per-body stop signals and a speed scale, from the robot state and the bodies.

    Feed it as inputs arrive (arrays in the robot's base frame; t: their stamps, s, one clock):
    `set_skeleton` (one person's keypoints, or an empty array when nobody is tracked),
    `set_clusters` (lidar clusters that are not the robot, each N×3), and `update(t, q, q̇)`
    per joint state. Bodies come from a fresh skeleton with a person, else from fresh
    clusters, else (a fresh empty skeleton) there are none; with no fresh source, or a fresh
    invalid one, the robot stops. `fail(t, reason)` stops for a problem seen outside (e.g.
    joint states gone stale). Nothing here raises on bad input: it becomes `problem`.
    """

    def __init__(self, surfaces: LinkSurfaces, config: ProximityConfig = ProximityConfig(),
                 human: HumanModel | None = None, speed_limit_robot=None,
                 collaborative: bool = False):
        self.surfaces = surfaces
        self.config = config
        self.human = human or HumanModel()
        self.limit_speed(speed_limit_robot, collaborative)
        self._skeleton: _BodySet | None = None
        self._clusters: _BodySet | None = None
        self._latched: dict[object, float | None] = {}  # key → clear since (None: not clear)
        self._robot_key = object()                      # the robot's latch, never a body name
        self._reset_key = object()                      # the reset's span (cleared as a latch)
        self._best_since_reset: np.ndarray | None = None  # per robot sphere; None: no reset
        self._last: ProximityResult | None = None
        self._last_sphere_margin = np.zeros(0)
        self._scale = 0.0                               # start stopped, ramp up
        self._stopped = True
        self._t: float | None = None
        self._started = False  # the robot's stop released once (module doc: Start)
        # The check's kernels compiled, or loaded from numba's cache, now rather than live.
        still = np.zeros((len(surfaces.sphere_radii), 3))
        _check(still, surfaces.sphere_radii, still, surfaces.sphere_link, len(surfaces.links),
               _BodySet(0.0, CLUSTERS, []), config, 0.0, np.ones(0, bool))
        cluster_spheres(still, config.voxel_size)

    def limit_speed(self, robot, collaborative: bool = False) -> None:
        """The power and force limit's speed limit with `robot`, the arm with its payload for
        v_max (None: not limited), and collaborative operation (module doc), which rests on
        it: ProximityConfigError when asked for without a robot."""
        if collaborative and robot is None:
            raise ProximityConfigError('collaborative operation needs the speed limit: without '
                                       'it nothing holds an approach inside the protective '
                                       'distance at v_max')
        self.speed_limit_robot, self.collaborative = robot, collaborative

    # ------------------------------------------------------------------ inputs
    def set_skeleton(self, t: float, keypoints) -> None:
        """One person's keypoints (K×3, `human.keypoint_names` order) or an empty array (nobody
        tracked). An unusable skeleton (`HumanModel.bodies`) is rejected, which stops the
        robot while it is fresh, and its InputRejected raised for the caller to count."""
        if np.size(keypoints) == 0:
            self._skeleton = _BodySet(t, SKELETON, [])
            return
        try:
            self._skeleton = _BodySet(t, SKELETON, list(self.human.part_names),
                                      self.human.bodies(keypoints))
        except InputRejected as err:
            self.reject(t, SKELETON, f'invalid skeleton: {err}')
            raise

    def reject(self, t: float, source: str, problem: str) -> str:
        """The input of `source` (SKELETON or CLUSTERS) at t is unusable for `problem` (e.g.
        in an unknown frame): while it is the freshest of its source, the robot stops."""
        names = list(self.human.part_names) if source == SKELETON else []
        bodies = _BodySet(t, source, names, problem=problem)
        if source == SKELETON:
            self._skeleton = bodies
        else:
            self._clusters = bodies
        return problem

    def set_clusters(self, t: float, clusters: Sequence) -> str:
        """Lidar clusters that are not the robot (each an array of points, N×3); cluster i
        becomes the body `object_<i>`. Returns the problem ('' if none)."""
        try:
            bodies = []
            for i, cluster in enumerate(clusters):
                centres, radii = cluster_spheres(cluster, self.config.voxel_size)
                if len(radii):
                    bodies.append(Body(f'object_{i}', centres, radii))
        except (TypeError, ValueError) as err:
            return self.reject(t, CLUSTERS, f'invalid lidar clusters: {err}')
        self._clusters = _BodySet(t, CLUSTERS, [b.name for b in bodies], bodies)
        return ''

    def reset(self) -> str:
        """An operator's acknowledgement of the robot's stop (module doc: Reset). Returns
        why it is refused ('' when done): no check yet, or the input is unusable."""
        last = self._last
        if last is None or last.problem or not len(self._last_sphere_margin):
            return ('refused: ' + (last.problem if last and last.problem
                                   else 'no check of the bodies yet'))
        if not last.stop:
            return ''
        self._latched.pop(self._robot_key, None)
        self._latched[self._reset_key] = None
        self._best_since_reset = self._last_sphere_margin.copy()
        self._started = True
        return ''

    # ------------------------------------------------------------------ outputs
    def fail(self, t: float, reason: str) -> ProximityResult:
        """Stop everything for `reason` (fail safe), keeping the latches and the scale's ramp."""
        return self._verdict(t, reason, self._current(t), None)

    def update(self, t: float, q, velocity) -> ProximityResult:
        """The check at the joint state (q, q̇) stamped t against the bodies in force at t."""
        current = self._current(t)
        n = self.surfaces.robot.n
        q, velocity = np.asarray(q, dtype=float), np.asarray(velocity, dtype=float)
        if q.shape != (n,) or velocity.shape != (n,):
            return self.fail(t, f'joint state has {q.size} positions and {velocity.size} '
                                f'velocities, the robot {n} joints')
        if not (np.isfinite(q).all() and np.isfinite(velocity).all()):
            return self.fail(t, 'joint state not finite')
        if current is None:
            return self.fail(t, self._stale_reason(t))
        if current.problem:
            return self.fail(t, current.problem)
        centres = self.surfaces.sphere_centres(q)
        sphere_velocity = (self.surfaces.sphere_centres(q + _VELOCITY_STEP * velocity)
                           - centres) / _VELOCITY_STEP
        speed = self.config.human_speed if current.source == SKELETON else self.config.object_speed
        stops = ~current.touchable if self.collaborative else np.ones(len(current.names), bool)
        check = _check(centres, self.surfaces.sphere_radii, sphere_velocity,
                       self.surfaces.sphere_link, len(self.surfaces.links), current,
                       self.config, speed, stops)
        if self.speed_limit_robot is not None and len(check.approaching.row):
            self._limit_speed(q, centres, current, check)
        return self._verdict(t, '', current, check, centres)

    def _limit_speed(self, q: np.ndarray, centres: np.ndarray, current: _BodySet,
                     check: _Check) -> None:
        """The power and force limit's ratio and per-body shares (module doc), into `check`:
        one pair per (tracked body part, robot link), one kinematics pass for them all."""
        pairs = check.approaching
        regions = current.regions
        links = self.surfaces.sphere_link[pairs.row]
        usable = np.flatnonzero(np.array([bool(r) for r in regions])[pairs.body])
        key = pairs.body[usable] * len(self.surfaces.links) + links[usable]
        nearest_first = np.lexsort((pairs.margin[usable], key))  # by key, then margin
        chosen = usable[nearest_first[np.unique(key[nearest_first], return_index=True)[1]]]
        if not len(chosen):
            return
        v_max = permissible_speeds(
            self.speed_limit_robot, q, [self.surfaces.links[k] for k in links[chosen]],
            centres[pairs.row[chosen]], pairs.direction[chosen],
            [regions[b] for b in pairs.body[chosen]])
        approach = pairs.approach[chosen]
        weight = np.clip(2.0 * (1.0 - pairs.margin[chosen] / self.config.slowdown_distance),
                         0.0, 1.0)  # > 0: every pair is within the warning zone
        check.pfl_ratio = float(np.min(v_max / (weight * approach)))
        np.maximum.at(check.speed_share, pairs.body[chosen], approach / v_max)
        check.link_speed_share = np.zeros(len(self.surfaces.links))
        np.maximum.at(check.link_speed_share, links[chosen], approach / v_max)

    # ------------------------------------------------------------------ internals
    def _fresh(self, bodies: _BodySet | None, t: float) -> bool:
        return bodies is not None and t - bodies.t <= self.config.body_timeout

    def _current(self, t: float) -> _BodySet | None:
        """The source in force at t: a fresh skeleton with a person (or a fresh invalid one),
        else fresh clusters, else a fresh empty skeleton; None when nothing is fresh."""
        skeleton = self._skeleton if self._fresh(self._skeleton, t) else None
        if skeleton is not None and (skeleton.bodies or skeleton.problem):
            return skeleton
        return self._clusters if self._fresh(self._clusters, t) else skeleton

    def _stale_reason(self, t: float) -> str:
        ages = [f'{s.source} {t - s.t:.3f} s old' for s in (self._skeleton, self._clusters) if s]
        return (f'no fresh skeleton or lidar clusters ({", ".join(ages) or "none received"}; '
                f'body_timeout {self.config.body_timeout} s)')

    def _latch(self, key, t: float, margin: float, hold: float | None = None) -> bool:
        """Stop when margin ≤ 0; once stopped, release only after `hold` s (`release_time`
        by default) with the margin above `release_distance` throughout (hysteresis in
        distance and time)."""
        if margin <= 0:
            self._latched[key] = None
            return True
        if key not in self._latched:
            return False
        if margin <= self.config.release_distance:
            self._latched[key] = None
            return True
        since = self._latched[key]
        if since is None:
            since = self._latched[key] = t
        if t - since >= (self.config.release_time if hold is None else hold):
            del self._latched[key]
            return False
        return True

    def _verdict(self, t: float, problem: str, current: _BodySet | None,
                 check: _Check | None, centres: np.ndarray | None = None) -> ProximityResult:
        """Latches, the robot's stop and the rate-limited speed scale; `check` None: stop all."""
        names = current.names if current else []
        margin = check.margin if check else np.full(len(names), -np.inf)
        # A body collaborative operation may touch never stops by its margin (module doc).
        stopping = np.where(check.stops, margin, np.inf) if check else margin
        body_stop = np.array([self._latch(n, t, m) for n, m in zip(names, stopping)], dtype=bool)
        for gone in set(self._latched) - set(names) - {self._robot_key, self._reset_key}:
            del self._latched[gone]  # objects renamed or gone: the robot's latch still holds
        smallest = float(np.min(stopping, initial=np.inf)) if check else -np.inf
        stop = self._robot_stop(t, smallest, check)
        target = 0.0 if stop else min(max(smallest / self.config.slowdown_distance, 0.0), 1.0)
        if self._best_since_reset is not None and not stop:
            target = max(target, self.config.reset_speed_scale)
        # The ramp up starts when the stop is released, not at the last stopped sample.
        dt = 0.0 if self._t is None or self._stopped else max(t - self._t, 0.0)
        self._t, self._stopped = t, stop
        rising = self._scale + self.config.recovery_rate * dt
        ratio = check.pfl_ratio if check else np.inf
        if self._scale > 0.0:  # the power and force limit (module doc)
            rising = min(rising, self._scale * ratio)
        self._scale = min(target, rising)
        links = self.surfaces.links
        if check is None:
            unknown = np.full(len(names), np.nan)
            check = _Check(unknown, unknown, unknown, np.full(len(names), -1),
                           np.full(len(links), np.nan), np.full((len(names), len(links)), np.nan),
                           np.zeros(0), np.zeros(0), np.zeros(len(names)),
                           np.ones(len(names), bool))
        self._last_sphere_margin = check.sphere_margin
        self._last = ProximityResult(
            t=t, stop=stop, speed_scale=self._scale, problem=problem,
            source=current.source if current else '',
            bodies_stamp=current.t if current else np.nan, body_names=list(names),
            body_stop=body_stop,
            body_warning=body_stop | (margin < self.config.slowdown_distance),
            body_distance=check.body_distance, body_margin=check.margin,
            body_protective_distance=check.body_protective,
            body_link=[links[k] if k >= 0 else None for k in check.body_link],
            link_names=list(links), link_distance=check.link_distance,
            body_link_distance=check.body_link_distance,
            robot_centres=centres if centres is not None else np.zeros((0, 3)),
            robot_sphere_distance=check.sphere_distance,
            bodies=current.bodies if current else [],
            reset_active=self._best_since_reset is not None,
            starting='' if self._started or not stop or problem or body_stop.any() else (
                'starting: the stop holds until the inputs have been fresh and every margin '
                f'clear for {self._release_time():g} s (start_hold)'),
            body_speed_share=check.speed_share,
            link_speed_share=(np.zeros(len(links)) if check.link_speed_share is None
                              else check.link_speed_share), pfl_ratio=min(1.0, ratio))
        return self._last

    def _robot_stop(self, t: float, smallest: float, check: _Check | None) -> bool:
        """The robot's latch; after a reset, the approach rule instead (module doc: Reset)."""
        best = self._best_since_reset
        if best is None or check is None or len(best) != len(check.sphere_margin):
            self._best_since_reset = None
            self._latched.pop(self._reset_key, None)
            stop = self._latch(self._robot_key, t, smallest, self._release_time())
            self._started |= not stop
            return stop
        margin = check.sphere_margin
        if np.any((margin <= 0) & (margin < best - self.config.reset_tolerance)):
            self._best_since_reset = None  # came nearer: stop, latched again
            self._latched.pop(self._reset_key, None)
            return self._latch(self._robot_key, t, -np.inf)
        np.maximum(best, margin, out=best)
        if not self._latch(self._reset_key, t, smallest):  # cleared: plain rules again
            self._best_since_reset = None
        return False

    def _release_time(self) -> float:
        """How long the robot's stop waits to be released: longer at the start (module doc:
        Start)."""
        config = self.config
        return config.release_time if self._started else max(config.release_time,
                                                             config.start_hold)


@dataclass
class _Approach:
    """The pairs of robot sphere and body element in the body's warning zone (margin below
    slowdown_distance) whose sphere moves toward it (v_r > 0): the power and force limit's."""

    row: np.ndarray        # robot sphere
    body: np.ndarray       # body index
    direction: np.ndarray  # unit vector from the sphere toward the body element, K×3
    approach: np.ndarray   # v_r, m/s
    margin: np.ndarray     # m


@dataclass
class _Check:
    """What `_check` finds, before latching."""

    margin: np.ndarray           # per body: smallest distance − S_p
    body_distance: np.ndarray    # per body
    body_protective: np.ndarray  # per body: S_p of the deciding pair
    body_link: np.ndarray        # per body: link index of the deciding pair (-1: none)
    link_distance: np.ndarray    # per link
    body_link_distance: np.ndarray  # bodies × links
    sphere_distance: np.ndarray  # per robot sphere
    sphere_margin: np.ndarray    # per robot sphere: smallest (distance − S_p) over the
                                 # bodies that stop
    speed_share: np.ndarray      # per body: the largest v_r / v_max (ProximityMonitor._limit_speed)
    stops: np.ndarray            # per body: its margin stops the arm (not collaborative's)
    approaching: _Approach | None = None
    link_speed_share: np.ndarray | None = None  # per link (ProximityMonitor._limit_speed)
    pfl_ratio: float = np.inf    # the speed scale's power and force limit (module doc)


def _check(centres: np.ndarray, radii: np.ndarray, velocity: np.ndarray, sphere_link: np.ndarray,
           link_count: int, bodies: _BodySet, config: ProximityConfig, body_speed: float,
           stops: np.ndarray) -> _Check:
    """Seed 002's test between the robot's spheres and every body element (sphere or box), with
    the protective distance; `stops` per body: whether its margin stops the arm (counted in
    the robot spheres' margins, which a reset follows).

    Only pairs within the watched range can change a decision: those whose surface distance is
    at most W = max(report_range, largest S_p + slowdown_distance + release_distance). Every
    pair of spheres whose centres are within W + the two largest radii is taken, so no such
    pair is missed; boxes are few and always checked. Distances are therefore exact up to W
    and inf beyond it. One compiled pass (`_pair_kernel`) over the pairs.
    """
    robot_time = config.reaction_time + config.stopping_time / 2  # v_r T_r + B, B = v_r T_s / 2
    static = (body_speed * (config.reaction_time + config.stopping_time)
              + config.intrusion_distance + config.position_uncertainty)
    speed = np.linalg.norm(velocity, axis=1)
    watched = max(config.report_range, static + speed.max() * robot_time
                  + config.slowdown_distance + config.release_distance)
    count = len(bodies.names)
    result = _Check(np.full(count, np.inf), np.full(count, np.inf), np.full(count, np.nan),
                    np.full(count, -1), np.full(link_count, np.inf),
                    np.full((count, link_count), np.inf), np.full(len(radii), np.inf),
                    np.full(len(radii), np.inf), np.zeros(count), stops)
    found, pairs = bodies.room(len(radii))
    near = _pair_kernel(
        centres, radii, velocity, sphere_link, bodies.centres, bodies.radii, bodies.sphere_body,
        bodies.block_low, bodies.block_high, bodies.box_body, bodies.box_rotation,
        bodies.box_centre, bodies.box_half, stops, watched + radii.max() + bodies.largest_radius,
        static, robot_time, config.slowdown_distance, result.margin, result.body_distance,
        result.body_protective, result.body_link, result.link_distance,
        result.body_link_distance, result.sphere_distance, result.sphere_margin, found,
        pairs.row, pairs.body, pairs.direction, pairs.approach, pairs.margin)
    result.approaching = _Approach(pairs.row[:near].copy(), pairs.body[:near].copy(),
                                   pairs.direction[:near].copy(), pairs.approach[:near].copy(),
                                   pairs.margin[:near].copy())
    return result


@kernel
def _pair_kernel(centres, radii, velocity, sphere_link, body_centres, body_radii, sphere_body,
                 block_low, block_high, box_body, box_rotation, box_centre, box_half, stops,
                 cutoff, static, robot_time, slowdown, margin, body_distance, body_protective,
                 body_link, link_distance, body_link_distance, sphere_distance, sphere_margin,
                 pairs, near_row, near_body, near_direction, near_approach, near_margin):
    """`_check`'s pairs: each robot sphere with every body sphere whose centre is within
    `cutoff` (`_sphere_pairs`), then with every box (`_box_pairs`), listed in `pairs` (row,
    body, distance, direction: room for every pair). Per pair, v_r and the margin, into the
    per-body, per-(body, link), per-sphere and per-link minima (a body's deciding pair: the
    first that attains its margin), and the pairs approaching in the warning zone
    (`_Approach`) into near_*; returns their count."""
    row, body, distance, direction = pairs
    count = _sphere_pairs(centres, radii, body_centres, body_radii, sphere_body, block_low,
                          block_high, cutoff, row, body, distance, direction)
    count = _box_pairs(centres, radii, box_body, box_rotation, box_centre, box_half, count, row,
                       body, distance, direction)
    near = 0
    for k in range(count):
        i, b, link = row[k], body[k], sphere_link[row[k]]
        ux, uy, uz = direction[k, 0], direction[k, 1], direction[k, 2]
        # Summed in the order numpy's einsum summed these three products, so that every
        # figure is the bits the array formula it replaced gave (issue 35).
        approach = max((velocity[i, 0] * ux + velocity[i, 2] * uz) + velocity[i, 1] * uy, 0.0)
        pair_margin = distance[k] - static - approach * robot_time
        if pair_margin < margin[b]:
            margin[b] = pair_margin
            body_protective[b] = distance[k] - pair_margin
            body_link[b] = link
        body_distance[b] = min(body_distance[b], distance[k])
        body_link_distance[b, link] = min(body_link_distance[b, link], distance[k])
        sphere_distance[i] = min(sphere_distance[i], distance[k])
        if stops[b]:
            sphere_margin[i] = min(sphere_margin[i], pair_margin)
        if approach > 0.0 and pair_margin < slowdown:
            near_row[near], near_body[near] = i, b
            near_direction[near, 0] = ux
            near_direction[near, 1] = uy
            near_direction[near, 2] = uz
            near_approach[near], near_margin[near] = approach, pair_margin
            near += 1
    for i in range(len(radii)):
        link = sphere_link[i]
        link_distance[link] = min(link_distance[link], sphere_distance[i])
    return near


@kernel
def _sphere_pairs(centres, radii, body_centres, body_radii, sphere_body, block_low, block_high,
                  cutoff, row, body, distance, direction):
    """Every pair of robot sphere and body sphere whose centres are within `cutoff`: into row,
    body, distance (between the surfaces) and direction (the unit vector from the robot
    sphere's centre to the body sphere's), from 0; returns their count."""
    limit = cutoff * cutoff
    count = 0
    for i in range(len(radii)):
        x, y, z = centres[i, 0], centres[i, 1], centres[i, 2]
        for block in range(len(block_low)):
            # The block's nearest point is no farther than any of its centres, in floats too
            # (rounding is monotonic): beyond the cut-off, none of them is within it.
            gx = max(block_low[block, 0] - x, x - block_high[block, 0], 0.0)
            gy = max(block_low[block, 1] - y, y - block_high[block, 1], 0.0)
            gz = max(block_low[block, 2] - z, z - block_high[block, 2], 0.0)
            if gx * gx + gy * gy + gz * gz > limit:
                continue
            for j in range(block * BLOCK, min((block + 1) * BLOCK, len(body_radii))):
                dx = body_centres[j, 0] - x
                dy = body_centres[j, 1] - y
                dz = body_centres[j, 2] - z
                squared = dx * dx + dy * dy + dz * dz
                if squared <= limit:
                    between = np.sqrt(squared)
                    scale = max(between, 1e-12)
                    row[count], body[count] = i, sphere_body[j]
                    distance[count] = between - radii[i] - body_radii[j]
                    direction[count, 0] = dx / scale
                    direction[count, 1] = dy / scale
                    direction[count, 2] = dz / scale
                    count += 1
    return count


@kernel
def _box_pairs(centres, radii, box_body, box_rotation, box_centre, box_half, count, row, body,
               distance, direction):
    """Every pair of robot sphere and box: into row, body, distance and direction (`_box_pair`)
    from `count` on; returns the count with them."""
    for i in range(len(radii)):
        for box in range(len(box_body)):
            outside, depth, ux, uy, uz = _box_pair(centres, i, box_rotation, box_centre,
                                                   box_half, box)
            row[count], body[count] = i, box_body[box]
            distance[count] = (outside if outside > 0 else -depth) - radii[i]
            direction[count, 0], direction[count, 1], direction[count, 2] = ux, uy, uz
            count += 1
    return count


@kernel
def _box_pair(points, i, rotation, centre, half, box):
    """Distance from points[i] to the surface of `box` outside it (0 inside), the depth below
    its nearest face, and the unit direction to its nearest point (zero inside, where the
    distance alone decides); rotation[box]'s columns: the box's axes in the base frame."""
    r = rotation[box]
    dx, dy, dz = (points[i, 0] - centre[box, 0], points[i, 1] - centre[box, 1],
                  points[i, 2] - centre[box, 2])
    # In the box's frame (x, y, z), and from there to the box's nearest point (gx, gy, gz).
    x = r[0, 0] * dx + r[1, 0] * dy + r[2, 0] * dz
    y = r[0, 1] * dx + r[1, 1] * dy + r[2, 1] * dz
    z = r[0, 2] * dx + r[1, 2] * dy + r[2, 2] * dz
    hx, hy, hz = half[box, 0], half[box, 1], half[box, 2]
    gx = min(max(x, -hx), hx) - x
    gy = min(max(y, -hy), hy) - y
    gz = min(max(z, -hz), hz) - z
    depth = min(min(hx - abs(x), hy - abs(y)), hz - abs(z))
    outside = np.sqrt(gx * gx + gy * gy + gz * gz)
    scale = outside if outside > 0 else np.inf
    # Back in the base frame, summed in einsum's order (`_pair_kernel`).
    return (outside, depth, ((r[0, 0] * gx + r[0, 2] * gz) + r[0, 1] * gy) / scale,
            ((r[1, 0] * gx + r[1, 2] * gz) + r[1, 1] * gy) / scale,
            ((r[2, 0] * gx + r[2, 2] * gz) + r[2, 1] * gy) / scale)
