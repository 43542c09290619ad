"""The proximity monitor's power and force limit on speed (issue 38, core/contact/proximity.py
module doc): a robot part approaching a tracked body part is slowed to the v_max of its body
region (core/contact/pfl.py), with the speed measured after the scale the monitor published,
and the limit sets in continuously as the body comes near. Plain core, the planar arm."""
import numpy as np
import pytest

from contact_estimation.core.contact.pfl import (PflConfig, effective_mass, part_regions,
                                                 strictest_speed)
from contact_estimation.core.contact.proximity import (DEFAULT_PARTS, HumanModel,
                                                       ProximityConfig, ProximityConfigError,
                                                       ProximityMonitor, standing_skeleton)
from test_proximity import tip_sphere
from test_proximity import planar  # noqa: F401 (the fixture)

# No protective distance beyond the geometry: margin = distance, the speed scale's own ramp
# clip(distance / 0.3, 0, 1).
CONFIG = ProximityConfig(reaction_time=0.0, stopping_time=0.0, human_speed=0.0,
                         object_speed=0.0, position_uncertainty=0.0, slowdown_distance=0.3,
                         recovery_rate=1.0)
Q = np.zeros(4)                 # the arm along +x; joint 1 turning moves the tip along +y
TIP_SPEED = 20.0                # m/s of the tip at the nominal joint rate: far over any v_max
STEP = 0.01                     # s between checks


def facing_the_tip(planar, gap: float, part: str = 'right_hand') -> np.ndarray:  # noqa: F811
    """A person facing −y, arms forward, the surface of `part` (a segment part) `gap` beyond
    the tip sphere along +y (the way the tip moves)."""
    tip, radius, _ = tip_sphere(planar, Q)
    keypoints = standing_skeleton([0.0, 0.0, 0.0], yaw=np.pi / 2)
    bodies = HumanModel().bodies(keypoints)
    body = next(b for b in bodies if b.name == part)
    nearest = body.centres[np.argmin(body.centres[:, 1] - body.radii)]
    offset = tip + [0.0, radius + gap, 0.0] - (nearest - [0.0, body.radii.max(), 0.0])
    return keypoints + offset


def nominal_rate(planar) -> np.ndarray:  # noqa: F811
    tip, _, local = tip_sphere(planar, Q)
    speed = (planar.robot.point_jacobian(Q, 'link4', local) @ [1.0, 0, 0, 0])[1]
    return np.array([TIP_SPEED / speed, 0.0, 0.0, 0.0])


def settle(monitor, keypoints, rate, seconds=3.0, clusters=None):
    """The closed loop: the arm moves at the scale the monitor published (bodies: the
    skeleton `keypoints`, or lidar `clusters` when given)."""
    scale, result = 0.0, None
    for t in np.arange(0.0, seconds, STEP):
        if clusters is None:
            monitor.set_skeleton(t, keypoints)
        else:
            monitor.set_clusters(t, clusters)
        result = monitor.update(t, Q, scale * rate)
        scale = result.speed_scale
    return result


def test_a_part_approaching_a_hand_settles_at_its_v_max_and_without_the_limit_it_would_not(
        planar):  # noqa: F811
    keypoints, rate = facing_the_tip(planar, 0.12), nominal_rate(planar)
    limited = settle(ProximityMonitor(planar, CONFIG, speed_limit_robot=planar.robot),
                     keypoints, rate)
    plain = settle(ProximityMonitor(planar, CONFIG), keypoints, rate)
    hand = limited.body_names.index('right_hand')
    assert plain.speed_scale == pytest.approx(0.4, abs=0.01)  # the distance ramp: 0.12 / 0.3
    # The tip reaches the hand at TIP_SPEED × scale; v_max from the arm's own mass there.
    tip, _, _ = tip_sphere(planar, Q)
    v_max = strictest_speed(part_regions('right_hand'),
                            effective_mass(planar.robot, Q, 'link4', tip, [0.0, 1.0, 0.0]))
    assert TIP_SPEED * plain.speed_scale > 2 * v_max  # without the limit: twice as hard
    assert TIP_SPEED * limited.speed_scale == pytest.approx(v_max, rel=0.05)
    assert limited.body_speed_share[hand] == pytest.approx(1.0, abs=0.05)
    assert limited.link_speed_share[planar.links.index('link4')] == pytest.approx(1.0, abs=0.05)
    assert plain.pfl_ratio == 1.0 and np.all(plain.body_speed_share == 0.0)


def test_the_limit_sets_in_continuously_as_a_body_comes_near(planar):  # noqa: F811
    """The arm at a fixed speed toward a hand placed nearer and nearer, 2 mm at a time: the
    ratio is 1 beyond the warning zone and falls by small steps, never a jump."""
    rate = 0.2 * nominal_rate(planar)  # 4 m/s, over the hand's v_max (2.2 m/s here)
    ratios = []
    for gap in np.arange(0.45, 0.05, -0.002):
        monitor = ProximityMonitor(planar, CONFIG, speed_limit_robot=planar.robot)
        monitor.set_skeleton(0.0, facing_the_tip(planar, gap))
        ratios.append(monitor.update(0.0, Q, rate).pfl_ratio)
    ratios = np.array(ratios)
    assert ratios[0] == 1.0 and ratios[-1] < 0.8
    # A step would fall by all of it at once; this fall spreads over more than 10 steps.
    assert np.max(np.abs(np.diff(ratios))) < 0.1 * (1.0 - ratios[-1])


def test_a_lidar_object_is_not_speed_limited(planar):  # noqa: F811
    """What a lidar object is, is not known: it keeps the protective distance alone."""
    tip, radius, _ = tip_sphere(planar, Q)
    monitor = ProximityMonitor(planar, CONFIG, speed_limit_robot=planar.robot)
    monitor.set_clusters(0.0, [(tip + [0.0, radius + 0.1, 0.0])[None, :]])
    result = monitor.update(0.0, Q, nominal_rate(planar))
    assert result.pfl_ratio == 1.0 and result.body_speed_share[0] == 0.0


# ------------------------------------------------------------------ collaborative operation
# A real protective distance: S_p = 0.5 m/s × 0.4 s + 0.05 m + v_r × 0.2 s ≥ 0.25 m (at
# v_h = 1.6 m/s, 0.69 m, the head of the person reaching to the tip would be inside its own,
# and slowing the arm in its warning zone at 1 m/s).
PROTECTIVE = ProximityConfig(reaction_time=0.1, stopping_time=0.3, human_speed=0.5,
                             slowdown_distance=0.3, recovery_rate=1.0)
INSIDE = 0.1  # m between the tip and the body part: inside S_p
# The person as a tracker that sees the right hand alone: the head, nearer than the hand to
# its own protective distance and with a v_max of ~0.15 m/s (no transient contact), would
# otherwise slow the arm first.
RIGHT_HAND = HumanModel([part for part in DEFAULT_PARTS if part.name == 'right_hand'])


def tip_v_max(planar, part: str = 'right_hand') -> float:  # noqa: F811
    tip, _, _ = tip_sphere(planar, Q)
    return strictest_speed(part_regions(part),
                           effective_mass(planar.robot, Q, 'link4', tip, [0.0, 1.0, 0.0]))


@pytest.mark.parametrize('speed', [0.2, TIP_SPEED])
def test_collaborative_a_hand_inside_the_protective_distance_is_approached_at_v_max_not_stopped(
        planar, speed):  # noqa: F811
    """Collaborative operation (ISO/TS 15066 5.5.5): the hand inside its protective distance
    stops nothing; the tip approaching it at 0.2 m/s goes on at full speed, at 20 m/s it is
    held at the hand's v_max. Off, the same scene stops the arm."""
    keypoints = facing_the_tip(planar, INSIDE)
    rate = nominal_rate(planar) * speed / TIP_SPEED
    monitor = ProximityMonitor(planar, PROTECTIVE, RIGHT_HAND, speed_limit_robot=planar.robot,
                               collaborative=True)
    result = settle(monitor, keypoints, rate)
    hand = result.body_names.index('right_hand')
    assert result.body_margin[hand] < -0.15  # inside the protective distance
    assert not result.stop and not result.body_stop.any() and result.body_warning[hand]
    v_max = tip_v_max(planar)
    assert 0.2 < v_max < TIP_SPEED
    assert speed * result.speed_scale == pytest.approx(min(speed, v_max), rel=0.05)
    stopped = settle(ProximityMonitor(planar, PROTECTIVE, RIGHT_HAND,
                                      speed_limit_robot=planar.robot), keypoints, rate)
    assert stopped.stop and stopped.body_stop[hand] and stopped.speed_scale == 0.0


def test_collaborative_still_stops_at_a_lidar_object_and_at_the_head(planar):  # noqa: F811
    """What a lidar object is, is not known; the head allows no transient contact: both keep
    the protective distance in collaborative operation."""
    rate = nominal_rate(planar) * 0.2 / TIP_SPEED
    tip, radius, _ = tip_sphere(planar, Q)
    collaborative = ProximityMonitor(planar, PROTECTIVE, speed_limit_robot=planar.robot,
                                     collaborative=True)
    result = settle(collaborative, None, rate,
                    clusters=[(tip + [0.0, radius + INSIDE, 0.0])[None, :]])
    assert result.stop and result.body_stop[0] and result.speed_scale == 0.0
    collaborative = ProximityMonitor(planar, PROTECTIVE, speed_limit_robot=planar.robot,
                                     collaborative=True)
    result = settle(collaborative, facing_the_tip(planar, INSIDE, 'head'), rate)
    stopping = {name for name, stops in zip(result.body_names, result.body_stop) if stops}
    assert result.stop and 'head' in stopping
    assert not stopping & {'left_hand', 'right_hand', 'left_forearm', 'right_forearm'}


def test_collaborative_without_the_speed_limit_is_refused(planar):  # noqa: F811
    with pytest.raises(ProximityConfigError, match='needs the speed limit'):
        ProximityMonitor(planar, PROTECTIVE, collaborative=True)
    for off in ({'speed_limit': False}, {'enabled': False}):
        with pytest.raises(ValueError, match='pfl.collaborative = true needs pfl.enabled and '
                                             'pfl.speed_limit on'):
            PflConfig(collaborative=True, **off)
    assert PflConfig(collaborative=True).collaborative and not PflConfig().collaborative
