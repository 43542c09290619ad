"""The ft_contact_estimator's stream logic without ROS: pairing by stamp, input checks, the
resting check and the offset and ellipsoid files."""
import numpy as np
import pytest

from contact_estimation.core.contact.ft_compensation import BaseWrenchCompensator, FtContactError
from contact_estimation.core.contact.ft_contact_stream import (
    RateSlots,
    RestingWindow,
    RunningRms,
    StampPairing,
    check_reading,
    load_ellipsoids,
    load_offset,
    save_offset,
)
from contact_estimation.core.input_rejected import InputRejected
from contact_estimation.core.robot.robot_model import RobotModel


def test_pairing_waits_for_the_nearest_secondary_and_drops_what_cannot_pair():
    pairing = StampPairing(tolerance=0.004)
    assert pairing.add_secondary(0.000, 'q0') == []
    # a reading at 0.009: the joint state at 0.010 may still come, nearer than 0.000
    assert pairing.add_primary(0.009, 'r1') == []
    assert pairing.add_secondary(0.010, 'q1') == [(0.009, 'r1', 0.010, 'q1')]
    assert pairing.add_secondary(0.010, 'q1 again') == []  # the same sample: ignored
    assert pairing.add_primary(0.0105, 'r2') == []        # after the newest: waits
    assert pairing.add_secondary(0.020, 'q2') == [(0.0105, 'r2', 0.010, 'q1')]
    assert pairing.add_primary(0.015, 'r3') == [] and pairing.unmatched == [(0.015, 'r3')]
    with pytest.raises(InputRejected, match='before'):
        pairing.add_secondary(0.019, 'late')
    # a reading whose joint states never come is dropped once `history` has passed
    assert pairing.add_primary(0.5, 'r4') == []
    assert pairing.add_primary(1.6, 'r5') == [] and pairing.unmatched == [(0.5, 'r4')]
    assert pairing.add_secondary(2.0, 'q3') == [] and pairing.unmatched == [(1.6, 'r5')]
    # a clock restarted (more than `history` back) starts the pairing over
    assert pairing.add_secondary(0.5, 'q0 again') == []
    assert pairing.add_primary(0.5, 'r0') == [(0.5, 'r0', 0.5, 'q0 again')]


def test_readings_are_checked():
    check_reading(np.array([0, 0, -150.0, 1, 0, 0]), 2500.0, 400.0)
    for kind, reading in (('not_finite', [np.nan, 0, 0, 0, 0, 0]), ('zero_reading', [0] * 6),
                          ('saturated', [0, 0, -2500.0, 0, 0, 0]),
                          ('saturated', [0, 0, -100.0, 0, 450.0, 0])):
        with pytest.raises(InputRejected) as err:
            check_reading(np.array(reading, dtype=float), 2500.0, 400.0)
        assert err.value.kind == kind


def test_resting_window_refuses_motion_and_short_rest_then_measures_the_offset():
    robot = RobotModel.load('panda')
    compensator = BaseWrenchCompensator(robot)
    q, still = np.full(7, 0.3), np.zeros(7)
    offset = np.array([1.0, -2.0, 3.0, 0.1, 0.2, -0.3])
    reading = compensator.mount.from_base(compensator.arm_wrench(q)) + offset
    resting = RestingWindow(0.1, 0.01)
    with pytest.raises(FtContactError, match='no F/T reading'):
        resting.offset(compensator)
    resting.add(0.0, reading, q, np.full(7, 0.05), robot.joint_names)
    with pytest.raises(FtContactError, match='moving'):
        resting.offset(compensator)
    for k in range(1, 60):
        resting.add(k * 0.001, reading, q, still, robot.joint_names)
    with pytest.raises(FtContactError, match='rested for 0.06'):
        resting.offset(compensator)
    for k in range(60, 200):
        resting.add(k * 0.001, reading, q, still, robot.joint_names)
    np.testing.assert_allclose(resting.offset(compensator), offset, atol=1e-9)


def test_offset_and_ellipsoid_files(tmp_path):
    path = tmp_path / 'sub' / 'offset.yaml'
    assert load_offset(str(path)) is None
    save_offset(str(path), np.arange(6.0), 'ft_frame', 12.5)
    np.testing.assert_allclose(load_offset(str(path)), np.arange(6.0))
    path.write_text('offset: [1, 2]\n')
    with pytest.raises(FtContactError, match='6 finite'):
        load_offset(str(path))
    ellipsoids = tmp_path / 'ellipsoids.yaml'
    ellipsoids.write_text('panda_link3: {centre: [0, 0, -0.05], semi_axes: [0.07, 0.07, 0.14]}\n')
    loaded = load_ellipsoids(str(ellipsoids))
    np.testing.assert_allclose(loaded['panda_link3'].semi_axes, [0.07, 0.07, 0.14])
    ellipsoids.write_text('panda_link3: {centre: [0, 0]}\n')
    with pytest.raises(FtContactError, match='ellipsoid file'):
        load_ellipsoids(str(ellipsoids))


def test_running_rms_forgets_old_samples():
    rms = RunningRms(1.0)
    rms.add(0.0, np.array([10.0, 0, 0, 1.0, 0, 0]))
    assert rms.add(0.5, np.zeros(6)) == pytest.approx((np.sqrt(50.0), np.sqrt(0.5)))
    assert rms.add(1.6, np.array([3.0, 4.0, 0, 0, 0, 0])) == pytest.approx((5.0, 0.0))


def test_rate_slots_take_the_first_stamp_of_each_slot_whatever_the_start():
    stamps = 1000.0 + np.arange(0, 40) * 1e-3  # 1 kHz, 4 ms slots (250 Hz)

    def taken(start: int) -> list:
        slots = RateSlots(250.0)
        return [t for t in stamps[start:] if slots.take(t)]
    every_slot = taken(0)
    assert np.allclose(np.diff(every_slot), 4e-3) and len(every_slot) == 10
    for start in (1, 3):  # a stream joined later: its first stamp, then the same ones
        assert taken(start)[0] == stamps[start] and taken(start)[1:] == every_slot[1:]
    slots = RateSlots(250.0)
    assert slots.take(1000.0) and not slots.take(1000.001)
    assert slots.take(999.0)  # a restarted clock: taken at once
