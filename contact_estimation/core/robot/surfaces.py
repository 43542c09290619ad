"""Surfaces of the robot's links, built from the collision geometry of a `RobotModel`. No ROS.

Every link's geometry is merged into one triangle mesh in that link's own frame. Mesh files
(STL, DAE, OBJ) are read with open3d and scaled by the URDF's `scale`; primitives (box,
cylinder, sphere, capsule) become closed meshes with `PRIMITIVE_RESOLUTION` edges around
each circle. Triangles face outward. Poses and query points are in the `base_link` frame of
the `RobotModel` (REP 103: metres, radians); link indices refer to `LinkSurfaces.links`
(-1: no link; `LinkSurfaces.link_names` turns indices into names).

Three representations, each for the method that needs it:
- Surface points with outward normals (`surface_points`, link frame), for the contact
  localizer (seed 000): the candidate contact points p on link k and the inward normal n_p
  of the friction cone (eq. 6). For a planar arm, `planar_contour` gives instead the closed
  polygon Ω_k of eq. 2 (the link's cross-section in its x-y plane, 16 edges in the paper).
- The posed triangle mesh in an open3d RaycastingScene (`scene`, `cast_rays`,
  `closest_points`), also for the localizer: which link a depth-sensor ray sees or a cloud
  point is nearest (seed 000, external sensor), with the exact point and normal.
- Sphere-swept links (`spheres`, `sphere_centres`, `sphere_distance`), for the proximity
  monitor (seed 002): spheres with centres evenly spaced on each link's axis that enclose
  the link, so a distance from them is fast and never exceeds the true distance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import open3d as o3d
import pinocchio as pin
from scipy.spatial import ConvexHull
from scipy.spatial.distance import cdist

from contact_estimation.core.robot.robot_model import RobotModel

# Edges around every circle of a cylinder, sphere or capsule: 32 keeps the mesh within
# 0.5 % of the radius of the true surface.
PRIMITIVE_RESOLUTION = 32
# How far a surface sample is moved along its normal to test whether another part of its
# link buries or doubles it (m; see `_sample_surface`).
_LIFT = 1e-3
# Rows of query points handled at once by `sphere_distance` (bounds the distance matrix).
_DISTANCE_BLOCK = 8192


class SurfacesError(ValueError):
    """The robot's collision geometry cannot be turned into link surfaces."""


@dataclass
class SurfaceHits:
    """Per query: distance, link index (-1: none), point and outward unit normal, base frame.

    For ray casts the distance is along the ray (inf on a miss, point and normal NaN); for
    closest-point queries it is the Euclidean distance to the surface.
    """

    distance: np.ndarray
    link: np.ndarray
    point: np.ndarray
    normal: np.ndarray


class RobotScene:
    """The whole robot's surface at one configuration, ready for many queries."""

    def __init__(self, scene: o3d.t.geometry.RaycastingScene, link_of_geometry: np.ndarray):
        self._scene = scene
        self._link_of_geometry = link_of_geometry

    def cast_rays(self, origins: np.ndarray, directions: np.ndarray) -> SurfaceHits:
        """First surface hit along each ray (origins, directions: N×3; directions normalised
        here)."""
        origins = np.atleast_2d(np.asarray(origins, dtype=float))
        directions = np.atleast_2d(np.asarray(directions, dtype=float))
        directions = directions / np.linalg.norm(directions, axis=1, keepdims=True)
        rays = np.hstack([origins, directions]).astype(np.float32)
        result = self._scene.cast_rays(o3d.core.Tensor(rays))
        distance = result['t_hit'].numpy().astype(float)
        hit = np.isfinite(distance)
        ids = result['geometry_ids'].numpy()
        link = np.full(len(distance), -1)
        link[hit] = self._link_of_geometry[ids[hit]]
        point = np.full_like(origins, np.nan)
        point[hit] = origins[hit] + distance[hit, None] * directions[hit]
        normal = np.full_like(origins, np.nan)
        normal[hit] = result['primitive_normals'].numpy()[hit]
        return SurfaceHits(distance, link, point, normal)

    def closest_points(self, points: np.ndarray) -> SurfaceHits:
        """Nearest surface point to each query point (N×3) and its link."""
        points = np.atleast_2d(np.asarray(points, dtype=float))
        if not np.isfinite(points).all():
            raise SurfacesError('query points must be finite (NaN/inf given)')
        result = self._scene.compute_closest_points(o3d.core.Tensor(points.astype(np.float32)))
        closest = result['points'].numpy().astype(float)
        distance = np.linalg.norm(points - closest, axis=1)
        link = self._link_of_geometry[result['geometry_ids'].numpy()]
        return SurfaceHits(distance, link, closest,
                           result['primitive_normals'].numpy().astype(float))


class LinkSurfaces:
    """Per-link surfaces of a robot, each in its link's frame, and whole-robot queries at q.

    `point_spacing`: about one surface sample per point_spacing² of area (m).
    `sphere_spacing`: length of the link's axis covered by one sphere (m).
    `max_triangles`: geometries with more triangles are decimated to this many.
    `seed`: seed of the surface sampling, so the samples are the same on every run.
    """

    def __init__(self, robot: RobotModel, point_spacing: float = 0.01,
                 sphere_spacing: float = 0.05, max_triangles: int = 2000, seed: int = 0):
        if point_spacing <= 0 or sphere_spacing <= 0:
            raise SurfacesError('point_spacing and sphere_spacing must be positive')
        self.robot = robot
        parts = _link_parts(robot, max_triangles)
        if not parts:
            raise SurfacesError(
                f'robot {robot.name!r} has no collision geometry: '
                f'{robot.geometry_error or "its URDF has no collision elements"}')
        self.links = list(parts)
        self._index = {link: i for i, link in enumerate(self.links)}
        self._vertices, self._triangles, self._points, self._normals = [], [], [], []
        centres, radii = [], []
        for link in self.links:
            vertices, triangles = _merge(parts[link])
            points, normals = _sample_surface(parts[link], point_spacing, seed)
            link_centres, link_radii = _sphere_cover(vertices, triangles, points, sphere_spacing)
            self._vertices.append(vertices)
            self._triangles.append(triangles)
            self._points.append(points)
            self._normals.append(normals)
            centres.append(link_centres)
            radii.append(link_radii)
        # seed 002: the spheres of every link, centres in their link's frame.
        self.sphere_centres_local = np.vstack(centres)
        self.sphere_radii = np.concatenate(radii)
        self.sphere_link = np.repeat(np.arange(len(self.links)), [len(r) for r in radii])

    # ------------------------------------------------------------ per link
    def link_index(self, link: str) -> int:
        """Index of the link in `links` (SurfacesError if it has no collision geometry)."""
        try:
            return self._index[link]
        except KeyError:
            raise SurfacesError(f'link {link!r} has no collision geometry '
                                f'(links with geometry: {", ".join(self.links)})') from None

    def link_names(self, indices: np.ndarray) -> list[str | None]:
        """Names of the links at these indices (`SurfaceHits.link`); None for -1 (no link)."""
        return [self.links[i] if i >= 0 else None for i in np.ravel(indices)]

    def mesh(self, link: str) -> o3d.geometry.TriangleMesh:
        """The link's merged triangle mesh in its own frame (a new object on every call)."""
        i = self.link_index(link)
        mesh = o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(self._vertices[i]),
                                         o3d.utility.Vector3iVector(self._triangles[i]))
        mesh.compute_triangle_normals()
        return mesh

    def surface_points(self, link: str) -> tuple[np.ndarray, np.ndarray]:
        """Evenly spaced points on the link's outer surface and their outward unit normals
        (N×3 each)."""
        i = self.link_index(link)
        return self._points[i].copy(), self._normals[i].copy()

    def spheres(self, link: str) -> tuple[np.ndarray, np.ndarray]:
        """Centres (link frame, M×3) and radii (M) of the spheres covering the link (seed 002)."""
        mine = self.sphere_link == self.link_index(link)
        return self.sphere_centres_local[mine].copy(), self.sphere_radii[mine].copy()

    def planar_contour(self, link: str, segments: int = 16) -> tuple[np.ndarray, np.ndarray]:
        """Closed convex polygon Ω_k of seed 000 eq. 2: the link's cross-section in its x-y plane.

        The convex hull of the mesh projected onto the plane, reduced (or subdivided) to
        `segments` edges. Returns the vertices (segments×2, counter-clockwise, edge i from
        vertex i to vertex i+1, the last edge back to vertex 0) and the outward unit normal
        of each edge (segments×2).
        """
        if segments < 3:
            raise SurfacesError('a contour needs at least 3 segments')
        flat = self._vertices[self.link_index(link)][:, :2]
        hull = flat[ConvexHull(flat).vertices]  # counter-clockwise in 2-D
        polygon = _polygon_with_edges(hull, segments)
        edges = np.roll(polygon, -1, axis=0) - polygon
        normals = np.column_stack([edges[:, 1], -edges[:, 0]])
        return polygon, normals / np.linalg.norm(normals, axis=1, keepdims=True)

    # ------------------------------------------------------- whole robot at q
    def link_poses(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rotations (L×3×3) and positions (L×3) of every link in `links`, base frame."""
        return self.robot.link_placements(q, self.links)

    def scene(self, q: np.ndarray) -> RobotScene:
        """Ray-casting scene of the robot posed at q; build once, query many times."""
        rotations, positions = self.link_poses(q)
        scene = o3d.t.geometry.RaycastingScene()
        ids = [scene.add_triangles(o3d.core.Tensor((vertices @ r.T + p).astype(np.float32)),
                                   o3d.core.Tensor(triangles.astype(np.uint32)))
               for vertices, triangles, r, p in zip(self._vertices, self._triangles,
                                                    rotations, positions)]
        lookup = np.full(max(ids) + 1, -1)
        lookup[ids] = np.arange(len(ids))
        return RobotScene(scene, lookup)

    def cast_rays(self, q: np.ndarray, origins: np.ndarray, directions: np.ndarray) -> SurfaceHits:
        """First hit of each ray on the robot posed at q (see `RobotScene.cast_rays`)."""
        return self.scene(q).cast_rays(origins, directions)

    def closest_points(self, q: np.ndarray, points: np.ndarray) -> SurfaceHits:
        """Nearest robot surface point and link for each query point, robot posed at q."""
        return self.scene(q).closest_points(points)

    def sphere_centres(self, q: np.ndarray) -> np.ndarray:
        """Centres of all spheres (M×3) in the base frame at q; radii are `sphere_radii`."""
        rotations, positions = self.link_poses(q)
        return (np.einsum('mij,mj->mi', rotations[self.sphere_link], self.sphere_centres_local)
                + positions[self.sphere_link])

    def sphere_distance(self, q: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per point: min over spheres of ‖c − p‖ − r (negative inside) and that sphere's link.

        The spheres enclose the links, so this never exceeds the true distance to the robot
        (seed 002: a collision is r + r' ≥ ‖c − c'‖; a point obstacle has r' = 0).
        """
        points = np.atleast_2d(np.asarray(points, dtype=float))
        centres = self.sphere_centres(q)
        distance = np.empty(len(points))
        link = np.empty(len(points), dtype=int)
        for start in range(0, len(points), _DISTANCE_BLOCK):
            block = cdist(points[start:start + _DISTANCE_BLOCK], centres) - self.sphere_radii
            nearest = np.argmin(block, axis=1)
            distance[start:start + len(block)] = block[np.arange(len(block)), nearest]
            link[start:start + len(block)] = self.sphere_link[nearest]
        return distance, link


# ---------------------------------------------------------------- geometry
def _link_parts(robot: RobotModel,
                max_triangles: int) -> dict[str, list[o3d.geometry.TriangleMesh]]:
    """The closed, outward-facing shells of each link's geometry, in that link's frame.

    The link is the frame the URDF parser attached the geometry to (`parentFrame`), which
    keeps the URDF link name even when the reduced model welded that link to its parent's
    joint; the geometry's placement is relative to that joint, so it is brought into the
    link frame through the frame's own placement. A mesh file may hold several overlapping
    shells (the UR meshes do): each becomes a part of its own. Links come in chain order.
    """
    model = robot.model
    grouped: dict[str, list[o3d.geometry.TriangleMesh]] = {}
    for geometry in sorted(robot.collision_model.geometryObjects,
                           key=lambda g: (g.parentJoint, g.parentFrame)):
        frame = model.frames[geometry.parentFrame]
        mesh = _geometry_mesh(geometry)
        if len(mesh.triangles) > max_triangles:
            mesh = mesh.simplify_quadric_decimation(max_triangles)
        link_from_geometry = frame.placement.inverse() * geometry.placement
        mesh.transform(link_from_geometry.homogeneous)
        grouped.setdefault(frame.name, []).extend(_outward(shell) for shell in _shells(mesh))
    return grouped


def _shells(mesh: o3d.geometry.TriangleMesh) -> list[o3d.geometry.TriangleMesh]:
    """The connected pieces of a mesh."""
    piece, counts, _ = mesh.cluster_connected_triangles()
    piece = np.asarray(piece)
    if len(counts) == 1:
        return [mesh]
    shells = []
    for k in range(len(counts)):
        shell = o3d.geometry.TriangleMesh(mesh)
        shell.remove_triangles_by_mask(piece != k)
        shell.remove_unreferenced_vertices()
        shells.append(shell)
    return shells


def _geometry_mesh(geometry: pin.GeometryObject) -> o3d.geometry.TriangleMesh:
    """Triangle mesh of one geometry object in its own frame."""
    shape = geometry.geometry
    kind = type(shape).__name__
    if kind.startswith('BVHModel'):
        mesh = o3d.io.read_triangle_mesh(geometry.meshPath)
        if not mesh.has_triangles():
            raise SurfacesError(f'cannot read the mesh {geometry.meshPath!r} of {geometry.name!r}')
        mesh.remove_duplicated_vertices()  # STL files repeat each vertex per triangle
        mesh.remove_degenerate_triangles()
        mesh.remove_unreferenced_vertices()
        mesh.vertices = o3d.utility.Vector3dVector(
            np.asarray(mesh.vertices) * np.asarray(geometry.meshScale))
        return mesh
    if kind == 'Box':
        half = np.asarray(shape.halfSide)
        return o3d.geometry.TriangleMesh.create_box(*(2 * half)).translate(-half)
    if kind == 'Cylinder':
        return o3d.geometry.TriangleMesh.create_cylinder(
            shape.radius, 2 * shape.halfLength, PRIMITIVE_RESOLUTION)
    if kind == 'Sphere':
        return o3d.geometry.TriangleMesh.create_sphere(shape.radius, PRIMITIVE_RESOLUTION // 2)
    if kind == 'Capsule':
        # A sphere cut at its equator, the halves pushed ±halfLength apart along z: the
        # triangles across the equator become the cylinder between them.
        mesh = o3d.geometry.TriangleMesh.create_sphere(shape.radius, PRIMITIVE_RESOLUTION // 2)
        vertices = np.asarray(mesh.vertices)
        vertices[:, 2] += np.sign(np.round(vertices[:, 2], 12)) * shape.halfLength
        mesh.vertices = o3d.utility.Vector3dVector(vertices)
        return mesh
    raise SurfacesError(f'geometry {geometry.name!r} is a {kind}; supported: meshes, '
                        'boxes, cylinders, spheres and capsules')


def _outward(mesh: o3d.geometry.TriangleMesh) -> o3d.geometry.TriangleMesh:
    """The mesh with its triangles wound so that their normals point out (positive volume)."""
    vertices, triangles = np.asarray(mesh.vertices), np.asarray(mesh.triangles)
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    if np.einsum('ij,ij->', a, np.cross(b, c)) < 0:
        mesh.triangles = o3d.utility.Vector3iVector(triangles[:, ::-1].copy())
    mesh.compute_triangle_normals()
    return mesh


def _merge(meshes: list[o3d.geometry.TriangleMesh]) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (V×3) and triangles (T×3) of several meshes as one."""
    vertices, triangles, offset = [], [], 0
    for mesh in meshes:
        vertices.append(np.asarray(mesh.vertices))
        triangles.append(np.asarray(mesh.triangles) + offset)
        offset += len(mesh.vertices)
    return np.vstack(vertices), np.vstack(triangles).astype(np.int64)


def _sample_surface(parts: list[o3d.geometry.TriangleMesh], spacing: float,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Poisson-disk samples of the link's outer surface, one per spacing² of its area, with
    their triangles' outward unit normals.

    Each part (closed shell) is sampled on its own, at one sample per spacing² of its area;
    then what is not outer surface is dropped, which keeps that density on what remains:
    - a sample whose point lifted `_LIFT` out along its normal is inside another part is
      buried in that part, or on a face the two share back to back;
    - a sample whose point moved `_LIFT` inward is inside an earlier part lies on a face of
      that part facing the same way (the coplanar top faces of the planar arm's box and
      cylinders): the earlier part's samples already cover it.
    Sampling the merged mesh instead spreads its samples over the summed area of all
    parts, buried and doubled faces included, which leaves the outer surface too dense.
    """
    o3d.utility.random.seed(seed)
    points, normals, source = [], [], []
    for k, part in enumerate(parts):
        count = max(1, int(np.ceil(part.get_surface_area() / spacing ** 2)))
        cloud = part.sample_points_poisson_disk(count, use_triangle_normal=True)
        points.append(np.asarray(cloud.points))
        normals.append(np.asarray(cloud.normals))
        source.append(np.full(len(cloud.points), k))
    points, normals, source = np.vstack(points), np.vstack(normals), np.concatenate(source)
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    if len(parts) > 1:
        lifted = o3d.core.Tensor((points + _LIFT * normals).astype(np.float32))
        lowered = o3d.core.Tensor((points - _LIFT * normals).astype(np.float32))
        drop = np.zeros(len(points), dtype=bool)
        for j, part in enumerate(parts):
            scene = o3d.t.geometry.RaycastingScene()
            scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(part))
            buried = scene.compute_occupancy(lifted, nsamples=3).numpy().astype(bool)
            doubled = scene.compute_occupancy(lowered, nsamples=3).numpy().astype(bool)
            drop |= ((source != j) & buried) | ((source > j) & doubled)
        points, normals = points[~drop], normals[~drop]
    return points, normals


def _sphere_cover(vertices: np.ndarray, triangles: np.ndarray, samples: np.ndarray,
                  spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """Spheres enclosing the whole mesh, centres evenly spaced on its principal axis (seed 002).

    The axis is the principal direction (PCA) of the evenly spread surface samples, through
    their mean. It is cut into equal slabs of length h ≤ `spacing`, one sphere per slab at
    the slab's middle. The part of a triangle inside a slab is a convex polygon whose corners
    are the triangle's vertices in the slab and its edges' crossings of the slab's faces; the
    distance to the axis is convex, so its largest value R over that polygon is at a corner.
    Every surface point of the slab is then within sqrt(R² + (h/2)²) of the centre.
    """
    spread = samples if len(samples) >= 3 else vertices  # a tiny link may keep no samples
    centre = spread.mean(axis=0)
    axis = np.linalg.svd(spread - centre, full_matrices=False)[2][0]
    along = (vertices - centre) @ axis
    low, high = along.min(), along.max()
    count = max(1, int(np.ceil((high - low) / spacing)))
    slab = max(high - low, 1e-9) / count

    # Corners of the slab polygons: each vertex in its slab, and each crossing of an edge
    # with face j (between slabs j-1 and j, j = 1 … count-1) in both slabs; an edge ending
    # on a face counts its end as a crossing.
    edges = np.unique(np.sort(np.vstack([triangles[:, [0, 1]], triangles[:, [1, 2]],
                                         triangles[:, [2, 0]]]), axis=1), axis=0)
    t0, t1 = along[edges[:, 0]], along[edges[:, 1]]
    first = np.maximum(np.ceil((np.minimum(t0, t1) - low) / slab).astype(int), 1)
    last = np.minimum(np.floor((np.maximum(t0, t1) - low) / slab).astype(int), count - 1)
    crossings = np.maximum(last - first + 1, 0)
    edge = np.repeat(np.arange(len(edges)), crossings)
    face = (np.repeat(first, crossings) + np.arange(crossings.sum())
            - np.repeat(np.cumsum(crossings) - crossings, crossings))
    run = t1[edge] - t0[edge]
    fraction = np.divide(low + face * slab - t0[edge], run, out=np.zeros(len(edge)), where=run != 0)
    a, b = vertices[edges[edge, 0]], vertices[edges[edge, 1]]
    crossing = a + fraction[:, None] * (b - a)
    corners = np.vstack([vertices, crossing, crossing])
    corner_slab = np.concatenate([np.clip(((along - low) / slab).astype(int), 0, count - 1),
                                  face - 1, face])

    offset = corners - centre
    radial = np.linalg.norm(offset - np.outer(offset @ axis, axis), axis=1)
    reach = np.full(count, -1.0)
    np.maximum.at(reach, corner_slab, radial)
    used = reach >= 0
    positions = low + (np.arange(count)[used] + 0.5) * slab
    return centre + np.outer(positions, axis), np.sqrt(reach[used] ** 2 + (slab / 2) ** 2)


def _polygon_with_edges(hull: np.ndarray, segments: int) -> np.ndarray:
    """Convex polygon (counter-clockwise) changed to exactly `segments` edges.

    Too many corners: drop, one at a time, the corner whose triangle with its neighbours has
    the smallest area (Visvalingam-Whyatt), which keeps long straight sides and spreads the
    corners evenly over round ends. Too few: split the longest edge in two.
    """
    polygon = np.asarray(hull, dtype=float)
    while len(polygon) > segments:
        before = polygon - np.roll(polygon, 1, axis=0)
        after = np.roll(polygon, -1, axis=0) - polygon
        doubled_area = np.abs(before[:, 0] * after[:, 1] - before[:, 1] * after[:, 0])
        polygon = np.delete(polygon, np.argmin(doubled_area), axis=0)
    while len(polygon) < segments:
        after = np.roll(polygon, -1, axis=0) - polygon
        i = int(np.argmax(np.linalg.norm(after, axis=1)))
        polygon = np.insert(polygon, i + 1, polygon[i] + after[i] / 2, axis=0)
    return polygon
