"""The estimation process's compiled kernels (issue 35) give the bits of the numpy formulas
they replace (kept here), on random and edge inputs: NaN, inf, zeros, the first sample, a
gap in the stamps."""
import numpy as np
import pytest

from contact_estimation.core.contact.ft_compensation import (BaseWrenchCompensator,
                                                             MomentumWrenchObserver,
                                                             observer_step)
from contact_estimation.core.contact.ft_contact_stream import check_reading
from contact_estimation.core.contact.localization_schedule import (LocalizationSchedule,
                                                                   ScheduleConfig)
from contact_estimation.core.input_rejected import (NOT_FINITE, SATURATED, ZERO_READING,
                                                    InputRejected)
from contact_estimation.core.robot.robot_model import RobotModel

EDGES = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, 1e300)


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


def _observer_step_numpy(integral, static, momentum, momentum0, gain, dt):
    """The momentum observer's step as numpy computed it before the kernel."""
    wrench = gain * (momentum - momentum0 + integral + static * dt) / (1.0 + gain * dt)
    return wrench, integral + (static - wrench) * dt


def _vectors(rng: np.random.Generator, edges: bool) -> list[np.ndarray]:
    vectors = [rng.normal(0.0, scale, 6) for scale in (1e-3, 1.0, 50.0, 1e6)]
    if edges:
        for vector in vectors:
            vector[rng.integers(6)] = EDGES[rng.integers(len(EDGES))]
    return vectors


@pytest.mark.parametrize('edges', [False, True])
def test_the_observer_step_gives_numpys_bits(edges):
    rng = np.random.default_rng(35)
    for _ in range(2000):
        integral, static, momentum, momentum0 = _vectors(rng, edges)
        gain = float(rng.choice([0.1, 50.0, 1000.0, rng.uniform(0.1, 1000.0)]))
        dt = float(rng.choice([1e-4, 1e-3, 4e-3, 0.5, rng.uniform(0.0, 1.0)]))  # gaps too
        with np.errstate(all='ignore'):
            expected_wrench, expected_integral = _observer_step_numpy(
                integral, static, momentum, momentum0, gain, dt)
        wrench, integral = np.empty(6), integral.copy()
        observer_step(wrench, integral, static, momentum, momentum0, gain, dt)
        np.testing.assert_array_equal(wrench.view(np.int64), expected_wrench.view(np.int64))
        np.testing.assert_array_equal(integral.view(np.int64),
                                      expected_integral.view(np.int64))


def test_the_observer_over_a_stream_gives_the_numpy_observers_bits(panda):
    """From its first sample (the steady-state start) through a stamp gap and a restart."""
    rng = np.random.default_rng(8)
    compensator = BaseWrenchCompensator(panda)
    observer = MomentumWrenchObserver(compensator, 50.0)
    stamps = np.concatenate([np.arange(100) * 4e-3, 0.4 + 0.25 + np.arange(50) * 4e-3,
                             np.arange(20) * 4e-3])  # a gap, then the clock restarted
    integral = momentum0 = previous = None
    for t in stamps:
        q, v = rng.uniform(-1.0, 1.0, panda.n), rng.normal(0.0, 0.5, panda.n)
        reading = rng.normal(0.0, 20.0, 6)
        wrench = observer.update(t, reading, q, v)
        static = compensator.static_wrench(reading, q)
        momentum = np.concatenate(panda.base_momentum(q, v))
        if previous is None or t <= previous:
            expected, integral, momentum0 = static, static / 50.0, momentum
        else:
            expected, integral = _observer_step_numpy(integral, static, momentum, momentum0,
                                                      50.0, t - previous)
        previous = t
        np.testing.assert_array_equal(wrench.view(np.int64), expected.view(np.int64))


@pytest.mark.parametrize('edges', [False, True])
def test_the_localizers_gate_is_numpys(edges):
    rng = np.random.default_rng(20)
    schedule = LocalizationSchedule(ScheduleConfig(gate_thresholds=(0.5, 1.0, 2.0, 0.5, 0.5,
                                                                    0.1, 3.0)), 7)
    for _ in range(5000):
        tau = rng.normal(0.0, rng.choice([0.1, 1.0, 3.0]), 7)
        if edges:
            tau[rng.integers(7)] = EDGES[rng.integers(len(EDGES))]
        tau[rng.integers(7)] = schedule.thresholds[0] * rng.choice([1.0, -1.0])  # on the gate
        assert schedule.contact(tau) == bool(np.any(np.abs(tau) > schedule.thresholds))


def test_the_gate_refuses_another_number_of_joints():
    schedule = LocalizationSchedule(ScheduleConfig(), 7)
    with pytest.raises(ValueError, match='numbers of joints'):
        schedule.contact(np.zeros(6))


def test_due_is_the_gate_at_the_rate_and_says_whether_the_gate_was_open():
    schedule = LocalizationSchedule(ScheduleConfig(gate_thresholds=(1.0,), max_rate=20.0), 2)
    loaded, free = np.array([0.0, 1.5]), np.array([0.5, -0.5])
    assert not schedule.due(1.0, free) and not schedule.open
    assert schedule.due(1.0, loaded) and schedule.open
    schedule.finished(1.0)
    assert not schedule.due(1.01, loaded) and schedule.open   # the rate: not yet
    assert schedule.due(1.05, loaded)
    schedule.finished(1.05)
    assert schedule.due(0.001, loaded)  # the stamps went back (a new time base)


def _reading_refusal_numpy(reading, force_limit, torque_limit):
    """What check_reading refused a reading for, as numpy computed it before the kernel."""
    if reading.shape != (6,) or not np.isfinite(reading).all():
        return NOT_FINITE
    if not reading.any():
        return ZERO_READING
    largest_force, largest_torque = np.abs(reading).reshape(2, 3).max(axis=1).tolist()
    return SATURATED if largest_force >= force_limit or largest_torque >= torque_limit else None


def test_a_reading_is_refused_for_what_numpy_refused_it_for():
    rng = np.random.default_rng(36)
    limits = (2500.0, 400.0)
    readings = [np.zeros(6), -np.zeros(6), np.ones(5), np.ones(7)]
    for _ in range(5000):
        reading = rng.normal(0.0, rng.choice([1.0, 300.0, 3000.0]), 6)
        for _ in range(rng.integers(3)):
            reading[rng.integers(6)] = rng.choice([*EDGES, 2500.0, -400.0, 0.0])
        readings.append(reading)
    for reading in readings:
        try:
            check_reading(reading, *limits)
            refused = None
        except InputRejected as err:
            refused = err.kind
        assert refused == _reading_refusal_numpy(reading, *limits), reading
