"""sensor_msgs/JointState ↔ arrays in model joint order: the one place every node does it."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from sensor_msgs.msg import JointState

from contact_estimation.core.chain.joint_order import JointOrder

FIELDS = ('position', 'velocity', 'effort')


class JointStateError(ValueError):
    """A joint state a node cannot use; `kind` is the problem's count on /diagnostics."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


class JointStateReader:
    """Reads the joint states of one robot's model joints `joint_names`.

    A message without names is taken to be in model order. With `model_order_only`, a message
    must name the model joints in model order (the pipeline's own topics, which the
    listener publishes that way: anything else there is not the listener's); otherwise any
    order is accepted, and extra joints are skipped.
    """

    def __init__(self, joint_names: Sequence[str], model_order_only: bool = False):
        self.joint_names = list(joint_names)
        self._model_order_only = model_order_only
        self._order = JointOrder(self.joint_names)
        self._identity = np.arange(len(self.joint_names))

    @property
    def cached_orders(self) -> int:
        """How many name orders are remembered (bounded)."""
        return self._order.cached

    def order(self, msg: JointState) -> np.ndarray:
        """Rows of the message's values in model order; JointStateError 'wrong_joints'."""
        if self._model_order_only:
            if list(msg.name) == self.joint_names:
                return self._identity
            raise JointStateError('wrong_joints', f'joint state for {list(msg.name)}, expected '
                                  f'{self.joint_names} in that order: dropped')
        if not msg.name:
            return self._identity
        order = self._order.map(msg.name).model_order
        if order is None:
            raise JointStateError('wrong_joints', f'joint state for {list(msg.name)} lacks '
                                  f'some of {self.joint_names}: dropped')
        return order

    def field(self, msg: JointState, name: str, order: np.ndarray) -> np.ndarray | None:
        """Field `name` in model order; None when it does not have one value per name."""
        values = getattr(msg, name)
        if len(values) != (len(msg.name) or len(order)):
            return None
        return np.asarray(values, dtype=float)[order]

    def read(self, msg: JointState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q, q̇, τ) in model order, all finite; JointStateError 'wrong_joints',
        'wrong_sizes' or 'not_finite' otherwise."""
        order = self.order(msg)
        arrays = [self.field(msg, name, order) for name in FIELDS]
        if any(a is None for a in arrays):
            raise JointStateError('wrong_sizes', f'joint state with '
                                  f'{[len(getattr(msg, n)) for n in FIELDS]} '
                                  f'positions/velocities/efforts for {len(order)} joints: dropped')
        if not all(np.isfinite(a).all() for a in arrays):
            raise JointStateError('not_finite', 'joint state with NaN/inf: dropped')
        return arrays[0], arrays[1], arrays[2]


class JointStateWriter:
    """One JointState in model joint order, reused for every sample of a 1 kHz stream.

    `write` copies the stamp and the values into the same message (numpy writes into its
    array.array fields): no per-sample lists or message objects. rclpy serialises a message
    within publish(), so it can be rewritten right after.
    """

    def __init__(self, joint_names: Sequence[str]):
        zeros = [0.0] * len(joint_names)
        self.msg = JointState(name=list(joint_names), position=zeros, velocity=zeros,
                              effort=zeros)
        # Views of the message's own buffers (a field setter copies what it is given).
        self._views = {name: np.frombuffer(getattr(self.msg, name), dtype=float)
                       for name in FIELDS}

    def write(self, stamp, frame_id: str, position: np.ndarray, velocity: np.ndarray,
              effort: np.ndarray | None) -> JointState:
        """The message with this stamp (a builtin_interfaces/Time), frame and values; an
        empty effort field when `effort` is None (a driver without torques: rare)."""
        header = self.msg.header
        header.stamp = stamp
        header.frame_id = frame_id
        self._views['position'][:] = position
        self._views['velocity'][:] = velocity
        if effort is None:
            self.msg.effort = ()
        else:
            if len(self.msg.effort) != len(self.msg.name):
                self.msg.effort = effort.tolist()
                self._views['effort'] = np.frombuffer(self.msg.effort, dtype=float)
            self._views['effort'][:] = effort
        return self.msg
