"""A robot's bodies as closed surfaces a line of action can enter (seed 004). No ROS.

A body is the links one joint moves, in the frame of the link that joint moves first
(`RobotModel.joint_links`). Two surface models, compared in benchmarks/ft_contact.py, for
the F/T locator (core/contact/ft_contact.py):
- `EllipsoidSurfaces`: the patent's ellipsoid per link, S(c) = cᵀAᵀAc = 1 (eq. 23), here with
  a centre and principal axes, fitted to the collision mesh by default, overridable per link;
- `MeshSurfaces`: the collision meshes of `LinkSurfaces` themselves, by ray casting.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import open3d as o3d

from contact_estimation.core.robot import pose
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces, SurfacesError

SURFACE_MODELS = ('ellipsoid', 'mesh')

# Rays are cast from this far behind the line's point nearest the body (m): farther than any
# arm link reaches, so the first hit is where the line enters the body.
_RAY_BACKOFF = 10.0
# Distance between neighbouring bodies in the scene of `MeshSurfaces` (m): a ray starts at most
# _RAY_BACKOFF plus an arm's reach from its body, so bodies this far apart never shadow it.
_BODY_SPACING = 4.0 * _RAY_BACKOFF


@dataclass(frozen=True)
class Ellipsoid:
    """Seed 004 eq. 23 in a link frame: ‖A Rᵀ(c − o)‖ = 1, A = diag(1/α, 1/β, 1/γ).

    `centre` o (m), `axes` R (columns: the principal axes in the link frame), `semi_axes`
    (α, β, γ), m. The patent's ellipsoid has o = 0, R = I.
    """

    centre: np.ndarray
    axes: np.ndarray
    semi_axes: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, 'centre', pose.position(self.centre, 'ellipsoid centre'))
        axes = np.asarray(self.axes, dtype=float)
        if axes.shape != (3, 3) or not np.allclose(axes.T @ axes, np.eye(3), atol=1e-6):
            raise SurfacesError('ellipsoid axes must be a 3×3 orthonormal matrix')
        object.__setattr__(self, 'axes', axes)
        semi = np.asarray(self.semi_axes, dtype=float)
        if semi.shape != (3,) or not np.all(semi > 0) or not np.isfinite(semi).all():
            raise SurfacesError(f'ellipsoid semi-axes must be 3 finite lengths > 0 m, got '
                                f'{semi.tolist()}')
        object.__setattr__(self, 'semi_axes', semi)

    @classmethod
    def fit(cls, points: np.ndarray) -> 'Ellipsoid':
        """Least-squares quadric through surface points (N×3): xᵀQx + bᵀx = 1 is linear in
        Q and b; its centre is −Q⁻¹b/2, its axes and semi-axes Q's eigenvectors and
        eigenvalues. A surface no ellipsoid fits gets the box around the points along their
        principal axes instead."""
        mean = points.mean(axis=0)
        x, y, z = (points - mean).T
        design = np.column_stack([x * x, y * y, z * z, 2 * x * y, 2 * x * z, 2 * y * z, x, y, z])
        a, b, c, d, e, f, *linear = np.linalg.lstsq(design, np.ones(len(points)), rcond=None)[0]
        quadric = np.array([[a, d, e], [d, b, f], [e, f, c]])
        values, axes = np.linalg.eigh(quadric)
        if values.min() > 0:
            shift = -0.5 * np.linalg.solve(quadric, linear)
            scale = 1.0 + shift @ quadric @ shift
            if np.linalg.det(axes) < 0:
                axes[:, 2] *= -1
            return cls(mean + shift, axes, np.sqrt(scale / values))
        axes = np.linalg.svd(points - mean, full_matrices=False)[2].T
        if np.linalg.det(axes) < 0:
            axes[:, 2] *= -1
        local = (points - mean) @ axes
        low, high = local.min(axis=0), local.max(axis=0)
        return cls(mean + axes @ ((low + high) / 2), axes, np.maximum((high - low) / 2, 1e-3))

    def moved(self, rotation: np.ndarray, position: np.ndarray) -> 'Ellipsoid':
        """The same ellipsoid in a frame where the link frame has this pose."""
        return Ellipsoid(rotation @ self.centre + position, rotation @ self.axes, self.semi_axes)


class EllipsoidSurfaces:
    """The patent's surface model: one ellipsoid per link with collision geometry, fitted to
    its surface samples (`Ellipsoid.fit`) unless `overrides` gives it (link name → Ellipsoid,
    in that link's frame)."""

    name = 'ellipsoid'

    def __init__(self, surfaces: LinkSurfaces, overrides: dict[str, Ellipsoid] | None = None):
        self.robot = surfaces.robot
        overrides = dict(overrides or {})
        unknown = set(overrides) - set(self.robot.link_joint)
        if unknown:
            raise SurfacesError(f'ellipsoids given for links not moved by the chain: '
                                 f'{sorted(unknown)}')
        self.ellipsoids = {link: Ellipsoid.fit(surfaces.surface_points(link)[0])
                           for link in surfaces.links
                           if link in self.robot.link_joint and link not in overrides}
        self.ellipsoids.update(overrides)
        # Every body's ellipsoids in its body frame, stacked for vector maths: the joint that
        # moves each (`_joint_of`) and its index among that body's links (`_index`).
        bodies = body_poses(self.robot, self.ellipsoids)
        self.joints = tuple(sorted(bodies))
        self._links = {joint: bodies[joint][0] for joint in self.joints}
        moved = [(joint, index, self.ellipsoids[link].moved(*pose)) for joint in self.joints
                 for index, (link, pose) in enumerate(zip(*bodies[joint]))]
        self._joint_of = np.array([joint for joint, _, _ in moved])
        self._index = np.array([index for _, index, _ in moved])
        self._centres = np.array([e.centre for _, _, e in moved])
        self._axes = np.array([e.axes for _, _, e in moved])
        self._semi = np.array([e.semi_axes for _, _, e in moved])

    def links(self, joint: int) -> list[str]:
        return self._links.get(joint, [])

    def first_entry(self, joints, origins, directions):
        """Where each line first enters its body going along its direction, for several
        bodies at once: `joints` (B body joints), `origins` and unit `directions` (B×N×3, row
        b in the frame of body b). Returns the points (B×N×3, NaN on a miss), the index of
        the link entered among the body's `links` (B×N, -1 on a miss) and the outward unit
        normal there (B×N×3, body frames; eq. 24's n)."""
        row_of = {joint: row for row, joint in enumerate(joints)}
        mine = np.flatnonzero(np.isin(self._joint_of, joints))
        rows = np.array([row_of[j] for j in self._joint_of[mine]])
        centres, axes, semi = self._centres[mine], self._axes[mine], self._semi[mine]
        # the lines in each ellipsoid's unit-sphere coordinates: E×N×3
        y = np.einsum('eji,enj->eni', axes, origins[rows] - centres[:, None]) / semi[:, None]
        u = np.einsum('eji,enj->eni', axes, directions[rows]) / semi[:, None]
        uu = np.einsum('eni,eni->en', u, u)
        yu = np.einsum('eni,eni->en', y, u)
        disc = yu ** 2 - uu * (np.einsum('eni,eni->en', y, y) - 1.0)
        with np.errstate(invalid='ignore'):
            entry = np.where(disc >= 0, (-yu - np.sqrt(disc)) / uu, np.inf)  # smaller root
        # per body, its ellipsoid entered first: B×N indices into the E stacked here
        own = rows[None, :, None] == np.arange(len(joints))[:, None, None]
        per_body = np.where(own, entry[None], np.inf)
        best = np.argmin(per_body, axis=1)
        along = np.take_along_axis(per_body, best[:, None], axis=1)[:, 0]
        n = np.arange(origins.shape[1])
        hit = np.isfinite(along)
        points = origins + np.where(hit, along, np.nan)[..., None] * directions
        # n ∝ R A² Rᵀ(c − o) = R (y/s) / s at the unit-sphere point y of the entry
        on_sphere = y[best, n] + np.where(hit, along, 0.0)[..., None] * u[best, n]
        normals = np.einsum('bnij,bnj->bni', axes[best], on_sphere / semi[best])
        normals /= np.linalg.norm(normals, axis=-1, keepdims=True)
        return points, np.where(hit, self._index[mine][best], -1), normals

    def closest(self, joint, points):
        """Nearest surface point to each point (N×3, body frame), its link index, distance."""
        mine = self._joint_of == joint
        centres, axes, semi = self._centres[mine], self._axes[mine], self._semi[mine]
        y = np.einsum('eji,enj->eni', axes, points[None] - centres[:, None])  # E×N×3, principal
        nearest = _ellipsoid_closest(y, semi[:, None, :])
        distance = np.linalg.norm(nearest - y, axis=2)
        best = np.argmin(distance, axis=0)
        n = np.arange(len(points))
        on_body = np.einsum('nij,nj->ni', axes[best], nearest[best, n]) + centres[best]
        return on_body, self._index[mine][best], distance[best, n]


def _ellipsoid_closest(y: np.ndarray, semi: np.ndarray, iterations: int = 30) -> np.ndarray:
    """Closest point on the axis-aligned ellipsoid Σ (x_i/s_i)² = 1 to y (broadcast …×3).

    x_i = s_i² y_i / (t + s_i²) with t the root of F(t) = Σ (s_i y_i / (t + s_i²))² − 1,
    convex and decreasing for t > −min s_i² (Eberly, "Distance from a point to an ellipse,
    an ellipsoid, or a hyperellipsoid"). Newton starts at t = 0 (the points given lie near
    the surface, so the root is near 0); a step that lands left of the root, or beyond the
    pole, is clamped to t₀ = −s_min² + s_min |y_min| where F ≥ 0, and from the left Newton
    climbs to the root without overshooting; it stops when t moves less than 1e-12 m²
    (a few steps for the points near the surface an estimate projects).
    """
    s2 = semi ** 2
    s_min = semi.min(axis=-1)
    y_min = np.abs(y * (semi == s_min[..., None])).max(axis=-1)  # |y| along the shortest axis
    lowest = -s_min ** 2 + s_min * np.maximum(y_min, 1e-9)
    t = np.maximum(np.zeros(y.shape[:-1]), lowest)
    for _ in range(iterations):
        shifted = t[..., None] + s2
        ratio2 = (semi * y / shifted) ** 2
        step = np.maximum(t + (ratio2.sum(-1) - 1.0) / (2.0 * (ratio2 / shifted).sum(-1)),
                          lowest) - t
        t = t + step
        if np.abs(step).max() < 1e-12:
            break
    return s2 * y / (t[..., None] + s2)


class MeshSurfaces:
    """The collision meshes of `LinkSurfaces` in one ray-casting scene, each body (the links
    one joint moves) in its body frame and shifted `_BODY_SPACING` from the next: far enough
    apart that a ray cast for one body can meet no other one first, so that one cast serves
    every body."""

    name = 'mesh'

    def __init__(self, surfaces: LinkSurfaces):
        self.robot = surfaces.robot
        meshes = {link: surfaces.mesh(link) for link in surfaces.links
                  if link in self.robot.link_joint}
        bodies = body_poses(self.robot, meshes)
        self.joints = tuple(sorted(bodies))
        self._links = {joint: bodies[joint][0] for joint in self.joints}
        self._shift = np.zeros((self.robot.n, 3))
        self._shift[list(self.joints), 0] = _BODY_SPACING * (
            np.arange(len(self.joints)) - (len(self.joints) - 1) / 2)
        self._scene = o3d.t.geometry.RaycastingScene()
        geometries = []  # (joint, link index) of each geometry id
        for joint in self.joints:
            for index, (link, (rotation, position)) in enumerate(zip(*bodies[joint])):
                vertices = (np.asarray(meshes[link].vertices) @ rotation.T + position
                            + self._shift[joint])
                geometry = self._scene.add_triangles(
                    o3d.core.Tensor(vertices.astype(np.float32)),
                    o3d.core.Tensor(np.asarray(meshes[link].triangles).astype(np.uint32)))
                geometries.append((geometry, joint, index))
        ids, joint_of, index = np.array(geometries).T
        self._joint_of = np.full(ids.max() + 2, -1)  # the last entry: the invalid id of a miss
        self._index = np.full(ids.max() + 2, -1)
        self._joint_of[ids], self._index[ids] = joint_of, index

    def links(self, joint: int) -> list[str]:
        return self._links.get(joint, [])

    def _geometries(self, ids: np.ndarray) -> np.ndarray:
        """Geometry ids of open3d (a miss gives an invalid one) → rows of the lookups."""
        return np.minimum(ids.astype(np.int64), len(self._index) - 1)

    def first_entry(self, joints, origins, directions):
        """As `EllipsoidSurfaces.first_entry`, on the meshes, one cast for all bodies
        (outward triangles: the first hit from far behind faces the ray)."""
        joints = np.asarray(joints)
        shift = self._shift[joints][:, None]
        starts = origins - _RAY_BACKOFF * directions
        rays = np.concatenate([starts + shift, directions], axis=-1).reshape(-1, 6)
        result = self._scene.cast_rays(o3d.core.Tensor(rays.astype(np.float32)))
        shape = origins.shape[:2]
        along = result['t_hit'].numpy().astype(float).reshape(shape)
        geometry = self._geometries(result['geometry_ids'].numpy()).reshape(shape)
        hit = np.isfinite(along) & (self._joint_of[geometry] == joints[:, None])
        along = np.where(hit, along, np.nan)[..., None]
        return (starts + along * directions, np.where(hit, self._index[geometry], -1),
                result['primitive_normals'].numpy().reshape(*shape, 3).astype(float))

    def closest(self, joint, points):
        """As `EllipsoidSurfaces.closest`, on the meshes."""
        shifted = (points + self._shift[joint]).astype(np.float32)
        result = self._scene.compute_closest_points(o3d.core.Tensor(shifted))
        nearest = result['points'].numpy().astype(float) - self._shift[joint]
        return (nearest, self._index[self._geometries(result['geometry_ids'].numpy())],
                np.linalg.norm(nearest - points, axis=1))


def body_poses(robot: RobotModel, per_link: dict) -> dict[int, tuple[list[str], list]]:
    """Per joint, the links of `per_link` it moves and their poses in its body frame (the
    frame of `robot.joint_links[joint]`): constant, so taken at q = 0."""
    q = np.zeros(robot.n)
    links = list(per_link)
    poses = dict(zip(links, robot.link_poses(q, links)))
    bodies: dict[int, tuple[list[str], list]] = {}
    for link in links:
        joint = robot.link_joint[link]
        body_rotation, body_position = robot.link_pose(q, robot.joint_links[joint])
        rotation, position = poses[link]
        entry = bodies.setdefault(joint, ([], []))
        entry[0].append(link)
        entry[1].append((body_rotation.T @ rotation, body_rotation.T @ (position - body_position)))
    return bodies


def make_surfaces(kind: str, surfaces: LinkSurfaces,
                  ellipsoids: dict[str, Ellipsoid] | None = None):
    """The surface model `kind` ('ellipsoid' or 'mesh') of a robot's `LinkSurfaces`."""
    if kind == 'ellipsoid':
        return EllipsoidSurfaces(surfaces, ellipsoids)
    if kind == 'mesh':
        return MeshSurfaces(surfaces)
    raise SurfacesError(f'surface model must be one of {SURFACE_MODELS}, got {kind!r}')
