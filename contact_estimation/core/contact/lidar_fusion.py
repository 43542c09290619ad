"""A lidar or depth cloud → the obstacles next to each link of the robot. No ROS.

Seed 000 §5 (external sensor): a cloud is too sparse to place the contact point, but it tells
which link is nearest the obstacle, and so resolves the link range [k_min, k_max] of the
torques (eq. 13); the obstacle's point on that link is a prior for the contact point.

`LidarFusion.update` takes the cloud's points (N×3) in the base frame (`to_base_frame` turns
a sensor-frame cloud and the sensor's pose, xyz + quaternion, into that), and the joint
positions at the cloud's time, and:
1. crops them to the workspace box (non-finite points dropped);
2. voxel-downsamples them (open3d);
3. drops the robot's own points: within `self_margin` of its surfaces at q. The cloud is
   older than the joint state, so the margin covers how far a link moves in that time;
4. clusters what is left (open3d DBSCAN) and drops what belongs to no cluster;
5. for each link, the nearest obstacle point, its distance and the point of the link's
   surface nearest it (link frame): a `LinkProximity`.
It returns them as `Obstacles`, which are `fresh(t, max_age)` while no older than `max_age`
(else the localizer works from the torques alone and says so). `PoseHistory` keeps the arm's
recent poses, so a cloud is self-filtered at the pose it saw, not at the latest one.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import open3d as o3d
from scipy.spatial.distance import cdist

from contact_estimation.core.robot.pose import POSITION_RANGE
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.settings import checked, setting


# Points tried first, per link, for its nearest obstacle point (nearest bounds first); the
# rest only where their bound beats the best distance of these.
_FIRST_BATCH = 32


class CloudError(ValueError):
    """A cloud or sensor pose that cannot be used."""


@dataclass
class LinkProximity:
    """What the cloud says about each link of `LinkSurfaces.links`: the distance to the
    nearest obstacle (m, L; inf: none seen), the point of the link's surface nearest that
    obstacle (link frame, L×3) and the obstacle point (base frame, L×3)."""

    distance: np.ndarray
    surface_point: np.ndarray
    obstacle_point: np.ndarray


@dataclass
class Obstacles:
    """One processed cloud: its stamp t (s), the obstacle points (base frame, N×3), their
    cluster (N, 0 … clusters−1), and the per-link view."""

    t: float
    points: np.ndarray
    labels: np.ndarray
    proximity: LinkProximity

    @property
    def clusters(self) -> list[np.ndarray]:
        """The points of each cluster."""
        return [self.points[self.labels == k] for k in range(self.labels.max(initial=-1) + 1)]

    def fresh(self, t: float, max_age: float) -> bool:
        """Whether these obstacles are no older than `max_age` at t (nor stamped in the future
        by more than that: a clock jump)."""
        return abs(t - self.t) <= max_age


@dataclass(frozen=True)
@checked
class CloudConfig:
    """How a lidar cloud becomes obstacles (the `cloud.*` settings of the nodes that read
    one)."""

    workspace_min: tuple = setting(
        (-1.2, -1.2, 0.02), 'the cloud is cropped to the box from here (x y z, m, base '
        'frame; its z cuts the floor)', range=POSITION_RANGE, size=3)
    workspace_max: tuple = setting((1.2, 1.2, 1.6), '... to here (x y z, m)',
                                   range=POSITION_RANGE, size=3)
    voxel_size: float = setting(0.01, 'voxel grid of the cloud, m', range=(1e-3, 1.0))
    self_margin: float = setting(
        0.03, "points this close to the robot are its own, m (covers the pose's error at the "
        "cloud's stamp)", range=(0.0, 1.0))
    cluster_eps: float = setting(0.04, 'DBSCAN neighbourhood, m', range=(1e-3, 1.0))
    cluster_min_points: int = setting(4, 'DBSCAN core size', range=(1, 1000))
    max_points: int = setting(500_000, 'larger clouds are refused', range=(1, 10_000_000))
    max_age: float = setting(0.5, 'processed obstacles older than this are stale, s',
                             range=(1e-3, 60.0))

    def __post_init__(self):
        low, high = np.asarray(self.workspace_min, float), np.asarray(self.workspace_max, float)
        if low.shape != (3,) or high.shape != (3,) or not np.all(low < high):
            raise CloudError('workspace_min and workspace_max must be 3 numbers each, min < max')


def to_base_frame(points: np.ndarray, translation, rotation) -> np.ndarray:
    """Sensor-frame points (N×3) → base frame, given the sensor's pose in the base frame:
    translation (x, y, z, m) and rotation (3×3, core/robot/pose.py makes it from rpy)."""
    return (np.asarray(points, dtype=float).reshape(-1, 3) @ np.asarray(rotation).T
            + np.asarray(translation, dtype=float))


class PoseHistory:
    """The arm's poses of the last `span` seconds by stamp (s): joint positions, or the
    messages that carry them (parsed only for the one a cloud needs). A cloud is older than
    the latest joint state; its robot points are removed at the pose it saw."""

    def __init__(self, span: float, max_samples: int = 10_000):
        self.span = span
        # Bounded by count as well as by age (10 s at 1 kHz by default): a stamp far off
        # must never let it grow.
        self._samples: deque[tuple[float, Any]] = deque(maxlen=max_samples)

    def add(self, t: float, pose: Any) -> None:
        self._samples.append((t, pose))
        while self._samples and self._samples[0][0] < t - self.span:
            self._samples.popleft()

    def at(self, t: float) -> Any | None:
        """The pose stamped nearest t; None when none is within `span` of it."""
        if not self._samples:
            return None
        stamp, pose = min(self._samples, key=lambda sample: abs(sample[0] - t))
        return pose if abs(stamp - t) <= self.span else None


def link_scenes(surfaces: LinkSurfaces) -> list[o3d.t.geometry.RaycastingScene]:
    """One ray-casting scene per link of `surfaces.links`, the mesh in the link's own frame."""
    scenes = []
    for link in surfaces.links:
        scene = o3d.t.geometry.RaycastingScene()
        scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(surfaces.mesh(link)))
        scenes.append(scene)
    return scenes


class LidarFusion:
    """Clouds → obstacles next to the links of `surfaces`."""

    def __init__(self, surfaces: LinkSurfaces, config: CloudConfig = CloudConfig()):
        self.surfaces = surfaces
        self.config = config
        self._scenes = link_scenes(surfaces)

    def update(self, t: float, q: np.ndarray, points: np.ndarray) -> Obstacles:
        """Process a cloud (base frame, N×3) taken at time t (s) with the arm at q."""
        points = np.asarray(points, dtype=float)
        if points.ndim != 2 or points.shape[1] != 3:
            raise CloudError(f'a cloud is N×3 points, got shape {points.shape}')
        if len(points) > self.config.max_points:
            raise CloudError(f'{len(points)} points exceed max_points = {self.config.max_points}')
        if not np.isfinite(t):
            raise CloudError('the cloud stamp must be finite')
        cfg = self.config
        points = points[np.isfinite(points).all(axis=1)]
        inside = np.all((points >= cfg.workspace_min) & (points <= cfg.workspace_max), axis=1)
        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points[inside]))
        points = np.asarray(cloud.voxel_down_sample(cfg.voxel_size).points)

        poses = self.surfaces.robot.link_poses(q, self.surfaces.links)
        bound = self._lower_bounds(q, points)
        points, bound = self._without_robot(points, bound, poses)
        labels = np.asarray(o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
                            .cluster_dbscan(cfg.cluster_eps, cfg.cluster_min_points),
                            dtype=int) if len(points) else np.zeros(0, dtype=int)
        clustered = labels >= 0
        points, labels, bound = points[clustered], labels[clustered], bound[clustered]
        return Obstacles(float(t), points, labels, self._nearest(points, bound, poses))

    def _lower_bounds(self, q: np.ndarray, points: np.ndarray) -> np.ndarray:
        """A lower bound of every point's distance to every link (N×L): the distance to the
        nearest of the link's enclosing spheres (core/robot/surfaces.py: every surface point is in
        one of them), 0 inside. Exact distances (ray-casting scenes, ~2 µs a pair) are then
        needed only where a bound leaves the answer open."""
        gaps = cdist(points, self.surfaces.sphere_centres(q)) - self.surfaces.sphere_radii
        bound = np.full((len(points), len(self.surfaces.links)), np.inf)
        for link in range(bound.shape[1]):
            mine = self.surfaces.sphere_link == link
            if mine.any():
                bound[:, link] = gaps[:, mine].min(axis=1)
        return np.maximum(bound, 0.0)

    def _without_robot(self, points: np.ndarray, bound: np.ndarray,
                       poses) -> tuple[np.ndarray, np.ndarray]:
        """The points farther than `self_margin` from every link (and their bounds): exact
        distances only to the links whose bound is within the margin."""
        robot = np.zeros(len(points), dtype=bool)
        for link, pose in enumerate(poses):
            near = np.flatnonzero(~robot & (bound[:, link] <= self.config.self_margin))
            if len(near):
                distance, _ = self._closest(link, pose, points[near])
                robot[near[distance <= self.config.self_margin]] = True
        return points[~robot], bound[~robot]

    def _nearest(self, points: np.ndarray, bound: np.ndarray, poses) -> LinkProximity:
        """For each link the nearest of `points`, exactly: points in the order of their bound,
        a first batch, then every point whose bound beats the best distance found."""
        links = len(poses)
        proximity = LinkProximity(np.full(links, np.inf), np.zeros((links, 3)),
                                  np.zeros((links, 3)))
        for link, pose in enumerate(poses):
            order = np.argsort(bound[:, link])
            best, best_surface, best_point = np.inf, None, None
            for batch in (order[:_FIRST_BATCH], order[_FIRST_BATCH:]):
                batch = batch[bound[batch, link] < best]
                if not len(batch):
                    break
                distance, surface = self._closest(link, pose, points[batch])
                k = int(np.argmin(distance))
                if distance[k] < best:
                    best, best_surface, best_point = distance[k], surface[k], points[batch[k]]
            if best_point is not None:
                proximity.distance[link] = best
                proximity.surface_point[link] = best_surface
                proximity.obstacle_point[link] = best_point
        return proximity

    def _closest(self, link: int, pose, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact distances of `points` (base frame) to the link's mesh at `pose` and the
        nearest surface points (link frame)."""
        rotation, origin = pose
        local = (points - origin) @ rotation
        result = self._scenes[link].compute_closest_points(
            o3d.core.Tensor(local.astype(np.float32)))
        surface = result['points'].numpy().astype(float)
        return np.linalg.norm(local - surface, axis=1), surface
