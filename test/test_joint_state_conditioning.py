"""JointStateConditioner, DerivativeEstimator, Transmission and Watchdog, without ROS."""
import numpy as np
import pytest

from contact_estimation.core import joint_state_conditioning as jsc
from contact_estimation.core.joint_state_conditioning import (
    DerivativeEstimator, JointStateConditioner, Transmission, Watchdog)
from contact_estimation.core.robot_model import RobotModel

DT = 1e-3
T0 = 1000.0


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


@pytest.fixture
def conditioner(panda):
    return JointStateConditioner.for_robot(panda)


def home(panda):
    """A configuration well inside the limits."""
    lower, upper = panda.position_limits
    return (lower + upper) / 2


def full_message(panda, q, v=None, effort=None, fingers=True):
    """Arm joints in reverse order, finger joints in front: as a driver might list them."""
    names = list(reversed(panda.joint_names))
    position = list(reversed(q))
    velocity = [] if v is None else list(reversed(v))
    torque = [] if effort is None else list(reversed(effort))
    if fingers:
        names = ['panda_finger_joint1', 'panda_finger_joint2'] + names
        position = [0.04, 0.04] + position
        velocity = velocity and [0.0, 0.0] + velocity
        torque = torque and [0.0, 0.0] + torque
    return names, position, velocity, torque


def kinds(result):
    return [kind for kind, _ in result.problems]


# ------------------------------------------------------------------- good input
def test_good_message_comes_out_in_model_order_without_the_fingers(panda, conditioner):
    q = home(panda) + 0.01 * np.arange(panda.n)
    v = 0.1 * np.arange(panda.n)
    effort = np.linspace(-5, 5, panda.n)
    result = conditioner.condition(T0, *full_message(panda, q, v, effort), stamp='stamp-object')
    assert result.problems == []
    sample = result.sample
    np.testing.assert_allclose(sample.q, q)
    np.testing.assert_allclose(sample.v, v)
    np.testing.assert_allclose(sample.effort, effort)
    assert sample.t == T0 and sample.stamp == 'stamp-object'
    assert not sample.v_estimated.any()
    assert sample.a is None  # one sample: no acceleration yet


def test_message_with_only_gripper_joints_is_ignored_quietly(conditioner):
    result = conditioner.condition(T0, ['panda_finger_joint1'], [0.02])
    assert result.sample is None and result.problems == []


def test_empty_velocity_and_effort_mean_not_provided(panda, conditioner):
    names, position, _, _ = full_message(panda, home(panda))
    result = conditioner.condition(T0, names, position, [], [])
    assert result.problems == []


# ---------------------------------------------------------- one test per problem
def test_nan_position_is_dropped(panda, conditioner):
    q = home(panda)
    q[3] = np.nan
    result = conditioner.condition(T0, *full_message(panda, q))
    assert kinds(result) == [jsc.NON_FINITE] and result.sample is None


def test_infinite_effort_is_dropped(panda, conditioner):
    effort = np.zeros(panda.n)
    effort[0] = np.inf
    result = conditioner.condition(T0, *full_message(panda, home(panda), effort=effort))
    assert kinds(result) == [jsc.NON_FINITE] and result.sample is None


def test_nan_in_a_gripper_joint_does_not_matter(panda, conditioner):
    names, position, velocity, effort = full_message(panda, home(panda))
    position[0] = np.nan
    assert conditioner.condition(T0, names, position, velocity, effort).problems == []


@pytest.mark.parametrize('field', ['position', 'velocity', 'effort'])
def test_array_shorter_than_names_is_dropped(panda, conditioner, field):
    names, position, _, _ = full_message(panda, home(panda))
    arrays = {'position': position, 'velocity': [0.0] * len(names), 'effort': [0.0] * len(names)}
    arrays[field] = arrays[field][:-1]
    result = conditioner.condition(T0, names, **arrays)
    assert kinds(result) == [jsc.LENGTH_MISMATCH] and result.sample is None


def test_unknown_joint_name_is_dropped(panda, conditioner):
    names, position, _, _ = full_message(panda, home(panda))
    names[-1] = 'left_' + names[-1]
    result = conditioner.condition(T0, names, position)
    assert kinds(result) == [jsc.UNKNOWN_JOINT] and result.sample is None
    assert 'left_panda_joint1' in result.problems[0][1]


def test_missing_joint_is_reported_when_the_next_message_comes(panda, conditioner):
    names, position, _, _ = full_message(panda, home(panda), fingers=False)
    partial = names[1:], position[1:]  # panda_joint7 missing
    first = conditioner.condition(T0, *partial)
    second = conditioner.condition(T0 + DT, *partial)
    assert first.sample is None and first.problems == []
    assert kinds(second) == [jsc.MISSING_JOINTS] and second.sample is None
    assert 'panda_joint7' in second.problems[0][1]


def test_duplicate_joint_name_is_dropped(panda, conditioner):
    names, position, _, _ = full_message(panda, home(panda))
    names.append(names[-1])
    position.append(position[-1])
    result = conditioner.condition(T0, names, position)
    assert kinds(result) == [jsc.DUPLICATE_JOINT] and result.sample is None


def test_repeated_stamp_is_dropped(panda, conditioner):
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    assert conditioner.condition(T0, *message).sample is not None
    result = conditioner.condition(T0, *message)
    assert kinds(result) == [jsc.REPEATED_STAMP] and result.sample is None


def test_out_of_order_stamp_is_dropped(panda, conditioner):
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    assert conditioner.condition(T0, *message).sample is not None
    result = conditioner.condition(T0 - DT, *message)
    assert kinds(result) == [jsc.OUT_OF_ORDER_STAMP] and result.sample is None


def test_zero_stamp_is_dropped(panda, conditioner):
    result = conditioner.condition(0.0, *full_message(panda, home(panda)))
    assert kinds(result) == [jsc.ZERO_STAMP] and result.sample is None


def test_gap_is_a_warning_and_restarts_the_velocity_estimate(panda):
    conditioner = JointStateConditioner.for_robot(panda, window=5, gap_threshold=0.02)
    q = home(panda)
    for k in range(5):
        result = conditioner.condition(T0 + k * DT, *full_message(panda, q + 0.001 * k))
    assert result.sample is not None and result.sample.v_estimated.all()
    after_gap = conditioner.condition(T0 + 0.1, *full_message(panda, q))
    assert kinds(after_gap) == [jsc.GAP]
    assert after_gap.sample is None  # velocity must be estimated: the window refills first
    assert not conditioner.estimator.ready


def test_gap_with_measured_velocity_still_emits(panda, conditioner):
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    conditioner.condition(T0, *message)
    result = conditioner.condition(T0 + 0.5, *message)
    assert kinds(result) == [jsc.GAP] and result.sample is not None


def test_out_of_limits_is_a_warning_and_emits(panda):
    conditioner = JointStateConditioner.for_robot(panda, limit_margin=0.05)
    lower, upper = panda.position_limits
    q = home(panda)
    q[1] = upper[1] + 0.1
    result = conditioner.condition(T0, *full_message(panda, q, v=np.zeros(panda.n)))
    assert kinds(result) == [jsc.OUT_OF_LIMITS] and result.sample is not None
    assert 'panda_joint2' in result.problems[0][1]


def test_within_the_limit_margin_is_fine(panda):
    conditioner = JointStateConditioner.for_robot(panda, limit_margin=0.05)
    q = home(panda)
    q[1] = panda.position_limits[1][1] + 0.04
    assert conditioner.condition(T0, *full_message(panda, q)).problems == []


def test_every_problem_kind_is_a_distinct_string():
    names = [n for n in dir(jsc) if n.isupper() and isinstance(getattr(jsc, n), str)]
    values = [getattr(jsc, n) for n in names]
    assert len(set(values)) == len(values) >= 11
    assert jsc.WARNINGS <= set(values)


# ---------------------------------------------------------------------- merging
def split(panda, q, t_first, t_second, conditioner, v=None):
    """Publish joints 1–4 at t_first and 5–7 with the fingers at t_second."""
    names, position = panda.joint_names, list(q)
    velocity = [] if v is None else list(v)
    first = conditioner.condition(t_first, names[:4], position[:4], velocity[:4], stamp='first')
    second = conditioner.condition(
        t_second, names[4:] + ['panda_finger_joint1'], position[4:] + [0.0],
        velocity and velocity[4:] + [0.0], stamp='second')
    return first, second


def test_two_arm_halves_merge_into_one_sample_with_the_newest_stamp(panda, conditioner):
    q = home(panda) + 0.02
    v = np.full(panda.n, 0.3)
    first, second = split(panda, q, T0 + 0.0004, T0, conditioner, v)
    assert first.sample is None and first.problems == []
    assert second.problems == []
    sample = second.sample
    np.testing.assert_allclose(sample.q, q)
    np.testing.assert_allclose(sample.v, v)
    assert sample.t == T0 + 0.0004 and sample.stamp == 'first'
    assert sample.effort is None  # no effort in either part


def test_merging_continues_cycle_after_cycle(panda, conditioner):
    q = home(panda)
    stamps = [split(panda, q, T0 + k * DT, T0 + k * DT, conditioner, np.zeros(panda.n))[1].sample.t
              for k in range(5)]
    np.testing.assert_allclose(stamps, T0 + DT * np.arange(5))


def test_parts_further_apart_than_the_merge_window_are_not_merged(panda):
    conditioner = JointStateConditioner.for_robot(panda, merge_window=0.001)
    first, second = split(panda, home(panda), T0, T0 + 0.005, conditioner, np.zeros(panda.n))
    assert kinds(second) == [jsc.UNALIGNED_PARTS] and second.sample is None


def test_lost_part_abandons_the_cycle_and_the_next_one_merges(panda, conditioner):
    q = home(panda)
    v = np.zeros(panda.n)
    names = panda.joint_names
    conditioner.condition(T0, names[:4], q[:4], v[:4])  # its second half is lost
    first, second = split(panda, q, T0 + DT, T0 + DT, conditioner, v)
    assert kinds(first) == [jsc.MISSING_JOINTS]
    assert second.problems == [] and second.sample.t == T0 + DT


# ------------------------------------------------------------ motor-side values
def test_motor_current_becomes_joint_torque(panda):
    k_m = np.linspace(0.05, 0.11, panda.n)   # N·m/A
    gear = np.linspace(50, 160, panda.n)
    current = np.linspace(-2, 2, panda.n)    # A
    transmission = Transmission.create(panda.n, k_m, gear, effort_is_current=True)
    conditioner = JointStateConditioner.for_robot(panda, transmission=transmission)
    result = conditioner.condition(T0, *full_message(panda, home(panda), np.zeros(panda.n), current))
    np.testing.assert_allclose(result.sample.effort, gear * k_m * current)  # eqs. 1–2
    np.testing.assert_allclose(result.sample.q, home(panda))


def test_motor_side_positions_and_velocities_are_divided_by_the_gear_ratio(panda):
    gear = 100.0
    transmission = Transmission.create(panda.n, gear_ratios=[gear], positions_are_motor_side=True)
    conditioner = JointStateConditioner.for_robot(panda, transmission=transmission)
    q, v = home(panda), np.full(panda.n, 0.2)
    result = conditioner.condition(T0, *full_message(panda, gear * q, gear * v))
    np.testing.assert_allclose(result.sample.q, q)  # eq. 3
    np.testing.assert_allclose(result.sample.v, v)


@pytest.mark.parametrize('constants, ratios', [([1.0, 2.0], [1.0]), ([1.0], [0.0]),
                                               ([np.nan], [1.0])])
def test_transmission_refuses_bad_constants(constants, ratios):
    with pytest.raises(ValueError):
        Transmission.create(7, constants, ratios)


# ---------------------------------------------------------------- derivatives
def test_missing_velocity_is_estimated_once_the_window_is_full(panda):
    window = 10
    conditioner = JointStateConditioner.for_robot(panda, window=window)
    q0, rate = home(panda), np.linspace(-0.5, 0.5, panda.n)
    samples = [conditioner.condition(T0 + k * DT, *full_message(panda, q0 + rate * k * DT)).sample
               for k in range(window)]
    assert all(s is None for s in samples[:-1])
    assert samples[-1].v_estimated.all()
    np.testing.assert_allclose(samples[-1].v, rate, atol=1e-6)
    np.testing.assert_allclose(samples[-1].a, 0.0, atol=1e-3)


def test_estimator_is_exact_for_a_parabola_with_uneven_timestamps():
    rng = np.random.default_rng(1)
    times = T0 + np.cumsum(rng.uniform(0.5e-3, 3e-3, 30))
    coef = np.array([[0.3, -1.2], [2.0, 0.5], [-4.0, 7.0]])  # q = c0 + c1 s + c2 s², two joints
    estimator = DerivativeEstimator(window=8)
    for t in times:
        s = t - T0
        v, a = estimator.update(t, coef[0] + coef[1] * s + coef[2] * s**2)
    s = times[-1] - T0
    np.testing.assert_allclose(v, coef[1] + 2 * coef[2] * s, rtol=1e-6)
    np.testing.assert_allclose(a, 2 * coef[2], rtol=1e-5)


def best_lag(estimate, truth, max_lag):
    """The delay (in samples) that best aligns estimate with truth."""
    errors = [np.mean((estimate[lag:] - truth[:truth.size - lag]) ** 2) for lag in range(max_lag)]
    return int(np.argmin(errors))


@pytest.mark.parametrize('drop_fraction', [0.0, 0.2])
def test_estimator_on_a_noisy_sinusoid_has_small_error_and_bounded_delay(drop_fraction):
    """1 Hz, 0.5 rad sinusoid at 1 kHz with 1e-5 rad encoder noise, some messages lost."""
    rng = np.random.default_rng(2)
    window, amplitude, omega = 20, 0.5, 2 * np.pi
    times = T0 + np.arange(0, 3.0, DT)
    times = times[rng.uniform(size=times.size) >= drop_fraction]
    phase = omega * (times - T0)
    q = amplitude * np.sin(phase) + rng.normal(0, 1e-5, times.size)
    estimator = DerivativeEstimator(window)
    estimates = np.array([np.concatenate(estimator.update(t, [qk])) for t, qk in zip(times, q)])
    settled = slice(2 * window, None)
    v_true = amplitude * omega * np.cos(phase)
    v_error = estimates[settled, 0] - v_true[settled]
    assert np.sqrt(np.mean(v_error**2)) < 0.01 * amplitude * omega
    assert best_lag(estimates[settled, 0], v_true[settled], 10) <= 1
    # The acceleration is the window average: compare with the truth half a window earlier.
    half_window = (window - 1) / 2 * DT
    a_true = -amplitude * omega**2 * np.sin(omega * (times - T0 - half_window))
    a_error = estimates[settled, 1] - a_true[settled]
    assert np.sqrt(np.mean(a_error**2)) < 0.05 * amplitude * omega**2
    if drop_fraction == 0.0:
        lag = best_lag(estimates[settled, 1], -amplitude * omega**2 * np.sin(phase[settled]), 40)
        assert abs(lag - (window - 1) / 2) <= 2


def test_estimator_reset_and_time_order():
    estimator = DerivativeEstimator(window=3)
    for k in range(3):
        estimator.update(k * DT, [float(k)])
    assert estimator.ready
    with pytest.raises(ValueError):
        estimator.update(DT, [0.0])
    estimator.reset()
    assert not estimator.ready
    v, a = estimator.update(10.0, [5.0])
    assert v.tolist() == [0.0] and a.tolist() == [0.0]


def test_estimator_needs_a_window_of_three():
    with pytest.raises(ValueError):
        DerivativeEstimator(window=2)


# --------------------------------------------------------------------- watchdog
def test_watchdog_is_stale_before_the_first_feed_and_after_the_timeout():
    watchdog = Watchdog(timeout=0.05)
    assert watchdog.stale(100.0)
    watchdog.feed(100.0)
    assert not watchdog.stale(100.04)
    assert watchdog.stale(100.06)
    watchdog.feed(100.06)
    assert not watchdog.stale(100.07)
