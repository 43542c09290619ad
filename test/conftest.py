"""Shared fixtures: every test that touches ROS gets its own Context on an isolated domain."""
import pytest

from contact_estimation.ros.testing import isolate_ros_domain, ros_context

isolate_ros_domain()


@pytest.fixture
def context():
    with ros_context() as ctx:
        yield ctx
