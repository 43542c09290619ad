"""contact_localizer over rclpy: estimates for τ_ext = J(p)ᵀF, the base wrench, the cloud, bad
input, the gate (and calibrate's, the detector's ψ_0)."""
import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PointStamped, WrenchStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState, PointCloud2, PointField
from visualization_msgs.msg import MarkerArray

from contact_estimation import manifest
from contact_estimation.commands import calibrate as calibrate_command
from contact_estimation.core.contact.lidar_fusion import to_base_frame
from contact_estimation.core.robot.pose import rotation_from_rpy
from contact_estimation.nodes.contact_localizer import ContactLocalizerNode
from contact_estimation.ros.conversions import seconds_to_stamp, stamp_to_seconds, xyz_to_cloud
from contact_estimation.ros.localization_messages import MARKER_NS, OBSTACLE_ID
from contact_estimation.core.identification.recording import JointRecording, write_csv
from contact_estimation.ros.qos import PIPELINE_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import spinning
from test_calibration import JOINTS, free_motion

SPEC = manifest.node('contact_localizer')
TIMEOUT = 20.0
Q = np.array([0.3, -0.4, 0.2, -2.0, 0.3, 1.8, 0.5])
LINK = 'panda_link6'
FORCE = 30.0  # N, along the inward normal
# A lidar frame 1.5 m in front of the robot, turned 90° about z (roll, pitch, yaw).
LIDAR_POSITION, LIDAR_RPY = [1.5, 0.0, 0.4], [0.0, 0.0, np.pi / 2]


class Probe(Node):
    """Plays the residual node and the lidar; records what the localizer publishes."""

    def __init__(self, context, robot):
        super().__init__('localizer_probe', context=context)
        self.robot = robot
        self.effort = np.zeros(robot.n)
        self.names = list(robot.joint_names)
        self.residual_stamps: list[float] = []
        self.wrench = None           # the base wrench sent with each residual, and its frame
        self.wrench_frame, self.wrench_delay = robot.base_link, 0.0
        self.spoil = lambda msg: msg  # a test's change to every residual sent
        self.points, self.wrenches, self.markers, self.status = [], [], [], []
        self._residual_pub = self.create_publisher(JointState, SPEC.topic('residual'),
                                                   PIPELINE_QOS)
        self._wrench_pub = self.create_publisher(WrenchStamped, SPEC.topic('base_wrench'),
                                                 PIPELINE_QOS)
        self.cloud_pub = self.create_publisher(PointCloud2, SPEC.topic('lidar_points'),
                                               PIPELINE_QOS)
        self.create_subscription(PointStamped, SPEC.topic('point'), self.points.append,
                                 PIPELINE_QOS)
        self.create_subscription(WrenchStamped, SPEC.topic('wrench'), self.wrenches.append,
                                 PIPELINE_QOS)
        self.create_subscription(MarkerArray, SPEC.topic('markers'), self.markers.append,
                                 PIPELINE_QOS)
        self.create_subscription(DiagnosticArray, SPEC.topic('diagnostics'), self._on_status,
                                 PIPELINE_QOS)
        self.create_timer(0.005, self._publish)

    def _publish(self):
        stamp = self.get_clock().now().to_msg()
        self.residual_stamps.append(stamp_to_seconds(stamp))
        msg = JointState(name=self.names, effort=[float(x) for x in self.effort],
                         position=[float(x) for x in Q[:len(self.effort)]],
                         velocity=[0.0] * len(self.effort))
        msg.header.stamp = stamp
        if self.wrench is not None:
            sent = WrenchStamped()
            sent.header.frame_id = self.wrench_frame
            sent.header.stamp = seconds_to_stamp(stamp_to_seconds(stamp) - self.wrench_delay)
            (sent.wrench.force.x, sent.wrench.force.y, sent.wrench.force.z,
             sent.wrench.torque.x, sent.wrench.torque.y, sent.wrench.torque.z) = map(
                float, self.wrench)
            self._wrench_pub.publish(sent)
        self._residual_pub.publish(self.spoil(msg))

    def _on_status(self, msg):
        self.status += [{kv.key: kv.value for kv in s.values}
                        | {'': s.message, '<level>': int.from_bytes(s.level)}
                        for s in msg.status if s.name.lstrip('/') == 'contact_localizer']

    def latest(self, key: str, default='0') -> str:
        return self.status[-1].get(key, default) if self.status else default

    def counted(self, key: str, at_least: int = 1) -> bool:
        return int(self.latest(key)) >= at_least


@pytest.fixture
def rig(context, request):
    overrides = getattr(request, 'param', {})
    node = ContactLocalizerNode(context=context, parameter_overrides=[
        Parameter(k, value=v) for k, v in overrides.items()])
    probe = Probe(context, node.robot)
    with spinning(context, node, probe) as executor:
        yield node, probe, executor


def contact(node):
    """A surface sample of LINK, its outward normal (link frame), the force on the robot
    there (link frame) and τ_ext = J(p)ᵀF at Q."""
    points, normals = node.surfaces.surface_points(LINK)
    i = len(points) // 3
    force = -FORCE * normals[i]
    rotation, _ = node.robot.link_pose(Q, LINK)
    tau = node.robot.point_jacobian(Q, LINK, points[i]).T @ (rotation @ force)
    return points[i], normals[i], force, tau


def base_wrench(node, point, force):
    """[F; p × F] at the base origin, base frame: what ft_contact_estimator publishes."""
    rotation, origin = node.robot.link_pose(Q, LINK)
    return np.concatenate([rotation @ force, np.cross(rotation @ point + origin,
                                                      rotation @ force)])


def obstacle_cloud(node, point, normal):
    """A 4 cm cube of points 6 cm out from the contact point (base frame): the hand."""
    rotation, origin = node.robot.link_pose(Q, LINK)
    grid = np.stack(np.meshgrid(*[np.arange(-1.5, 2) * 0.01] * 3), -1).reshape(-1, 3)
    return rotation @ point + origin + 0.06 * rotation @ normal + grid


def test_estimate_has_the_residual_stamp_the_link_frame_and_the_force(rig):
    node, probe, executor = rig
    point, _, force, tau = contact(node)
    probe.effort = tau
    assert spin_until(executor, lambda: len(probe.points) >= 2 and len(probe.wrenches) >= 2
                      and probe.markers, TIMEOUT)
    estimate, wrench = probe.points[-1], probe.wrenches[-1]
    assert estimate.header.frame_id == wrench.header.frame_id == LINK
    assert estimate.header.stamp == wrench.header.stamp
    assert stamp_to_seconds(estimate.header.stamp) in probe.residual_stamps
    got = np.array([estimate.point.x, estimate.point.y, estimate.point.z])
    assert np.linalg.norm(got - point) < 0.005
    f = wrench.wrench.force
    np.testing.assert_allclose([f.x, f.y, f.z], force, atol=0.02 * FORCE)
    t = wrench.wrench.torque
    assert (t.x, t.y, t.z) == (0.0, 0.0, 0.0)
    drawn = {m.id: m for m in probe.markers[-1].markers}
    assert all(m.ns == MARKER_NS for m in drawn.values())
    assert any(m.type == m.ARROW and m.header.frame_id == LINK for m in drawn.values())
    assert spin_until(executor, lambda: probe.latest('source', '') == 'torque', TIMEOUT)
    assert probe.latest('link') == LINK
    assert probe.latest('link_range', '').endswith('panda_link7')


def test_no_estimate_below_the_gate(rig):
    node, probe, executor = rig
    *_, tau = contact(node)
    probe.effort = tau * 0.9 * node.schedule.thresholds.min() / np.abs(tau).max()
    assert spin_until(executor, lambda: probe.counted('residuals_received', 50), TIMEOUT)
    assert not probe.points and probe.latest('estimates') == '0'
    assert probe.latest('') == 'no contact'


@pytest.mark.parametrize('rig', [{'lidar.frame': 'lidar', 'lidar.position': LIDAR_POSITION,
                                  'lidar.rpy': LIDAR_RPY}], indirect=True)
def test_a_fresh_cloud_in_the_lidar_frame_joins_a_stale_one_does_not(rig):
    node, probe, executor = rig
    point, normal, _, tau = contact(node)
    probe.effort = tau
    base = obstacle_cloud(node, point, normal)
    # The same points in the lidar frame: the inverse of its pose.
    sensor = to_base_frame(base - LIDAR_POSITION, [0.0, 0.0, 0.0],
                           rotation_from_rpy(LIDAR_RPY).T)

    def send(age: float):
        stamp = seconds_to_stamp(stamp_to_seconds(probe.get_clock().now().to_msg()) - age)
        probe.cloud_pub.publish(xyz_to_cloud(stamp, 'lidar', sensor))
        return True

    assert spin_until(executor, lambda: send(0.0) and probe.latest('source', '') ==
                      'torque+lidar', TIMEOUT)
    assert any(m.ns == MARKER_NS and m.id == OBSTACLE_ID and len(m.points) >= 4
               for m in probe.markers[-1].markers), 'the obstacle cluster is drawn'
    assert spin_until(executor, lambda: send(5.0) and probe.latest('source', '') ==
                      'torque', TIMEOUT)
    assert probe.counted('stale_cloud')
    assert probe.latest('cloud', '').startswith('stale')


def _cloud_without_xyz(cloud):
    cloud.fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
                    for i, n in enumerate('abc')]
    return cloud


def _truncated(cloud):
    cloud.data = bytes(cloud.data)[:len(cloud.data) // 2]
    return cloud


def _all_nan(cloud):
    cloud.data = np.full(len(cloud.data) // 4, np.nan, dtype=np.float32).tobytes()
    return cloud


def _unknown_frame(cloud):
    cloud.header.frame_id = 'somewhere'
    return cloud


def _million_points(cloud):
    return xyz_to_cloud(cloud.header.stamp, cloud.header.frame_id, np.zeros((1_000_000, 3)))


@pytest.mark.parametrize('spoil, kind', [
    (_cloud_without_xyz, 'bad_cloud'), (_truncated, 'bad_cloud'),
    (_all_nan, 'not_finite'), (_unknown_frame, 'unknown_frame'),
    (_million_points, 'cloud_too_large')])
def test_a_bad_cloud_is_counted_and_not_used(rig, spoil, kind):
    node, probe, executor = rig
    point, normal, _, tau = contact(node)
    probe.effort = tau
    cloud = obstacle_cloud(node, point, normal)

    def send():
        probe.cloud_pub.publish(spoil(xyz_to_cloud(probe.get_clock().now().to_msg(),
                                                   node.robot.base_link, cloud)))
        return True

    assert spin_until(executor, lambda: send() and probe.counted(kind)
                      and probe.counted('estimates_published'), TIMEOUT)
    assert probe.latest('source') == 'torque'
    assert probe.latest('cloud') == 'none received: torque only'


def _wrong_length(msg):
    msg.effort = msg.effort[:-1]
    return msg


def _wrong_names(msg):
    msg.name = [n.replace('panda', 'ur') for n in msg.name]
    return msg


def _nan(msg):
    msg.effort[0] = float('nan')
    return msg


@pytest.mark.parametrize('spoil, kind', [(_wrong_length, 'wrong_size'),
                                         (_wrong_names, 'wrong_joints'), (_nan, 'not_finite')])
def test_a_bad_residual_is_counted_and_gives_no_estimate(rig, spoil, kind):
    node, probe, executor = rig
    *_, tau = contact(node)
    probe.effort = tau
    probe.spoil = spoil
    assert spin_until(executor, lambda: probe.counted(kind, 20), TIMEOUT)
    assert not probe.points and probe.latest('estimates') == '0'


def test_the_base_wrench_joins_the_torques_when_fresh_and_in_the_base_frame(rig):
    """The compensated base wrench of ft_contact_estimator makes the estimate torque+ft; one
    stamped too far from the residual, in another frame, or contradicting the torques is not
    used and the diagnostics say why."""
    node, probe, executor = rig
    point, _, force, tau = contact(node)
    probe.effort = tau
    probe.wrench = base_wrench(node, point, force)
    assert spin_until(executor, lambda: probe.latest('source', '') == 'torque+ft'
                      and probe.points, TIMEOUT)
    assert probe.latest('base_wrench') == 'used' and probe.counted('base_wrenches_received')
    got = probe.points[-1].point
    assert np.linalg.norm(np.array([got.x, got.y, got.z]) - point) < 0.005
    probe.wrench_delay = 1.0
    assert spin_until(executor, lambda: probe.latest('source', '') == 'torque', TIMEOUT)
    assert 's from the residual' in probe.latest('base_wrench')
    probe.wrench_delay, probe.wrench_frame = 0.0, LINK
    assert spin_until(executor, lambda: 'in frame' in probe.latest('base_wrench', ''),
                      TIMEOUT)
    assert probe.latest('source') == 'torque'
    # A wrench that contradicts the torques (twice the force): the torques alone are used.
    probe.wrench_frame, probe.wrench = node.robot.base_link, base_wrench(node, point, 2 * force)
    assert spin_until(executor, lambda: 'inconsistent' in probe.latest('base_wrench', ''),
                      TIMEOUT)
    assert probe.latest('source') == 'torque'


def test_calibrate_sets_the_gate_to_the_detectors_thresholds(context, tmp_path):
    """`calibrate` writes the localizer's gate beside the detector's ψ_0: with that file the
    localizer estimates for every contact the detector stops on."""
    t, q, v, tau = free_motion(3.0)
    csv = tmp_path / 'free.csv'
    write_csv(csv, JointRecording(JOINTS, t, q, v, tau))
    out = tmp_path / 'thresholds.yaml'
    assert calibrate_command.main([str(csv), '-o', str(out), '--margin', '1.5']) == 0
    written = yaml.safe_load(out.read_text())
    psi = written['collision_detector']['ros__parameters']['thresholds_position']
    assert written['contact_localizer']['ros__parameters']['gate_thresholds'] == psi
    node = ContactLocalizerNode(context=context, cli_args=['--ros-args', '--params-file',
                                                           str(out)])
    try:
        np.testing.assert_allclose(node.schedule.thresholds, psi)
    finally:
        node.destroy_node()


def test_clouds_that_stop_arriving_make_the_lidar_stale_on_diagnostics(rig):
    """Issue 36: clouds lost in transport, or a lidar that stopped, are reported: WARN, with
    the time since the last cloud."""
    node, probe, executor = rig
    cloud = xyz_to_cloud(probe.get_clock().now().to_msg(), node.robot.base_link,
                         np.array([[2.0, 0.0, 0.5]]))
    timer = probe.create_timer(0.1, lambda: probe.cloud_pub.publish(cloud) or setattr(
        cloud.header, 'stamp', probe.get_clock().now().to_msg()))
    assert spin_until(executor, lambda: probe.latest('lidar', '').startswith('last cloud')
                      and 'stale' not in probe.latest(''), TIMEOUT)
    assert probe.status[-1]['<level>'] == 0
    probe.destroy_timer(timer)  # the lidar stops
    assert spin_until(executor, lambda: 'lidar stale: the last cloud arrived'
                      in probe.latest(''), TIMEOUT)
    age = float(probe.latest('').split('arrived ')[1].split(' s ago')[0])
    assert age > node.value('lidar.timeout') and probe.status[-1]['<level>'] >= 1
    assert probe.counted('stale_lidar')
