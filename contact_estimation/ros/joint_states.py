"""sensor_msgs/JointState ↔ arrays in model joint order: the one place every node does it.

Every node reads a joint state or a residual (a JointState whose effort is τ_ext) with
`JointStateReader.read`; what it cannot use is InputRejected (core/input_rejected.py) with
the same kind in every node: 'wrong_joints', 'wrong_size' or 'not_finite'.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from sensor_msgs.msg import JointState

from contact_estimation.core.chain.joint_order import JointOrder
from contact_estimation.core.input_rejected import (NOT_FINITE, WRONG_JOINTS, WRONG_SIZE,
                                                    InputRejected)

FIELDS = ('position', 'velocity', 'effort')


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
        """Rows of the message's values in model order; InputRejected 'wrong_joints'."""
        if self._model_order_only:
            if list(msg.name) == self.joint_names:
                return self._identity
            raise InputRejected(WRONG_JOINTS, f'joint state for {list(msg.name)}, expected '
                                f'{self.joint_names} in that order: dropped')
        if not msg.name:
            return self._identity
        order = self._order.map(msg.name).model_order
        if order is None:
            raise InputRejected(WRONG_JOINTS, f'joint state for {list(msg.name)} lacks '
                                f'some of {self.joint_names}: dropped')
        return order

    def field(self, msg: JointState, name: str, order: np.ndarray) -> np.ndarray | None:
        """Field `name` in model order; None when it does not have one value per name."""
        values = getattr(msg, name)
        if len(values) != (len(msg.name) or len(order)):
            return None
        return np.asarray(values, dtype=float)[order]

    def read(self, msg: JointState, required: tuple[str, ...] = FIELDS,
             optional: tuple[str, ...] = (), finite: bool = True
             ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
        """(q, q̇, τ) in model order. A `required` field must have one value per joint, and
        be finite when `finite`; an `optional` one is None when it has not, or is not
        finite; a field in neither is None. InputRejected 'wrong_joints', 'wrong_size' or
        'not_finite' otherwise."""
        order = self.order(msg)
        arrays = []
        for name in FIELDS:
            values = (self.field(msg, name, order)
                      if name in required or name in optional else None)
            if name in required:
                if values is None:
                    raise InputRejected(WRONG_SIZE, f'joint state with '
                                        f'{[len(getattr(msg, n)) for n in FIELDS]} '
                                        f'positions/velocities/efforts for {len(order)} '
                                        f'joints, needs {"/".join(required)}: dropped')
                if finite and not np.isfinite(values).all():
                    raise InputRejected(NOT_FINITE, f'joint state with NaN/inf in {name}: '
                                        'dropped')
            elif values is not None and not np.isfinite(values).all():
                values = None
            arrays.append(values)
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
