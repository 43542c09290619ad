"""The ROS-free collision detector: seed 001 eq. 7, roles, dynamic thresholds, latch, fail-safe."""
import numpy as np
import pytest

from contact_estimation.core.detector import (COLLISION, FORCE, INVALID, POSITION, STALE,
                                              WAITING, CollisionDetector, DetectorConfig)

NAMES = ('j1', 'j2', 'j3')
DT = 0.001


def make(n=5, **kwargs) -> CollisionDetector:
    return CollisionDetector(DetectorConfig.build(NAMES, consecutive_samples=n, **kwargs))


def feed(detector, t0, samples, **kwargs):
    """Feed rows of τ_ext at DT spacing from t0; return the list of states and the next time."""
    states = []
    for k, tau in enumerate(samples):
        states.append(detector.update(t0 + k * DT, tau, **kwargs))
    return states, t0 + len(samples) * DT


def test_n_minus_one_samples_over_threshold_is_no_collision():
    detector = make(n=5)
    over, under = [0.0, 4.5, 0.0], [0.0, 3.9, 0.0]
    states, t = feed(detector, 0.0, [over] * 4 + [under] + [over] * 4 + [under])
    assert not any(s.stop for s in states)
    states, _ = feed(detector, t, [over] * 5)
    assert [s.stop for s in states] == [False] * 4 + [True]
    assert states[-1].cause == COLLISION and states[-1].colliding_joints == (1,)
    assert 'j2' in states[-1].reason


def test_count_runs_over_joints_as_in_eq7_exists_clause():
    """m counts samples where some joint is over, even if the joint over changes."""
    detector = make(n=4)
    states, _ = feed(detector, 0.0, [[5, 0, 0], [5, 0, 0], [0, -5, 0], [0, 0, 5]])
    assert states[-1].stop and states[-1].colliding_joints == (2,)


def test_roles_pick_the_threshold_and_switch_at_run_time():
    detector = make(n=1, thresholds_position=4.0, thresholds_force=8.0,
                    roles=[POSITION, FORCE, POSITION])
    tau = [0.0, 6.0, 0.0]
    assert not detector.update(0.0, tau).stop
    np.testing.assert_allclose(detector.update(0.001, tau).thresholds, [4.0, 8.0, 4.0])
    detector.set_roles(POSITION)
    state = detector.update(0.002, tau)
    assert state.stop and state.colliding_joints == (1,)
    with pytest.raises(ValueError, match='joint_roles'):
        detector.set_roles(['position', 'torque', 'force'])


def test_threshold_grows_with_speed_and_acceleration():
    detector = make(n=1, thresholds_position=4.0, speed_gain=[0.0, 2.0, 0.0],
                    acceleration_gain=[0.0, 0.5, 0.0])
    tau = [0.0, 6.0, 0.0]
    state = detector.update(0.0, tau, velocity=[0, -0.5, 0], acceleration=[0, 3.0, 0])
    np.testing.assert_allclose(state.thresholds, [4.0, 4.0 + 1.0 + 1.5, 4.0])
    assert not state.stop
    assert detector.update(0.001, tau, velocity=[0, 0.5, 0], acceleration=[0, 0, 0]).stop


def test_latch_until_reset_which_is_refused_while_over_threshold():
    detector = make(n=2)
    _, t = feed(detector, 0.0, [[9, 0, 0]] * 2)
    assert 'j1' in detector.reset(t)
    states, t = feed(detector, t, [[0, 0, 0]] * 500)
    assert all(s.stop for s in states) and states[-1].colliding_joints == ()
    assert detector.reset(t) == ''
    assert not detector.state(t).stop


def test_hold_time_releases_after_the_last_sample_over_threshold():
    detector = make(n=2, hold_time=0.1)
    _, t = feed(detector, 0.0, [[9, 0, 0]] * 50)
    quiet, t = feed(detector, t, [[0, 0, 0]] * 99)
    assert all(s.stop for s in quiet)
    states, _ = feed(detector, t, [[0, 0, 0]] * 2)
    assert not states[-1].stop


def test_stale_input_and_watchdog_latch_stop():
    detector = make(n=3, input_timeout=0.05)
    first = detector.state(0.0)
    assert first.stop and first.cause == WAITING
    assert not detector.update(0.0, [0, 0, 0]).stop  # waiting is not latched
    assert not detector.state(0.04).stop
    late = detector.state(0.06)
    assert late.stop and late.cause == STALE and 'no residual' in late.reason
    assert detector.reset(0.06).startswith('cannot reset')
    assert detector.update(0.07, [0, 0, 0]).stop  # still latched after input resumes
    assert detector.reset(0.07) == ''
    detector.set_input_stale(True)
    state = detector.state(0.071)
    assert state.stop and 'watchdog' in state.reason
    assert 'watchdog' in detector.reset(0.071)


def test_non_finite_residual_stops_at_once():
    detector = make(n=10, hold_time=0.01)
    detector.update(0.0, [0, 0, 0])
    state = detector.update(0.001, [0, np.nan, 0])
    assert state.stop and state.cause == INVALID and 'j2' in state.reason
    assert 'not finite' in detector.reset(0.001)
    assert detector.update(0.005, [0, 0, 0]).stop  # hold_time counts from the last bad sample
    assert not detector.update(0.012, [0, 0, 0]).stop


@pytest.mark.parametrize('kwargs, message', [
    ({'thresholds_position': -1.0}, 'thresholds_position'),
    ({'thresholds_force': [8.0, 0.0, 8.0]}, r'thresholds_force\[1\]'),
    ({'consecutive_samples': 0}, 'consecutive_samples'),
    ({'speed_gain': [1.0, 2.0]}, 'expected 1 or 3'),
    ({'acceleration_gain': np.nan}, 'acceleration_gain'),
    ({'hold_time': -0.5}, 'hold_time'),
    ({'input_timeout': 0.0}, 'input_timeout'),
    ({'roles': 'admittance'}, 'joint_roles'),
])
def test_bad_parameters_are_refused_with_the_parameter_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DetectorConfig.build(NAMES, **kwargs)

