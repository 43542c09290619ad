"""Seed 000 carried to the Panda: link, point and force of one contact from τ_ext = J(p)ᵀF.

Contacts are built forwards on exposed surface points (not under another link) of a finer
sampling than the localizer's own, with the force inside the friction cone and τ from the
robot model; the localizer must give them back, say when it cannot, and use the cloud.
"""
import numpy as np
import pytest

from contact_estimation.core.contact.contact import (SOURCE_LIDAR_FALLBACK, SOURCE_NONE,
                                                      SOURCE_TORQUE, SOURCE_TORQUE_LIDAR)
from contact_estimation.core.contact.contact_localization import (ContactLocalizer,
                                                                   LocalizationError,
                                                                   LocalizerConfig)
from contact_estimation.core.contact.lidar_fusion import LinkProximity
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.settings import SettingError

MU = 0.5


@pytest.fixture(scope='module')
def localizer(robot):
    """Exact torques: δ_w only covers the point's last fractions of a millimetre."""
    return ContactLocalizer(LinkSurfaces(robot, point_spacing=0.02),
                            LocalizerConfig(mu=MU, delta_tau=1e-3, delta_w=0.01))


def inward_force(rng, inward, magnitude, mu=MU):
    """A force of `magnitude` within 90 % of the cone's half-angle around `inward`."""
    helper = np.array([1.0, 0, 0]) if abs(inward[0]) < 0.9 else np.array([0, 1.0, 0])
    first = np.cross(inward, helper)
    first /= np.linalg.norm(first)
    second = np.cross(inward, first)
    tilt, turn = rng.uniform(0, 0.9 * np.arctan(mu)), rng.uniform(0, 2 * np.pi)
    return magnitude * (np.cos(tilt) * inward + np.sin(tilt) * (np.cos(turn) * first
                                                                 + np.sin(turn) * second))


def exposed_contact(robot, truth, rng, link):
    """(q, point, force, τ): a random exposed point of `link`, a 10-60 N push in the cone,
    point and force in the link frame."""
    while True:
        q = robot.random_configuration(rng, 1)[0]
        points, normals = truth.surface_points(link)
        i = rng.integers(len(points))
        rotation, origin = robot.link_pose(q, link)
        outside = rotation @ (points[i] + 0.004 * normals[i]) + origin
        hit = truth.closest_points(q, outside[None])
        if truth.link_names(hit.link)[0] == link and hit.distance[0] > 0.003:
            break
    force = inward_force(rng, -normals[i], rng.uniform(10, 60))
    tau = robot.point_jacobian(q, link, points[i]).T @ (rotation @ force)
    return q, points[i], force, tau


def test_recovers_contacts_on_the_wrist_links(robot, truth, localizer):
    """Links 5-7 load at least 5 joints: 5 equations for 2 surface coordinates and 3 force
    components, so the torques alone fix the contact (up to the rare second entry of a
    concave link, which must then be among the candidates' links)."""
    rng = np.random.default_rng(3)
    right = 0
    cases = 24
    for k in range(cases):
        link = f'panda_link{5 + k % 3}'
        q, point, force, tau = exposed_contact(robot, truth, rng, link)
        estimate = localizer.estimate(q, tau)
        assert estimate.consistent and estimate.source == SOURCE_TORQUE
        assert estimate.residual <= localizer.delta_w
        found = estimate.contact
        if (found.link == link and np.linalg.norm(found.point - point) < 0.003
                and np.linalg.norm(found.force - force) < 0.01 * np.linalg.norm(force)):
            right += 1
        rotation, origin = robot.link_pose(q, found.link)
        np.testing.assert_allclose(found.point_base, rotation @ found.point + origin)
        np.testing.assert_allclose(found.force_base, rotation @ found.force)
        first, last = (int(name[-1]) for name in estimate.link_range)
        assert first <= int(link[-1]) <= last
    assert right >= 0.9 * cases


def test_ambiguity_is_reported_and_the_cloud_resolves_it(robot, truth):
    """Link 3 loads 3 joints: many points explain τ; an obstacle seen next to the true point
    picks the link and, with it, the point."""
    surfaces = LinkSurfaces(robot, point_spacing=0.02)
    localizer = ContactLocalizer(surfaces, LocalizerConfig(mu=MU, delta_tau=0.05, delta_w=0.3))
    rng = np.random.default_rng(5)
    q, point, force, tau = exposed_contact(robot, truth, rng, 'panda_link3')
    alone = localizer.estimate(q, tau)
    assert len(alone.candidates) > 5 and len(set(alone.candidate_links)) >= 2

    distance = np.full(len(surfaces.links), np.inf)
    surface_point = np.zeros((len(surfaces.links), 3))
    index = surfaces.link_index('panda_link3')
    distance[index], surface_point[index] = 0.03, point
    rotation, origin = robot.link_pose(q, 'panda_link3')
    seen = LinkProximity(distance, surface_point,
                         np.tile(rotation @ point + origin, (len(distance), 1)))
    fused = localizer.estimate(q, tau, seen)
    assert fused.contact.link == 'panda_link3' and fused.source == SOURCE_TORQUE_LIDAR
    assert np.linalg.norm(fused.contact.point - point) < 0.01
    assert np.linalg.norm(fused.contact.force - force) < 0.05 * np.linalg.norm(force)


def test_a_couple_is_no_point_contact_unless_the_cloud_gives_the_point(robot, truth, localizer):
    """A pure moment on link 6 (a twist, no force) has no line of action: no point explains
    it. With an obstacle seen at link 6, the point is the cloud's (seed 000's fallback)."""
    q = np.array([0.2, -0.4, 0.1, -2.0, 0.3, 1.6, 0.5])
    jacobian = robot.jacobian(q, 'panda_link6')
    tau = jacobian[3:].T @ np.array([0.0, 3.0, 2.0])
    alone = localizer.estimate(q, tau)
    assert not alone.found and not alone.consistent and alone.source == SOURCE_NONE
    assert 'inconsistent with one point contact' in alone.message

    surfaces = localizer.surfaces
    point = truth.surface_points('panda_link6')[0][0]
    distance = np.full(len(surfaces.links), np.inf)
    surface_point = np.zeros((len(surfaces.links), 3))
    distance[surfaces.link_index('panda_link6')] = 0.02
    surface_point[surfaces.link_index('panda_link6')] = point
    fallback = localizer.estimate(q, tau, LinkProximity(distance, surface_point, surface_point))
    assert fallback.contact.link == 'panda_link6' and fallback.source == SOURCE_LIDAR_FALLBACK
    np.testing.assert_allclose(fallback.contact.point, point)
    assert not fallback.consistent


def test_two_contacts_are_flagged_inconsistent(robot, truth, localizer):
    rng = np.random.default_rng(2)
    q, _, _, tau3 = exposed_contact(robot, truth, rng, 'panda_link3')
    point, normal = truth.surface_points('panda_link7')
    rotation, _ = robot.link_pose(q, 'panda_link7')
    tau7 = robot.point_jacobian(q, 'panda_link7', point[0]).T @ (rotation @ (-40 * normal[0]))
    estimate = localizer.estimate(q, tau3 + tau7)
    assert not estimate.consistent and not estimate.found


def test_bad_input_is_a_clear_error(localizer):
    with pytest.raises(LocalizationError, match='7 joint torques'):
        localizer.estimate(np.zeros(7), np.zeros(6))
    assert localizer.estimate(np.zeros(7), np.zeros(7)).source == SOURCE_NONE
    with pytest.raises(SettingError, match='delta_w = 0: 0 outside'):
        ContactLocalizer(localizer.surfaces, LocalizerConfig(delta_w=0))
