"""Proximity monitor (seed 002): known geometry, protective distance, per-part signals,
fail-safe."""
import contextlib
import os
from dataclasses import replace

import numpy as np
import open3d as o3d
import pytest

from contact_estimation.core.contact.proximity import (
    CLUSTERS, COCO_17, HANDS, SKELETON, HumanModel, ProximityConfig, ProximityConfigError,
    ProximityMonitor, SegmentPart, cluster_spheres, standing_skeleton)
from contact_estimation.core.input_rejected import InputRejected
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces

PLANAR = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'planar_4link.urdf')
# Seed 002's bare test (r + r' ≥ ‖c − c'‖): no protective distance at all.
BARE = ProximityConfig(reaction_time=0.0, stopping_time=0.0, human_speed=0.0, object_speed=0.0,
                       position_uncertainty=0.0)
STILL = np.zeros(4)


@pytest.fixture(scope='module')
def planar():
    return LinkSurfaces(RobotModel.load(PLANAR))


def tip_sphere(surfaces, q):
    """Centre (base frame), radius and local centre of the planar arm's outermost sphere."""
    centres, radii = surfaces.spheres('link4')
    rotation, origin = surfaces.robot.link_pose(q, 'link4')
    k = int(np.argmax(centres[:, 0]))
    return rotation @ centres[k] + origin, radii[k], centres[k]


def verdict(surfaces, config, q, velocity, clusters=None, keypoints=None, t=0.0):
    monitor = ProximityMonitor(surfaces, config)
    if clusters is not None:
        monitor.set_clusters(t, clusters)
    if keypoints is not None:
        with contextlib.suppress(InputRejected):  # rejected: the verdict says why
            monitor.set_skeleton(t, keypoints)
    return monitor.update(t, q, velocity)


def person(centre, yaw=0.0, right_wrist=None):
    """A standing person (`standing_skeleton`), optionally with the right wrist moved."""
    points = standing_skeleton(centre, yaw)
    if right_wrist is not None:
        points[COCO_17.index('right_wrist')] = right_wrist
    return points


# ------------------------------------------------------------------ known geometry
@pytest.mark.parametrize('gap', [0.01, -0.01, 0.25])
def test_a_point_at_a_known_distance_from_the_tip(planar, gap):
    """A point `gap` beyond the tip sphere's surface, along the arm (joint 1 at 0.4 rad): seed
    002's test finds that distance, on link4, and the overlap (gap < 0) is a stop."""
    q = np.array([0.4, 0, 0, 0])
    centre, radius, _ = tip_sphere(planar, q)
    outward = np.array([np.cos(0.4), np.sin(0.4), 0.0])
    point = centre + (radius + gap) * outward
    result = verdict(planar, BARE, q, STILL, clusters=[point[None, :]])
    assert result.source == CLUSTERS and result.body_names == ['object_0']
    assert result.body_distance[0] == pytest.approx(gap, abs=1e-9)
    assert result.body_link == ['link4']
    assert result.stop == bool(result.body_stop[0]) == (gap < 0)
    link4 = result.link_names.index('link4')
    assert result.link_distance[link4] == pytest.approx(gap, abs=1e-9)
    # The spheres enclose the link: never farther than its true surface.
    true = planar.closest_points(q, point[None, :]).distance[0]
    assert result.body_distance[0] <= true + 1e-6


def test_link_distances_match_the_nearest_sphere_of_each_link(planar):
    q = np.array([0.3, -0.8, 1.1, 0.2])
    centres, radii = planar.spheres('link1')
    rotation, origin = planar.robot.link_pose(q, 'link1')
    point = rotation @ centres[len(radii) // 2] + origin + [0, 0, radii[len(radii) // 2] + 0.05]
    result = verdict(planar, replace(BARE, report_range=5.0), q, STILL, clusters=[point[None, :]])
    for k, link in enumerate(result.link_names):
        centres, radii = planar.spheres(link)
        rotation, origin = planar.robot.link_pose(q, link)
        expected = np.min(np.linalg.norm(centres @ rotation.T + origin - point, axis=1) - radii)
        assert result.link_distance[k] == pytest.approx(expected, abs=1e-9)
    distance, link = planar.sphere_distance(q, point[None, :])
    assert result.body_distance[0] == pytest.approx(distance[0], abs=1e-9)
    assert result.body_link == [planar.links[link[0]]]
    # Beyond the watched range (here 0.5 m + the slowdown band) distances are not computed.
    short = verdict(planar, replace(BARE, report_range=0.0, slowdown_distance=0.1,
                                    release_distance=0.0), q, STILL, clusters=[point[None, :]])
    near, far = result.link_distance <= 0.1, result.link_distance > 0.1 + 0.2  # 0.2 > 2 radii
    assert near.any() and far.any()
    assert short.link_distance[near] == pytest.approx(result.link_distance[near])
    assert np.all(np.isinf(short.link_distance[far]))


def test_trunk_box_distance_matches_an_independent_box(planar):
    """The trunk box (shoulders ±0.2 m, hips ±0.15 m, 0.5 m apart, padding 0.05, half depth
    0.12) of a turned person beside the arm, against open3d's signed distance to that box."""
    yaw, centre = 0.7, np.array([0.9, 0.75, 0.3])
    result = verdict(planar, BARE, STILL, STILL, keypoints=person(centre, yaw))
    box = o3d.geometry.TriangleMesh.create_box(0.24, 0.5, 0.6).translate((-0.12, -0.25, -0.3))
    box.rotate(o3d.geometry.get_rotation_matrix_from_xyz((0, 0, yaw)), center=(0, 0, 0))
    box.translate(centre + [0, 0, -0.25])
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(box))
    centres = planar.sphere_centres(STILL)
    to_box = scene.compute_signed_distance(o3d.core.Tensor(centres.astype(np.float32))).numpy()
    trunk = result.body_names.index('trunk')
    assert result.body_distance[trunk] == pytest.approx(np.min(to_box - planar.sphere_radii),
                                                        abs=1e-5)


def test_segment_spheres_enclose_the_capsule_of_each_part():
    human = HumanModel(sphere_spacing=0.03)
    rng = np.random.default_rng(1)
    keypoints = person(np.array([1.0, 0.0, 0.5]), yaw=0.3)
    for part, body in zip(human.parts, human.bodies(keypoints)):
        if not isinstance(part, SegmentPart):
            continue
        a, b = body.centres[0], body.centres[-1]
        along = rng.uniform(0, 1, 2000)
        offset = rng.normal(size=(2000, 3))
        offset *= (part.radius * rng.uniform(0, 1, 2000) ** (1 / 3)
                   / np.linalg.norm(offset, axis=1))[:, None]
        inside = a + along[:, None] * (b - a) + offset  # points of the capsule
        gap = np.linalg.norm(inside[:, None] - body.centres[None], axis=2) - body.radii
        assert np.all(gap.min(axis=1) <= 1e-12), part.name
        assert np.all(np.diff(np.linalg.norm(body.centres - a, axis=1)) <= 0.03 + 1e-12)


def test_cluster_spheres_enclose_their_points():
    rng = np.random.default_rng(2)
    points = rng.uniform(-0.3, 0.3, (3000, 3))
    points[::97] = np.nan  # no return
    centres, radii = cluster_spheres(points, 0.1)
    finite = points[np.isfinite(points).all(axis=1)]
    gap = np.linalg.norm(finite[:, None] - centres[None], axis=2) - radii
    assert np.all(gap.min(axis=1) <= 1e-12)
    assert len(centres) == len(np.unique(np.floor(finite / 0.1), axis=0))
    assert np.all(radii <= 0.1 * np.sqrt(3) + 1e-12)


# ------------------------------------------------------------------ protective distance
PROTECTIVE = ProximityConfig(reaction_time=0.1, stopping_time=0.2, object_speed=0.5,
                             intrusion_distance=0.02, position_uncertainty=0.03)
STATIC_PART = 0.5 * (0.1 + 0.2) + 0.02 + 0.03  # v_h (T_r + T_s) + C + Z = 0.2 m


@pytest.mark.parametrize('gap, stops', [(STATIC_PART - 0.01, True), (STATIC_PART + 0.01, False)])
def test_still_robot_stops_at_the_static_protective_distance(planar, gap, stops):
    centre, radius, _ = tip_sphere(planar, STILL)
    point = centre + (radius + gap) * np.array([1.0, 0, 0])
    result = verdict(planar, PROTECTIVE, STILL, STILL, clusters=[point[None, :]])
    assert result.body_protective_distance[0] == pytest.approx(STATIC_PART)
    assert result.stop == stops and bool(result.body_stop[0]) == stops


@pytest.mark.parametrize('rate', [0.8, -0.8])
def test_protective_distance_grows_with_the_speed_toward_the_body(planar, rate):
    """Joint 1 turns at `rate`: the tip sphere moves at J(c) q̇ (pinocchio's Jacobian); a point
    ahead of it gets S_p = static + v_r (T_r + T_s / 2), a point behind only the static part."""
    q, velocity = np.array([0.2, 0, 0, 0]), np.array([rate, 0, 0, 0])
    centre, radius, local = tip_sphere(planar, q)
    ahead = np.array([-np.sin(0.2), np.cos(0.2), 0.0])
    point = centre + (radius + 0.3) * ahead
    result = verdict(planar, PROTECTIVE, q, velocity, clusters=[point[None, :]])
    toward = planar.robot.point_jacobian(q, 'link4', local) @ velocity @ ahead
    expected = STATIC_PART + max(toward, 0.0) * (0.1 + 0.2 / 2)
    assert result.body_protective_distance[0] == pytest.approx(expected, abs=1e-4)
    assert result.body_margin[0] == pytest.approx(0.3 - expected, abs=1e-4)


def test_speed_scale_falls_linearly_and_monotonically_with_distance(planar):
    centre, radius, _ = tip_sphere(planar, STILL)
    gaps = np.linspace(-0.05, STATIC_PART + 0.5, 60)
    scales = []
    for gap in gaps:
        monitor = ProximityMonitor(planar, PROTECTIVE)
        point = (centre + (radius + gap) * np.array([1.0, 0, 0]))[None, :]
        for t in (0.0, 5.0):  # the scale starts at 0 and ramps up: look once it has settled
            monitor.set_clusters(t, [point])
            scale = monitor.update(t, STILL, STILL).speed_scale
        scales.append(scale)
    scales = np.array(scales)
    assert np.all(np.diff(scales) >= 0)
    expected = np.clip((gaps - STATIC_PART) / PROTECTIVE.slowdown_distance, 0, 1)
    # At and inside S_p the stop holds the scale at 0; beyond, the linear ramp.
    assert scales == pytest.approx(expected, abs=1e-9)
    assert scales[0] == 0 and scales[-1] == 1


# ------------------------------------------------------------------ per-part signals
def test_right_hand_on_the_arm_stops_the_right_hand_only(planar):
    """Seed 002: a collision of the right hand does not stop the left (the robot stops)."""
    tip, radius, _ = tip_sphere(planar, STILL)
    # The person faces the arm's tip, the right wrist on the tip sphere's surface.
    keypoints = person(tip + [0.55, -0.2, 0.0], right_wrist=tip + [radius, 0, 0])
    result = verdict(planar, BARE, STILL, STILL, keypoints=keypoints)
    signals = result.part_signals()
    assert signals['right_hand'] == 1 and signals['right_forearm'] == 1
    assert signals['left_hand'] == 0 and signals['left_forearm'] == 0 and signals['head'] == 0
    assert signals['robot'] == 1 and result.source == SKELETON
    right, left = result.body_names.index('right_hand'), result.body_names.index('left_hand')
    assert result.body_distance[right] < 0 < result.body_distance[left]


def test_stop_is_latched_until_clear_for_the_release_time_and_the_scale_ramps(planar):
    config = ProximityConfig(reaction_time=0.0, stopping_time=0.0, object_speed=0.0,
                             position_uncertainty=0.0, release_distance=0.05, release_time=0.5,
                             recovery_rate=2.0, slowdown_distance=0.1,
                             start_hold=0.0)  # the start's hold aside (its own test below)
    centre, radius, _ = tip_sphere(planar, STILL)
    monitor = ProximityMonitor(planar, config)

    def at(t, gap):
        monitor.set_clusters(t, [(centre + (radius + gap) * np.array([1.0, 0, 0]))[None, :]])
        return monitor.update(t, STILL, STILL)

    assert at(0.0, -0.01).stop
    assert at(0.1, 0.03).stop                       # within release_distance: still stopped
    assert at(0.2, 0.2).stop                        # clear from 0.2 s …
    assert at(0.65, 0.2).stop                       # … not yet for 0.5 s
    assert at(0.69, 0.04).stop                      # back within release_distance: restart
    assert at(1.0, 0.2).stop
    released = at(1.5, 0.2)                         # clear 1.0 … 1.5 s
    assert not released.stop and not released.body_stop[0]
    assert released.speed_scale == 0.0              # rises from here at ≤ 2 /s
    assert at(1.6, 0.2).speed_scale == pytest.approx(0.2)
    assert at(2.5, 0.2).speed_scale == 1.0
    assert at(2.51, 0.05).speed_scale == pytest.approx(0.5)  # falls at once


def test_a_stop_beside_a_fixture_holds_until_reset_then_only_approach_stops(planar):
    """Stopped inside the protective distance of something that stays: no release by itself;
    after a reset the arm may stay or move away (speed scale ≥ reset_speed_scale), and coming
    more than reset_tolerance nearer than it has been since the reset stops it again."""
    config = ProximityConfig(reaction_time=0.0, stopping_time=0.0, object_speed=0.0,
                             position_uncertainty=0.0, release_distance=0.05, release_time=0.5,
                             recovery_rate=10.0, reset_tolerance=0.02, reset_speed_scale=0.1)
    centre, radius, _ = tip_sphere(planar, STILL)
    monitor = ProximityMonitor(planar, config)

    def at(t, gap):
        monitor.set_clusters(t, [(centre + (radius + gap) * np.array([1.0, 0, 0]))[None, :]])
        return monitor.update(t, STILL, STILL)

    assert 'no check' in monitor.reset()
    assert at(0.0, -0.01).stop and at(5.0, -0.01).stop   # stuck: the fixture stays
    assert monitor.reset() == ''
    after = at(5.1, -0.01)
    assert not after.stop and after.reset_active and after.body_stop[0]  # the part is inside
    assert at(5.2, -0.01).speed_scale == pytest.approx(config.reset_speed_scale)
    assert not at(5.3, 0.0).stop                        # moved away 1 cm: best margin 0 …
    assert not at(5.4, -0.015).stop                     # … 1.5 cm nearer than that: tolerated
    again = at(5.5, -0.025)                             # 2.5 cm nearer: stop, latched again
    assert again.stop and not again.reset_active and again.speed_scale == 0.0
    assert at(6.5, -0.025).stop
    assert monitor.reset() == ''
    assert not at(6.6, 0.03).stop and at(6.6, 0.03).reset_active  # away, not yet clear
    assert at(7.2, 0.2).reset_active                    # clear from 7.2 s …
    cleared = at(7.7, 0.2)                              # … for release_time: plain rules
    assert not cleared.stop and not cleared.reset_active
    assert at(7.8, -0.01).stop


def test_a_reset_is_refused_while_the_input_is_unusable(planar):
    monitor = ProximityMonitor(planar, BARE)
    monitor.reject(0.0, CLUSTERS, 'cloud in frame \'laser\': unknown')
    result = monitor.update(0.0, STILL, STILL)
    assert result.stop and result.problem == "cloud in frame 'laser': unknown"
    assert 'unknown' in monitor.reset()
    assert monitor.update(0.01, STILL, STILL).stop


# ------------------------------------------------------------------ fail safe
def test_nan_keypoint_fails_safe_naming_it(planar):
    keypoints = person(np.array([3.0, 0, 0.3]))
    keypoints[COCO_17.index('left_wrist')] = np.nan
    monitor = ProximityMonitor(planar)
    with pytest.raises(InputRejected) as rejected:
        monitor.set_skeleton(0.0, keypoints)
    result = monitor.update(0.0, STILL, STILL)
    assert rejected.value.kind == 'not_finite' and 'left_wrist' in str(rejected.value)
    assert result.problem == f'invalid skeleton: {rejected.value}'
    assert result.stop and result.speed_scale == 0 and all(result.body_stop)
    assert result.body_names == list(monitor.human.part_names)


def test_unused_keypoints_may_be_missing(planar):
    keypoints = person(np.array([3.0, 0, 0.3]))
    keypoints[COCO_17.index('left_ankle')] = np.nan
    result = verdict(planar, BARE, STILL, STILL, keypoints=keypoints)
    assert not result.problem and not result.stop


@pytest.mark.parametrize('value, words', [(1e200, 'farther than'), (1e308, 'farther than'),
                                           (6.0, 'long')])
def test_a_keypoint_far_away_or_a_limb_metres_long_fails_safe(planar, value, words):
    """Issue 19: a keypoint at 1e200 m made the sphere count of its segment infinite (the
    node exited); a segment metres long would cost millions of spheres."""
    keypoints = person(np.array([3.0, 0, 0.3]))
    keypoints[COCO_17.index('left_wrist')] += [value, 0.0, 0.0]
    result = verdict(planar, BARE, STILL, STILL, keypoints=keypoints)
    assert result.stop and words in result.problem and 'left' in result.problem


@pytest.mark.parametrize('keypoints', [np.zeros((16, 3)), np.zeros((17, 2)), [['a', 'b', 'c']] * 17,
                                       np.zeros(51)])
def test_malformed_skeleton_fails_safe(planar, keypoints):
    result = verdict(planar, BARE, STILL, STILL, keypoints=keypoints)
    assert result.stop and result.speed_scale == 0
    assert result.problem.startswith('invalid skeleton')


def test_keypoint_order_is_configurable(planar):
    order = tuple(reversed(COCO_17))
    human = HumanModel(keypoint_names=order)
    keypoints = person(np.array([3.0, 0, 0.3]))[::-1]
    reference = HumanModel().bodies(person(np.array([3.0, 0, 0.3])))
    for mine, theirs in zip(human.bodies(keypoints), reference):
        assert np.allclose(mine.centres, theirs.centres)
    with pytest.raises(ProximityConfigError, match='left_elbow'):
        HumanModel(keypoint_names=[k for k in COCO_17 if k != 'left_elbow'])


def test_stale_or_missing_bodies_stop_and_fresh_ones_release(planar):
    far = person(np.array([3.0, 0, 0.3]))
    monitor = ProximityMonitor(planar, replace(BARE, release_time=0.0, start_hold=0.0))
    assert 'none received' in monitor.update(0.0, STILL, STILL).problem
    monitor.set_skeleton(0.0, far)
    assert not monitor.update(0.3, STILL, STILL).stop
    stale = monitor.update(0.31, STILL, STILL)
    assert stale.stop and 'skeleton 0.310 s old' in stale.problem
    monitor.set_skeleton(0.4, np.zeros((0, 3)))           # nobody tracked …
    monitor.set_clusters(0.4, [np.array([[1.6, 0.0, 0.0]])])
    result = monitor.update(0.4, STILL, STILL)          # … the lidar objects count
    assert result.source == CLUSTERS and result.body_names == ['object_0']
    monitor.set_skeleton(0.45, far)                     # a person again: the skeleton counts
    assert monitor.update(0.45, STILL, STILL).source == SKELETON


def test_a_start_releases_once_the_inputs_stay_fresh_for_start_hold_then_release_time_rules(
        planar):
    """Issue 35: at a start, clusters that come fresh but not steadily (each stale before the
    next) never release the stop, nor does a fresh stretch shorter than start_hold; the first
    release comes after start_hold of fresh inputs, and from then on release_time rules."""
    far = [np.array([[1.6, 0.0, 0.0]])]
    monitor = ProximityMonitor(planar, replace(BARE, release_time=0.1, start_hold=1.0,
                                               body_timeout=0.3))
    assert monitor.fail(0.0, 'waiting for the first joint state').stop
    for t in (0.0, 0.4, 0.8, 1.2, 1.6):               # each fresh for 0.3 s of 0.4
        monitor.set_clusters(t, far)
        fresh = monitor.update(t + 0.25, STILL, STILL)
        assert fresh.stop and not fresh.problem and 'start_hold' in fresh.starting
        assert 'clusters 0.350 s old' in monitor.update(t + 0.35, STILL, STILL).problem
    for t in np.arange(2.0, 2.95, 0.1):               # steady, but for less than start_hold
        monitor.set_clusters(t, far)
        assert monitor.update(t, STILL, STILL).stop
    monitor.set_clusters(3.0, far)
    released = monitor.update(3.0, STILL, STILL)      # fresh and clear from 2.0 to 3.0 s
    assert not released.stop and not released.starting
    assert monitor.update(3.31, STILL, STILL).stop    # stale: stops, as ever
    monitor.set_clusters(3.4, far)
    assert monitor.update(3.4, STILL, STILL).stop
    assert not monitor.update(3.5, STILL, STILL).stop  # release_time now


def test_bad_joint_state_fails_safe(planar):
    monitor = ProximityMonitor(planar, BARE)
    monitor.set_clusters(0.0, [])
    assert not monitor.update(0.0, STILL, STILL).stop
    assert monitor.update(0.001, [0, np.nan, 0, 0], STILL).problem == 'joint state not finite'
    assert 'positions' in monitor.update(0.002, STILL[:3], STILL).problem
    assert monitor.fail(0.003, 'joint states stale').stop


def test_hand_distances_are_each_hands_distance_to_each_link(planar):
    """A person whose right wrist reaches the arm: each hand's distance to each link is the
    smallest between the hand's spheres and the link's (seed 002's spheres), exact within
    the report range; only a skeleton's hands are reported."""
    q = np.array([0.3, -0.8, 1.1, 0.2])
    centre, radius, _ = tip_sphere(planar, q)
    config = replace(BARE, report_range=5.0)
    result = verdict(planar, config, q, STILL,
                     keypoints=person(centre + [-0.8, -1.0, 0.0], right_wrist=centre + [0, 0, 0.2]))
    assert result.source == SKELETON
    hands = result.hand_distances()
    assert set(hands) == set(HANDS)
    robot_centres, robot_radii = result.robot_centres, planar.sphere_radii
    for name, distances in hands.items():
        hand = result.bodies[result.body_names.index(name)]
        between = (np.linalg.norm(robot_centres[:, None] - hand.centres[None], axis=2)
                   - robot_radii[:, None] - hand.radii[None])
        for k in range(len(result.link_names)):
            expected = between[planar.sphere_link == k].min()
            assert distances[k] == pytest.approx(expected, abs=1e-9)
    assert result.link_names[int(np.argmin(hands['right_hand']))] == 'link4'
    assert np.all(result.link_distance <= np.min(list(hands.values()), axis=0))
    objects = verdict(planar, config, q, STILL, clusters=[(centre + [0, 0, 0.2])[None, :]])
    assert objects.hand_distances() == {}
