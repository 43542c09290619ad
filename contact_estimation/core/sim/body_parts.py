"""Body parts as compliant solids of the simulated cell (issue 38; the scripted person of a
scenario, benchmarks/pfl_sim.py): a sphere of mass m_H (ISO/TS 15066 Table A.3,
core/contact/pfl.py BODY_REGIONS) held at its place by a soft spring (a person holds it up:
gravity compensated), its contact with the arm a spring of the region's k.

MuJoCo's soft contact in its direct form, frictionless (condim 1): solref = (−k/μ, −b/μ),
solimp d = 0.99 flat. MuJoCo's solref is a reference acceleration, not a force: the contact
force is μ (k_in r + b_in ṙ) with μ the reduced mass its constraint sees (1/μ = 1/m_R +
1/m_H, m_R the arm's mass at the contact point along the normal, `pfl.effective_mass`), so
k_in = k/μ makes it a spring of k (N/m) between the arm and the part; b: a damping ratio of
CONTACT_DAMPING in the contact's own oscillation (test/test_sim_cobot.py checks the peak force
of a free collision against v √(μ k)).
"""
from __future__ import annotations

import math

import numpy as np

from contact_estimation.core.contact.pfl import BODY_REGIONS, reduced_mass
from contact_estimation.core.sim.scenario import Obstacle

CONTACT_DAMPING = 0.1   # damping ratio of the contact's own oscillation
HOLD_HZ, HOLD_DAMPING = 1.0, 0.5   # the person's hold of the part: natural frequency, ratio
SOLIMP = (0.99, 0.99, 0.001, 0.5, 2.0)


def contact_solref(k: float, mass: float) -> tuple[float, float]:
    """(−k/μ, −b/μ): MuJoCo's direct solref for a spring k (N/m) and damping ratio
    CONTACT_DAMPING between bodies of reduced mass `mass` (module doc)."""
    b = 2 * CONTACT_DAMPING * math.sqrt(k * mass)
    return -k / mass, -b / mass


def compliant_part(name: str, region: str, radius: float, position, robot_mass: float,
                   free: bool = True, rpy=(0.0, 0.0, 0.0), axes: str = 'xyz') -> Obstacle:
    """A sphere with the contact spring of `region` (module doc) for an arm of effective mass
    `robot_mass` (kg) at the contact: free, of mass m_H on its holding spring along `axes`
    (of its frame, turned by `rpy`); else fixed (a part clamped against a table)."""
    body = BODY_REGIONS[region]
    mass = reduced_mass(body.effective_mass, robot_mass) if free else robot_mass
    hold = body.effective_mass * (2 * math.pi * HOLD_HZ) ** 2
    return Obstacle(name, 'sphere', (radius,), np.asarray(position, dtype=float),
                    np.asarray(rpy, dtype=float), mass=body.effective_mass if free else 0.0,
                    spring=hold if free else 0.0,
                    spring_damping=2 * HOLD_DAMPING * math.sqrt(hold * body.effective_mass),
                    solref=contact_solref(body.stiffness, mass), solimp=SOLIMP, condim=1,
                    axes=axes)
