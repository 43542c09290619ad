"""Impact or touch (core/chain/contact_class.py) inside the detector: a slow smooth push is a
touch and latches nothing; a fast one, a rough one, one against a fast motion or one beyond
max_torque is an impact, stopped on the very sample it is stopped on with touch off."""

import numpy as np
import pytest

from contact_estimation.core.chain.contact_class import IMPACT, TOUCH, TouchConfig
from contact_estimation.core.chain.detector import COLLISION, CollisionDetector, DetectorConfig

NAMES = ('j1', 'j2', 'j3')
DT = 0.001
ON = TouchConfig(enabled=True)


def ramp(rise: float, peak: float, hold: float = 0.3, joint: int = 1, noise: float = 0.0,
         seed: int = 0) -> np.ndarray:
    """τ_ext rows at 1 kHz: 50 ms quiet, a linear rise to `peak` N·m over `rise` s on `joint`,
    then `hold` s at the peak."""
    steps = np.concatenate([np.zeros(50), np.linspace(0, peak, int(round(rise / DT)) + 1),
                            np.full(int(round(hold / DT)), peak)])
    tau = np.zeros((steps.size, len(NAMES)))
    tau[:, joint] = steps + np.random.default_rng(seed).normal(0, noise, steps.size)
    return tau


def run(tau, touch=ON, velocity=None):
    detector = CollisionDetector(DetectorConfig.build(NAMES), touch)
    return [detector.update(k * DT, row, velocity) for k, row in enumerate(tau)]


def first(states, what) -> int | None:
    return next((k for k, s in enumerate(states) if what(s)), None)


def decisions(states):
    return [(k, s.decision) for k, s in enumerate(states) if s.decision is not None]


def test_a_slow_smooth_push_is_a_touch_that_holds_without_a_stop():
    states = run(ramp(0.5, 8.0, noise=0.08))
    assert not any(s.stop for s in states)
    (k, decision), = decisions(states)
    assert decision.kind == TOUCH and states[k].contact and states[k].touch
    assert 0.0 < decision.delay < 0.5 and decision.rise_rate < ON.max_rise_rate
    assert states[-1].contact and states[-1].touch  # f_S keeps holding while it is pushed


@pytest.mark.parametrize('rise, peak', [(0.0, 8.0), (0.02, 6.0), (0.05, 4.5)])
def test_a_fast_push_is_an_impact_stopped_on_the_same_sample_as_with_touch_off(rise, peak):
    tau = ramp(rise, peak, noise=0.08)
    off, on = run(tau, TouchConfig()), run(tau)
    stop = first(off, lambda s: s.stop)
    assert stop is not None and first(on, lambda s: s.stop) == stop
    assert on[stop].cause == COLLISION and 'impact' in on[stop].reason
    (k, decision), = decisions(on)
    assert k == stop and decision.kind == IMPACT and 'rose at' in decision.reason


def test_touch_off_runs_no_classifier_and_changes_nothing():
    tau = ramp(0.5, 8.0)
    off = run(tau, TouchConfig())
    assert first(off, lambda s: s.stop) is not None
    assert not any(s.touch or s.decision for s in off)


def test_a_touch_that_grows_beyond_max_torque_latches_an_impact():
    tau = np.concatenate([ramp(0.5, 8.0, hold=0.1), ramp(0.5, 12.0)[50:] + [0, 8.0, 0]])
    tau[tau[:, 1] > 12.0, 1] = 12.0
    states = run(tau)
    (k_touch, touch), (k_impact, impact) = decisions(states)
    assert touch.kind == TOUCH and impact.kind == IMPACT
    assert 'max_torque' in impact.reason
    assert first(states, lambda s: s.stop) == k_impact
    assert abs(states[k_impact].residuals[1]) > ON.max_torque


def test_a_smooth_push_with_ringing_is_an_impact():
    tau = ramp(0.5, 8.0)
    k = np.arange(len(tau))
    tau[:, 1] += 1.5 * np.sin(2 * np.pi * 40 * k * DT) * (tau[:, 1] > 2.0)
    states = run(tau)
    decision = decisions(states)[0][1]
    assert decision.kind == IMPACT and 'high-frequency' in decision.reason
    assert states[first(states, lambda s: s.decision is not None)].stop


def test_a_slow_push_against_a_fast_motion_is_an_impact_and_along_it_a_touch():
    tau = ramp(0.5, 8.0)
    against = run(tau, velocity=np.array([0.0, -1.0, 0.0]))
    along = run(tau, velocity=np.array([0.0, 1.0, 0.0]))
    assert decisions(against)[0][1].kind == IMPACT and any(s.stop for s in against)
    assert decisions(along)[0][1].kind == TOUCH and not any(s.stop for s in along)
    assert decisions(along)[0][1].power > 0


def test_a_released_touch_ends_the_contact_and_the_next_one_is_decided_anew():
    push = ramp(0.5, 8.0, hold=0.1)
    release = push[::-1]
    states = run(np.concatenate([push, release, ramp(0.0, 8.0)]))
    kinds = [d.kind for _, d in decisions(states)]
    assert kinds == [TOUCH, IMPACT]
    assert any(s.stop for s in states)


@pytest.mark.parametrize('field, value', [('onset_ratio', 1.0), ('max_rise_rate', 0.0),
                                          ('window', float('nan')), ('slope_time', 0.1)])
def test_bad_touch_settings_are_refused_naming_them(field, value):
    with pytest.raises(ValueError, match=field):
        TouchConfig(**{field: value})
