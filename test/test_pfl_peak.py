"""The force limit's check sees an impact's peak (issue 38): a second, fast momentum observer
of the base F/T (its peak per 1/max_rate s, `PeakForce`) raises the low-passed contact
estimate the check reads (`PeakForces`)."""
import numpy as np
import pytest

from contact_estimation.core.contact.ft_compensation import (BaseWrenchCompensator,
                                                             MomentumWrenchObserver)
from contact_estimation.core.contact.ft_contact_stream import FtEstimatorConfig, PeakForce
from contact_estimation.core.contact.pfl import PeakForces
from contact_estimation.core.input_rejected import InputRejected
from contact_estimation.core.robot.robot_model import RobotModel

RATE = 250.0   # Hz, the F/T estimator's compensation_rate


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


def test_the_fast_observer_reads_a_chest_impact_s_peak_the_main_one_halves(panda):
    """A 60 ms half-sine of 300 N (a chest hit at 1 m/s) on the arm at rest, read at 250 Hz:
    the peak force of the fast observer (the node's peak_force.observer_gain) is within 10 %,
    the main one's (observer_gain, 20 ms) is over 20 % low."""
    config = FtEstimatorConfig()
    q, still = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785]), np.zeros(7)
    compensator = BaseWrenchCompensator(panda)
    observer = MomentumWrenchObserver(compensator, config.observer_gain,
                                      (config.peak_observer_gain,))
    peaks = PeakForce(config.max_rate, config.peak_floor)
    point, direction = np.array([0.5, 0.0, 0.3]), np.array([0.0, 0.6, -0.8])
    main, published = [], []
    for k in range(100):
        t = k / RATE
        force = 300.0 * max(np.sin(np.pi * (t - 0.1) / 0.06), 0.0) * (0.1 < t < 0.16) * direction
        reading = compensator.arm_wrench(q) + np.concatenate([force, np.cross(point, force)])
        main.append(np.linalg.norm(observer.update(t, reading, q, still)[:3]))
        peak = peaks.add(t, observer.wrenches[1][:3])
        if peak is not None:
            published.append(peak)
    largest = max(np.linalg.norm(f) for _, f in published)
    assert largest == pytest.approx(300.0, rel=0.1)
    assert max(main) < 0.8 * 300.0
    # only peaks of at least the floor are published, one per slot of 1/max_rate s
    assert all(np.linalg.norm(f) >= config.peak_floor for _, f in published)
    slots = [int(np.floor(s * config.max_rate + 1e-6)) for s, _ in published]
    assert len(set(slots)) == len(slots)


def test_a_peak_raises_the_estimates_near_its_stamp_only():
    peaks = PeakForces(0.1)
    force = np.array([0.0, 30.0, -40.0])   # 50 N
    peaks.add(1.0, [0.0, 0.0, -200.0])
    np.testing.assert_allclose(peaks.raised(force, 1.05), force * 4.0)   # 200 N, its direction
    np.testing.assert_allclose(peaks.raised(force, 1.2), force)          # too far after
    np.testing.assert_allclose(peaks.raised(5 * force, 1.0), 5 * force)  # larger than it
    empty = PeakForces(0.0)   # pfl.peak_window 0: not used
    empty.add(1.0, [0.0, 0.0, -200.0])
    np.testing.assert_allclose(empty.raised(force, 1.0), force)
    with pytest.raises(InputRejected):
        peaks.add(1.1, [np.nan, 0.0, 0.0])


def test_a_peak_after_the_last_estimate_asks_for_its_check_again():
    peaks = PeakForces(0.1)
    assert not peaks.add(0.99, [0.0, 0.0, 40.0])     # no estimate yet
    peaks.raised(np.array([0.0, 50.0, 0.0]), 1.0)     # checked at 50 N
    assert not peaks.add(1.01, [0.0, 0.0, 54.0])     # within the estimate's error
    assert peaks.add(1.02, [0.0, 0.0, 100.0])        # the impact's peak: again
    assert np.linalg.norm(peaks.raised(np.array([0.0, 50.0, 0.0]), 1.0)) == pytest.approx(100)
    assert not peaks.add(1.3, [0.0, 0.0, 300.0])     # too long after it
