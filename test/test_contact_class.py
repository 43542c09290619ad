"""Impact or touch (core/chain/contact_class.py) inside the detector, on the Panda with
residuals J(p)ᵀF of a force on link 4. Every contact holds the arm (f_S = 0) on the sample eq.
7 fires, the sample the stop latches on with touch off (issue 37); its class is decided within
touch.decision_time: a slow smooth push is a touch and latches nothing, at seed 001's ψ and at
a calibrated one; a fast one, a rough one, one against a fast motion, one whose force grows
beyond max_force and one without joint positions is an impact, latched within the window; a
window that ends unsure is an impact; after a touch only a hit (a sudden rise, ringing) or
its size makes it one. The hand rule (issue 29): while hands are seen, a touch needs a hand
at the contacted link; the evidence only turns a touch into an impact."""

import numpy as np
import pytest

from contact_estimation.core.chain.contact_class import (IMPACT, IMPACT_RULES, TOUCH,
                                                          WINDOW_END, HandsSeen, TouchConfig)
from contact_estimation.core.chain.detector import COLLISION, CollisionDetector, DetectorConfig
from contact_estimation.core.chain.time_scaling import TimeScaling
from contact_estimation.core.robot.robot_model import RobotModel

ROBOT = RobotModel.load('panda')
DT = 0.001
ON = TouchConfig(enabled=True)
Q = np.array([0.3, -0.4, 0.2, -2.0, 0.1, 1.6, 0.5])
# τ_ext of 1 N pushing link 4 (a point on its body, in the base frame's −y), N·m per N.
PER_NEWTON = ROBOT.point_jacobian(Q, 'panda_link4', np.array([-0.05, 0.1, 0.0])).T @ [0, -1, 0]


def ramp(rise: float, peak: float, hold: float = 0.3, noise: float = 0.0,
         seed: int = 0) -> np.ndarray:
    """τ_ext rows at 1 kHz: 50 ms quiet, the force rising linearly to `peak` N over `rise` s,
    then `hold` s at the peak (plus Gaussian noise of `noise` N·m on every joint)."""
    newtons = np.concatenate([np.zeros(50), np.linspace(0, peak, int(round(rise / DT)) + 1),
                              np.full(int(round(hold / DT)), peak)])
    noise = np.random.default_rng(seed).normal(0, noise, (newtons.size, ROBOT.n))
    return newtons[:, None] * PER_NEWTON + noise


def run(tau, touch=ON, velocity=None, position=Q, hands: HandsSeen | None = None,
        threshold=4.0):
    """The detector at ψ = `threshold` N·m on every joint (seed 001's 4 by default)."""
    detector = CollisionDetector(DetectorConfig.build(ROBOT.joint_names,
                                                      thresholds_position=threshold), touch, ROBOT)
    if hands is not None:
        detector.set_hands(hands)
    return [detector.update(k * DT, row, velocity, position=position)
            for k, row in enumerate(tau)]


def first(states, what) -> int | None:
    return next((k for k, s in enumerate(states) if what(s)), None)


def decisions(states):
    return [(k, s.decision) for k, s in enumerate(states) if s.decision is not None]


def hold_sample(states) -> int | None:
    """The sample f_S goes to 0 on (seed 003's reaction to these states, as the node runs it)."""
    scaling = TimeScaling()
    return first([scaling.react(k * DT, s, s.residuals, None) for k, s in enumerate(states)],
                 lambda f_s: f_s == 0.0)


def test_a_slow_smooth_push_is_a_touch_that_holds_without_a_stop():
    states = run(ramp(0.5, 40.0, noise=0.08))
    assert not any(s.stop for s in states)
    (k, decision), = decisions(states)
    assert decision.kind == TOUCH and states[k].contact and states[k].touch
    assert decision.after_hold == pytest.approx(ON.decision_time, abs=DT / 2)
    assert decision.rise_share < ON.max_rise_share
    assert decision.link == 'panda_link4' and 20.0 < decision.force < ON.max_force
    assert states[-1].contact and states[-1].touch  # f_S keeps holding while it is pushed


@pytest.mark.parametrize('threshold', [4.0, 1.0, 0.5])
@pytest.mark.parametrize('rise, peak', [(0.15, 40.0), (0.3, 15.0), (1.0, 5.0)])
def test_every_contact_holds_on_the_sample_eq_7_fires_and_a_hand_is_a_touch_whatever_psi(
        threshold, rise, peak):
    """f_S = 0 on the very sample the stop latches on with touch off, and the hand's ramp
    (the issue's: 0.15–1 s to 5–40 N), measured in torque, is a touch at seed 001's ψ and
    at calibrated ones: the lower ψ, the earlier eq. 7 fires in its ramp, the same class."""
    tau = ramp(rise, peak, hold=1.0, noise=0.02)
    off = run(tau, TouchConfig(), threshold=threshold)
    stop = first(off, lambda s: s.stop)
    if stop is None:
        pytest.skip('under ψ: eq. 7 never fires')
    on = run(tau, threshold=threshold)
    assert hold_sample(on) == stop == first(on, lambda s: s.deciding)
    (k, decision), = decisions(on)
    assert decision.kind == TOUCH and decision.hold == pytest.approx(stop * DT)
    assert not any(s.stop for s in on)
    assert all(s.deciding for s in on[stop:k]) and not on[k].deciding


@pytest.mark.parametrize('rise, peak', [(0.0, 40.0), (0.02, 30.0), (0.05, 25.0), (0.05, 8.0)])
@pytest.mark.parametrize('threshold', [4.0, 1.0])
def test_a_fast_push_holds_on_the_same_sample_and_latches_within_the_decision_time(
        rise, peak, threshold):
    tau = ramp(rise, peak, noise=0.08)
    off, on = run(tau, TouchConfig(), threshold=threshold), run(tau, threshold=threshold)
    stop = first(off, lambda s: s.stop)
    if stop is None:
        pytest.skip('under ψ: eq. 7 never fires')
    assert hold_sample(on) == stop
    latched = first(on, lambda s: s.stop)
    assert stop <= latched <= stop + round(ON.decision_time / DT)
    assert on[latched].cause == COLLISION and 'impact' in on[latched].reason
    (k, decision), = decisions(on)
    assert k == latched and decision.kind == IMPACT and decision.hold == stop * DT
    assert decision.reason.startswith(('rose to', 'high-frequency'))  # a step is both


def test_a_step_is_latched_on_the_hold_itself():
    """A hit's rise is rough before eq. 7 fires: latched on the hold, as with touch off."""
    tau = ramp(0.0, 40.0, noise=0.08)
    stop = first(run(tau, TouchConfig()), lambda s: s.stop)
    assert first(run(tau), lambda s: s.stop) == stop


def test_the_roughness_is_measured_in_reference_torque_not_in_psi():
    """A hand with the residual noise of the demo's calibrated arm (0.12 N·m) stays a touch
    at ψ = 1 N·m: its roughness is measured in touch.reference_torque; in ψ it would look 4
    times rougher, an impact."""
    hand = ramp(1.0, 40.0, noise=0.12)
    (_, at_4), = decisions(run(hand))
    (_, at_1), = decisions(run(hand, threshold=1.0))
    assert at_4.kind == at_1.kind == TOUCH and at_1.hold < at_4.hold
    roughness_in_psi = TouchConfig(enabled=True, reference_torque=1.0)
    assert decisions(run(hand, roughness_in_psi, threshold=1.0))[0][1].reason.startswith(
        'high-frequency')


def test_a_window_that_ends_unsure_is_an_impact():
    """A push ramping in 50 ms, then swaying by ±30 % at 10 Hz (too small for the roughness
    rule; never still, so the sudden-rise rule never sees its rise stop): most of its rise
    came within 50 ms, so at the window's end it is no clear touch, an impact latched on
    that sample."""
    tau = ramp(0.05, 8.0, hold=0.5)
    sway = 1.0 + 0.3 * np.sin(2 * np.pi * 10.0 * DT * np.arange(len(tau) - 100))
    tau[100:] *= sway[:, None]
    states = run(tau, threshold=1.0)
    (k, decision), = decisions(states)
    assert decision.kind == IMPACT and decision.reason.startswith('no clear touch')
    assert decision.rule.startswith('window end: ')
    assert decision.after_hold == pytest.approx(ON.decision_time, abs=DT / 2)
    assert first(states, lambda s: s.stop) == k


def test_a_contact_that_ends_before_its_decision_is_an_impact():
    """Eq. 7 fired, then the contact ended within touch.decision_time: too little of it was
    seen to call it a touch, latched."""
    push = ramp(0.3, 40.0, hold=0.0)
    tau = np.concatenate([push, np.zeros((300, ROBOT.n))])
    stop = first(run(tau, TouchConfig()), lambda s: s.stop)
    ended = stop + 60  # after settle_time: a dip then is no longer the hold's jolt
    tau[ended:] = 0.0
    states = run(tau)
    (k, decision), = decisions(states)
    assert decision.kind == IMPACT and 'ended within touch.decision_time' in decision.reason
    assert decision.rule == 'ended'
    assert k == ended and states[k].stop


def test_a_touch_that_dips_under_the_onset_while_the_hold_settles_stays_a_touch():
    """f_S holds the arm at once on the sample eq. 7 fires (seed 003), and the jolt can dip r
    under touch.onset_ratio for a few ms: the same contact goes on, decided a touch, with no
    stop (ended there, it was an impact: too little seen)."""
    tau = ramp(0.5, 40.0, hold=0.6, noise=0.02)
    hold = first(run(tau, TouchConfig()), lambda s: s.stop)
    dip = np.arange(hold + 5, hold + 20)  # within touch.settle_time
    tau[dip] *= 0.2 + 0.3 * np.sin(np.linspace(0.0, 3 * np.pi, dip.size))[:, None] ** 2
    states = run(tau)
    assert [d.kind for _, d in decisions(states)] == [TOUCH]
    assert min(np.abs(states[k].residuals).max() / 4.0 for k in dip) < ON.onset_ratio
    assert not any(s.stop for s in states)


def observed(tau: np.ndarray, time_constant: float = 0.02) -> np.ndarray:
    """τ_ext as the momentum observer shows it: a first-order lag of T_O (seed 001, 20 ms)."""
    out = np.zeros_like(tau)
    for k in range(1, len(tau)):
        out[k] = out[k - 1] + DT / time_constant * (tau[k] - out[k - 1])
    return out


def run_held_arm(tau, threshold: float, speed: float = 0.8, stopping: float = 0.04):
    """The detector on an arm moving at `speed` rad/s that the hold brings to rest over
    `stopping` s (f_S = 0, seed 003), as the benchmark's closed loop does: (hold, states)."""
    moving = speed * np.eye(ROBOT.n)[0]
    hold = first(run(tau, TouchConfig(), velocity=moving, threshold=threshold), lambda s: s.stop)
    slowing = np.clip(1.0 - (np.arange(len(tau)) - hold) * DT / stopping, 0.0, 1.0)
    detector = CollisionDetector(DetectorConfig.build(ROBOT.joint_names,
                                                      thresholds_position=threshold), ON, ROBOT)
    return hold, [detector.update(k * DT, row, slowing[k] * moving, position=Q)
                  for k, row in enumerate(tau)]


@pytest.mark.parametrize('threshold', [0.5, 0.8])
def test_a_strong_fast_hand_is_a_touch_and_a_push_reaching_its_force_in_the_jolt_an_impact(
        threshold):
    """The observer's lag steepens a ramp over its first tens of ms, and the held arm's jolt
    is left out for 70 ms: bridged at its rate before the hold, the strongest, fastest hand of
    issue 37 (0.15 s to 40 N) took a step across the gap, rise share 0.58-0.63, an impact at a
    calibrated ψ (the benchmark lost 9 hands so); at the rate it ramps on after the gap, a
    touch. A push reaching its force in the gap is flat after it: a step, an impact."""
    noise = np.random.default_rng(1).normal(0, 0.05, (701, ROBOT.n))
    hold, hand = run_held_arm(observed(ramp(0.15, 40.0, hold=0.5)) + noise, threshold)
    (k, decision), = decisions(hand)
    assert decision.kind == TOUCH and decision.rise_share < ON.max_rise_share
    assert not any(s.stop for s in hand)
    hold, push = run_held_arm(observed(ramp(0.03, 25.0, hold=0.62)) + noise, threshold)
    (k, decision), = decisions(push)
    assert decision.rule == 'sudden rise' and k <= hold + round(ON.decision_time / DT)
    assert first(push, lambda s: s.stop) == k


def test_a_hand_that_pushes_harder_stays_a_touch():
    """Decided a touch, the hand keeps ramping, to twice its force over a second: a slow,
    steady increase is no evidence of a hit, and 60 N is under touch.max_force."""
    tau = np.concatenate([ramp(0.3, 30.0, hold=0.2), ramp(1.0, 30.0)[50:] + 30.0 * PER_NEWTON])
    tau += np.random.default_rng(2).normal(0, 0.05, tau.shape)
    for threshold in (4.0, 0.5):
        states = run(tau, threshold=threshold)
        assert [d.kind for _, d in decisions(states)] == [TOUCH]
        assert not any(s.stop for s in states)


@pytest.mark.parametrize('rise, newtons', [(0.0, 30.0), (0.02, 30.0), (0.05, 40.0)])
def test_a_sudden_rise_after_a_touch_is_a_hit_that_latches_the_stop(rise, newtons):
    """A touch held at 30 N, then a push on top of it ramping in ≤ 50 ms: a sudden rise
    (a knee), an impact latched within touch.rise_span of its start, whatever ψ."""
    touch = ramp(0.3, 30.0, hold=0.4)
    hit = ramp(rise, newtons, hold=0.3)[50:] + 30.0 * PER_NEWTON
    tau = np.concatenate([touch, hit]) + np.random.default_rng(3).normal(0, 0.05, (
        len(touch) + len(hit), ROBOT.n))
    for threshold in (4.0, 0.5):
        states = run(tau, threshold=threshold)
        (_, touched), (k, impact) = decisions(states)
        assert touched.kind == TOUCH and impact.kind == IMPACT
        assert impact.reason.startswith('touch became an impact: ')
        assert impact.rule in ('hit (knee) after touch', 'roughness after touch')  # a hit
        assert len(touch) <= k <= len(touch) + round(ON.rise_span / DT)
        assert first(states, lambda s: s.stop) == k


def test_touch_off_runs_no_classifier_and_changes_nothing():
    tau = ramp(0.5, 40.0)
    off = run(tau, TouchConfig())
    assert first(off, lambda s: s.stop) is not None
    assert not any(s.touch or s.decision for s in off)


def test_a_touch_whose_force_grows_beyond_max_force_latches_an_impact():
    tau = np.concatenate([ramp(0.5, 40.0, hold=0.3), ramp(1.0, 60.0)[50:] + 40.0 * PER_NEWTON])
    states = run(tau)
    (k_touch, touch), (k_impact, impact) = decisions(states)
    assert touch.kind == TOUCH and impact.kind == IMPACT
    assert 'touch.max_force' in impact.reason and impact.force > ON.max_force
    assert first(states, lambda s: s.stop) == k_impact
    # the joint torques alone were still under touch.max_torque: the force rule caught it
    assert np.abs(states[k_impact].residuals).max() < ON.max_torque


def test_a_touch_beyond_max_torque_latches_an_impact_whatever_the_force_estimate():
    touch = TouchConfig(enabled=True, max_force=1e4, max_torque=10.0)
    tau = np.concatenate([ramp(0.5, 40.0, hold=0.1), ramp(1.0, 60.0)[50:] + 40.0 * PER_NEWTON])
    impact = decisions(run(tau, touch))[-1][1]
    assert impact.kind == IMPACT and 'max_torque' in impact.reason


def test_without_joint_positions_a_contact_is_an_impact():
    states = run(ramp(0.5, 40.0), position=None)
    (k, decision), = decisions(states)
    assert decision.kind == IMPACT and 'no joint positions' in decision.reason
    assert states[k].stop


def test_touch_needs_the_robot_model():
    with pytest.raises(ValueError, match='robot model'):
        CollisionDetector(DetectorConfig.build(ROBOT.joint_names), ON)


def test_a_smooth_push_with_ringing_is_an_impact():
    tau = ramp(0.5, 40.0)
    k = np.arange(len(tau))
    ringing = 8.0 * np.sin(2 * np.pi * 40 * k * DT) * (np.abs(tau).max(axis=1) > 2.0)
    tau += ringing[:, None] * PER_NEWTON
    states = run(tau)
    decision = decisions(states)[0][1]
    assert decision.kind == IMPACT and 'high-frequency' in decision.reason
    assert states[first(states, lambda s: s.decision is not None)].stop


def test_a_slow_push_against_a_fast_motion_is_an_impact_and_along_it_a_touch():
    tau = ramp(0.5, 40.0)
    motion = 1.5 * PER_NEWTON / np.linalg.norm(PER_NEWTON)  # q̇ along τ_ext: 1.5 rad/s
    against, along = run(tau, velocity=-motion), run(tau, velocity=motion)
    assert decisions(against)[0][1].kind == IMPACT and any(s.stop for s in against)
    assert decisions(along)[0][1].kind == TOUCH and not any(s.stop for s in along)
    assert decisions(along)[0][1].power > 0


def test_a_released_touch_ends_the_contact_and_the_next_one_is_decided_anew():
    push = ramp(0.5, 40.0, hold=0.1)
    states = run(np.concatenate([push, push[::-1], ramp(0.0, 40.0)]))
    assert [d.kind for _, d in decisions(states)] == [TOUCH, IMPACT]
    assert any(s.stop for s in states)


@pytest.mark.parametrize('field, value', [('onset_ratio', 1.0), ('max_rise_share', 1.5),
                                          ('window', float('nan')), ('decision_time', 0.0),
                                          ('max_force', -1.0), ('spread', 0.0),
                                          ('hand_distance', -0.1), ('hand_max_age', 0.0)])
def test_bad_touch_settings_are_refused_naming_them(field, value):
    with pytest.raises(ValueError, match=field):
        TouchConfig(**{field: value})


# ------------------------------------------------------------------ a hand at the link
def test_a_touch_with_a_hand_at_the_contacted_link_stays_a_touch():
    hand = HandsSeen(0.05, {'panda_link4': 0.03, 'panda_link5': 0.1})
    states = run(ramp(0.5, 40.0, noise=0.08), hands=hand)
    assert not any(s.stop for s in states)
    (_, decision), = decisions(states)
    assert decision.kind == TOUCH and decision.hand_distance == pytest.approx(0.03)
    assert 'a hand at the contacted link' in decision.reason


@pytest.mark.parametrize('links', [{}, {'panda_link2': 0.0}, {'panda_link4': 0.4}])
def test_a_touch_with_no_hand_at_the_contacted_link_is_an_impact_on_the_same_sample(links):
    """Hands seen, none within touch.hand_distance of link 4 or a link beyond it (none at
    all, one at a link nearer the base, one too far): the slow push is an impact, stopped on
    the sample eq. 7 fires."""
    tau = ramp(0.5, 40.0, noise=0.08)
    stop = first(run(tau, TouchConfig()), lambda s: s.stop)
    states = run(tau, hands=HandsSeen(0.05, links))
    assert first(states, lambda s: s.stop) == stop
    (k, decision), = decisions(states)
    assert k == stop and decision.kind == IMPACT and decision.link == 'panda_link4'
    assert decision.reason.startswith('no hand at the contacted link (panda_link4')
    assert decision.hand_distance == links.get('panda_link4', np.inf)


def test_hands_seen_too_long_ago_do_not_apply_and_a_touch_stays_a_touch():
    """The skeleton's stamp more than touch.hand_max_age before the contact: the rule does
    not apply (no tracker seen recently), τ_ext alone decides."""
    states = run(ramp(0.5, 40.0, noise=0.08), hands=HandsSeen(-ON.hand_max_age, {}))
    (_, decision), = decisions(states)
    assert decision.kind == TOUCH and np.isnan(decision.hand_distance)
    assert decision.reason.startswith('a slow, smooth rise (')
    assert decision.reason.endswith('within every touch limit')


def test_a_hand_never_turns_an_impact_into_a_touch():
    hand = HandsSeen(0.05, {'panda_link4': 0.0})
    (_, decision), = decisions(run(ramp(0.0, 40.0, noise=0.08), hands=hand))
    assert decision.kind == IMPACT and decision.reason.startswith(('rose at', 'high-frequency'))


def test_a_hand_beyond_the_isolated_link_counts():
    """Isolation (seed 000 eq. 13.1) bounds the contacted link from below: a hand at link 6
    may be pushing link 4's torques alone (its line near the wrist's axes), a touch."""
    (_, decision), = decisions(run(ramp(0.5, 40.0, noise=0.08),
                                   hands=HandsSeen(0.05, {'panda_link6': 0.02})))
    assert decision.kind == TOUCH and decision.link == 'panda_link4'
    assert decision.hand_distance == pytest.approx(0.02)


def test_a_touch_whose_hand_leaves_the_link_becomes_an_impact():
    """Hands at link 4 at the decision, then a skeleton with the hand at link 2 (nearer the
    base) while the contact goes on: the touch becomes an impact on that sample and latches
    the stop."""
    tau = ramp(0.5, 40.0, hold=0.6, noise=0.08)
    moved = len(tau) - 200
    detector = CollisionDetector(DetectorConfig.build(ROBOT.joint_names), ON, ROBOT)
    detector.set_hands(HandsSeen(0.0, {'panda_link4': 0.02}))
    states = []
    for k, row in enumerate(tau):
        if k == moved:
            detector.set_hands(HandsSeen(k * DT, {'panda_link2': 0.02}))
        states.append(detector.update(k * DT, row, position=Q))
    (_, touch), (k_impact, impact) = decisions(states)
    assert touch.kind == TOUCH and impact.kind == IMPACT and k_impact == moved
    assert 'no hand at the contacted link' in impact.reason and states[k_impact].stop


def test_after_the_decision_the_hand_is_checked_against_the_link_isolated_then():
    """While the arm holds, its own jolt can lift a distal joint's residual past
    touch.isolation_torque, moving the isolated link out to link 6, past the hand at link 4:
    the touch stays a touch (the link isolated at the decision is the one checked)."""
    tau = ramp(0.5, 40.0, hold=0.6, noise=0.02)
    tau[-300:, 5] += np.linspace(0.0, 1.0, 300)  # joint 6: under ψ, over isolation_torque
    detector = CollisionDetector(DetectorConfig.build(ROBOT.joint_names), ON, ROBOT)
    states = []
    for k, row in enumerate(tau):
        if k % 30 == 0:  # a 33 Hz tracker
            detector.set_hands(HandsSeen(k * DT, {'panda_link4': 0.02}))
        states.append(detector.update(k * DT, row, position=Q))
    (_, decision), = decisions(states)
    assert decision.kind == TOUCH and decision.link in ('panda_link3', 'panda_link4')
    assert ROBOT.joint_links[detector.classifier._joint] == 'panda_link6'  # moved out
    assert not any(s.stop for s in states)


def test_hands_survive_a_change_of_the_touch_settings():
    detector = CollisionDetector(DetectorConfig.build(ROBOT.joint_names), ON, ROBOT)
    hands = HandsSeen(0.0, {'panda_link4': 0.02})
    detector.set_hands(hands)
    detector.configure_touch(TouchConfig(enabled=True, hand_distance=0.01))
    assert detector.classifier.hands is hands


def test_every_rule_is_named_once_and_cites_its_source():
    """The rules are a table: each row's name is unique (collision events carry it as
    `class.rule`), says what it decides, and cites where its constants come from; the window's
    end always decides (its last row, a touch, always fires)."""
    rows = IMPACT_RULES + WINDOW_END
    assert len({rule.name for rule in rows}) == len(rows)
    assert all(rule.source.strip() and rule.kind in (IMPACT, TOUCH) for rule in rows)
    assert all(rule.kind == IMPACT for rule in IMPACT_RULES)
    assert [rule.kind for rule in WINDOW_END].count(TOUCH) == 1 and WINDOW_END[-1].kind == TOUCH


def test_a_held_arm_that_never_comes_to_rest_is_an_impact_and_its_contact_goes_on():
    """The window closes with the held arm slowing but never at rest (under 80 % of its speed
    at the hold, over touch.rest_speed): no clear touch, an impact; the contact's later
    samples are still taken (before the rules were a table, the next one raised TypeError)."""
    tau = ramp(0.4, 40.0, hold=0.5)
    hold = first(run(tau, TouchConfig()), lambda s: s.stop)
    speed = np.clip(1.0 - 5.0 * DT * (np.arange(len(tau)) - hold), 0.5, 1.0)  # 0.5 after 100 ms
    detector = CollisionDetector(DetectorConfig.build(ROBOT.joint_names), ON, ROBOT)
    states = [detector.update(k * DT, row, speed[k] * np.eye(ROBOT.n)[0], position=Q)
              for k, row in enumerate(tau)]
    (k, decision), = decisions(states)
    assert decision.rule == 'window end: not at rest' and decision.kind == IMPACT
    assert all(s.stop and s.contact for s in states[k:])
