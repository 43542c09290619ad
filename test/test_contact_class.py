"""Impact or touch (core/chain/contact_class.py) inside the detector, on the Panda with
residuals J(p)ᵀF of a force on link 4: a slow smooth push is a touch and latches nothing; a
fast one, a rough one, one against a fast motion, one whose force grows beyond max_force and
one without joint positions is an impact, stopped on the very sample it is stopped on with
touch off. The hand rule (issue 29): while hands are seen, a touch needs a hand at the
contacted link; the evidence only turns a touch into an impact."""

import numpy as np
import pytest

from contact_estimation.core.chain.contact_class import IMPACT, TOUCH, HandsSeen, TouchConfig
from contact_estimation.core.chain.detector import COLLISION, CollisionDetector, DetectorConfig
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


def test_a_slow_smooth_push_is_a_touch_that_holds_without_a_stop():
    states = run(ramp(0.5, 40.0, noise=0.08))
    assert not any(s.stop for s in states)
    (k, decision), = decisions(states)
    assert decision.kind == TOUCH and states[k].contact and states[k].touch
    assert 0.0 < decision.delay < 0.5 and decision.rise_rate < ON.max_rise_rate
    assert decision.link == 'panda_link4' and 20.0 < decision.force < ON.max_force
    assert states[-1].contact and states[-1].touch  # f_S keeps holding while it is pushed


@pytest.mark.parametrize('rise, peak', [(0.0, 40.0), (0.02, 30.0), (0.05, 25.0)])
def test_a_fast_push_is_an_impact_stopped_on_the_same_sample_as_with_touch_off(rise, peak):
    tau = ramp(rise, peak, noise=0.08)
    off, on = run(tau, TouchConfig()), run(tau)
    stop = first(off, lambda s: s.stop)
    assert stop is not None and first(on, lambda s: s.stop) == stop
    assert on[stop].cause == COLLISION and 'impact' in on[stop].reason
    (k, decision), = decisions(on)
    assert k == stop and decision.kind == IMPACT
    assert decision.reason.startswith(('rose at', 'high-frequency'))  # a step is both


def test_calibrated_thresholds_measure_the_rise_in_psi_and_the_roughness_in_reference_torque():
    """With ψ from `calibrate` (1 N·m here: a quarter of seed 001's) a push ramping in 50 ms
    to 8 N (1.4 N·m: over ψ, a third of τ_ref) rises at over 20 ψ/s, an impact by its rise
    alone (in τ_ref it rose at 7/s, a hand's rate). A hand with the residual noise of the
    demo's calibrated arm (0.12 N·m) stays a touch: its roughness is measured in
    touch.reference_torque, and in ψ it would look 4 times rougher, an impact."""
    rise_alone = TouchConfig(enabled=True, min_evidence_time=0.0)
    push = decisions(run(ramp(0.05, 8.0, noise=0.02), rise_alone, threshold=1.0))[0][1]
    assert push.kind == IMPACT and push.reason.startswith('rose at') and push.rise_rate > 20
    hand = ramp(1.0, 40.0, noise=0.12)
    (_, at_4), = decisions(run(hand))
    (_, at_1), = decisions(run(hand, threshold=1.0))
    assert at_4.kind == at_1.kind == TOUCH and at_1.stamp < at_4.stamp
    roughness_in_psi = TouchConfig(enabled=True, reference_torque=1.0)
    assert decisions(run(hand, roughness_in_psi, threshold=1.0))[0][1].reason.startswith(
        'high-frequency')


def test_a_push_decided_within_ms_of_its_onset_is_an_impact_whatever_its_slope_so_far():
    """With a calibrated ψ of 1 N·m eq. 7 fires 21 ms after the onset of a 15 N push ramping
    in 50 ms: too little of its rise seen for a slope to tell, an impact, even with the rise
    rule off. Without touch.min_evidence_time as well it would pass for a touch."""
    push = ramp(0.05, 15.0, noise=0.02)
    no_rise_rule = TouchConfig(enabled=True, max_rise_rate=1000.0)
    first_decision = decisions(run(push, no_rise_rule, threshold=1.0))[0][1]
    assert first_decision.kind == IMPACT and 'touch.min_evidence_time' in first_decision.reason
    blind = TouchConfig(enabled=True, max_rise_rate=1000.0, min_evidence_time=0.0)
    assert decisions(run(push, blind, threshold=1.0))[0][1].kind == TOUCH


def test_a_push_held_still_that_creeps_over_psi_is_an_impact():
    """A push ramping in 50 ms to 0.75 ψ (15 ψ/s: under touch.max_rise_rate), then held while
    the arm's motion lengthens its lever, so that its torque creeps over ψ some 200 ms later:
    it rose like a push and stalled, an impact (touch.stalled_rise_rate). Without that rule
    it passes for a touch."""
    newtons = 0.75 * 4.0 / np.abs(PER_NEWTON).max()
    creep = np.linspace(1.0, 1.6, 400)[:, None] * newtons * PER_NEWTON
    tau = np.concatenate([ramp(0.05, newtons, hold=0.0), creep])
    tau += np.random.default_rng(1).normal(0, 0.02, tau.shape)
    decision = decisions(run(tau))[0][1]
    assert decision.kind == IMPACT and 'touch.stalled_rise_rate' in decision.reason
    assert decision.delay > 0.1 and decision.rise_rate < ON.max_rise_rate
    no_stall_rule = TouchConfig(enabled=True, stalled_rise_rate=1000.0)
    assert decisions(run(tau, no_stall_rule))[0][1].kind == TOUCH


def test_a_touch_that_dips_under_the_onset_while_the_hold_settles_stays_a_touch():
    """f_S holds the arm at once when a touch is decided (seed 003), and the jolt can dip r
    under touch.onset_ratio for a few ms: the same contact goes on, still a touch, with no
    stop (restarted, it was decided afresh on the jolt's roughness: an impact)."""
    tau = ramp(0.5, 40.0, hold=0.6, noise=0.02)
    (k, decision), = decisions(run(tau))
    assert decision.kind == TOUCH
    dip = np.arange(k + 20, k + 35)
    tau[dip] *= 0.2 + 0.3 * np.sin(np.linspace(0.0, 3 * np.pi, dip.size))[:, None] ** 2
    states = run(tau)
    assert [d.kind for _, d in decisions(states)] == [TOUCH]
    assert min(np.abs(s.residuals).max() / 4.0 for s in states[k + 20:k + 35]) < ON.onset_ratio
    assert not any(s.stop for s in states)


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


@pytest.mark.parametrize('field, value', [('onset_ratio', 1.0), ('max_rise_rate', 0.0),
                                          ('window', float('nan')), ('slope_time', 0.1),
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
    assert decision.reason == 'slow, smooth rise within every touch limit'


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
