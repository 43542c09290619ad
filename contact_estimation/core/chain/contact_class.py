"""Impact or touch: the classification of each contact the detector sees (issues 29, 37).

Haddadin, De Luca & Albu-Schäffer 2017 ("Robot collisions: a survey on detection, isolation,
and identification", IEEE T-RO) split a collision's handling into detection, isolation,
identification, classification and reaction; this is the classification, between seed 001's
eq. 7 (core/chain/detector.py) and seed 003's reaction (core/chain/time_scaling.py). Like
Golz, Osendorfer & Haddadin 2015 (ICRA) and Kouris, Dimeas & Aspragathos 2018 (IEEE RA-L) it
reads how τ_ext rises and its frequency content; unlike their learned classifiers it is a
table of explicit rules (`Rule`), each with its source, and unsure is always an impact.

Hold first, then decide (issue 37). On the sample eq. 7 fires every contact holds the arm
(f_S = 0, `hold`: the very sample the stop latches on with touch off). Then, on the
contact's `Evidence`:
- IMPACT_RULES are evaluated on every sample of the contact, in order, until one fires; it is
  kept with its evidence. Within `decision_time` of the hold it makes the contact an impact
  at once (the stop latches); fired before the hold, at the hold; after a touch, it makes
  the touch an impact.
- WINDOW_END decides when the window closes, `decision_time` after the hold or when the
  contact ends undecided: its first row that fires (the last, a touch, always does).
- A touch latches nothing (f_S holds, then yields); an impact never becomes a touch.

A contact starts when max_i |τ_ext,i|/ψ_i reaches `onset_ratio` and ends when it falls back
under it, but not while the hold's jolt settles: from the hold until `settle_time` after the
arm came to rest (‖q̇‖ ≤ `rest_speed`; an arm not slowing `hold_latency` after the hold is not
jolted). Those samples are also left out of the rise and the roughness, the rise bridged
across them at the ramp's rate before or after them, the steeper (`_Rise.bridge`). What set
each constant: the rows' `source`, and docs/performance.md (Touch classification).
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from contact_estimation.core.chain.contact_force import ContactForce
from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.settings import checked, setting

IMPACT, TOUCH = 'impact', 'touch'
# τ_before is the mean τ_ext over BASELINE_SPAN s ending BASELINE_LEAD s before a contact's
# onset: a push's rise through the momentum observer starts at most about 50 ms + 2 T_O
# (T_O = 20 ms) before it reaches onset_ratio ψ.
BASELINE_LEAD = 0.1
BASELINE_SPAN = 0.01
# y is τ_ext's mean over this long: the residual's white noise (0.16 N·m RMS on the
# simulated Panda's first joints) down by its square root, a push's rise 10 ms later.
SMOOTHING = 0.02
# A rise has stopped once y stayed within this share of its peak for touch.plateau_time.
PLATEAU_BAND = 0.1
# y across the samples the hold's jolt left out is drawn in steps of this long (s).
BRIDGE_STEP = 0.002
# An arm under this share of its speed at the hold has begun to slow down (the hold's jolt).
SLOWING = 0.8


@dataclass(frozen=True)
@checked
class TouchConfig:
    """collision_detector's `touch.*` parameters, at their defaults (benchmarks/
    touch_classification.py measured them)."""

    enabled: bool = setting(  # off on a real arm until a user turns it on
        False, 'classify each contact as impact or touch (core/chain/contact_class.py): every '
        'contact holds the arm (f_S = 0) on the sample eq. 7 fires, an impact latches the stop '
        'within touch.decision_time, a touch latches none and yields (seed 003); off until '
        'you turn it on (README, Touch)')
    # 150 ms: benchmarks/touch_classification.py (issue 37; docs/performance.md).
    decision_time: float = setting(
        0.15, 'each contact is decided within this long after its hold (the sample eq. 7 '
        'fires): an impact rule firing latches the stop at once, the window ending with no '
        'clear touch is an impact, s', range=(0.01, 1.0))
    onset_ratio: float = setting(
        0.5, 'a contact starts when some |τ_ext,i| reaches this share of ψ_i', range=(0.05, 0.99))
    rise_span: float = setting(
        0.05, 'the span a push or a hit rises to its full force in, s', range=(0.005, 0.5))
    max_rise_share: float = setting(
        0.5, 'a contact whose torque rose by more than this share of its peak within '
        'touch.rise_span is an impact (a push), once the rise stopped or at the end of '
        'touch.decision_time; after a touch, such a rise is a hit', range=(0.05, 1.0))
    hit_share: float = setting(
        0.4, 'after a touch, its torque rising within touch.rise_span by this share of its '
        'peak more than in the touch.rise_span before (a knee: 0 on a steady ramp) is a hit',
        range=(0.01, 10.0))
    plateau_time: float = setting(
        0.04, 'a rise has stopped once the torque stayed within 10 % of its peak for this '
        'long, s', range=(0.001, 0.5))
    reference_torque: float | tuple = setting(
        4.0, 'the torque the roughness rule measures in (seed 001\'s ψ, with which it was '
        'measured), so that calibrated thresholds do not turn the residual\'s noise into an '
        'impact, N·m', range=(0.01, 1e3), per_joint=1)
    window: float = setting(
        0.05, 'time span of the straight-line fit whose residual measures the high-frequency '
        'content, s', range=(0.005, 1.0))
    max_roughness: float = setting(
        0.1, 'RMS of max |τ_ext,i|/touch.reference_torque about that line above this makes a '
        'contact an impact',
        range=(0.001, 10.0))
    max_opposing_speed: float = setting(
        1.5, 'moving into the contact faster than this (−τ_extᵀq̇/‖τ_ext‖) makes it an '
        'impact, rad/s', range=(0.001, 100.0))
    max_force: float = setting(
        80.0, 'a touch whose estimated contact force (from τ_ext and the robot model: '
        'core/chain/contact_force.py) exceeds this becomes an impact, N', range=(1.0, 1e4))
    max_torque: float | tuple = setting(
        30.0, 'a touch over this joint torque (the second, higher joint threshold beside '
        'touch.max_force, whatever the force estimate says) becomes an impact, N·m',
        range=(0.01, 1e4), per_joint=1)
    # No benchmark set it (9e44837, issue 29); with it the estimate is within a factor 2 of
    # the true force on 94.7 % of draws on links 3–5 (test_contact_force.py).
    spread: float = setting(
        0.05, "the contact's assumed distance from its link's centre of mass, for the force "
        'estimate on links with fewer than 6 joints upstream, m', range=(0.001, 1.0))
    isolation_torque: float = setting(
        0.5, 'δ_τ: the contacted link is the one the last joint with |τ_ext| at least this '
        'moves (seed 000 eq. 13.1), N·m', range=(0.01, 100.0))
    # The hold's jolt (issue 37, docs/performance.md) is timed by the arm's motion: over
    # settle_time (the momentum observer's T_O, 20 ms, and 10 ms; no benchmark tuned it)
    # after ‖q̇‖ fell to rest_speed (the last 0.1 rad/s takes the hold about 10 ms).
    hold_latency: float = setting(
        0.05, 'an arm that has not begun to slow down (‖q̇‖ under 80 % of its speed at the '
        'hold) this long after the hold is not jolted by it (a controller that does not '
        'follow f_S, a recording replayed): its samples count from then on, s',
        range=(0.0, 10.0))
    rest_speed: float = setting(
        0.1, "the held arm is at rest once its joint speed ‖q̇‖ is at most this: the hold's "
        'jolt is then ending, rad/s', range=(0.0, 100.0))
    settle_time: float = setting(
        0.03, "from the hold until this long after the arm came to rest (touch.rest_speed), "
        "samples are left out of the rise and the roughness: the arm's own hold jolts "
        'τ_ext, s', range=(0.0, 10.0))
    hand_distance: float = setting(
        0.15, "while a skeleton's hands are seen (touch.hand_max_age), a contact is a touch "
        'only if a hand is within this distance of the contacted link or one beyond it '
        '(surfaces, as the proximity monitor models them), m', range=(0.0, 2.0))
    hand_max_age: float = setting(
        0.5, 'hands seen (contact_estimation/proximity/hands) by stamp at most this long '
        'before a sample make the hand rule apply to it; none that recent: it does not, s',
        range=(0.001, 10.0))




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
    rule: str               # the name of the rule that decided it (`Rule.name`)
    reason: str             # that rule's reason, with the evidence that made it fire
    onset: float            # s, stamp of the contact's first sample over onset_ratio
    hold: float             # s, stamp of the sample eq. 7 fired on: f_S = 0 from it
    stamp: float            # s, stamp of the sample it was decided on
    link: str               # the contacted link at the decision (isolation), '' if unknown
    force: float            # N, largest estimated contact force since the onset
    torque: float           # N·m, peak of y = ‖τ_ext − τ_before‖ since the onset
    rise_share: float       # largest rise of y within rise_span, a share of its peak
    rise_rate: float        # N·m/s, that rise over rise_span
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

    @property
    def after_hold(self) -> float:
        """s from the hold to this decision (how much later than the hold the stop latches,
        for an impact decided in the window)."""
        return self.stamp - self.hold


@dataclass(frozen=True)
class Evidence:
    """What a contact has shown up to one sample: what the rules read. y = ‖τ̄_ext − τ_before‖
    (N·m): τ_ext's mean over SMOOTHING less its mean BASELINE_LEAD before the onset, so that
    ψ does not change what a hand looks like and the model's error in motion is not counted."""

    t: float               # s, the sample's stamp
    located: bool          # joint positions known: the contact force can be estimated
    held: bool             # eq. 7 fired in the contact: f_S holds
    touched: bool          # decided a touch
    settling: bool         # held, undecided, the hold's jolt not over: samples left out
    ended: bool            # the contact fell under onset_ratio at this sample
    seen: float            # s of rise seen since the jolt settled (nan: not yet at rest, or
                           # the rise across the jolt not yet bridged: _Rise.bridge)
    peak: float            # N·m, y's peak since the onset
    rise_share: float      # the largest rise of y within rise_span, a share of its peak
    knee: float            # how much more y rose over the last rise_span than over the one
                           # before, a share of its peak (0 on a steady ramp); after a touch
    band: float            # max − min of y over the last plateau_time, a share of its peak
    roughness: float       # largest RMS of max_i |τ_ext,i|/τ_ref,i about its line over `window`
    opposing_speed: float  # rad/s, fastest −τ_extᵀq̇/‖τ_ext‖ since the onset (not after a touch)
    force: float           # N, largest contact force on the isolated link since the onset
    link: str              # the isolated link ('' none yet)
    torque_share: float    # largest max_i |τ_ext,i| / max_torque_i since the onset
    hand_distance: float   # m, nearest hand to the contacted link or one beyond it (inf: none
                           # there; nan: no hands seen within hand_max_age)
    speed: float           # rad/s, ‖q̇‖ (inf: unknown)


@dataclass(frozen=True)
class Rule:
    """One row of the classification: when it fires (over the evidence and the settings),
    what it decides, the reason it gives and where its constants come from."""

    name: str
    kind: str                                        # IMPACT or TOUCH
    fires: Callable[[Evidence, TouchConfig], bool]
    reason: Callable[[Evidence, TouchConfig], str]
    source: str


def _ms(seconds: float) -> str:
    return f'{seconds * 1e3:.0f} ms'


# Evaluated in order on every sample of a contact until one fires (module docstring).
IMPACT_RULES = (
    Rule('no positions', IMPACT,
         lambda e, c: not e.located,
         lambda e, c: 'no joint positions: the contact force is unknown',
         'issue 29: without q there is no contact force (the size rule), and unsure is an '
         'impact'),
    Rule('sudden rise', IMPACT,
         lambda e, c: (not e.touched and e.held and not e.settling
                       and e.rise_share > c.max_rise_share and e.seen >= c.plateau_time
                       and e.band <= PLATEAU_BAND),
         lambda e, c: (f'rose to {e.peak:.2f} N·m, {e.rise_share:.0%} of it within '
                       f'{_ms(c.rise_span)} > touch.max_rise_share {c.max_rise_share:g}, and '
                       'stopped: a push'),
         'Golz 2015, Kouris 2018: a push or a hit reaches its force within rise_span (50 ms), '
         'a hand ramps over 150 ms or more (issue 37); stopped: y within PLATEAU_BAND of its '
         'peak for plateau_time (40 ms). max_rise_share 0.5: benchmarks/touch_classification.py '
         "seed 37, ψ 0.8 N·m (with the hold's gap bridged at the ramp's rate after it: hands at "
         'most 0.49, pushes at least 0.54; drawn under the pushes)'),
    Rule('hit (knee)', IMPACT,
         lambda e, c: e.touched and e.knee > c.hit_share,
         lambda e, c: (f'a sudden rise: {e.knee:.0%} of its {e.peak:.2f} N·m peak more within '
                       f'{_ms(c.rise_span)} than in the {_ms(c.rise_span)} before > '
                       f'touch.hit_share {c.hit_share:g}: a hit'),
         'issue 37: a hand that pushes harder is still a hand, a knee in its ramp is a hit. '
         'hit_share 0.4: benchmarks/touch_classification.py (after their decision the hands '
         'rose so by up to 0.32, yielding)'),
    Rule('roughness', IMPACT,
         lambda e, c: e.roughness > c.max_roughness,
         lambda e, c: (f'high-frequency content {e.roughness:.3f} τ_ref RMS > '
                       f'touch.max_roughness {c.max_roughness:g}'),
         "Kouris 2018's spectral cue: what a line over `window` cannot follow, a hit's knee and "
         "ringing; in seed 001's ψ (4 N·m, reference_torque), as in issue 29's benchmark, where "
         "in a calibrated ψ the residual's noise made 234 of 282 hands rough"),
    Rule('against motion', IMPACT,
         lambda e, c: e.opposing_speed > c.max_opposing_speed,
         lambda e, c: (f'against the motion at {e.opposing_speed:.2f} rad/s > '
                       f'touch.max_opposing_speed {c.max_opposing_speed:g}'),
         'Haddadin 2017: an impact opposes the motion; a person does not push against an arm '
         'moving that fast. issue 29 benchmark: at 0.5 rad/s it stopped 5 % of the hands and '
         'caught no impact another rule did not; 1.5 since issue 37 (52efc5f)'),
    Rule('max_force', IMPACT,
         lambda e, c: e.force > c.max_force,
         lambda e, c: f'{e.force:.0f} N on {e.link} > touch.max_force {c.max_force:g}',
         "Haddadin 2017's isolation and identification (seed 000, core/chain/contact_force.py). "
         '80 N (9e44837, issue 29): above the largest estimate among issue 29\'s hands (54 N, '
         'true forces ≤ 40 N); not tuned by a benchmark'),
    Rule('max_torque', IMPACT,
         lambda e, c: e.torque_share > 1.0,
         lambda e, c: f'{e.torque_share:.2f} × touch.max_torque',
         'the second, higher joint threshold, where the force estimate is unsure (fewer than 6 '
         'joints upstream). 30 N·m (9e44837, issue 29): not set by a benchmark'),
    Rule('no hand', IMPACT,
         lambda e, c: e.held and e.hand_distance > c.hand_distance,  # nan: does not apply
         lambda e, c: (f'no hand at the contacted link ({e.link or "none isolated"}: nearest '
                       f'hand {e.hand_distance:.2f} m > touch.hand_distance '
                       f'{c.hand_distance:g})'),
         "issue 29: with a skeleton's hands seen, a touch needs one at the contacted link or "
         'beyond it (seed 000 eq. 13.1 bounds the link from below), the link kept from the '
         "decision (else the hold's jolt moved it past the hand: 26 of 339 hands at ψ 1 N·m, "
         'issue 29 benchmark). hand_distance 0.15 m, hand_max_age 0.5 s: not set by a benchmark'),
)

# Evaluated once, when the window closes: the first row that fires decides.
WINDOW_END = (
    Rule('ended', IMPACT,
         lambda e, c: e.ended,
         lambda e, c: ('the contact ended within touch.decision_time of its hold, before it '
                       'could be told from an impact'),
         'issue 37: too little of it was seen (a brief tap); unsure is an impact'),
    Rule('window end: not at rest', IMPACT,
         lambda e, c: e.settling,
         lambda e, c: (f'no clear touch within touch.decision_time {_ms(c.decision_time)}: '
                       f'the held arm had not come to rest (‖q̇‖ {e.speed:.2f} rad/s, '
                       f'touch.rest_speed {c.rest_speed:g}) and settled'),
         "issue 37: the hold's jolt (0.4–1.3 N·m) would still be in the evidence"),
    Rule('window end: rise share', IMPACT,
         lambda e, c: e.rise_share > c.max_rise_share,
         lambda e, c: (f'no clear touch within touch.decision_time {_ms(c.decision_time)}: '
                       f'{e.rise_share:.0%} of its rise came within {_ms(c.rise_span)} > '
                       f'touch.max_rise_share {c.max_rise_share:g}'),
         "issue 37: a hand's share falls as its ramp goes on (rise_span over the ramp so far); "
         'still over max_rise_share at decision_time is no clear touch. decision_time 150 ms: '
         'benchmarks/touch_classification.py seed 37, ψ 0.8 N·m (hands at most 0.49 then; all '
         'but 2 pushes and every hit latched by a rule within 132 ms of the hold, 95 % within '
         '103)'),
    Rule('slow smooth rise', TOUCH,
         lambda e, c: True,
         lambda e, c: (f'a slow, smooth rise ({e.rise_share:.0%} within {_ms(c.rise_span)}) '
                       'within every touch limit'
                       + ('' if math.isnan(e.hand_distance) else ', a hand at the contacted '
                          'link')),
         'issue 37: no impact rule fired over the window'),
)


def first_fired(rules: tuple[Rule, ...], evidence: Evidence, config: TouchConfig
                ) -> Rule | None:
    """The first of `rules` that fires on `evidence` (None: none does)."""
    return next((rule for rule in rules if rule.fires(evidence, config)), None)


class ContactClassifier:
    """Impact or touch for the contact going on, sample by sample (module docstring); the
    contact force from `robot` (core/chain/contact_force.py). The detector calls `update` on
    every sample and `hold` on the first sample eq. 7 holds in a contact not yet held."""

    def __init__(self, config: TouchConfig, robot: RobotModel):
        self.config = config
        self.max_torque = per_joint('touch.max_torque', config.max_torque, robot.n, low=0.0,
                                    strict=True, unit=' N·m')
        self.reference = per_joint('touch.reference_torque', config.reference_torque, robot.n,
                                   low=0.0, strict=True, unit=' N·m')
        self.contact_force = ContactForce(robot, config.spread, config.isolation_torque)
        self._history: deque = deque()   # (t, s) of the last `window` seconds
        self._recent: deque = deque()    # (t, τ_ext) of the last BASELINE_LEAD + SPAN seconds
        self._onset: float | None = None  # stamp of the contact's first sample, None: none
        self._held: float | None = None   # stamp of its hold, None: not held yet
        self._rested: float | None = None  # stamp the held arm came to rest, None: not yet
        self._speed = math.inf            # ‖q̇‖ of the latest sample (inf: unknown)
        self._hold_speed = math.inf       # ‖q̇‖ at the hold
        self.kind = ''                    # '' until decided, then TOUCH or IMPACT
        self._fired: tuple[Rule, Evidence] | None = None  # the first impact rule that fired
        self._located = False             # the latest sample had joint positions
        self._rise = _Rise(config.rise_span, config.plateau_time)
        self._roughness = self._opposing = self._share = 0.0
        self._force = self._power = 0.0
        self._joint = -1                  # the contacted link's joint (-1: none yet)
        self._decided = 0.0               # stamp of the decision
        self._hand_link = ''              # the link a hand must stay at after the decision
        self.hands: HandsSeen | None = None  # the latest hands seen (None: never)
        # Each frame of the model → the joint that moves it: links beyond a joint's link.
        self._moved_by = {frame.name: frame.parentJoint for frame in robot.model.frames}

    @property
    def deciding(self) -> bool:
        """A contact is held and its class not yet decided."""
        return self._held is not None and not self.kind

    @property
    def awaiting_hold(self) -> bool:
        """A contact is going on that eq. 7 has not yet fired in."""
        return self._onset is not None and self._held is None

    def update(self, t: float, tau_ext: np.ndarray, ratios: np.ndarray,
               velocity: np.ndarray | None, position: np.ndarray | None) -> ContactDecision | None:
        """One sample: τ_ext (N·m), |τ_ext,i|/ψ_i, q̇ and q (None: unknown). Returns a decision
        when one is made at this sample: an impact rule firing in the window or after a touch,
        or the window's end (the first sample of eq. 7, the hold, is `hold`'s)."""
        config = self.config
        self._speed = math.inf if velocity is None else float(np.linalg.norm(velocity))
        if self._held is not None and self._rested is None:
            if velocity is None or self._speed <= config.rest_speed:
                self._rested = t  # without q̇, settle_time counts from here
            elif (t - self._held >= config.hold_latency
                  and self._speed >= SLOWING * self._hold_speed):
                self._rested = t - config.settle_time  # not slowing: no jolt coming
        self._remember(t, tau_ext)
        if float(ratios.max()) < config.onset_ratio:
            if self._settling(t):  # the hold's jolt can dip r: the same contact goes on
                return None
            if self.deciding:  # ended undecided
                return self._close_window(t, ended=True)
            self._onset, self._held, self.kind, self._fired = None, None, '', None
            return None
        if self._onset is None:
            self._start(t)
        self._measure(t, tau_ext, velocity, position)
        if self._fired is not None and (self.kind == TOUCH or self.deciding):
            return self._decide(t, *self._fired)
        if self.deciding and t - self._held >= config.decision_time - 1e-9:
            return self._close_window(t)
        return None

    def hold(self, t: float) -> ContactDecision | None:
        """Eq. 7 fired at `t` in this contact: f_S holds from this sample (seed 003) and the
        decision window opens; an impact rule that fired already, or fires now that it is
        held, decides it at once."""
        self._held = t
        self._rested = t if self._speed <= self.config.rest_speed else None
        self._hold_speed = self._speed
        self._fire(t)
        return self._decide(t, *self._fired) if self._fired is not None else None

    # ------------------------------------------------------------------ the rules
    def _fire(self, t: float) -> None:
        """IMPACT_RULES on this sample's evidence, unless one fired already in this contact
        (kept with the evidence it fired on) or it is an impact."""
        if self._fired is None and self.kind != IMPACT:
            evidence = self._evidence(t)
            rule = first_fired(IMPACT_RULES, evidence, self.config)
            self._fired = None if rule is None else (rule, evidence)

    def _close_window(self, t: float, ended: bool = False) -> ContactDecision:
        """The window closes (decision_time after the hold, or the contact `ended`): the first
        WINDOW_END row that fires decides."""
        self._rise.bridge()  # with the samples after the hold's jolt seen so far
        evidence = self._evidence(t, ended)
        return self._decide(t, first_fired(WINDOW_END, evidence, self.config), evidence)

    def _evidence(self, t: float, ended: bool = False) -> Evidence:
        rise, rested = self._rise, self._rested
        return Evidence(
            t=t, located=self._located, held=self._held is not None,
            touched=self.kind == TOUCH, settling=self._settling(t), ended=ended,
            seen=(t - max(self._onset, rested + self.config.settle_time)
                  if rested is not None and not rise.bridging else math.nan),
            peak=rise.peak, rise_share=rise.share, knee=rise.knee, band=rise.band,
            roughness=self._roughness, opposing_speed=self._opposing, force=self._force,
            link=self._link, torque_share=self._share, hand_distance=self._hand_distance(t),
            speed=self._speed)

    def _decide(self, t: float, rule: Rule, evidence: Evidence) -> ContactDecision:
        """`rule`, fired on `evidence`, decides the contact at `t`."""
        reason, name = rule.reason(evidence, self.config), rule.name
        if self.kind == TOUCH:
            reason, name = f'touch became an impact: {reason}', f'{name} after touch'
        self.kind, self._decided = rule.kind, t
        self._hand_link = self._hand_link or self._link
        if rule.kind == TOUCH:
            self._rise.decided()
        rise = self._rise
        return ContactDecision(rule.kind, name, reason, self._onset, self._held, t, self._link,
                               self._force, rise.peak, rise.share,
                               rise.largest / self.config.rise_span, self._roughness,
                               self._opposing, self._power, self._share,
                               self._hand_distance(t))

    # ------------------------------------------------------------------ evidence
    def _remember(self, t: float, tau_ext: np.ndarray) -> None:
        """The last `window` of s for the roughness, the last BASELINE_LEAD + BASELINE_SPAN
        of τ_ext for τ_before."""
        history, recent = self._history, self._recent
        if not self._settling(t):
            history.append((t, float((np.abs(tau_ext) / self.reference).max())))
        while history and t - history[0][0] > self.config.window:
            history.popleft()
        recent.append((t, tau_ext))
        while t - recent[0][0] > BASELINE_LEAD + BASELINE_SPAN:
            recent.popleft()

    def _start(self, t: float) -> None:
        """A contact's first sample: τ_before from the samples BASELINE_LEAD before it (the
        oldest kept when the stream is younger), and its rise since then."""
        recent = self._recent
        before = [tau for stamp, tau in recent if stamp <= t - BASELINE_LEAD] or [recent[0][1]]
        baseline = np.mean(before, axis=0)
        self._rise.start(baseline)
        for stamp, tau in recent:
            if stamp < t:
                self._rise.add(stamp, tau)
        self._onset, self._held = t, None
        self._roughness = self._opposing = self._share = 0.0
        self._force, self._joint, self._hand_link = 0.0, -1, ''

    def _measure(self, t: float, tau_ext: np.ndarray, velocity, position) -> None:
        """The contact's evidence after this sample, and the impact rules on it."""
        self._rise.add(t, tau_ext, counted=not self._settling(t))
        self._located = position is not None
        if position is not None and not self._settling(t):
            self._joint, force = self.contact_force.estimate(position, tau_ext, self._joint)
            self._force = max(self._force, math.sqrt(float(np.dot(force, force))))
        if not self._settling(t) and len(self._history) >= 3:
            ts, ss = np.array(self._history).T
            self._roughness = max(self._roughness, _fit_line(ts, ss)[1])
        self._power = 0.0
        if velocity is not None:
            self._power = float(np.dot(tau_ext, velocity))
            size = math.sqrt(float(np.dot(tau_ext, tau_ext)))
            if size > 0 and self.kind != TOUCH:  # a touch's arm holds or yields: not a hit
                self._opposing = max(self._opposing, -self._power / size)
        self._share = max(self._share, float((np.abs(tau_ext) / self.max_torque).max()))
        self._fire(t)

    def _settling(self, t: float) -> bool:
        """Held, undecided, and not yet settle_time after the arm came to rest: the arm's own
        hold jolts τ_ext (or not slowing down hold_latency after the hold: no jolt)."""
        return self._held is not None and not self.kind and (
            self._rested is None or t - self._rested < self.config.settle_time)

    # ------------------------------------------------------------------ the hand
    def _hand_distance(self, t: float) -> float:
        """The nearest hand to the contacted link or a link beyond it, m (inf: none there or
        no link isolated); nan when no hands were seen within hand_max_age of `t` (the rule
        does not apply). Links the model does not know are left out. After the decision the
        link is the one isolated then (the hold's jolt can move the isolated link out along
        the arm, past the hand: the `no hand` rule's source)."""
        hands = self.hands
        if hands is None or t - hands.t > self.config.hand_max_age:
            return math.nan
        contacted = self._hand_link or self._link
        if not contacted:
            return math.inf
        first = self._moved_by[contacted]
        return min((distance for link, distance in hands.link_distance.items()
                    if self._moved_by.get(link, -1) >= first), default=math.inf)

    @property
    def _link(self) -> str:
        """The contacted link ('' before one is isolated)."""
        return self.contact_force.robot.joint_links[self._joint] if self._joint >= 0 else ''


class _Rise:
    """y = ‖τ̄_ext − τ_before‖ of one contact (N·m, τ̄_ext: τ_ext's mean over the last
    SMOOTHING s, which takes the residual's white noise down by its square root): its peak,
    the largest rise within `span` (`largest`; `share` of the peak), the latest rise within
    `span` (`recent`) and y's band (max − min) over the last `flat_span`. Samples not
    `counted` (the hold's jolt) only fill τ̄_ext's mean; across them y is taken to follow the
    ramp (`bridge`: its rate before them or over the `span` after them, the steeper) up to the
    next counted y: a hand's ramp goes on through the gap, and whatever rose beyond that in the
    gap (a push that reached its force while the arm stopped) counts as a step, sudden. O(1)
    per sample but the `span` held back after the gap, bounded memory however long the
    contact: monotonic deques give the extremes."""

    def __init__(self, span: float, flat_span: float):
        self.span, self.flat_span = span, flat_span
        self._baseline = np.zeros(0)
        self._window: deque = deque()   # (t, τ_ext) of the last SMOOTHING s
        self._sum = np.zeros(0)         # their sum
        self._low = _Extreme(span, min)
        self._flat_low = _Extreme(flat_span, min)
        self._flat_high = _Extreme(flat_span, max)
        self._frozen = False            # a touch was decided: `largest` is kept as it was
        self._delayed = (deque(), deque())  # (t, y) of the last span, of the span before it
        self._then = [None, None]       # y a span ago, two spans ago (None: not yet)
        self._last: tuple | None = None  # (t, y) of the last sample counted
        self._gap = False               # samples were left out since then
        self._after: list = []          # (t, y) counted after them, held until bridged
        self.peak = self.largest = self.recent = self._y = 0.0

    def start(self, baseline: np.ndarray) -> None:
        self._baseline = baseline
        self._sum = np.zeros_like(baseline)
        self._window.clear()
        for extreme in (self._low, self._flat_low, self._flat_high):
            extreme.clear()
        for delayed in self._delayed:
            delayed.clear()
        self._then = [None, None]
        self._frozen = self._gap = False
        self._after.clear()
        self._last = None
        self.peak = self.largest = self.recent = 0.0

    def decided(self) -> None:
        """A touch was decided: from now on `recent` is what counts (a hit on top of it)."""
        self._frozen = True

    @property
    def share(self) -> float:
        return self.largest / self.peak if self.peak > 0 else 0.0

    @property
    def knee(self) -> float:
        """How much more y rose over the last span than over the span before it, a share of
        its peak: 0 on a steady ramp, the step's size on a hit."""
        y_span, y_two = self._then
        if y_two is None or not self.peak > 0:
            return 0.0
        return ((self._y - y_span) - (y_span - y_two)) / self.peak

    @property
    def band(self) -> float:
        """max − min of y over the last flat_span, a share of its peak."""
        return ((self._flat_high.value - self._flat_low.value) / self.peak if self.peak > 0
                else math.inf)

    def add(self, t: float, tau_ext: np.ndarray, counted: bool = True) -> None:
        window = self._window
        window.append((t, tau_ext))
        self._sum = self._sum + tau_ext
        while t - window[0][0] >= SMOOTHING:
            self._sum = self._sum - window.popleft()[1]
        if not counted:
            self._gap = self._last is not None
            return
        d = self._sum / len(window) - self._baseline
        y = math.sqrt(float(np.dot(d, d)))
        if self._gap:  # after samples left out: held until `span` of them shows the ramp's rate
            after = self._after
            after.append((t, y))
            if t - after[0][0] >= self.span - 1e-9:
                self.bridge()
            return
        self._count(t, y)

    @property
    def bridging(self) -> bool:
        """Samples after a gap are held back, the gap not yet bridged (`bridge`)."""
        return bool(self._after)

    def bridge(self) -> None:
        """y across the samples left out, then the samples held back after them: from the last
        y before the gap at the ramp's rate, the steeper of y's rise over the span before the
        gap and its rate over the samples after it, up to the first y after it. The rate after
        matters: the observer's lag (T_O) makes a hand's ramp steepen over its first tens of
        ms, so the rate before the hold under-draws it; a push that reached its force in the
        gap is flat after it, and its rise beyond the rate before counts as a step, sudden."""
        after = self._after
        if not after:
            return
        (t0, y0), (t1, y1), (t2, y2) = self._last, after[0], after[-1]
        slope = max(self.recent / self.span, (y2 - y1) / (t2 - t1) if t2 > t1 else 0.0)
        steps = max(1, math.ceil((t1 - t0) / BRIDGE_STEP))
        for k in range(1, steps):
            t_k = t0 + (t1 - t0) * k / steps
            self._count(t_k, min(y0 + slope * (t_k - t0), y1))
        for t, y in after:
            self._count(t, y)
        after.clear()
        self._gap = False

    def _count(self, t: float, y: float) -> None:
        self._last = (t, y)
        self._y = y
        value = (t, y)
        for k, delayed in enumerate(self._delayed):
            delayed.append(value)
            value = None
            while delayed and t - delayed[0][0] > (k + 1) * self.span:
                value = delayed.popleft()
                self._then[k] = value[1]
            if value is None:
                break
        self.recent = y - self._low.add(t, y)
        self._flat_low.add(t, y)
        self._flat_high.add(t, y)
        if not self._frozen:
            self.largest = max(self.largest, self.recent)
        self.peak = max(self.peak, y)


class _Extreme:
    """The minimum (or maximum) of a signal over its last `span` seconds, O(1) amortized
    (a monotonic deque)."""

    def __init__(self, span: float, kind):
        self.span = span
        self._worse = (lambda old, new: old >= new) if kind is min else (
            lambda old, new: old <= new)
        self._queue: deque = deque()

    def clear(self) -> None:
        self._queue.clear()

    @property
    def value(self) -> float:
        return self._queue[0][1]

    def add(self, t: float, y: float) -> float:
        queue = self._queue
        while queue and self._worse(queue[-1][1], y):
            queue.pop()
        queue.append((t, y))
        while t - queue[0][0] > self.span:
            queue.popleft()
        return queue[0][1]


def _fit_line(t: np.ndarray, r: np.ndarray) -> tuple[float, float]:
    """Least-squares straight line through (t, r): its slope and the RMS of r about it."""
    t = t - t.mean()
    r = r - r.mean()
    denominator = float(t.dot(t))
    slope = float(t.dot(r)) / denominator if denominator > 0 else 0.0
    residual = r - slope * t
    return slope, math.sqrt(float(residual.dot(residual)) / len(residual))
