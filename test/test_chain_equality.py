"""The 1 kHz chain after issue 26's speed-ups gives what the plain formulas give (no ROS).

A Panda stream (smooth motion, contacts on one joint, the franka driver's finger joints at
the end, some messages in another name order) goes through each stage; the reference is
computed here, straightforwardly, from the method's equations with M, C, g from pinocchio
(RobotModel's own calls).
"""
import numpy as np
import pytest

from contact_estimation.core.chain import friction
from contact_estimation.core.chain.detector import (AccelerationEstimate, CollisionDetector,
                                                    DetectorConfig, accumulate_evidence,
                                                    is_collision, thresholds)
from contact_estimation.core.chain.derivatives import DerivativeEstimator
from contact_estimation.core.chain.joint_state_conditioning import JointStateConditioner
from contact_estimation.core.chain.residual import make_residual
from contact_estimation.core.identification.trajectory import SmoothRandomTrajectory

RATE = 1000.0
COUNT = 1500
FINGERS = ['panda_finger_joint1', 'panda_finger_joint2']
FRICTION = (0.3, 0.05)  # coulomb, viscous (N·m, N·m·s/rad): the friction path is exercised


@pytest.fixture(scope='module')
def stream(robot):
    """(t, q, q̇, τ) with τ = the URDF's inverse dynamics minus a 12 N·m contact on joint 4
    for 0.1 s of every 0.5 s, plus friction."""
    trajectory = SmoothRandomTrajectory(robot, seed=3, speed_scale=0.3, amplitude=0.5)
    samples = [trajectory.sample(i / RATE) for i in range(COUNT)]
    q = np.array([s[0] for s in samples])
    v = np.array([s[1] for s in samples])
    tau = np.array([robot.rnea(*s) for s in samples])
    tau += friction.coulomb_viscous(v, *FRICTION)
    touched = (np.arange(COUNT) % 500) < 100
    tau[touched, 3] -= 12.0
    return (np.arange(1, COUNT + 1) / RATE), q, v, tau


def textbook_observer(robot, t, q, v, tau, gain):
    """Seed 001 ref. [4] (De Luca), project sign, discretised as residual.MomentumObserver's
    docstring says: r_k = e^{−K dt} r_{k−1} + (1 − e^{−K dt}) [(p_k − p_{k−1})/dt − β̄]."""
    r, out, p_prev, beta_prev = np.zeros(robot.n), [], None, None
    for k in range(len(t)):
        p = robot.mass_matrix(q[k]) @ v[k]
        beta = (tau[k] + robot.coriolis_matrix(q[k], v[k]).T @ v[k] - robot.gravity(q[k])
                - friction.coulomb_viscous(v[k], *FRICTION))
        if k:
            dt = t[k] - t[k - 1]
            decay = np.exp(-gain * dt)
            r = decay * r + (1 - decay) * ((p - p_prev) / dt - 0.5 * (beta + beta_prev))
        out.append(r)
        p_prev, beta_prev = p, beta
    return np.array(out)


def test_the_momentum_observer_is_the_textbook_one(robot, stream):
    t, q, v, tau = stream
    residual = make_residual('momentum_observer', robot, friction_params=FRICTION,
                             observer_gain=(50.0,))
    got = np.array([residual.update(t[k], q[k], v[k], tau[k]) for k in range(COUNT)])
    expected = textbook_observer(robot, t, q, v, tau, 50.0)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    assert np.abs(got[80:100, 3] - 12.0).max() < 1.0  # it sees the contact (a real check)


def test_the_fast_and_rnea_residuals_are_their_formulas(robot, stream):
    t, q, v, tau = stream
    fast = make_residual('fast', robot, friction_params=FRICTION)
    rnea = make_residual('rnea', robot, friction_params=FRICTION, acceleration_window=0.02)
    acceleration = DerivativeEstimator(0.02)
    for k in range(COUNT):
        f = friction.coulomb_viscous(v[k], *FRICTION)
        np.testing.assert_allclose(fast.update(t[k], q[k], v[k], tau[k]),
                                   robot.gravity(q[k]) + f - tau[k], rtol=1e-12, atol=1e-12)
        a = acceleration.update(t[k], q[k])[1]
        np.testing.assert_allclose(rnea.update(t[k], q[k], v[k], tau[k]),
                                   robot.rnea(q[k], v[k], a) + f - tau[k], rtol=1e-9, atol=1e-9)


def test_frictionless_parameters_give_the_residual_without_friction(robot, stream):
    t, q, v, tau = stream
    fast = make_residual('fast', robot, friction_params=(0.0, 0.0))
    for k in range(0, COUNT, 50):
        np.testing.assert_array_equal(fast.update(t[k], q[k], v[k], tau[k]),
                                      robot.gravity(q[k]) - tau[k])


def test_the_conditioner_passes_every_message_on_in_model_order(robot, stream):
    """Arm joints then fingers (the franka driver), and every third message shuffled: each
    sample is the message's values put in model order, with no problem reported."""
    t, q, v, tau = stream
    conditioner = JointStateConditioner.for_robot(robot)
    names = list(robot.joint_names) + FINGERS
    rng = np.random.default_rng(5)
    for k in range(COUNT):
        order = rng.permutation(len(names)) if k % 3 == 0 else np.arange(len(names))
        rows = [np.concatenate([x[k], [0.01, 0.01]])[order] for x in (q, v, tau)]
        result = conditioner.condition(t[k], [names[i] for i in order], *rows,
                                       now=t[k] + 1e-4, stamp=k)
        assert result.problems == []
        sample = result.sample
        assert (sample.t, sample.stamp) == (t[k], k)
        for got, expected in ((sample.q, q[k]), (sample.v, v[k]), (sample.tau, tau[k])):
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize('gains', [(0.0, 0.0), (0.5, 0.0), (0.0, 0.02)])
def test_the_thresholds_are_the_formula_at_every_q̇_and_q̈(robot, gains):
    """ψ without the arithmetic when k_v = k_a = 0 (issue 35) is still the formula's, also
    for a q̇ or q̈ that is not finite (ψ_max) or that overflows a sum of squares."""
    config = DetectorConfig.build(robot.joint_names, speed_gain=gains[0],
                                  acceleration_gain=gains[1], threshold_max=9.0)
    rng = np.random.default_rng(2)
    terms = [None, rng.normal(0.0, 2.0, robot.n), np.full(robot.n, 1e200)]
    for bad in (np.inf, -np.inf, np.nan):
        term = rng.normal(0.0, 2.0, robot.n)
        term[3] = bad
        terms.append(term)
    for velocity in terms:
        for acceleration in terms:
            with np.errstate(over='ignore', invalid='ignore'):
                np.testing.assert_array_equal(
                    config.thresholds(velocity, acceleration),
                    thresholds(config.base_thresholds, config.speed_gain,
                               config.acceleration_gain, config.threshold_max, velocity,
                               acceleration))


def test_the_q̈_handed_on_is_the_fit_a_reader_would_make(robot, stream):
    """q̈ is fitted once per sample (issue 35): the listener's velocity fit (a driver without
    q̇) and the rnea residual's hand theirs on with the sample, and it is exactly what the
    detector's own fit over the same window gives on the same positions."""
    t, q, v, tau = stream
    conditioner = JointStateConditioner.for_robot(robot)
    rnea = make_residual('rnea', robot)
    detector_fit = AccelerationEstimate(conditioner.estimator.duration)
    compared = 0
    for k in range(COUNT):
        sample = conditioner.condition(t[k], robot.joint_names, q[k], (), tau[k],
                                       now=t[k] + 1e-4).sample
        own = detector_fit.update(t[k], q[k])
        rnea.update(t[k], q[k], v[k], tau[k])
        if sample is None:  # the velocity fit is filling: no sample yet
            continue
        assert sample.acceleration.window == 0.02 == rnea.acceleration.window
        if own is not None:
            np.testing.assert_array_equal(sample.acceleration.value, own)
            np.testing.assert_array_equal(rnea.acceleration.value, own)
            compared += 1
    assert compared > COUNT - 50


def test_the_detector_is_eq_7_with_weighted_persistence(robot, stream):
    """The evidence, over-threshold flag and contact of every sample, computed here."""
    t, q, v, tau = stream
    residual = make_residual('momentum_observer', robot, friction_params=FRICTION)
    config = DetectorConfig.build(robot.joint_names)
    detector = CollisionDetector(config)
    psi, evidence, contacts = config.base_thresholds, 0.0, 0
    for k in range(COUNT):
        tau_ext = residual.update(t[k], q[k], v[k], tau[k])
        state = detector.update(t[k], tau_ext, v[k], stamp=t[k])
        ratio = float(np.max(np.abs(tau_ext) / psi))
        evidence = accumulate_evidence(evidence, t[k] - t[k - 1] if k else 0.0, ratio,
                                       config.persistence, config.persistence_time)
        assert state.over_threshold == (ratio > 1.0)
        assert state.contact == is_collision(evidence, config.persistence_time)
        np.testing.assert_array_equal(state.thresholds, psi)
        contacts += state.contact
    assert contacts > 0 and state.stop
