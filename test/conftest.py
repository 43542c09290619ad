"""Shared fixtures: every test that touches ROS gets its own Context on an isolated domain;
the Panda model and a dense sampling of its surfaces for the tests of core methods."""
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
