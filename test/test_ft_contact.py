"""Seed 004: base F/T wrench compensation and the contact point on the link surfaces."""
import numpy as np
import pytest

from contact_estimation.core.contact.ft_compensation import (MOUNT_ON_ROBOT,
                                                             BaseWrenchCompensator,
                                                             FtContactError,
                                                             MomentumWrenchObserver, SensorMount)
from contact_estimation.core.contact.ft_contact import (FtContactLocator, FtLocatorConfig,
                                                        compatible_wrenches, contacted_joint,
                                                        line_of_action)
from contact_estimation.core.robot.body_surfaces import (SURFACE_MODELS, Ellipsoid,
                                                         EllipsoidSurfaces, make_surfaces)
from contact_estimation.core.chain.derivatives import DerivativeEstimator
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.settings import SettingError
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.scenario import Scenario
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.identification.trajectory import make_trajectory


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


@pytest.fixture(scope='module')
def surfaces(panda):
    return LinkSurfaces(panda)


def _rotation(rng):
    matrix, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return matrix * np.sign(np.linalg.det(matrix))


def test_a_mount_on_robot_sensor_elsewhere_gives_the_same_base_wrench():
    """A force F on the robot at c, read by a sensor turned and shifted, in both conventions."""
    rng = np.random.default_rng(0)
    force, point = rng.normal(size=3) * 20, rng.normal(size=3) * 0.3
    rotation, origin = _rotation(rng), rng.normal(size=3) * 0.1
    # robot on the sensor: F and its moment about the sensor point, in sensor axes
    on_sensor = np.concatenate([rotation.T @ force, rotation.T @ np.cross(point - origin, force)])
    expected = np.concatenate([force, np.cross(point, force)])
    robot_on = SensorMount(rotation=rotation, position=origin)
    mount_on = SensorMount(MOUNT_ON_ROBOT, rotation, origin)
    np.testing.assert_allclose(robot_on.to_base(on_sensor), expected, atol=1e-12)
    np.testing.assert_allclose(mount_on.to_base(-on_sensor), expected, atol=1e-12)
    np.testing.assert_allclose(mount_on.from_base(expected), -on_sensor, atol=1e-12)
    with pytest.raises(FtContactError, match='reports'):
        SensorMount('sideways')
    with pytest.raises(FtContactError, match='finite'):
        robot_on.to_base(np.full(6, np.nan))


def _free_motion(panda, seconds, scenario=None, config=None):
    """(reading, q, q̇, q̈ estimate, true contacts) per step of the sim cobot in motion."""
    trajectory = make_trajectory(panda, {'type': 'smooth_random', 'seed': 3, 'speed_scale': 0.4})
    cobot = SimulatedCobot(panda, trajectory, scenario, config)
    acceleration = DerivativeEstimator(0.04)
    for _ in range(int(seconds / cobot.dt)):
        cobot.step()
        q, v, _ = cobot.joint_state()
        _, a = acceleration.update(cobot.time, q)
        force, torque = cobot.ft_wrench()
        yield np.concatenate([force, torque]), q, v, a, cobot.true_contacts()


def test_compensation_leaves_little_in_free_motion_and_the_dynamic_term_matters(panda):
    """What is left is the sensor noise (0.1 N, 0.01 N·m) and the error of the q̈ estimate."""
    compensator = BaseWrenchCompensator(panda)
    dynamic, static = [], []
    for k, (reading, q, v, a, _) in enumerate(_free_motion(panda, 1.0)):
        if k >= 100:  # the q̈ fit has its window
            dynamic.append(compensator.contact_wrench(reading, q, v, a))
            static.append(compensator.contact_wrench(reading, q))
    dynamic, static = np.array(dynamic), np.array(static)
    rms = np.sqrt(np.mean(dynamic ** 2, axis=0))
    assert rms[:3].max() < 0.5 and rms[3:].max() < 0.4
    assert np.sqrt(np.mean(static[:, :3] ** 2)) > 5 * rms[:3].max()


def test_momentum_observer_needs_no_acceleration_and_follows_a_contact(panda):
    """With the noisier sensor, the observer's wrench in free motion is well below the
    q̈-based compensation's (the reading is averaged over ~1/K s, q̈'s error is gone), and on
    a steady push it settles on the true contact wrench."""
    scenario = Scenario.from_dict({'forces': [
        {'link': 'panda_link4', 'point': [0.0, 0.07, 0.03], 'force': [0.0, -40.0, 0.0],
         'frame': 'link', 'start': 0.3, 'duration': 0.4}]}, panda)
    compensator = BaseWrenchCompensator(panda)
    observer = MomentumWrenchObserver(compensator, 50.0)
    free, with_acceleration, errors = [], [], []
    noisy = SimConfig(ft_force_noise=0.5, ft_torque_noise=0.05)
    for k, (reading, q, v, a, contacts) in enumerate(_free_motion(panda, 0.65, scenario, noisy)):
        wrench = observer.update(k * 0.001, reading, q, v)
        if 100 <= k < 300:
            free.append(wrench)
            with_acceleration.append(compensator.contact_wrench(reading, q, v, a))
        if k * 0.001 > 0.45:
            rotation, origin = panda.link_pose(q, contacts[0].link)
            force = rotation @ contacts[0].force
            point = rotation @ contacts[0].point + origin
            errors.append(wrench - np.concatenate([force, np.cross(point, force)]))
    rms = [np.sqrt(np.mean(np.array(rows) ** 2, axis=0)) for rows in (free, with_acceleration)]
    assert rms[0][:3].max() < 0.5 * rms[1][:3].max() and rms[0][3:].max() < rms[1][3:].max()
    errors = np.abs(errors)
    assert np.median(errors[:, :3]) < 0.5 and np.median(errors[:, 3:]) < 0.2
    # a stamp not after the last restarts it from the weight-only compensation
    again = observer.update(0.0, reading, q, v)
    np.testing.assert_allclose(again, compensator.contact_wrench(reading, q))
    with pytest.raises(FtContactError, match='gain'):
        MomentumWrenchObserver(compensator, 0.0)


def test_base_momentum_changes_at_the_rate_the_base_wrench_leaves_out(panda):
    """d/dt [P; L] = −(base wrench in motion − weight), seed 004's f_Bd, τ_Bd."""
    rng = np.random.default_rng(6)
    q, v, a = panda.random_configuration(rng, 1)[0], rng.normal(size=7), rng.normal(size=7)
    dt = 1e-6

    def momentum(sign):
        return np.concatenate(panda.base_momentum(q + sign * v * dt + 0.5 * a * dt * dt,
                                                  v + sign * a * dt))
    rate = (momentum(1.0) - momentum(-1.0)) / (2 * dt)
    reaction = (np.concatenate(panda.base_wrench(q, v, a))
                - np.concatenate(panda.base_wrench(q, np.zeros(7), np.zeros(7))))
    np.testing.assert_allclose(rate, -reaction, atol=1e-5)


def test_resting_offset_and_payload_are_removed(panda):
    rng = np.random.default_rng(1)
    offset = np.array([3.0, -2.0, 5.0, 0.4, -0.3, 0.2])
    q = panda.random_configuration(rng, 20)
    loaded = panda.with_payload(2.0, [0.0, 0.05, 0.1])
    readings = np.array([np.concatenate(loaded.base_wrench(qk, np.zeros(7), np.zeros(7)))
                         for qk in q]) + offset + rng.normal(0, 0.01, (20, 6))
    compensator = BaseWrenchCompensator(panda, payload=Payload(2.0, (0.0, 0.05, 0.1)))
    np.testing.assert_allclose(compensator.resting_offset(readings, q), offset, atol=0.02)
    bare = BaseWrenchCompensator(panda, offset=offset)
    assert np.linalg.norm(bare.contact_wrench(readings[0], q[0])[:3]) > 15.0  # 2 kg unseen
    with pytest.raises(FtContactError, match='as many'):
        compensator.resting_offset(readings, q[:5])


def test_the_six_subsystems_agree_on_a_consistent_wrench_and_each_fixes_one_equation():
    rng = np.random.default_rng(2)
    force, point = rng.normal(size=3) * 20, rng.normal(size=3) * 0.4
    torque = np.cross(point, force)
    forces, torques = compatible_wrenches(force, torque)
    assert len(forces) == 6
    np.testing.assert_allclose(forces, np.tile(force, (6, 1)), atol=1e-9)
    origin, direction = line_of_action(force, torque)
    assert np.linalg.norm(np.cross(point - origin, direction)) < 1e-12  # point on the line
    noisy = torque + np.array([0.3, -0.2, 0.1])
    forces, torques = compatible_wrenches(force, noisy, singular_ratio=0.0)
    np.testing.assert_allclose(np.einsum('ij,ij->i', forces, torques), 0.0, atol=1e-9)
    changed = (np.abs(np.hstack([forces, torques]) - np.concatenate([force, noisy])) > 1e-12)
    np.testing.assert_array_equal(changed, np.eye(6, dtype=bool))
    # a zero moment component makes its force subsystem singular
    assert len(compatible_wrenches(np.array([1.0, 2.0, 3.0]), np.array([0.0, 3.0, -2.0]))[0]) == 5


def test_contacted_joint_is_the_highest_joint_above_threshold(panda):
    q = panda.random_configuration(np.random.default_rng(3), 1)[0]
    tau = panda.point_jacobian(q, 'panda_link4', [0.05, 0.05, 0.0]).T @ np.array([0, 30.0, 10.0])
    assert contacted_joint(tau, 0.5) == 3
    assert contacted_joint(np.zeros(7), 0.5) is None


def test_ellipsoid_fit_entry_and_closest_point(panda, surfaces):
    rng = np.random.default_rng(4)
    axes = _rotation(rng)
    sphere = rng.normal(size=(500, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    semi, centre = np.array([0.05, 0.08, 0.12]), np.array([0.01, -0.02, 0.03])
    fitted = Ellipsoid.fit((sphere * semi) @ axes.T + centre)
    np.testing.assert_allclose(fitted.centre, centre, atol=1e-9)
    np.testing.assert_allclose(np.sort(fitted.semi_axes), semi, atol=1e-9)

    model = EllipsoidSurfaces(surfaces, {'panda_link3': Ellipsoid(centre, axes, semi)})
    # panda_link3 is the body frame of joint 2: lines through the ellipsoid from outside
    target = (sphere[:20] * semi) @ axes.T + centre
    normals = (sphere[:20] / semi) @ axes.T
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    directions = -normals + 0.3 * rng.normal(size=(20, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    points, link, outward = (part[0] for part in model.first_entry(
        [2], (target + 0.5 * directions)[None], directions[None]))
    np.testing.assert_allclose(points, target, atol=1e-9)
    np.testing.assert_allclose(outward, normals, atol=1e-9)
    assert (link == 0).all()
    # closest point: nearer than every one of many surface samples, on the surface
    queries = centre + rng.normal(size=(10, 3)) * 0.1
    nearest, _, distance = model.closest(2, queries)
    dense = rng.normal(size=(20000, 3))
    dense = (dense / np.linalg.norm(dense, axis=1, keepdims=True) * semi) @ axes.T + centre
    brute = np.linalg.norm(queries[:, None] - dense[None], axis=2).min(axis=1)
    assert (distance <= brute + 1e-6).all() and (distance > brute - 2e-3).all()
    on_surface = np.linalg.norm(((nearest - centre) @ axes) / semi, axis=1)
    np.testing.assert_allclose(on_surface, 1.0, atol=1e-6)


@pytest.mark.parametrize('kind', SURFACE_MODELS)
def test_one_cast_for_all_bodies_finds_what_each_body_alone_finds(surfaces, kind):
    """Lines aimed at every body's surface, each cast into every body at once: each body's
    entries are those it gives alone, lie on its own surface, and a line aimed at it enters."""
    model = make_surfaces(kind, surfaces)
    rng = np.random.default_rng(8)
    targets = rng.uniform(-0.15, 0.15, size=(12, 3))
    directions = rng.normal(size=(12, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    joints = list(model.joints)
    origins = np.repeat((targets - 0.5 * directions)[None], len(joints), axis=0)
    headings = np.repeat(directions[None], len(joints), axis=0)
    points, links, normals = model.first_entry(joints, origins, headings)
    for b, joint in enumerate(joints):
        alone = model.first_entry([joint], origins[b:b + 1], headings[b:b + 1])
        np.testing.assert_allclose(points[b], alone[0][0], atol=1e-6)
        np.testing.assert_array_equal(links[b], alone[1][0])
        hit = np.isfinite(points[b, :, 0])
        np.testing.assert_allclose(normals[b][hit], alone[2][0][hit], atol=1e-6)
        assert (links[b][hit] >= 0).all() and (links[b][~hit] == -1).all()
        _, _, distance = model.closest(joint, points[b][hit])
        assert (distance < 1e-4).all()
    # a line through a point of a body's surface enters that body (the point may be on an
    # edge of the mesh, where a line can slip past in float32: most, not all)
    for joint in joints:
        on_surface, _, _ = model.closest(joint, targets)
        aimed, _, _ = model.first_entry([joint], on_surface[None], directions[None])
        assert np.isfinite(aimed[0, :, 0]).mean() >= 0.75


@pytest.mark.parametrize('kind, tolerance', [('mesh', 0.002), ('ellipsoid', 0.05)])
def test_exact_wrench_gives_the_contact_point_on_a_convex_link(panda, surfaces, kind, tolerance):
    """Forces within 30° of the inward normal on the links 1–6 (joint 7's body, hand and
    fingers, is not convex: a line can enter it twice, see the README)."""
    locator = FtContactLocator(make_surfaces(kind, surfaces))
    rng = np.random.default_rng(5)
    errors = []
    for _ in range(60):
        q = panda.random_configuration(rng, 1)[0]
        link = f'panda_link{rng.integers(1, 7)}'
        points, normals = surfaces.surface_points(link)
        i = rng.integers(len(points))
        rotation, origin = panda.link_pose(q, link)
        point, normal = rotation @ points[i] + origin, rotation @ normals[i]
        direction = -normal + 0.3 * rng.normal(size=3)
        force = 25.0 * direction / np.linalg.norm(direction)
        if force @ normal > -0.85 * 25.0:
            continue
        estimate = locator.locate(q, np.concatenate([force, np.cross(point, force)]),
                                  panda.link_joint[link])
        assert estimate.link == link
        tau_ext = panda.point_jacobian(q, link, points[i]).T @ force
        carried = panda.link_joint[link] + 1  # the joints the contact loads
        np.testing.assert_allclose(locator.line_torques(
            q, np.concatenate([force, np.cross(point, force)]))[:carried], tau_ext[:carried],
            atol=1e-9)
        if np.abs(tau_ext).max() > 0.3:  # else the residual does not see it: None
            assert locator.locate_from_residual(
                q, np.concatenate([force, np.cross(point, force)]), tau_ext, 0.3).link == link
        np.testing.assert_allclose(rotation @ estimate.force, force, atol=1e-9)
        np.testing.assert_allclose(rotation @ estimate.point + origin, estimate.point_base,
                                   atol=1e-9)
        errors.append(np.linalg.norm(estimate.point_base - point))
    assert len(errors) > 20 and np.median(errors) < tolerance
    assert locator.locate(np.zeros(7), np.zeros(6), 3) is None  # no force, no estimate


def test_bodies_that_explain_the_wrench_about_as_well_are_candidates(panda, surfaces):
    """A push whose line of action enters several bodies: with a wide ambiguity margin every
    body entered is ambiguous with the chosen one (its link where the line enters), with none
    none is; the estimate itself does not change."""
    model = make_surfaces('mesh', surfaces)
    rng = np.random.default_rng(2)
    while True:
        q = panda.random_configuration(rng, 1)[0]
        link = f'panda_link{rng.integers(2, 7)}'
        points, normals = surfaces.surface_points(link)
        i = rng.integers(len(points))
        rotation, origin = panda.link_pose(q, link)
        force = -25.0 * rotation @ normals[i]
        wrench = np.concatenate([force, np.cross(rotation @ points[i] + origin, force)])
        line = line_of_action(force, wrench[3:])
        entered = []
        for joint in model.joints:
            body_rotation, body_position = panda.link_pose(q, panda.joint_links[joint])
            start = (line[0] - body_position) @ body_rotation
            entry, _, _ = model.first_entry([joint], start[None, None],
                                            (line[1] @ body_rotation)[None, None])
            entered += [joint] if np.isfinite(entry[0, 0, 0]) else []
        if len(entered) >= 2:
            break
    tau_ext = panda.point_jacobian(q, link, points[i]).T @ force
    every = FtContactLocator(model, FtLocatorConfig(ambiguity_margin=100.0)
                             ).locate_from_residual(q, wrench, tau_ext, 0.3)
    one = FtContactLocator(model, FtLocatorConfig(ambiguity_margin=0.0)
                           ).locate_from_residual(q, wrench, tau_ext, 0.3)
    assert one.ambiguous_with == () and every.link == one.link
    np.testing.assert_allclose(every.point_base, one.point_base)
    assert len(every.ambiguous_with) == len(entered) - 1
    assert sorted(panda.link_joint[c] for c in (every.link, *every.ambiguous_with)) == entered
    with pytest.raises(SettingError, match='ambiguity_margin'):
        FtContactLocator(model, FtLocatorConfig(ambiguity_margin=-1.0))


def test_a_push_the_joints_hardly_feel_is_found_by_its_force(panda, surfaces):
    """A push on panda_link1 towards joint 1's axis loads no joint: the sensor's force alone
    says a contact is present, from `presence_force` on."""
    locator = FtContactLocator(make_surfaces('mesh', surfaces),
                               FtLocatorConfig(presence_force=10.0))
    q = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])
    points, normals = surfaces.surface_points('panda_link1')
    rotation, origin = panda.link_pose(q, 'panda_link1')
    axis = rotation[:, 2]
    # a sample on the side of the link, its normal square to joint 1's axis
    side = np.flatnonzero(np.abs(normals @ rotation.T @ axis) < 0.1)[0]
    point = rotation @ points[side] + origin
    for strength, found in ((30.0, True), (8.0, False)):
        force = -strength * rotation @ normals[side]
        # its line passes near the axis: a small moment about it, nothing on the other joints
        tau_ext = panda.point_jacobian(q, 'panda_link1', points[side]).T @ force
        assert np.abs(tau_ext).max() < 0.5
        estimate = locator.locate_from_residual(
            q, np.concatenate([force, np.cross(point, force)]), tau_ext, 0.5)
        assert (estimate is not None) == found
        if found:
            assert estimate.link == 'panda_link1'
            assert np.linalg.norm(estimate.point_base - point) < 0.01
    with pytest.raises(FtContactError, match='presence_force'):
        FtContactLocator(locator.model, FtLocatorConfig(min_force=5.0, presence_force=2.0))


def test_contact_in_the_simulation_is_found_on_its_link(panda, surfaces):
    """The sim cobot's base sensor with a push on panda_link4 during free motion, once the
    jerk of the push's ramp is out of the q̈ estimate (its 40 ms window)."""
    scenario = Scenario.from_dict({'forces': [
        {'link': 'panda_link4', 'point': [0.0, 0.07, 0.03], 'force': [0.0, -40.0, 0.0],
         'frame': 'link', 'start': 0.3, 'duration': 0.4}]}, panda)
    # the point on the link's surface, nearest to the scripted one
    compensator = BaseWrenchCompensator(panda)
    locator = FtContactLocator(make_surfaces('mesh', surfaces))
    found = []
    for k, (reading, q, v, a, contacts) in enumerate(_free_motion(panda, 0.65, scenario)):
        if k * 0.001 > 0.45:
            estimate = locator.locate(q, compensator.contact_wrench(reading, q, v, a), 3)
            found.append((estimate, contacts[0]))
    assert len(found) > 150
    for estimate, truth in found[::20]:
        assert estimate.link == truth.link
        # the scripted point is inside the link: the estimate is where its line of action
        # enters the surface, on the line through the true point along the force
        offset = estimate.point - truth.point
        direction = truth.force / np.linalg.norm(truth.force)
        assert np.linalg.norm(offset - (offset @ direction) * direction) < 0.01
        np.testing.assert_allclose(estimate.force, truth.force, atol=1.5)
