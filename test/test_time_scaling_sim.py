"""Seed 003 in the simulated cobot, closed loop and ROS-free: holds, yields when pushed, resumes,
and f_S never chatters under a steady push.

SimulatedCobot (config/scenarios/push_back.yaml, steady_push.yaml) → momentum observer with the
URDF model and the sim's friction → CollisionDetector → TimeScaling → the sim's reference clock
(sim.harness.simulate). The detector and the time scaling run with the shipped settings: the
stop latches until reset (hold_time 0), and the motion still resumes by itself after each
contact, as seed 003 says.
"""
import os

import numpy as np
import pytest

from contact_estimation.core.chain.detector import DetectorConfig
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.harness import simulate
from contact_estimation.core.sim.scenario import Scenario
from contact_estimation.core.chain.time_scaling import TimeScalingConfig

SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         'config', 'scenarios')


def run(name: str, seconds: float):
    robot = RobotModel.load('panda')
    scenario = Scenario.load(os.path.join(SCENARIOS, f'{name}.yaml'), robot)
    detector = DetectorConfig.build(robot.joint_names)  # the shipped defaults: hold_time 0
    return simulate(robot, scenario, seconds, detector, TimeScalingConfig()), scenario


@pytest.fixture(scope='module')
def trace():
    return run('push_back', 10.0)


@pytest.fixture(scope='module')
def steady():
    return run('steady_push', 12.0)


def window(trace, start, end):
    return (trace['t'] >= start) & (trace['t'] < end)


def pushed(trace, force):
    """From the push's detection (f_S held at 0; before it, f_S may still be recovering from
    an earlier contact) to the start of the push's ramp down."""
    during = window(trace, force.start, force.start + force.duration - force.ramp)
    detected = trace['t'][during][np.argmax(trace['f_S'][during] <= 0.0)]
    return during & (trace['t'] >= detected)


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
    pushed = window(trace, push.start + 0.3, push.start + push.duration - push.ramp)
    assert trace['stop'][pushed].all() and np.all(trace['f_S'][pushed] < -0.5)
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


@pytest.mark.parametrize('scenario_trace', ['trace', 'steady'])
def test_f_s_is_monotone_without_chatter_during_every_steady_push(scenario_trace, request):
    """Once a push is detected, f_S goes one way (hold → yield) and then stays: at most one
    sign change, a total variation of just the way down, never back up. (The law it replaces
    flipped between 0 and a yield many times a second at the dead band's edge.)"""
    trace, scenario = request.getfixturevalue(scenario_trace)
    for force in scenario.forces:
        f_s = trace['f_S'][pushed(trace, force)]
        assert f_s[0] == 0.0 and f_s.size > 500, force
        assert np.all(np.diff(f_s) <= 0), force
        assert np.count_nonzero(np.diff(np.sign(f_s))) <= 1, force
        assert np.abs(np.diff(f_s)).sum() == pytest.approx(-f_s[-1]), force


def test_the_demos_side_push_at_the_edge_of_the_dead_band_holds_still_then_resumes(steady):
    """Its push along the path sits near the dead band: the old law flipped f_S between 0 and
    a small yield 13 times in 3 s (total variation 20); now the arm simply holds."""
    trace, scenario = steady
    push = scenario.forces[0]
    held = window(trace, push.start + 0.15, push.start + push.duration)
    assert np.all(trace['f_S'][held] == 0.0) and np.ptp(trace['path_time'][held]) == 0.0
    after = trace['f_S'][window(trace, push.start + push.duration, 1e9)]
    assert np.all(np.diff(after) >= 0) and after[-1] == 1.0


def test_a_steady_push_back_gives_one_steady_rate_limited_yield_then_resumes(trace):
    trace, scenario = trace
    push = scenario.forces[-1]
    plateau = trace['f_S'][window(trace, push.start + 0.5, push.start + push.duration
                                  - push.ramp)]
    assert plateau.max() < -0.3 and np.ptp(plateau) < 0.01  # one yield speed, held
    end = push.start + push.duration
    after = trace['f_S'][window(trace, end, 1e9)]
    assert np.all(np.diff(after) >= 0) and after[-1] == 1.0  # back to track, no detour
    steps = np.abs(np.diff(trace['f_S']))
    rate = steps / np.diff(trace['t'])
    below = trace['f_S'][1:] < 0
    assert rate[below].max() <= TimeScalingConfig().yield_rate + 1e-6  # rate-limited yield
