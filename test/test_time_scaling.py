"""Seed 003's time-scaling reaction: track, hold, yield when pushed back, recover."""
import dataclasses

import numpy as np
import pytest

from contact_estimation.core.chain.detector import CollisionDetector, DetectorConfig
from contact_estimation.core.chain.time_scaling import (
    TimeScaling,
    TimeScalingConfig,
    combined_scaling,
    worth_publishing,
)

DT = 0.001
MOTION = np.array([0.0, 0.3, -0.4])  # q̇ of the forward motion, |q̇| = 0.5 rad/s


def run(scaling, t0, seconds, **kwargs):
    values = [scaling.update(t0 + k * DT, **kwargs) for k in range(int(round(seconds / DT)))]
    return values, t0 + len(values) * DT


def sign_changes(values) -> int:
    """Changes of sign of f_S (−, 0, +): hold ↔ yield ↔ track."""
    return int(np.count_nonzero(np.diff(np.sign(values))))


def total_variation(values) -> float:
    return float(np.abs(np.diff(values)).sum())


CONFIG = TimeScalingConfig(alpha=0.1, push_threshold=2.0, push_hysteresis=1.0,
                           push_filter_time=0.05, yield_rate=4.0, recovery_rate=2.0,
                           resume_delay=0.0)
DIRECTION = MOTION / np.linalg.norm(MOTION)


def test_track_hold_yield_hold_recover():
    scaling = TimeScaling(CONFIG)
    free, t = run(scaling, 0.0, 0.1, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    assert free == [1.0] * len(free)

    held, t = run(scaling, t, 0.05, contact=True, tau_ext=np.array([0, 5, 0]),
                  velocity=MOTION * 0)
    assert held == [0.0] * len(held)  # at once: seed 003's hold is never delayed

    back = -8.0 * DIRECTION  # 8 N·m against the motion
    assert scaling.push(back) == pytest.approx(-8.0)
    pushed, t = run(scaling, t, 0.6, contact=True, tau_ext=back, velocity=-0.3 * MOTION)
    # Played push 8 − h/2 = 7.5 N·m, 5.5 beyond the dead band: −0.55, reached at ≤ 4/s.
    assert pushed[-1] == pytest.approx(-0.55, abs=1e-4)
    assert np.all(np.diff(pushed) <= 0) and np.all(np.diff(pushed) >= -4.0 * DT - 1e-12)

    strong, t = run(scaling, t, 0.5, contact=True, tau_ext=5 * back, velocity=-MOTION)
    assert strong[-1] == -1.0  # clipped

    released, t = run(scaling, t, 0.5, contact=True, tau_ext=0.5 * DIRECTION,
                      velocity=0 * MOTION)
    assert released[-1] == 0.0  # the person let go but the contact is still there
    assert np.all(np.diff(released) <= 4.0 * DT + 1e-12)  # slowing down, not a jump

    recovering, t = run(scaling, t, 0.6, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    assert recovering[0] == pytest.approx(2.0 * DT)  # from 0 at recovery_rate
    assert np.all(np.diff(recovering) >= 0)
    assert recovering[249] == pytest.approx(0.5, abs=2 * DT * 2.0)
    assert recovering[-1] == 1.0


def noisy_push(rng, seconds, push_back, sigma=0.3, ramp=0.1):
    """τ_ext of a steady push back of `push_back` N·m along the path (ramped in), with white
    noise of `sigma` N·m on every joint, sampled at DT."""
    k = np.arange(int(round(seconds / DT)))
    level = push_back * np.minimum(1.0, k * DT / ramp)
    return -level[:, None] * DIRECTION + rng.normal(0.0, sigma, (k.size, 3))


@pytest.mark.parametrize('push_back', [2.0, 2.6, 8.0, 30.0])
def test_a_steady_noisy_push_gives_a_monotone_f_s_without_chatter(push_back):
    """At the edge of the dead band (2.0, 2.6 N·m) and beyond: one way down, then still.
    The contact flag itself flickers (a contact near its threshold): resume_delay bridges it."""
    rng = np.random.default_rng(int(push_back * 10))
    scaling = TimeScaling(dataclasses.replace(CONFIG, resume_delay=0.5))
    _, t = run(scaling, 0.0, 0.1, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    values = [1.0] + [scaling.update(t + k * DT, contact=k == 0 or bool(rng.random() < 0.7),
                                     tau_ext=tau)
                      for k, tau in enumerate(noisy_push(rng, 2.0, push_back))]
    assert np.all(np.diff(values) <= 0)                     # monotone during the push
    assert sign_changes(values) <= 2                        # track → hold (→ yield), once
    assert total_variation(values) == pytest.approx(1.0 - values[-1])
    assert values[-1] == pytest.approx(-min(1.0, 0.1 * max(0.0, push_back - 2.5)), abs=0.03)


def test_yield_starts_and_ends_at_either_side_of_the_hysteresis():
    scaling = TimeScaling(CONFIG)
    _, t = run(scaling, 0.0, 0.1, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    # Played push: 2.4 − h/2 = 1.9 (hold); 3.0 (−0.1); 2.0 + h/2 = 2.5 (still −0.05);
    # 1.4 + h/2 = 1.9 (hold); 2.4 stays 1.9 (hold).
    for push_back, expected in ((2.4, 0.0), (3.5, -0.1), (2.0, -0.05), (1.4, 0.0),
                                (2.4, 0.0)):
        values, t = run(scaling, t, 1.0, contact=True, tau_ext=-push_back * DIRECTION)
        assert values[-1] == pytest.approx(expected, abs=1e-6), push_back


def test_rates_are_per_second_at_1_khz_and_at_100_hz_with_jitter():
    """The same push gives the same f_S curve from a 1 kHz and a jittered 100 Hz stream."""
    def curve(times):
        scaling = TimeScaling(CONFIG)
        scaling.update(-0.1, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
        return np.array([scaling.update(t, contact=True, tau_ext=-12.0 * DIRECTION)
                         for t in times])
    fast_t = np.arange(0.0, 0.5, DT)
    slow_t = np.cumsum(np.random.default_rng(5).uniform(0.004, 0.010, 80))
    slow_t = slow_t[slow_t < 0.5]
    fast, slow = curve(fast_t), curve(slow_t)
    assert np.all(np.abs(np.diff(slow)) <= 4.0 * np.diff(slow_t) + 1e-12)
    np.testing.assert_allclose(slow, np.interp(slow_t, fast_t, fast), atol=0.01)


def test_unusable_input_or_a_forward_push_hold_at_once_even_while_yielding():
    scaling = TimeScaling(CONFIG)
    _, t = run(scaling, 0.0, 0.1, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    yielding, t = run(scaling, t, 0.5, contact=True, tau_ext=-20.0 * DIRECTION)
    assert yielding[-1] < -0.5
    assert scaling.update(t, contact=False, tau_ext=None) == 0.0
    yielding, t = run(scaling, t + DT, 0.5, contact=True, tau_ext=-20.0 * DIRECTION)
    assert yielding[-1] < -0.5
    # Backing into something: the push turns forward along the path (filtered: ~0.1 s).
    forward, t = run(scaling, t, 0.2, contact=True, tau_ext=20.0 * DIRECTION)
    first_zero = forward.index(0.0)
    assert first_zero < 100 and forward[first_zero - 1] < -0.3  # not ramped: at once


def test_holds_for_the_resume_delay_after_the_contact_then_recovers():
    scaling = TimeScaling(TimeScalingConfig(recovery_rate=1.0, resume_delay=0.2))
    run(scaling, 0.0, 0.05, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    _, t = run(scaling, 0.05, 0.05, contact=True, tau_ext=np.array([0, 5, 0]))
    after, t = run(scaling, t, 0.4, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    assert after[:199] == [0.0] * 199          # 0.2 s after the last contact sample
    assert after[-1] == pytest.approx(0.2, abs=2 * DT)
    # A contact that comes back within the delay holds again and restarts the delay.
    again, _ = run(scaling, t, 0.01, contact=True, tau_ext=np.zeros(3))
    assert again == [0.0] * len(again)


def test_the_path_direction_is_not_learnt_while_the_arm_settles_after_a_contact():
    scaling = TimeScaling(CONFIG)
    _, t = run(scaling, 0.0, 0.05, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    _, t = run(scaling, t, 0.05, contact=True, tau_ext=np.array([0, 5, 0]))
    settling = np.array([0.2, 0.0, 0.0])  # a joint pushed off the path springs back
    _, t = run(scaling, t, 0.3, contact=False, tau_ext=np.zeros(3), velocity=settling)
    np.testing.assert_allclose(scaling.direction, DIRECTION)
    pushed, _ = run(scaling, t, 0.6, contact=True, tau_ext=-8.0 * DIRECTION)
    assert pushed[-1] == pytest.approx(-0.55, abs=1e-4)


def test_unusable_input_holds_and_never_yields():
    scaling = TimeScaling(TimeScalingConfig(alpha=1.0, push_threshold=1.0, resume_delay=0.0))
    run(scaling, 0.0, 0.01, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    assert scaling.update(0.02, contact=False, tau_ext=None) == 0.0


def test_a_push_along_the_motion_or_without_torque_only_holds():
    scaling = TimeScaling(TimeScalingConfig(alpha=1.0, push_threshold=1.0))
    run(scaling, 0.0, 0.01, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    forward = 10 * MOTION / np.linalg.norm(MOTION)
    assert scaling.update(0.02, contact=True, tau_ext=forward) == 0.0
    assert scaling.update(0.03, contact=True, tau_ext=None) == 0.0


def test_no_yield_before_any_motion_gave_a_direction():
    scaling = TimeScaling()
    assert scaling.update(0.0, contact=True, tau_ext=np.array([-50.0, 0, 0])) == 0.0


def test_react_follows_the_contact_not_the_latched_stop():
    """With the stop latched until reset (hold_time 0), f_S still resumes after the contact."""
    detector = CollisionDetector(DetectorConfig.build(['a', 'b', 'c'], persistence='consecutive',
                                                        persistence_time=3 * DT))
    scaling = TimeScaling(TimeScalingConfig(recovery_rate=10.0, resume_delay=0.05))
    f_s, stop, t = [], [], 0.0
    for tau, samples in (([0, 0, 0], 10), ([0, 6, 0], 20), ([0, 0, 0], 300)):
        for _ in range(samples):
            state = detector.update(t, tau, MOTION)
            f_s.append(scaling.react(t, state, np.array(tau, float), MOTION))
            stop.append(state.stop)
            t += DT
    assert f_s[:10] == [1.0] * 10
    assert f_s[12:30] == [0.0] * 18                 # contact detected on its 3rd sample: hold
    assert f_s[30:79] == [0.0] * 49                 # resume_delay after the contact
    assert f_s[-1] == 1.0 and all(stop[12:])        # resumed; the stop stays latched
    # Waiting for input (no residual yet) holds too.
    waiting = CollisionDetector(detector.config).state(0.0)
    assert TimeScaling().react(0.0, waiting, np.zeros(3), MOTION) == 0.0


@pytest.mark.parametrize('kwargs', [{'alpha': -1.0}, {'recovery_rate': 0.0},
                                    {'push_threshold': np.nan}, {'resume_delay': -0.1},
                                    {'yield_rate': 0.0}, {'push_hysteresis': -1.0},
                                    {'push_filter_time': np.inf}])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ValueError):
        TimeScalingConfig(**kwargs)


def test_the_last_value_sent_lands_exactly_on_hold_and_track():
    """Steps smaller than the publish step: a controller must still get exactly 1 and 0."""
    sent = []
    for value in [*np.arange(0.9, 1.0, 0.0004), 1.0, 1.0, *np.arange(0.0006, 0.0, -0.0004), 0.0]:
        if worth_publishing(value, sent[-1] if sent else None):
            sent.append(value)
    assert 1.0 in sent and sent[-1] == 0.0
    assert sent.count(1.0) == 1                       # an unchanged value is not repeated
    assert all(abs(b - a) > 1e-3 or b in (0.0, 1.0) for a, b in zip(sent, sent[1:]))


@pytest.mark.parametrize('time_scaling, speed_scale, played', [
    (1.0, 0.4, 0.4), (0.2, 0.4, 0.2), (0.0, 1.0, 0.0),      # the smaller wins
    (-0.5, 0.4, -0.2), (-0.5, 0.0, 0.0), (-0.5, 1.0, -0.5)])  # a yield, slowed by s
def test_the_detector_and_the_proximity_monitor_combine(time_scaling, speed_scale, played):
    assert combined_scaling(time_scaling, speed_scale) == pytest.approx(played)
