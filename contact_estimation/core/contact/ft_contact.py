"""Contact point and force from the contact wrench at the base (seed 004). No ROS.

Seed 004 (patent CN 106182087 A, ../shared/METHODS.md §004): the F/T sensor under the base,
compensated (core/contact/ft_compensation.py), gives the contact wrench at the base origin,
f_cB = p, τ_cB = c × p for a force p acting ON the robot at c (the project's convention).

`FtContactLocator` turns the contact wrench into a point: c × p = τ_cB leaves the line of
action c = (p × τ_cB)/‖p‖² + λp (eq. 21, rank 5); the contacted body (the links one joint
moves) is given, or chosen by seed 004's current constraint with the torque residual in place
of the motor current (`contacted_joint`); the point is where the line enters that body's
surface (core/robot/body_surfaces.py), so that the force pushes into it, pᵀn < 0 (eq. 24's
normal). With noise the six equations disagree (rank 6); the compatibility analysis of claim
6 solves the six subsystems of five equations with the surface equation, drops the singular
ones, averages the rest and takes the closest surface point (`compatible_wrenches`).

Frames: the base frame of the `RobotModel` (REP 103) unless said otherwise; a body's
surfaces live in the frame of the link its joint moves first (`RobotModel.joint_links`),
and every estimate (a core/contact/contact.Contact) goes out in the frame of the link that
was hit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contact_estimation.core.contact.contact import Contact
from contact_estimation.core.settings import checked, setting
from contact_estimation.core.contact.ft_compensation import FtContactError, cross, finite_rows
from contact_estimation.core.robot.body_surfaces import (EllipsoidSurfaces, MeshSurfaces,
                                                         body_poses)

# Points sampled along a line that misses the body, to find the surface point nearest to it.
_MISS_SAMPLES = 64


# ------------------------------------------------------------ wrench → line → point
def line_of_action(force: np.ndarray, torque: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 21's rank-5 solution: the line c = (p × τ)/‖p‖² + λ p̂ on which c × p = τ.

    `force`, `torque`: …×3. Returns the line's point nearest the origin and its unit
    direction p̂ (…×3 each). Exact when pᵀτ = 0; otherwise it is the least-squares line.
    """
    norm2 = np.einsum('...i,...i->...', force, force)[..., None]
    return cross(force, torque) / norm2, force / np.sqrt(norm2)


def compatible_wrenches(force: np.ndarray, torque: np.ndarray,
                        singular_ratio: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """The compatible (p, τ) of seed 004 claim 6's six subsystems of five equations.

    The six equations f = p, m = c × p can only hold together when pᵀm = 0 (c × p ⊥ p).
    Dropping force equation k leaves p_k free, and pᵀm = 0 fixes it:
    p_k = −Σ_{i≠k} f_i m_i / m_k; dropping moment equation k fixes m_k = −Σ_{i≠k} f_i m_i / f_k
    likewise. Each subsystem, with the surface equation, is then a line of action meeting
    the surface. A subsystem is singular when its divisor is below `singular_ratio` times
    the norm of its vector (|m_k| < ratio ‖m‖, |f_k| < ratio ‖f‖): it is dropped. Returns
    the kept pairs (k×3 forces, k×3 torques; at least one moment subsystem always stays).
    """
    overlap = force * torque  # f_i m_i
    others = overlap.sum() - overlap  # Σ_{i≠k} f_i m_i
    divisors = np.concatenate([torque, force])
    norms = np.repeat([np.linalg.norm(torque), np.linalg.norm(force)], 3)
    keep = np.abs(divisors) > singular_ratio * norms
    wrenches = np.tile(np.concatenate([force, torque]), (6, 1))
    wrenches[[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]] = (-np.tile(others, 2)
                                                        / np.where(keep, divisors, 1.0))
    return wrenches[keep, :3], wrenches[keep, 3:]


def contacted_joint(tau_ext: np.ndarray, threshold) -> int | None:
    """Seed 004's current constraint, with the torque residual for the current: the contact
    is on the body of the highest joint whose |τ_ext| exceeds `threshold` (N·m, one value
    or one per joint, as FtEstimatorConfig.thresholds checked it once) — a contact on body k
    loads joints ≤ k only. None: no joint does."""
    above = np.flatnonzero(np.abs(tau_ext) > threshold)
    return int(above[-1]) if len(above) else None


# ------------------------------------------------------------------------ estimate
@dataclass(frozen=True)
@checked
class FtLocatorConfig:
    """`FtContactLocator`'s settings (the ft_contact_estimator's rows feed them).
    `singular_ratio`: see `compatible_wrenches`; `residual_noise`, `normal_preference` and
    `ambiguity_margin`: the body scores of `FtContactLocator.locate_from_residual`."""

    singular_ratio: float = setting(
        0.1, 'seed 004 claim 6: a 5-equation subsystem whose divisor is below this share of '
        'its vector is dropped', range=(0.0, 0.5))
    min_force: float = setting(
        2.0, 'a weaker contact force (N) gives no estimate: its line of action is too '
        'uncertain', range=(0.1, 1000.0))
    presence_force: float = setting(
        10.0, "a contact force this large (N) is a contact even when no joint's |τ_ext| "
        'reaches contact_threshold (a push on the first link loads no joint but the first, '
        'about its axis only); ≥ min_force', range=(0.1, 1000.0))
    residual_noise: float = setting(
        0.1, "σ of τ_ext in a steady contact (N·m): how much a body's misfit to the residual "
        'counts in choosing it', range=(0.001, 10.0))
    normal_preference: float = setting(
        5.0, 'κ: how strongly a body where the force meets the surface near its normal is '
        'preferred when the residual cannot tell (0 = not at all)', range=(0.0, 100.0))
    ambiguity_margin: float = setting(
        2.0, 'every body whose score is within this of the best one (a likelihood ratio of '
        'e^margin) is listed on /diagnostics as a candidate (candidate_links): the body is '
        'then ambiguous', range=(0.0, 100.0))

    def __post_init__(self):
        if not self.presence_force >= self.min_force:
            raise FtContactError(f'presence_force must be ≥ min_force ({self.min_force} N), '
                                 f'got {self.presence_force}')


class FtContactLocator:
    """Contact wrench at the base origin → contact point and force on one body.

    `model`: an `EllipsoidSurfaces` or `MeshSurfaces`; `config`: `FtLocatorConfig`.
    """

    def __init__(self, model: EllipsoidSurfaces | MeshSurfaces,
                 config: FtLocatorConfig = FtLocatorConfig()):
        self.model = model
        self.robot = model.robot
        self.config = config
        # Constant in each joint's body frame: the joint's axis and a point on it (for
        # `line_torques`), and the pose of every link of the model (for the estimate's frame).
        still = np.zeros(self.robot.n)
        bodies = self.robot.link_poses(still, self.robot.joint_links)
        origins, axes = self.robot.joint_axes(still)
        self._axes = np.array([r.T @ a for (r, _), a in zip(bodies, axes)])
        self._axis_points = np.array([r.T @ (o - p) for (r, p), o in zip(bodies, origins)])
        rotation, position = self.robot.link_pose(still, self.robot.tip_link)
        jacobian = self.robot.jacobian(still, self.robot.tip_link, -rotation.T @ position)
        self._revolute = np.linalg.norm(jacobian[3:], axis=0) > 0.5
        links = {link: None for joint in model.joints for link in model.links(joint)}
        self._placements = {link: pose for links_, poses in body_poses(self.robot, links).values()
                            for link, pose in zip(links_, poses)}

    def locate(self, q: np.ndarray, wrench: np.ndarray, joint: int) -> Contact | None:
        """The contact on the body of `joint` (index in model order) for the contact wrench
        [f_cB; τ_cB] (base origin, base frame, force on the robot); None when the force is
        below `min_force` or the body has no surface."""
        wrench = finite_rows(wrench, 6, 'contact wrench')
        if np.linalg.norm(wrench[:3]) < self.config.min_force or not self.model.links(joint):
            return None
        forces, torques = compatible_wrenches(wrench[:3], wrench[3:],
                                              self.config.singular_ratio)
        pose = self.robot.link_pose(q, self.robot.joint_links[joint])
        starts, headings, entries, _, _ = self._enter([pose], [joint],
                                                      *line_of_action(forces, torques))
        return self._contact(wrench, joint, pose, starts[0], headings[0], entries[0])

    def locate_from_residual(self, q: np.ndarray, wrench: np.ndarray, tau_ext: np.ndarray,
                             threshold) -> Contact | None:
        """The contact, its body chosen with the torque residual τ_ext (project sign).

        Seed 004's current constraint says a contact is present (some |τ_ext| exceeds
        `threshold`, one value or one per joint) and, in its strict form, that the body is
        that of the highest such joint (`contacted_joint`). The sensor itself says so too
        when the contact force reaches `presence_force` (N): a push on the first link loads
        no joint but the first, and that one only about its axis, so τ_ext may never see it. That
        form fails whenever the line
        of action passes near the axes of the joints above the body — a push square to a
        link that turns about its own axis loads its joint not at all. So every body j the
        line enters is scored, and the least score wins:

            misfit_j / (2σ²) + κ (1 − cos θ_j)

        misfit_j: how badly a contact on body j explains τ_ext. It gives τ_ext,i = τ_L,i
        (`line_torques`, the same anywhere on the line) for i ≤ j and 0 above:
        Σ_{i≤j} (τ_ext,i − τ_L,i)² + Σ_{i>j} τ_ext,i²; σ = `residual_noise` (N·m), so this
        term is the negative log-likelihood of Gaussian residual noise. θ_j: the angle
        between the force and the inward normal where the line enters body j; κ =
        `normal_preference`, a prior that contact forces lie near the normal (inside a
        friction cone). It decides when τ_ext cannot: a line through the axes of the
        joints between two bodies loads them alike. When the line enters no body: that of
        `contacted_joint`, its surface point nearest the line (None when no joint is loaded). Every
        body whose score is
        within `ambiguity_margin` of the least (a likelihood ratio of e^margin) is a
        candidate: its link where the line enters it goes into `ambiguous_with`, best first.

        One cast serves all: the least-squares line (scores) and claim 6's subsystem lines
        (the point), each in every body's frame.
        """
        lowest = contacted_joint(tau_ext, threshold)
        wrench = finite_rows(wrench, 6, 'contact wrench')
        force = np.linalg.norm(wrench[:3])
        settings = self.config
        if force < settings.min_force or (lowest is None and force < settings.presence_force):
            return None
        forces, torques = compatible_wrenches(wrench[:3], wrench[3:], settings.singular_ratio)
        origins, directions = line_of_action(np.vstack([wrench[:3], forces]),
                                             np.vstack([wrench[3:], torques]))
        joints = self.model.joints
        every_body = self.robot.link_poses(q, self.robot.joint_links)
        poses = [every_body[j] for j in joints]
        starts, headings, entries, links, normals = self._enter(poses, joints, origins,
                                                                directions)
        entered = np.isfinite(entries[:, 0, 0])
        if not entered.any():
            return None if lowest is None else self.locate(q, wrench, lowest)
        explained = np.cumsum((tau_ext - self.line_torques(q, wrench, every_body)) ** 2)
        unexplained = np.cumsum((tau_ext ** 2)[::-1])[::-1]
        misfit = np.append(explained[:-1] + unexplained[1:], explained[-1])[list(joints)]
        cosines = -np.einsum('bi,bi->b', normals[:, 0], headings[:, 0])
        score = np.where(entered, misfit / (2.0 * settings.residual_noise ** 2)
                         + settings.normal_preference * (1.0 - cosines), np.inf)
        order = np.argsort(score)
        b = int(order[0])
        close = [int(c) for c in order if score[c] <= score[b] + settings.ambiguity_margin]
        others = [self.model.links(joints[c])[links[c, 0]] for c in close[1:]]
        return self._contact(wrench, joints[b], poses[b], starts[b, 1:], headings[b, 1:],
                             entries[b, 1:], others)

    def _enter(self, poses, joints, origins, directions):
        """Lines (N×3 points, unit directions, base frame) in the frames of the bodies of
        `joints` (B, their poses (R, p) in `poses`), and where each enters each body: the
        lines (B×N×3 twice), the entry points (B×N×3, NaN on a miss), the links entered
        (B×N indices into each body's links, -1 on a miss) and the normals there."""
        rotations = np.array([rotation for rotation, _ in poses])
        positions = np.array([position for _, position in poses])
        starts = np.einsum('bji,bnj->bni', rotations, origins[None] - positions[:, None])
        headings = np.einsum('bji,nj->bni', rotations, directions)
        entries, links, normals = self.model.first_entry(joints, starts, headings)
        return starts, headings, entries, links, normals

    def _contact(self, wrench, joint, pose, origins, directions, entries,
                 others=()) -> Contact:
        """The contact on the body of `joint` (pose (R, p)) from claim 6's lines (N×3, body
        frame) and where they enter it: the mean entry projected onto the surface, or the
        surface point nearest the last line when none enters. `others`: the links of the
        other candidate bodies."""
        hit = np.isfinite(entries[:, 0])
        if hit.any():
            mean = entries[hit].mean(axis=0, keepdims=True)
        else:
            mean = self._nearest_to_line(joint, origins[-1], directions[-1])
        point, link_index, _ = self.model.closest(joint, mean)
        link = self.model.links(joint)[int(link_index[0])]
        body_rotation, body_position = pose
        rotation, position = self._placements[link]  # the link in the body frame
        force = wrench[:3]
        return Contact(link, rotation.T @ (point[0] - position),
                       rotation.T @ (force @ body_rotation),
                       body_rotation @ point[0] + body_position, force.copy(), tuple(others))

    def line_torques(self, q: np.ndarray, wrench: np.ndarray, bodies=None) -> np.ndarray:
        """τ_i = J_iᵀ[f; m] for every joint i: the joint torques the contact wrench would
        cause if every joint carried it: a_i·(m − o_i × f) for a revolute joint i with axis
        a_i through o_i, a_i·f for a prismatic one. `bodies`: the poses of the joints' body
        frames at q (`RobotModel.joint_links`), when already known."""
        force, torque = np.split(finite_rows(wrench, 6, 'contact wrench'), 2)
        if bodies is None:
            bodies = self.robot.link_poses(q, self.robot.joint_links)
        rotations = np.array([rotation for rotation, _ in bodies])
        positions = np.array([position for _, position in bodies])
        axes = np.einsum('nij,nj->ni', rotations, self._axes)
        on_axes = np.einsum('nij,nj->ni', rotations, self._axis_points) + positions
        moments = np.einsum('ni,ni->n', axes, torque - cross(on_axes, force))
        return np.where(self._revolute, moments, axes @ force)

    def _nearest_to_line(self, joint, origin, direction):
        """The surface point nearest to a line that misses the body: the line sampled over
        ±1 m around its point nearest the body frame's origin."""
        along = np.linspace(-1.0, 1.0, _MISS_SAMPLES)
        samples = origin - (origin @ direction) * direction + along[:, None] * direction
        points, _, distance = self.model.closest(joint, samples)
        return points[np.argmin(distance)][None]


