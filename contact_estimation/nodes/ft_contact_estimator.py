"""ft_contact_estimator: base F/T wrench → compensated wrench, contact point and force (seed 004).

Reads the 6-axis F/T sensor under the arm's base and the conditioned joint state, paired by
stamp (`stamp_tolerance`), and removes the sensor's offset, the arm's weight and the reaction
of its motion (`compensation`: by default from the arm's momentum,
core/contact/ft_compensation.MomentumWrenchObserver, a low pass of 1/`observer_gain` s that
needs no q̈; or its BaseWrenchCompensator with q̈ from a fit over
`acceleration_filter.window_duration` s): what is left, the contact wrench at the base origin,
goes out on `base_wrench` (base frame, the reading's stamp) for each compensated reading
(`compensation_rate`). The force limit's check gets the peak base force of each 1/max_rate s
of stamps, from `peak_force.floor` N, on `peak_force` (base frame, the peak's stamp): for one
contact it is the contact force (seed 004 eqs. 4–6), from the momentum's difference over
`peak_force.window` (core/contact/ft_contact_stream.PeakForceTracker); from half the floor on,
every reading is used for it, the ones skipped since the last compensated one too.
With the torque residual of the same joint state it is located
(core/contact/ft_contact.FtContactLocator): while a contact is present, `point` and `wrench`
(the joint state's stamp; frame_id = the contacted link; the point in that link's frame, the
force ON the robot in that frame, no moment about the point) and a sphere and arrow in the
namespace `ft_contact` of the markers. The body comes from the residual (seed 004's current
constraint, `locate_from_residual`), or from the contact localizer's point when it published
one within `localizer_timeout` s.

/diagnostics carries the counts of dropped input, the compensation residual in free motion
(RMS over the last second while no joint's |τ_ext| reaches `contact_threshold`), the
candidate links of the last contact (`candidate_links`: the estimate's link first, then the
link of every other body that explains the wrench within `ambiguity_margin`; more than one:
the body is ambiguous, the status says so) and, while both estimates exist, the distance
between this point and the localizer's.

`~/zero` (std_srvs/Trigger): on an arm at rest for `zero.duration` s, the mean reading minus
the arm's weight becomes the sensor offset, written to `offset_file` and read back at start.

Bad input is dropped, counted and logged (throttled): a non-finite, all-zero or saturated
reading, a reading in another frame than `sensor.frame_id`, readings without joint states
or joint states without readings (nothing is published then), a localizer point on a link
that is not a moving link of the arm. Nothing is estimated from it.
"""
from __future__ import annotations

import sys
from collections import deque

import numpy as np
from geometry_msgs.msg import PointStamped, WrenchStamped
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from contact_estimation.core.chain.derivatives import DerivativeEstimator
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.contact.ft_compensation import (BaseWrench, BaseWrenchCompensator,
                                                             FtContactError,
                                                             MomentumWrenchObserver)
from contact_estimation.core.contact.ft_contact import FtContactLocator, FtLocatorConfig
from contact_estimation.core.contact.ft_contact_stream import (FtEstimatorConfig,
                                                               PeakForceTracker, RateSlots,
                                                               RestingWindow, RunningRms,
                                                               StampPairing, check_reading,
                                                               load_ellipsoids, load_offset,
                                                               save_offset)
from contact_estimation.core.contact.contact import Contact
from contact_estimation.core.input_rejected import MALFORMED, InputRejected
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.body_surfaces import make_surfaces
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.ros import cdr
from contact_estimation.ros.contact_messages import contact_messages
from contact_estimation.ros.conversions import seconds_to_stamp, wrench_stamped
from contact_estimation.ros.diagnostics import OK, WARN
from contact_estimation.ros.joint_states import JointStateReader
from contact_estimation.ros.markers import deleted
from contact_estimation.ros.node_main import run
from contact_estimation.ros.params import ROBOT, ParameterTable, rows
from contact_estimation.ros.suite_node import SuiteNode

NAME = 'ft_contact_estimator'
MARKER_NS = 'ft_contact'
_MARKER_PERIOD = 0.05   # s of stamps between marker updates (rviz needs no more than 20 Hz)
_WATCH_PERIOD = 0.1     # s (wall) between checks for missing streams
_FREE_MOTION_WINDOW = 1.0  # s of stamps in the free-motion compensation residual
# A force over this fraction of presence_force counts as a contact nearing: its process wakes
# every 1 ms until it falls back (sample_feed.py), as the detector's chain does over NEAR of ψ.
NEAR = 0.5
_SKIPPED_KEPT = 64         # raw readings kept for a peak burst's backfill (a slot at 16 kHz)


PARAMETERS = ROBOT + rows(FtEstimatorConfig, read_only=True) + rows(
    Payload, 'payload.', read_only=True) + rows(FtLocatorConfig, read_only=True) + ParameterTable(
    renamed={'sensor.orientation_rpy': 'sensor.rpy',
             'acceleration_window': 'acceleration_filter.window_duration'})


class FtContactEstimatorNode(SuiteNode):
    PARAMETERS = PARAMETERS

    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        with self.starting():
            self._build(self.values())
        config = self.config
        self._joint_states = JointStateReader(self.robot.joint_names, model_order_only=True)
        self._readings = StampPairing(config.stamp_tolerance)   # wrench ↔ joint state
        self._residuals = StampPairing(config.stamp_tolerance)  # residual ↔ compensated
        self._acceleration = DerivativeEstimator(duration=config.acceleration_window)
        self._resting = RestingWindow(config.zero_duration, config.zero_rest_speed)
        self._free_motion = RunningRms(_FREE_MOTION_WINDOW)
        self._localized: tuple[float, str, np.ndarray] | None = None  # stamp, link, point
        self._arrived: dict[str, float] = {}   # stream → steady() of its last message
        self._markers_at: float | None = None  # stamp of the markers shown; None: none shown
        self._locating = RateSlots(config.max_rate)
        self._compensating = RateSlots(config.compensation_rate)
        self._skipped: deque[tuple[float, bytes]] = deque(maxlen=_SKIPPED_KEPT)

        self._base_wrench = self.output('base_wrench', WrenchStamped, only_when_listened=True)
        self._peak_force = self.output('peak_force', WrenchStamped)
        self._point_pub = self.publisher('point', PointStamped)
        self._wrench_pub = self.publisher('wrench', WrenchStamped)
        self._marker_pub = self.publisher('markers', MarkerArray)
        self.subscribe('ft_wrench', WrenchStamped, self._on_wrench, raw=True, polled=True)
        # Composed mode: every joint state and residual, taken on this node's thread.
        for key, on_message, on_sample in (
                ('joint_state', self._on_joint_state, self.process_joint_state),
                ('residual', self._on_residual, self.process_residual)):
            self.receive(key, JointState, on_message, on_sample)
        self.receive('localizer_point', PointStamped, self._on_localizer_point,
                     self._on_localizer_point)
        self.create_service(Trigger, '~/zero', self._on_zero)
        self.create_timer(_WATCH_PERIOD, self._watch_inputs)
        self.problems.set_status(WARN, 'waiting for F/T readings and joint states')
        self.get_logger().info(
            f'{self._description}; reading {self.spec.topic("ft_wrench")} '
            f'({self._sensor_frame}) and {self.spec.topic("joint_state")}, publishing '
            f'{self.spec.topic("base_wrench")} and {self.spec.topic("point")}')

    # ------------------------------------------------------------------ parameters
    def _build(self, values: dict) -> None:
        """Settings, compensator and locator from the parameter `values`; ValueError
        (FtContactError) if bad."""
        self.config = config = PARAMETERS.build(FtEstimatorConfig, values)
        self._sensor_frame = config.sensor_frame_id or self.robot.base_link
        offset = load_offset(config.offset_file)
        self._compensator = BaseWrenchCompensator(
            self.robot, config.mount(), PARAMETERS.build(Payload, values),
            offset=np.zeros(6) if offset is None else offset)
        self._observer = (MomentumWrenchObserver(self._compensator, config.observer_gain)
                          if config.compensation == 'momentum_observer' else None)
        self._peaks = PeakForceTracker(self._compensator, config.peak_window, config.max_rate,
                                       config.peak_floor)
        self._threshold = config.thresholds(self.robot.n)
        ellipsoids = load_ellipsoids(config.ellipsoid_file) if config.ellipsoid_file else None
        self._locator = FtContactLocator(
            make_surfaces(config.surface_model, LinkSurfaces(self.robot), ellipsoids),
            PARAMETERS.build(FtLocatorConfig, values))
        self._limits = (config.force_limit, config.torque_limit)
        check_reading(np.ones(6), *self._limits)  # numba compiles (or loads its cache) here
        self._offset_source = ('no stored offset' if offset is None else
                               f'offset from {config.offset_file}')

    @property
    def _description(self) -> str:
        config = self.config
        return (f'{config.surface_model} surfaces, compensation {config.compensation}, '
                f'sensor {config.sensor_reports} in {self._sensor_frame}, '
                f'{self._offset_source}')

    # -------------------------------------------------------------------- messages
    def _arrival(self, stream: str) -> None:
        self._arrived[stream] = self.steady()  # 3 a sample: no clock object, no lock

    def _on_wrench(self, raw: bytes) -> None:
        """One F/T reading (1 kHz and more), from its bytes (ros/cdr.py): its stamp first, so
        that a reading the rate skips is never decoded."""
        self._arrival('ft_wrench')
        try:
            t = self.believable(cdr.stamp_of(raw), 'F/T reading')
            # One reading stamped in 2038 would hold every later one unpaired.
            if t is None:
                return
            compensated = self._compensating.take(t)  # at most compensation_rate a second
            if not (compensated or self._peaks.bursting(t)):
                self._skipped.append((t, raw))  # decoded only for a peak burst's backfill
                return
            msg = cdr.decode_wrench_stamped(raw)
        except ValueError as err:
            self.problems.report(MALFORMED, f'F/T reading: {err}: dropped')
            return
        reading = self._checked(msg)
        if reading is not None:
            self._compensate(self._readings.add_primary(t, (reading, compensated)))

    def _checked(self, msg) -> np.ndarray | None:
        """The reading [f; m] of a decoded message in the sensor's frame; None (reported) if
        unusable."""
        if msg.frame_id != self._sensor_frame:
            self.problems.report('unknown_frame', f'F/T reading in frame {msg.frame_id!r}, '
                                 f'expected {self._sensor_frame!r} (sensor.frame_id): dropped')
            return None
        reading = np.concatenate((msg.force, msg.torque))
        try:
            check_reading(reading, *self._limits)
        except InputRejected as err:
            self.problems.report(err.kind, str(err))
            return None
        return reading

    def _on_joint_state(self, msg: JointState) -> None:
        self._arrival('joint_state')  # the stream is alive, whatever this message is worth
        sample = self.joint_sample(msg, self._joint_states, 'joint state')
        if sample is not None:
            self._pair_joint_state(sample)

    def process_joint_state(self, sample: JointSample) -> None:
        """One joint state handed over in composed mode (its message arrived meanwhile)."""
        self._arrival('joint_state')
        self._pair_joint_state(sample)

    def _pair_joint_state(self, sample: JointSample) -> None:
        """One joint state, paired with the F/T reading of its stamp."""
        t, q = sample.t, sample.q
        # q̈ only for the acceleration compensation: the momentum observer needs none.
        acceleration = None if self._observer else self._acceleration_at(t, q)
        try:
            pairs = self._readings.add_secondary(t, (q, sample.v, acceleration))
        except InputRejected as err:
            self.problems.report(err.kind, str(err))
            return
        self._compensate(pairs)

    def _acceleration_at(self, t: float, q: np.ndarray) -> np.ndarray:
        """q̈ of the fit over `acceleration_filter.window_duration` s; a stamp not after the last one
        restarts it (the pairing then reports or accepts the stamp)."""
        try:
            return self._acceleration.update(t, q)[1]
        except ValueError:
            self._acceleration.reset()
            return self._acceleration.update(t, q)[1]

    def _compensate(self, pairs: list[tuple]) -> None:
        """Publish the contact wrench of each reading paired with its joint state."""
        if self._readings.unmatched:
            t = self._readings.unmatched[-1][0]
            self.problems.report('unmatched_stamp', f'{len(self._readings.unmatched)} F/T '
                                 f'reading(s) up to stamp {t:.3f} without a joint state within '
                                 f'{self._readings.tolerance:g} s: dropped')
        for t_reading, (reading, compensated), t_joint, (q, v, a) in pairs:
            if not compensated:   # a reading of a peak burst: for the peak only
                self._send_peaks(self._peaks.add(*self._peaks.terms(t_reading, reading, q, v)))
                continue
            wrench = (self._observer.update(t_reading, reading, q, v) if self._observer
                      else self._compensator.contact_wrench(reading, q, v, a))
            if self._base_wrench.wanted:  # by the localizer in composed mode, or a subscriber
                self._base_wrench.send(BaseWrench(t_reading, self.robot.base_link, wrench),
                                       lambda: wrench_stamped(seconds_to_stamp(t_reading),
                                                              self.robot.base_link, wrench[:3],
                                                              wrench[3:]))
            self.problems.traffic['base_wrenches_published'] += 1
            terms = ((t_reading, self._observer.static[:3], self._observer.momentum[:3])
                     if self._observer else self._peaks.terms(t_reading, reading, q, v))
            self._send_peaks(self._peaks.add(*terms, skipped=self._skipped_readings))
            self._resting.add(t_joint, reading, q, v, self.robot.joint_names)
            try:  # with a faster sensor, the first reading of each joint state is located
                self._locate(self._residuals.add_secondary(t_joint, (q, wrench)))
            except InputRejected as err:
                self.problems.report(err.kind, f'compensated wrench: {err}')

    def _send_peaks(self, peaks: list[tuple[float, np.ndarray]]) -> None:
        """The peak base forces of the slots just closed (each ≥ peak_force.floor): the force
        limit's check reads them (the proximity monitor)."""
        for t, force in peaks:
            self._peak_force.send(wrench_stamped(seconds_to_stamp(t), self.robot.base_link,
                                                 force, np.zeros(3)))
            self.problems.traffic['peak_forces_published'] += 1

    def _skipped_readings(self, after: float, before: float):
        """The readings the rate skipped stamped in (after, before), with their joint states
        (t, reading, q, v): a peak burst's start. One that is unusable or has no joint state is
        left out."""
        for t, raw in self._skipped:
            if not after < t < before:
                continue
            try:
                reading = self._checked(cdr.decode_wrench_stamped(raw))
            except ValueError as err:
                self.problems.report(MALFORMED, f'F/T reading: {err}: dropped')
                continue
            paired = self._readings.paired(t)
            if reading is not None and paired is not None:
                q, v, _ = paired[1]
                yield t, reading, q, v

    def _on_residual(self, msg: JointState) -> None:
        self._arrival('residual')
        try:
            _, _, tau_ext = self._joint_states.read(msg, required=('effort',))
        except InputRejected as err:
            self.problems.report(err.kind, f'residual: {err}')
            return
        t = self.believed(msg.header.stamp, 'residual')
        if t is not None:
            self._locate(self._residuals.add_primary(t, tau_ext))

    def process_residual(self, sample: JointSample) -> None:
        """One residual handed over in composed mode, paired with the compensated wrench of
        its stamp."""
        self._arrival('residual')
        self._locate(self._residuals.add_primary(sample.t, sample.tau_ext))

    def _on_localizer_point(self, msg: PointStamped) -> None:
        link = msg.header.frame_id
        if link not in self.robot.link_joint or not self._locator.model.links(
                self.robot.link_joint[link]):
            self.problems.report('unknown_frame', f'localizer point on {link!r}, not a moving '
                                 'link with a surface: its link is not used')
            return
        point = np.array([msg.point.x, msg.point.y, msg.point.z])
        if not np.isfinite(point).all():
            self.problems.report('not_finite', 'localizer point with NaN/inf: not used')
            return
        t = self.believed(msg.header.stamp, 'localizer point')
        if t is not None:
            self._localized = (t, link, point)

    # ------------------------------------------------------------------- estimate
    def _locate(self, pairs: list[tuple]) -> None:
        """The contact of each residual paired with its compensated wrench that is the first
        of its slot of 1/max_rate s (RateSlots: the same samples live and in a replay); the
        pairs in between are not estimated."""
        for t, tau_ext, _, (q, wrench) in pairs:
            if not self._locating.take(t):
                continue
            localized = self._localized
            if localized and abs(localized[0] - t) > self.config.localizer_timeout:
                localized = None
            if localized:
                estimate = self._locator.locate(q, wrench, self.robot.link_joint[localized[1]])
            else:
                estimate = self._locator.locate_from_residual(q, wrench, tau_ext,
                                                              self._threshold)
            # Its process wakes sooner while a contact lasts or nears.
            self.contact_lasts = estimate is not None or bool(
                np.linalg.norm(wrench[:3]) >= NEAR * self._locator.config.presence_force)
            if estimate is None:
                self._no_contact(t, tau_ext, wrench)
            else:
                self._publish_contact(t, q, estimate, localized)

    def _no_contact(self, t: float, tau_ext: np.ndarray, wrench: np.ndarray) -> None:
        if np.all(np.abs(tau_ext) < self._threshold):
            force, torque = self._free_motion.add(t, wrench)
            self.problems.values['free_motion_residual'] = (f'{force:.3f} N, {torque:.4f} N·m '
                                                            'RMS')
        if self._markers_at is not None:
            self._markers_at = None
            self._marker_pub.publish(MarkerArray(markers=deleted(MARKER_NS, (0, 1))))
        self.problems.set_status(OK, f'{self._description}; no contact')

    def _publish_contact(self, t: float, q: np.ndarray, estimate: Contact,
                         localized: tuple | None) -> None:
        stamp = seconds_to_stamp(t)
        drawn = self._markers_at is None or t - self._markers_at >= _MARKER_PERIOD
        point, wrench, markers = contact_messages(estimate, stamp, MARKER_NS if drawn else None)
        self._point_pub.publish(point)
        self._wrench_pub.publish(wrench)
        self.problems.traffic['estimates_published'] += 1
        if drawn:
            self._markers_at = t
            self._marker_pub.publish(MarkerArray(markers=markers))
        if localized:
            rotation, position = self.robot.link_pose(q, localized[1])
            distance = np.linalg.norm(rotation @ localized[2] + position - estimate.point_base)
            self.problems.values['distance_to_localizer_point'] = f'{distance * 1e3:.1f} mm'
        self.problems.values['candidate_links'] = ', '.join((estimate.link,
                                                              *estimate.ambiguous_with))
        ambiguous = (f' (ambiguous: or {", ".join(estimate.ambiguous_with)})'
                     if estimate.ambiguous_with else '')
        self.problems.set_status(OK, f'{self._description}; contact on {estimate.link}'
                                 f'{ambiguous}, {np.linalg.norm(estimate.force):.1f} N')

    # ----------------------------------------------------------- watch and service
    def _watch_inputs(self) -> None:
        """Report a stream that stopped while the other goes on (nothing is estimated)."""
        now = self.steady()
        timeout = self.config.input_timeout
        fresh = {s: now - self._arrived.get(s, -np.inf) <= timeout
                 for s in ('ft_wrench', 'joint_state', 'residual')}
        topic = self.spec.topic
        if fresh['ft_wrench'] and not fresh['joint_state']:
            self._stale('no_joint_state', f'F/T readings but no joint state on '
                        f'{topic("joint_state")} for {timeout:g} s: nothing compensated')
        elif fresh['joint_state'] and not fresh['ft_wrench']:
            self._stale('no_wrench', f'joint states but no F/T reading on '
                        f'{topic("ft_wrench")} for {timeout:g} s: nothing compensated')
        elif fresh['ft_wrench'] and not fresh['residual']:
            self._stale('no_residual', f'no residual on {topic("residual")} for '
                        f'{timeout:g} s: compensated wrench only, no contact estimate')

    def _stale(self, kind: str, message: str) -> None:
        self.problems.report(kind, message)
        self.problems.set_status(WARN, message)

    def _on_zero(self, request: Trigger.Request, response: Trigger.Response):
        """The sensor offset from the arm at rest, stored in `offset_file`."""
        now = self.steady()
        try:
            if any(now - self._arrived.get(s, -np.inf) > self.config.input_timeout
                   for s in ('ft_wrench', 'joint_state')):
                raise FtContactError('no recent F/T reading and joint state: cannot tell '
                                     'whether the arm rests')
            offset = self._resting.offset(self._compensator)
            path = self.config.offset_file
            if path:
                path = save_offset(path, offset, self._sensor_frame,
                                   self.stamp_clock())
        except (FtContactError, OSError) as err:
            response.success, response.message = False, f'not zeroed: {err}'
            self.get_logger().warning(response.message)
            return response
        self._compensator.offset = offset
        if self._observer:  # its integral holds the old offset
            self._observer.reset()
        self._offset_source = 'offset from ~/zero'
        response.success = True
        response.message = (f'offset {np.round(offset, 4).tolist()} (N, N·m, sensor frame) '
                            + (f'stored in {path}' if path else 'not stored (offset_file '
                               "is '')"))
        self.get_logger().info(response.message)
        return response


def main(args=None):
    return run(FtContactEstimatorNode, args)


if __name__ == '__main__':
    sys.exit(main())
