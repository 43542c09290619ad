"""JointStateConditioner, DerivativeEstimator, Transmission and Watchdog, without ROS."""
import numpy as np
import pytest

from contact_estimation.core.chain import joint_state_conditioning as jsc
from contact_estimation.core.chain.derivatives import DerivativeEstimator
from contact_estimation.core.chain.joint_state_conditioning import (
    ConditioningConfig, JointStateConditioner, Transmission)
from contact_estimation.core.chain.watchdog_clock import Watchdog
from contact_estimation.core.robot.robot_model import RobotModel

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


def receive(conditioner, t, *message, now=None, **kwargs):
    """Condition one message received at `now` (default: at its stamp, as from a live driver)."""
    return conditioner.condition(t, *message, now=t if now is None else now, **kwargs)


def kinds(result):
    return [kind for kind, _ in result.problems]


# ------------------------------------------------------------------- good input
def test_good_message_comes_out_in_model_order_without_the_fingers(panda, conditioner):
    q = home(panda) + 0.01 * np.arange(panda.n)
    v = 0.1 * np.arange(panda.n)
    effort = np.linspace(-5, 5, panda.n)
    result = receive(conditioner, T0, *full_message(panda, q, v, effort), stamp='stamp-object')
    assert result.problems == []
    sample = result.sample
    np.testing.assert_allclose(sample.q, q)
    np.testing.assert_allclose(sample.v, v)
    np.testing.assert_allclose(sample.tau, effort)
    assert sample.t == T0 and sample.stamp == 'stamp-object'


def test_message_with_only_gripper_joints_is_ignored_quietly(conditioner):
    result = receive(conditioner, T0, ['panda_finger_joint1'], [0.02])
    assert result.sample is None and result.problems == []


def test_empty_velocity_and_effort_mean_not_provided(panda, conditioner):
    names, position, _, _ = full_message(panda, home(panda))
    result = receive(conditioner, T0, names, position, [], [])
    assert result.problems == []


# ---------------------------------------------------------- one test per problem
def test_nan_position_is_dropped(panda, conditioner):
    q = home(panda)
    q[3] = np.nan
    result = receive(conditioner, T0, *full_message(panda, q))
    assert kinds(result) == [jsc.NON_FINITE] and result.sample is None


def test_infinite_effort_is_dropped(panda, conditioner):
    effort = np.zeros(panda.n)
    effort[0] = np.inf
    result = receive(conditioner, T0, *full_message(panda, home(panda), effort=effort))
    assert kinds(result) == [jsc.NON_FINITE] and result.sample is None


def test_nan_in_a_gripper_joint_does_not_matter(panda, conditioner):
    names, position, velocity, effort = full_message(panda, home(panda))
    position[0] = np.nan
    assert receive(conditioner, T0, names, position, velocity, effort).problems == []


@pytest.mark.parametrize('field', ['position', 'velocity', 'effort'])
def test_array_shorter_than_names_is_dropped(panda, conditioner, field):
    names, position, _, _ = full_message(panda, home(panda))
    arrays = {'position': position, 'velocity': [0.0] * len(names), 'effort': [0.0] * len(names)}
    arrays[field] = arrays[field][:-1]
    result = receive(conditioner, T0, names, **arrays)
    assert kinds(result) == [jsc.LENGTH_MISMATCH] and result.sample is None


def test_unknown_joint_name_is_dropped(panda, conditioner):
    names, position, _, _ = full_message(panda, home(panda))
    names[-1] = 'left_' + names[-1]
    result = receive(conditioner, T0, names, position)
    assert kinds(result) == [jsc.UNKNOWN_JOINT] and result.sample is None
    assert 'left_panda_joint1' in result.problems[0][1]


def test_missing_joint_is_reported_when_the_next_message_comes(panda, conditioner):
    names, position, _, _ = full_message(panda, home(panda), fingers=False)
    partial = names[1:], position[1:]  # panda_joint7 missing
    first = receive(conditioner, T0, *partial)
    second = receive(conditioner, T0 + DT, *partial)
    assert first.sample is None and first.problems == []
    assert kinds(second) == [jsc.MISSING_JOINTS] and second.sample is None
    assert 'panda_joint7' in second.problems[0][1]


def test_duplicate_joint_name_is_dropped(panda, conditioner):
    names, position, _, _ = full_message(panda, home(panda))
    names.append(names[-1])
    position.append(position[-1])
    result = receive(conditioner, T0, names, position)
    assert kinds(result) == [jsc.DUPLICATE_JOINT] and result.sample is None


def test_repeated_stamp_is_dropped(panda, conditioner):
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    assert receive(conditioner, T0, *message).sample is not None
    result = receive(conditioner, T0, *message)
    assert kinds(result) == [jsc.REPEATED_STAMP] and result.sample is None


def test_out_of_order_stamp_is_dropped(panda, conditioner):
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    assert receive(conditioner, T0, *message).sample is not None
    result = receive(conditioner, T0 - DT, *message)
    assert kinds(result) == [jsc.OUT_OF_ORDER_STAMP] and result.sample is None


def test_zero_stamp_is_dropped(panda, conditioner):
    result = receive(conditioner, 0.0, *full_message(panda, home(panda)))
    assert kinds(result) == [jsc.ZERO_STAMP] and result.sample is None


def test_message_without_joint_names_is_counted(conditioner):
    result = receive(conditioner, T0, [], [])
    assert kinds(result) == [jsc.NO_NAMES] and result.sample is None


# --------------------------------------------------------------- stamp time base
def test_far_future_stamp_is_dropped_and_later_good_messages_pass(panda, conditioner):
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    assert receive(conditioner, T0, *message).problems == []
    future = receive(conditioner, T0 + 1e9, *message, now=T0 + DT)
    assert kinds(future) == [jsc.FUTURE_STAMP] and future.sample is None
    after = receive(conditioner, T0 + 2 * DT, *message)
    assert after.problems == [] and after.sample.t == T0 + 2 * DT


def test_stamp_ahead_within_max_future_is_taken(panda):
    conditioner = JointStateConditioner.for_robot(panda, max_future=1.0)
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    assert receive(conditioner, T0 + 0.9, *message, now=T0).sample is not None
    assert kinds(receive(conditioner, T0 + 1.2, *message, now=T0)) == [jsc.FUTURE_STAMP]


def restart_stream(panda, conditioner, stamps, clock):
    """Good messages at 1 kHz until T0, then a restarted driver's messages stamped `stamps`
    and received at `clock` (the node's clock); the results of the restarted messages."""
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    for k in range(10):
        receive(conditioner, T0 - (10 - k) * DT, *message)
    return [receive(conditioner, t, *message, now=now) for t, now in zip(stamps, clock)]


def test_driver_restart_is_taken_as_a_new_time_base_after_time_reset_after(panda):
    conditioner = JointStateConditioner.for_robot(panda, time_reset_after=0.05)
    ticks = DT * np.arange(60)
    results = restart_stream(panda, conditioner, T0 - 0.5 + ticks, T0 + ticks)
    reset = next(k for k, r in enumerate(results) if kinds(r) == [jsc.TIME_RESET])
    assert reset in (50, 51)  # 50 ms after the first stamp that went back (float rounding)
    assert [kinds(r) for r in results[:reset]] == [[jsc.OUT_OF_ORDER_STAMP]] * reset
    assert results[reset].sample.t == T0 - 0.5 + reset * DT
    assert all(r.problems == [] and r.sample is not None for r in results[reset + 1:])


def test_time_reset_waits_again_when_the_node_clock_went_back_too(panda):
    """A simulator restart: the stamps start over, then the node's (simulated) clock too."""
    conditioner = JointStateConditioner.for_robot(panda, time_reset_after=0.05)
    ticks = DT * np.arange(80)
    clock = np.where(ticks < 0.01, T0 + ticks, 1.0 + ticks)  # the clock follows 10 ms later
    results = restart_stream(panda, conditioner, 1.0 + ticks, clock)
    reset = next(k for k, r in enumerate(results) if kinds(r) == [jsc.TIME_RESET])
    assert reset in (60, 61)  # 50 ms after the clock went back
    # Until the clock went back, the stamps were far in its past: refused outright.
    assert [kinds(r) for r in results[:reset]] == [[jsc.PAST_STAMP]] * 10 + [
        [jsc.OUT_OF_ORDER_STAMP]] * (reset - 10)


def test_a_driver_whose_stamps_are_long_past_is_refused_whatever_their_order(panda):
    """Stamps from 1970 + 1000 s, advancing, on a clock of 2027 (issue 27): never a new
    time base."""
    conditioner = JointStateConditioner.for_robot(panda, time_reset_after=0.05)
    ticks = DT * np.arange(200)
    results = restart_stream(panda, conditioner, T0 + ticks, 1.8e9 + ticks)
    assert all(kinds(r) == [jsc.PAST_STAMP] and r.sample is None for r in results)


def test_single_late_messages_never_reset_the_time_base(panda):
    conditioner = JointStateConditioner.for_robot(panda, time_reset_after=0.05)
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    for k in range(200):
        t = T0 + k * DT
        result = receive(conditioner, t, *message)
        assert result.problems == []
        if k % 40 == 39:  # a message delayed in the network, every 40 ms
            late = receive(conditioner, t - 5 * DT, *message, now=t)
            assert kinds(late) == [jsc.OUT_OF_ORDER_STAMP]


# --------------------------------------------------------------- implausible values
def implausible(panda, field):
    """A message whose `field` is far beyond what the Panda's URDF allows for joint 2."""
    q, v, effort = home(panda), np.zeros(panda.n), np.zeros(panda.n)
    if field == 'huge':
        q[1], effort[1] = 1e300, 1e300
    elif field == 'position':
        q[1] = panda.position_limits[1][1] + 0.6
    elif field == 'velocity':
        v[1] = -2.1 * panda.velocity_limits[1]
    else:
        effort[1] = 3.1 * panda.effort_limits[1]
    return full_message(panda, q, v, effort)


@pytest.mark.parametrize('field', ['huge', 'position', 'velocity', 'effort'])
def test_implausible_values_are_dropped(panda, field):
    conditioner = JointStateConditioner.for_robot(
        panda, hard_limit_margin=0.5, velocity_limit_factor=2.0, effort_limit_factor=3.0)
    result = receive(conditioner, T0, *implausible(panda, field))
    assert set(kinds(result)) == {jsc.IMPLAUSIBLE} and result.sample is None
    assert 'panda_joint2' in result.problems[0][1]


def test_values_just_inside_the_hard_bounds_go_out(panda):
    q, v, effort = home(panda), np.zeros(panda.n), np.zeros(panda.n)
    q[1] = panda.position_limits[1][1] + 0.4
    v[1] = 1.9 * panda.velocity_limits[1]
    effort[1] = -2.9 * panda.effort_limits[1]
    result = receive(JointStateConditioner.for_robot(panda), T0,
                     *full_message(panda, q, v, effort))
    assert kinds(result) == [jsc.OUT_OF_LIMITS] and result.sample is not None


def test_effort_bound_applies_to_the_joint_torque_after_conversion(panda):
    conditioner = JointStateConditioner.for_robot(panda, torque_constants=[0.1],
                                                  gear_ratios=[100.0], effort_is_current=True)
    current = np.zeros(panda.n)
    current[0] = 30.0  # A: 300 N·m at the joint, beyond 3 × 87 N·m
    result = receive(conditioner, T0, *full_message(panda, home(panda), np.zeros(panda.n), current))
    assert kinds(result) == [jsc.IMPLAUSIBLE]


def test_joints_without_urdf_velocity_or_effort_limits_have_no_bound():
    conditioner = JointStateConditioner(['a', 'b'], velocity_limits=[0.0, 1.0],
                                        effort_limits=[0.0, 1.0])
    assert receive(conditioner, T0, ['a', 'b'], [0.0, 0.0], [1e6, 0.0], [1e6, 0.0]).problems == []
    assert kinds(receive(conditioner, T0 + DT, ['a', 'b'], [0.0, 0.0], [0.0, 5.0])) == [
        jsc.IMPLAUSIBLE]


def test_hard_margin_below_the_soft_margin_is_refused(panda):
    with pytest.raises(ValueError, match='hard_limit_margin'):
        JointStateConditioner.for_robot(panda, limit_margin=0.1, hard_limit_margin=0.05)


def test_gap_is_a_warning_and_restarts_the_velocity_estimate(panda):
    conditioner = JointStateConditioner.for_robot(panda, velocity_window=4 * DT, gap_threshold=0.02)
    q = home(panda)
    for k in range(5):
        result = receive(conditioner, T0 + k * DT, *full_message(panda, q + 0.001 * k))
    np.testing.assert_allclose(result.sample.v, 1.0, rtol=1e-6)  # 0.001 rad per ms
    after_gap = receive(conditioner, T0 + 0.1, *full_message(panda, q))
    assert kinds(after_gap) == [jsc.GAP]
    assert after_gap.sample is None  # velocity must be estimated: the window refills first
    assert not conditioner.estimator.ready


def test_gap_with_measured_velocity_still_emits(panda, conditioner):
    message = full_message(panda, home(panda), v=np.zeros(panda.n))
    receive(conditioner, T0, *message)
    result = receive(conditioner, T0 + 0.5, *message)
    assert kinds(result) == [jsc.GAP] and result.sample is not None


def test_out_of_limits_is_a_warning_and_emits(panda):
    conditioner = JointStateConditioner.for_robot(panda, limit_margin=0.05)
    lower, upper = panda.position_limits
    q = home(panda)
    q[1] = upper[1] + 0.1
    result = receive(conditioner, T0, *full_message(panda, q, v=np.zeros(panda.n)))
    assert kinds(result) == [jsc.OUT_OF_LIMITS] and result.sample is not None
    assert 'panda_joint2' in result.problems[0][1]


def test_within_the_limit_margin_is_fine(panda):
    conditioner = JointStateConditioner.for_robot(panda, limit_margin=0.05)
    q = home(panda)
    q[1] = panda.position_limits[1][1] + 0.04
    assert receive(conditioner, T0, *full_message(panda, q)).problems == []


def test_every_problem_kind_is_a_distinct_string():
    names = [n for n in dir(jsc) if n.isupper() and isinstance(getattr(jsc, n), str)]
    values = [getattr(jsc, n) for n in names]
    assert len(set(values)) == len(values) >= 15
    assert jsc.WARNINGS <= set(values)


# ---------------------------------------------------------------------- merging
def split(panda, q, t_first, t_second, conditioner, v=None):
    """Publish joints 1–4 at t_first and 5–7 with the fingers at t_second."""
    names, position = panda.joint_names, list(q)
    velocity = [] if v is None else list(v)
    first = receive(conditioner, t_first, names[:4], position[:4], velocity[:4], stamp='first')
    second = receive(conditioner, t_second, names[4:] + ['panda_finger_joint1'],
                     position[4:] + [0.0], velocity and velocity[4:] + [0.0], stamp='second')
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
    assert sample.tau is None  # no effort in either part


def test_the_frame_id_goes_out_with_the_sample_its_message_completes(panda, conditioner):
    q, v = home(panda), np.zeros(panda.n)
    whole = receive(conditioner, T0, *full_message(panda, q, v), frame_id='base')
    assert whole.sample.frame_id == 'base'
    names = list(panda.joint_names)
    first = receive(conditioner, T0 + DT, names[:4], q[:4], v[:4], frame_id='left')
    second = receive(conditioner, T0 + DT, names[4:], q[4:], v[4:], frame_id='right')
    assert first.sample is None and second.sample.frame_id == 'right'
    assert receive(conditioner, T0 + 2 * DT, *full_message(panda, q, v)).sample.frame_id == ''


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
    receive(conditioner, T0, names[:4], q[:4], v[:4])  # its second half is lost
    first, second = split(panda, q, T0 + DT, T0 + DT, conditioner, v)
    assert kinds(first) == [jsc.MISSING_JOINTS]
    assert second.problems == [] and second.sample.t == T0 + DT


# ------------------------------------------------------------ motor-side values
def test_motor_current_becomes_joint_torque(panda):
    k_m = np.linspace(0.05, 0.11, panda.n)   # N·m/A
    gear = np.linspace(50, 160, panda.n)
    current = np.linspace(-2, 2, panda.n)    # A
    conditioner = JointStateConditioner.for_robot(panda, torque_constants=k_m, gear_ratios=gear,
                                                  effort_is_current=True)
    result = receive(conditioner, T0, *full_message(panda, home(panda), np.zeros(panda.n), current))
    np.testing.assert_allclose(result.sample.tau, gear * k_m * current)  # eqs. 1–2
    np.testing.assert_allclose(result.sample.q, home(panda))


def test_motor_side_positions_and_velocities_are_divided_by_the_gear_ratio(panda):
    gear = 100.0
    conditioner = JointStateConditioner.for_robot(panda, gear_ratios=[gear],
                                                  positions_are_motor_side=True)
    q, v = home(panda), np.full(panda.n, 0.2)
    result = receive(conditioner, T0, *full_message(panda, gear * q, gear * v))
    np.testing.assert_allclose(result.sample.q, q)  # eq. 3
    np.testing.assert_allclose(result.sample.v, v)


@pytest.mark.parametrize('constants, ratios', [([1.0, 2.0], [1.0]), ([1.0], [0.0]),
                                               ([np.nan], [1.0])])
def test_transmission_refuses_bad_constants(constants, ratios):
    with pytest.raises(ValueError):
        Transmission.create(7, ConditioningConfig(torque_constants=constants,
                                                  gear_ratios=ratios))


# ---------------------------------------------------------------- derivatives
def test_missing_velocity_is_estimated_once_the_window_is_full(panda):
    window = 10
    conditioner = JointStateConditioner.for_robot(panda, velocity_window=(window - 1) * DT)
    q0, rate = home(panda), np.linspace(-0.5, 0.5, panda.n)
    samples = [receive(conditioner, T0 + k * DT, *full_message(panda, q0 + rate * k * DT)).sample
               for k in range(window)]
    assert all(s is None for s in samples[:-1])
    np.testing.assert_allclose(samples[-1].v, rate, atol=1e-6)


def test_velocity_estimate_never_mixes_in_samples_from_before_a_measured_stretch(panda):
    """Position only, then velocity measured for a while, then position only again (at a new
    rate): the estimate restarts instead of fitting across the measured stretch."""
    window = 5
    conditioner = JointStateConditioner.for_robot(panda, velocity_window=(window - 1) * DT)
    q0 = home(panda)
    for k in range(10):
        receive(conditioner, T0 + k * DT, *full_message(panda, q0 + 0.3 * k * DT))
    for k in range(10, 20):
        receive(conditioner, T0 + k * DT,
                *full_message(panda, q0 + 0.3 * k * DT, v=np.full(panda.n, 0.3)))
    q1 = q0 + 0.3 * 19 * DT
    later = [receive(conditioner, T0 + (20 + k) * DT,
                     *full_message(panda, q1 - 0.5 * (k + 1) * DT)).sample for k in range(window)]
    assert all(sample is None for sample in later[:-1])  # the window refills first
    np.testing.assert_allclose(later[-1].v, -0.5, rtol=1e-6)


def test_estimator_is_exact_for_a_parabola_with_uneven_timestamps():
    rng = np.random.default_rng(1)
    times = T0 + np.cumsum(rng.uniform(0.5e-3, 3e-3, 30))
    coef = np.array([[0.3, -1.2], [2.0, 0.5], [-4.0, 7.0]])  # q = c0 + c1 s + c2 s², two joints
    estimator = DerivativeEstimator(duration=7 * 2e-3)
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
    estimator = DerivativeEstimator(duration=(window - 1) * DT)
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


def test_estimator_window_spans_its_duration_on_a_jittered_stream():
    """A 140 Hz driver with 4-10 ms steps: the 20 ms window always reaches back 20 ms (the
    newest sample at or before t − 20 ms), never a few samples 8 ms apart, so q̈ from encoder
    noise alone stays as quiet as on a regular 100 Hz stream (1/span² noise)."""
    rng = np.random.default_rng(5)
    duration, sigma = 0.02, 1e-5

    def acceleration_noise(steps) -> float:
        times = T0 + np.cumsum(steps)
        estimator = DerivativeEstimator(duration)
        a = [estimator.update(t, [q])[1][0] for t, q in
             zip(times, rng.normal(0.0, sigma, times.size))]
        return float(np.sqrt(np.mean(np.square(a[10:]))))

    jittered = acceleration_noise(rng.integers(4, 11, 3000) * 1e-3)
    regular = acceleration_noise(np.full(3000, 0.01))
    assert jittered < 1.2 * regular


def test_estimator_reset_and_time_order():
    estimator = DerivativeEstimator(duration=2 * DT)
    for k in range(3):
        estimator.update(k * DT, [float(k)])
    assert estimator.ready
    with pytest.raises(ValueError):
        estimator.update(DT, [0.0])
    estimator.reset()
    assert not estimator.ready
    v, a = estimator.update(10.0, [5.0])
    assert v.tolist() == [0.0] and a.tolist() == [0.0]


@pytest.mark.parametrize('duration', [0.0, -0.01, np.nan, np.inf])
def test_estimator_needs_a_positive_duration(duration):
    with pytest.raises(ValueError, match='duration'):
        DerivativeEstimator(duration)


# --------------------------------------------------------------------- watchdog
def test_watchdog_is_stale_before_the_first_feed_and_after_the_timeout():
    watchdog = Watchdog(timeout=0.05)
    assert watchdog.stale(100.0)
    watchdog.feed(100.0)
    assert not watchdog.stale(100.04)
    assert watchdog.stale(100.06)
    watchdog.feed(100.06)
    assert not watchdog.stale(100.07)


def test_the_derivative_window_is_bounded_by_count_as_well_as_by_time():
    """Issue 19: stamps 1 ns apart all fit in a 20 ms window; it must not grow with them."""
    estimator = DerivativeEstimator(0.02)
    for k in range(3 * DerivativeEstimator.MAX_SAMPLES):
        estimator.update(1.0 + k * 1e-9, np.zeros(7))
    assert estimator._end - estimator._start == DerivativeEstimator.MAX_SAMPLES
    assert len(estimator._t) <= 4 * DerivativeEstimator.MAX_SAMPLES
