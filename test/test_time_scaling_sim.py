"""Seed 003 in the simulated cobot, closed loop and ROS-free: holds, yields when pushed, resumes.

SimulatedCobot (config/scenarios/push_back.yaml) → momentum observer with the URDF model and the
sim's friction → CollisionDetector → TimeScaling → the sim's reference clock (sim.harness.simulate).
The detector runs with the shipped settings: the stop latches until reset (hold_time 0), and
the motion still resumes by itself after each contact, as seed 003 says.
"""
import os

import numpy as np
import pytest

from contact_estimation.core.detector import DetectorConfig
from contact_estimation.core.robot_model import RobotModel
from contact_estimation.core.sim.harness import simulate
from contact_estimation.core.sim.scenario import Scenario
from contact_estimation.core.time_scaling import TimeScalingConfig

SCENARIO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        'config', 'scenarios', 'push_back.yaml')


@pytest.fixture(scope='module')
def trace():
    robot = RobotModel.load('panda')
    scenario = Scenario.load(SCENARIO, robot)
    detector = DetectorConfig.build(robot.joint_names)  # the shipped defaults: hold_time 0
    scaling = TimeScalingConfig()
    return simulate(robot, scenario, 10.0, detector, scaling), scenario


def window(trace, start, end):
    return (trace['t'] >= start) & (trace['t'] < end)


def test_tracks_until_the_first_contact(trace):
    trace, scenario = trace
    free = window(trace, 0.0, scenario.forces[0].start)
    assert not trace['stop'][free].any() and np.all(trace['f_S'][free] == 1.0)
    np.testing.assert_allclose(trace['path_time'][free], trace['t'][free], atol=2e-3)


def test_holds_while_pressed_across_the_path(trace):
    trace, scenario = trace
    press = scenario.forces[0]
    held = window(trace, press.start + 0.15, press.start + press.duration)
    assert trace['stop'][held].all() and np.all(trace['f_S'][held] == 0.0)
    assert np.ptp(trace['path_time'][held]) == 0.0  # the reference stands still
    assert trace['path_time'][held][0] < press.start + 0.15  # stopped soon after the onset


def test_resumes_between_the_press_and_the_push_while_the_stop_stays_latched(trace):
    trace, scenario = trace
    press, push = scenario.forces
    between = window(trace, press.start + press.duration + 0.7, push.start)
    assert trace['stop'][between].all()  # latched until ~/reset
    assert np.all(trace['f_S'][between] > 0.0) and np.all(np.diff(trace['path_time'][between]) > 0)


def test_yields_along_the_path_while_pushed_back(trace):
    trace, scenario = trace
    push = scenario.forces[1]
    pushed = window(trace, push.start + 0.2, push.start + push.duration - push.ramp)
    assert trace['stop'][pushed].all() and np.all(trace['f_S'][pushed] < -0.2)
    path = trace['path_time'][pushed]
    assert np.all(np.diff(path) < 0) and path[0] - path[-1] > 0.3  # goes back along its path


def test_resumes_after_the_contact_ends(trace):
    trace, scenario = trace
    push = scenario.forces[1]
    end = push.start + push.duration
    after = window(trace, end, trace['t'][-1] + 1)
    lowest = trace['path_time'][after].min()
    assert trace['stop'][window(trace, end, 1e9)].all()  # the stop stays latched
    late = window(trace, end + 3.0, 1e9)
    assert np.all(trace['f_S'][late] == 1.0)
    assert trace['path_time'][-1] > lowest + 2.0  # back on its way, at full speed
