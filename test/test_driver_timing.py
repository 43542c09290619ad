"""A real driver's timing through the listener's conditioner and the residual, without ROS.

~100 Hz with stamps 4-10 ms apart, a few lost messages and a few that arrive out of order,
all with the shipped defaults (core's): every reordered message is dropped and counted
once, nothing is a gap or a restart, and the residual is the external torque.
"""
import numpy as np
import pytest
from test_residual import Trajectory

from contact_estimation.core.chain import joint_state_conditioning as jsc
from contact_estimation.core.chain.joint_state_conditioning import JointStateConditioner
from contact_estimation.core.chain.rate_statistics import StepStatistics
from contact_estimation.core.chain.residual import MODELS, make_residual
from contact_estimation.core.robot.robot_model import RobotModel

T0 = 1000.0
REORDERED = 6
LOST = 4


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


def jittered_driver(rng, duration=4.0):
    """Stamps 4-10 ms apart, `LOST` messages lost, and arrival order with `REORDERED`
    adjacent pairs swapped: the stamps in arrival order."""
    stamps = T0 + np.cumsum(rng.uniform(4e-3, 10e-3, int(duration / 7e-3)))
    stamps = np.delete(stamps, rng.choice(np.arange(50, stamps.size - 50), LOST, replace=False))
    order = np.arange(stamps.size)
    swapped = rng.choice(np.arange(60, stamps.size - 60, 20), REORDERED, replace=False)
    for k in swapped:
        order[k], order[k + 1] = order[k + 1], order[k]
    return stamps[order]


@pytest.mark.parametrize('with_velocity', [True, False])
@pytest.mark.parametrize('kind', MODELS)
def test_a_jittered_reordered_100_hz_stream_gives_the_external_torque(panda, kind, with_velocity):
    rng = np.random.default_rng(11)
    traj = Trajectory(panda, rng, amplitude=0.3, frequency=0.3)
    contact = np.array([3.0, -6.0, 2.0, 5.0, -1.0, 1.0, 0.5])  # N·m, from t = T0 + 2 s
    arrivals = jittered_driver(rng)
    conditioner = JointStateConditioner.for_robot(panda)  # the listener's defaults
    residual = make_residual(kind, panda)                 # the residual node's defaults
    steps = StepStatistics()
    problems, restarts, errors, samples = [], 0, [], []
    for t in arrivals:
        q, v, a = traj.state(t - T0)
        tau_ext = contact if t >= T0 + 2.0 else np.zeros(panda.n)
        tau = traj.torque(q, v, a, tau_ext) - traj.torque(q, v, a, 0.0) + panda.rnea(q, v, a)
        result = conditioner.condition(t, panda.joint_names, q, v if with_velocity else [], tau,
                                       now=t + 1e-3)
        problems += [kind for kind, _ in result.problems]
        samples.append(result.sample)
        if result.sample is None:
            continue
        sample = result.sample
        steps.add(sample.t)
        out = residual.update(sample.t, sample.q, sample.v, sample.tau)
        restarts += bool(residual.last_gap)
        settled = sample.t - T0 > 0.3 and not 2.0 <= sample.t - T0 < 2.3
        if settled and kind != 'fast':  # the fast residual omits M q̈ + C q̇ on purpose
            errors.append(out - tau_ext)
    assert problems == [jsc.OUT_OF_ORDER_STAMP] * REORDERED
    assert restarts == 0
    # Every message in order gives a sample, once the velocity fit (if needed) has filled.
    first = next(k for k, sample in enumerate(samples) if sample is not None)
    assert sum(sample is None for sample in samples[first:]) == REORDERED
    assert first == 0 if with_velocity else arrivals[first] - arrivals[0] >= 0.02
    rate = steps.take()
    assert rate.steps == arrivals.size - first - REORDERED - 1
    assert 4e-3 <= rate.step_min and rate.step_max <= 20e-3  # a lost message is no gap
    assert 100.0 < rate.rate < 200.0
    if kind != 'fast':
        # rnea: the lag of q̈ fitted over 0.02 s (20 samples would be 140 ms here, 7 times
        # as much); the observer: only the velocity fit's error when the driver gives none.
        tolerance = {'rnea': 0.2, 'momentum_observer': 0.05}[kind]
        assert np.abs(errors).max() < tolerance, np.abs(errors).max(axis=0)
