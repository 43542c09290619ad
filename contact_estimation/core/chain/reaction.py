"""The reaction to a contact: what the arm does besides the latched stop, as one interface.

The stop (core/chain/detector.py, published by ros/stop_signal.py) is the safety signal: it
stays raised until it is reset. A reaction follows the contact itself and gives the speed
scale a controller plays its trajectory at (the detector's `time_scaling` topic,
std_msgs/Float64): 1 tracks the path, 0 holds, a negative value goes back along it. The
collision detector node (nodes/collision_detector.py) holds one `Reaction`, calls `react` on
every residual sample (and on its watchdog while the input is unusable, with τ_ext None),
publishes what it returns when it is worth sending (core/chain/time_scaling.worth_publishing),
and replaces its `config` when a parameter feeding it changes at run time.

Seed 003's time scaling (core/chain/time_scaling.TimeScaling) is the one the node uses
(`REACTION` in its module). Another reaction is a class with this interface beside it in
core/chain/, whose CONFIG is a frozen @checked dataclass of setting(...) fields, its defaults
feeding the node's parameter rows; the node then names it as its `REACTION`, with rows for
its config.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:
    from contact_estimation.core.chain.detector import DetectorState


class Reaction(Protocol):
    """A speed scale in [-1, 1] from the detector's state and the sample, updated sample by
    sample; built as `Reaction(CONFIG(...))`."""

    CONFIG: ClassVar[type]
    config: Any  # a CONFIG, replaced at run time

    def react(self, t: float, state: DetectorState, tau_ext: np.ndarray | None,
              velocity: np.ndarray | None) -> float:
        """The speed scale at `t` (s, the node's clock) after `state`, for the sample's τ_ext
        and q̇ (model order; None when unknown or unusable)."""
