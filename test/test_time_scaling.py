"""Seed 003's time-scaling reaction: track, hold, yield when pushed back, recover."""
import numpy as np
import pytest

from contact_estimation.core.time_scaling import TimeScaling, TimeScalingConfig

DT = 0.001
MOTION = np.array([0.0, 0.3, -0.4])  # q̇ of the forward motion, |q̇| = 0.5 rad/s


def run(scaling, t0, seconds, **kwargs):
    values = [scaling.update(t0 + k * DT, **kwargs) for k in range(int(round(seconds / DT)))]
    return values, t0 + len(values) * DT


def test_track_hold_yield_hold_recover():
    scaling = TimeScaling(TimeScalingConfig(alpha=0.1, push_threshold=2.0, recovery_rate=2.0))
    free, t = run(scaling, 0.0, 0.1, hold=False, tau_ext=np.zeros(3), velocity=MOTION)
    assert free == [1.0] * len(free)

    held, t = run(scaling, t, 0.05, hold=True, tau_ext=np.array([0, 5, 0]), velocity=MOTION * 0)
    assert held == [0.0] * len(held)

    direction = MOTION / np.linalg.norm(MOTION)
    back = -8.0 * direction  # 8 N·m against the motion: 6 N·m beyond the dead band
    pushed, t = run(scaling, t, 0.05, hold=True, tau_ext=back, velocity=-0.3 * MOTION)
    assert pushed[-1] == pytest.approx(-0.6)
    assert scaling.push(back) == pytest.approx(-8.0)

    strong, t = run(scaling, t, 0.01, hold=True, tau_ext=5 * back, velocity=-MOTION)
    assert strong[-1] == -1.0  # clipped

    released, t = run(scaling, t, 0.05, hold=True, tau_ext=0.5 * direction, velocity=0 * MOTION)
    assert released[-1] == 0.0  # the person let go but the contact is still there

    recovering, t = run(scaling, t, 0.6, hold=False, tau_ext=np.zeros(3), velocity=MOTION)
    assert recovering[0] == pytest.approx(2.0 * DT)  # from 0, not from the negative value
    assert np.all(np.diff(recovering) >= 0)
    assert recovering[249] == pytest.approx(0.5, abs=2 * DT * 2.0)
    assert recovering[-1] == 1.0


def test_a_push_along_the_motion_or_without_torque_only_holds():
    scaling = TimeScaling(TimeScalingConfig(alpha=1.0, push_threshold=1.0))
    run(scaling, 0.0, 0.01, hold=False, velocity=MOTION)
    forward = 10 * MOTION / np.linalg.norm(MOTION)
    assert scaling.update(0.02, hold=True, tau_ext=forward) == 0.0
    assert scaling.update(0.03, hold=True, tau_ext=None) == 0.0


def test_no_yield_before_any_motion_gave_a_direction():
    scaling = TimeScaling()
    assert scaling.update(0.0, hold=True, tau_ext=np.array([-50.0, 0, 0])) == 0.0


@pytest.mark.parametrize('kwargs', [{'alpha': -1.0}, {'recovery_rate': 0.0},
                                    {'push_threshold': np.nan}])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ValueError):
        TimeScalingConfig(**kwargs)
