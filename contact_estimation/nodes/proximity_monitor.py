"""proximity_monitor: robot spheres against people and objects → stop and speed scale before
contact (seed 002, core/contact/proximity.py).

Inputs: the listener's joint state (q, q̇), a tracked skeleton (geometry_msgs/PoseArray, one
pose per keypoint in `keypoint_names` order, COCO-17 by default; an empty array: nobody
tracked) and the lidar cloud. The cloud goes through the contact localizer's pipeline
(core/contact/lidar_fusion.py: base frame, workspace crop, voxels, self-filter at the arm's pose at
the cloud's stamp, DBSCAN); its clusters are the objects when no person is tracked. Frames:
the base frame, `skeleton.frame` / `lidar.frame` with their pose as parameters, or TF
(ros/sensor_frames.py).

The check (~0.4-0.8 ms) runs `check_rate` times a second on the latest joint state, not on
every 1 kHz sample: this node shares two cores with the 1 kHz detection chain. It first takes
the samples that wait (composed mode: SuiteNode `catch_up`), so a check that comes
late decides on the newest pose, not on one its wake found. The check period and `max_lag`
are added to `reaction_time` in the protective distance, S_p = v_h (T_r + T_s) + v_r T_r + B
+ C + Z with T_r = reaction_time + 1/check_rate + max_lag, since a body may come that much
nearer before the next check sees it: a check may come up to max_lag late (later: it stops,
`behind`, this node is late: core/contact/check_lateness.py), and decide on a pose up to
max_lag old (older: it stops, `stale`, the input stopped).

Outputs: stop (std_msgs/Bool, True = stop; reliable, transient local, on every change and as
a heartbeat: a controller treats a missing heartbeat as stop), speed scale in [0, 1]
(std_msgs/Float64, on change and with the heartbeat: the controller takes the smaller of it
and the detector's f_S), one status per body part and one for the robot (DiagnosticArray),
markers (robot spheres coloured by distance, the bodies by signal) at `display_rate`, and,
at every check while a skeleton is tracked, the links each hand is near (DiagnosticArray on
`proximity/hands`, stamped with the skeleton's stamp: the collision detector's touch
classification wants a hand at the contacted link, issue 29).
The stop, the speed scale, their heartbeat and `~/reset` are the controller's contract,
written once for this node and the collision detector (ros/stop_signal.py).

Fail-safe, judged by the input gate as the detector's (core/chain/input_gate.py, which has
the order and which causes latch): stop before the first joint state; `stale` when none came
for `joint_state_timeout` or the latest is older than `max_lag` beyond the clocks' constant
offset (core/chain/lag.py ClockLag): the input stopped (the chain paused or gone);
`behind` when the check itself comes more than `max_lag` after it was due: this node is late
(issue 35: a late check that finds fresh samples is not a stop, and a paused input is never
`behind`: the input is judged first, issue 36); `bad_stamp` for the check that finds the
joint states' stamps gone back (the offset is then learned anew); when the skeleton or
clouds are stale (`body_timeout`, by stamps on the joint states' clock) or invalid (NaN
keypoints, a wrong count, an empty cloud, an unknown frame: a clear message, counted on
/diagnostics); `stale` too when the lidar's clouds stop arriving, lost in transport or the
sensor stopped (issue 36, core/contact/lidar_watch.py: none for `lidar.timeout` once one came,
or since the start with `lidar.required`), whatever the skeleton shows: a person the tracker
misses may be there, and only the lidar would see them (/diagnostics `lidar`: the time since
the last cloud). At a start the stop is released only once the inputs have been fresh and
every margin clear for `start_hold` (core/contact/proximity.py, Start; issue 35): the cloud
worker's first clouds, on a machine still loading the suite, may come further apart than
`body_timeout`, and a release at the first fresh clusters was followed by a stop a check
later, counted as `input`. Every stop is counted by its cause on /diagnostics (`behind`,
`stale`, `bad_stamp`, `fault`, `input`: the skeleton's or clouds', `near`, `pfl`), with the
checks' lateness (`lag`: p50 / p99 / max from the first check with a joint state: the
start's imports and waits are not the running node's), the latest joint state's age at
the checks beyond the clocks' offset (`joint_state_age`, judged against max_lag), and how old
the clouds are when their objects reach the check (`cloud_age`, from their stamps: the
worker's time and its waits). A stop beside something that stays (the margin never clears)
is released by `~/reset` (std_srvs/Trigger); after it the arm may only move away
(core/contact/proximity.py: Reset).

Power and force limiting (issue 38, core/contact/pfl.py, docs/pfl.md): each contact estimate
(`contact_estimate/point` + `wrench`, paired by stamp and link: ros/contact_messages.py) is
checked as it comes (10-20 Hz, on this node's thread, never per joint sample): the body
region is the tracked body part nearest the contact point (the point brought into the base
frame at the joint state of its stamp), else `pfl.default_region`; |F| against the region's
transient limit for `pfl.transient_time` after the contact's onset (its first estimate after
`pfl.contact_gap` without one), its quasi-static limit after; |F| is raised to the largest
base force peak stamped within `pfl.peak_window` of the estimate (`peak_force`, the F/T
estimator's base force residual over 2 ms: the estimates miss an impact's peak); a peak no
estimate of the localizer is near is checked on the F/T estimator's own estimate
(`contact_estimate/ft/point` + `wrench`, its region from that point), raised to it: a contact
under the localizer's τ_ext gate is checked too. Each check is published on
`contact_estimation/pfl` (margin = force / limit, region, link, point) with a marker; one over
the limit latches the stop with the cause `pfl`, naming region, force and limit, until
`~/reset`. An estimate whose joint state is not in the history (older than body_timeout) is
checked against `pfl.default_region`. And the speed scale keeps each robot link approaching a
tracked body part under the speed that keeps a collision within the part's transient limit
(`pfl.speed_limit`; core/contact/proximity.py module doc), with the payload (`payload.*`).
With `pfl.collaborative` (off by default: the risk assessment's decision; it needs
`pfl.speed_limit`), a tracked body part contact is allowed with (not the head or neck) no
longer stops the arm inside its protective distance (`near`): the speed limit alone holds
the approach at its v_max, and the force check's `pfl` stop remains.

Issue 19: a message stamped more than 1 s ahead of this node's clock is dropped and counted
(core/chain/stamps.py: it never counts as fresh); clouds are decoded and clustered in a
worker process (ros/cloud_process.py; issue 35: on a thread of this process, open3d held the
interpreter lock and made the check late) and the check takes the objects it finds, so the
100 Hz check never waits on a cloud; a worker that dies or hangs is reported (`cloud_worker`
on /diagnostics, WARN while it restarts) and started again, its clouds stale meanwhile; the
stop's heartbeat is a process of its own (ros/stop_process.py); an unexpected error in any
callback stops for the gate's fault_hold, 1 s (ros/guard.py). A process started again after
it died (`up`, the launch file) starts with a `restarted` stop, latched until `~/reset`
(core/restart.py).
"""
from __future__ import annotations

import dataclasses
import sys
from functools import partial

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PointStamped, PoseArray, WrenchStamped
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState, PointCloud2
from visualization_msgs.msg import MarkerArray

from contact_estimation.core.chain.input_gate import (STALE, WAITING, GateConfig, InputGate,
                                                      Verdict)
from contact_estimation.core.chain.lag import BAD_STAMP, BEHIND, LagBudget, LagStatistics
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.stamps import MAX_PAST
from contact_estimation.core.contact.check_lateness import CheckLateness
from contact_estimation.core.contact.lidar_fusion import CloudConfig, PoseHistory
from contact_estimation.core.contact.lidar_watch import LidarWatch, LidarWatchConfig
from contact_estimation.core.contact.pfl import (ContactOnset, PeakForces, PflCheck, PflConfig,
                                                 tracked_parts)
from contact_estimation.core.contact.proximity import (CLUSTERS, COCO_17, DEFAULT_PARTS,
                                                       SKELETON, SPHERE_SPACING, BoxPart,
                                                       HumanModel, ProximityConfig,
                                                       ProximityMonitor, ProximityResult,
                                                       SegmentPart)
from contact_estimation.core.input_rejected import (EMPTY_CLOUD, NO_POSE, WRONG_SIZE,
                                                    InputRejected)
from contact_estimation.core.restart import restart_reason
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModelError
from contact_estimation.core.robot.surfaces import LinkSurfaces, SurfacesError
from contact_estimation.ros.cloud_process import CloudJob, CloudProcess, CloudRecipe
from contact_estimation.ros.contact_messages import ContactPairs
from contact_estimation.ros.conversions import CloudLayout, seconds_to_stamp
from contact_estimation.ros.diagnostics import ERROR, OK, WARN
from contact_estimation.ros.joint_states import JointStateReader
from contact_estimation.ros.node_main import run
from contact_estimation.ros.params import (ROBOT, Parameter, ParameterTable, robot_arguments,
                                           rows)
from contact_estimation.ros.hands_messages import hands_message
from contact_estimation.ros.pfl_messages import pfl_marker, pfl_status
from contact_estimation.ros.proximity_messages import (ProximityMarkers, part_statuses,
                                                       pose_array_size)
from contact_estimation.ros.qos import CLOUD_QOS
from contact_estimation.ros.sensor_frames import (SensorFrame, check_cloud_size, cloud_table,
                                                  sensor_frame_table)
from contact_estimation.ros.stop_signal import STOP_PARAMETERS, StopSignal, steps_below_stops
from contact_estimation.ros.suite_node import SuiteNode

NAME = 'proximity_monitor'
# Why a stop was raised, counted on /diagnostics: the input gate's causes
# (core/chain/input_gate.py: restarted, fault, bad_stamp, stale, behind), the skeleton or
# clouds unusable (INPUT), a body too near (NEAR), a contact over its body region's force
# limit (PFL).
INPUT, NEAR, PFL = 'input', 'near', 'pfl'
# The gate's causes whose reason is shown after the cause's name.
_NAMED = (BAD_STAMP, STALE, BEHIND)

def _part_rows(part: SegmentPart | BoxPart) -> tuple[Parameter, ...]:
    """`parts.<name>.*`: the size of one of core DEFAULT_PARTS, at its default."""
    if isinstance(part, BoxPart):
        return (Parameter(f'parts.{part.name}.half_depth', f'{part.name}: half its thickness, '
                          'm', part.half_depth, (0.01, 1.0), read_only=True),
                Parameter(f'parts.{part.name}.padding', f'{part.name}: added to its width and '
                          'height, m', part.padding, (0.0, 1.0), read_only=True))
    return (Parameter(f'parts.{part.name}.radius', f'{part.name}: radius, m', part.radius,
                      (0.005, 1.0), read_only=True),)


PARAMETERS = ROBOT + STOP_PARAMETERS + rows(LagBudget, read_only=True) + ParameterTable(
    Parameter('check_rate', 'checks per second on the latest joint state, Hz (each ~0.4-0.8 ms '
              'of CPU); 1/check_rate is added to reaction_time', 100.0, (1.0, 1000.0),
              read_only=True),
    Parameter('joint_state_timeout', 'no joint state for this long (wall time) → stop, s', 0.1,
              (1e-3, 10.0)),
    Parameter('display_rate', 'markers and part statuses per second, Hz (and on every change '
              'of a stop)', 5.0, (0.1, 100.0), read_only=True),
    Parameter('robot_sphere_spacing', 'length of link axis covered by one robot sphere, m',
              0.05, (5e-3, 0.5), read_only=True),
    Parameter('keypoint_names', "the skeleton's keypoints in the order of its poses (COCO-17 "
              'by default)', list(COCO_17), read_only=True),
    Parameter('sphere_spacing', 'most distance between the sphere centres of a body part, m',
              SPHERE_SPACING, (1e-3, 0.5), read_only=True),
    *(row for part in DEFAULT_PARTS for row in _part_rows(part))) + rows(ProximityConfig) + (
    sensor_frame_table('skeleton', 'skeleton') + sensor_frame_table('lidar', 'lidar')
    + rows(LidarWatchConfig, 'lidar.') + cloud_table(skip=('max_age',))
    + rows(PflConfig, 'pfl.') + rows(Payload, 'payload.', read_only=True))
assert set(PARAMETERS.feeding(ProximityConfig)) == {
    f.name for f in dataclasses.fields(ProximityConfig)}



class ProximityMonitorNode(SuiteNode):
    PARAMETERS = PARAMETERS
    PACES_ITSELF = True  # `_check` takes the samples that wait; so do the lookups of a pose

    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        with self.starting():
            self._skeleton_frame = SensorFrame(self, 'skeleton', 'skeleton')
            self._lidar_frame = SensorFrame(self, 'lidar', 'lidar')
            spacing = {'sphere_spacing': self.value('robot_sphere_spacing')}
            try:
                surfaces = LinkSurfaces(self.robot, **spacing)
            except SurfacesError as err:
                raise ValueError(f'the proximity monitor needs link geometry: {err}') from err
            # The arm with its payload: the power and force limit's effective mass.
            self._carrying = PARAMETERS.build(Payload, self.values()).carried_by(self.robot)
            self.monitor = ProximityMonitor(surfaces, self._config({}), self._human())
            self._cloud_config = PARAMETERS.build(CloudConfig, self.values())
            self._use_pfl(PARAMETERS.build(PflConfig, self.values()))
        self._joint_states = JointStateReader(self.robot.joint_names, model_order_only=True)
        self._history = PoseHistory(self.value('body_timeout'))  # joint states by stamp
        # What makes the stop fail safe, judged as the detector's are.
        self._gate = InputGate(GateConfig('joint state', self.value('joint_state_timeout'),
                                          'joint_state_timeout', self.value('max_lag')))
        self._lateness = CheckLateness(1.0 / self.value('check_rate'), self.value('max_lag'))
        self._cloud_age = LagStatistics()  # of each cloud's stamp when its objects arrive
        self._lidar = LidarWatch(PARAMETERS.build(LidarWatchConfig, self.values()),
                                 self.seconds())  # its clouds' arrivals: stale when they stop
        self._cause = ''                 # of the latest result's stop
        restarted = restart_reason()  # latched until ~/reset (core/restart.py)
        if restarted:
            self._gate.restarted(restarted)
        # The samples that wait, taken before each check: set by ros/sample_feed.py.
        self._latest: JointSample | None = None
        self._first_joint_state: float | None = None  # its stamp (s): clouds before it are dropped
        self._t = 0.0                    # stamp of the latest joint state used (s)
        self._result: ProximityResult | None = None
        self._display_period = 1.0 / self.value('display_rate')
        self._displayed = -np.inf        # monotonic time of the last markers and statuses
        self._markers = ProximityMarkers(self.robot.base_link, surfaces.sphere_radii,
                                         surfaces.sphere_link,
                                         self.monitor.config.report_range,
                                         3.0 * self._display_period)

        self.stop_signal = StopSignal(self, 'speed_scale', self._reset)
        self.closing(self.stop_signal.close)
        self._parts_pub = self.publisher('parts', DiagnosticArray)
        # rviz's: built only while someone listens (~950 spheres of a cell's cloud cost ms).
        self._marker_out = self.output('markers', MarkerArray, only_when_listened=True)
        self._hands = self.output('hands', DiagnosticArray)
        self._pfl_pub = self.publisher('pfl', DiagnosticArray)
        self._pfl_stop = ''              # the over-limit contact's reason, latched until ~/reset
        self._contacts = ContactPairs()  # the estimates' halves, paired by stamp and link
        self._ft_contacts = ContactPairs()   # the F/T estimator's
        self._ft_contact: tuple | None = None   # its latest: stamp, t, contact
        # Over DDS from the estimation process; handed over where the localizer is built in
        # this process (the replay).
        for key, kind in (('contact_point', PointStamped), ('contact_wrench', WrenchStamped)):
            self.receive(key, kind, self._on_contact_half, self._on_contact_half)
        self.receive('peak_force', WrenchStamped, self._on_peak_force, self._on_peak_force)
        for key, kind in (('ft_contact_point', PointStamped), ('ft_contact_wrench', WrenchStamped)):
            self.receive(key, kind, self._on_ft_contact_half, self._on_ft_contact_half)
        self.receive('joint_state', JointState, self._on_joint_state, None,
                     on_batch=self.process_joint_states)
        # Raw: a skeleton's size is checked before it is deserialised (`_on_skeleton`).
        self.subscribe('skeleton', PoseArray, self._on_skeleton, raw=True)
        self._clouds = CloudProcess(CloudRecipe(*robot_arguments(self), spacing), surfaces, NAME,
                                    self.runs_in_real_time,
                                    partial(self.problems.report, level=ERROR),
                                    self.get_logger().info, below=steps_below_stops(NAME))
        self.closing(self._clouds.close)
        self.subscribe('lidar_points', PointCloud2, self._on_cloud, CLOUD_QOS)
        self.create_timer(1.0 / self.value('check_rate'), self._check)
        self.on_parameter_change(self._on_parameter_change)
        self._check_time = float('nan')  # s, the latest check's
        # Formatted when /diagnostics is published, not on every check (issue 35).
        self.problems.values.update({
            'lag': self._lateness.statistics.summary,  # p50 / p99 / max
            'joint_state_age': self._gate.lag.statistics.summary,
            'cloud_age': self._cloud_age.summary,
            'cloud_worker': self._clouds.status,
            'lidar': lambda: self._lidar.summary(self.seconds()),
            'check_time': lambda: f'{self._check_time * 1e3:.2f} ms'})
        self._fail(self._gate.judge(self.seconds()))
        self.get_logger().info(
            f'{len(surfaces.sphere_radii)} robot spheres against '
            f'{len(self.monitor.human.parts)} body parts of {self.spec.topic("skeleton")} '
            f'or the objects of {self.spec.topic("lidar_points")}, checked at '
            f'{self.value("check_rate"):g} Hz (reaction time '
            f'{self.monitor.config.reaction_time * 1e3:.0f} ms with the check period and '
            'max_lag); '
            f'stop on {self.spec.topic("stop")}')

    # ------------------------------------------------------------------ parameters
    def _human(self) -> HumanModel:
        """DEFAULT_PARTS at the sizes of their `parts.*` rows."""
        parts = [dataclasses.replace(part, **{row.name.rsplit('.', 1)[1]: self.value(row.name)
                                              for row in _part_rows(part)})
                 for part in DEFAULT_PARTS]
        return HumanModel(parts, self.value('keypoint_names'), self.value('sphere_spacing'))

    def _config(self, changes: dict) -> ProximityConfig:
        """ProximityConfig from the parameters with `changes`, the check period and the pose's
        allowed age added to the reaction time (a body may come that much nearer before the
        next check, and the arm has moved since its pose)."""
        fields = PARAMETERS.fields(ProximityConfig, self.values(changes))
        fields['reaction_time'] += 1.0 / self.value('check_rate') + self.value('max_lag')
        return ProximityConfig(**fields)

    def _use_pfl(self, config: PflConfig) -> None:
        """The power and force limit's check and speed limit (issue 38) as `config` says."""
        self._pfl = PflCheck(config)
        self._peaks = PeakForces(config.peak_window)
        self._last_contact: tuple | None = None   # the last estimate checked: stamp, t, contact
        self._onset = ContactOnset(config.contact_gap)
        self.monitor.limit_speed(self._carrying if config.enabled and config.speed_limit
                                 else None, config.collaborative)

    def _on_parameter_change(self, changes: dict) -> str | None:
        """Protective distance, signals, cloud processing, sensor poses and the power and
        force limit change at run time, all or nothing: everything is built from the proposed
        values first (a bad one raises and refuses the set), and only then put in use."""
        changed = set(changes)
        pfl = (PARAMETERS.build(PflConfig, self.values(changes))
               if changed & set(PARAMETERS.feeding(PflConfig)) else None)
        config = (self._config(changes) if changed & set(PARAMETERS.feeding(ProximityConfig))
                  else None)
        cloud = (PARAMETERS.build(CloudConfig, self.values(changes))
                 if changed & set(PARAMETERS.feeding(CloudConfig)) else None)
        poses = [(frame, frame.proposed(changes))
                 for frame in (self._skeleton_frame, self._lidar_frame)
                 if changed & set(frame.parameters)]
        lidar = (PARAMETERS.build(LidarWatchConfig, self.values(changes))
                 if changed & set(PARAMETERS.feeding(LidarWatchConfig)) else None)
        if config is not None:
            self.monitor.config = config
            self._history.span = config.body_timeout
        if cloud is not None:
            self._cloud_config = cloud
        for frame, pose in poses:
            frame.use(pose)
        if lidar is not None:
            self._lidar.config = lidar
        if pfl is not None:
            self._use_pfl(pfl)
        if 'joint_state_timeout' in changes:
            self._gate.config = dataclasses.replace(
                self._gate.config, input_timeout=changes['joint_state_timeout'])
        return None

    # -------------------------------------------------------------------- messages
    def _on_joint_state(self, msg: JointState) -> None:
        """Positions and velocities (no torques needed); a bad message, or one whose stamp is
        not believed, is not kept: it never becomes the newest time, so a stream of them
        ends in a stale stop."""
        sample = self.joint_sample(msg, self._joint_states, 'joint state', max_past=MAX_PAST,
                                   required=('position', 'velocity'))
        if sample is not None:
            self.process_joint_states((sample,))

    def process_joint_states(self, samples) -> None:
        """Kept for clouds (the one nearest their stamp) and the newest for the check; one
        arrival per batch (its samples arrived together: one clock read, not one each)."""
        for sample in samples:
            self._history.add(sample.t, sample)
        if self._first_joint_state is None:
            self._first_joint_state = samples[0].t
        self._latest = samples[-1]
        self._gate.arrived(self.seconds())

    def _on_skeleton(self, raw: bytes) -> None:
        """A serialised skeleton: one with more poses than there are keypoints is refused
        (and stops while fresh) from its first bytes, before it costs anything; the rest is
        deserialised and checked."""
        try:
            stamp, poses = pose_array_size(raw)
        except ValueError as err:
            self.problems.report(WRONG_SIZE, f'skeleton: {err}: dropped')
            return
        t = self.believed(stamp, 'skeleton')
        if t is None:  # dropped: never fresh for long, so the body timeout still stops
            return
        self.problems.traffic['skeletons_received'] += 1
        keypoints = len(self.monitor.human.keypoint_names)
        if poses > keypoints:
            reason = (f'skeleton of {poses} poses, more than its {keypoints} keypoints '
                      '(keypoint_names): refused unread')
            self.problems.report(WRONG_SIZE, f'{reason}: stop')
            self.monitor.reject(t, SKELETON, reason)
            return
        msg = deserialize_message(raw, PoseArray)
        keypoints = np.array([[p.position.x, p.position.y, p.position.z] for p in msg.poses])
        try:
            keypoints = self._skeleton_frame.to_base(msg.header, keypoints.reshape(-1, 3))
        except InputRejected as err:
            self.problems.report(err.kind, f'skeleton: {err}: stop')
            self.monitor.reject(t, SKELETON, str(err))
            return
        try:
            self.monitor.set_skeleton(t, keypoints)  # a rejected one stops while fresh
        except InputRejected as err:
            self.problems.report(err.kind, f'skeleton: {err}: stop')

    def _on_cloud(self, msg: PointCloud2) -> None:
        """The cloud, refused from its header if too large or empty, goes with the arm's pose
        at its stamp and its frame's pose to the cloud worker (ros/cloud_process.py:
        decoding, lidar_fusion), a process of its own; `_check` takes the objects it finds."""
        t = self.believed(msg.header.stamp, 'lidar cloud')
        if t is None:
            return
        self.catch_up()  # the poses up to now, as a replay has them at the cloud's turn
        self.problems.traffic['clouds_received'] += 1
        self._lidar.arrived(self.seconds())
        if self._before_joint_states(t):
            return
        try:
            check_cloud_size(msg, self._cloud_config.max_points)
            if not msg.width * msg.height:
                raise InputRejected(EMPTY_CLOUD, 'empty cloud: the lidar sees nothing')
            job = CloudJob(t, self._pose_at(t), CloudLayout.of(msg),
                           self._lidar_frame.pose_of(msg.header), self._cloud_config,
                           self.value('cloud.budget_points'))
        except InputRejected as err:
            self._reject_cloud(t, err)
            return
        self._clouds.submit(job, msg.data)

    def _on_contact_half(self, msg: PointStamped | WrenchStamped) -> None:
        """Half of a contact estimate; with both, the contact's check (`_check_contact`)."""
        if not self._pfl.config.enabled:
            return
        paired = self._contacts.add(msg)
        if paired is not None:
            self._check_contact(msg.header.stamp, *paired)

    def _on_ft_contact_half(self, msg: PointStamped | WrenchStamped) -> None:
        """Half of the F/T estimator's own contact estimate: checked only for a peak no
        estimate of the localizer is near (`_check_ft`)."""
        if not self._pfl.config.enabled:
            return
        paired = self._ft_contacts.add(msg)
        if paired is not None:
            self._ft_contact = (msg.header.stamp, *paired)
            self._check_ft()

    def _check_ft(self) -> None:
        """The latest F/T estimate, raised to the peaks near it that no estimate of the
        localizer is near (PeakForces.from_ft): a contact the localizer does not estimate
        (τ_ext under its gate) is still checked, its region from the F/T point."""
        if self._ft_contact is not None:
            self._check_contact(*self._ft_contact, from_ft=True)

    def _on_peak_force(self, msg: WrenchStamped) -> None:
        """A base force peak (base frame) for the checks of the estimates near its stamp."""
        t = self.believed(msg.header.stamp, 'peak force')
        if t is None or not self._pfl.config.enabled:
            return
        force = msg.wrench.force
        try:
            again = self._peaks.add(t, (force.x, force.y, force.z))
        except InputRejected as err:
            self.problems.report(err.kind, f'peak force: {err}: dropped')
            return
        if again:   # the impact's last estimate came before its peak
            self._check_contact(*self._last_contact)
        else:
            self._check_ft()

    def _check_contact(self, stamp, t: float, contact, from_ft: bool = False) -> None:
        """The contact estimated at stamp t against its body region's limit, its force raised
        to the peaks near it (the localizer's estimate; `from_ft`: the F/T estimator's, only
        when a peak waits for it): published with its marker, and latching the stop with
        the cause `pfl` when over it. One that cannot be placed (no joint state of its stamp,
        an unknown link: counted) is checked against `pfl.default_region`; one not finite,
        or with a stamp not believed, is counted and dropped."""
        if self.believed(stamp, 'F/T estimate' if from_ft else 'contact estimate') is None:
            return
        try:
            if from_ft:
                force = self._peaks.from_ft(contact.force, t)
                if force is None:   # no peak waits for it
                    return
            else:
                force = self._peaks.raised(contact.force, t)
                self._last_contact = (stamp, t, contact)
        except InputRejected as err:
            self.problems.report(err.kind, f'{"F/T estimate" if from_ft else "contact estimate"}'
                                 f' on {contact.link!r}: {err}: dropped')
            return
        self.catch_up()  # the poses up to now, as a replay has them at the estimate's turn
        sample = self._history.at(t)
        point, parts = contact.point, ()
        try:
            self.robot.frame_id(contact.link)
        except RobotModelError as err:
            self.problems.report('unknown_link', f'contact estimate: {err}: checked against '
                                 'pfl.default_region')
            sample = None
        try:
            if sample is not None:
                rotation, origin = self.robot.link_pose(sample.q, contact.link)
                point, force = rotation @ contact.point + origin, rotation @ force
                parts = tracked_parts(self._result.bodies) if self._result else ()
            result = self._pfl.check(contact.link, point, force, t, self._onset(t), parts)
        except InputRejected as err:
            self.problems.report(err.kind, f'contact estimate on {contact.link!r}: {err}: '
                                 'dropped')
            return
        # Its own key: `pfl` on /diagnostics is the count of stops for it (problems.counts).
        self.problems.values['pfl_check'] = result.reason
        self._pfl_pub.publish(pfl_status(result, contact.link, contact.point, self.robot.name,
                                         stamp))
        if self._marker_out.wanted:
            self._marker_out.send(MarkerArray(markers=[pfl_marker(result, contact.link,
                                                                  contact.point, stamp)]))
        if result.over and not self._pfl_stop:
            self._pfl_stop = f'{PFL}: {result.reason}'
            was_stopped = self._result is not None and self._result.stop
            self._cause = PFL
            self._publish(self.monitor.fail(self._t, self._pfl_stop))
            if was_stopped:  # no change of the stop: counted and logged here
                self.problems.counts[PFL] += 1
                self.get_logger().error(f'proximity stop ({PFL}): {self._pfl_stop}')

    def _take_clusters(self) -> None:
        """The objects of the latest cloud the worker finished, if any (on the check's
        thread, as every change of the monitor)."""
        result = self._clouds.take()
        if result is None:
            return
        self._cloud_age.add(max(self.stamp_clock() - result.t, 0.0))
        if result.failed is not None:
            self.guard.failed('the cloud worker', result.failed)
        elif result.rejected is not None:
            self._reject_cloud(result.t, result.rejected)
        else:
            self.monitor.set_clusters(result.t, result.obstacles.clusters)

    def _reject_cloud(self, t: float, err: Exception) -> None:
        kind = getattr(err, 'kind', 'bad_cloud')
        self.problems.report(kind, f'{err}: stop')
        self.monitor.reject(t, CLUSTERS, f'lidar: {err}')

    def _before_joint_states(self, t: float) -> bool:
        """Whether a cloud stamped t is of the start-up (issue 35): stamped before the first
        joint state this node has (or come before any), with none near its stamp. The arm's
        pose it saw is unknown here, and it is no fault of the lidar's: it is dropped, counted
        (`clouds_before_joint_states`) and logged once, never a stop. The stop is held
        meanwhile by what is missing (no joint state: waiting; no clusters yet: none fresh);
        a later cloud with no pose near its stamp still stops (`no_pose`)."""
        first = self._first_joint_state
        if (first is not None and t >= first) or self._history.at(t) is not None:
            return False
        self.problems.traffic['clouds_before_joint_states'] += 1
        self.get_logger().info(
            f'cloud stamped {t:.3f} before the first joint state ('
            + ('none yet' if first is None else f'{first:.3f}') + '): dropped, as at every '
            'start beside a streaming lidar (counted: clouds_before_joint_states)', once=True)
        return True

    def _pose_at(self, t: float) -> np.ndarray:
        """The joint positions stamped nearest t (the cloud's robot points are removed at
        the pose it saw); InputRejected 'no_pose' when none is near enough."""
        sample = self._history.at(t)
        if sample is None:
            raise InputRejected(NO_POSE, f'no usable joint state within '
                                     f'{self._history.span:g} s of the cloud stamp {t:.3f}')
        return sample.q

    def _reset(self) -> tuple[bool, str]:
        """~/reset (ros/stop_signal.py): the monitor says whether the stop may be released;
        the check then runs at once, so that the reply tells what it published. A restart's
        latch is judged on the check it held back, and stays when the reset is refused."""
        was_stopped = self._result is not None and self._result.stop
        restarted = self._gate.reset()
        over_limit, self._pfl_stop = self._pfl_stop, ''
        if restarted or over_limit:
            self._check()
        refusal = self.monitor.reset()
        if not refusal:
            self._check()
        if refusal or self._result.stop:
            reply = refusal or f'refused: still stopped after the reset: {_reason(self._result)}'
            if restarted:
                self._gate.restarted(restarted)
            self._pfl_stop = over_limit
            if restarted or over_limit:
                self._check()
            return False, reply
        return True, ('stop released: the arm may move away slowly; coming nearer stops it '
                      'again' if was_stopped else 'not stopped')

    # ------------------------------------------------------------------ the check
    def _check(self) -> None:
        """The check on the newest joint state, or a stop when the input gate says why not
        (core/chain/input_gate.py: the input judged before this node's lateness): the
        samples that wait are taken first."""
        self.catch_up()
        now = self.seconds()
        sample = self._latest
        if sample is not None:  # lateness from the first check with a joint state: not the start
            self._gate.late(self._lateness.check(now))
        self._take_clusters()
        if sample is not None:
            self._gate.newest(self.stamp_clock(), sample.t)
        # A person only the lidar would see may be there while its clouds are stale.
        verdict = self._gate.judge(now, self._lidar.stale(now))
        if verdict.cause:
            if verdict.cause == BAD_STAMP:
                self._t = sample.t
            self._fail(verdict)
            return
        self._t = sample.t
        if self._pfl_stop:  # latched until ~/reset
            self._cause = PFL
            self._publish(self.monitor.fail(self._t, self._pfl_stop))
            return
        start = self.steady()
        result = self.monitor.update(self._t, sample.q, sample.v)
        self._check_time = self.steady() - start
        self._cause = INPUT if result.problem else NEAR
        self._publish(result)

    def _fail(self, verdict: Verdict) -> None:
        """Stop for the gate's `verdict`, counted under its cause (not while waiting)."""
        cause = '' if verdict.cause == WAITING else verdict.cause
        self._cause = cause
        reason = f'{cause}: {verdict.reason}' if cause in _NAMED else verdict.reason
        self._publish(self.monitor.fail(self._t, reason))

    def fail_safe(self, reason: str) -> None:
        """An unexpected error in a callback (ros/guard.py): stop now; the gate holds the
        stop for its fault_hold after the last such error."""
        now = self.seconds()
        self._gate.fault(now, reason)
        self._fail(self._gate.judge(now))

    # -------------------------------------------------------------------- outputs
    def _publish(self, result: ProximityResult) -> None:
        """The stop on change, the speed scale when worth it, statuses and markers at the
        display rate and on any change of a stop."""
        previous, self._result = self._result, result
        stop_changed = self.stop_signal.decide(result.stop)
        changed = stop_changed or result.part_signals() != previous.part_signals()
        if stop_changed:
            self._on_stop_change(result, first=previous is None)
        self.stop_signal.publish_scale(result.speed_scale)
        hands = hands_message(result, self.robot.name)
        if hands is not None:
            self._hands.send(hands)
        now = self.seconds()
        if changed or now - self._displayed >= self._display_period:
            self._displayed = now
            stamp = seconds_to_stamp(result.t)
            self._parts_pub.publish(part_statuses(result, self.robot.name, stamp))
            if self._marker_out.wanted:
                self._marker_out.send(self._markers.markers(result, stamp))
        if result.stop:
            self.problems.set_status(ERROR, _reason(result))
        elif self._clouds.fault:
            self.problems.set_status(WARN, f'{self._clouds.fault}: restarting it; clouds stale '
                                     'until then')
        else:
            self.problems.set_status(WARN if result.reset_active else OK,
                                     'reset: moving away allowed' if result.reset_active
                                     else 'clear')

    def _on_stop_change(self, result: ProximityResult, first: bool) -> None:
        self.problems.values['stop'] = str(result.stop)
        if not result.stop:
            self.get_logger().info('proximity stop cleared')
        elif first and not self._cause:
            self.get_logger().info(f'stopped until the inputs arrive: {_reason(result)}')
        else:
            # Every stop is logged and counted by its cause (report() would throttle one).
            self.problems.counts[self._cause] += 1
            self.get_logger().error(f'proximity stop ({self._cause}): {_reason(result)}')


def _reason(result: ProximityResult) -> str:
    """Why the robot stops: the problem, or the bodies too near."""
    stopping = [n for n, s in zip(result.body_names, result.body_stop) if s]
    return (result.problem or result.starting
            or f'too near: {", ".join(stopping) or "a body (latched)"}')


def main(args=None):
    return run(ProximityMonitorNode, args)


if __name__ == '__main__':
    sys.exit(main())
