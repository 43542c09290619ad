"""Power and force limiting (ISO/TS 15066): the body-region table, the permissible speed, the
robot's effective mass, and the online force check. Plain core, no ROS."""
import dataclasses
import math

import numpy as np
import pytest

from contact_estimation.core.contact.pfl import (
    BODY_REGIONS, QUASI_STATIC, TRANSIENT, BodyPart, ContactOnset, PflCheck, PflConfig,
    approach_speed_scale,
    effective_mass, effective_masses, part_regions, permissible_speed, reduced_mass,
    standard_effective_mass, strictest_speed, tracked_parts)
from contact_estimation.core.contact.proximity import DEFAULT_PARTS, HumanModel, standing_skeleton
from contact_estimation.core.input_rejected import (IMPLAUSIBLE, NOT_FINITE, WRONG_SIZE,
                                                    InputRejected)
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.settings import setting_of

LINK_MASS, LINK_LENGTH = 2.0, 0.5  # the one-link arm: a point mass at the end of a bar


def one_link_arm() -> RobotModel:
    """A single revolute joint about z carrying a point mass LINK_MASS at LINK_LENGTH along x
    (a near-zero rotational inertia), with an empty tip link there."""
    return RobotModel.load(f"""<robot name="one_link">
  <link name="base"/>
  <link name="bar">
    <inertial><origin xyz="{LINK_LENGTH} 0 0"/><mass value="{LINK_MASS}"/>
      <inertia ixx="1e-9" iyy="1e-9" izz="1e-9" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="tip"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="bar"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="bar"/><child link="tip"/>
    <origin xyz="{LINK_LENGTH} 0 0"/></joint>
</robot>""", 'base', 'tip')


# ------------------------------------------------------------------------ the table
def test_table_values_in_si_units():
    """Table A.2 forces (N) and Table A.3 k (N/mm → N/m) and m_H (kg) as the sources give them."""
    hand = BODY_REGIONS['hand_fingers']
    assert hand.quasi_static_force == 140.0
    assert hand.transient_force == pytest.approx(271.1, abs=0.1)  # the safer of two: below
    assert (hand.stiffness, hand.effective_mass) == (75e3, 0.6)
    expected = {'skull_forehead': (130, 150, 4.4), 'face': (65, 75, 4.4), 'neck': (150, 50, 1.2),
                'back_shoulders': (210, 35, 40), 'chest': (140, 25, 40), 'abdomen': (110, 10, 40),
                'pelvis': (180, 25, 40), 'upper_arm_elbow': (150, 30, 3),
                'lower_arm_wrist': (160, 40, 2), 'hand_fingers': (140, 75, 0.6),
                'thigh_knee': (220, 50, 75), 'lower_leg': (130, 60, 75)}
    assert set(BODY_REGIONS) == set(expected)
    for name, (force, k_per_mm, mass) in expected.items():
        region = BODY_REGIONS[name]
        assert (region.quasi_static_force, region.stiffness, region.effective_mass) == (
            force, k_per_mm * 1e3, mass), name


def test_no_transient_allowance_for_head_and_neck():
    """2 × quasi-static where transient contact is allowed (the hand a little less: below);
    head, face and neck get their quasi-static limit for transient contact too (the safe
    side: pfl.BodyRegion)."""
    for name, region in BODY_REGIONS.items():
        head = name in ('skull_forehead', 'face', 'neck')
        assert region.transient_allowed is not head
        if name != 'hand_fingers':
            assert region.transient_force == region.quasi_static_force * (1 if head else 2)


@pytest.mark.parametrize('name, joules', [('upper_arm_elbow', 1.5), ('lower_arm_wrist', 1.3),
                                          ('chest', 1.6), ('face', 0.11)])
def test_energy_matches_the_second_source(name, joules):
    """F²/(2k) with the transient force 2 × quasi-static equals the energy limit sara-shield cites
    from ISO/TS 15066 (to its two digits): F and k confirmed together. The face's 0.11 J is
    2 × 65 N's energy: sara-shield allows the head twice our force, we keep the quasi-static."""
    region = BODY_REGIONS[name]
    force = 2.0 * region.quasi_static_force
    assert float(f'{force ** 2 / (2.0 * region.stiffness):.2g}') == joules


def test_hand_takes_the_safer_of_its_two_sources():
    """2 × 140 N on 75 N/mm is 0.52 J, sara-shield's hand energy 0.49 J: the transient force
    is the lower one, the force that stores 0.49 J."""
    hand = BODY_REGIONS['hand_fingers']
    assert (2 * hand.quasi_static_force) ** 2 / (2 * hand.stiffness) == pytest.approx(0.5227,
                                                                                      abs=1e-4)
    assert hand.transient_force ** 2 / (2 * hand.stiffness) == pytest.approx(0.49)
    assert hand.transient_force < 2 * hand.quasi_static_force


# ------------------------------------------------------------------------ speed
def test_permissible_speed_by_hand():
    """v_max = F_T / √(μ k), μ = (1/m_H + 1/m_R)⁻¹, worked by hand."""
    # hand, m_R = 5 kg: μ = 1 / (1/0.6 + 1/5) = 15/28 kg; √(15/28 · 75 000) = 200.445;
    # F_T = √(2 · 75 000 · 0.49) = 271.109 N → 1.35254 m/s
    assert permissible_speed(BODY_REGIONS['hand_fingers'], 5.0) == pytest.approx(1.35254, rel=1e-5)
    # chest, m_R = 40 kg: μ = 20 kg, √(20 · 25 000) = 707.107 → 280 / 707.107 = 0.39598 m/s
    assert permissible_speed(BODY_REGIONS['chest'], 40.0) == pytest.approx(0.395980, rel=1e-5)
    # face, m_R = 4.4 kg: μ = 2.2 kg, transient = quasi-static 65 N: 65 / √(2.2 · 75 000) = 0.16002
    assert permissible_speed(BODY_REGIONS['face'], 4.4) == pytest.approx(0.160019, rel=1e-5)


def test_an_immovable_direction_leaves_the_body_mass():
    assert reduced_mass(0.6, math.inf) == 0.6
    assert permissible_speed(BODY_REGIONS['hand_fingers'], math.inf) == pytest.approx(
        271.109 / math.sqrt(0.6 * 75e3), rel=1e-5)
    with pytest.raises(ValueError, match='> 0 kg'):
        permissible_speed(BODY_REGIONS['hand_fingers'], 0.0)


def test_a_heavier_arm_must_move_slower():
    speeds = [permissible_speed(BODY_REGIONS['lower_arm_wrist'], m) for m in (1, 5, 20, 100)]
    assert speeds == sorted(speeds, reverse=True)


def test_strictest_speed_of_a_part_with_several_regions():
    """The trunk box: chest is the slowest of back, chest, abdomen and pelvis."""
    trunk = part_regions('trunk')
    assert strictest_speed(trunk, 10.0) == permissible_speed(BODY_REGIONS['chest'], 10.0)


def test_approach_speed_scale():
    u = (1.0, 0.0, 0.0)
    assert approach_speed_scale((-0.5, 0.2, 0.0), u, 0.3) == (-0.5, 1.0)   # moving away
    assert approach_speed_scale((0.2, 0.9, 0.0), u, 0.3) == (0.2, 1.0)    # slow enough
    approach, scale = approach_speed_scale((0.6, 0.0, 0.0), (2.0, 0.0, 0.0), 0.3)
    assert (approach, scale) == (0.6, pytest.approx(0.5))
    # a hand coming toward the arm at 0.3 m/s adds to the arm's 0.3 m/s
    approach, scale = approach_speed_scale((0.3, 0, 0), u, 0.3, body_velocity=(-0.3, 0, 0))
    assert (approach, scale) == (pytest.approx(0.6), pytest.approx(0.5))
    with pytest.raises(InputRejected) as error:
        approach_speed_scale((np.nan, 0, 0), u, 0.3)
    assert error.value.kind == NOT_FINITE
    with pytest.raises(InputRejected) as error:
        approach_speed_scale((0.1, 0, 0), (0, 0, 0), 0.3)
    assert error.value.kind == IMPLAUSIBLE


# ------------------------------------------------------------------------ effective mass
def test_effective_mass_of_a_point_mass_on_one_link():
    """A point mass m at distance L on a revolute joint: M = m L², J = L along the tangent, so
    m_R = m at the mass along the tangent, m L²/r² at radius r, inf along the bar (no joint
    moves the point radially). The payload adds at the tip."""
    arm = one_link_arm()
    q = np.array([0.7])
    tangent = np.array([-math.sin(0.7), math.cos(0.7), 0.0])
    radial = np.array([math.cos(0.7), math.sin(0.7), 0.0])
    _, tip = arm.link_pose(q, 'tip')
    assert arm.point_jacobian(q, 'tip', np.zeros(3)).shape == (3, 1)  # one joint: still 3×n
    assert effective_mass(arm, q, 'tip', tip, tangent) == pytest.approx(LINK_MASS, rel=1e-6)
    middle = 0.5 * tip
    assert effective_mass(arm, q, 'bar', middle, tangent) == pytest.approx(4 * LINK_MASS, rel=1e-6)
    diagonal = tangent + radial  # only the tangential share moves: m / cos²45° = 2 m
    assert effective_mass(arm, q, 'tip', tip, diagonal) == pytest.approx(2 * LINK_MASS, rel=1e-6)
    assert effective_mass(arm, q, 'tip', tip, radial) == math.inf
    loaded = Payload(1.5, (0.0, 0.0, 0.0)).carried_by(arm)
    assert effective_mass(loaded, q, 'tip', tip, tangent) == pytest.approx(LINK_MASS + 1.5,
                                                                            rel=1e-6)
    assert standard_effective_mass(arm, 1.5) == pytest.approx(LINK_MASS / 2 + 1.5)


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


def test_panda_effective_mass_is_the_least_kinetic_energy(panda):
    """m_R is the least 2 × kinetic energy q̇ᵀMq̇ of any joint motion that moves the point at unit
    speed along u: random motions never beat it, the motion M⁻¹Jᵀu reaches it."""
    rng = np.random.default_rng(38)
    q = panda.random_configuration(rng, 1)[0]
    rotation, origin = panda.link_pose(q, 'panda_link6')
    local = np.array([0.05, -0.02, 0.03])
    point = rotation @ local + origin
    u = rng.normal(size=3)
    u /= np.linalg.norm(u)
    m_r = effective_mass(panda, q, 'panda_link6', point, u)
    jacobian, inertia = panda.point_jacobian(q, 'panda_link6', local), panda.mass_matrix(q)
    for qdot in rng.normal(size=(200, panda.n)):
        assert qdot @ inertia @ qdot / float(u @ jacobian @ qdot) ** 2 >= m_r * (1 - 1e-9)
    best = np.linalg.solve(inertia, jacobian.T @ u)
    assert best @ inertia @ best / float(u @ jacobian @ best) ** 2 == pytest.approx(m_r)


def test_panda_effective_masses_at_once_match_the_formula(panda):
    """Points on several links in one call: each 1 / (uᵀ J M⁻¹ Jᵀ u) with the point's own
    Jacobian (RobotModel.point_jacobian) and M(q)."""
    rng = np.random.default_rng(7)
    q = panda.random_configuration(rng, 1)[0]
    links = ['panda_link3', 'panda_link5', 'panda_hand', 'panda_link5']
    inertia, points, directions, expected = panda.mass_matrix(q), [], [], []
    for link in links:
        rotation, origin = panda.link_pose(q, link)
        local, u = rng.normal(scale=0.05, size=3), rng.normal(size=3)
        u /= np.linalg.norm(u)
        jacobian = panda.point_jacobian(q, link, local)
        points.append(rotation @ local + origin)
        directions.append(u)
        expected.append(1.0 / (u @ jacobian @ np.linalg.solve(inertia, jacobian.T @ u)))
    assert effective_masses(panda, q, links, points, directions) == pytest.approx(expected)
    with pytest.raises(ValueError, match='3 links, 4 points'):
        effective_masses(panda, q, links[:3], points, directions)
    with pytest.raises(InputRejected, match='not finite'):
        effective_masses(panda, q, links, np.full((4, 3), np.nan), directions)


def test_panda_payload_makes_the_flange_heavier(panda):
    q = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])
    _, flange = panda.link_pose(q, panda.tip_link)
    loaded = Payload(2.0, (0.0, 0.0, 0.05)).carried_by(panda)
    for u in np.eye(3):
        bare, heavy = (effective_mass(r, q, panda.tip_link, flange, u) for r in (panda, loaded))
        assert heavy > bare + 1.0   # about the payload's 2 kg, less what the joints let turn


# ------------------------------------------------------------------------ the check
HAND = BodyPart('right_hand', part_regions('right_hand'), np.array([[0.5, 0.0, 0.5]]))
TRUNK = BodyPart('trunk', part_regions('trunk'), np.array([[0.5, 0.4, 0.5], [0.5, 0.4, 0.8]]))
AT_HAND = np.array([0.52, 0.0, 0.5])


def test_transient_then_quasi_static_limit():
    """200 N on the hand: within 271 N for the first 0.5 s, over 140 N after."""
    check = PflCheck()
    early = check.check('panda_link7', AT_HAND, (0.0, 200.0, 0.0), 10.3, 10.0, [HAND, TRUNK])
    assert (early.region, early.part, early.phase) == ('hand_fingers', 'right_hand', TRANSIENT)
    assert early.limit == pytest.approx(271.109, abs=1e-3)
    assert not early.over and early.margin == pytest.approx(200 / 271.109, abs=1e-5)
    late = check.check('panda_link7', AT_HAND, (0.0, 200.0, 0.0), 10.5, 10.0, [HAND, TRUNK])
    assert (late.phase, late.limit, late.over) == (QUASI_STATIC, 140.0, True)
    assert late.margin == pytest.approx(200 / 140)
    for word in ('200 N', 'panda_link7', 'right_hand', 'hand_fingers', '140 N', 'over',
                 QUASI_STATIC):
        assert word in late.reason


def test_an_estimate_just_under_the_limit_is_over_it_by_the_estimates_error():
    """The estimate errs by a few %: from estimate_share (0.95) of the limit it is over, so a
    true force just over the limit read 3 % low still stops; under 90 % never does."""
    check = PflCheck()
    assert check.config.estimate_share == 0.95
    hand = [HAND]
    assert check.check('l', AT_HAND, (0.0, 0.97 * 140.0, 0.0), 11.0, 10.0, hand).over
    assert not check.check('l', AT_HAND, (0.0, 0.9 * 140.0, 0.0), 11.0, 10.0, hand).over
    exact = PflCheck(PflConfig(estimate_share=1.0))
    assert not exact.check('l', AT_HAND, (0.0, 0.97 * 140.0, 0.0), 11.0, 10.0, hand).over


def test_nearest_part_and_its_strictest_region():
    """Nearer the trunk than the hand: the trunk, whose strictest region is the abdomen."""
    near_trunk = np.array([0.5, 0.35, 0.6])
    result = PflCheck().check('panda_link5', near_trunk, (120.0, 0, 0), 1.0, 0.9, [HAND, TRUNK])
    assert (result.part, result.region, result.limit, result.over) == (
        'trunk', 'abdomen', 220.0, False)


def test_default_region_without_a_tracker_or_far_from_every_part():
    """No body part, or none within region_distance: the default region, face by default,
    whose transient limit is its quasi-static 65 N."""
    check = PflCheck()
    alone = check.check('panda_link3', (0.0, 0.0, 1.0), (0.0, 0.0, -70.0), 2.0, 2.0)
    assert (alone.part, alone.region, alone.phase, alone.limit, alone.over) == (
        '', 'face', TRANSIENT, 65.0, True)
    assert 'default region' in alone.reason
    far = check.check('panda_link3', (0.0, 0.0, 1.0), (0.0, 0.0, -70.0), 2.0, 2.0, [HAND])
    assert far.region == 'face'
    chest = PflCheck(PflConfig(default_region='chest', region_distance=2.0))
    assert chest.check('panda_link3', (0.0, 0.0, 1.0), (0, 0, -70), 2.0, 2.0).region == 'chest'
    assert chest.check('panda_link3', (0.0, 0.0, 1.0), (0, 0, -70), 2.0, 2.0,
                       [HAND]).region == 'hand_fingers'


def test_bad_inputs_are_refused_clearly():
    check = PflCheck()
    cases = [((np.nan, 0, 0), AT_HAND, 1.0, NOT_FINITE, 'contact force'),
             ((1, 0, 0), (0.5, 0.0), 1.0, WRONG_SIZE, 'contact point'),
             ((1, 0, 0), AT_HAND, 0.5, IMPLAUSIBLE, 'before its onset'),
             ((1, 0, 0), AT_HAND, np.inf, NOT_FINITE, 'not finite')]
    for force, point, stamp, kind, words in cases:
        with pytest.raises(InputRejected, match=words) as error:
            check.check('panda_link7', point, force, stamp, 1.0, [HAND])
        assert error.value.kind == kind
    with pytest.raises(ValueError, match='elbow'):
        PflConfig(default_region='elbow')
    with pytest.raises(ValueError, match='transient_time'):
        PflConfig(transient_time=-1.0)
    bad_part = BodyPart('paw', ('paw_pad',), np.array([[0.5, 0.0, 0.5]]))
    with pytest.raises(ValueError, match='paw_pad'):
        check.check('panda_link7', AT_HAND, (1, 0, 0), 1.0, 1.0, [bad_part])


def test_every_tracked_part_has_regions_and_every_setting_is_declared():
    """Each body part of the proximity monitor's human model maps to regions of the table;
    a lidar cluster maps to none (the default region applies); PflConfig's fields are
    settings with descriptions."""
    for part in DEFAULT_PARTS:
        assert part_regions(part.name), part.name
        assert set(part_regions(part.name)) <= set(BODY_REGIONS)
    assert part_regions('cluster_3') == ()
    for field in dataclasses.fields(PflConfig):
        assert setting_of(field) is not None and setting_of(field).description, field.name


def test_a_tracked_person_from_the_proximity_model():
    """The proximity monitor's bodies of a standing person: a contact at the trunk box's front
    face is the trunk's (abdomen), one at the right wrist's hand spheres the hand's."""
    bodies = HumanModel().bodies(standing_skeleton((1.0, 0.0, 0.0)))
    parts = tracked_parts(bodies)
    assert [p.name for p in parts] == [b.name for b in bodies]
    trunk = next(b for b in bodies if b.name == 'trunk')
    # the box's columns: across, depth, up (core/contact/proximity.HumanModel._box)
    front = trunk.box_centre + trunk.box_rotation @ (trunk.box_half_extents * (0.0, 1.0, 0.0))
    check = PflCheck()
    assert check.region_of(front, parts) == ('trunk', 'abdomen')
    hand = next(b for b in bodies if b.name == 'right_hand')
    assert check.region_of(hand.centres[-1], parts) == ('right_hand', 'hand_fingers')


def test_a_contact_begins_after_a_gap_or_when_its_stamps_go_back():
    onset = ContactOnset(gap=1.0)
    assert [onset(t) for t in (5.0, 5.05, 5.9, 6.8)] == [5.0, 5.0, 5.0, 5.0]  # gaps ≤ 1 s
    assert onset(7.81) == 7.81                                               # 1.01 s gap
    assert onset(7.9) == 7.81
    assert onset(2.0) == 2.0  # the source started again: a new contact
    assert onset(2.5) == 2.0
