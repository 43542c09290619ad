"""The simulated cobot playing a real industrial driver (core/sim/driver.py): effort from motor
current (seed 001 eqs. 1–2), irregular sampling periods, reordering; and a payload."""
import re

import numpy as np
import pytest

from contact_estimation.core.chain.detector import CollisionDetector, DetectorConfig
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.settings import SettingError
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.driver import DriverStream, DriverTiming, MotorCurrent
from contact_estimation.core.sim.harness import closed_loop, record_on_simulator
from contact_estimation.core.sim.scenario import Scenario, ScenarioError
from contact_estimation.core.identification.trajectory import WaypointTrajectory, make_trajectory

POSE = np.array([0.0, 0.3, 0.0, -1.8, 0.0, 2.1, 0.8])
TOOL = Payload(5.0, (0.02, 0.0, 0.1))  # a 5 kg tool, 10 cm out from the flange


def _measured_and_true(sim: SimulatedCobot, steps: int):
    measured, true = [], []
    for _ in range(steps):
        sim.step()
        measured.append(sim.joint_state()[2])
        true.append(sim.tau)
    return np.array(measured), np.array(true)


# ------------------------------------------------------------------- motor current
def test_effort_from_motor_current_lies_on_the_current_grid_around_the_joint_torque(robot):
    """τ = G_m k_m i_m: the reported torque is a whole number of ADC steps of current times
    G_m k_m of its joint, and its error is the current's noise and rounding times G_m k_m."""
    k_m = np.linspace(0.05, 0.2, robot.n)
    current = MotorCurrent(tuple(k_m), (100.0,), noise=0.02, resolution=0.01)
    motion = make_trajectory(robot, {'type': 'smooth_random', 'seed': 1})
    sim = SimulatedCobot(robot, motion, config=SimConfig(motor_current=current, noise_seed=3))
    measured, true = _measured_and_true(sim, 3000)
    per_ampere = 100.0 * k_m
    steps = measured / (per_ampere * current.resolution)
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-6)
    spread = (measured - true).std(axis=0)
    expected = per_ampere * np.hypot(current.noise, current.resolution / np.sqrt(12))
    np.testing.assert_allclose(spread, expected, rtol=0.1)
    assert np.abs((measured - true).mean(axis=0)).max() < 0.1 * expected.max()


def test_motor_current_refuses_bad_constants(robot):
    with pytest.raises(SettingError, match=re.escape('torque_constants = [0.1, -0.1]: -0.1 '
                                                     'outside 0.0001 … 1000')):
        MotorCurrent(torque_constants=(0.1, -0.1))
    with pytest.raises(ValueError, match='noise'):
        MotorCurrent(noise=float('nan'))
    with pytest.raises(ValueError, match=re.escape('driver.gear_ratios: expected 1 or 7 values '
                                                   '(one for every joint or one per joint), '
                                                   'got 2')):
        SimulatedCobot(robot, WaypointTrajectory([POSE], []),
                       config=SimConfig(motor_current=MotorCurrent(gear_ratios=(100.0, 50.0))))


# ------------------------------------------------------------------------- payload
def test_payload_is_carried_compensated_and_no_contact(robot):
    """At rest with a tool, the arm holds its pose (its controller knows the tool), the joint
    torques are the gravity of the arm with the tool, the F/T sensor weighs the tool too, and
    the ground truth has no external torque (the tool is part of the arm)."""
    hold = WaypointTrajectory([POSE], [])
    exact = dict(position_noise=0.0, velocity_noise=0.0, effort_noise=0.0)
    bare = SimulatedCobot(robot, hold, config=SimConfig(**exact))
    tooled = SimulatedCobot(robot, hold, config=SimConfig(**exact, payload=TOOL))
    for sim in (bare, tooled):
        for _ in range(300):
            sim.step()
        assert np.abs(sim.q - POSE).max() < 1e-4
    carrying = robot.with_payload(TOOL.mass, TOOL.centre_of_mass)
    np.testing.assert_allclose(tooled.joint_state()[2], carrying.gravity(tooled.q), atol=0.05)
    assert np.abs(tooled.joint_state()[2] - bare.joint_state()[2]).max() > 5.0
    weight = TOOL.mass * np.linalg.norm(robot.model.gravity.linear)
    extra = tooled.ft_wrench()[0] - bare.ft_wrench()[0]
    np.testing.assert_allclose(extra, [0.0, 0.0, -weight], atol=1.0)  # F/T noise 0.1 N
    assert not np.any(tooled.true_external_torque()) and not tooled.true_contacts()


def test_a_scenario_payload_wins_and_a_bad_one_is_refused(robot):
    scenario = Scenario.from_dict({'payload': {'mass': 2.0, 'centre_of_mass': [0, 0, 0.05],
                                               'link': 'panda_link7'}}, robot)
    assert scenario.payload == Payload(2.0, (0.0, 0.0, 0.05), 'panda_link7')
    sim = SimulatedCobot(robot, WaypointTrajectory([POSE], []), scenario,
                         SimConfig(payload=TOOL))
    masses = [inertia.mass for inertia in sim.robot.model.inertias]
    bare = [inertia.mass for inertia in robot.model.inertias]
    assert sum(masses) == pytest.approx(sum(bare) + 2.0)
    for raw, message in [({'mass': -1.0}, 'mass = -1.0: -1.0 outside 0 … 1000'),
                         ({'mass': 1.0, 'link': 'nowhere'}, 'nowhere'),
                         ({'mass': 1.0, 'centre_of_mass': [0, 0]}, 'centre_of_mass must be 3'),
                         ({'mass': 1.0, 'inertia': 1.0}, "unknown keys ['inertia']")]:
        with pytest.raises(ScenarioError, match=re.escape(message)):
            Scenario.from_dict({'payload': raw}, robot)


# ------------------------------------------------------------------ driver timing
def _sampled_steps(stream: DriverStream, steps: int) -> np.ndarray:
    return np.array([k for k in range(steps) if stream.due(k)])


def test_without_jitter_the_driver_samples_every_period():
    """The default: a sample every rate / publish_rate physics steps from step 0, in order."""
    stream = DriverStream(0.01, 0.001)
    sampled = _sampled_steps(stream, 1000)
    np.testing.assert_array_equal(sampled, np.arange(0, 1000, 10))
    assert [stream.release(k) for k in range(5)] == [[k] for k in range(5)]


def test_a_jittery_driver_samples_at_every_period_within_the_jitter():
    """Periods of 7 ± 3 ms on a 1 kHz physics: 4 to 10 ms, each of them drawn, about 7 ms
    on average."""
    stream = DriverStream(0.007, 0.001, DriverTiming(period_jitter=0.003), seed=5)
    periods = np.diff(_sampled_steps(stream, 20000))
    assert set(periods) == set(range(4, 11))
    assert periods.mean() == pytest.approx(7.0, abs=0.1)


def test_reordered_samples_leave_right_after_the_next_one():
    """Every sample leaves exactly once; a late one right after its successor; about the
    configured share of them late."""
    stream = DriverStream(0.01, 0.001, DriverTiming(reorder_probability=0.1), seed=2)
    order = [sample for k in range(5000) for sample in stream.release(k)]
    late = [i for i in range(1, len(order)) if order[i] < order[i - 1]]
    assert sorted(order) == list(range(len(order))) and len(order) >= 4999
    for i in late:
        assert order[i] == order[i - 1] - 1
    assert len(late) / len(order) == pytest.approx(0.1 / 1.1, abs=0.02)


def test_a_schedule_is_the_steps_sampled_in_the_order_they_leave():
    """`schedule` replays due/release step by step (the same draws): every sampled step once,
    4-10 ms apart, the late ones right after their successor."""
    timing = DriverTiming(period_jitter=0.003, reorder_probability=0.05)
    schedule = DriverStream(0.007, 0.001, timing, seed=3).schedule(20000)
    stepwise = DriverStream(0.007, 0.001, timing, seed=3)
    assert list(schedule) == [k for step in range(20000) if stepwise.due(step)
                              for k in stepwise.release(step)]
    assert len(set(schedule)) == len(schedule)
    assert set(np.diff(np.sort(schedule))) == set(range(4, 11))
    late = np.flatnonzero(np.diff(schedule) < 0) + 1
    assert late.size > 50
    assert (schedule[late] == np.sort(schedule)[late - 1]).all()


def test_a_recording_on_the_simulator_plays_its_driver(robot):
    """record_on_simulator at a jittered rate with reordering: stamps 4-10 ms apart once
    sorted, a few out of order; at a fixed rate, one sample every period from the start."""
    hold = WaypointTrajectory([POSE, POSE], [2.0])
    config = SimConfig(noise_seed=4)
    driven = record_on_simulator(robot, hold, config, 140.0,
                                 timing=DriverTiming(period_jitter=0.003,
                                                     reorder_probability=0.02))
    steps = np.round(np.diff(np.sort(driven.t)) * 1e3).astype(int)
    assert set(steps) <= set(range(4, 11)) and steps.mean() == pytest.approx(7.0, abs=0.5)
    assert 0 < np.sum(np.diff(driven.t) < 0) < 0.05 * len(driven.t)
    fixed = record_on_simulator(robot, hold, config, 100.0)
    np.testing.assert_allclose(fixed.t, np.arange(len(fixed.t)) * 0.01, atol=1e-9)
    assert len(fixed.t) == 201


def test_closed_loop_without_a_residual_records_the_joint_states(robot):
    """With no residual, closed_loop records what the driver measured (effort too), for
    residuals to be run on it afterwards; a detector without a residual is refused."""
    hold = WaypointTrajectory([POSE], [])
    config = SimConfig(payload=TOOL, position_noise=0.0, velocity_noise=0.0, effort_noise=0.0)
    trace = closed_loop(SimulatedCobot(robot, hold, config=config), None, seconds=0.3)
    carrying = robot.with_payload(TOOL.mass, TOOL.centre_of_mass)
    np.testing.assert_allclose(trace['effort'][-1], carrying.gravity(trace['q'][-1]), atol=0.05)
    assert not trace['tau_ext'].any()
    with pytest.raises(ValueError, match='needs a residual'):
        closed_loop(SimulatedCobot(robot, hold), None, CollisionDetector(
            DetectorConfig.build(robot.joint_names)))


def test_driver_refuses_impossible_timing():
    with pytest.raises(ValueError, match='shorter than one physics step'):
        DriverStream(0.008, 0.001, DriverTiming(period_jitter=0.0078))
    with pytest.raises(ValueError, match='reorder_probability'):
        DriverTiming(reorder_probability=1.5)
