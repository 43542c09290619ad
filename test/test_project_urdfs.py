"""The project's robot descriptions: the planar arm of seed 000 and the 6R arm of seed 001."""
import os

import numpy as np
import pytest

from contact_estimation.core.robot.robot_model import RobotModel

URDF_DIR = os.path.join(os.path.dirname(__file__), '..', 'urdf')
PLANAR = os.path.join(URDF_DIR, 'planar_4link.urdf')
SPATIAL = os.path.join(URDF_DIR, 'spatial_6r.urdf')


@pytest.fixture(scope='module')
def planar():
    return RobotModel.load(PLANAR)


@pytest.fixture(scope='module')
def spatial():
    return RobotModel.load(SPATIAL)


@pytest.mark.parametrize('path, joints, tip', [(PLANAR, 4, 'tool'), (SPATIAL, 6, 'tool0')])
def test_names_limits_and_inertias(path, joints, tip):
    robot = RobotModel.load(path)
    assert robot.base_link == 'base_link'
    assert robot.joint_names == [f'joint{i}' for i in range(1, joints + 1)]
    assert robot.joint_links == [f'link{i}' for i in range(1, joints + 1)]
    assert robot.link_joint[tip] == joints - 1  # the tool frame rides on the last joint
    lower, upper = robot.position_limits
    assert np.all(np.isfinite(lower)) and np.all(lower < 0) and np.all(upper > 0)
    assert np.all(robot.velocity_limits > 0) and np.all(robot.effort_limits > 0)
    for inertia in robot.model.inertias[1:]:
        assert inertia.mass > 0
        principal = np.linalg.eigvalsh(inertia.inertia)
        assert principal.min() > 0
        assert 2 * principal.max() <= principal.sum() + 1e-12  # triangle inequality


@pytest.mark.parametrize('path', [PLANAR, SPATIAL])
def test_every_link_has_primitive_collision_geometry(path):
    robot = RobotModel.load(path)
    assert robot.geometry_error == ''
    owners = {robot.model.frames[g.parentFrame].name for g in robot.collision_model.geometryObjects}
    assert {'base_link', *robot.joint_links} <= owners
    kinds = {type(g.geometry).__name__ for g in robot.collision_model.geometryObjects}
    assert kinds <= {'Box', 'Cylinder', 'Sphere', 'Capsule'}


def test_planar_arm_moves_in_the_base_xy_plane(planar):
    rng = np.random.default_rng(1)
    for q in planar.random_configuration(rng, 5):
        origins, axes = planar.joint_axes(q)
        np.testing.assert_allclose(np.abs(axes), np.tile([0.0, 0.0, 1.0], (4, 1)), atol=1e-12)
        np.testing.assert_allclose(origins[:, 2], 0.0, atol=1e-12)
        # Gravity is normal to the plane of motion: no joint carries any of it.
        np.testing.assert_allclose(planar.gravity(q), 0.0, atol=1e-9)


def test_planar_jacobian_is_seed_000_eq_5(planar):
    """Column i of J_k is [-(y_p - y_i), x_p - x_i] for joints i ≤ k, zero beyond."""
    rng = np.random.default_rng(2)
    for q in planar.random_configuration(rng, 5):
        origins, _ = planar.joint_axes(q)
        for k, link in enumerate(planar.joint_links):
            local = rng.uniform([-0.05, -0.06, -0.05], [0.45, 0.06, 0.05])
            rotation, position = planar.link_pose(q, link)
            p = rotation @ local + position
            expected = np.zeros((3, planar.n))
            expected[0, :k + 1] = -(p[1] - origins[:k + 1, 1])
            expected[1, :k + 1] = p[0] - origins[:k + 1, 0]
            np.testing.assert_allclose(planar.point_jacobian(q, link, local), expected, atol=1e-12)


def test_spatial_arm_has_seed_001_gravity_structure(spatial):
    """Joint 1 is vertical (no gravity torque); gravity depends on q2..q5 only (eqs. 19-21)."""
    rng = np.random.default_rng(3)
    total_mass = sum(inertia.mass for inertia in spatial.model.inertias[1:])
    assert 20.0 <= total_mass <= 30.0
    torques = []
    for q in spatial.random_configuration(rng, 20):
        g = spatial.gravity(q)
        assert abs(g[0]) < 1e-9
        moved = q.copy()
        moved[[0, 5]] = rng.uniform(-np.pi, np.pi, 2)
        np.testing.assert_allclose(spatial.gravity(moved), g, atol=1e-9)
        torques.append(g)
    # Centres of mass off the axes: joints 2-5 all feel gravity somewhere in the workspace.
    assert np.all(np.abs(np.array(torques))[:, 1:5].max(axis=0) > 0.01)


def test_spatial_arm_joint_axes(spatial):
    origins, axes = spatial.joint_axes(np.zeros(spatial.n))
    gravity = np.asarray(spatial.model.gravity.linear)
    assert abs(abs(axes[0] @ gravity) - np.linalg.norm(gravity)) < 1e-9  # joint 1 ∥ gravity
    np.testing.assert_allclose(np.cross(axes[1], axes[2]), 0.0, atol=1e-12)  # shoulder ∥ elbow
    assert abs(axes[1] @ gravity) < 1e-9  # ... and horizontal
    for a, b in ((3, 4), (4, 5)):  # roll-pitch-roll wrist
        assert abs(axes[a] @ axes[b]) < 1e-12
