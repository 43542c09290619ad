"""The one value that passes between the nodes of the 1 kHz chain: a joint sample.

The listener makes one per clean joint state; the residual node hands on a new one with
τ_ext to the detector and the estimators (a sample is frozen). Where a node fits q̈ from the
positions anyway (the listener, when the driver gives no q̇; the rnea residual), the sample
carries it on (`Acceleration`), and a node that needs q̈ over the same window takes it. In
composed mode (contact_estimation/composed.py) it goes from node to node by function call within a
process, and from the chain's process to the estimators' through shared memory
(core/chain/sample_ring.py); between separate processes it travels as a
sensor_msgs/JointState (ros/joint_states.py: effort = τ, or τ_ext on the residual topic). A
consumer keeps the object, never its arrays' contents: nobody writes into a sample after
handing it on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


class Acceleration(NamedTuple):
    """q̈ as a node upstream fitted it (core/chain/derivatives.DerivativeEstimator), handed on
    so that q̈ is estimated once per sample (issue 35): a reader that fits over the same
    `window` (s) takes `value` (rad/s², model order; None while that fit has no full window)
    instead of fitting the same positions again."""

    window: float
    value: np.ndarray | None


@dataclass(frozen=True, slots=True)
class JointSample:
    """One joint state in model joint order, SI units, joint side; frozen: a node that adds
    to it (the residual node, τ_ext) hands on a new one."""

    t: float                            # s, the stamp
    q: np.ndarray                       # rad (m for prismatic joints)
    v: np.ndarray                       # rad/s
    tau: np.ndarray | None              # measured joint torque, N·m; None if the driver gives none
    tau_ext: np.ndarray | None = None   # external torque (project sign: J(p)ᵀF), from the residual
    stamp: Any = None                   # the stamp object as received, republished unchanged
    frame_id: str = ''                  # the joint state's frame_id, republished unchanged
    acceleration: Acceleration | None = None  # q̈ where a node upstream fitted it
