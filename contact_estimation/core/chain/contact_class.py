"""Impact or touch: collision classification of each contact the detector sees (issue 29).

Haddadin, De Luca & Albu-Schäffer 2017 ("Robot collisions: a survey on detection,
isolation, and identification", IEEE T-RO) split the collision event pipeline into
detection, isolation, identification, classification and reaction; this module is the
classification step, between seed 001 eq. 7 (core/chain/detector.py) and seed 003's reaction
(core/chain/time_scaling.py). Like Golz, Osendorfer & Haddadin 2015 ("Using tactile sensation
for learning contact knowledge: discriminate collision from physical interaction", ICRA) and
Kouris, Dimeas & Aspragathos 2018 ("A frequency domain approach for contact type
distinction in human–robot collaboration", IEEE RA-L), it uses proprioceptive features of
how τ_ext rises and of its frequency content; unlike their learned classifiers it is a set of
explicit rules with physical bounds, conservative by construction:

- rise: r = max_i |τ_ext,i| / ψ_i, the ratio eq. 7 compares with 1, rising faster than
  `max_rise_rate` 1/s at any time of the contact (least-squares slope over `slope_time`) is
  an impact. A hit or a push ramps to its full force in 50 ms or less; if eq. 7 fires on it at
  all, its ramp brought r to about 1 within those 50 ms, at 1/50 ms = 20/s or more, also
  through the momentum observer's lag (its step response starts at P/(ψ T_O) ≥ 50/s for
  T_O = 20 ms). That holds whatever ψ is, so the rise is measured in ψ: in a fixed torque a
  calibrated ψ (`calibrate`, often 1 N·m or less) let a push on a short lever rise at 4-8 N·m/s
  and pass for a hand (5 of 260 impacts at ψ = 1 N·m, benchmarks/touch_classification.py,
  issue 29). A hand ramps over 150 ms or more (Golz 2015, Kouris 2018: intended contacts
  rise slowly), so only a strong hand, peak/ψ > max_rise_rate × its ramp time, rises as fast
  and is taken for an impact: the lower ψ, the more hands (ψ = 4 N·m: 3 % of the touches
  that fire eq. 7; ψ = 1 N·m: a third). The same slope of the estimated force (below) was
  measured too: impacts reach eq. 7 within a few tens of ms of their onset, before a slope
  of |F| over 40 ms exists, and over 20 ms the estimate's noise made hands rise at 300 N/s
  and more, faster than the 200 N/s of the slowest impact;
- high frequency: the RMS of s = max_i |τ_ext,i| / τ_ref,i (τ_ref = `reference_torque`,
  seed 001's ψ of 4 N·m) about its straight-line fit over the last `window` seconds (what a
  line cannot follow: content above about 1/window, the knee and ringing of a hit, Kouris
  2018's spectral cue) above `max_roughness` is an impact. It is measured in a fixed torque,
  not in ψ: the residual's noise is a torque, and in a calibrated ψ it made the demo's hand
  rough (0.115 ψ RMS) and an impact;
- power: a contact that opposes the motion (τ_extᵀq̇ < 0) while the arm moves into it
  faster than `max_opposing_speed` (v_o = −τ_extᵀq̇ / ‖τ_ext‖, rad/s) is an impact: a
  person does not push against an arm moving that fast (Haddadin 2017: an impact opposes
  the motion); a guiding hand pushes along it or holds back a slow arm (1 rad/s is 0.5 m/s
  half a metre out, twice the speed usual for hand guiding; at 0.5 rad/s the rule took 5 %
  of the benchmark's touches and not one impact that no other rule took);
- size: the contact force, estimated from τ_ext and q on the isolated link
  (core/chain/contact_force.py: Haddadin 2017's isolation and identification steps, seed
  000), over `max_force` N is an impact; so is a joint over `max_torque` N·m, the second,
  higher joint threshold (30 N·m by default: 60 N half a metre from the joint), which holds
  whatever the estimate. An over-estimate of the force makes a touch an impact (safe);
  where the estimate is unsure (fewer than 6 joints upstream of the contact) the joint
  threshold still bounds it. Without joint positions there is no force: every contact is
  an impact;
- a hand at the contacted link (issue 29: "when a skeleton tracker is present, a hand of
  the person at the estimated contact point"): while hands have been seen within
  `hand_max_age` of the sample (`HandsSeen`, from the proximity monitor's skeleton:
  core/contact/proximity.py `hand_distances`), a contact is a touch only if a hand is within
  `hand_distance` of the link isolated at the decision or of a link beyond it (and at every
  sample after it, that same link: a touch whose hand leaves becomes an impact); none there
  (or no link isolated) is an impact, 'no hand at the contacted link'. Beyond it, because isolation
  (seed 000 eq. 13.1) bounds the link from below only: a hand on a wrist link near the
  wrist's axes loads none of them until it pushes hard, and was isolated on link 4 (4 of
  13 touches on links 6-7 in a --quick run of benchmarks/touch_classification.py). The
  evidence only turns a touch into an impact, never the reverse. With no hands seen
  recently (no tracker, nobody tracked, the tracker's messages late) the rule does not
  apply and the others decide alone;
- evidence: a contact decided less than `min_evidence_time` after its onset is an impact,
  unsure: too little of its rise was seen for its slope to mean anything (an impact's
  decision comes 2-20 ms after its onset at the median, a hand's 150 ms;
  benchmarks/touch_classification.py: at 70 ms this rule took 10 % of the touches that fire
  eq. 7 at ψ = 4 N·m, at 35 ms none, and no impact passed either way);
- stall: a push held still may stay under ψ after its ramp and creep over it hundreds of
  ms later, as the arm's motion lengthens its lever. Its ramp rose fast but not past
  `max_rise_rate` (it stopped short of ψ), and it reached ψ long after such a rise would
  have: faster than `stalled_rise_rate` and more than STALL_FACTOR times later than that rise
  takes from the onset to ψ is an impact. A hand that rises that fast keeps rising and
  reaches ψ at once (2 of 144 pushes on links' surfaces passed for touches without it).
For `settle_time` after a touch is decided only the size counts: f_S then holds the arm at
once (seed 003), and that jolt of its own reaches τ_ext as a fast, rough change
(benchmarks/touch_classification.py: without it, a quarter of the touches became impacts).

A contact starts when r reaches `onset_ratio` and ends when it falls back under it, but not
while a touch settles: the hold's jolt can dip r under it, and a contact restarted there was
decided afresh on the jolt's own roughness, an impact (the demo's touch once, in CI on a
loaded machine). Its class
is decided at the sample eq. 7 fires (the same sample the stop is latched on with touch off,
so classification never delays an impact's stop): a touch only if no rule fired since its
onset; unsure (any rule) is an impact. After that every sample is checked again: a touch
that grows beyond a limit becomes an impact (and latches the stop); an impact never
becomes a touch.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from contact_estimation.core.chain.contact_force import ContactForce
from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.settings import setting

IMPACT, TOUCH = 'impact', 'touch'
# A contact that reached ψ this many times later than its fastest rise would have taken from
# the onset stalled on the way (touch.stalled_rise_rate).
STALL_FACTOR = 3.0


@dataclass(frozen=True)
class TouchConfig:
    """collision_detector's `touch.*` parameters, at their defaults (benchmarks/
    touch_classification.py measured them)."""

    enabled: bool = setting(  # off on a real arm until a user turns it on
        False, 'classify each contact as impact or touch (core/chain/contact_class.py): a '
        'touch latches no stop, f_S holds and yields (seed 003); off until you turn it on '
        '(README, Touch)')
    onset_ratio: float = setting(
        0.5, 'a contact starts when some |τ_ext,i| reaches this share of ψ_i', range=(0.05, 0.99))
    reference_torque: float | tuple = setting(
        4.0, 'the torque the roughness rule measures in (seed 001\'s ψ, with which it was '
        'measured), so that calibrated thresholds do not turn the residual\'s noise into an '
        'impact, N·m', range=(0.01, 1e3), per_joint=1)
    max_rise_rate: float = setting(
        18.0, 'max |τ_ext,i|/ψ_i rising faster than this per second at any time of a contact '
        'makes it an impact (a push that reaches ψ within 50 ms rises at 20/s or more), 1/s',
        range=(0.1, 1000.0))
    slope_time: float = setting(0.04, 'time span of the least-squares slope of the rise, s',
                                range=(0.002, 1.0))
    window: float = setting(
        0.05, 'time span of the straight-line fit whose residual measures the high-frequency '
        'content, s', range=(0.005, 1.0))
    max_roughness: float = setting(
        0.1, 'RMS of max |τ_ext,i|/touch.reference_torque about that line above this makes a '
        'contact an impact',
        range=(0.001, 10.0))
    max_opposing_speed: float = setting(
        1.0, 'moving into the contact faster than this (−τ_extᵀq̇/‖τ_ext‖) makes it an '
        'impact, rad/s', range=(0.001, 100.0))
    max_force: float = setting(
        80.0, 'a touch whose estimated contact force (from τ_ext and the robot model: '
        'core/chain/contact_force.py) exceeds this becomes an impact, N', range=(1.0, 1e4))
    max_torque: float | tuple = setting(
        30.0, 'a touch over this joint torque (the second, higher joint threshold beside '
        'touch.max_force, whatever the force estimate says) becomes an impact, N·m',
        range=(0.0, 1e4), per_joint=1)
    spread: float = setting(
        0.05, "the contact's assumed distance from its link's centre of mass, for the force "
        'estimate on links with fewer than 6 joints upstream, m', range=(0.001, 1.0))
    isolation_torque: float = setting(
        0.5, 'δ_τ: the contacted link is the one the last joint with |τ_ext| at least this '
        'moves (seed 000 eq. 13.1), N·m', range=(0.01, 100.0))
    stalled_rise_rate: float = setting(
        12.0, f'a contact that rose faster than this yet reached ψ more than {STALL_FACTOR:g} '
        'times later than that rise takes from the onset is an impact: a push held still that '
        'crept over ψ as the arm moved, 1/s', range=(0.1, 1000.0))
    min_evidence_time: float = setting(
        0.035, 'a contact decided sooner than this after its onset is an impact: too little of '
        'its rise was seen for its slope to tell, s',
        range=(0.0, 1.0))
    settle_time: float = setting(
        0.15, 'for this long after a touch is decided only touch.max_torque can make it an '
        "impact (the arm's own hold jolts τ_ext), s", range=(0.0, 10.0))
    hand_distance: float = setting(
        0.15, "while a skeleton's hands are seen (touch.hand_max_age), a contact is a touch "
        'only if a hand is within this distance of the contacted link or one beyond it '
        '(surfaces, as the proximity monitor models them), m', range=(0.0, 2.0))
    hand_max_age: float = setting(
        0.5, 'hands seen (contact_estimation/proximity/hands) by stamp at most this long '
        'before a sample make the hand rule apply to it; none that recent: it does not, s',
        range=(0.001, 10.0))

    def __post_init__(self):
        for name in ('onset_ratio', 'max_rise_rate', 'slope_time', 'window',
                     'max_roughness', 'max_opposing_speed', 'max_force', 'spread',
                     'isolation_torque', 'stalled_rise_rate', 'hand_max_age'):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f'touch.{name} = {value}: must be finite and > 0')
        for name in ('settle_time', 'hand_distance', 'min_evidence_time'):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f'touch.{name} = {value}: must be finite and >= 0')
        if self.onset_ratio >= 1.0:
            raise ValueError(f'touch.onset_ratio = {self.onset_ratio}: must be < 1 (a '
                             'contact starts before eq. 7 can fire)')
        if self.slope_time > self.window:
            raise ValueError(f'touch.slope_time = {self.slope_time} s must not exceed '
                             f'touch.window = {self.window} s')


@dataclass(frozen=True)
class HandsSeen:
    """Where a tracked person's hands were: `t` the skeleton's stamp (s), `link_distance`
    each robot link → the distance of the nearest hand to it (m); a link not listed has no
    hand within the distance the monitor reports."""

    t: float
    link_distance: dict[str, float]


@dataclass(frozen=True)
class ContactDecision:
    """What was decided about one contact, with its evidence (collision events carry it)."""

    kind: str               # IMPACT or TOUCH
    reason: str             # the rule that made it an impact, or why it is a touch
    onset: float            # s, stamp of the contact's first sample over onset_ratio
    stamp: float            # s, stamp of the sample it was decided on
    link: str               # the contacted link at the decision (isolation), '' if unknown
    force: float            # N, largest estimated contact force since the onset
    rise_rate: float        # 1/s, fastest rise of r = max |τ_ext,i|/ψ_i since the onset
    roughness: float        # largest RMS of s about its line over `window`, in τ_ref
    opposing_speed: float   # rad/s, fastest motion into the contact since the onset
    power: float            # W, τ_extᵀq̇ at the decision (< 0: against the motion)
    torque_share: float     # largest |τ_ext,i| / max_torque_i since the onset
    hand_distance: float    # m, nearest hand to `link` or a link beyond it (inf: none; nan:
                            # no hands seen recently)

    @property
    def delay(self) -> float:
        """s from the contact's onset to this decision."""
        return self.stamp - self.onset


class ContactClassifier:
    """Impact or touch for the contact going on, sample by sample (module docstring); the
    contact force from `robot` (core/chain/contact_force.py)."""

    def __init__(self, config: TouchConfig, robot: RobotModel):
        self.config = config
        self.max_torque = per_joint('touch.max_torque', config.max_torque, robot.n, low=0.0,
                                    strict=True, unit=' N·m')
        self.reference = per_joint('touch.reference_torque', config.reference_torque, robot.n,
                                   low=0.0, strict=True, unit=' N·m')
        self.contact_force = ContactForce(robot, config.spread, config.isolation_torque)
        self._history: deque = deque()   # (t, r, s) of the last `window` seconds
        self._onset: float | None = None  # stamp of the contact's first sample, None: none
        self.kind = ''                    # '' until decided, then TOUCH or IMPACT
        self._impact_rule = ''            # the first rule that fired in this contact
        self._rise = self._roughness = self._opposing = self._share = 0.0
        self._force = self._power = 0.0
        self._joint = -1                  # the contacted link's joint (-1: none yet)
        self._decided = 0.0               # stamp of the decision
        self._hand_link = ''              # the link a hand must stay at after the decision
        self.hands: HandsSeen | None = None  # the latest hands seen (None: never)
        # Each frame of the model → the joint that moves it: links beyond a joint's link.
        self._moved_by = {frame.name: frame.parentJoint for frame in robot.model.frames}

    def update(self, t: float, tau_ext: np.ndarray, ratios: np.ndarray,
               velocity: np.ndarray | None, position: np.ndarray | None) -> ContactDecision | None:
        """One sample: τ_ext (N·m), |τ_ext,i|/ψ_i, q̇ and q (None: unknown). Returns a decision
        only when a touch became an impact at this sample."""
        r = float(ratios.max())
        history = self._history
        history.append((t, r, float((np.abs(tau_ext) / self.reference).max())))
        while t - history[0][0] > self.config.window:
            history.popleft()
        if r < self.config.onset_ratio:
            if not self._settling(t):  # the hold's jolt can dip r: the same contact goes on
                self._onset, self.kind, self._impact_rule = None, '', ''
            return None
        if self._onset is None:
            self._onset = t
            self._rise = self._roughness = self._opposing = self._share = 0.0
            self._force, self._joint, self._hand_link = 0.0, -1, ''
        self._measure(t, tau_ext, velocity, position)
        if self.kind == TOUCH and self._impact_rule:
            return self._decide(t, IMPACT, f'touch became an impact: {self._impact_rule}')
        return None

    def decide(self, t: float) -> ContactDecision:
        """Eq. 7 fired at `t` in this contact: impact or touch, once per contact."""
        self._impact_rule = (self._impact_rule or self._no_hand(t) or self._too_soon(t)
                             or self._stalled(t))
        if self._impact_rule:
            return self._decide(t, IMPACT, self._impact_rule)
        return self._decide(t, TOUCH, 'slow, smooth rise within every touch limit' + (
            '' if math.isnan(self._hand_distance(t)) else ', a hand at the contacted link'))

    def _measure(self, t: float, tau_ext: np.ndarray, velocity, position) -> None:
        """The contact's evidence after this sample; the first rule it breaks is kept."""
        config = self.config
        ts, rs, ss = np.array(self._history).T
        recent = ts >= t - config.slope_time
        if position is not None:
            self._joint, force = self.contact_force.estimate(position, tau_ext, self._joint)
            self._force = max(self._force, math.sqrt(float(np.dot(force, force))))
        # Not while the arm's own hold settles: f_S to 0 at once (seed 003) jolts τ_ext.
        if not self._settling(t):
            if recent.sum() >= 2:
                self._rise = max(self._rise, _fit_line(ts[recent], rs[recent])[0])
            if ts.size >= 3:
                self._roughness = max(self._roughness, _fit_line(ts, ss)[1])
        self._power = 0.0
        if velocity is not None:
            self._power = float(np.dot(tau_ext, velocity))
            size = math.sqrt(float(np.dot(tau_ext, tau_ext)))
            if size > 0:
                self._opposing = max(self._opposing, -self._power / size)
        self._share = max(self._share, float((np.abs(tau_ext) / self.max_torque).max()))
        if not self._impact_rule:
            # The hand from the decision on: before it the link isolated may still move out
            # along the arm as the force grows (contact_force: eq. 13.1 from below).
            self._impact_rule = self._broken_rule(position is not None) or (
                self._no_hand(t) if self.kind == TOUCH else '')

    def _settling(self, t: float) -> bool:
        """Within settle_time of a touch's decision: the arm's hold jolts τ_ext."""
        return self.kind == TOUCH and t - self._decided < self.config.settle_time

    def _hand_distance(self, t: float) -> float:
        """The nearest hand to the contacted link or a link beyond it, m (inf: none there or
        no link isolated); nan when no hands were seen within hand_max_age of `t` (the rule
        does not apply). Links the model does not know are left out. After the decision the
        link is the one isolated then: while the arm holds, its own jolt can lift a distal
        joint's residual past touch.isolation_torque and move the isolated link out along the
        arm, past the hand (benchmarks/touch_classification.py: 26 of 339 touches at ψ = 1
        N·m became impacts so)."""
        hands = self.hands
        if hands is None or t - hands.t > self.config.hand_max_age:
            return math.nan
        contacted = self._hand_link or self._link
        if not contacted:
            return math.inf
        first = self._moved_by[contacted]
        return min((distance for link, distance in hands.link_distance.items()
                    if self._moved_by.get(link, -1) >= first), default=math.inf)

    def _no_hand(self, t: float) -> str:
        """'no hand at the contacted link' while hands are seen and none is there."""
        distance = self._hand_distance(t)
        if not distance > self.config.hand_distance:  # nan: the rule does not apply
            return ''
        return (f'no hand at the contacted link ({self._link or "none isolated"}: nearest hand '
                f'{distance:.2f} m > touch.hand_distance {self.config.hand_distance:g})')

    def _broken_rule(self, located: bool) -> str:
        """Why the contact so far is an impact ('' while it may be a touch)."""
        config = self.config
        if not located:
            return 'no joint positions: the contact force is unknown'
        if self._rise > config.max_rise_rate:
            return (f'rose at {self._rise:.1f} ψ/s > touch.max_rise_rate '
                    f'{config.max_rise_rate:g}')
        if self._roughness > config.max_roughness:
            return (f'high-frequency content {self._roughness:.3f} τ_ref RMS > '
                    f'touch.max_roughness {config.max_roughness:g}')
        if self._opposing > config.max_opposing_speed:
            return (f'against the motion at {self._opposing:.2f} rad/s > '
                    f'touch.max_opposing_speed {config.max_opposing_speed:g}')
        if self._force > config.max_force:
            return (f'{self._force:.0f} N on {self._link} > touch.max_force '
                    f'{config.max_force:g}')
        if self._share > 1.0:
            return f'{self._share:.2f} × touch.max_torque'
        return ''

    def _too_soon(self, t: float) -> str:
        """Why a decision at `t` is unsure for lack of evidence ('' if it is not)."""
        seen = t - self._onset
        if seen < self.config.min_evidence_time:
            return (f'decided {seen * 1e3:.0f} ms after its onset < touch.min_evidence_time '
                    f'{self.config.min_evidence_time * 1e3:.0f} ms: too little of its rise seen')
        return ''

    def _stalled(self, t: float) -> str:
        """Why a decision at `t` is a push's that stalled under ψ ('' if it is not)."""
        config = self.config
        rise_time = (1.0 - config.onset_ratio) / max(self._rise, 1e-9)
        seen = t - self._onset
        if self._rise > config.stalled_rise_rate and seen > STALL_FACTOR * rise_time:
            return (f'rose at {self._rise:.1f} ψ/s > touch.stalled_rise_rate '
                    f'{config.stalled_rise_rate:g} yet reached ψ {seen * 1e3:.0f} ms after its '
                    f'onset, > {STALL_FACTOR:g} × the {rise_time * 1e3:.0f} ms that rise takes: a '
                    'push held still')
        return ''

    @property
    def _link(self) -> str:
        """The contacted link ('' before one is isolated)."""
        return self.contact_force.robot.joint_links[self._joint] if self._joint >= 0 else ''

    def _decide(self, t: float, kind: str, reason: str) -> ContactDecision:
        self.kind, self._decided = kind, t
        self._hand_link = self._hand_link or self._link
        return ContactDecision(kind, reason, self._onset, t, self._link, self._force,
                               self._rise, self._roughness, self._opposing,
                               self._power, self._share, self._hand_distance(t))


def _fit_line(t: np.ndarray, r: np.ndarray) -> tuple[float, float]:
    """Least-squares straight line through (t, r): its slope and the RMS of r about it."""
    t = t - t.mean()
    r = r - r.mean()
    denominator = float(t.dot(t))
    slope = float(t.dot(r)) / denominator if denominator > 0 else 0.0
    residual = r - slope * t
    return slope, math.sqrt(float(residual.dot(residual)) / len(residual))
