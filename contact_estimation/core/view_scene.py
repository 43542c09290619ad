"""What the live view (`contact-estimation view`) shows, as plain arrays (`ViewFrame`), and
the same frame as Foxglove messages (FrameTransforms, SceneUpdate, JSON); `draw_scene` draws
a SceneUpdate with matplotlib, so that the README's picture is made from the messages the 3D
panel gets (recorded by `view --mcap`: contact_estimation/view_picture.py).

Everything is in the robot's base frame: the arm as a line through its link origins with a
sphere at each, each contact (the fused estimate, the F/T estimate, the simulator's truth) as
an arrow of the force on the robot ending at the contact point, and the proximity monitor's
spheres (the person's body parts, the robot's parts) in the colours of its markers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from foxglove import messages as fm
from scipy.spatial.transform import Rotation

ARROW_PER_NEWTON = 0.005  # m of arrow per N of force, as the rviz markers draw it
ARROW_SHAFT = 0.012       # m
LINK_THICKNESS = 0.06     # m: the arm's line
JOINT_SPHERE = 0.08       # m
ARM_COLOUR = (0.55, 0.6, 0.68, 1.0)
STOPPED_ARM_COLOUR = (0.85, 0.25, 0.25, 1.0)
# Contact sources: the topic prefix's name in the view, its colour and its label.
CONTACT_SOURCES = {
    'fused': ((0.9, 0.1, 0.1, 1.0), 'estimate (fused)'),
    'ft': ((1.0, 0.55, 0.0, 1.0), 'estimate (F/T)'),
    'truth': ((0.1, 0.75, 0.2, 1.0), 'sim truth'),
}


@dataclass(frozen=True)
class ContactArrow:
    """A contact in the base frame: where it acts and the force on the robot (N), stamped
    as its estimate (or the truth) was (s)."""

    source: str   # a key of CONTACT_SOURCES
    link: str
    point: np.ndarray
    force: np.ndarray
    stamp: float

    @property
    def tail(self) -> np.ndarray:
        """Where the arrow starts: the push comes from outside and ends at the point."""
        return self.point - ARROW_PER_NEWTON * self.force


@dataclass(frozen=True)
class Sphere:
    """A proximity sphere (a body part or a part of the robot) in the base frame."""

    group: str    # the marker namespace it came from
    centre: np.ndarray
    diameter: float
    rgba: tuple[float, float, float, float]


@dataclass
class ViewFrame:
    """One frame of the view: the arm's link poses and the latest values, stamped `stamp` (s,
    of the joint state the pose came from)."""

    base_link: str
    stamp: float = 0.0
    links: list[str] = field(default_factory=list)
    rotations: list[np.ndarray] = field(default_factory=list)     # of each link, base frame
    origins: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    stop: bool | None = None
    contacts: list[ContactArrow] = field(default_factory=list)
    spheres: list[Sphere] = field(default_factory=list)


def _point(xyz) -> fm.Vector3:
    return fm.Vector3(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def _quaternion(rotation: np.ndarray) -> fm.Quaternion:
    x, y, z, w = Rotation.from_matrix(rotation).as_quat()
    return fm.Quaternion(x=float(x), y=float(y), z=float(z), w=float(w))


def _pose(position, rotation: np.ndarray | None = None) -> fm.Pose:
    return fm.Pose(position=_point(position),
                   orientation=_quaternion(np.eye(3) if rotation is None else rotation))


def _colour(rgba) -> fm.Color:
    return fm.Color(r=float(rgba[0]), g=float(rgba[1]), b=float(rgba[2]), a=float(rgba[3]))


def frame_transforms(frame: ViewFrame) -> fm.FrameTransforms:
    """Every link in the base frame, as /tf of the demo's recording carries them."""
    stamp = fm.Timestamp.from_epoch_secs(frame.stamp)
    return fm.FrameTransforms(transforms=[
        fm.FrameTransform(timestamp=stamp, parent_frame_id=frame.base_link,
                          child_frame_id=link, translation=_point(origin),
                          rotation=_quaternion(rotation))
        for link, rotation, origin in zip(frame.links, frame.rotations, frame.origins)])


def arrow_rotation(direction: np.ndarray) -> np.ndarray:
    """The rotation taking +x (an ArrowPrimitive's direction) to `direction`."""
    unit = direction / np.linalg.norm(direction)
    rotation, _ = Rotation.align_vectors([unit], [[1.0, 0.0, 0.0]])
    return rotation.as_matrix()


def _arrow(contact: ContactArrow) -> fm.ArrowPrimitive | None:
    length = ARROW_PER_NEWTON * float(np.linalg.norm(contact.force))
    if not length > 1e-6:
        return None
    head = min(0.3 * length, 3 * ARROW_SHAFT)
    return fm.ArrowPrimitive(
        pose=_pose(contact.tail, arrow_rotation(contact.force)), shaft_length=length - head,
        shaft_diameter=ARROW_SHAFT, head_length=head, head_diameter=2.5 * ARROW_SHAFT,
        color=_colour(CONTACT_SOURCES[contact.source][0]))


def scene_update(frame: ViewFrame, lifetime: float) -> fm.SceneUpdate:
    """The arm, each contact and the proximity spheres as entities that live `lifetime` s
    (so that what the suite stopped sending vanishes), ids `arm`, `contact/<source>`,
    `proximity/<group>`; entities of contacts and groups no longer present are deleted.
    A contact's entity has its estimate's stamp (Foxglove times lifetimes from receipt, and
    its frame is the base's, so the stamp only tells when the estimate was), the others the
    frame's."""
    stamp, life = fm.Timestamp.from_epoch_secs(frame.stamp), fm.Duration.from_secs(lifetime)
    colour = _colour(STOPPED_ARM_COLOUR if frame.stop else ARM_COLOUR)

    def entity(entity_id: str, at: fm.Timestamp = stamp, **primitives) -> fm.SceneEntity:
        return fm.SceneEntity(timestamp=at, frame_id=frame.base_link, id=entity_id,
                              lifetime=life, **primitives)

    entities = []
    if len(frame.origins):
        entities.append(entity(
            'arm',
            lines=[fm.LinePrimitive(type=fm.LinePrimitiveLineType.LineStrip, pose=_pose(
                np.zeros(3)), thickness=LINK_THICKNESS, points=[
                    fm.Point3(x=float(x), y=float(y), z=float(z)) for x, y, z in frame.origins],
                color=colour)],
            spheres=[fm.SpherePrimitive(pose=_pose(o), size=_point([JOINT_SPHERE] * 3),
                                        color=colour) for o in frame.origins]))
    for contact in frame.contacts:
        arrow = _arrow(contact)
        colour_rgba, label = CONTACT_SOURCES[contact.source]
        entities.append(entity(
            f'contact/{contact.source}', fm.Timestamp.from_epoch_secs(contact.stamp),
            arrows=[arrow] if arrow else [],
            spheres=[fm.SpherePrimitive(pose=_pose(contact.point), size=_point([0.03] * 3),
                                        color=_colour(colour_rgba))],
            texts=[fm.TextPrimitive(
                pose=_pose(contact.tail), billboard=True, font_size=14, scale_invariant=True,
                color=_colour(colour_rgba),
                text=f'{label}: {np.linalg.norm(contact.force):.0f} N on {contact.link}')]))
    groups = sorted({s.group for s in frame.spheres})
    for group in groups:
        entities.append(entity(f'proximity/{group}', spheres=[
            fm.SpherePrimitive(pose=_pose(s.centre), size=_point([s.diameter] * 3),
                               color=_colour(s.rgba))
            for s in frame.spheres if s.group == group]))
    return fm.SceneUpdate(entities=entities)


def _placed(pose: fm.Pose, points) -> np.ndarray:
    """`points` (N×3, in `pose`'s frame) in the entity's frame."""
    q = pose.orientation
    rotation = Rotation.from_quat([q.x, q.y, q.z, q.w])
    p = pose.position
    return rotation.apply(np.asarray(points, dtype=float).reshape(-1, 3)) + [p.x, p.y, p.z]


def _rgb(colour: fm.Color) -> tuple[float, float, float]:
    return colour.r, colour.g, colour.b


def draw_scene(update: fm.SceneUpdate, ax) -> None:
    """The entities of `update` (all in one frame, as `scene_update` makes them) on a
    matplotlib 3D axis as Foxglove's 3D panel draws them: lines, spheres (dots of their
    size), arrows; the labels in a corner. The README's picture of the view is drawn from
    the recorded messages by this."""
    for entity in update.entities:
        for line in entity.lines:
            points = _placed(line.pose, [(p.x, p.y, p.z) for p in line.points])
            ax.plot(*points.T, color=_rgb(line.color), linewidth=line.thickness * 120,
                    solid_capstyle='round', zorder=1)
        for sphere in entity.spheres:
            centre = _placed(sphere.pose, [0.0, 0.0, 0.0])[0]
            ax.scatter(*centre, color=_rgb(sphere.color), alpha=max(sphere.color.a, 0.3),
                       s=(sphere.size.x * 250) ** 2, depthshade=False, zorder=2)
        for arrow in entity.arrows:
            tail, tip = _placed(arrow.pose, [[0.0, 0.0, 0.0],
                                             [arrow.shaft_length + arrow.head_length, 0, 0]])
            ax.quiver(*tail, *(tip - tail), color=_rgb(arrow.color), linewidth=3,
                      arrow_length_ratio=arrow.head_length / max(
                          arrow.shaft_length + arrow.head_length, 1e-9), zorder=3)
    labels = [text for entity in update.entities for text in entity.texts]
    for row, text in enumerate(labels):  # stacked in a corner: at their points they overlap
        ax.text2D(0.02, 0.98 - 0.04 * row, text.text, color=_rgb(text.color), fontsize=9,
                  transform=ax.transAxes, va='top')
