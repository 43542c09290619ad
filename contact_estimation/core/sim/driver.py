"""What a real industrial arm's driver makes of its joint states, for the simulated cobot to play.

- Effort from motor current (seed 001 eqs. 1–2): τ_m = k_m i_m, τ = G_m τ_m. The driver
  measures the current i_m = τ / (G_m k_m) with noise and an ADC step and reports
  τ = G_m k_m i_m, so its noise and resolution are amperes scaled to the joint by G_m k_m.
- Samples at irregular periods: each period between two samples is drawn, in whole physics
  steps, uniformly within 1/publish_rate ± `period_jitter`; the stamp is the time the state
  was sampled, so time must be read from the stamps, not counted in samples.
- A few out of order: a sample is held back with probability `reorder_probability` and leaves
  right after the next one.
With the defaults (no `MotorCurrent`, no jitter, no reordering) the stream is a joint torque
sensor's at a fixed rate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contact_estimation.core.chain.joint_state_conditioning import GEAR_RATIOS, TORQUE_CONSTANTS
from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.settings import checked, setting


@dataclass(frozen=True)
@checked
class MotorCurrent:
    """Joint torque as a driver computes it from motor current (seed 001 eqs. 1–2)."""

    torque_constants: tuple = setting((0.1,), 'motor_current: k_m (N·m/A)',
                                      range=TORQUE_CONSTANTS, per_joint=1)
    gear_ratios: tuple = setting((100.0,), 'motor_current: G_m (motor turns per joint turn)',
                                 range=GEAR_RATIOS, per_joint=1)
    noise: float = setting(0.01, 'motor_current: current noise σ (A, Gaussian)',
                           range=(0.0, 100.0), name='current_noise')
    resolution: float = setting(0.01, 'motor_current: ADC step of the current (A); 0 = '
                                'continuous', range=(0.0, 10.0), name='current_resolution')

    def torque_per_ampere(self, joints: int) -> np.ndarray:
        """G_m k_m of every joint (N·m of joint torque per A of motor current)."""
        k_m, g_m = (per_joint(name, values, joints) for name, values in self._per_joint())
        return g_m * k_m

    def _per_joint(self) -> tuple[tuple[str, tuple], ...]:
        """The settings given one for every joint or one per joint, by parameter name."""
        return (('driver.torque_constants', self.torque_constants),
                ('driver.gear_ratios', self.gear_ratios))

    def measured_torque(self, tau: np.ndarray, torque_per_ampere: np.ndarray,
                        standard_normal: np.ndarray) -> np.ndarray:
        """The joint torque the driver reports for the motor torque `tau` (joint side):
        i_m = τ / (G_m k_m) plus `noise` × `standard_normal`, rounded to `resolution`, times
        G_m k_m."""
        current = tau / torque_per_ampere + self.noise * standard_normal
        if self.resolution > 0:
            current = self.resolution * np.round(current / self.resolution)
        return torque_per_ampere * current


@dataclass(frozen=True)
@checked
class DriverTiming:
    """When a joint-state driver samples and in which order its samples leave."""

    period_jitter: float = setting(
        0.0, 'each joint-state period is 1/publish_rate ± this (s, uniform, whole physics '
        'steps); > 0: publish_rate need not divide rate', range=(0.0, 1.0))
    reorder_probability: float = setting(
        0.0, 'share of joint states published right after the next one (out of order)',
        range=(0.0, 1.0))


class DriverStream:
    """The physics steps at which a driver samples the joint state, and the order in which
    its samples leave. Steps are counted from 0, each asked once, in order."""

    def __init__(self, period: float, dt: float, timing: DriverTiming = DriverTiming(),
                 seed: int = 0):
        self.timing = timing
        self.shortest = round((period - timing.period_jitter) / dt)  # physics steps
        self.longest = round((period + timing.period_jitter) / dt)
        if self.shortest < 1:
            raise ValueError(f'a sampling period of {period * 1e3:g} ms minus '
                             f'{timing.period_jitter * 1e3:g} ms of jitter is shorter than one '
                             f'physics step ({dt * 1e3:g} ms)')
        self._rng = np.random.default_rng(seed)
        self._next = 0
        self._held = None

    def due(self, step: int) -> bool:
        """Whether the driver samples at physics step `step`."""
        if step < self._next:
            return False
        self._next = step + int(self._rng.integers(self.shortest, self.longest + 1))
        return True

    def release(self, sample) -> list:
        """The samples that leave once `sample` is taken, in order: usually [sample]; none
        when it is held back; [sample, held] right after one was."""
        held, self._held = self._held, None
        if held is None and self._rng.random() < self.timing.reorder_probability:
            self._held = sample
            return []
        return [sample] if held is None else [sample, held]

    def schedule(self, steps: int) -> np.ndarray:
        """The physics steps 0 … `steps` − 1 (of a fresh stream) that the driver samples, in
        the order their samples leave (`due` and `release` step by step, as the simulated cobot node
        publishes): a recording of every step replayed as this driver delivers it. A sample
        still held back at the end never leaves."""
        return np.array([leaving for step in range(steps) if self.due(step)
                         for leaving in self.release(step)], dtype=int)
