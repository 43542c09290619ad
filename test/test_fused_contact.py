"""One contact estimate from joint torques, base wrench and lidar at once
(core/contact/fused_contact.py).

Contacts are built forwards on exposed surface points of a finer sampling than the
estimator's own (test_contact_localization_spatial's `exposed_contact`), the force in the
friction cone, the torques τ = J(p)ᵀF and the base wrench [F; p × F] from the robot model;
the estimator must give them back from every set of sensors, say which it used, keep the
truth among its candidates when the data cannot tell, and refuse input it cannot use.
"""
import numpy as np
import pytest
from test_contact_localization_spatial import MU, exposed_contact

from contact_estimation.core.contact.fused_contact import (
    FORCE_TORQUE,
    LIDAR,
    TORQUE,
    PLAUSIBLE_FLOOR,
    PLAUSIBLE_RATIO,
    FusedContactError,
    FusedContactEstimator,
    SensorNoise,
)
from contact_estimation.core.contact.lidar_fusion import LinkProximity
from contact_estimation.core.robot.surfaces import LinkSurfaces

# Near-exact data: the noise levels only cover the mesh's and the refinement's millimetre.
EXACT = SensorNoise(torque=0.02, force=0.02, moment=0.005)
# About what the sim cobot's momentum observers leave (benchmarks/fusion.py).
REAL = SensorNoise(torque=0.1, force=0.2, moment=0.14)


@pytest.fixture(scope='module')
def surfaces(robot):
    return LinkSurfaces(robot, point_spacing=0.02)


@pytest.fixture(scope='module')
def estimator(surfaces):
    return FusedContactEstimator(surfaces, mu=MU, noise=EXACT)


def base_wrench(robot, q, link, point, force):
    """[F; p × F] at the base origin, base frame, of `force` at `point` (link frame)."""
    rotation, origin = robot.link_pose(q, link)
    return np.concatenate([rotation @ force, np.cross(rotation @ point + origin,
                                                      rotation @ force)])


def contacts(robot, truth, seed, links, per_link):
    """(link, q, point, force, τ, wrench) on exposed points of `links`."""
    rng = np.random.default_rng(seed)
    cases = []
    for link in links:
        for _ in range(per_link):
            q, point, force, tau = exposed_contact(robot, truth, rng, link)
            cases.append((link, q, point, force, tau, base_wrench(robot, q, link, point, force)))
    return cases


def assert_recovered(estimate, link, point, force, point_tolerance=0.003,
                     force_tolerance=0.02):
    assert estimate.contact.link == link
    assert np.linalg.norm(estimate.contact.point - point) < point_tolerance
    assert np.linalg.norm(estimate.contact.force - force) < force_tolerance * np.linalg.norm(force)


def test_torques_and_wrench_give_back_every_link(robot, truth, estimator):
    """Links 2-7 with exact torques and base wrench: n + 6 equations for 5 unknowns, so the
    link, the point and the force come back; the base frame agrees with the link frame."""
    for link, q, point, force, tau, wrench in contacts(robot, truth, 11, [
            f'panda_link{k}' for k in range(2, 8)], 4):
        estimate = estimator.estimate(q, tau, wrench)
        assert estimate.sensors == (TORQUE, FORCE_TORQUE) and estimate.source == 'torque+ft'
        assert_recovered(estimate, link, point, force)
        assert estimate.consistent and estimate.equations == robot.n + 6
        rotation, origin = robot.link_pose(q, link)
        found = estimate.contact
        np.testing.assert_allclose(found.point_base, rotation @ found.point + origin, atol=1e-9)
        np.testing.assert_allclose(found.force_base, rotation @ found.force, atol=1e-9)
        assert link in estimate.candidate_links


def test_each_sensor_alone_and_torques_with_lidar(robot, truth, surfaces, estimator):
    """Torques alone fix contacts on the wrist links (5-7 load ≥ 5 joints); the base wrench
    alone fixes the line of action, so the point is where it enters the true link, which is
    among the candidates; a lidar obstacle at the contact picks the link and point the
    torques alone leave open on link 3 (3 joints: the point slides along the line)."""
    for link, q, point, force, tau, wrench in contacts(robot, truth, 12, [
            'panda_link5', 'panda_link6', 'panda_link7'], 3):
        estimate = estimator.estimate(q, tau=tau)
        assert estimate.sensors == (TORQUE,)
        assert_recovered(estimate, link, point, force)

        alone = estimator.estimate(q, wrench=wrench)
        assert alone.sensors == (FORCE_TORQUE,) and alone.equations == 6
        assert link in alone.candidate_links
        on_link = np.array(alone.candidate_links) == link
        rotation, origin = robot.link_pose(q, link)
        assert np.min(np.linalg.norm(alone.candidates[on_link] - (rotation @ point + origin),
                                     axis=1)) < 0.003

    right = 0
    for link, q, point, force, tau, _ in contacts(robot, truth, 13, ['panda_link3'], 6):
        index = surfaces.link_index(link)
        distance = np.full(len(surfaces.links), np.inf)
        distance[index] = 0.0
        seen = np.zeros((len(surfaces.links), 3))
        seen[index] = point
        proximity = LinkProximity(distance, seen, np.zeros_like(seen))
        estimate = estimator.estimate(q, tau, proximity=proximity)
        assert estimate.sensors == (TORQUE, LIDAR)
        right += (estimate.contact.link == link
                  and np.linalg.norm(estimate.contact.point - point) < 0.01)
    assert right >= 5


def test_noise_of_the_sensors(robot, truth, surfaces):
    """With the noise of the sim cobot's observers, the three sensors still find the link in
    most contacts, the point within a centimetre, and keep the truth among the candidates."""
    estimator = FusedContactEstimator(surfaces, mu=MU, noise=REAL)
    rng = np.random.default_rng(14)
    right, among, points = 0, 0, []
    cases = contacts(robot, truth, 15, [f'panda_link{k}' for k in range(2, 8)], 4)
    for link, q, point, force, tau, wrench in cases:
        tau = tau + REAL.torque * rng.standard_normal(robot.n)
        wrench = wrench + np.repeat([REAL.force, REAL.moment], 3) * rng.standard_normal(6)
        estimate = estimator.estimate(q, tau, wrench)
        among += link in estimate.candidate_links
        if estimate.contact.link == link:
            right += 1
            points.append(np.linalg.norm(estimate.contact.point - point))
            assert np.linalg.norm(estimate.contact.force - force) < 0.1 * np.linalg.norm(force)
    assert right >= 0.85 * len(cases) and among >= len(cases) - 1
    assert np.median(points) < 0.01


def test_ambiguity_keeps_the_truth(robot, truth, estimator):
    """The base wrench alone cannot tell the links its line of action enters apart (only the
    friction cone and the normal preference weigh them): where the estimate lists several
    links, the truth's link and point are among the candidates."""
    ambiguous = 0
    for link, q, point, force, _, wrench in contacts(robot, truth, 16, [
            f'panda_link{k}' for k in range(2, 8)], 3):
        estimate = estimator.estimate(q, wrench=wrench)
        if not estimate.ambiguous:
            continue
        ambiguous += 1
        assert link in estimate.candidate_links
        rotation, origin = robot.link_pose(q, link)
        mine = np.array(estimate.candidate_links) == link
        assert np.min(np.linalg.norm(estimate.candidates[mine] - (rotation @ point + origin),
                                     axis=1)) < 0.003
    assert ambiguous >= 2


def test_no_contact_and_bad_input(robot, estimator):
    """Torques under δ_τ and no base force: no contact. Non-finite, absurdly large or
    misshapen input, or neither torques nor wrench, is refused with a clear error."""
    q = np.zeros(robot.n)
    quiet = estimator.estimate(q, np.zeros(robot.n), np.zeros(6))
    assert not quiet.found and quiet.contact is None and 'delta_tau' in quiet.message
    for arguments, words in (((q, np.full(robot.n, np.nan)), 'tau'),
                             ((q, None, np.array([1.0, 0, 0, np.inf, 0, 0])), 'wrench'),
                             ((np.full(robot.n, np.nan), np.ones(robot.n)), 'q'),
                             ((q, np.ones(robot.n + 1)), 'tau'),
                             ((q, np.full(robot.n, 1e200)), 'below'),
                             ((q, None, None), 'torques')):
        with pytest.raises(FusedContactError, match=words):
            estimator.estimate(*arguments)
    proximity = LinkProximity(np.full(3, np.nan), np.zeros((3, 3)), np.zeros((3, 3)))
    with pytest.raises(FusedContactError, match='lidar'):
        estimator.estimate(q, np.ones(robot.n), proximity=proximity)
    with pytest.raises(FusedContactError, match='noise'):
        SensorNoise(torque=0.0)


def estimate_view(estimate):
    """Everything an estimate says, arrays as lists: two estimates are the same if equal."""
    contact = estimate.contact
    return (estimate.source, estimate.consistent, estimate.residual, estimate.chi2,
            estimate.equations, estimate.message, estimate.candidate_links,
            np.asarray(estimate.candidates).tolist(),
            None if contact is None else (contact.link, contact.point.tolist(),
                                          contact.force.tolist(), contact.ambiguous_with))


def test_without_the_wrench_when_it_disagrees_sharing_the_kinematics(robot, truth, surfaces,
                                                                     estimator, monkeypatch):
    """`estimate_or_without_wrench` gives what two `estimate` calls give (with the base
    wrench; without it when that one is inconsistent and the torques alone are consistent),
    exactly, with one kinematics pass per sample: a wrench that lags the torques (a third of
    the contact's, as its compensation at an onset) is left out, the true wrench kept; a
    lidar obstacle on the contact's link changes neither."""
    poses = []
    kinematics = robot.link_kinematics

    def counted(q, links):
        poses.append(q)
        return kinematics(q, links)

    cases = contacts(robot, truth, 17, [f'panda_link{k}' for k in range(2, 8)], 2)
    left_out = []
    for link, q, point, force, tau, wrench in cases:
        distance = np.where(np.array(surfaces.links) == link, 0.0, np.inf)
        seen = np.zeros((len(surfaces.links), 3))
        seen[surfaces.link_index(link)] = point
        for given, proximity in ((wrench, None), (wrench / 3, None),
                                 (wrench / 3, LinkProximity(distance, seen, seen))):
            separate = estimator.estimate(q, tau, given, proximity)
            alone = estimator.estimate(q, tau, None, proximity)
            drop = (not separate.consistent and alone.consistent
                    and np.linalg.norm(alone.contact.force) <= PLAUSIBLE_RATIO
                    * np.linalg.norm(given[:3]) + PLAUSIBLE_FLOOR * estimator.noise.force)
            monkeypatch.setattr(robot, 'link_kinematics', counted)
            poses.clear()
            both, dropped = estimator.estimate_or_without_wrench(q, tau, given, proximity)
            monkeypatch.undo()
            assert len(poses) == 1
            assert dropped == drop
            assert estimate_view(both) == estimate_view(alone if drop else separate)
            left_out.append(dropped)
    assert not any(left_out[::3]) and sum(left_out) >= len(cases)


def test_a_wrench_is_not_left_out_for_a_force_far_beyond_it(surfaces):
    """A sample of the demo (a 3.2 N touch on panda_link5 at its onset, base force 4.8 N):
    with the base wrench the estimate is inconsistent; the torques alone explain it by
    105 N on panda_link4 near a joint's axis, which stopped the arm (power and force
    limit). That estimate is not taken: the base force says the force is far smaller."""
    estimator = FusedContactEstimator(surfaces, mu=0.5, normal_slack=0.15, delta_tau=0.3,
                                      delta_w=0.5, contact_distance=0.1, prior_radius=0.05,
                                      refine=4, noise=SensorNoise(0.1, force=0.3, moment=0.2))
    q = np.array([0.4952137927115982, -0.3750132424566315, 0.36201523539171426,
                  -1.2760917484790728, 0.04853026205637242, 2.112912047115335,
                  -0.41824333507744055])
    tau = np.array([-0.06495877551780288, 1.2980692834353098, 0.15976022190472267,
                    -0.854604258050955, 0.0095121880898322, -0.01988502460799138,
                    -0.01340882214463359])
    wrench = np.array([3.185799879918534, 1.9809793816783678, -2.9659982790140242,
                       -2.203806243452253, 2.9755950532860296, -0.4494714932165952])
    alone = estimator.estimate(q, tau)
    assert alone.consistent and np.linalg.norm(alone.contact.force) > 50.0  # the trap
    estimate, left_out = estimator.estimate_or_without_wrench(q, tau, wrench)
    assert not left_out and not estimate.consistent
    assert estimate.contact.link == 'panda_link5'  # not published (inconsistent), but right
