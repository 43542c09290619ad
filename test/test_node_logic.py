"""Domain rules the nodes call, tested without ROS: the detector's q̈ estimate and event
stamps, the residual node's wrist wrench, the sim node's f_S timeout hold."""
import numpy as np
import pytest

from contact_estimation.core.chain.detector import (COLLISION, INVALID, NONE, STALE, WAITING,
                                              AccelerationEstimate, DetectorState,
                                              event_stamped_by_residual)
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.realtime import ScalingTimeout
from contact_estimation.core.chain.wrist_wrench import WristWrench
from contact_estimation.core.input_rejected import InputRejected

DT = 1e-3


def _parabola(estimate, t0, samples, acceleration, in_use=True):
    out = None
    for k in range(samples):
        t = t0 + k * DT
        out = estimate.update(t, np.full(2, 0.5 * acceleration * t * t), in_use)
    return out


def test_acceleration_comes_after_a_full_window_and_is_exact_on_a_parabola():
    estimate = AccelerationEstimate(duration=9 * DT)
    assert _parabola(estimate, 1.0, 9, 3.0) is None
    np.testing.assert_allclose(_parabola(estimate, 1.009, 1, 3.0), 3.0, rtol=1e-6)


def test_a_stamp_going_back_restarts_the_fit_and_says_why():
    estimate = AccelerationEstimate(duration=9 * DT)
    _parabola(estimate, 1.0, 20, 3.0)
    assert estimate.update(0.5, np.zeros(2)) is None
    assert estimate.restarted
    assert _parabola(estimate, 0.501, 9, 3.0) is not None
    assert estimate.restarted is None


def test_a_pause_of_the_term_forgets_the_old_motion():
    estimate = AccelerationEstimate(duration=9 * DT)
    _parabola(estimate, 1.0, 20, 8.0)
    assert _parabola(estimate, 1.02, 5, 8.0, in_use=False) is None
    assert _parabola(estimate, 1.025, 9, 0.0) is None  # a fresh window, not the old samples


def _state(cause):
    return DetectorState(stop=cause != NONE, cause=cause, reason='', colliding_joints=(),
                         residuals=np.zeros(1), thresholds=np.ones(1))


@pytest.mark.parametrize('cause, by_residual', [
    (COLLISION, True), (INVALID, True), (STALE, False), (WAITING, False), (NONE, False)])
def test_events_from_a_residual_carry_its_stamp(cause, by_residual):
    assert event_stamped_by_residual(_state(cause)) == by_residual


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


def test_wrist_wrench_is_removed_while_current_in_the_projects_sign(panda):
    q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
    force, torque = np.array([0.0, 0.0, 25.0]), np.array([0.0, 0.3, 0.0])
    expected = panda.link_wrench_torque(q, 'panda_link8', force, torque)
    on_robot = WristWrench(panda, 'panda_link8', timeout=0.05, on_robot=True)
    on_robot.receive(10.0, 'panda_link8', force, torque)
    np.testing.assert_allclose(on_robot.joint_torque(10.04, q), expected)
    assert on_robot.joint_torque(10.06, q) is None  # too old: nothing removed
    tool_on_environment = WristWrench(panda, 'panda_link8', timeout=0.05, on_robot=False)
    tool_on_environment.receive(10.0, '', force, torque)  # no frame_id: taken as the link's
    np.testing.assert_allclose(tool_on_environment.joint_torque(10.0, q), -expected)


@pytest.mark.parametrize('frame, force, kind', [
    ('panda_hand', [0.0, 0.0, 1.0], 'unknown_frame'),
    ('panda_link8', [np.nan, 0.0, 1.0], 'not_finite')])
def test_a_wrench_that_breaks_a_rule_is_refused_and_the_last_good_one_kept(panda, frame,
                                                                          force, kind):
    wrist = WristWrench(panda, 'panda_link8', timeout=0.05, on_robot=True)
    with pytest.raises(InputRejected) as err:
        wrist.receive(10.0, frame, force, np.zeros(3))
    assert err.value.kind == kind
    assert wrist.joint_torque(10.0, np.zeros(panda.n)) is None


def test_a_wrist_link_outside_the_chain_is_refused(panda):
    with pytest.raises(ValueError, match='no_such_link'):
        WristWrench(panda, 'no_such_link', timeout=0.05, on_robot=True)


def test_f_s_timeout_holds_only_once_the_stream_started_and_until_it_resumes():
    watch = ScalingTimeout(timeout=0.15)
    assert watch.check(100.0) is None and not watch.holding  # never started: play at 1
    watch.received(100.0)
    assert watch.check(100.14) is None
    assert watch.check(100.2) == pytest.approx(0.2)
    assert watch.holding
    assert watch.check(101.0) is None  # reported once
    watch.received(101.0)
    assert not watch.holding
