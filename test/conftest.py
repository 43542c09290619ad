"""Shared fixtures: every test that touches ROS gets its own Context on an isolated domain;
the Panda model and a dense sampling of its surfaces for the tests of core methods; the
Panda standing still, for the tests that drive the chain."""
import numpy as np
import pytest

from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.ros.testing import isolate_ros_domain, ros_context

isolate_ros_domain()


@pytest.fixture
def context():
    with ros_context() as ctx:
        yield ctx


@pytest.fixture(scope='module')
def robot():
    """The Panda of example-robot-data (a test module may define its own `robot`)."""
    return RobotModel.load('panda')


@pytest.fixture(scope='module')
def truth(robot):
    """A denser, differently seeded sampling: contact points the estimators never saw."""
    return LinkSurfaces(robot, point_spacing=0.005, seed=7)


@pytest.fixture(scope='module')
def standing():
    """(names, q, τ) of the Panda standing still, held against gravity: τ_ext ≈ 0 (a test
    module may define its own `standing`)."""
    robot = RobotModel.load('panda')
    q = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8])
    still = np.zeros(robot.n)
    return list(robot.joint_names), q, robot.rnea(q, still, still)
