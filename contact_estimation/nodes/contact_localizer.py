"""contact_localizer: τ_ext (+ a lidar cloud) → which link was hit, where and how hard.

Every sensor at once (core/contact/fused_contact.FusedContactEstimator; seeds 000 and 004): for the
residual τ_ext (project sign, τ_ext = J(p)ᵀF for a force F ON the robot at p), the
compensated base wrench [F; p × F] that ft_contact_estimator publishes on `base_wrench`
(used when its stamp is within `wrench_max_age` of the residual's) and the lidar cloud's
obstacles (core/contact/lidar_fusion.py, a prior on the link and the point), it finds the link, the
point on its surface and the force in the friction cone that explain them all; the
diagnostics say which sensors the estimate used (`source`) and its ambiguity.

When (core/contact/localization_schedule.py): while a contact is present, some |τ_ext,i|
over `gate_thresholds` (the detector's thresholds by default; a hand guiding the arm raises
no stop but gets estimates), at most `max_rate` per second of stamps (fewer when an
estimate takes longer), on the residual just received, never queueing work: the samples it
estimates on are chosen by their stamps, as a replay chooses them. The cloud is converted
to the base frame when it arrives (refused from its header when too large) but processed
(crop, voxels, self filter, clusters) only when an estimate needs it, with the arm's pose
at the cloud's stamp, in a worker process (ros/cloud_process.py) so that it never holds the
executor nor the interpreter lock: the estimate that asks for a new cloud uses the
obstacles already processed, later ones the new cloud's (in a replay, which processes it
at once, that estimate too). Live, that estimate sends the cloud to the worker only once its
point and wrench are sent: copying a 43 000-point cloud to the worker delayed a contact's
first estimate by 2-6 ms, and that estimate cannot use it (issue 35).

Publishes per estimate, with the stamp of the residual sample and frame_id = the contacted
link: the point (PointStamped, link frame), the force on the robot there (WrenchStamped,
link frame, torque 0), rviz markers (ros/localization_messages.py), and on /diagnostics the
link range, source (the sensors used: torque, ft, lidar joined by '+'), whether the base
wrench was used, ambiguity and fit residual. Data that no single point contact explains
within the noise publish no point: the status says so.

The cloud's frame_id is the base frame, `lidar.frame` (pose from `lidar.position` and
`lidar.rpy`, core/robot/pose.py), or any frame TF knows when tf2_ros is installed. Bad input
(a cloud without x/y/z, truncated, all NaN, in an unknown frame or too large; a residual of
the wrong size, joints or with NaN: ros/joint_states.py) is dropped with a throttled message,
counted under its kind (core/input_rejected.py); a cloud older than `cloud.max_age` at the
residual's stamp is not used: the estimate is torque only and the diagnostics say why.
Clouds that stop arriving (lost in transport or the lidar stopped; issue 36,
core/contact/lidar_watch.py: none for `lidar.timeout` once one came, or since the start with
`lidar.required`) make the status WARN with the time since the last cloud (`lidar`).
"""
from __future__ import annotations

import dataclasses
import sys
from functools import partial

import numpy as np
from geometry_msgs.msg import PointStamped, WrenchStamped
from sensor_msgs.msg import JointState, PointCloud2
from visualization_msgs.msg import MarkerArray

from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.contact.contact import ContactEstimate
from contact_estimation.core.contact.contact_localization import LocalizerConfig
from contact_estimation.core.contact.ft_compensation import BaseWrench
from contact_estimation.core.contact.fused_contact import (
    LIDAR,
    FusedContactError,
    FusedContactEstimator,
    SensorNoise,
)
from contact_estimation.core.contact.lidar_fusion import CloudConfig, Obstacles, PoseHistory
from contact_estimation.core.contact.lidar_watch import LidarWatch, LidarWatchConfig
from contact_estimation.core.contact.localization_schedule import (
    LocalizationSchedule,
    ScheduleConfig,
)
from contact_estimation.core.input_rejected import IMPLAUSIBLE, InputRejected
from contact_estimation.core.robot.surfaces import LinkSurfaces, SurfacesError
from contact_estimation.ros.cloud_process import CloudJob, CloudProcess, CloudRecipe
from contact_estimation.ros.contact_messages import contact_messages
from contact_estimation.ros.conversions import stamp_to_seconds
from contact_estimation.ros.diagnostics import ERROR, OK, WARN
from contact_estimation.ros.joint_states import JointStateReader
from contact_estimation.ros.localization_messages import estimate_markers, estimate_values
from contact_estimation.ros.node_main import run
from contact_estimation.ros.params import ROBOT, Parameter, ParameterTable, robot_arguments, rows
from contact_estimation.ros.qos import CLOUD_QOS
from contact_estimation.ros.sensor_frames import (
    SensorFrame,
    cloud_in_base_frame,
    cloud_table,
    sensor_frame_table,
)
from contact_estimation.ros.suite_node import SuiteNode

NAME = 'contact_localizer'

PARAMETERS = ROBOT + rows(ScheduleConfig) + ParameterTable(
    Parameter('point_spacing', 'distance between the surface samples the localizer scores, m '
              '(finer: slower, the refinement does the rest)', 0.02, (0.002, 0.2),
              read_only=True),
    Parameter('wrench_max_age', 'a base wrench stamped farther than this from the residual '
              'is not used, s (ft_contact_estimator publishes one per F/T reading)', 0.05,
              (1e-4, 10.0)),
) + rows(LocalizerConfig) + rows(SensorNoise, 'wrench_noise.') + cloud_table(
) + sensor_frame_table('lidar', 'lidar') + rows(LidarWatchConfig, 'lidar.')
# Parameters that build the localizer and the schedule: a change of any rebuilds them (the
# link surfaces, `point_spacing`, are built once).
_REBUILT_BY = (*PARAMETERS.feeding(ScheduleConfig), *PARAMETERS.feeding(LocalizerConfig),
               *PARAMETERS.feeding(SensorNoise))


class ContactLocalizerNode(SuiteNode):
    PARAMETERS = PARAMETERS

    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        with self.starting():
            self.lidar = SensorFrame(self, 'lidar', 'lidar')
            spacing = {'point_spacing': self.value('point_spacing')}
            try:
                self.surfaces = LinkSurfaces(self.robot, **spacing)
            except SurfacesError as err:
                raise ValueError(f'the localizer needs link surfaces: {err}') from err
            self.localizer, self.schedule = self._build_localizer({})
            self._cloud_config = PARAMETERS.build(CloudConfig, self.values())
        self._residuals = JointStateReader(self.robot.joint_names)
        self._history = PoseHistory(self._cloud_config.max_age)
        self._cloud: tuple[float, np.ndarray] | None = None  # latest: stamp, base-frame points
        self._cloud_pending = False     # the cloud worker is processing one
        self._cloud_processed = True    # the latest cloud has been through the fusion
        self._obstacles_found: Obstacles | None = None  # the latest processed cloud's
        self._cloud_job: tuple | None = None  # live: (stamp, q, points), sent after the estimate
        self._base_wrench: BaseWrench | None = None  # the latest
        self._lidar = LidarWatch(PARAMETERS.build(LidarWatchConfig, self.values()),
                                 self.seconds())  # its clouds' arrivals: stale when they stop
        self._lidar_stale = ''          # why, as last reported
        self._point_output = self.output('point', PointStamped)
        self._wrench_output = self.output('wrench', WrenchStamped)
        self._marker_pub = self.publisher('markers', MarkerArray)
        self.receive('residual', JointState, self._on_residual, self.process_residual)
        self._clouds = CloudProcess(CloudRecipe(*robot_arguments(self), spacing),
                                    self.surfaces, NAME, self.runs_in_real_time,
                                    partial(self.problems.report, level=ERROR),
                                    self.get_logger().info)
        self.closing(self._clouds.close)
        self.subscribe('lidar_points', PointCloud2, self._on_cloud, CLOUD_QOS)
        # In composed mode ft_contact_estimator hands each compensated wrench over (one thread).
        self.receive('base_wrench', WrenchStamped, self._on_base_wrench,
                     self.process_base_wrench)
        self.on_parameter_change(self._on_parameter_change)
        self.problems.set_status(OK, 'no contact')
        self.problems.values['cloud'] = 'none received: torque only'
        self.problems.values['base_wrench'] = 'none received'
        self.problems.condition(self._lidar_condition)
        self.get_logger().info(
            f'localizing contacts on {len(self.localizer.links)} links of '
            f'{self.robot.name or "the robot"} from {self.spec.topic("residual")}, '
            f'{self.spec.topic("base_wrench")} and {self.spec.topic("lidar_points")}; at '
            f'most {self.value("max_rate"):g} Hz')

    # ------------------------------------------------------------------ parameters
    def _build_localizer(self, changes: dict
                         ) -> tuple[FusedContactEstimator, LocalizationSchedule]:
        """Estimator and schedule from the parameters with `changes` applied; ValueError
        (FusedContactError, LocalizationError) on a bad value. The torque noise is δ_w/5
        (δ_w: 5 σ_τ)."""
        values = self.values(changes)
        settings = PARAMETERS.build(LocalizerConfig, values)
        noise = SensorNoise(settings.delta_w / 5, **PARAMETERS.fields(SensorNoise, values))
        return (FusedContactEstimator(self.surfaces, noise=noise, **dataclasses.asdict(settings)),
                LocalizationSchedule(PARAMETERS.build(ScheduleConfig, values), self.robot.n))

    def _on_parameter_change(self, changes: dict) -> str | None:
        """Rebuild what the changed parameters describe, all or nothing: a ValueError
        (CloudError, FusedContactError) refuses the change (ros/suite_node.on_parameter_change)."""
        changed = set(changes)
        built = self._build_localizer(changes) if changed & set(_REBUILT_BY) else None
        cloud = (PARAMETERS.build(CloudConfig, self.values(changes))
                 if changed & set(PARAMETERS.feeding(CloudConfig)) else None)
        lidar = (self.lidar.proposed(changes) if changed & set(self.lidar.parameters)
                 else None)
        watch = (PARAMETERS.build(LidarWatchConfig, self.values(changes))
                 if changed & set(PARAMETERS.feeding(LidarWatchConfig)) else None)
        if lidar:
            self.lidar.use(lidar)
        if watch:
            self._lidar.config = watch
        if built:
            self.localizer, self.schedule = built
        if cloud:
            self._cloud_config, self._cloud_processed = cloud, False
            self._history.span = cloud.max_age
        return None

    # -------------------------------------------------------------------- messages
    def _on_cloud(self, msg: PointCloud2) -> None:
        """Decode the cloud into the base frame now (refused from its header if too large);
        process it on the cloud worker when an estimate needs it."""
        self.problems.traffic['clouds_received'] += 1
        t = self.believed(msg.header.stamp, 'lidar cloud')
        if t is None:
            return
        self._lidar.arrived(self.seconds())
        try:
            points = cloud_in_base_frame(msg, self.lidar, self._cloud_config.max_points,
                                         self.value('cloud.budget_points'))
        except InputRejected as err:
            self.problems.report(err.kind, f'{err}: dropped')
            return
        self._cloud = (t, points)
        self._cloud_processed = False

    def _lidar_condition(self) -> str:
        """On /diagnostics (ros/diagnostics.condition): the time since the last cloud, and
        a warning while the lidar is stale (estimates are then torque only); logged when it
        goes stale."""
        now = self.seconds()
        self.problems.values['lidar'] = self._lidar.summary(now)
        stale = self._lidar.stale(now)
        if stale and not self._lidar_stale:
            self.problems.report('stale_lidar', f'{stale}: estimates torque only')
        self._lidar_stale = stale
        return stale

    def _on_base_wrench(self, msg: WrenchStamped) -> None:
        force, torque = msg.wrench.force, msg.wrench.torque
        self.process_base_wrench(BaseWrench(
            stamp_to_seconds(msg.header.stamp), msg.header.frame_id,
            np.array([force.x, force.y, force.z, torque.x, torque.y, torque.z])))

    def process_base_wrench(self, wrench: BaseWrench) -> None:
        """Keep the latest compensated base wrench (handed over as it is in composed mode);
        it is checked when an estimate needs it."""
        self.problems.traffic['base_wrenches_received'] += 1
        self._base_wrench = wrench

    def _on_residual(self, msg: JointState) -> None:
        """A residual (τ_ext in its effort) with the positions it was computed at."""
        self.problems.traffic['residuals_received'] += 1
        sample = self.joint_sample(msg, self._residuals, 'residual', residual=True,
                                   required=('position', 'effort'))
        if sample is not None:  # one not believed is never the newest pose
            self.process_residual(sample)

    def process_residual(self, sample: JointSample) -> None:
        """One residual (every one, in stamp order): the pose history, and an estimate when
        one is due by the stamps (core/contact/localization_schedule.py), so that a replay of
        the same samples estimates on the same ones."""
        t, q, tau = sample.t, sample.q, sample.tau_ext
        self._history.add(t, q)
        due = self.schedule.due(t, tau)
        self.contact_lasts = self.schedule.open  # the gate: its process wakes sooner
        if not due:
            if not self.contact_lasts:
                self.problems.set_status(OK, 'no contact')
            return
        start = self.steady()
        self._estimate(t, q, tau, sample.stamp)
        self.schedule.finished(t, self.steady() - start)
        if self._cloud_job is not None:
            self._submit_cloud(*self._cloud_job)
            self._cloud_job = None

    # ------------------------------------------------------------------ estimates
    def _estimate(self, t: float, q: np.ndarray, tau: np.ndarray, stamp) -> None:
        obstacles, cloud = self._obstacles(t)
        wrench = self._wrench_at(t)
        start = self.steady()
        proximity = obstacles.proximity if obstacles else None
        try:
            # A base wrench that disagrees with the torques (its compensation lags or errs) is
            # left out when the torques and the cloud alone are consistent.
            estimate, left_out = self.localizer.estimate_or_without_wrench(q, tau, wrench,
                                                                           proximity)
            if left_out:
                self.problems.values['base_wrench'] = 'not used: inconsistent with τ_ext'
        except FusedContactError as err:  # read finite: values too large to be measured
            self.problems.report(IMPLAUSIBLE, f'{err}: no estimate')
            return
        seconds = self.steady() - start
        self.problems.traffic['estimates'] += 1
        self.problems.values.update(estimate_values(estimate, seconds, cloud))
        contact = estimate.contact
        if contact is not None and estimate.consistent:
            point, wrench, _ = contact_messages(contact, stamp)
            self._point_output.send(point)
            self._wrench_output.send(wrench)
            self.problems.traffic['estimates_published'] += 1
            self.problems.set_status(OK, f'contact on {contact.link}: '
                                     f'{np.linalg.norm(contact.force):.1f} N '
                                     f'({estimate.source})')
        else:
            self.problems.report('inconsistent', f'no point published: '
                                 f'{estimate.message or "no contact point found"}')
            self.problems.set_status(WARN, estimate.message or 'no contact point found')
        uses_cloud = LIDAR in estimate.sensors and obstacles is not None
        self._marker_pub.publish(estimate_markers(
            estimate, stamp, self.robot.base_link,
            self.surfaces.spheres(contact.link) if contact is not None else None,
            self._cluster_near(obstacles, estimate) if uses_cloud else None,
            '' if obstacles else cloud))

    def _wrench_at(self, t: float) -> np.ndarray | None:
        """The latest base wrench [f; m] (base origin, base frame) if stamped within
        `wrench_max_age` of t (s), finite and in the base frame; the diagnostics say which."""
        latest = self._base_wrench
        if latest is None:
            return None
        wrench = latest.wrench
        age = t - latest.t
        problem = ('not finite' if not np.isfinite(wrench).all() else
                   f'in frame {latest.frame_id!r}, not {self.robot.base_link!r}'
                   if latest.frame_id != self.robot.base_link else
                   f'{age:.3f} s from the residual' if abs(age) > self.value('wrench_max_age')
                   else '')
        self.problems.values['base_wrench'] = f'not used: {problem}' if problem else 'used'
        return None if problem else wrench

    def _obstacles(self, t: float) -> tuple[Obstacles | None, str]:
        """The cloud's obstacles for a residual stamped t (s), processing the latest cloud
        first if it has not been and is recent enough; and a word on the cloud for the
        diagnostics."""
        if self._cloud is None:
            return None, 'none received: torque only'
        stamp, points = self._cloud
        age = t - stamp
        max_age = self._cloud_config.max_age
        if not self._cloud_processed and abs(age) <= max_age:
            self._cloud_processed = True
            q = self._history.at(stamp)
            if q is None:
                return None, 'no joint positions at the cloud stamp: torque only'
            self._cloud_pending = True
            if self._clouds.in_real_time:  # this estimate cannot use it: sent after it
                self._cloud_job = stamp, q, points
            else:
                self._submit_cloud(stamp, q, points)
        self._take_cloud_result()
        if self._clouds.fault:  # the cloud it had is lost; the next one goes to a new worker
            self._cloud_pending = False
            return None, f'{self._clouds.fault}: torque only'
        obstacles = self._obstacles_found
        if obstacles is None or not obstacles.fresh(t, max_age):
            obstacles = None
        if obstacles is None and self._cloud_pending:
            return None, 'being processed: torque only'
        if obstacles is None:
            self.problems.report('stale_cloud', f'latest cloud {age:.2f} s from the residual '
                                 f'(cloud.max_age {max_age:g} s): torque only')
            return None, f'stale ({age:.2f} s old): torque only'
        return obstacles, f'{len(obstacles.points)} obstacle points, {age:.2f} s old'

    def _submit_cloud(self, stamp: float, q: np.ndarray, points: np.ndarray) -> None:
        """The cloud stamped `stamp` (s; base-frame points, the arm at q) to the cloud worker
        (in a replay: processed now)."""
        self._clouds.submit(*CloudJob.of_points(stamp, q, points, self._cloud_config))

    def _take_cloud_result(self) -> None:
        """What the cloud worker finished since the last estimate: kept, counted, timed."""
        result = self._clouds.take()
        self.problems.values['cloud_worker'] = self._clouds.status()
        if result is None:
            return
        self._cloud_pending = False
        if result.failed is not None:
            self.guard.failed('the cloud worker', result.failed)
        elif result.rejected is not None:
            self.problems.report('bad_cloud', f'{result.rejected}: dropped')
        else:
            self._obstacles_found = result.obstacles
            self.problems.values['cloud_time'] = f'{1000 * result.cpu:.1f} ms of CPU'

    def _cluster_near(self, obstacles: Obstacles, estimate: ContactEstimate) -> np.ndarray:
        """The obstacle cluster that holds the obstacle point nearest the contacted link."""
        if not estimate.found or not len(obstacles.points):
            return np.zeros((0, 3))
        link = self.surfaces.link_index(estimate.contact.link)
        nearest = obstacles.proximity.obstacle_point[link]
        which = np.argmin(np.linalg.norm(obstacles.points - nearest, axis=1))
        return obstacles.points[obstacles.labels == obstacles.labels[which]]


def main(args=None):
    return run(ContactLocalizerNode, args)


if __name__ == '__main__':
    sys.exit(main())
