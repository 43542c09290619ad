"""Link surfaces: outward samples, ray casts, closest points, sphere cover, planar contours."""
import os

import numpy as np
import open3d as o3d
import pytest

from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces, SurfacesError

URDF_DIR = os.path.join(os.path.dirname(__file__), '..', 'urdf')
ROBOTS = {
    'panda': 'panda',
    'ur5': 'ur5',
    'planar': os.path.join(URDF_DIR, 'planar_4link.urdf'),
    'spatial': os.path.join(URDF_DIR, 'spatial_6r.urdf'),
}
SPACING = 0.01


@pytest.fixture(scope='module', params=list(ROBOTS))
def surfaces(request):
    return LinkSurfaces(RobotModel.load(ROBOTS[request.param]), point_spacing=SPACING)


@pytest.fixture(scope='module')
def panda():
    return LinkSurfaces(RobotModel.load('panda'))


@pytest.fixture(scope='module')
def ur5():
    return LinkSurfaces(RobotModel.load('ur5'))


@pytest.fixture(scope='module')
def planar():
    return LinkSurfaces(RobotModel.load(ROBOTS['planar']))


def posed_mesh(surfaces, q, link):
    rotation, position = surfaces.robot.link_pose(q, link)
    transform = np.eye(4)
    transform[:3, :3], transform[:3, 3] = rotation, position
    return surfaces.mesh(link).transform(transform)


def inside(mesh, points):
    """Occupancy of each point in the union of the mesh's closed pieces, one piece at a time
    (ray parity fails where pieces overlap)."""
    piece, counts, _ = mesh.cluster_connected_triangles()
    piece = np.asarray(piece)
    occupied = np.zeros(len(points), dtype=bool)
    for k in range(len(counts)):
        shell = o3d.geometry.TriangleMesh(mesh)
        shell.remove_triangles_by_mask(piece != k)
        shell.remove_unreferenced_vertices()
        scene = o3d.t.geometry.RaycastingScene()
        scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(shell))
        query = o3d.core.Tensor(points.astype(np.float32))
        occupied |= scene.compute_occupancy(query, nsamples=5).numpy().astype(bool)
    return occupied


def point_triangle_distance(point, mesh):
    """Exact distance from a point to a triangle mesh, every triangle tried."""
    vertices, triangles = np.asarray(mesh.vertices), np.asarray(mesh.triangles)
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    normal = np.cross(b - a, c - a)
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    height = np.einsum('ij,ij->i', point - a, normal)
    foot = point - height[:, None] * normal
    over = np.ones(len(a), dtype=bool)
    for u, v in ((a, b), (b, c), (c, a)):
        over &= np.einsum('ij,ij->i', np.cross(v - u, foot - u), normal) >= 0

    def to_segment(u, v):
        t = np.clip(np.einsum('ij,ij->i', point - u, v - u)
                    / np.einsum('ij,ij->i', v - u, v - u), 0, 1)
        return np.linalg.norm(point - (u + t[:, None] * (v - u)), axis=1)

    edge = np.minimum.reduce([to_segment(a, b), to_segment(b, c), to_segment(c, a)])
    return np.where(over, np.abs(height), edge).min()


# --------------------------------------------------------------- per link
def test_surface_points_are_on_the_surface_with_outward_unit_normals(surfaces):
    for link in surfaces.links:
        points, normals = surfaces.surface_points(link)
        assert len(points) > 0
        np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1.0, atol=1e-9)
        mesh = surfaces.mesh(link)
        scene = o3d.t.geometry.RaycastingScene()
        scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(mesh))
        gap = scene.compute_distance(o3d.core.Tensor(points.astype(np.float32))).numpy()
        assert gap.max() < 1e-5
        # Thin walls (a few UR5 fins) can put a point 1-2 mm in from the other side.
        assert 1 - inside(mesh, points + 2e-3 * normals).mean() >= 0.99, link
        assert inside(mesh, points - 1e-3 * normals).mean() >= 0.98, link


def test_surface_points_cover_the_outer_surface_evenly(planar):
    """A planar link is a box between two cylinders: its outer surface is a stadium prism.

    Hidden faces (box ends, half of each cylinder) carry no samples, and the flat faces over
    the joint housings, where the box's and a cylinder's faces coincide, no more than the rest.
    """
    robot = planar.robot
    for link in robot.joint_links:
        geometries = [g for g in robot.collision_model.geometryObjects
                      if robot.model.frames[g.parentFrame].name == link]
        box = next(g.geometry for g in geometries if type(g.geometry).__name__ == 'Box')
        length, radius, height = 2 * box.halfSide
        radius /= 2
        stadium = length * 2 * radius + np.pi * radius ** 2
        area = 2 * stadium + (2 * length + 2 * np.pi * radius) * height
        points, _ = planar.surface_points(link)
        assert len(points) == pytest.approx(area / SPACING ** 2, rel=0.1)
        ends = np.array([g.placement.translation[:2] for g in geometries
                         if type(g.geometry).__name__ == 'Cylinder'])
        on_flat = np.isclose(np.abs(points[:, 2]), height / 2)
        over_end = np.linalg.norm(points[:, None, :2] - ends[None], axis=2).min(axis=1) < radius
        discs = 2 * len(ends) * np.pi * radius ** 2
        assert np.sum(on_flat & over_end) == pytest.approx(discs / SPACING ** 2, rel=0.1)
        nearest = o3d.geometry.KDTreeFlann(
            o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points)))
        gaps = [np.sqrt(nearest.search_knn_vector_3d(p, 2)[2][1]) for p in points[::10]]
        assert 0.5 * SPACING < np.median(gaps) < 1.5 * SPACING


def test_spheres_enclose_the_whole_link(surfaces):
    for link in surfaces.links:
        centres, radii = surfaces.spheres(link)
        mesh = surfaces.mesh(link)
        dense = np.asarray(mesh.sample_points_uniformly(20000).points)
        for points in (np.asarray(mesh.vertices), dense):
            gap = np.linalg.norm(points[:, None] - centres[None], axis=2) - radii
            assert gap.min(axis=1).max() <= 1e-9, link


def test_planar_contour_is_the_stadium_cross_section(planar):
    robot = planar.robot
    for link in robot.joint_links:
        cylinders = [g for g in robot.collision_model.geometryObjects
                     if robot.model.frames[g.parentFrame].name == link
                     and type(g.geometry).__name__ == 'Cylinder']
        radius = cylinders[0].geometry.radius
        ends = np.array([g.placement.translation[:2] for g in cylinders])
        length = np.linalg.norm(ends[1] - ends[0])
        for segments in (4, 16, 64):
            vertices, normals = planar.planar_contour(link, segments)
            assert vertices.shape == normals.shape == (segments, 2)
            edges = np.roll(vertices, -1, axis=0) - vertices
            turn = (edges[:, 0] * np.roll(edges, -1, axis=0)[:, 1]
                    - edges[:, 1] * np.roll(edges, -1, axis=0)[:, 0])
            assert np.all(turn >= -1e-12)  # convex, counter-clockwise
            np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1.0)
            np.testing.assert_allclose(np.einsum('ij,ij->i', normals, edges), 0.0, atol=1e-12)
            middles = vertices + edges / 2
            assert np.all(np.einsum('ij,ij->i', normals, middles - middles.mean(axis=0)) > 0)
        # Every corner of the 16-gon lies on the stadium: at one radius from the link's axis.
        vertices, _ = planar.planar_contour(link)
        along = np.clip((vertices - ends[0]) @ (ends[1] - ends[0]) / length ** 2, 0, 1)
        axis_point = ends[0] + along[:, None] * (ends[1] - ends[0])
        np.testing.assert_allclose(np.linalg.norm(vertices - axis_point, axis=1), radius, rtol=1e-9)
        x, y = vertices.T
        area = 0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y)
        assert area >= 0.97 * (2 * radius * length + np.pi * radius ** 2)


# --------------------------------------------------------- whole robot at q
def test_rays_hit_the_links_at_their_height_on_a_straight_panda(panda):
    """At q = 0 the panda stands straight: base housing, shoulder, upper arm, one above the
    other."""
    q = np.zeros(panda.robot.n)
    heights = {'panda_link0': 0.05, 'panda_link1': 0.25, 'panda_link2': 0.45}
    origins = np.array([[1.0, 0.0, z] for z in heights.values()])
    hits = panda.cast_rays(q, origins, np.tile([-1.0, 0.0, 0.0], (len(origins), 1)))
    assert panda.link_names(hits.link) == list(heights)
    np.testing.assert_allclose(hits.point[:, 1:], origins[:, 1:], atol=1e-6)
    assert np.all((hits.point[:, 0] > 0.03) & (hits.point[:, 0] < 0.1))  # housings ~5.5 cm round
    assert np.all(hits.normal[:, 0] > 0)  # facing the ray


def test_rays_from_above_hit_the_horizontal_ur5_arm(ur5):
    """At q = 0 the UR5 lies along x: a ray down onto the middle of a segment hits that link."""
    q = np.zeros(ur5.robot.n)
    links = ['upper_arm_link', 'forearm_link']
    # A UR link runs along its frame's z axis; the next joint sits off that axis (the elbow
    # 0.12 m sideways), so the middle is half way to the next joint along z, not the midpoint
    # of the two joint origins (which lies beside the upper arm).
    poses = ur5.robot.link_poses(q, links)
    ends = [p for _, p in ur5.robot.link_poses(q, ['forearm_link', 'wrist_1_link'])]
    middles = [p + r[:, 2] * (r[:, 2] @ (e - p)) / 2 for (r, p), e in zip(poses, ends)]
    origins = np.array(middles) + [0.0, 0.0, 1.0]
    hits = ur5.cast_rays(q, origins, np.tile([0.0, 0.0, -1.0], (2, 1)))
    assert ur5.link_names(hits.link) == links
    assert np.all(hits.normal[:, 2] > 0)
    missed = ur5.cast_rays(q, [[0.0, 0.0, 2.0]], [[0.0, 0.0, 1.0]])
    assert missed.link[0] == -1 and np.isinf(missed.distance[0]) and np.isnan(missed.point).all()
    assert ur5.link_names(missed.link) == [None]


def test_ray_hits_are_the_nearest_over_all_links(surfaces):
    rng = np.random.default_rng(4)
    q = surfaces.robot.random_configuration(rng, 1)[0]
    origins = rng.uniform(-1.5, 1.5, (50, 3))
    targets = rng.uniform(-0.3, 0.3, (50, 3)) + [0.0, 0.0, 0.4]
    directions = (targets - origins) / np.linalg.norm(targets - origins, axis=1, keepdims=True)
    hits = surfaces.cast_rays(q, origins, directions)
    per_link = []
    for link in surfaces.links:
        scene = o3d.t.geometry.RaycastingScene()
        scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(posed_mesh(surfaces, q, link)))
        rays = o3d.core.Tensor(np.hstack([origins, directions]).astype(np.float32))
        per_link.append(scene.cast_rays(rays)['t_hit'].numpy())
    per_link = np.array(per_link)
    nearest = per_link.min(axis=0)
    assert np.isfinite(nearest).any()
    np.testing.assert_allclose(hits.distance, nearest, rtol=1e-5)
    hit = np.isfinite(nearest)
    second = np.sort(per_link, axis=0)[1]
    clear = hit.copy()  # hit, and no other link within 0.1 mm behind (inf - inf on misses)
    clear[hit] = second[hit] - nearest[hit] > 1e-4
    np.testing.assert_array_equal(hits.link[clear], per_link.argmin(axis=0)[clear])
    np.testing.assert_allclose(hits.point[hit], origins[hit] + nearest[hit, None] * directions[hit],
                               atol=1e-5)


@pytest.mark.parametrize('robot', ['panda', 'ur5'])
def test_closest_points_match_brute_force(robot, panda, ur5):
    surfaces = {'panda': panda, 'ur5': ur5}[robot]
    rng = np.random.default_rng(5)
    q = surfaces.robot.random_configuration(rng, 1)[0]
    points = rng.uniform(-0.8, 0.8, (6, 3)) + [0.0, 0.0, 0.5]
    found = surfaces.closest_points(q, points)
    meshes = [posed_mesh(surfaces, q, link) for link in surfaces.links]
    for point, distance, link, closest in zip(points, found.distance, found.link, found.point):
        exact = np.array([point_triangle_distance(point, mesh) for mesh in meshes])
        assert distance == pytest.approx(exact.min(), abs=1e-5)
        assert exact[link] == pytest.approx(exact.min(), abs=1e-5)
        assert np.linalg.norm(point - closest) == pytest.approx(distance, abs=1e-6)


def test_sphere_distance_bounds_the_true_distance(surfaces):
    rng = np.random.default_rng(6)
    q = surfaces.robot.random_configuration(rng, 1)[0]
    centres = surfaces.sphere_centres(q)
    rotations, positions = surfaces.link_poses(q)
    for i, link in enumerate(surfaces.links):
        rotation, position = surfaces.robot.link_pose(q, link)
        local, _ = surfaces.spheres(link)
        np.testing.assert_allclose(centres[surfaces.sphere_link == i],
                                   local @ rotation.T + position,
                                   atol=1e-12)
    points = rng.uniform(-1.2, 1.2, (2000, 3)) + [0.0, 0.0, 0.4]
    distance, link = surfaces.sphere_distance(q, points)
    brute = np.linalg.norm(points[:, None] - centres[None], axis=2) - surfaces.sphere_radii
    np.testing.assert_allclose(distance, brute.min(axis=1), atol=1e-12)
    np.testing.assert_array_equal(link, surfaces.sphere_link[brute.argmin(axis=1)])
    # The spheres enclose the robot: never farther than the surface, and close to it.
    true = surfaces.closest_points(q, points).distance
    assert np.all(distance <= true + 1e-5)
    assert np.all(true - distance <= 2 * surfaces.sphere_radii.max())
    on_surface = np.vstack([surfaces.surface_points(link_name)[0][:20] @ r.T + p
                            for link_name, r, p in zip(surfaces.links, rotations, positions)])
    assert np.all(surfaces.sphere_distance(q, on_surface)[0] <= 1e-9)


def test_unknown_link_and_missing_geometry_are_clear_errors(panda):
    with pytest.raises(SurfacesError, match='no collision geometry'):
        panda.surface_points('no_such_link')
    robot = RobotModel.load('panda')
    robot.collision_model = type(robot.collision_model)()
    robot.geometry_error = 'mesh package://x/link0.stl not found'
    with pytest.raises(SurfacesError, match='no collision geometry: mesh package://x'):
        LinkSurfaces(robot)
    with pytest.raises(SurfacesError, match='finite'):
        panda.closest_points(np.zeros(7), [[np.nan, 0.0, 0.0]])
