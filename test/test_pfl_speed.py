"""The proximity monitor's power and force limit on speed (issue 38, core/contact/proximity.py
module doc): a robot part approaching a tracked body part is slowed to the v_max of its body
region (core/contact/pfl.py), with the speed measured after the scale the monitor published,
and the limit sets in continuously as the body comes near. Plain core, the planar arm."""
import numpy as np
import pytest

from contact_estimation.core.contact.pfl import effective_mass, part_regions, strictest_speed
from contact_estimation.core.contact.proximity import (HumanModel, ProximityConfig,
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


def facing_the_tip(planar, gap: float) -> np.ndarray:  # noqa: F811
    """A person facing −y, arms forward, the right hand's surface `gap` beyond the tip sphere
    along +y (the way the tip moves)."""
    tip, radius, _ = tip_sphere(planar, Q)
    keypoints = standing_skeleton([0.0, 0.0, 0.0], yaw=np.pi / 2)
    bodies = HumanModel().bodies(keypoints)
    hand = next(b for b in bodies if b.name == 'right_hand')
    nearest = hand.centres[np.argmin(hand.centres[:, 1] - hand.radii)]
    offset = tip + [0.0, radius + gap, 0.0] - (nearest - [0.0, hand.radii.max(), 0.0])
    return keypoints + offset


def nominal_rate(planar) -> np.ndarray:  # noqa: F811
    tip, _, local = tip_sphere(planar, Q)
    speed = (planar.robot.point_jacobian(Q, 'link4', local) @ [1.0, 0, 0, 0])[1]
    return np.array([TIP_SPEED / speed, 0.0, 0.0, 0.0])


def settle(monitor, keypoints, rate, seconds=3.0):
    """The closed loop: the arm moves at the scale the monitor published."""
    scale, result = 0.0, None
    for t in np.arange(0.0, seconds, STEP):
        monitor.set_skeleton(t, keypoints)
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
