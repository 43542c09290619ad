"""Impact or touch: collision classification of each contact the detector sees (issues 29, 37).

Haddadin, De Luca & Albu-Schäffer 2017 ("Robot collisions: a survey on detection,
isolation, and identification", IEEE T-RO) split the collision event pipeline into
detection, isolation, identification, classification and reaction; this module is the
classification step, between seed 001 eq. 7 (core/chain/detector.py) and seed 003's reaction
(core/chain/time_scaling.py). Like Golz, Osendorfer & Haddadin 2015 ("Using tactile sensation
for learning contact knowledge: discriminate collision from physical interaction", ICRA) and
Kouris, Dimeas & Aspragathos 2018 ("A frequency domain approach for contact type
distinction in human–robot collaboration", IEEE RA-L), it uses proprioceptive features of
how τ_ext rises and of its frequency content; unlike their learned classifiers it is a set of
explicit rules with physical bounds, conservative by construction.

Hold first, then decide (issue 37). What protects a person is that the arm stops moving: on
the sample eq. 7 fires, every contact holds the arm (seed 003's f_S = 0, a controlled stop
that keeps power: `hold`), the very sample the stop latches on with touch off. The class is
decided afterwards, within `decision_time` of the hold, on the evidence of that window: eq. 7
fires a few ms into a hand's ramp when ψ is calibrated low, before its rise can be told from
a push's; tens of ms later it can. An impact rule firing in the window latches the stop at
once; the window ending with no clear touch is an impact; unsure is always an impact. A
touch keeps the hold, yields (seed 003) and latches nothing.

The rise is measured in torque, not in ψ, so that ψ does not change what a hand looks like:
y = ‖τ_ext − τ_before‖ (N·m), τ_ext less its value BASELINE_LEAD before the contact's onset
(the model's error in motion, which would otherwise count as part of the contact). Its
shape tells a push from a hand whatever its size: a push or a hit ramps to its full force in
50 ms or less, so most of its rise comes within one `rise_span` (50 ms); a hand ramps over
150 ms or more (Golz 2015, Kouris 2018: intended contacts rise slowly), at most a third of
it within 50 ms. The rise share is the largest rise of y within any `rise_span` of the
contact, as a share of y's peak so far.

The hold's own jolt (issue 37): f_S to 0 (seed 003 eqs. 8–9) decelerates the arm, and the
model's error in that deceleration and the friction's flip at rest show in τ_ext as 0.4–1.3
N·m over 20–40 ms, as large as a hand's torque when a calibrated ψ fires. It starts when the
arm slows down, not at the hold: 1–3 ms later in the benchmark's closed loop, 10–40 ms in the
demo (f_S reaches the simulator over DDS, later the more loaded the machine), which is why a
fixed time after the hold let it into the rise of the demo's hand (rise shares 0.56–0.64, 3
runs in 20). So the samples from the hold until `settle_time` after the arm came to rest
(‖q̇‖ ≤ `rest_speed`; an arm that has not begun to slow `hold_latency` after the hold is not
jolted) are left out of the rise and the roughness, and across them the rise keeps its trend
from before the hold (_Rise): what rose beyond it counts as a step. A window that ends with
the arm not yet settled is no clear touch.

The rules (the first that fires names the impact):
- sudden rise: a rise share over `max_rise_share` once the rise has stopped (y has not
  reached a new 95 % of its peak for `plateau_time`): a push that reached its force. Still
  rising, a hand's share falls as its ramp goes on (rise_span over the ramp's length so far),
  so at the window's end a share still over `max_rise_share` is no clear touch, an impact;
- high frequency: the RMS of s = max_i |τ_ext,i| / τ_ref,i (τ_ref = `reference_torque`,
  seed 001's ψ of 4 N·m) about its straight-line fit over the last `window` seconds (what a
  line cannot follow: content above about 1/window, the knee and ringing of a hit, Kouris
  2018's spectral cue) above `max_roughness`. Measured in a fixed torque: the residual's
  noise is a torque, and in a calibrated ψ it made the demo's hand rough. Not while the
  hold settles (below);
- power: a contact that opposes the motion (τ_extᵀq̇ < 0) while the arm moves into it
  faster than `max_opposing_speed` (v_o = −τ_extᵀq̇ / ‖τ_ext‖, rad/s): a person does not
  push against an arm moving that fast (Haddadin 2017: an impact opposes the motion);
- size: the contact force, estimated from τ_ext and q on the isolated link
  (core/chain/contact_force.py: Haddadin 2017's isolation and identification steps, seed
  000), over `max_force` N; a joint over `max_torque` N·m, the second, higher joint
  threshold, whatever the estimate. An over-estimate of the force makes a touch an impact
  (safe); where the estimate is unsure (fewer than 6 joints upstream of the contact) the
  joint threshold still bounds it. Without joint positions there is no force: every
  contact is an impact;
- a hand at the contacted link: while hands have been seen within `hand_max_age` of the
  sample (`HandsSeen`, from the proximity monitor's skeleton: core/contact/proximity.py
  `hand_distances`), a touch needs a hand within `hand_distance` of the link isolated (at
  the decision, and until then the one isolated now) or of a link beyond it (isolation, seed
  000 eq. 13.1, bounds the link from below only), at every sample from the hold on (a touch
  whose hand leaves becomes an impact). With no hands seen recently the rule does not
  apply. The evidence only turns a touch into an impact, never the reverse;
- a contact that ends (falls under `onset_ratio`) before its class is decided is an impact:
  too little of it was seen.

A hand that pushes harder is still a hand: after a touch is decided it becomes an impact
only on evidence of a hit, a sudden rise (y rising within `rise_span` by more than
`max_rise_share` of its peak: a hand's ramp, seen for `decision_time` and more, rises less)
or ringing (the high-frequency rule), or on its size (`max_force`, `max_torque`), or when
its hand leaves. A slow, steady increase is none of these.

A contact starts when max_i |τ_ext,i|/ψ_i reaches `onset_ratio` and ends when it falls back
under it, but not while it is held undecided or a touch settles (`settle_time` after its
hold): the hold's jolt can dip it under for a few ms. An impact never becomes a touch.
"""
from __future__ import annotations

import math
from collections import deque
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
    # Why 150 ms (benchmarks/touch_classification.py, issue 37): a hand's rise share falls
    # under max_rise_share once about rise_span / max_rise_share (90 ms) of its ramp has been
    # seen, and at a calibrated ψ eq. 7 fires as early as 20 ms into it; at 150 ms after the
    # hold the hands' shares were at most 0.49, pushes' at least 0.62, and every push and hit
    # was latched by a rule before 100 ms. Longer only delays the stop of a push no rule
    # caught; shorter decides hands on too little of their ramp.
    decision_time: float = setting(
        0.15, 'each contact is decided within this long after its hold (the sample eq. 7 '
        'fires): an impact rule firing latches the stop at once, the window ending with no '
        'clear touch is an impact, s', range=(0.01, 1.0))
    onset_ratio: float = setting(
        0.5, 'a contact starts when some |τ_ext,i| reaches this share of ψ_i', range=(0.05, 0.99))
    rise_span: float = setting(
        0.05, 'the span a push or a hit rises to its full force in, s', range=(0.005, 0.5))
    # 0.5 (benchmarks/touch_classification.py seed 37 at ψ 0.8 N·m, the tuning draw): with
    # the hold's jolt left out until the arm rests, hands rose so by at most 0.53 at the
    # window's end (95 % under 0.47; the demo's hand 0.22–0.37 in 5 recordings), pushes by at
    # least 0.53; a push taken for a touch is the failure that harms, so the line is drawn
    # under the pushes.
    max_rise_share: float = setting(
        0.5, 'a contact whose torque rose by more than this share of its peak within '
        'touch.rise_span is an impact (a push), once the rise stopped or at the end of '
        'touch.decision_time; after a touch, such a rise is a hit', range=(0.05, 1.0))
    # 0.4: after their decision the benchmark's hands (holding, then yielding: the arm's own
    # friction flips as it starts back) rose so by up to 0.32 of their peak.
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
    spread: float = setting(
        0.05, "the contact's assumed distance from its link's centre of mass, for the force "
        'estimate on links with fewer than 6 joints upstream, m', range=(0.001, 1.0))
    isolation_torque: float = setting(
        0.5, 'δ_τ: the contacted link is the one the last joint with |τ_ext| at least this '
        'moves (seed 000 eq. 13.1), N·m', range=(0.01, 100.0))
    # The hold's jolt (seed 003's f_S = 0, benchmarks/touch_classification.py and the demo's
    # recordings, issue 37): the model's error while the arm decelerates, 0.4–1.3 N·m of
    # ‖τ̄_ext‖ (20 ms mean), from when the arm starts to slow down (1–3 ms after the hold in
    # the benchmark's closed loop, 10–40 ms in the demo, where f_S travels over DDS to the
    # simulator) until it is at rest, then the momentum observer's 20 ms. So the jolt is
    # timed by the arm's motion, not by the clock: it is over `settle_time` after the arm's
    # joint speed ‖q̇‖ fell to `rest_speed` (the last 0.1 rad/s takes the hold about 10 ms).
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
    reason: str             # the rule that made it an impact, or why it is a touch
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
        self._impact_rule = ''            # the first rule that fired in this contact
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
            if self.deciding:  # ended undecided: unsure
                return self._decide(t, IMPACT, 'the contact ended within touch.decision_time '
                                    'of its hold, before it could be told from an impact')
            self._onset, self._held, self.kind, self._impact_rule = None, None, '', ''
            return None
        if self._onset is None:
            self._start(t)
        self._measure(t, tau_ext, velocity, position)
        if self.kind == TOUCH and self._impact_rule:
            return self._decide(t, IMPACT, f'touch became an impact: {self._impact_rule}')
        if self.deciding:
            if self._impact_rule:
                return self._decide(t, IMPACT, self._impact_rule)
            if t - self._held >= config.decision_time - 1e-9:
                return self._window_end(t)
        return None

    def hold(self, t: float) -> ContactDecision | None:
        """Eq. 7 fired at `t` in this contact: f_S holds from this sample (seed 003) and the
        decision window opens; an impact rule that already fired decides it at once."""
        self._held = t
        self._rested = t if self._speed <= self.config.rest_speed else None
        self._hold_speed = self._speed
        self._impact_rule = self._impact_rule or self._no_hand(t)
        if self._impact_rule:
            return self._decide(t, IMPACT, self._impact_rule)
        return None

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
        """The contact's evidence after this sample; the first rule it breaks is kept."""
        self._rise.add(t, tau_ext, counted=not self._settling(t))
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
        if not self._impact_rule:
            self._impact_rule = (self._broken_rule(t, position is not None)
                                 or (self._no_hand(t) if self._held is not None else ''))

    def _settling(self, t: float) -> bool:
        """Held, undecided, and not yet settle_time after the arm came to rest: the arm's own
        hold jolts τ_ext (or not slowing down hold_latency after the hold: no jolt)."""
        return self._held is not None and not self.kind and (
            self._rested is None or t - self._rested < self.config.settle_time)

    def _broken_rule(self, t: float, located: bool) -> str:
        """Why the contact so far is an impact ('' while it may be a touch)."""
        config = self.config
        if not located:
            return 'no joint positions: the contact force is unknown'
        sudden = self._sudden_rise(t)
        if sudden:
            return sudden
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

    def _sudden_rise(self, t: float) -> str:
        """A push's rise ('' if none): before a touch, a rise share over max_rise_share
        once the rise stopped; after it, a new rise that large (a hit)."""
        config, rise = self.config, self._rise
        if self.kind == TOUCH:
            if rise.knee > config.hit_share:
                return (f'a sudden rise: {rise.knee:.0%} of its {rise.peak:.2f} N·m peak more '
                        f'within {config.rise_span * 1e3:.0f} ms than in the '
                        f'{config.rise_span * 1e3:.0f} ms before > touch.hit_share '
                        f'{config.hit_share:g}: a hit')
            return ''
        if self._held is None or self._settling(t):
            return ''  # the share so far of a rise still going on, and none seen in the jolt
        # Stopped: y within PLATEAU_BAND of its peak over plateau_time of samples seen (not
        # those the hold's jolt hid).
        seen = t - max(self._onset, self._rested + config.settle_time)
        if (rise.share > config.max_rise_share and seen >= config.plateau_time
                and rise.band <= PLATEAU_BAND):
            return (f'rose to {rise.peak:.2f} N·m, {rise.share:.0%} of it within '
                    f'{config.rise_span * 1e3:.0f} ms > touch.max_rise_share '
                    f'{config.max_rise_share:g}, and stopped: a push')
        return ''

    def _window_end(self, t: float) -> ContactDecision:
        """touch.decision_time after the hold: a touch only if the evidence is clear."""
        config, rise = self.config, self._rise
        if self._settling(t):
            return self._decide(t, IMPACT, (
                f'no clear touch within touch.decision_time {config.decision_time * 1e3:.0f} '
                f'ms: the held arm had not come to rest (‖q̇‖ {self._speed:.2f} rad/s, '
                f'touch.rest_speed {config.rest_speed:g}) and settled'))
        if rise.share > config.max_rise_share:
            return self._decide(t, IMPACT, (
                f'no clear touch within touch.decision_time {config.decision_time * 1e3:.0f} '
                f'ms: {rise.share:.0%} of its rise came within {config.rise_span * 1e3:.0f} '
                f'ms > touch.max_rise_share {config.max_rise_share:g}'))
        return self._decide(t, TOUCH, f'a slow, smooth rise ({rise.share:.0%} within '
                            f'{config.rise_span * 1e3:.0f} ms) within every touch limit' + (
                                '' if math.isnan(self._hand_distance(t))
                                else ', a hand at the contacted link'))

    # ------------------------------------------------------------------ the hand
    def _hand_distance(self, t: float) -> float:
        """The nearest hand to the contacted link or a link beyond it, m (inf: none there or
        no link isolated); nan when no hands were seen within hand_max_age of `t` (the rule
        does not apply). Links the model does not know are left out. After the decision the
        link is the one isolated then: while the arm holds, its own jolt can lift a distal
        joint's residual past touch.isolation_torque and move the isolated link out along the
        arm, past the hand (benchmarks/touch_classification.py: 26 of 339 touches at ψ = 1
        N·m became impacts so, issue 29)."""
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

    @property
    def _link(self) -> str:
        """The contacted link ('' before one is isolated)."""
        return self.contact_force.robot.joint_links[self._joint] if self._joint >= 0 else ''

    def _decide(self, t: float, kind: str, reason: str) -> ContactDecision:
        self.kind, self._decided = kind, t
        self._hand_link = self._hand_link or self._link
        if kind == TOUCH:
            self._rise.decided()
        rise = self._rise
        return ContactDecision(kind, reason, self._onset, self._held, t, self._link,
                               self._force, rise.peak, rise.share,
                               rise.largest / self.config.rise_span, self._roughness,
                               self._opposing, self._power, self._share,
                               self._hand_distance(t))


class _Rise:
    """y = ‖τ̄_ext − τ_before‖ of one contact (N·m, τ̄_ext: τ_ext's mean over the last
    SMOOTHING s, which takes the residual's white noise down by its square root): its peak,
    the largest rise within `span` (`largest`; `share` of the peak), the latest rise within
    `span` (`recent`) and y's band (max − min) over the last `flat_span`. Samples not
    `counted` (the hold's jolt) only fill τ̄_ext's mean; across them y is taken to follow its
    trend before them (its rise over the last span, the steeper side) up to the next counted
    y: a hand's ramp goes on as it was, and whatever rose beyond that trend in the gap (a push
    that reached its force while the arm stopped) counts as a step, sudden. O(1) per
    sample, bounded memory however long the contact: monotonic deques give the extremes."""

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
        if self._gap:  # y across the samples left out: its trend before them, up to y
            (t0, y0), steps = self._last, max(1, math.ceil((t - self._last[0]) / BRIDGE_STEP))
            slope = self.recent / self.span
            for k in range(1, steps):
                t_k = t0 + (t - t0) * k / steps
                self._count(t_k, min(y0 + slope * (t_k - t0), y))
            self._gap = False
        self._count(t, y)

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
