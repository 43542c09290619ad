"""A 6-joint arm through the user's steps (issue 28), ROS-free on the core harness: `identify
fit` on ordinary motion recorded by a 100 Hz driver with jittered and late stamps and motor
currents, `calibrate` on the residual of free motion, then other free motion that must not
stop the arm and a push at the flange that must."""
import dataclasses

import numpy as np
import pytest

from contact_estimation.core.chain.detector import CollisionDetector, DetectorConfig
from contact_estimation.core.chain.residual import make_residual
from contact_estimation.core.chain.threshold_calibration import calibrate, caps_from_effort
from contact_estimation.core.identification.identification import in_time_order
from contact_estimation.core.identification.motion_identification import identify_motion
from contact_estimation.core.identification.trajectory import FirstSeconds, make_trajectory
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.driver import DriverTiming, MotorCurrent
from contact_estimation.core.sim.harness import closed_loop, record_on_simulator, simulator_config
from contact_estimation.core.sim.scenario import PointForce, Scenario

MOTOR = MotorCurrent((0.125,) * 3 + (0.092,) * 3, (101.0,))  # k_m N·m/A, G_m: UR5-like
TOOL = Payload(2.0, (0.0, 0.0, 0.05))                        # kg, m in tool0


def motion(seed: int) -> dict:
    return {'type': 'smooth_random', 'seed': seed, 'speed_scale': 0.4, 'amplitude': 0.5}


@pytest.fixture(scope='module')
def ur5():
    return RobotModel.load('ur5')


def arm(robot, seed: int, payload: Payload = Payload()):
    return dataclasses.replace(simulator_config(robot, seed=seed), motor_current=MOTOR,
                               payload=payload)


@pytest.fixture(scope='module')
def suite(ur5):
    """The residual of the model identified from 40 s of ordinary motion at 100 Hz ± 3 ms,
    and the detector configuration `calibrate` proposes from 40 s of free motion with the
    tool."""
    log = record_on_simulator(ur5, FirstSeconds(make_trajectory(ur5, motion(1)), 40.0),
                              arm(ur5, 3), 100.0,
                              timing=DriverTiming(period_jitter=0.003, reorder_probability=0.01))
    model = identify_motion(ur5, in_time_order(log)[0], models=('continuous',)).model(
        'continuous', {})

    def residual():
        return make_residual('momentum_observer', ur5, model, payload=TOOL)

    sim = SimulatedCobot(ur5, make_trajectory(ur5, motion(11)), config=arm(ur5, 11, TOOL))
    trace = closed_loop(sim, residual(), seconds=40.0)
    cal = calibrate(trace['t'], trace['q'], trace['v'], trace['tau_ext'], ur5.joint_names,
                    threshold_max=caps_from_effort(ur5.effort_limits))
    config = DetectorConfig.build(ur5.joint_names, thresholds_position=cal.base,
                                  speed_gain=cal.speed_gain,
                                  acceleration_gain=cal.acceleration_gain,
                                  threshold_max=cal.threshold_max)
    return residual, config


def run(ur5, suite, seed: int, forces=(), seconds: float = 20.0) -> dict:
    residual, config = suite
    sim = SimulatedCobot(ur5, make_trajectory(ur5, motion(seed)), Scenario(forces=list(forces)),
                         arm(ur5, seed, TOOL))
    return closed_loop(sim, residual(), CollisionDetector(config), seconds=seconds)


def test_other_free_motion_never_stops_the_arm(ur5, suite):
    trace = run(ur5, suite, 12)
    assert not trace['stop'].any(), f'false stop at {trace["t"][trace["stop"]][0]:.3f} s'


def test_a_push_at_the_flange_stops_the_arm_within_30_ms(ur5, suite):
    onset = 2.0
    q = make_trajectory(ur5, motion(13)).sample(onset)[0]
    direction = np.array([0.0, 0.6, -0.8])
    tau = ur5.point_jacobian(q, ur5.tip_link, np.zeros(3)).T @ direction
    force = 8.0 / np.abs(tau).max() * direction  # its largest joint torque: 8 N·m
    trace = run(ur5, suite, 13, [PointForce(ur5.tip_link, np.zeros(3), force, onset, 0.4,
                                            0.01)], seconds=2.5)
    assert not trace['stop'][trace['t'] < onset].any()
    stopped = trace['t'][trace['stop']]
    assert stopped.size and stopped[0] - onset <= 0.03
