"""How hard a contact pushes, from τ_ext alone, cheap enough for every sample of a contact
(issue 29: touch classification's rules in newtons; core/chain/contact_class.py).

Isolation (seed 000 eq. 13.1): the contacted link is the one the last joint with
|τ_ext,i| ≥ δ_τ moves (`isolation_torque`): joints beyond the contact feel nothing.

Identification: a force F ON the robot at a point p of link k gives τ_ext = J_k(p)ᵀF (the
project's sign convention, DEVELOPERS.md; seed 000 eq. 3 in 3D). The point is unknown, so F
is written as the wrench [F; M] at the link's nominal point c (the centre of mass of what the
joint moves, which lies on the link's body: its origin often lies on a joint axis, where a
force would load no joint) and solved from the k torques upstream of the link by least
squares (seed 000 eqs. 8–10, the extended system, in 3D):

    τ_ext,1..k = J_k(c)ᵀ [F; M],   minimising ‖F‖² + ‖M / spread‖² among its solutions.

With k ≥ 6 joints upstream (links 6 and 7 of a 7-axis arm; rank 6) the wrench is unique and
F is exact wherever on the link the contact is (seed 000 statement 2). With fewer the
torques are moments only, and F trades against its lever arm: the weight takes the force at
c with the least moment about it, i.e. a contact about `spread` from c. A contact farther
from the joints than that is over-estimated (a touch may be taken for an impact: safe), a
nearer one under-estimated; benchmarks/touch_classification.py measures both on links 2–7.
A force along a line through every loaded joint axis loads no joint and is not seen by any
method from joint torques.

Cost: one Jacobian and one k×6 least squares per sample, and only while a contact is going
on (the classifier calls it from its onset ratio on); nothing without a contact.
"""
from __future__ import annotations

import math

import numpy as np

from contact_estimation.core.robot.robot_model import LINK_FRAME, RobotModel


# Directions of the least squares whose singular value is under this share of the largest
# are left out (truncated SVD): at a singularity (two joint axes aligned: the Panda's 1 and 3
# at q2 = 0) they would turn noise into hundreds of newtons (a lever arm of a few mm against
# the arm's ~0.7 m); near one (the wrist at q5 ≈ 0.1: 1/60 of the largest) they are kept,
# or the force on links 6 and 7 would no longer be exact.
SINGULAR_SHARE = 0.005


class ContactForce:
    """F of the contact going on (module docstring), link by link."""

    def __init__(self, robot: RobotModel, spread: float, isolation_torque: float):
        for name, value in (('spread', spread), ('isolation_torque', isolation_torque)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f'touch.{name} = {value}: must be finite and > 0')
        self.robot = robot
        self.isolation_torque = isolation_torque
        # [F; M/spread] → [F; M]: the weighted least squares as a plain minimum-norm one.
        self._scale = np.concatenate([np.ones(3), np.full(3, spread)])
        self.nominal = {link: nominal_point(robot, link) for link in robot.joint_links}

    def estimate(self, q: np.ndarray, tau_ext: np.ndarray,
                 seen: int = -1) -> tuple[int, np.ndarray]:
        """The joint that moves the contacted link and the force on that link (N, in its
        frame) at joint positions `q`; (-1, 0) when no joint reaches the isolation torque.

        `seen`: the last joint found loaded earlier in the same contact. The link is never
        taken nearer the base than that (eq. 13.1 bounds k from below; a joint whose torque
        dips under δ_τ in noise does not move the contact, and the force does not jump).
        """
        loaded = np.flatnonzero(np.abs(tau_ext) >= self.isolation_torque)
        k = max(int(loaded[-1]) if loaded.size else -1, seen)
        if k < 0:
            return k, np.zeros(3)
        link = self.robot.joint_links[k]
        jacobian = self.robot.jacobian(q, link, self.nominal[link], frame=LINK_FRAME)
        weighted = jacobian[:, :k + 1].T * self._scale
        wrench = np.linalg.lstsq(weighted, tau_ext[:k + 1], rcond=SINGULAR_SHARE)[0]
        return k, wrench[:3]


def nominal_point(robot: RobotModel, link: str) -> np.ndarray:
    """The centre of mass of the body the joint moving `link` carries, in `link`'s frame (m)."""
    frame = robot.model.frames[robot.frame_id(link)]
    return np.asarray(frame.placement.actInv(robot.model.inertias[frame.parentJoint].lever))
