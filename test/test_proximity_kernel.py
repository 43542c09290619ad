"""The proximity check's compiled pair kernel (issue 35) against the numpy formula it replaced,
kept here as the reference: the same pairs, distances, margins, minima and deciding pairs, on
random bodies and robot poses and on the edge cases (no bodies, boxes or spheres only, pairs
at the cut-off, robot spheres inside a box, a still arm)."""
import numpy as np
import pytest
from scipy.spatial import cKDTree

from contact_estimation.core.contact.proximity import (BLOCK, CLUSTERS, SKELETON, Body,
                                                       HumanModel,
                                                       ProximityConfig, _Approach, _BodySet,
                                                       _Check, _check, cluster_spheres,
                                                       standing_skeleton)
from contact_estimation.core.robot.surfaces import LinkSurfaces

CONFIG = ProximityConfig()
SPEED = CONFIG.object_speed


@pytest.fixture(scope='module')
def surfaces(robot):
    return LinkSurfaces(robot, sphere_spacing=0.05)


def numpy_check(centres, radii, velocity, sphere_link, link_count, bodies, config, body_speed,
                stops) -> _Check:
    """The check as numpy arrays (a KD-tree of the bodies' spheres, np.minimum.at), as it was
    before the kernel."""
    robot_time = config.reaction_time + config.stopping_time / 2
    static = (body_speed * (config.reaction_time + config.stopping_time)
              + config.intrusion_distance + config.position_uncertainty)
    speed = np.linalg.norm(velocity, axis=1)
    watched = max(config.report_range, static + speed.max() * robot_time
                  + config.slowdown_distance + config.release_distance)
    pairs = cKDTree(centres).sparse_distance_matrix(
        cKDTree(bodies.centres), watched + radii.max() + bodies.largest_radius,
        output_type='ndarray')
    sphere_row, column, between = (np.ascontiguousarray(pairs[k]) for k in ('i', 'j', 'v'))
    box_distance, box_direction = numpy_box_distance(centres, bodies)
    box_row, box = np.indices(box_distance.shape).reshape(2, -1)
    row = np.concatenate([sphere_row, box_row])
    body = np.concatenate([bodies.sphere_body[column], bodies.box_body[box]])
    distance = np.concatenate([between - radii[sphere_row] - bodies.radii[column],
                               box_distance[box_row, box] - radii[box_row]])
    direction = np.vstack([(bodies.centres[column] - centres[sphere_row])
                           / np.maximum(between, 1e-12)[:, None],
                           box_direction[box_row, box]])
    approach = np.maximum(np.einsum('ij,ij->i', velocity[row], direction), 0.0)
    margin = distance - static - approach * robot_time
    count = len(bodies.names)
    result = _Check(np.full(count, np.inf), np.full(count, np.inf), np.full(count, np.nan),
                    np.full(count, -1), np.full(link_count, np.inf),
                    np.full((count, link_count), np.inf), np.full(len(radii), np.inf),
                    np.full(len(radii), np.inf), np.zeros(count), stops)
    near = np.flatnonzero((approach > 0.0) & (margin < config.slowdown_distance))
    result.approaching = _Approach(row[near], body[near], direction[near], approach[near],
                                   margin[near])
    np.minimum.at(result.sphere_distance, row, distance)
    counted = stops[body]
    np.minimum.at(result.sphere_margin, row[counted], margin[counted])
    np.minimum.at(result.link_distance, sphere_link, result.sphere_distance)
    np.minimum.at(result.body_link_distance.reshape(-1), body * link_count + sphere_link[row],
                  distance)
    np.minimum.at(result.margin, body, margin)
    np.minimum.at(result.body_distance, body, distance)
    deciding = np.flatnonzero(margin == result.margin[body])
    decided, first = np.unique(body[deciding], return_index=True)
    first = deciding[first]
    result.body_protective[decided] = distance[first] - margin[first]
    result.body_link[decided] = sphere_link[row[first]]
    return result


def numpy_box_distance(centres, bodies):
    """Each point to each box (M × B, negative inside) and the unit direction (M × B × 3)."""
    local = np.einsum('bji,mbj->mbi', bodies.box_rotation,
                      centres[:, None, :] - bodies.box_centre[None, :, :])
    clamped = np.clip(local, -bodies.box_half, bodies.box_half)
    outside = np.linalg.norm(local - clamped, axis=2)
    depth = np.min(bodies.box_half - np.abs(local), axis=2)
    offset = np.einsum('bij,mbj->mbi', bodies.box_rotation, clamped - local)
    direction = offset / np.where(outside > 0, outside, np.inf)[:, :, None]
    return np.where(outside > 0, outside, -depth), direction


def both(surfaces, q, q_dot, bodies, stops=None):
    """The kernel's check and the numpy formula's, the robot at (q, q̇)."""
    centres = surfaces.sphere_centres(q)
    velocity = (surfaces.sphere_centres(q + 1e-3 * q_dot) - centres) / 1e-3
    stops = np.ones(len(bodies.names), bool) if stops is None else stops
    arguments = (centres, surfaces.sphere_radii, velocity, surfaces.sphere_link,
                 len(surfaces.links), bodies, CONFIG, SPEED, stops)
    return _check(*arguments), numpy_check(*arguments)


def assert_same(kernel: _Check, reference: _Check) -> None:
    """Every per-body, per-link and per-sphere figure to the bit; the approaching pairs as a
    set (the KD-tree listed them in its own order)."""
    for name in ('margin', 'body_distance', 'body_protective', 'body_link', 'link_distance',
                 'body_link_distance', 'sphere_distance', 'sphere_margin'):
        np.testing.assert_array_equal(getattr(kernel, name), getattr(reference, name),
                                      err_msg=name)

    def pairs(approach: _Approach) -> np.ndarray:
        table = np.column_stack([approach.row, approach.body, approach.direction,
                                 approach.approach, approach.margin])
        return table[np.lexsort(table.T[::-1])]

    np.testing.assert_array_equal(pairs(kernel.approaching), pairs(reference.approaching))


def random_clusters(rng, centre, count: int) -> list[np.ndarray]:
    """`count` clusters of points about `centre`, some within the arm's reach."""
    return [centre + rng.normal(0.0, rng.uniform(0.02, 0.4), (rng.integers(1, 300), 3))
            for _ in range(count)]


def cluster_set(clusters) -> _BodySet:
    bodies = [Body(f'object_{i}', *cluster_spheres(c, CONFIG.voxel_size))
              for i, c in enumerate(clusters)]
    return _BodySet(0.0, CLUSTERS, [b.name for b in bodies], bodies)


def random_pose(rng, robot):
    low, high = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    return rng.uniform(low, high), rng.normal(0.0, 1.0, robot.n)


@pytest.mark.parametrize('seed', range(8))
def test_random_objects_and_poses_match_the_numpy_formula(surfaces, robot, seed):
    rng = np.random.default_rng(seed)
    q, q_dot = random_pose(rng, robot)
    bodies = cluster_set(random_clusters(rng, rng.uniform([-0.8, -0.8, 0.0], [0.8, 0.8, 1.0]),
                                         rng.integers(1, 6)))
    kernel, reference = both(surfaces, q, q_dot, bodies)
    assert len(reference.approaching.row) or np.isfinite(reference.margin).any()
    assert_same(kernel, reference)


@pytest.mark.parametrize('seed', range(4))
def test_a_person_spheres_and_trunk_box_match_the_numpy_formula(surfaces, robot, seed):
    """A skeleton near the arm, some of its parts not stopping (collaborative operation)."""
    rng = np.random.default_rng(100 + seed)
    q, q_dot = random_pose(rng, robot)
    human = HumanModel()
    keypoints = standing_skeleton(rng.uniform([0.3, -0.5, 0.8], [0.8, 0.5, 1.3]),
                                  rng.uniform(-np.pi, np.pi))
    bodies = _BodySet(0.0, SKELETON, list(human.part_names), human.bodies(keypoints))
    stops = rng.uniform(size=len(bodies.names)) < 0.5
    assert_same(*both(surfaces, q, q_dot, bodies, stops))


def test_no_bodies_give_infinite_distances_and_no_pairs(surfaces, robot):
    kernel, reference = both(surfaces, np.zeros(robot.n), np.ones(robot.n),
                             _BodySet(0.0, CLUSTERS, []))
    assert_same(kernel, reference)
    assert np.isinf(kernel.sphere_distance).all() and not len(kernel.approaching.row)


def test_boxes_only_and_robot_spheres_inside_a_box(surfaces, robot):
    """Two boxes, one holding some of the arm's spheres (negative distances: the depth)."""
    q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
    centres = surfaces.sphere_centres(q)
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    boxes = [Body('around', box_rotation=np.eye(3), box_centre=centres[20],
                  box_half_extents=np.array([0.1, 0.15, 0.2])),
             Body('beside', box_rotation=turn, box_centre=np.array([0.6, 0.2, 0.4]),
                  box_half_extents=np.array([0.05, 0.3, 0.4]))]
    kernel, reference = both(surfaces, q, np.full(robot.n, 0.7),
                             _BodySet(0.0, SKELETON, ['around', 'beside'], boxes))
    assert_same(kernel, reference)
    assert kernel.sphere_distance.min() < 0 and len(kernel.approaching.row)


def still_cut_off(surfaces, largest_radius: float) -> float:
    """How far apart the centres of a pair may be to be taken, the arm still (`_check`)."""
    static = (SPEED * (CONFIG.reaction_time + CONFIG.stopping_time)
              + CONFIG.intrusion_distance + CONFIG.position_uncertainty)
    watched = max(CONFIG.report_range,
                  static + CONFIG.slowdown_distance + CONFIG.release_distance)
    return watched + surfaces.sphere_radii.max() + largest_radius


def test_pairs_at_the_cut_off_are_those_of_the_numpy_formula(surfaces, robot):
    """Body spheres placed a few ulps either side of the cut-off from a robot sphere: the
    kernel takes exactly the pairs the KD-tree took (centres within W + the largest radii)."""
    q, still = np.array([0.2, -0.3, 0.1, -2.0, 0.0, 2.0, 0.8]), np.zeros(robot.n)
    centres = surfaces.sphere_centres(q)
    radius = 0.02
    cutoff = still_cut_off(surfaces, radius)
    tip = int(np.argmax(centres[:, 2]))
    steps = np.nextafter(cutoff, np.inf) - cutoff
    offsets = cutoff + steps * np.arange(-4, 5)
    bodies = [Body(f'object_{k}', (centres[tip] + [0.0, 0.0, offset])[None], np.array([radius]))
              for k, offset in enumerate(offsets)]
    body_set = _BodySet(0.0, CLUSTERS, [b.name for b in bodies], bodies)
    squared = np.sum((body_set.centres - centres[tip]) ** 2, axis=1)
    within = squared <= cutoff * cutoff
    assert within.any() and not within.all()  # both sides of the cut-off are tried
    kernel, reference = both(surfaces, q, still, body_set)
    assert_same(kernel, reference)
    assert (np.isfinite(kernel.margin) == within).all()


def test_a_still_arm_approaches_nothing(surfaces, robot):
    rng = np.random.default_rng(7)
    bodies = cluster_set(random_clusters(rng, np.array([0.4, 0.0, 0.5]), 3))
    kernel, reference = both(surfaces, random_pose(rng, robot)[0], np.zeros(robot.n), bodies)
    assert_same(kernel, reference)
    assert not len(kernel.approaching.row) and np.isfinite(kernel.margin).any()


def test_blocks_straddling_the_cut_off_miss_no_pair(surfaces, robot):
    """A wall of points 5 mm apart crossing the cut-off sphere of the arm's tip: blocks of body
    spheres lie across it, partly within, and the kernel skips only blocks wholly beyond it."""
    q, still = np.array([0.2, -0.3, 0.1, -2.0, 0.0, 2.0, 0.8]), np.zeros(robot.n)
    centres = surfaces.sphere_centres(q)
    tip = centres[np.argmax(centres[:, 0])]
    grid = np.arange(-1.0, 1.0, 0.005)
    across, up = (axis.ravel() for axis in np.meshgrid(tip[1] + grid, tip[2] + grid))
    bodies = cluster_set([np.column_stack([np.full(across.size, tip[0] + 1.0), across, up])])
    kernel, reference = both(surfaces, q, still, bodies)
    assert_same(kernel, reference)
    cutoff = still_cut_off(surfaces, bodies.largest_radius)
    starts = np.arange(0, len(bodies.radii), BLOCK)
    nearest = np.linalg.norm(np.maximum(np.maximum(bodies.block_low - tip, tip - bodies.block_high),
                                        0.0), axis=1)
    farthest = np.maximum.reduceat(np.linalg.norm(bodies.centres - tip, axis=1), starts)
    assert (nearest > cutoff).any() and ((nearest < cutoff) & (farthest > cutoff)).any()


def numpy_cluster_spheres(points, voxel_size):
    """`cluster_spheres` as numpy arrays, as it was before its kernel."""
    points = np.asarray(points, dtype=float).reshape(-1, 3)
    points = points[np.isfinite(points).all(axis=1)]
    cells = np.floor(points / voxel_size).astype(np.int64)
    cells -= cells.min(axis=0)
    key = np.ravel_multi_index(cells.T, cells.max(axis=0) + 1)
    _, voxel, counts = np.unique(key, return_inverse=True, return_counts=True)
    centres = np.column_stack([np.bincount(voxel, points[:, k]) for k in range(3)])
    centres /= counts[:, None]
    order = np.argsort(voxel, kind='stable')
    reach = np.linalg.norm(points[order] - centres[voxel[order]], axis=1)
    return centres, np.maximum.reduceat(reach, np.cumsum(counts) - counts)


@pytest.mark.parametrize('seed', range(6))
def test_cluster_spheres_match_the_numpy_formula(seed):
    """Clusters of 1 to 3000 points, some repeated, some not finite, about any centre."""
    rng = np.random.default_rng(seed)
    points = rng.normal(rng.uniform(-2, 2, 3), rng.uniform(0.01, 0.5), (rng.integers(1, 3000), 3))
    points = np.vstack([points, points[:len(points) // 3]])
    points[rng.uniform(size=len(points)) < 0.05, rng.integers(0, 3)] = np.nan
    voxel = rng.uniform(0.01, 0.1)
    for got, expected in zip(cluster_spheres(points, voxel), numpy_cluster_spheres(points, voxel)):
        np.testing.assert_array_equal(got, expected)
