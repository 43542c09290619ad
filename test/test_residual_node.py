"""residual_node over rclpy: joint states in, τ_ext out, bad input counted, bad setup refused."""
import os
import subprocess

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from contact_estimation import manifest
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.nodes.residual_node import ResidualNode
from contact_estimation.ros.conversions import seconds_to_stamp, wrench_stamped
from contact_estimation.ros.node_main import StartupError
from contact_estimation.ros.qos import PIPELINE_QOS, SENSOR_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.launcher import node_command
from test_residual import _identified

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARAMS = os.path.join(ROOT, 'config', 'residual_node.yaml')
SPEC = manifest.node('residual_node')
T0 = 1000.0  # stamps of the test samples, s
TIMEOUT = 30.0  # s: generous deadline for each awaited answer


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


def _node(context, **overrides):
    return ResidualNode(context=context, cli_args=['--ros-args', '--params-file', PARAMS],
                        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])


class Harness:
    """The node under test plus a driver node: publish one joint state, wait for its residual."""

    def __init__(self, context, **overrides):
        self.node = _node(context, **overrides)
        self.driver = Node('residual_test_driver', context=context)
        self.outputs = []
        self.joint_state = self.driver.create_publisher(JointState, SPEC.topic('joint_state'),
                                                        PIPELINE_QOS)
        self.wrench = self.driver.create_publisher(WrenchStamped, SPEC.topic('wrist_wrench'),
                                                   PIPELINE_QOS)
        self.driver.create_subscription(JointState, SPEC.topic('residual'),
                                        self.outputs.append, SENSOR_QOS)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.executor.add_node(self.driver)
        assert spin_until(self.executor, lambda: (
            self.joint_state.get_subscription_count() > 0
            and self.wrench.get_subscription_count() > 0
            and all(o.listened for o in self.node.outputs)), TIMEOUT)  # published only then

    def send(self, t, q, v, tau, names=None, expect_output=True):
        """Publish one joint state; return its residual message, or None once the node has
        reported dropping it (every drop is counted on its diagnostics)."""
        msg = JointState(name=list(self.node.robot.joint_names if names is None else names),
                         position=list(q), velocity=list(v), effort=list(tau))
        msg.header.stamp = seconds_to_stamp(t)
        count, problems = len(self.outputs), self.problem_count()
        published = self.node.problems.traffic['residuals_published']
        self.joint_state.publish(msg)
        if expect_output:
            assert spin_until(self.executor, lambda: len(self.outputs) > count, TIMEOUT)
            return self.outputs[-1]
        assert spin_until(self.executor, lambda: self.problem_count() > problems, TIMEOUT), \
            'the node neither answered nor reported the sample'
        assert self.node.problems.traffic['residuals_published'] == published, \
            'a dropped sample produced an output'
        assert len(self.outputs) == count, 'a dropped sample produced an output'
        return None

    def problem_count(self) -> int:
        return sum(self.node.problems.counts.values())

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()
        self.driver.destroy_node()


@pytest.fixture
def harness(context):
    made = []

    def make(**overrides):
        made.append(Harness(context, **overrides))
        return made[-1]
    yield make
    for h in made:
        h.close()


def test_observer_output_follows_a_held_external_torque(harness, panda):
    h = harness()  # config/residual_node.yaml: momentum observer, gain 50 1/s, no friction
    gain = h.node.get_parameter('observer_gain').value[0]
    q, v = np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5]), np.zeros(panda.n)
    tau_ext = np.array([1.0, -3.0, 2.0, 0.5, -0.2, 0.3, 0.1])
    tau = panda.gravity(q) - tau_ext  # held still with an external torque on the arm
    for k in range(60):
        t = T0 + k * 1e-3
        out = h.send(t, q, v, tau)
        assert (out.header.stamp.sec, out.header.stamp.nanosec) == (
            seconds_to_stamp(t).sec, seconds_to_stamp(t).nanosec)
        assert list(out.name) == panda.joint_names
        np.testing.assert_allclose(out.position, q)
        # held still: p = 0 and the observer is exactly a first-order lag of τ_ext
        np.testing.assert_allclose(out.effort, tau_ext * (1 - np.exp(-gain * k * 1e-3)),
                                   atol=1e-9)


def test_bad_samples_are_counted_and_dropped_and_a_gap_restarts(harness, panda):
    h = harness()
    q, zero = np.full(panda.n, 0.2), np.zeros(panda.n)
    tau = panda.gravity(q) - 1.0
    h.send(T0, q, zero, tau)
    h.send(T0 + 0.001, q, zero, tau)
    reversed_names = panda.joint_names[::-1]
    h.send(T0 + 0.002, q, zero, tau, names=reversed_names, expect_output=False)
    h.send(T0 + 0.002, [np.nan] + list(q[1:]), zero, tau, expect_output=False)
    h.send(T0 + 0.002, q, zero[:3], tau, expect_output=False)
    h.send(T0 + 0.001, q, zero, tau, expect_output=False)  # not after the last sample
    before_gap = h.send(T0 + 0.002, q, zero, tau)
    assert np.abs(before_gap.effort).max() > 0.0
    after_gap = h.send(T0 + 0.5, q, zero, tau)
    np.testing.assert_array_equal(after_gap.effort, zero)  # restarted, not integrated over
    counts = h.node.problems.counts
    assert {k: counts[k] for k in ('wrong_joints', 'not_finite', 'wrong_size', 'out_of_order',
                                   'gap')} == dict.fromkeys(
        ('wrong_joints', 'not_finite', 'wrong_size', 'out_of_order', 'gap'), 1)


def test_a_stamp_in_2038_is_refused_not_taken_as_a_new_time_base(harness, panda):
    """Issue 19: one joint state stamped in 2038 made the residual restart ("time jumped by
    351923260 s") and every later sample look out of order."""
    h = harness()
    q, zero = np.full(panda.n, 0.2), np.zeros(panda.n)
    tau = panda.gravity(q) - 1.0
    h.send(T0, q, zero, tau)
    h.send(2.0 ** 31 - 1, q, zero, tau, expect_output=False)  # 2038-01-19
    after = h.send(T0 + 0.001, q, zero, tau)
    assert np.abs(after.effort).max() > 0.0  # integrated on, not restarted
    counts = h.node.problems.counts
    assert (counts['future_stamp'], counts['gap'], counts['out_of_order']) == (1, 0, 0), counts


def test_a_sample_that_overflows_the_model_is_dropped_and_the_observer_recovers(harness, panda):
    h = harness()
    q, zero = np.full(panda.n, 0.2), np.zeros(panda.n)
    tau = panda.gravity(q) - 1.0
    h.send(T0, q, zero, tau)
    huge = np.full(panda.n, 1e200)  # finite, but M q̇ and Cᵀq̇ overflow
    h.send(T0 + 0.001, q, huge, tau, expect_output=False)
    assert h.node.problems.counts['non_finite_residual'] == 1
    # The observer started over instead of carrying NaN: the next samples are finite again.
    first = h.send(T0 + 0.002, q, zero, tau)
    second = h.send(T0 + 0.003, q, zero, tau)
    np.testing.assert_array_equal(first.effort, zero)
    assert np.isfinite(second.effort).all() and np.abs(second.effort).max() > 0.0


def test_wrist_wrench_is_removed_while_it_is_current(harness, panda):
    h = harness(model='fast', **{'wrist_wrench.enabled': True,
                                 'wrist_wrench.link': 'panda_link8'})
    q, zero = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]), np.zeros(panda.n)
    force, torque = np.array([0.0, 0.0, 25.0]), np.array([0.0, 0.3, 0.0])  # on the robot
    task = panda.link_wrench_torque(q, 'panda_link8', force, torque)
    tau = panda.gravity(q) - task
    # In order on one reliable writer: once the second (wrong frame) is counted, the first is in.
    h.wrench.publish(wrench_stamped(seconds_to_stamp(T0), 'panda_link8', force, torque))
    h.wrench.publish(wrench_stamped(seconds_to_stamp(T0), 'panda_hand', force, torque))
    assert spin_until(h.executor, lambda: h.node.problems.counts['unknown_frame'] == 1,
                      TIMEOUT)
    np.testing.assert_allclose(h.send(T0 + 0.001, q, zero, tau).effort, zero, atol=1e-9)
    # a second later the wrench is old: the task force is left in (it counts as a contact)
    np.testing.assert_allclose(h.send(T0 + 1.0, q, zero, tau).effort, task, atol=1e-9)
    assert h.node.problems.counts['wrist_wrench_stale'] == 1
    assert h.node.problems.counts['unknown_frame'] == 1


def test_run_time_parameter_changes_are_checked(harness, panda):
    h = harness()
    refused = {
        'model': 'kalman',
        'observer_gain': [50.0, 50.0],
        'friction_parameters': [0.1, 0.2, 0.3],
        'wrist_wrench.link': 'no_such_link',
    }
    for name, value in refused.items():
        changes = [Parameter(name, value=value)]
        if name == 'wrist_wrench.link':
            changes.append(Parameter('wrist_wrench.enabled', value=True))
        result = h.node.set_parameters_atomically(changes)
        assert not result.successful, name
        assert result.reason, name
    assert h.node.get_parameter('model').value == 'momentum_observer'
    assert h.node.set_parameters([Parameter('model', value='fast')])[0].successful
    q, zero = np.full(panda.n, 0.2), np.zeros(panda.n)
    tau_ext = np.linspace(-1, 1, panda.n)
    # the fast residual has no lag: τ_ext at once
    np.testing.assert_allclose(h.send(T0, q, zero, panda.gravity(q) - tau_ext).effort,
                               tau_ext, atol=1e-9)


def test_a_declared_payload_is_part_of_the_model_and_follows_a_tool_change(harness, panda):
    mass, centre = 5.0, [0.02, -0.03, 0.12]
    h = harness(model='fast', **{'payload.mass': mass, 'payload.centre_of_mass': centre})
    assert '5 kg payload' in h.node.problems.message
    q, zero = np.array([0.3, -0.5, 0.2, -2.0, 0.4, 1.6, 0.7]), np.zeros(panda.n)
    tau = panda.with_payload(mass, centre).gravity(q)  # holding the tool, nothing else
    np.testing.assert_allclose(h.send(T0, q, zero, tau).effort, zero, atol=1e-9)
    # The tool is taken off but the parameter not changed: its weight is missing, a contact.
    weight = tau - panda.gravity(q)
    np.testing.assert_allclose(h.send(T0 + 0.001, q, zero, panda.gravity(q)).effort, weight,
                               atol=1e-9)
    assert h.node.set_parameters([Parameter('payload.mass', value=0.0)])[0].successful
    np.testing.assert_allclose(h.send(T0 + 0.002, q, zero, panda.gravity(q)).effort, zero,
                               atol=1e-9)
    refused = h.node.set_parameters([Parameter('payload.centre_of_mass', value=[0.1, 0.2])])[0]
    assert not refused.successful and 'centre_of_mass' in refused.reason
    # The same tool held on another link: its centre of mass is in that link's frame.
    on_link7 = [Parameter('payload.mass', value=mass), Parameter('payload.link',
                                                                   value='panda_link7')]
    assert h.node.set_parameters_atomically(on_link7).successful
    tau = panda.with_payload(mass, centre, 'panda_link7').gravity(q)
    np.testing.assert_allclose(h.send(T0 + 0.003, q, zero, tau).effort, zero, atol=1e-9)


@pytest.mark.parametrize('overrides, message', [
    ({'model_file': '/nonexistent/panda_model.yaml'}, 'panda_model.yaml'),
    ({'model': 'kalman'}, "model = 'kalman': 'kalman' is not one of fast, rnea, "
                          'momentum_observer'),
    ({'robot': 'no_such_robot'}, 'no_such_robot'),
    ({'gap_threshold': -1.0}, 'gap_threshold'),
    ({'friction_model': 'continuous'},
     r'friction_parameters \(continuous: .*\): expected 6 or 7 × 6'),
    ({'payload.centre_of_mass': [0.0, 0.1]}, r'payload.centre_of_mass = \[0.0, 0.1\]: 2 values, '
                                             'but it takes exactly 3'),
    ({'payload.link': 'panda_link0'}, "payload.link = 'panda_link0': not a link the joints of "
                                      'panda move'),
])
def test_bad_setup_refuses_to_start(context, overrides, message):
    with pytest.raises(StartupError, match=message):
        _node(context, **overrides)


def test_a_model_file_for_another_robot_or_malformed_is_refused(context, tmp_path, panda):
    ur5 = RobotModel.load('ur5')
    _identified(ur5, 1.0, 'coulomb_viscous', [0.1, 0.2]).save(tmp_path / 'ur5.yaml')
    with pytest.raises(StartupError, match="identified for robot 'ur5'"):
        _node(context, model_file=str(tmp_path / 'ur5.yaml'))
    (tmp_path / 'broken.yaml').write_text('format: something else\n')
    with pytest.raises(StartupError, match='not a valid identified model file'):
        _node(context, model_file=str(tmp_path / 'broken.yaml'))
    _identified(panda, 1.0, 'coulomb_viscous', [0.1, 0.2]).save(tmp_path / 'panda.yaml')
    node = _node(context, model_file=str(tmp_path / 'panda.yaml'))
    assert 'identified model' in node.problems.message
    node.destroy_node()


def test_a_process_with_a_missing_model_file_exits_1_and_says_why(tmp_path):
    missing = tmp_path / 'identified_panda.yaml'
    proc = subprocess.run(node_command('residual_node', overrides={'model_file': str(missing)}),
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert proc.returncode == 1
    assert str(missing) in proc.stderr
