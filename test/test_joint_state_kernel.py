"""The conditioner's compiled kernel (`_joint_side`) against its formula written in numpy,
on random messages with NaN, ±inf, -0.0 and values on the bounds, first samples (no stamp
yet), repeated and older stamps, parts of the chain, fields not given, and the read-only
views ros/cdr.py hands over (no ROS)."""
import numpy as np
import pytest

from contact_estimation.core.chain import joint_state_conditioning as jsc

N = 7          # model joints
ROWS = 9       # message rows (a gripper's two besides)
SPECIAL = (np.nan, np.inf, -np.inf, -0.0, 0.0, 1e308)


def formula(t, position, velocity, effort, take, constants, check_finite, state, check):
    """(outcome, values, state after) as the module docstring's rules say, in numpy."""
    rows, joints = take
    divisor, factor = constants[6], constants[7]
    zeros = np.zeros(rows.size)
    with np.errstate(over='ignore', invalid='ignore'):
        values = np.stack([position[rows] / divisor,
                           velocity[rows] / divisor if velocity is not None else zeros,
                           effort[rows] * factor if effort is not None else zeros])
    within = (((values >= constants[:3]) & (values <= constants[3:6])).all()
              and (not check_finite or np.isfinite(values).all()))
    if check and not within:
        return jsc._OUTSIDE, values, state
    if check and not t > state[3, joints].max():
        return jsc._NOT_NEWER, values, state
    after = state.copy()
    after[:3, joints] = values
    if velocity is None:
        after[1, joints] = np.nan
    if effort is None:
        after[2, joints] = np.nan
    after[3, joints] = t
    after[4, joints] = np.nan
    return jsc._STORED, values, after


def random_case(rng):
    """A message, a layout of some chain joints (message rows shuffled), bounds and a state."""
    count = int(rng.integers(1, N + 1))
    joints = np.sort(rng.choice(N, count, replace=False))
    rows = rng.choice(ROWS, count, replace=False)
    take = np.stack([rows, joints]).astype(np.int64)
    fields = rng.normal(0.0, 2.0, (3, ROWS))
    for _ in range(int(rng.integers(0, 3))):  # NaN, ±inf, -0.0, ... here and there
        fields[rng.integers(3), rng.integers(ROWS)] = rng.choice(SPECIAL)
    low = -rng.uniform(1.0, 5.0, (3, count))
    high = rng.uniform(1.0, 5.0, (3, count))
    low[rng.random((3, count)) < 0.1] = -np.inf  # joints without URDF limits
    high[rng.random((3, count)) < 0.1] = np.inf
    bound = np.where(rng.random((3, count)) < 0.5, low, high)
    on_bound = rng.random((3, count)) < 0.1      # a value exactly on a bound
    fields[:, rows] = np.where(on_bound, bound, fields[:, rows])
    motor_side, current = rng.random(2) < 0.5
    divisor = rng.uniform(1e-3, 160.0, count) if motor_side else np.ones(count)
    factor = rng.uniform(1e-4, 50.0, count) if current else np.ones(count)
    constants = np.vstack([low, high, divisor, factor])
    state = np.array([rng.normal(size=N), rng.normal(size=N), rng.normal(size=N),
                      rng.choice([-np.inf, 10.0, 10.5], N), rng.choice([np.nan, 3.0], N)])
    t = float(rng.choice([10.0, 10.5, 10.25, 11.0]))  # not newer, equal, newer
    return t, fields, take, constants, not (np.isfinite(low).all() and np.isfinite(high).all()), \
        state


@pytest.mark.parametrize('seed', range(40))
@pytest.mark.parametrize('check', [True, False])
def test_the_kernel_is_its_formula(seed, check):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        t, fields, take, constants, check_finite, state = random_case(rng)
        given_velocity, given_effort = rng.random(2) < 0.8
        if rng.random() < 0.5:  # read-only views of bytes, as ros/cdr.py gives them
            fields = np.frombuffer(b'\0\0\0\0' + fields.tobytes(), np.float64, fields.size,
                                   4).reshape(fields.shape)
        position, velocity, effort = fields
        expected = formula(t, position, velocity if given_velocity else None,
                           effort if given_effort else None, take, constants, check_finite,
                           state, check)
        values, got_state = np.empty((3, take.shape[1])), state.copy()
        outcome = jsc._joint_side(t, position, velocity if given_velocity else position,
                                  effort if given_effort else position, given_velocity,
                                  given_effort, take, constants, check_finite, values,
                                  got_state, check)
        assert outcome == expected[0]
        np.testing.assert_array_equal(values, expected[1])
        np.testing.assert_array_equal(got_state, expected[2])
        assert (np.signbit(values) == np.signbit(expected[1])).all()  # -0.0 stays -0.0


def test_the_first_sample_is_newer_than_no_stamp_and_a_repeated_one_is_not():
    take = np.array([[0], [0]], np.int64)
    constants = np.array([[-1.0], [-1.0], [-1.0], [1.0], [1.0], [1.0], [1.0], [1.0]])
    state = np.array([[0.0], [np.nan], [np.nan], [-np.inf], [np.nan]])
    given = np.array([0.5])
    arguments = (given, given, given, True, True, take, constants, False, np.empty((3, 1)))
    assert jsc._joint_side(1.0, *arguments, state, True) == jsc._STORED
    assert state[3, 0] == 1.0
    assert jsc._joint_side(1.0, *arguments, state, True) == jsc._NOT_NEWER
    assert jsc._joint_side(0.5, *arguments, state, True) == jsc._NOT_NEWER
    assert jsc._joint_side(0.5, *arguments, state, False) == jsc._STORED  # after TIME_RESET
    assert state[3, 0] == 0.5
