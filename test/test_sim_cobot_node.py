"""sim_cobot over ROS: every topic with its type, frame and sane values; time scaling.

One test runs the node as `ros2 launch` would (node_process) with a scenario that pushes the
forearm from 1 s on and puts a box in the lidar's view; discovery between processes can take
seconds on a loaded machine, so the ground truth around a push that starts and ends is checked
with the node in this process (same rclpy context: no discovery delay).
"""
import re

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PointStamped, WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Float64

from contact_estimation import manifest
from contact_estimation.ros.conversions import cloud_to_xyz, stamp_to_seconds, wrench_to_arrays
from contact_estimation.ros.node_main import StartupError
from contact_estimation.ros.qos import PIPELINE_QOS, SENSOR_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import node_process

SPEC = manifest.node('sim_cobot')
PUBLISH_RATE = 250.0  # Hz: keeps this test's subscriber light
TIMEOUT = 60.0  # s: generous deadline for each awaited event
POINT, FORCE = [0.05, 0.0, -0.13], [-30.0, 0.0, 0.0]
BOX_CENTRE, BOX_HALF = np.array([0.4, 0.7, 0.2]), np.array([0.15, 0.1, 0.2])
SCENARIO = {
    'description': 'node test: a long push on the forearm, a box for the lidar',
    'robot': 'panda',
    'forces': [{'link': 'panda_link5', 'point': POINT, 'force': FORCE, 'frame': 'link',
                'start': 1.0, 'duration': 600.0}],
    'obstacles': [{'name': 'box', 'shape': 'box', 'size': BOX_HALF.tolist(),
                   'position': BOX_CENTRE.tolist()}],
}
TYPES = {'joint_states': JointState, 'ft_wrench': WrenchStamped, 'lidar_points': PointCloud2,
         'true_contact_point': PointStamped, 'true_contact_wrench': WrenchStamped,
         'true_contact_torque': JointState, 'diagnostics': DiagnosticArray}


class Listener:
    """Every sim_cobot publication, by manifest key."""

    def __init__(self, context, qos=SENSOR_QOS):
        self.node = Node('sim_cobot_test_listener', context=context)
        self.received = {key: [] for key in TYPES}
        for key, kind in TYPES.items():
            self.node.create_subscription(kind, SPEC.topic(key),
                                          lambda msg, k=key: self.received[k].append(msg),
                                          qos)
        self.scaling = self.node.create_publisher(Float64, SPEC.topic('time_scaling'),
                                                  PIPELINE_QOS)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)

    def enough(self) -> bool:
        r = self.received
        return (len(r['joint_states']) > 250 and len(r['lidar_points']) >= 2
                and len(r['true_contact_point']) > 10
                and any(self._ours(a) for a in r['diagnostics']))

    @staticmethod
    def _ours(array: DiagnosticArray) -> bool:
        return any(s.name.endswith('sim_cobot') and any(v.key == 'cpu_load' for v in s.values)
                   for s in array.status)


def test_node_publishes_every_topic_and_holds_on_zero_time_scaling(context, robot, tmp_path):
    scenario = tmp_path / 'scenario.yaml'
    scenario.write_text(yaml.safe_dump(SCENARIO))
    listener = Listener(context)
    overrides = {'scenario': str(scenario), 'publish_rate': PUBLISH_RATE}
    with node_process('sim_cobot', overrides=overrides, log_path=str(tmp_path / 'log')) as proc:
        assert spin_until(listener.executor, listener.enough, TIMEOUT), (
            {k: len(v) for k, v in listener.received.items()},
            (tmp_path / 'log').read_text())
        moving = _positions(listener, simulated=0.5)

        # Hold: f_S = 0 (seed 003 eq. 8), as the collision detector sends it; the arm comes
        # to rest within 1.5 s of simulated time.
        def hold():
            listener.scaling.publish(Float64(data=0.0))
        timer = listener.node.create_timer(0.02, hold)
        _positions(listener, simulated=1.5)
        held = _positions(listener, simulated=0.5)
        listener.node.destroy_timer(timer)
        assert proc.poll() is None, (tmp_path / 'log').read_text()

    base = robot.base_link
    r = listener.received
    _check_joint_states(r['joint_states'], robot)
    assert np.ptp(moving, axis=0).max() > 0.01          # it moves
    assert np.ptp(held, axis=0).max() < 0.2 * np.ptp(moving, axis=0).max()  # then holds

    for msg in r['ft_wrench']:
        assert msg.header.frame_id == base
    force, _ = wrench_to_arrays(r['ft_wrench'][0])
    assert -200.0 < force[2] < -100.0                   # about the arm's weight

    cloud = r['lidar_points'][-1]
    assert cloud.header.frame_id == base
    assert [(f.name, f.datatype) for f in cloud.fields] == [(n, 7) for n in 'xyz']  # FLOAT32
    points = cloud_to_xyz(cloud)
    on_box = np.abs(np.max(np.abs(points - BOX_CENTRE) / BOX_HALF, axis=1) - 1.0) < 0.2
    assert on_box.sum() > 20 and len(points) > on_box.sum() + 20  # the box, robot and floor

    for msg in r['true_contact_point']:
        assert msg.header.frame_id == 'panda_link5'
        np.testing.assert_allclose([msg.point.x, msg.point.y, msg.point.z], POINT, atol=1e-6)
    wrenches = r['true_contact_wrench']
    assert wrenches and all(w.header.frame_id == 'panda_link5' for w in wrenches)
    middle = wrenches[len(wrenches) // 2]              # past the ramp (0.05 s of 1 s)
    np.testing.assert_allclose(wrench_to_arrays(middle)[0], FORCE, atol=1e-6)

    truth = r['true_contact_torque']
    assert all(list(m.name) == robot.joint_names and len(m.effort) == robot.n for m in truth)
    assert np.abs(truth[-1].effort).max() > 1.0         # the push is felt
    assert truth[-1].header.stamp in [m.header.stamp for m in r['joint_states']]


def test_ground_truth_is_zero_outside_the_push_and_stamped_as_the_joint_state(context, tmp_path):
    from contact_estimation.nodes.sim_cobot import SimCobotNode
    scenario = tmp_path / 'scenario.yaml'
    scenario.write_text(yaml.safe_dump({**SCENARIO, 'forces': [
        {**SCENARIO['forces'][0], 'start': 0.3, 'duration': 0.5}]}))
    # 50 Hz and a deep reliable queue: nothing is lost even when the machine is busy.
    listener = Listener(context, qos=QoSProfile(depth=1000,
                                                reliability=ReliabilityPolicy.RELIABLE))
    node = SimCobotNode(context=context, parameter_overrides=[
        Parameter('scenario', value=str(scenario)), Parameter('publish_rate', value=50.0)])
    listener.executor.add_node(node)
    try:
        assert spin_until(listener.executor, lambda: node.sim.time > 1.2, TIMEOUT)
    finally:
        node.destroy_node()
    r = listener.received
    # Stamps: start time + simulated time, unless the node skipped time; steps are never lost.
    contact = {stamp_to_seconds(m.header.stamp) for m in r['true_contact_point']}
    assert 24 <= len(contact) <= 25                      # 0.5 s push, published every 20 ms
    assert contact == {stamp_to_seconds(m.header.stamp) for m in r['true_contact_wrench']}
    truth = {stamp_to_seconds(m.header.stamp): m.effort for m in r['true_contact_torque']}
    assert set(truth) == {stamp_to_seconds(m.header.stamp) for m in r['joint_states']}
    assert {t for t, effort in truth.items() if np.any(effort)} == contact
    assert len(truth) > len(contact) + 20                # zero before and after the push


def test_holds_when_the_time_scaling_stream_stops(context):
    """Before any f_S the sim plays at 1; once f_S has come, silence means hold (f_S = 0)."""
    from contact_estimation.nodes.sim_cobot import SimCobotNode
    listener = Listener(context)
    node = SimCobotNode(context=context, parameter_overrides=[
        Parameter('publish_rate', value=50.0), Parameter('time_scaling.timeout', value=0.5)])
    listener.executor.add_node(node)
    sent = []

    def simulate(seconds: float, done=lambda: True) -> None:
        """Spin until the sim has stepped `seconds` more of simulated time and `done()`."""
        until = node.sim.time + seconds
        assert spin_until(listener.executor, lambda: node.sim.time >= until and done(), TIMEOUT)

    def stream():
        listener.scaling.publish(Float64(data=0.8))
        sent.append(0.8)
    try:
        simulate(0.3)
        assert node.sim.scaler.scaling == 1.0 and node.problems.counts['time_scaling_timeout'] == 0
        timer = listener.node.create_timer(0.02, stream)
        assert spin_until(listener.executor, lambda: node.sim.scaler.scaling == 0.8, TIMEOUT)
        streamed = len(sent)
        simulate(1.0, done=lambda: len(sent) >= streamed + 50)  # 1 s at 50 Hz, 2 timeouts
        assert node.sim.scaler.scaling == 0.8  # a steady stream keeps it
        assert node.problems.counts['time_scaling_timeout'] == 0
        listener.node.destroy_timer(timer)     # the detector dies
        assert spin_until(listener.executor, lambda: node.sim.scaler.scaling == 0.0, TIMEOUT)
        assert node.problems.counts['time_scaling_timeout'] == 1
        held = node.sim.scaler.path_time
        simulate(0.3)
        assert node.sim.scaler.path_time == held
        listener.scaling.publish(Float64(data=1.0))  # it is back
        assert spin_until(listener.executor, lambda: node.sim.scaler.scaling == 1.0, TIMEOUT)
    finally:
        node.destroy_node()


def test_plays_the_smaller_of_time_scaling_and_proximity_speed_scale(context):
    """min(f_S, s); a yield (f_S < 0) slowed by s; an invalid s ignored."""
    from contact_estimation.nodes.sim_cobot import SimCobotNode
    listener = Listener(context)
    proximity = listener.node.create_publisher(Float64, SPEC.topic('proximity_speed_scale'),
                                               PIPELINE_QOS)
    node = SimCobotNode(context=context, parameter_overrides=[
        Parameter('publish_rate', value=50.0), Parameter('time_scaling.timeout', value=5.0)])
    listener.executor.add_node(node)

    def played(time_scaling: float, speed_scale: float) -> float:
        listener.scaling.publish(Float64(data=time_scaling))
        proximity.publish(Float64(data=speed_scale))
        return node.sim.scaler.scaling
    try:
        for f_s, s, expected in ((0.8, 0.3, 0.3), (0.2, 0.9, 0.2), (-0.5, 0.5, -0.25),
                                 (-0.5, 0.0, 0.0), (1.0, 0.6, 0.6)):
            assert spin_until(listener.executor, lambda: played(f_s, s) == expected, TIMEOUT), \
                (f_s, s, node.sim.scaler.scaling)
        assert spin_until(listener.executor, lambda: played(1.0, float('nan')) == 0.6
                          and node.problems.counts['bad_proximity_speed_scale'], TIMEOUT)
    finally:
        node.destroy_node()


def test_node_plays_a_real_industrial_driver_with_a_tool(context, robot):
    """~140 Hz joint states with 4-10 ms steps, a few out of order, effort from motor current
    on its ADC grid; a 5 kg tool the F/T sensor weighs (issue 11)."""
    from contact_estimation.nodes.sim_cobot import SimCobotNode
    listener = Listener(context, qos=QoSProfile(depth=1000,
                                                reliability=ReliabilityPolicy.RELIABLE))
    k_m, gear, step = 0.1, 100.0, 0.01   # N·m/A, motor turns per joint turn, A
    node = SimCobotNode(context=context, parameter_overrides=[
        Parameter('publish_rate', value=140.0), Parameter('driver.period_jitter', value=0.003),
        Parameter('driver.reorder_probability', value=0.1),
        Parameter('driver.effort', value='motor_current'),
        Parameter('driver.torque_constants', value=[k_m]),
        Parameter('driver.gear_ratios', value=[gear]),
        Parameter('driver.current_resolution', value=step),
        Parameter('payload.mass', value=5.0),
        Parameter('payload.centre_of_mass', value=[0.0, 0.0, 0.1])])
    listener.executor.add_node(node)
    states = listener.received['joint_states']
    try:
        assert spin_until(listener.executor, lambda: len(states) >= 300, TIMEOUT)
    finally:
        node.destroy_node()
    _check_joint_states_content(states, robot)
    stamps = np.array([stamp_to_seconds(m.header.stamp) for m in states])
    late = np.flatnonzero(np.diff(stamps) < 0) + 1
    assert 5 <= len(late) <= 60                          # about 1 in 11 arrives late
    steps = np.diff(np.sort(stamps))
    # Simulated time: 4-10 physics steps apart, unless the node skipped time (reported).
    regular = steps[steps < 0.0105] if node.problems.counts['fell_behind'] else steps
    assert np.all(regular > 0.0035) and np.all(regular < 0.0105)
    assert len(set(np.round(regular * 1e3))) >= 5        # irregular, not a fixed rate
    currents = np.array([m.effort for m in states]) / (gear * k_m * step)
    np.testing.assert_allclose(currents, np.round(currents), atol=1e-6)
    forces = np.array([wrench_to_arrays(m)[0] for m in listener.received['ft_wrench']])
    weight = 9.81 * (sum(i.mass for i in robot.model.inertias) + 5.0)
    assert np.median(forces[:, 2]) == pytest.approx(-weight, abs=10.0)


def _positions(listener: Listener, simulated: float) -> np.ndarray:
    """Joint positions of the next joint states that span at least `simulated` seconds of
    simulated time: one each 1/PUBLISH_RATE (a message lost on the way only lengthens it)."""
    states, count = listener.received['joint_states'], round(simulated * PUBLISH_RATE)
    first = len(states)
    assert spin_until(listener.executor, lambda: len(states) >= first + count, TIMEOUT)
    return np.array([m.position for m in states[first:first + count]])


def _check_joint_states(messages, robot) -> None:
    _check_joint_states_content(messages, robot)
    stamps = np.array([stamp_to_seconds(m.header.stamp) for m in messages])
    steps = np.diff(stamps)
    # Simulated time: one message every 1/publish_rate, unless the node skipped time.
    assert np.all(steps > 0)
    assert np.median(steps) == pytest.approx(1.0 / PUBLISH_RATE, abs=1e-6)


def _check_joint_states_content(messages, robot) -> None:
    for msg in messages:
        assert list(msg.name) == robot.joint_names
        assert len(msg.position) == len(msg.velocity) == len(msg.effort) == robot.n
        assert msg.header.frame_id == robot.base_link
    q = np.array([m.position for m in messages])
    effort = np.array([m.effort for m in messages])
    lower, upper = robot.position_limits
    assert np.all(q > lower) and np.all(q < upper) and np.all(np.isfinite(effort))
    assert np.abs(effort).max() > 5.0                   # gravity is carried


@pytest.mark.parametrize('overrides, message', [
    ({'scenario': '/nonexistent/scenario.yaml'}, 'No such file'),
    ({'scenario': 'config/scenarios/demo.yaml', 'robot': 'ur5'}, "written for robot 'panda'"),
    ({'publish_rate': 300.0}, 'must divide rate'),
    ({'friction': [0.1, 1.0]}, re.escape('friction = [0.1, 1.0]: 2 values, but panda has 7 '
                                         'joints: give 6, or 42 (6 per joint')),
    ({'friction': [-0.1] * 6}, re.escape('friction = [-0.1, -0.1, -0.1, -0.1, -0.1, -0.1]: '
                                         '-0.1, -0.1, -0.1 outside 0 … 10000')),
    ({'driver.effort': 'current'},
     "driver.effort = 'current': 'current' is not one of joint_torque, motor_current"),
    ({'driver.effort': 'motor_current', 'driver.gear_ratios': [100.0, 50.0]},
     re.escape('driver.gear_ratios = [100.0, 50.0]: 2 values, but panda has 7 joints: give '
               '1, or 7')),
    ({'driver.torque_constants': [1e308]}, re.escape('driver.torque_constants = [1e+308]: '
                                                     '1e+308 outside 0.0001 … 1000')),
    ({'publish_rate': 300.0, 'driver.period_jitter': 0.004}, 'shorter than one physics step'),
    ({'payload.link': 'nowhere'}, "payload.link = 'nowhere': not a link the joints of panda "
                                  'move'),
    ({'payload.centre_of_mass': [0.0]}, re.escape('payload.centre_of_mass = [0.0]: 1 value, '
                                                  'but it takes exactly 3')),
    ({'lidar.rpy': [0.0, 0.35]}, re.escape('lidar.rpy = [0.0, 0.35]: 2 values, but it takes '
                                           'exactly 3')),
    ({'lidar.position': [1.5, 0.0, 1e308]}, re.escape('lidar.position = [1.5, 0.0, 1e+308]: '
                                                      '1e+308 outside -100 … 100')),
    ({'trajectory.durations': [0.0]}, re.escape('trajectory.durations = [0.0]: 0.0 outside '
                                                '0.001 … 3600')),
])
def test_node_refuses_bad_parameters_with_a_clear_message(context, overrides, message):
    from contact_estimation.nodes.sim_cobot import SimCobotNode
    params = [Parameter(name, value=value) for name, value in overrides.items()]
    with pytest.raises(StartupError, match=message):
        SimCobotNode(context=context, parameter_overrides=params)


def test_relative_scenario_path_is_resolved_in_the_share_directory(context):
    from contact_estimation.nodes.sim_cobot import SimCobotNode
    node = SimCobotNode(context=context, parameter_overrides=[
        Parameter('scenario', value='config/scenarios/demo.yaml')])
    try:
        assert node.sim.scenario.forces[0].link == 'panda_link5'
        assert [o.name for o in node.sim.scenario.obstacles] == ['box']
    finally:
        node.destroy_node()


def test_the_identification_sweeps_run_from_the_parameters(context):
    from contact_estimation.core.identification.excitation import SweepTrajectory
    from contact_estimation.nodes.sim_cobot import SimCobotNode
    node = SimCobotNode(context=context, parameter_overrides=[
        Parameter('trajectory.type', value='sweeps')])
    try:
        assert isinstance(node.sim.scaler.trajectory, SweepTrajectory)
        assert node.sim.scaler.trajectory.duration > 60.0
    finally:
        node.destroy_node()


def test_with_publish_clock_it_is_the_graphs_clock_and_waits_for_the_listener(context):
    """/clock carries the simulated time; the sim starts once a listener subscribes and steps
    at most lockstep.lead beyond the newest sample the listener has taken: it waits for a
    suite that falls behind instead of leaving gaps in its stamps."""
    from diagnostic_msgs.msg import DiagnosticArray
    from rosgraph_msgs.msg import Clock

    from contact_estimation.nodes.sim_cobot import SimCobotNode
    lead = 0.05
    listener = Listener(context)
    clocks, reports = [], []  # reports: the sim's simulated time in each of its load reports
    listener.node.create_subscription(Clock, '/clock',
                                      lambda m: clocks.append(stamp_to_seconds(m.clock)),
                                      SENSOR_QOS)
    listener.node.create_subscription(DiagnosticArray, '/diagnostics', lambda m: reports.extend(
        float(v.value) for status in m.status for v in status.values
        if v.key == 'simulated_time'), 10)
    taken = listener.node.create_publisher(JointState, SPEC.topic('lockstep'), PIPELINE_QOS)
    node = SimCobotNode(context=context, parameter_overrides=[
        Parameter('publish_rate', value=PUBLISH_RATE), Parameter('publish_clock', value=True),
        Parameter('lockstep.lead', value=lead), Parameter('lockstep.timeout', value=60.0)])
    listener.executor.add_node(node)
    states = listener.received['joint_states']

    def stamps() -> np.ndarray:
        return np.array([stamp_to_seconds(m.header.stamp) for m in states])

    def holds(taken: float) -> None:
        """The sim runs to `lead` beyond the sample `taken` (its stamp), then waits: two of
        its own load reports in a row (/diagnostics, once a wall-clock second) give the same
        simulated time, and no sample went beyond the lead."""
        assert spin_until(listener.executor,
                          lambda: stamps()[-1] >= taken + lead - 1.0 / PUBLISH_RATE, TIMEOUT)
        first = len(reports)
        assert spin_until(listener.executor, lambda: (
            len(reports) >= first + 2 and reports[-1] == reports[-2]), TIMEOUT), (
            f'the sim did not wait for the listener: simulated time {reports[first:]}')
        assert stamps()[-1] <= taken + lead + 1e-6
    try:
        # Nothing taken yet: it sends `lead` of samples and waits.
        assert spin_until(listener.executor, lambda: len(states) > 0, TIMEOUT)
        holds(stamps()[0])
        # The listener takes each sample it gets: the sim goes on, with no gap.
        while len(states) < 100:
            taken.publish(states[-1])
            assert spin_until(listener.executor, lambda n=len(states): len(states) > n,
                              TIMEOUT)
        assert np.allclose(np.diff(stamps()), 1.0 / PUBLISH_RATE, atol=1e-6)  # no gap
        assert clocks and np.all(np.diff(clocks) >= 0)
        # /clock never ahead of the samples: once the sim holds, the last sample it sent
        # (in flight on another topic when its /clock arrived) catches up with /clock.
        assert spin_until(listener.executor, lambda: clocks[-1] <= stamps()[-1] + 1e-6,
                          TIMEOUT), f'/clock {clocks[-1]} ahead of the samples {stamps()[-1]}'
        # It stops taking: the sim waits within `lead` of the last sample taken.
        taken.publish(states[-1])
        holds(stamps()[-1])
    finally:
        node.destroy_node()


def test_the_clock_ticks_every_clock_period_however_many_steps_a_call_takes(context):
    """Issue 37: a simulation slower than real time steps a batch of up to max_catch_up per
    timer call; /clock still advances by at most CLOCK_PERIOD at a time, so no node sees the
    clock a batch behind its newest samples or a batch ahead of its oldest (the detector took
    that spread for a paused input). Here every call is a 50-step batch (timer_period 50 ms)."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock

    from contact_estimation.nodes.sim_cobot import CLOCK_PERIOD, SimCobotNode
    listener = Listener(context)
    clocks = []
    listener.node.create_subscription(
        Clock, '/clock', lambda m: clocks.append(stamp_to_seconds(m.clock)),
        QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
    node = SimCobotNode(context=context, parameter_overrides=[
        Parameter('publish_rate', value=PUBLISH_RATE), Parameter('publish_clock', value=True),
        Parameter('lockstep.lead', value=0.0), Parameter('timer_period', value=0.05)])
    listener.executor.add_node(node)
    states = listener.received['joint_states']
    try:
        assert spin_until(listener.executor, lambda: len(clocks) > 50 and len(states) > 50,
                          TIMEOUT)
        steps = np.diff(clocks)
        assert np.all(steps >= 0.0)
        assert steps.max() <= CLOCK_PERIOD + 1e-6, (
            f'/clock stepped {steps.max() * 1e3:.1f} ms at once (CLOCK_PERIOD '
            f'{CLOCK_PERIOD * 1e3:g} ms)')
    finally:
        node.destroy_node()


def test_with_speed_inputs_the_arm_waits_for_the_suites_reaction_signals(context):
    """`lockstep.speed_inputs` (up --sim, the demo): the simulation starts once f_S and the
    proximity speed scale have publishers, and the arm holds until each has sent its first
    value. A proximity process that started late stopped an arm already moving, and the
    jolt was taken for a collision (demo_runs, 2026-11-28)."""
    from contact_estimation.nodes.sim_cobot import SimCobotNode
    listener = Listener(context)  # publishes f_S: one speed input has a publisher
    taken = listener.node.create_publisher(JointState, SPEC.topic('lockstep'), PIPELINE_QOS)
    node = SimCobotNode(context=context, parameter_overrides=[
        Parameter('publish_rate', value=PUBLISH_RATE), Parameter('publish_clock', value=True),
        Parameter('lockstep.lead', value=0.05), Parameter('lockstep.timeout', value=60.0),
        Parameter('lockstep.speed_inputs', value=True)])
    listener.executor.add_node(node)
    states = listener.received['joint_states']
    proximity = None

    def take_until(condition, f_s=None) -> bool:
        """Take every sample (the lockstep goes on), sending the speed inputs given."""
        def step():
            if states:
                taken.publish(states[-1])
            if f_s is not None:
                listener.scaling.publish(Float64(data=f_s))
                proximity.publish(Float64(data=1.0))
            return condition()
        return spin_until(listener.executor, step, TIMEOUT)
    try:
        spin_until(listener.executor, lambda: False, 1.0)
        assert not states, 'the simulation started before the proximity scale had a publisher'
        proximity = listener.node.create_publisher(
            Float64, SPEC.topic('proximity_speed_scale'), PIPELINE_QOS)
        assert take_until(lambda: len(states) > 50)
        assert node.sim.scaler.path_time == 0.0  # no value yet: the arm holds
        assert take_until(lambda: node.sim.scaler.path_time > 0.05, f_s=1.0)
    finally:
        node.destroy_node()
