"""Lidar fusion: sensor pose, crop, self-filter, clusters and the obstacle nearest each link."""
import numpy as np
import pytest

from contact_estimation.core.contact.lidar_fusion import (
    CloudConfig,
    CloudError,
    LidarFusion,
    PoseHistory,
    to_base_frame,
)
from contact_estimation.core.robot.pose import rotation_from_quaternion, rotation_from_rpy
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces

Q = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])


@pytest.fixture(scope='module')
def surfaces():
    return LinkSurfaces(RobotModel.load('panda'), point_spacing=0.01)


def robot_cloud(surfaces, q):
    """The robot's own surface, as a cloud would see it, base frame."""
    points = []
    for link in surfaces.links:
        local, _ = surfaces.surface_points(link)
        rotation, origin = surfaces.robot.link_pose(q, link)
        points.append(local @ rotation.T + origin)
    return np.vstack(points)


def ball(centre, radius, rng, count=400):
    direction = rng.standard_normal((count, 3))
    return centre + radius * direction / np.linalg.norm(direction, axis=1, keepdims=True)


def test_sensor_frame_to_base_frame():
    quarter_turn_about_z = rotation_from_rpy([0.0, 0.0, np.pi / 2])
    moved = to_base_frame(np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]), [0.5, 0.0, 1.0],
                          quarter_turn_about_z)
    np.testing.assert_allclose(moved, [[0.5, 1.0, 1.0], [-1.5, 0.0, 1.0]], atol=1e-12)


def test_a_mounting_is_roll_pitch_yaw_about_fixed_axes_as_in_urdf():
    """R = R_z(yaw) R_y(pitch) R_x(roll): pinocchio's rpyToMatrix, which reads URDF."""
    import pinocchio as pin
    rpy = [0.3, -0.7, 2.0]
    np.testing.assert_allclose(rotation_from_rpy(rpy), pin.rpy.rpyToMatrix(*rpy), atol=1e-12)
    quaternion = [0.0, 0.0, np.sin(np.pi / 4), np.cos(np.pi / 4)]
    np.testing.assert_allclose(rotation_from_quaternion(quaternion),
                               rotation_from_rpy([0.0, 0.0, np.pi / 2]), atol=1e-12)
    for bad in ([0.0, 0.0], [0.0, np.nan, 0.0], [0.0, 0.0, 0.0, 1.0]):
        with pytest.raises(ValueError, match='lidar.rpy takes 3 finite numbers'):
            rotation_from_rpy(bad, 'lidar.rpy')
    with pytest.raises(ValueError, match='quaternion'):
        rotation_from_quaternion([0.0, 0.0, 0.0, 0.0])


def test_obstacle_next_to_a_link_is_found_and_the_robot_dropped(surfaces):
    """A ball 6 cm from link 4's surface, the robot itself, a floor and junk: one cluster is
    left, link 4 is the link nearest it, and its surface point faces the ball."""
    rng = np.random.default_rng(0)
    robot = surfaces.robot
    local, normals = surfaces.surface_points('panda_link4')
    rotation, origin = robot.link_pose(Q, 'panda_link4')
    i = int(np.argmax(local[:, 2]))
    touch = rotation @ local[i] + origin
    outward = rotation @ normals[i]
    radius = 0.05
    obstacle = ball(touch + (0.06 + radius) * outward, radius, rng)
    floor = np.column_stack([rng.uniform(-1, 1, (2000, 2)), np.zeros(2000)])
    junk = np.array([[np.nan, 0, 0], [5.0, 5.0, 5.0]])
    cloud = np.vstack([robot_cloud(surfaces, Q), obstacle, floor, junk])

    fusion = LidarFusion(surfaces, CloudConfig(self_margin=0.02))
    result = fusion.update(10.0, Q, cloud)
    assert len(result.clusters) == 1
    gap = surfaces.closest_points(Q, result.points).distance
    assert gap.min() > 0.02
    proximity = result.proximity
    nearest = surfaces.links[int(np.argmin(proximity.distance))]
    assert nearest == 'panda_link4'
    index = surfaces.link_index('panda_link4')
    assert proximity.distance[index] == pytest.approx(0.06, abs=0.01)
    assert np.linalg.norm(proximity.surface_point[index] - local[i]) < 0.02
    seen = rotation @ proximity.surface_point[index] + origin
    assert np.linalg.norm(proximity.obstacle_point[index] - seen) == pytest.approx(
        proximity.distance[index])


def test_a_robot_alone_leaves_no_obstacle_and_stale_results_are_dropped(surfaces):
    fusion = LidarFusion(surfaces, CloudConfig(self_margin=0.02))
    result = fusion.update(1.0, Q, robot_cloud(surfaces, Q))
    assert len(result.points) == 0 and np.isinf(result.proximity.distance).all()
    assert result.fresh(1.4, max_age=0.5) and result.fresh(0.6, max_age=0.5)
    assert not result.fresh(1.6, max_age=0.5)
    assert not result.fresh(0.4, max_age=0.5), 'stamped in the future by more than max_age'


def test_bad_clouds_are_refused(surfaces):
    fusion = LidarFusion(surfaces, CloudConfig(max_points=1000))
    with pytest.raises(CloudError, match='N×3'):
        fusion.update(0.0, Q, np.zeros((10, 2)))
    with pytest.raises(CloudError, match='max_points'):
        fusion.update(0.0, Q, np.zeros((1001, 3)))
    with pytest.raises(CloudError, match='workspace'):
        CloudConfig(workspace_min=(0, 0, 0), workspace_max=(1, 1, 0))


def test_pose_history_gives_the_pose_nearest_a_stamp_within_its_span():
    history = PoseHistory(span=0.5)
    for k in range(11):
        history.add(0.1 * k, k)
    assert history.at(0.52) == 5 and history.at(1.3) == 10
    assert history.at(0.61) == 6         # kept: within the span of the latest
    assert history.at(0.2) == 5          # 0.2 is older than the span: the nearest kept
    assert history.at(1.6) is None       # nothing within the span


def test_pose_history_is_bounded_by_count_after_a_stamp_in_the_future():
    """Issue 19: a pose stamped in 2038 never aged out, and the history grew without end."""
    history = PoseHistory(span=0.5, max_samples=100)
    history.add(2 ** 31, 'future')
    for k in range(1000):
        history.add(1.0 + k * 1e-3, k)
    assert len(history._samples) == 100 and history.at(1.999) == 999
