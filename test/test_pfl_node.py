"""Power and force limiting in the proximity monitor over rclpy (issue 38): contact estimates
checked against the limit of the body region they touch, the margin published on
contact_estimation/pfl, the stop latched with the cause pfl when over, until ~/reset."""
import numpy as np
import pytest
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PointStamped, WrenchStamped
from rclpy.parameter import Parameter

from contact_estimation.core.contact.pfl import BODY_REGIONS, PflCheck, tracked_parts
from contact_estimation.core.contact.proximity import HumanModel, standing_skeleton
from contact_estimation.ros.proximity_messages import ROBOT_NS
from contact_estimation.ros.qos import PIPELINE_QOS
from test_proximity_monitor_node import (OVERRIDES, Q, SPEC, Probe, cube, hand_position,
                                         reset, started_with_probe, stopped_with, until)

LINK = 'panda_hand'
POINT = np.array([0.0, 0.0, 0.05])  # on the hand, in its frame


class ContactProbe(Probe):
    """The proximity probe that also plays the contact localizer: while `force` is set, an
    estimate (point and wrench, same stamp, frame = LINK) at 20 Hz; records the checks
    published on contact_estimation/pfl."""

    def __init__(self, context, robot):
        super().__init__(context, robot)
        self.force: np.ndarray | None = None
        self.stamped = None   # the last estimate's stamp (builtin_interfaces/Time)
        self.checks: list[dict] = []
        self._point_pub = self.create_publisher(PointStamped, SPEC.topic('contact_point'),
                                                PIPELINE_QOS)
        self._wrench_pub = self.create_publisher(WrenchStamped, SPEC.topic('contact_wrench'),
                                                 PIPELINE_QOS)
        self.create_subscription(DiagnosticArray, SPEC.topic('pfl'), self._on_check,
                                 PIPELINE_QOS)
        self._peak_pub = self.create_publisher(WrenchStamped, SPEC.topic('peak_force'),
                                               PIPELINE_QOS)
        self._ft_pubs = (
            self.create_publisher(PointStamped, SPEC.topic('ft_contact_point'), PIPELINE_QOS),
            self.create_publisher(WrenchStamped, SPEC.topic('ft_contact_wrench'), PIPELINE_QOS))
        self.create_timer(0.05, self._estimate)

    def ft_estimate(self, force, link: str) -> None:
        """Plays the F/T estimator's own estimate (its point and wrench, on `link`) now."""
        self.stamped = self.get_clock().now().to_msg()
        self._publish_estimate(self._ft_pubs, self.stamped, link, force)

    def peak(self, force) -> None:
        """Plays the F/T estimator: a base force peak (base frame), stamped 20 ms after the
        last estimate (within pfl.peak_window of it, however late this runs)."""
        msg = WrenchStamped()
        msg.header.stamp = Time(sec=self.stamped.sec, nanosec=self.stamped.nanosec + 20_000_000)
        if msg.header.stamp.nanosec >= 1_000_000_000:
            msg.header.stamp.sec += 1
            msg.header.stamp.nanosec -= 1_000_000_000
        msg.header.frame_id = 'panda_link0'
        msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = (float(v) for v in force)
        self._peak_pub.publish(msg)

    def _estimate(self):
        if self.force is None:
            return
        self.stamped = self.get_clock().now().to_msg()
        self._publish_estimate((self._point_pub, self._wrench_pub), self.stamped, LINK,
                               self.force)

    @staticmethod
    def _publish_estimate(publishers, stamp, link: str, force) -> None:
        point, wrench = PointStamped(), WrenchStamped()
        for msg in (point, wrench):
            msg.header.stamp, msg.header.frame_id = stamp, link
        point.point.x, point.point.y, point.point.z = (float(v) for v in POINT)
        wrench.wrench.force.x, wrench.wrench.force.y, wrench.wrench.force.z = (
            float(v) for v in force)
        for publisher, msg in zip(publishers, (point, wrench)):
            publisher.publish(msg)

    def _on_check(self, msg: DiagnosticArray):
        status = msg.status[0]
        self.checks.append({'message': status.message,
                            **{kv.key: kv.value for kv in status.values}})


def started(context, overrides: dict):
    """The monitor with `overrides` and a ContactProbe (a context manager)."""
    return started_with_probe(context, overrides, ContactProbe)


@pytest.fixture
def rig(context):
    with started(context, OVERRIDES) as rig:
        yield rig


@pytest.fixture
def collaborative(context):
    with started(context, {**OVERRIDES, 'pfl.collaborative': True}) as rig:
        yield rig


def checked(probe, executor, count: int = 5) -> list[dict]:
    """The next `count` checks published on contact_estimation/pfl."""
    first = len(probe.checks)
    assert until(executor, lambda: len(probe.checks) >= first + count)
    return probe.checks[first:]


def test_a_contact_over_the_face_limit_latches_the_stop_naming_region_force_and_limit(rig):
    """No tracked person: the default region, the face (65 N, no transient allowance)."""
    monitor, probe, executor = rig
    probe.keypoints = np.zeros((0, 3))  # nobody tracked: the default region
    probe.force = np.array([0.0, 80.0, -60.0])  # 100 N
    assert until(executor, lambda: probe.stop() is True and probe.parts
                 and probe.robot_status()['message'].startswith('pfl: '))
    message = probe.robot_status()['message']
    assert 'face' in message and '100 N' in message and '65 N' in message, message
    assert monitor.problems.counts['pfl'] == 1
    check = checked(probe, executor, 1)[0]
    assert check['region'] == 'face' and check['over'] == 'True' and check['link'] == LINK
    assert float(check['margin']) == pytest.approx(100.0 / 65.0, rel=1e-3)
    assert float(check['force']) == pytest.approx(100.0, abs=0.1)
    assert [float(check[axis]) for axis in 'xyz'] == pytest.approx(POINT.tolist())
    # Latched: the contact has ended and the scene is clear, yet the stop holds, for pfl …
    probe.force = None
    stops, parts = len(probe.stops), len(probe.parts)
    assert until(executor, lambda: len(probe.parts) >= parts + 3
                 and probe.robot_status()['message'].startswith('pfl: '))
    assert all(probe.stops[stops - 1:])
    # … until ~/reset.
    assert until(executor, lambda: reset(probe, executor).success)
    assert until(executor, lambda: probe.stop() is False)
    assert monitor.problems.counts['pfl'] == 1


def test_an_impact_s_peak_over_the_limit_stops_though_the_estimates_stay_under_it(rig):
    """The estimates (low-passed, 20 Hz) read 50 N, under the face's 65 N; the F/T
    estimator's base force peak of 100 N between them raises the check near its stamp over
    the limit: stop pfl with 100 N. (Before issue 38's peak_force the impact passed.)"""
    monitor, probe, executor = rig
    probe.keypoints = np.zeros((0, 3))  # nobody tracked: the default region
    probe.force = np.array([0.0, 30.0, -40.0])  # 50 N
    checks = checked(probe, executor, 2)
    assert all(c['over'] == 'False' for c in checks)
    probe.peak([0.0, 0.0, -100.0])
    assert until(executor, lambda: stopped_with(probe, 'pfl: '))
    message = probe.robot_status()['message']
    assert '100 N' in message and 'face' in message, message
    assert monitor.problems.counts['pfl'] == 1


def test_a_peak_after_the_impact_s_last_estimate_checks_it_again(rig):
    """The impact's only estimate (50 N) comes before its peak (100 N): the peak checks that
    estimate again, over the face's 65 N."""
    monitor, probe, executor = rig
    probe.keypoints = np.zeros((0, 3))  # nobody tracked: the default region
    probe.force = np.array([0.0, 30.0, -40.0])  # 50 N
    checked(probe, executor, 1)
    probe.force = None
    probe.peak([0.0, 0.0, -100.0])
    assert until(executor, lambda: stopped_with(probe, 'pfl: '))
    assert '100 N' in probe.robot_status()['message']


def test_a_peak_no_localizer_estimate_is_near_is_checked_on_the_f_t_estimate(rig):
    """A contact the localizer never estimates (τ_ext under its gate: pfl_sim's hand hit at
    0.2 m/s) has the F/T estimator's own estimate (20 N, low-passed, on panda_link7) and its
    peak (100 N): checked on that estimate raised to the peak, over the face's 65 N: stop
    pfl on panda_link7. (Before: no localizer estimate, no check.)"""
    monitor, probe, executor = rig
    probe.keypoints = np.zeros((0, 3))  # nobody tracked: the default region
    probe.ft_estimate([0.0, 12.0, -16.0], 'panda_link7')   # 20 N
    probe.peak([0.0, 0.0, -100.0])
    assert until(executor, lambda: stopped_with(probe, 'pfl: '))
    message = probe.robot_status()['message']
    assert '100 N on panda_link7' in message and 'face' in message, message
    assert until(executor, lambda: any(c['link'] == 'panda_link7' and c['over'] == 'True'
                                       for c in probe.checks))


def test_a_nan_f_t_estimate_for_a_waiting_peak_is_counted_and_dropped(rig):
    """A bad F/T estimate loses nothing: counted (`not_finite`), no check, no fault; the peak
    still waits for the next estimate, which stops pfl."""
    monitor, probe, executor = rig
    probe.keypoints = np.zeros((0, 3))
    probe.ft_estimate([np.nan, 0.0, -20.0], 'panda_link7')
    probe.peak([0.0, 0.0, -100.0])
    assert until(executor, lambda: monitor.problems.counts['not_finite'] >= 1)
    assert not monitor.problems.counts.get('fault') and not probe.checks
    probe.ft_estimate([0.0, 12.0, -16.0], 'panda_link7')
    assert until(executor, lambda: stopped_with(probe, 'pfl: '))


def test_a_contact_under_the_limit_is_published_and_does_not_stop(rig):
    monitor, probe, executor = rig
    probe.keypoints = np.zeros((0, 3))  # nobody tracked: the default region
    probe.force = np.array([50.0, 0.0, 0.0])
    checks = checked(probe, executor)
    assert all(c['region'] == 'face' and c['over'] == 'False' for c in checks)
    assert float(checks[-1]['margin']) == pytest.approx(50.0 / 65.0, rel=1e-3)
    assert float(checks[-1]['limit']) == pytest.approx(BODY_REGIONS['face'].quasi_static_force)
    assert monitor.problems.counts.get('pfl', 0) == 0
    assert not any(pfl_stop(parts) for parts in probe.parts)


def pfl_stop(parts: DiagnosticArray) -> bool:
    """Whether these part statuses say the robot stops for pfl."""
    return any(s.name == 'proximity/robot' and s.message.startswith('pfl: ')
               for s in parts.status)


def test_the_region_is_the_tracked_body_part_nearest_the_contact(rig):
    """A hand at the gripper: a 120 N push is within the hand's limits (271 N transient,
    140 N quasi-static), though over the default face's 65 N. The proximity stop is raised
    (the hand is inside the protective distance), but not for the checks on the hand. (A
    check that finds the skeleton stale, on a loaded machine, takes the default region: the
    safe side, and a pfl stop.)"""
    monitor, probe, executor = rig
    keypoints = standing_skeleton(hand_position(monitor) + [0.55, 0.2, 0.0])
    rotation, origin = monitor.robot.link_pose(Q, LINK)
    part, region = PflCheck().region_of(rotation @ POINT + origin,
                                        tracked_parts(HumanModel().bodies(keypoints)))
    assert (part, region) == ('left_hand', 'hand_fingers')  # the scene is what it should be
    probe.keypoints = keypoints
    assert until(executor, lambda: probe.parts and probe.signals().get('left_hand') == 1)
    probe.force = np.array([0.0, 0.0, 120.0])
    checks = checked(probe, executor, 15)  # 0.75 s: transient, then quasi-static
    on_the_hand = [c for c in checks if c['part']]
    assert len(on_the_hand) >= 10, checks
    assert all(c['part'] == 'left_hand' and c['region'] == 'hand_fingers'
               and c['over'] == 'False' for c in on_the_hand), on_the_hand
    assert {c['phase'] for c in on_the_hand} == {'transient', 'quasi-static'}


def part_values(parts: DiagnosticArray) -> dict[str, dict[str, str]]:
    """Part name → its values in these part statuses."""
    return {s.name.split('/', 1)[1]: {kv.key: kv.value for kv in s.values} for s in parts.status}


def test_the_speed_scale_keeps_an_approach_to_a_hand_under_its_v_max(rig):
    """The gripper moving at 2 m/s toward a person whose left hand is 0.95 m farther than in
    the test above (inside its warning zone, outside its protective distance): the hand's
    v_max (~1.4 m/s) is exceeded (share > 1) and the robot's scale is cut by pfl_ratio < 1;
    with pfl.speed_limit off, nothing of it."""
    monitor, probe, executor = rig
    jacobian = monitor.robot.jacobian(Q, LINK)[:3]
    probe.velocity = np.linalg.pinv(jacobian) @ np.array([2.0, 0.0, 0.0])
    probe.keypoints = standing_skeleton(hand_position(monitor) + [0.55 + 0.95, 0.2, 0.0])

    def limited() -> bool:
        values = part_values(probe.parts[-1]) if probe.parts else {}
        return (float(values.get('left_hand', {}).get('speed_share', 0.0)) > 1.0
                and float(values['robot']['pfl_ratio']) < 1.0)

    assert until(executor, limited)
    # rviz: the gripper's spheres magenta, at its v_max or faster.
    assert until(executor, lambda: probe.markers and any(
        marker.ns == ROBOT_NS and any(c.r == 1.0 and c.g == 0.0 and c.b == 1.0
                                      for c in marker.colors)
        for marker in probe.markers[-1].markers))
    assert monitor.set_parameters_atomically([Parameter('pfl.speed_limit', value=False)]
                                             ).successful
    assert until(executor, lambda: part_values(probe.parts[-1])['robot']['pfl_ratio']
                 == '1.0000' and not limited())


def hand_at_the_gripper(monitor, probe, speed: float = 0.1) -> None:
    """The left hand ~5 cm into the gripper, which approaches it at `speed` (m/s)."""
    jacobian = monitor.robot.jacobian(Q, LINK)[:3]
    probe.velocity = np.linalg.pinv(jacobian) @ np.array([speed, 0.0, 0.0])
    probe.keypoints = standing_skeleton(hand_position(monitor) + [0.55, 0.2, 0.0])


def going(parts: list[DiagnosticArray]) -> list[dict[str, dict[str, str]]]:
    """`part_values` of the part statuses that let the arm go."""
    return [values for values in map(part_values, parts) if values['robot']['signal'] == '0']


def stopped_near(probe, part: str) -> bool:
    """Whether the robot stops for `part`, too near (not for an input problem)."""
    return bool(probe.stop() and probe.parts and probe.signals().get(part) == 1
                and probe.robot_status()['message'].startswith('stop: '))


def hand_inside(probe) -> bool:
    """Whether the latest part statuses have the left hand inside its protective distance."""
    values = part_values(probe.parts[-1]) if probe.parts else {}
    return float(values.get('left_hand', {}).get('margin', 'inf')) < 0.0


def test_collaborative_a_tracked_hand_at_the_gripper_is_touched_not_stopped(collaborative):
    """pfl.collaborative: the gripper approaches the left hand at 0.1 m/s (under the hand's
    v_max, ~1.4 m/s), inside its protective distance: no `near` stop. The speed limit cannot
    be turned off under it; collaborative off, the same scene stops `near`."""
    monitor, probe, executor = collaborative
    hand_at_the_gripper(monitor, probe)
    assert until(executor, lambda: hand_inside(probe) and probe.stop() is False)
    first = len(probe.parts)
    # A loaded machine may stop `stale` meanwhile, and every part's signal stays latched for
    # release_time after: judged on the checks that let the arm go, and on the causes.
    assert until(executor, lambda: len(going(probe.parts[first:])) >= 5)
    assert all(p['left_hand']['signal'] == '0' and float(p['left_hand']['margin']) < 0.0
               for p in going(probe.parts[first:]))
    assert monitor.problems.counts.get('near', 0) == 0

    refused = monitor.set_parameters_atomically([Parameter('pfl.speed_limit', value=False)])
    assert not refused.successful and 'pfl.collaborative' in refused.reason, refused.reason
    assert monitor.set_parameters_atomically([Parameter('pfl.collaborative', value=False)]
                                             ).successful
    assert until(executor, lambda: stopped_near(probe, 'left_hand'))


def test_collaborative_a_push_over_the_hands_limit_still_stops_pfl(collaborative):
    monitor, probe, executor = collaborative
    hand_at_the_gripper(monitor, probe)
    assert until(executor, lambda: hand_inside(probe) and probe.stop() is False)
    probe.force = np.array([0.0, 0.0, 300.0])  # over the hand's 271 N transient limit
    assert until(executor, lambda: stopped_with(probe, 'pfl: '))
    assert 'left_hand (hand_fingers)' in probe.robot_status()['message']
    assert monitor.problems.counts['pfl'] == 1 and monitor.problems.counts.get('near', 0) == 0


def test_collaborative_a_lidar_object_at_the_gripper_still_stops(collaborative):
    monitor, probe, executor = collaborative
    probe.keypoints = np.zeros((0, 3))  # nobody tracked: the lidar's objects count
    probe.cloud = cube(hand_position(monitor) + [2.0, 0.0, 0.0])
    assert until(executor, lambda: probe.stop() is False)  # the cloud worker is up
    probe.cloud = cube(hand_position(monitor) + [0.25, 0.0, 0.0])
    assert until(executor, lambda: stopped_near(probe, 'object_0'))
