"""Joint names of a message → model joint indices, cached per name list.

A driver names its joints in every message, in an order of its own (one or two orders in
practice); looking each name up at 1 kHz would cost more than the arithmetic it feeds. The
mapping of each name list is kept; names that keep changing evict the oldest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class NameMapping:
    """Where the model joints sit in a message that names its joints."""

    joints: np.ndarray              # model index of each model joint the message names
    rows: np.ndarray                # the row of each of them in the message
    unknown: tuple[str, ...]        # names neither in the model nor ignored
    model_order: np.ndarray | None  # rows that put the values in model order; None: joints missing


class JointOrder:
    """`map(names)` → NameMapping for the model joints `joint_names`.

    `ignored` names (URDF joints outside the chain, such as gripper fingers) are neither
    mapped nor unknown. A name listed twice maps to its last row.
    """

    def __init__(self, joint_names: Sequence[str], ignored: Sequence[str] = (),
                 cache_size: int = 8):
        self.joint_names = tuple(joint_names)
        self._index = {name: i for i, name in enumerate(self.joint_names)}
        self._ignored = frozenset(ignored) - set(self.joint_names)
        self._cache_size = cache_size
        self._cache: dict[tuple[str, ...], NameMapping] = {}

    def map(self, names: Sequence[str]) -> NameMapping:
        key = tuple(names)
        mapping = self._cache.get(key)
        if mapping is None:
            if len(self._cache) >= self._cache_size:
                self._cache.pop(next(iter(self._cache)))
            mapping = self._cache[key] = self._build(key)
        return mapping

    @property
    def cached(self) -> int:
        """How many name lists are remembered."""
        return len(self._cache)

    def _build(self, names: tuple[str, ...]) -> NameMapping:
        rows = np.array([r for r, name in enumerate(names) if name in self._index], dtype=int)
        joints = np.array([self._index[names[r]] for r in rows], dtype=int)
        unknown = tuple(n for n in names if n not in self._index and n not in self._ignored)
        model_order = None
        if len(set(joints.tolist())) == len(self.joint_names):
            model_order = np.empty(len(self.joint_names), dtype=int)
            model_order[joints] = rows
        return NameMapping(joints, rows, unknown, model_order)
