"""RobotModel kinematics and the base wrench, checked against hand-computed physics."""
import numpy as np
import pinocchio as pin
import pytest

from contact_estimation.core.robot.robot_model import LINK_FRAME, RobotModel, RobotModelError


@pytest.fixture(scope='module', params=['panda', 'ur5'])
def robot(request):
    return RobotModel.load(request.param)


def _bodies(robot: RobotModel, q, v=None):
    """Per moving body, in the base frame: mass, centre of mass, its velocity, and the
    angular momentum about the centre of mass."""
    model, data = robot.model, robot.model.createData()
    v = np.zeros(robot.n) if v is None else v
    pin.forwardKinematics(model, data, robot.configuration(q), v)
    base = model.frames[model.getFrameId(robot.base_link)].placement.inverse()
    out = []
    for j in range(1, model.njoints):
        inertia, pose = model.inertias[j], base * data.oMi[j]
        omega, linear = data.v[j].angular, data.v[j].linear
        out.append((inertia.mass, pose.act(inertia.lever),
                    pose.rotation @ (linear + np.cross(omega, inertia.lever)),
                    pose.rotation @ (inertia.inertia @ omega)))
    return out


def _gravity(robot: RobotModel) -> np.ndarray:
    base = robot.model.frames[robot.model.getFrameId(robot.base_link)].placement
    return base.rotation.T @ robot.model.gravity.linear


def _momentum(robot: RobotModel, q, v) -> np.ndarray:
    """[P; L]: linear momentum and angular momentum about the base origin, base frame."""
    linear, angular = np.zeros(3), np.zeros(3)
    for mass, centre, velocity, spin in _bodies(robot, q, v):
        linear += mass * velocity
        angular += np.cross(centre, mass * velocity) + spin
    return np.concatenate([linear, angular])


def test_jacobian_is_the_velocity_of_the_point_in_either_frame(robot):
    rng = np.random.default_rng(1)
    q, v = robot.random_configuration(rng, 1)[0], rng.normal(size=robot.n)
    link, point = robot.joint_links[-2], np.array([0.03, -0.02, 0.05])
    in_base = robot.jacobian(q, link, point)
    in_link = robot.jacobian(q, link, point, LINK_FRAME)
    rotation, _ = robot.link_pose(q, link)
    np.testing.assert_allclose(in_base, np.vstack([rotation @ in_link[:3], rotation @ in_link[3:]]),
                               atol=1e-12)
    np.testing.assert_allclose(robot.point_jacobian(q, link, point), in_base[:3])

    def position(t):
        r, p = robot.link_pose(q + t * v, link)
        return r @ point + p
    h = 1e-6
    np.testing.assert_allclose(in_base[:3] @ v, (position(h) - position(-h)) / (2 * h), atol=1e-6)
    with pytest.raises(RobotModelError, match='not in the robot model'):
        robot.jacobian(q, 'no_such_link')


def test_link_wrench_torque_refuses_a_link_no_joint_moves(robot):
    with pytest.raises(RobotModelError, match='not moved by any joint'):
        robot.link_wrench_torque(np.zeros(robot.n), robot.base_link, np.ones(3), np.zeros(3))


def test_urdf_joint_names_include_the_joints_outside_the_chain():
    panda = RobotModel.load('panda')
    assert set(panda.joint_names) < set(panda.urdf_joint_names)
    assert {'panda_finger_joint1', 'panda_hand_joint'} <= set(panda.urdf_joint_names)


def test_base_wrench_of_a_resting_arm_is_its_weight_at_its_centre_of_mass(robot):
    rng = np.random.default_rng(2)
    for q in robot.random_configuration(rng, 5):
        bodies = _bodies(robot, q)
        mass = sum(m for m, *_ in bodies)
        centre = sum(m * c for m, c, *_ in bodies) / mass
        weight = mass * _gravity(robot)
        force, torque = robot.base_wrench(q, np.zeros(robot.n), np.zeros(robot.n))
        np.testing.assert_allclose(force, weight, atol=1e-9)
        np.testing.assert_allclose(torque, np.cross(centre, weight), atol=1e-9)
        assert force[2] < -9.0 * mass  # pushes the mount down: the robot on its base


def test_base_wrench_in_motion_is_weight_minus_the_rate_of_momentum(robot):
    """F_base_on_robot + m g = Ṗ and likewise about the base origin, so the robot on its base
    is m g − Ṗ and c × m g − L̇; the momenta differentiated numerically along a motion."""
    rng = np.random.default_rng(3)
    q0 = robot.random_configuration(rng, 1)[0]
    amplitude, rate = rng.uniform(0.3, 0.8, robot.n), rng.uniform(1.0, 3.0, robot.n)

    def state(t):
        return (q0 + amplitude * np.sin(rate * t), amplitude * rate * np.cos(rate * t),
                -amplitude * rate ** 2 * np.sin(rate * t))
    h = 1e-5
    for t in (0.1, 0.7, 1.3):
        q, v, a = state(t)
        rate_of_momentum = (_momentum(robot, *state(t + h)[:2])
                            - _momentum(robot, *state(t - h)[:2])) / (2 * h)
        bodies = _bodies(robot, q)
        mass = sum(m for m, *_ in bodies)
        weight = mass * _gravity(robot)
        centre = sum(m * c for m, c, *_ in bodies) / mass
        force, torque = robot.base_wrench(q, v, a)
        np.testing.assert_allclose(force, weight - rate_of_momentum[:3], atol=1e-4)
        np.testing.assert_allclose(torque, np.cross(centre, weight) - rate_of_momentum[3:],
                                   atol=1e-4)
        assert np.linalg.norm(rate_of_momentum) > 1.0  # the motion matters


def test_payload_adds_its_weight_at_its_centre_of_mass(robot):
    q = robot.random_configuration(np.random.default_rng(4), 1)[0]
    centre = np.array([0.01, 0.02, 0.08])
    loaded = robot.with_payload(1.5, centre)
    still = np.zeros(robot.n)
    rotation, origin = robot.link_pose(q, robot.tip_link)
    weight = 1.5 * _gravity(robot)
    force, torque = loaded.base_wrench(q, still, still)
    bare_force, bare_torque = robot.base_wrench(q, still, still)
    np.testing.assert_allclose(force - bare_force, weight, atol=1e-9)
    np.testing.assert_allclose(torque - bare_torque, np.cross(rotation @ centre + origin, weight),
                               atol=1e-9)
    np.testing.assert_allclose(robot.base_wrench(q, still, still)[0], bare_force)  # unchanged
    with pytest.raises(RobotModelError, match='mass'):
        robot.with_payload(-1.0, centre)


def test_link_kinematics_gives_every_link_from_one_pass(robot):
    """Poses as `link_pose`; Jacobians (link frames) give the origins' velocities and the
    links' angular velocities by finite differences."""
    rng = np.random.default_rng(2)
    q, v = robot.random_configuration(rng, 1)[0], rng.normal(size=robot.n)
    links = robot.joint_links[::-1]
    rotations, origins, jacobians = robot.link_kinematics(q, links)
    assert jacobians.shape == (len(links), 6, robot.n)
    h = 1e-6
    for link, rotation, origin, jacobian in zip(links, rotations, origins, jacobians):
        expected_rotation, expected_origin = robot.link_pose(q, link)
        np.testing.assert_allclose(rotation, expected_rotation, atol=1e-12)
        np.testing.assert_allclose(origin, expected_origin, atol=1e-12)
        (ahead, forward), (behind, backward) = (robot.link_pose(q + h * v, link),
                                                robot.link_pose(q - h * v, link))
        np.testing.assert_allclose(rotation @ jacobian[:3] @ v, (forward - backward) / (2 * h),
                                   atol=1e-6)
        spin = rotation.T @ (ahead - behind) / (2 * h)      # [ω]× in the link frame
        np.testing.assert_allclose(jacobian[3:] @ v, [spin[2, 1], spin[0, 2], spin[1, 0]],
                                   atol=1e-6)
