"""Seed 003's time-scaling reaction: track, hold, yield when pushed back, recover."""
import numpy as np
import pytest

from contact_estimation.core.detector import CollisionDetector, DetectorConfig
from contact_estimation.core.time_scaling import (TimeScaling, TimeScalingConfig,
                                                  worth_publishing)

DT = 0.001
MOTION = np.array([0.0, 0.3, -0.4])  # q̇ of the forward motion, |q̇| = 0.5 rad/s


def run(scaling, t0, seconds, **kwargs):
    values = [scaling.update(t0 + k * DT, **kwargs) for k in range(int(round(seconds / DT)))]
    return values, t0 + len(values) * DT


def test_track_hold_yield_hold_recover():
    scaling = TimeScaling(TimeScalingConfig(alpha=0.1, push_threshold=2.0, recovery_rate=2.0,
                                            resume_delay=0.0))
    free, t = run(scaling, 0.0, 0.1, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    assert free == [1.0] * len(free)

    held, t = run(scaling, t, 0.05, contact=True, tau_ext=np.array([0, 5, 0]),
                  velocity=MOTION * 0)
    assert held == [0.0] * len(held)

    direction = MOTION / np.linalg.norm(MOTION)
    back = -8.0 * direction  # 8 N·m against the motion: 6 N·m beyond the dead band
    pushed, t = run(scaling, t, 0.05, contact=True, tau_ext=back, velocity=-0.3 * MOTION)
    assert pushed[-1] == pytest.approx(-0.6)
    assert scaling.push(back) == pytest.approx(-8.0)

    strong, t = run(scaling, t, 0.01, contact=True, tau_ext=5 * back, velocity=-MOTION)
    assert strong[-1] == -1.0  # clipped

    released, t = run(scaling, t, 0.05, contact=True, tau_ext=0.5 * direction,
                      velocity=0 * MOTION)
    assert released[-1] == 0.0  # the person let go but the contact is still there

    recovering, t = run(scaling, t, 0.6, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    assert recovering[0] == pytest.approx(2.0 * DT)  # from 0, not from the negative value
    assert np.all(np.diff(recovering) >= 0)
    assert recovering[249] == pytest.approx(0.5, abs=2 * DT * 2.0)
    assert recovering[-1] == 1.0


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
    scaling = TimeScaling(TimeScalingConfig(alpha=0.1, push_threshold=2.0, recovery_rate=1.0,
                                            resume_delay=0.0))
    _, t = run(scaling, 0.0, 0.05, contact=False, tau_ext=np.zeros(3), velocity=MOTION)
    _, t = run(scaling, t, 0.05, contact=True, tau_ext=np.array([0, 5, 0]))
    settling = np.array([0.2, 0.0, 0.0])  # a joint pushed off the path springs back
    _, t = run(scaling, t, 0.3, contact=False, tau_ext=np.zeros(3), velocity=settling)
    np.testing.assert_allclose(scaling.direction, MOTION / np.linalg.norm(MOTION))
    back = -8.0 * MOTION / np.linalg.norm(MOTION)
    assert scaling.update(t, contact=True, tau_ext=back) == pytest.approx(-0.6)


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
    detector = CollisionDetector(DetectorConfig.build(['a', 'b', 'c'], persistence_time=3 * DT))
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
                                    {'push_threshold': np.nan}, {'resume_delay': -0.1}])
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
