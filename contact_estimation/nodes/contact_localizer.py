"""contact_localizer: τ_ext (+ a lidar cloud) → which link was hit, where and how hard.

Seed 000 on the arm (core/contact_localization.ContactLocalizer): for the residual τ_ext
(project sign, τ_ext = J(p)ᵀF for a force F ON the robot at p) it finds the link, the point
on its surface and the force in the friction cone; a lidar cloud (core/lidar_fusion.py)
picks the link among those the torques allow and gives a prior point, or the point itself
when the torques explain none (the seed's fallback).

When (core/localization_schedule.py): while a contact is present, some |τ_ext,i| over
`gate_thresholds` (the detector's thresholds by default; a hand guiding the arm raises no
stop but gets estimates), at most `max_rate` per second, on the residual just received,
never queueing work. The cloud is converted to the base frame when it arrives but processed
(crop, voxels, self filter, clusters) only when an estimate needs it, with the arm's pose at
the cloud's stamp.

Publishes per estimate, with the stamp of the residual sample and frame_id = the contacted
link: the point (PointStamped, link frame), the force on the robot there (WrenchStamped,
link frame, torque 0), rviz markers (ros/localization_messages.py), and on /diagnostics the
link range, source (torque / torque+lidar / lidar fallback), ambiguity and fit residual.
Torques that no single point contact explains publish no point: the status says so.

The cloud's frame_id is the base frame, `lidar.frame` (pose from `lidar.position` and
`lidar.orientation`), or any frame TF knows when tf2_ros is installed. Bad input (a cloud
without x/y/z, truncated, all NaN, in an unknown frame or too large; a residual of the wrong
size, joints or with NaN) is dropped with a throttled, counted message; a cloud older than
`cloud.max_age` at the residual's stamp is not used: the estimate is torque only and the
diagnostics say why.
"""
from __future__ import annotations

import sys
import time

import numpy as np
from geometry_msgs.msg import PointStamped, WrenchStamped
from sensor_msgs.msg import JointState, PointCloud2
from visualization_msgs.msg import MarkerArray

from contact_estimation.core.contact_localization import (SOURCE_TORQUE, ContactEstimate,
                                                          ContactLocalizer, LocalizationError)
from contact_estimation.core.lidar_fusion import (CloudConfig, CloudError, LidarFusion,
                                                  Obstacles, to_base_frame)
from contact_estimation.core.localization_schedule import (CLOUD_DEFAULTS, DEFAULTS,
                                                           LOCALIZER_DEFAULTS,
                                                           LocalizationSchedule, PoseHistory)
from contact_estimation.core.surfaces import LinkSurfaces, SurfacesError
from contact_estimation.ros.conversions import (cloud_to_xyz, point_stamped, stamp_to_seconds,
                                                wrench_stamped)
from contact_estimation.ros.diagnostics import OK, WARN
from contact_estimation.ros.joint_states import JointStateError, JointStateReader
from contact_estimation.ros.localization_messages import estimate_markers, estimate_values
from contact_estimation.ros.node_main import run
from contact_estimation.ros.suite_node import SuiteNode

try:  # a ROS distribution has it; the PyPI wheels do not
    import tf2_ros
except ImportError:
    tf2_ros = None

NAME = 'contact_localizer'

# Parameters that build the localizer, the cloud processing and the schedule: a change of
# any rebuilds them (the link surfaces, `point_spacing`, are built once).
_LOCALIZER_PARAMETERS = tuple(LOCALIZER_DEFAULTS)
_CLOUD_PARAMETERS = tuple(f'cloud.{name}' for name in CLOUD_DEFAULTS)
_SCHEDULE_PARAMETERS = ('gate_thresholds', 'max_rate')
_LIDAR_POSE_PARAMETERS = ('lidar.frame', 'lidar.position', 'lidar.orientation')


class ContactLocalizerNode(SuiteNode):
    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        self.fusion: LidarFusion | None = None
        with self.starting():
            self._declare_parameters()
            try:
                self.surfaces = LinkSurfaces(self.robot, self.value('point_spacing'))
            except SurfacesError as err:
                raise ValueError(f'the localizer needs link surfaces: {err}') from err
            self._build({})
        self._residuals = JointStateReader(self.robot.joint_names)
        self._history = PoseHistory(self.fusion.config.max_age)
        self._cloud: tuple[float, np.ndarray] | None = None  # latest: stamp, base-frame points
        self._cloud_processed = True    # the latest cloud has been through the fusion
        self._tf_buffer = None          # made on the first cloud in a frame only TF knows
        self._point_pub = self.publisher('point', PointStamped)
        self._wrench_pub = self.publisher('wrench', WrenchStamped)
        self._marker_pub = self.publisher('markers', MarkerArray)
        self.subscribe('residual', JointState, self._on_residual)
        self.subscribe('lidar_points', PointCloud2, self._on_cloud)
        self.on_parameter_change(self._on_parameter_change)
        self.problems.set_status(OK, 'no contact')
        self.problems.values['cloud'] = 'none received: torque only'
        self.get_logger().info(
            f'localizing contacts on {len(self.localizer.links)} links of '
            f'{self.robot.name or "the robot"} from {self.spec.topic("residual")} and '
            f'{self.spec.topic("lidar_points")}; at most {self.value("max_rate"):g} Hz')

    # ------------------------------------------------------------------ parameters
    def _declare_parameters(self) -> None:
        """Every parameter, with the defaults of core/localization_schedule.py (and through
        it ContactLocalizer's and CloudConfig's)."""
        d, k, loc, cloud = self.declare, DEFAULTS, LOCALIZER_DEFAULTS, CLOUD_DEFAULTS
        d('gate_thresholds', list(k['gate_thresholds']), 'estimate while some |τ_ext,i| '
          'exceeds this, N·m: one value or one per joint (default: the detector\'s ψ_0)')
        d('max_rate', k['max_rate'], 'most estimates per second, Hz (each costs ms of CPU)',
          0.1, 1000.0)
        d('point_spacing', k['point_spacing'], 'distance between the surface samples the '
          'localizer scores, m (finer: slower, the refinement does the rest)', 0.002, 0.2,
          read_only=True)
        d('mu', loc['mu'], 'friction coefficient μ of the contact (seed 000 eq. 6)', 0.01, 5.0)
        d('normal_slack', loc['normal_slack'], 'widens the friction cone by the error of a '
          'mesh normal, rad (< π/2 − atan μ)', 0.0, 1.5)
        d('delta_tau', loc['delta_tau'], 'δ_τ of seed 000 eq. 13: a joint torque below this '
          'counts as zero, N·m', 1e-4, 100.0)
        d('delta_w', loc['delta_w'], 'δ_w of seed 000 eq. 13, and the fit residual that '
          'counts as explained, N·m (a few times the residual noise)', 1e-4, 100.0)
        d('contact_distance', loc['contact_distance'], 'an obstacle farther than this from '
          'every link is not the contact, m', 1e-3, 2.0)
        d('prior_radius', loc['prior_radius'], 'how far the contact may lie from the '
          "cloud's obstacle point, m", 1e-3, 2.0)
        d('refine', loc['refine'], 'best samples refined on the surface per estimate', 1, 100)
        d('cloud.workspace_min', list(cloud['workspace_min']), 'the cloud is cropped to the '
          'box from here (x y z, m, base frame)')
        d('cloud.workspace_max', list(cloud['workspace_max']), '... to here (x y z, m)')
        d('cloud.voxel_size', cloud['voxel_size'], 'voxel grid of the cloud, m', 1e-3, 1.0)
        d('cloud.self_margin', cloud['self_margin'], 'points this close to the robot are '
          "its own, m (covers the arm's motion between cloud and pose)", 0.0, 1.0)
        d('cloud.cluster_eps', cloud['cluster_eps'], 'DBSCAN neighbourhood, m', 1e-3, 1.0)
        d('cloud.cluster_min_points', cloud['cluster_min_points'], 'DBSCAN core size', 1, 1000)
        d('cloud.max_points', cloud['max_points'], 'larger clouds are refused', 1, 10_000_000)
        d('cloud.max_age', cloud['max_age'], 'a cloud older than this at the residual '
          "sample's stamp is stale (torque only), s", 1e-3, 60.0)
        d('lidar.frame', k['lidar.frame'], "the lidar's frame_id, whose pose the next two "
          "give ('' = none: clouds in the base frame, or frames TF knows)")
        d('lidar.position', list(k['lidar.position']), 'lidar origin x y z in the base '
          'frame, m')
        d('lidar.orientation', list(k['lidar.orientation']), 'lidar orientation in the base '
          'frame, quaternion x y z w')

    def _build(self, changes: dict) -> None:
        """Localizer, cloud processing, schedule and lidar pose from the parameters with
        `changes` applied; ValueError (LocalizationError, CloudError) on a bad value."""
        def value(name):
            return changes.get(name, self.value(name))
        localizer = ContactLocalizer(self.surfaces,
                                     **{n: value(n) for n in _LOCALIZER_PARAMETERS})
        config = CloudConfig(**{n.split('.', 1)[1]: _frozen(value(n))
                                for n in _CLOUD_PARAMETERS})
        schedule = LocalizationSchedule(value('gate_thresholds'), self.robot.n,
                                        value('max_rate'))
        pose = (list(value('lidar.position')), list(value('lidar.orientation')))
        to_base_frame(np.zeros((0, 3)), *pose)  # CloudError on a bad pose
        self.localizer, self.schedule, self._lidar = localizer, schedule, (value('lidar.frame'),
                                                                           pose)
        if self.fusion is None or config != self.fusion.config:
            self.fusion = LidarFusion(self.surfaces, config)
            self._cloud_processed = False

    def _on_parameter_change(self, changes: dict) -> str | None:
        if not set(changes) & {*_LOCALIZER_PARAMETERS, *_CLOUD_PARAMETERS,
                               *_SCHEDULE_PARAMETERS, *_LIDAR_POSE_PARAMETERS}:
            return None
        self._build(changes)  # a ValueError refuses the change (ros/params.on_change)
        self._history.span = self.fusion.config.max_age
        return None

    # -------------------------------------------------------------------- messages
    def _on_cloud(self, msg: PointCloud2) -> None:
        self.problems.traffic['clouds_received'] += 1
        size = msg.width * msg.height
        if size > self.fusion.config.max_points:
            self.problems.report('cloud_too_large', f'cloud of {size} points exceeds '
                                 f'cloud.max_points = {self.fusion.config.max_points}: dropped')
            return
        pose = self._sensor_pose(msg)
        if pose is None:
            return
        try:
            points = cloud_to_xyz(msg)
        except ValueError as err:
            self.problems.report('bad_cloud', f'{err}: dropped')
            return
        if size and not len(points):
            self.problems.report('cloud_not_finite', f'cloud of {size} points, none of them '
                                 'finite: dropped')
            return
        self._cloud = (stamp_to_seconds(msg.header.stamp), to_base_frame(points, *pose))
        self._cloud_processed = False

    def _sensor_pose(self, msg: PointCloud2) -> tuple | None:
        """The cloud frame's pose in the base frame (translation, quaternion x y z w), or
        None (reported) when the frame is unknown."""
        frame = msg.header.frame_id.lstrip('/')
        lidar_frame, pose = self._lidar
        if frame == self.robot.base_link:
            return [0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]
        if lidar_frame and frame == lidar_frame:
            return pose
        if tf2_ros is not None:
            return self._tf_pose(msg, frame)
        self.problems.report('unknown_frame', f'cloud in frame {frame!r}: neither the base '
                             f'frame {self.robot.base_link!r} nor lidar.frame '
                             f'{lidar_frame!r} (and no tf2_ros to look it up): dropped')
        return None

    def _tf_pose(self, msg: PointCloud2, frame: str) -> tuple | None:
        """The frame's pose from TF at the cloud's stamp. The TF listener (a /tf
        subscription, costly at 1 kHz) starts with the first cloud that needs it."""
        from rclpy.time import Time
        if self._tf_buffer is None:
            self._tf_buffer = tf2_ros.Buffer()
            self._tf_listener = tf2_ros.TransformListener(self._tf_buffer, self)
        try:
            transform = self._tf_buffer.lookup_transform(
                self.robot.base_link, frame, Time.from_msg(msg.header.stamp)).transform
        except tf2_ros.TransformException as err:
            self.problems.report('unknown_frame', f'cloud in frame {frame!r}: no transform '
                                 f'to {self.robot.base_link!r} ({err}): dropped')
            return None
        t, r = transform.translation, transform.rotation
        return [t.x, t.y, t.z], [r.x, r.y, r.z, r.w]

    def _on_residual(self, msg: JointState) -> None:
        self.problems.traffic['residuals_received'] += 1
        try:
            order = self._residuals.order(msg)
        except JointStateError as err:
            self.problems.report(err.kind, str(err))
            return
        tau = self._residuals.field(msg, 'effort', order)
        q = self._residuals.field(msg, 'position', order)
        if tau is None or q is None:
            self.problems.report('wrong_size', f'residual with {len(msg.effort)} efforts and '
                                 f'{len(msg.position)} positions for {len(order)} joints: '
                                 'dropped')
            return
        if not (np.isfinite(tau).all() and np.isfinite(q).all()):
            self.problems.report('not_finite', 'residual with NaN/inf: dropped')
            return
        t = stamp_to_seconds(msg.header.stamp)
        self._history.add(t, q)
        if not self.schedule.due(time.monotonic(), tau):
            if not self.schedule.contact(tau):
                self.problems.set_status(OK, 'no contact')
            return
        self._estimate(t, q, tau, msg)
        self.schedule.finished(time.monotonic())

    # ------------------------------------------------------------------ estimates
    def _estimate(self, t: float, q: np.ndarray, tau: np.ndarray, msg: JointState) -> None:
        obstacles, cloud = self._obstacles(t)
        start = time.perf_counter()
        try:
            estimate = self.localizer.estimate(q, tau, obstacles.proximity if obstacles
                                               else None)
        except LocalizationError as err:
            self.problems.report('bad_residual', f'{err}: no estimate')
            return
        seconds = time.perf_counter() - start
        self.problems.traffic['estimates'] += 1
        self.problems.values.update(estimate_values(estimate, seconds, cloud))
        stamp = msg.header.stamp
        if estimate.found:
            self._point_pub.publish(point_stamped(stamp, estimate.link, estimate.point_link))
            self._wrench_pub.publish(wrench_stamped(stamp, estimate.link, estimate.force_link,
                                                    np.zeros(3)))
            self.problems.traffic['estimates_published'] += 1
            self.problems.set_status(OK, f'contact on {estimate.link}: '
                                     f'{np.linalg.norm(estimate.force_link):.1f} N '
                                     f'({estimate.source})')
        else:
            self.problems.report('inconsistent', f'no point published: '
                                 f'{estimate.message or "no contact point found"}')
            self.problems.set_status(WARN, estimate.message or 'no contact point found')
        uses_cloud = estimate.source != SOURCE_TORQUE and obstacles is not None
        self._marker_pub.publish(estimate_markers(
            estimate, stamp, self.robot.base_link,
            self.surfaces.spheres(estimate.link) if estimate.found else None,
            self._cluster_near(obstacles, estimate) if uses_cloud else None,
            '' if obstacles else cloud))

    def _obstacles(self, t: float) -> tuple[Obstacles | None, str]:
        """The cloud's obstacles for a residual stamped t (s), processing the latest cloud
        first if it has not been and is recent enough; and a word on the cloud for the
        diagnostics."""
        if self._cloud is None:
            return None, 'none received: torque only'
        stamp, points = self._cloud
        age = t - stamp
        if not self._cloud_processed and abs(age) <= self.fusion.config.max_age:
            self._cloud_processed = True
            q = self._history.at(stamp)
            if q is None:
                return None, 'no joint positions at the cloud stamp: torque only'
            start = time.perf_counter()
            try:
                self.fusion.update(stamp, q, points)
            except CloudError as err:
                self.problems.report('bad_cloud', f'{err}: dropped')
            self.problems.values['cloud_time'] = f'{1000 * (time.perf_counter() - start):.1f} ms'
        obstacles = self.fusion.current(t)
        if obstacles is None:
            self.problems.report('stale_cloud', f'latest cloud {age:.2f} s from the residual '
                                 f'(cloud.max_age {self.fusion.config.max_age:g} s): torque '
                                 'only')
            return None, f'stale ({age:.2f} s old): torque only'
        return obstacles, f'{len(obstacles.points)} obstacle points, {age:.2f} s old'

    def _cluster_near(self, obstacles: Obstacles, estimate: ContactEstimate) -> np.ndarray:
        """The obstacle cluster that holds the obstacle point nearest the contacted link."""
        if not estimate.found or not len(obstacles.points):
            return np.zeros((0, 3))
        nearest = obstacles.proximity.obstacle_point[self.surfaces.link_index(estimate.link)]
        which = np.argmin(np.linalg.norm(obstacles.points - nearest, axis=1))
        return obstacles.points[obstacles.labels == obstacles.labels[which]]


def _frozen(value):
    """A parameter's list as a tuple (CloudConfig is frozen and compared)."""
    return value if isinstance(value, (str, int, float)) else tuple(value)


def main(args=None):
    return run(ContactLocalizerNode, args)


if __name__ == '__main__':
    sys.exit(main())
