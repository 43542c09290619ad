"""The chain's compiled per-sample kernels (issue 35, core/compiled.py) against their formulas
written here in numpy: eq. 7's sample (core/chain/detector.py) and f_S's update
(core/chain/time_scaling.py), on random input and on the edges (NaN, inf, q̇ or q̈ unknown,
Δt 0, the first sample, gaps and time going back)."""
import math

import numpy as np
import pytest

from contact_estimation.core.chain.detector import (CAP, EVIDENCE, MISSING, OVER_SAMPLES,
                                                    OVER_TIME, QUIET_TIME, CollisionDetector,
                                                    DetectorConfig, _eq7_sample, thresholds)
from contact_estimation.core.chain.time_scaling import TimeScaling, TimeScalingConfig

N = 7
rng = np.random.default_rng(35)


def _term(kind: str) -> np.ndarray | None:
    """A q̇ or q̈: None (unknown), random, huge, or random with a NaN or ±inf."""
    if kind == 'none':
        return None
    term = rng.normal(0.0, 2.0, N) if kind != 'huge' else np.full(N, 1e300)
    if kind in ('nan', 'inf'):
        term[rng.integers(N)] = np.nan if kind == 'nan' else rng.choice([np.inf, -np.inf])
    return term


def _tau(kind: str) -> np.ndarray:
    tau = rng.normal(0.0, 6.0, N)
    if kind == 'zero':
        tau[:] = 0.0
    elif kind in ('nan', 'inf'):
        tau[rng.integers(N)] = np.nan if kind == 'nan' else -np.inf
    return tau


@pytest.mark.parametrize('persistence', ['consecutive', 'weighted'])
@pytest.mark.parametrize('gains', [(0.0, 0.0), (0.7, 0.0), (0.0, 0.05), (2.0, 0.3)])
def test_eq7_sample_is_the_formula(persistence, gains):
    """ψ, |τ|/ψ, their max, the flags over ψ and the runs, bit for bit, sample after sample;
    a sample that is not finite changes nothing but ψ and the ratios."""
    config = DetectorConfig.build([f'j{i}' for i in range(N)], speed_gain=gains[0],
                                  acceleration_gain=gains[1], threshold_max=12.0,
                                  thresholds_position=rng.uniform(2.0, 8.0, N).tolist(),
                                  persistence=persistence)
    half = 0.5 * config.persistence_time
    runs, over = np.zeros(4), np.zeros(N, dtype=bool)
    expected = [0.0, 0, 0.0, 0.0]
    psi, ratios = np.empty(N), np.empty(N)
    kinds = ['random'] * 6 + ['none', 'huge', 'nan', 'inf']
    for k in range(2000):
        velocity, acceleration = _term(rng.choice(kinds)), _term(rng.choice(kinds))
        tau = _tau(rng.choice(['random'] * 8 + ['zero', 'nan', 'inf']))
        dt = float(rng.choice([0.0, 1e-3, rng.uniform(0.0, 0.02), 1e-9]))
        before_over, before_runs = over.copy(), runs.copy()
        ratio = _eq7_sample(tau, MISSING if velocity is None else velocity,
                            MISSING if acceleration is None else acceleration, config.limits,
                            dt, persistence == 'weighted', config.persistence_time, psi,
                            ratios, over, runs)
        with np.errstate(over='ignore', invalid='ignore'):
            formula = thresholds(config.base_thresholds, config.speed_gain,
                                 config.acceleration_gain, config.threshold_max, velocity,
                                 acceleration)
        np.testing.assert_array_equal(psi, formula)
        assert np.all(np.isfinite(psi)) and np.all(psi <= config.limits[CAP])
        np.testing.assert_array_equal(ratios, np.abs(tau) / formula)
        np.testing.assert_array_equal(ratio, np.max(np.abs(tau) / formula))
        if not np.isfinite(tau).all():
            assert not math.isfinite(ratio)
            np.testing.assert_array_equal(over, before_over)
            np.testing.assert_array_equal(runs, before_runs)
            continue
        np.testing.assert_array_equal(over, np.abs(tau) / formula > 1.0)
        if ratio > 1.0:
            weight = ratio * ratio if persistence == 'weighted' else 1.0
            expected = [expected[0] + min(dt * weight, half), expected[1] + 1,
                        expected[2] + dt, 0.0]
        else:
            expected = [0.0, 0, 0.0, expected[3] + dt]
        assert [runs[EVIDENCE], runs[OVER_SAMPLES], runs[OVER_TIME], runs[QUIET_TIME]] == \
            expected, k


class FormulaScaling:
    """f_S's update as the module docstring of core/chain/time_scaling.py gives it, in numpy."""

    def __init__(self, config: TimeScalingConfig):
        self.config, self.value, self.direction = config, 1.0, None
        self.push_back = self.played_push = 0.0
        self.t, self.last_hold = None, -np.inf

    def update(self, t, contact, tau_ext, velocity):
        c = self.config
        dt = 0.0 if self.t is None else max(t - self.t, 0.0)
        self.t = t
        if tau_ext is None:
            self.last_hold, self.value = t, 0.0
            return 0.0
        push = 0.0 if self.direction is None else float(np.dot(tau_ext, self.direction))
        gain = 1.0 - np.exp(-dt / c.push_filter_time) if c.push_filter_time > 0 else 1.0
        self.push_back += gain * (-push - self.push_back)
        h = c.push_hysteresis / 2
        self.played_push = np.clip(self.played_push, self.push_back - h, self.push_back + h)
        if contact:
            self.last_hold = t
        holding = t - self.last_hold < c.resume_delay or self.last_hold == t
        if holding and self.push_back < -(c.push_threshold + h):
            self.value = 0.0
        else:
            beyond = self.played_push - c.push_threshold
            target = (-np.minimum(1.0, c.alpha * beyond) if beyond > 0 else 0.0) if holding \
                else 1.0
            value = 0.0 if target < self.value and self.value > 0 else self.value
            if value < 0 or target < 0:
                step = c.yield_rate * dt
                value = np.clip(target, value - step, min(value + step, 0.0))
            else:
                value = min(target, value + c.recovery_rate * dt)
            self.value = float(value)
        if velocity is not None and self.value >= 1.0:
            speed = np.linalg.norm(velocity)
            if np.isfinite(speed) and speed > c.min_speed:
                self.direction = velocity / speed
        return self.value


@pytest.mark.parametrize('config', [
    TimeScalingConfig(), TimeScalingConfig(push_filter_time=0.0, resume_delay=0.0),
    TimeScalingConfig(alpha=1.0, push_threshold=0.5, push_hysteresis=0.0, recovery_rate=5.0)])
def test_time_scaling_step_is_the_formula(config):
    """f_S, P, P̃ and the direction after each update of a random run: contacts coming and
    going, pushes back and forward, unusable input, q̇ unknown or not finite, Δt 0, gaps and
    time going back; the first update has no Δt."""
    scaling, formula = TimeScaling(config), FormulaScaling(config)
    path = rng.normal(0.0, 1.0, N)
    t, contact = 0.0, False
    for k in range(5000):
        t += float(rng.choice([1e-3, 1e-3, 1e-3, 0.0, 0.2, -0.05, 0.004]))
        contact = contact != (rng.random() < 0.02)
        push = rng.choice([0.0, -3.0, -12.0, 4.0]) if contact else 0.0
        tau = None if rng.random() < 0.02 else push * path / np.linalg.norm(path) + \
            rng.normal(0.0, 0.5, N)
        velocity = [None, path * rng.uniform(0.0, 2.0), path * 1e-5, np.full(N, np.nan)][
            rng.choice(4, p=[0.1, 0.8, 0.05, 0.05])]
        got = scaling.update(t, contact, tau, velocity)
        expected = formula.update(t, contact, tau, velocity)
        assert got == pytest.approx(expected, abs=1e-12), k
        assert scaling.push_back == pytest.approx(formula.push_back, abs=1e-12)
        assert scaling.played_push == pytest.approx(formula.played_push, abs=1e-12)
        if formula.direction is None:
            assert scaling.direction is None
        else:
            np.testing.assert_allclose(scaling.direction, formula.direction, atol=1e-15)


def test_time_scaling_refuses_a_sample_of_another_size():
    """The kernel checks no bounds: τ_ext or q̇ of another joint count is refused."""
    scaling = TimeScaling()
    scaling.update(0.0, False, np.zeros(3), np.ones(3))
    for tau, velocity in ((np.zeros(4), None), (np.zeros(3), np.ones(2))):
        with pytest.raises(ValueError, match='values, f_S follows 3 joints'):
            scaling.update(0.001, False, tau, velocity)


def test_detector_refuses_a_sample_of_another_size():
    detector = CollisionDetector(DetectorConfig.build(['a', 'b', 'c']))
    for values in ({'tau_ext': np.zeros(4)}, {'tau_ext': np.zeros(3), 'velocity': np.ones(2)},
                   {'tau_ext': np.zeros(3), 'acceleration': np.ones(5)}):
        with pytest.raises(ValueError, match='values, the detector 3 joints'):
            detector.update(0.0, **values)
