"""Joint friction models f(q̇) (N·m from rad/s), each a function of a parameter vector.

- `continuous` (seed 001 eq. 23, after Makkar et al.):
  f(v) = γ₁ (tanh(γ₂ v) − tanh(γ₃ v)) + γ₄ tanh(γ₅ v) + γ₆ v
  Stribeck hump (γ₁, γ₂, γ₃) + Coulomb (γ₄, γ₅) + viscous (γ₆); γ₁ + γ₄ ≈ static friction
  (seed 001 eq. 24 splits it into these three terms).
- `coulomb_viscous`: f(v) = f_c sign(v) + f_v v, the baseline of seed 001 Table 3; sign is
  smoothed as tanh(v / v_eps) with v_eps = 1e-3 rad/s so the model is continuous too.
- `stribeck` (static LuGre): f(v) = (f_c + (f_s − f_c) exp(−(v/v_s)²)) sign(v) + f_v v.

Friction opposes motion: in M q̈ + C q̇ + g + f(q̇) = τ + τ_ext it is on the dissipative side.

Each parameter's unit says what kind of quantity it is, which is what the multi-start fits of
core/identification/identification.py use to draw starting points: N·m an amplitude, s/rad a rate
constant
(inside tanh), rad/s a characteristic speed, N·m·s/rad a viscous coefficient.

A model with k parameters needs friction measured at no fewer than k distinct speeds
(`FrictionModel.minimum_speeds`); fewer leave it underdetermined.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_SIGN_SMOOTHING = 1e-3  # rad/s


def continuous(v, g1, g2, g3, g4, g5, g6):
    """Seed 001 eq. 23."""
    return g1 * (np.tanh(g2 * v) - np.tanh(g3 * v)) + g4 * np.tanh(g5 * v) + g6 * v


def coulomb_viscous(v, fc, fv):
    return fc * np.tanh(v / _SIGN_SMOOTHING) + fv * v


def stribeck(v, fc, fs, vs, fv):
    return (fc + (fs - fc) * np.exp(-(v / vs) ** 2)) * np.tanh(v / _SIGN_SMOOTHING) + fv * v


@dataclass(frozen=True)
class FrictionModel:
    """A model's function with its parameter names, units, and fitting bounds."""

    name: str
    function: object
    parameters: tuple[str, ...]
    units: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]

    @property
    def minimum_speeds(self) -> int:
        """Distinct swept speeds needed to determine the parameters: one per parameter."""
        return len(self.parameters)

    def __call__(self, v, params) -> np.ndarray:
        params = np.asarray(params, dtype=float)
        if params.shape != (len(self.parameters),):
            raise ValueError(f'{self.name} friction takes {len(self.parameters)} parameters '
                             f'({", ".join(self.parameters)}), got {params.size}')
        return self.function(np.asarray(v, dtype=float), *params)


MODELS = {
    'continuous': FrictionModel(
        'continuous', continuous, ('gamma1', 'gamma2', 'gamma3', 'gamma4', 'gamma5', 'gamma6'),
        ('N·m', 's/rad', 's/rad', 'N·m', 's/rad', 'N·m·s/rad'),
        (0.0, 0.0, 0.0, 0.0, 1.0, 0.0), (50.0, 2000.0, 2000.0, 50.0, 2000.0, 50.0)),
    'coulomb_viscous': FrictionModel(
        'coulomb_viscous', coulomb_viscous, ('coulomb', 'viscous'), ('N·m', 'N·m·s/rad'),
        (0.0, 0.0), (50.0, 50.0)),
    'stribeck': FrictionModel(
        'stribeck', stribeck, ('coulomb', 'static', 'stribeck_velocity', 'viscous'),
        ('N·m', 'N·m', 'rad/s', 'N·m·s/rad'), (0.0, 0.0, 1e-4, 0.0), (50.0, 50.0, 5.0, 50.0)),
}


def get(name: str) -> FrictionModel:
    if name not in MODELS:
        raise ValueError(f'unknown friction model {name!r}; choose one of {", ".join(MODELS)}')
    return MODELS[name]


def joint_friction(model: str | FrictionModel, params: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per-joint friction torque, all joints at once: `params` is n×k (one row per joint),
    `v` has n entries (or N×n samples, evaluated row by row)."""
    m = model if isinstance(model, FrictionModel) else get(model)
    return m.function(np.asarray(v, dtype=float), *np.atleast_2d(params).T)
