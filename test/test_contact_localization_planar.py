"""Seed 000's planar method on urdf/planar_4link.urdf, against contacts with known answers.

Each case is built forwards: a link, a point on its 16-edge contour Ω_k, a force in the
friction cone around the inward normal there, τ = J(p)ᵀF from the robot model (pinocchio,
not the method's eq. 5), then the method must give them back.
"""
import os
import sys

import numpy as np
import pytest

from contact_estimation.core.contact.contact import (SOURCE_LIDAR_FALLBACK, SOURCE_NONE,
                                                      SOURCE_TORQUE, SOURCE_TORQUE_LIDAR)
from contact_estimation.core.contact.contact_localization import LocalizationError
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces

# The seed-000 planar reproduction lives beside its benchmark, not in the package.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'benchmarks'))
from planar_localization import PlanarLocalizer, contour_candidates, solve_planar  # noqa: E402

PLANAR = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'planar_4link.urdf')
MU = 0.5


@pytest.fixture(scope='module')
def surfaces():
    return LinkSurfaces(RobotModel.load(PLANAR))


@pytest.fixture(scope='module')
def localizer(surfaces):
    """Exact data: tolerances at round-off level."""
    return PlanarLocalizer(surfaces, mu=MU, delta_tau=1e-6, delta_w=1e-6)


def contour(localizer, link):
    return localizer.surfaces.planar_contour(link)


def contact(localizer, q, link, edge, along, angle, magnitude=100.0):
    """Point on `edge` of the link's contour (link frame), force at `angle` from the inward
    normal (link frame), and τ = J(p)ᵀF."""
    robot = localizer.robot
    vertices, normals = contour(localizer, link)
    start, end = vertices[edge], vertices[(edge + 1) % len(vertices)]
    point = np.r_[start + along * (end - start), 0.0]
    inward = -normals[edge]
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    force = np.r_[magnitude * turn @ inward, 0.0]
    rotation, _ = robot.link_pose(q, link)
    tau = robot.point_jacobian(q, link, point).T @ (rotation @ force)
    return point, force, tau


def random_contacts(localizer, rng, links, count):
    cone = np.arctan(MU)
    for _ in range(count):
        q = localizer.robot.random_configuration(rng, 1)[0]
        link = links[rng.integers(len(links))]
        yield (q, link) + contact(localizer, q, link, rng.integers(16), rng.uniform(0.05, 0.95),
                                  rng.uniform(-0.95, 0.95) * cone)


def test_recovers_link_point_and_force_on_links_3_and_4(localizer):
    for q, link, point, force, tau in random_contacts(localizer, np.random.default_rng(0),
                                                      ['link3', 'link4'], 50):
        estimate = localizer.estimate(q, tau)
        assert estimate.contact.link == link
        assert estimate.source == SOURCE_TORQUE and estimate.consistent
        np.testing.assert_allclose(estimate.contact.point, point, atol=1e-9)
        np.testing.assert_allclose(estimate.contact.force, force, atol=1e-7)
        rotation, origin = localizer.robot.link_pose(q, link)
        np.testing.assert_allclose(estimate.contact.point_base, rotation @ point + origin,
                                   atol=1e-9)
        np.testing.assert_allclose(estimate.contact.force_base, rotation @ force, atol=1e-7)
        assert estimate.residual < 1e-9
        assert estimate.link_range == (link, link)


def test_batch_matches_single_calls(localizer):
    cases = list(random_contacts(localizer, np.random.default_rng(1), ['link3', 'link4'], 20))
    geometry = [localizer.geometry(q) for q, *_ in cases]
    batch = solve_planar(np.array([g[0] for g in geometry]), np.array([c[4] for c in cases]),
                         np.array([g[1] for g in geometry]), np.array([g[2] for g in geometry]),
                         MU, 1e-6, 1e-6)
    for i, (q, link, point, force, tau) in enumerate(cases):
        single = localizer.solve(q, tau)
        np.testing.assert_allclose(batch.point[i], single.point[0], atol=1e-12)
        np.testing.assert_allclose(batch.force[i], single.force[0], atol=1e-9)
        assert batch.link[i] == single.link[0] == localizer.robot.joint_links.index(link)


def line_through_joint(localizer, q, link):
    """A push on the far end of `link` along its axis, back towards its own joint (τ_k = 0,
    the seed's Fig. 3): the point where the link's x axis leaves its contour."""
    vertices, normals = contour(localizer, link)
    ahead = np.flatnonzero(vertices[:, 0] > 0)
    following = (ahead + 1) % len(vertices)
    edge = ahead[(vertices[ahead, 1] <= 0) & (vertices[following, 1] > 0)][0]
    start, end = vertices[edge], vertices[(edge + 1) % len(vertices)]
    point = np.r_[start + start[1] / (start[1] - end[1]) * (end - start), 0.0]
    force = -100.0 * point / np.linalg.norm(point)
    rotation, _ = localizer.robot.link_pose(q, link)
    tau = localizer.robot.point_jacobian(q, link, point).T @ (rotation @ force)
    return point, force, tau


def test_force_through_a_joint_gives_a_link_range_the_sensor_resolves(localizer):
    q = np.array([0.3, -0.6, 0.8, 0.5])
    point, force, tau = line_through_joint(localizer, q, 'link4')
    assert abs(tau[3]) < 1e-9                       # eq. 4 alone would say link 3
    torque_only = localizer.estimate(q, tau)
    assert torque_only.link_range == ('link3', 'link4')
    assert {'link3', 'link4'} <= set(torque_only.candidate_links)

    rotation, origin = localizer.robot.link_pose(q, 'link4')
    outward = rotation @ np.array([1.0, 0.0, 0.0])
    obstacle = rotation @ point + origin + 0.02 * outward   # 2 cm beyond the contact
    fused = localizer.estimate(q, tau, obstacle)
    assert fused.contact.link == 'link4' and fused.source == SOURCE_TORQUE_LIDAR
    np.testing.assert_allclose(fused.contact.point, point, atol=1e-9)
    np.testing.assert_allclose(fused.contact.force, force, atol=1e-7)


def test_no_intersection_falls_back_to_the_sensor_point(localizer):
    """A pull (force outside the cone) meets no contour within the cone: no solution from the
    torques; with the sensor, its point and the force of eq. 10."""
    q = np.array([0.2, 0.5, -0.4, 0.9])
    point, force, tau = contact(localizer, q, 'link4', 3, 0.5, np.pi)   # pulls outwards
    alone = localizer.estimate(q, tau)
    assert not alone.found and alone.source == SOURCE_NONE and not alone.consistent
    assert alone.message
    rotation, origin = localizer.robot.link_pose(q, 'link4')
    obstacle = rotation @ point + origin
    fused = localizer.estimate(q, tau, obstacle)
    assert fused.contact.link == 'link4' and fused.source == SOURCE_LIDAR_FALLBACK
    np.testing.assert_allclose(fused.contact.point, point, atol=1e-6)
    np.testing.assert_allclose(fused.contact.force, force, atol=1e-6)


def test_contact_on_link_2_needs_the_sensor(localizer):
    """k = 2 < 3 joints: eq. 10 cannot give the force (statement 2); with the sensor's point the
    force comes from eq. 3 at that point."""
    q = np.array([0.4, 0.7, -1.0, 0.6])
    point, force, tau = contact(localizer, q, 'link2', 2, 0.4, 0.2)
    rotation, origin = localizer.robot.link_pose(q, 'link2')
    fused = localizer.estimate(q, tau, rotation @ point + origin)
    assert fused.contact.link == 'link2' and fused.source == SOURCE_LIDAR_FALLBACK
    np.testing.assert_allclose(fused.contact.point, point, atol=1e-6)
    np.testing.assert_allclose(fused.contact.force, force, atol=1e-6)
    assert fused.link_range[0] == 'link2'


def test_noise_tolerances_set_the_link_range(localizer, surfaces):
    q = np.array([0.1, 0.3, 0.5, -0.7])
    _, _, tau = contact(localizer, q, 'link3', 1, 0.5, 0.1)
    noisy = tau + np.array([0.0, 0.0, 0.0, 0.3])            # joint 4 reads 0.3 N·m of noise
    assert localizer.estimate(q, noisy).link_range[0] == 'link4'
    tolerant = PlanarLocalizer(surfaces, mu=MU, delta_tau=0.5, delta_w=1.0)
    estimate = tolerant.estimate(q, noisy)
    assert estimate.link_range[0] == 'link3'                # 0.3 < δ_τ: joint 4 is not loaded
    assert estimate.contact.link == 'link3'


def test_a_force_the_noise_tipped_out_of_the_cone_keeps_its_point(surfaces):
    """A force 0.01 rad beyond the cone's edge (as torque noise tips one drawn at the edge):
    exact data refuses it, a localizer told of 0.5 N·m noise (σ_θ ≈ 0.03 rad here) keeps the
    crossing, exactly."""
    strict = PlanarLocalizer(surfaces, mu=MU, delta_tau=1e-6, delta_w=1e-6)
    noisy = PlanarLocalizer(surfaces, mu=MU, delta_tau=1e-6, delta_w=1e-6, torque_noise=0.5)
    q = np.array([0.3, -0.9, 1.1, 0.7])
    point, force, tau = contact(strict, q, 'link4', 0, 0.5, np.arctan(MU) + 0.01)
    assert not strict.estimate(q, tau).found
    estimate = noisy.estimate(q, tau)
    assert estimate.contact.link == 'link4' and estimate.source == SOURCE_TORQUE
    np.testing.assert_allclose(estimate.contact.point, point, atol=1e-9)
    np.testing.assert_allclose(estimate.contact.force, force, atol=1e-7)


def test_a_line_missing_the_contour_answers_its_nearest_point():
    """Unit square, a 100 N push down (−y) along the line x = 1.001, 1 mm right of it: the
    top edge's answer is its corner (1, 1), 1 mm from the line, and its cost is the miss over
    σ_d squared, σ_d² = gᵀCg: doubling the covariance halves it."""
    square = np.array([[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])
    outward = np.array([[[0.0, -1.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]])
    reference = np.zeros((1, 2))
    wrench = np.array([[0.0, -100.0, 1.001 * -100.0]])    # τ_z = (p − p⁰) × F on the line
    covariance = np.eye(3)[None] * 1e-4
    points, miss, cost = contour_candidates(wrench, covariance, reference, square, outward, MU)
    top = 2
    np.testing.assert_allclose(points[0, top], [1.0, 1.0])
    assert miss[0, top] == pytest.approx(0.001)
    gradient = np.array([-1.0, 1.0, -1.0]) / 100.0         # [−(y − y⁰), x − x⁰, −1]/‖F‖ at (1, 1)
    assert cost[0, top] == pytest.approx(0.001 ** 2 / (gradient @ covariance[0] @ gradient))
    assert np.argmin(cost[0]) == top
    _, _, doubled = contour_candidates(wrench, 2 * covariance, reference, square, outward, MU)
    assert doubled[0, top] == pytest.approx(cost[0, top] / 2)


def test_inconsistent_torques_fall_back_on_a_link_of_the_range(localizer):
    """τ_1 off by 0.01 N·m: joint 4 is loaded (k_min = 4) but no wrench explains all four
    within δ_w (k_max = 3 < k_min); the sensor's fallback stays on link 4, not link 1."""
    q = np.array([0.5, 0.4, -0.8, 0.6])
    point, _, tau = contact(localizer, q, 'link4', 0, 0.5, 0.1)
    rotation, origin = localizer.robot.link_pose(q, 'link4')
    fused = localizer.estimate(q, tau + np.array([0.01, 0.0, 0.0, 0.0]), rotation @ point + origin)
    assert fused.link_range == ('link4', 'link3')
    assert fused.contact.link == 'link4' and not fused.consistent


def test_bad_input_is_a_clear_error(localizer):
    q = np.zeros(4)
    with pytest.raises(LocalizationError, match='4 joint torques'):
        localizer.estimate(q, np.zeros(3))
    with pytest.raises(LocalizationError, match='finite'):
        localizer.estimate(q, np.array([1.0, np.nan, 0.0, 0.0]))
    assert localizer.estimate(q, np.zeros(4)).source == SOURCE_NONE


def test_a_spatial_arm_is_refused():
    with pytest.raises(LocalizationError, match='not a planar arm'):
        PlanarLocalizer(LinkSurfaces(RobotModel.load('ur5')))
