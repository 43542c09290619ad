"""A driver hiccup is not a collision: pauses of 20-300 ms injected into the simulated arm's
stream, at 1 kHz and at 100 Hz, through the listener's conditioner, the residual node's
momentum observer and the detector (ROS-free, the nodes' defaults, a calibrated threshold).

The arm moves on during a pause, as a real one does, so the samples after it carry the true
stamps. The fail-safe may stop (a pause over input_timeout is stale input), but no collision
may come of the restart; and a contact that lasts across the pause is still seen after it.
"""
import numpy as np
import pytest

from contact_estimation.core.chain.detector import COLLISION, CollisionDetector, DetectorConfig
from contact_estimation.core.chain.joint_state_conditioning import JointStateConditioner
from contact_estimation.core.chain.residual import make_residual
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.scenario import PointForce, Scenario
from contact_estimation.core.identification.trajectory import make_trajectory

PAUSE_AT = 1.5       # s of simulated time
THRESHOLD = 1.0      # N·m: what `calibrate` gives on this arm (0.5-0.9), rounded up
PUSH = np.array([0.0, 40.0, 0.0])  # N on link 5: 2-4 N·m on joints 1-4


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


def _run(robot, rate: float, pause: float, push_from: float | None) -> list:
    """Each stop cause the detector raises (t, cause), in order; the stream loses every
    sample stamped in [PAUSE_AT, PAUSE_AT + pause)."""
    forces = ([PointForce('panda_link5', np.zeros(3), PUSH, push_from, 10.0)]
              if push_from is not None else [])
    sim = SimulatedCobot(robot, make_trajectory(robot, {'type': 'smooth_random', 'seed': 3}),
                         Scenario(forces=forces))
    conditioner = JointStateConditioner.for_robot(robot)
    residual = make_residual('momentum_observer', robot, friction_model='continuous',
                             friction_params=sim.config.friction)
    detector = CollisionDetector(DetectorConfig.build(robot.joint_names,
                                                      thresholds_position=[THRESHOLD]))
    every = max(1, round(1.0 / (rate * sim.dt)))
    stops, cause = [], ''
    end = PAUSE_AT + pause + 0.5
    for k in range(int(end / sim.dt)):
        sim.step()
        t = sim.time
        if k % every or PAUSE_AT <= t < PAUSE_AT + pause:
            continue
        result = conditioner.condition(t, robot.joint_names, *sim.joint_state(), now=t + 1e-3)
        if result.sample is None:
            continue
        sample = result.sample
        tau_ext = residual.update(sample.t, sample.q, sample.v, sample.tau)
        state = detector.update(t, tau_ext, sample.v, stamp=t)
        if state.stop and state.cause not in (cause, 'waiting'):
            stops.append((t, state.cause))
        cause = state.cause if state.stop else ''
    return stops


@pytest.mark.parametrize('rate', [1000.0, 100.0])
@pytest.mark.parametrize('pause', [0.02, 0.05, 0.1, 0.3])
def test_a_pause_in_free_motion_raises_no_collision(panda, rate, pause):
    stops = _run(panda, rate, pause, push_from=None)
    assert all(cause != COLLISION for _, cause in stops), stops


@pytest.mark.parametrize('rate', [1000.0, 100.0])
@pytest.mark.parametrize('pause', [0.05, 0.3])
def test_a_contact_across_a_pause_is_seen_after_it(panda, rate, pause):
    # The push starts 5 ms before the pause: too little for eq. 7's persistence.
    stops = _run(panda, rate, pause, push_from=PAUSE_AT - 0.005)
    collisions = [t for t, cause in stops if cause == COLLISION]
    assert collisions and collisions[0] >= PAUSE_AT + pause, stops
