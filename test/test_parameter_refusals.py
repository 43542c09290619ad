"""Parameters all or nothing, and no value that switches a safety function off (issue 19):
a refused set changes nothing inside the node; 1e308 thresholds, gains and gates, a 1e308
observer gain and negative gear ratios are refused unless a ceiling is raised explicitly.

Every row's rule holds at run time as at start (issue 36): over the set_parameters service
(`ros2 param set`'s way, arrays arriving as array.array), every writable parameter of every
node refuses out-of-range numbers, NaN, ±inf, 100 000 values, a wrong count and a link or
frame the robot model does not allow, naming them, and keeps its value; every row of every
table, read-only ones too, refuses them in the one check a start runs."""
import math
import os

import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter

from contact_estimation import manifest
from contact_estimation.commands.parameters import node_class
from contact_estimation.core.settings import LINK, SENSOR_FRAME
from contact_estimation.nodes.collision_detector import CollisionDetectorNode
from contact_estimation.nodes.contact_localizer import ContactLocalizerNode
from contact_estimation.nodes.joint_state_listener import JointStateListenerNode
from contact_estimation.nodes.proximity_monitor import ProximityMonitorNode
from contact_estimation.nodes.residual_node import ResidualNode
from contact_estimation.ros.node_main import StartupError
from contact_estimation.ros.params import MAX_VALUES, ROBOT
from contact_estimation.ros.testing import set_remotely, spinning

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config')
NAN, INF = math.nan, math.inf
TOO_MANY = 100_000


def make(node_class, name, context):
    return node_class(context=context, cli_args=[
        '--ros-args', '--params-file', os.path.join(CONFIG, f'{name}.yaml')])


def refused(node, **values) -> bool:
    """Set `values` at once (atomically); True when the node refused them."""
    return not node.set_parameters_atomically(
        [Parameter(k, value=v) for k, v in values.items()]).successful


@pytest.mark.parametrize('good', [{'reaction_time': 2.0}, {'body_timeout': 5.0}])
def test_a_refused_set_changes_nothing_in_the_proximity_monitor(context, good):
    monitor = make(ProximityMonitorNode, 'proximity_monitor', context)
    try:
        before = monitor.monitor.config
        assert refused(monitor, **good, **{'lidar.rpy': [0.0, 0.0, 0.0, 0.0]})
        assert monitor.monitor.config is before
        name, value = next(iter(good.items()))
        assert monitor.value(name) != value
        assert not refused(monitor, **good)  # alone it is fine, and taken
        assert getattr(monitor.monitor.config, name) > getattr(before, name)
    finally:
        monitor.destroy_node()


@pytest.mark.parametrize('name', ['thresholds_position', 'thresholds_force', 'threshold_max',
                                  'speed_gain', 'acceleration_gain'])
def test_detector_values_that_switch_detection_off_are_refused_unless_the_ceiling_is_raised(
        context, name):
    detector = make(CollisionDetectorNode, 'collision_detector', context)
    try:
        before = detector.detector.config
        assert refused(detector, **{name: [1e308]})
        assert detector.detector.config is before
        assert refused(detector, **{name: [150.0]})
        values = {name: [150.0], 'threshold_ceiling': 200.0}
        if name.startswith('thresholds'):
            values['threshold_max'] = [150.0]
        assert not refused(detector, **values)
    finally:
        detector.destroy_node()


@pytest.mark.parametrize('node_class, name, values', [
    (ContactLocalizerNode, 'contact_localizer', {'gate_thresholds': [1e308]}),
    (ResidualNode, 'residual_node', {'observer_gain': [1e308]}),
    (JointStateListenerNode, 'joint_state_listener', {'gear_ratios': [-100.0]}),
    (JointStateListenerNode, 'joint_state_listener', {'torque_constants': [-0.1]})])
def test_values_that_defeat_estimation_are_refused(context, node_class, name, values):
    node = make(node_class, name, context)
    try:
        assert refused(node, **values)
        key, value = next(iter(values.items()))
        assert node.value(key) != value
    finally:
        node.destroy_node()


# Every node with more than the robot's parameters (strings with no rule to break), and
# those of them with parameters a user may set at run time (the read-only rows of the others
# are checked at start: `test_every_row_refuses_...`, `test_a_start_refuses_...`).
TABLED = [name for name in sorted(manifest.nodes())
          if node_class(name).PARAMETERS.names != ROBOT.names]
WRITABLE = [name for name in TABLED
            if not all(row.read_only for row in node_class(name).PARAMETERS.rows)]


# What `ros2 param set` got accepted (issue 36), with what the refusal must say it allows.
ISSUE_36 = {
    'joint_state_listener': [('torque_constants', [1e308], '0.0001 … 1000'),
                             ('gear_ratios', [1e308], '0.001 … 100000')],
    'collision_detector': [
        *(('touch.max_torque', value, '0.01 … 10000') for value in ([NAN], [-1.0], [INF])),
        ('touch.max_torque', [30.0] * TOO_MANY, 'give 1, or 7'),
        *(('touch.reference_torque', value, '0.01 … 1000')
          for value in ([1e308], [-1.0], [NAN], [INF]))],
    'residual_node': [('payload.centre_of_mass', [1e308, 0.0, 0.0], '-10 … 10'),
                      ('payload.link', 'nonsense', 'one of panda_link1'),
                      ('wrist_wrench.link', 'panda_link0', 'one of panda_link1')],
    'contact_localizer': [('lidar.frame', 'panda_link3', 'a frame the joints of panda move'),
                          ('lidar.frame', 'my lidar', 'not a frame name')],
    'proximity_monitor': [('lidar.frame', 'panda_hand', 'a frame the joints of panda move'),
                          ('skeleton.frame', 'panda_link5', 'a frame the joints of panda '
                                                            'move')],
}


@pytest.fixture
def suite(context):
    """The nodes with writable parameters at their shipped files, and a probe that sets
    their parameters over the set_parameters service, on one executor."""
    nodes = {name: make(node_class(name), name, context) for name in WRITABLE}
    probe = Node('parameter_probe', context=context)
    with spinning(context, *nodes.values(), probe) as executor:
        yield nodes, probe, executor


def values_of(node) -> dict:
    return {name: node.value(name) for name in node.PARAMETERS.names}


def test_what_issue_36_set_at_run_time_is_refused_naming_it_and_nothing_changes(suite):
    nodes, probe, executor = suite
    for name, cases in ISSUE_36.items():
        before = values_of(nodes[name])
        results = set_remotely(probe, executor, name, [(p, v) for p, v, _ in cases])
        for (parameter, value, allowed), result in zip(cases, results, strict=True):
            shown = str(value)[:20]
            assert not result.successful, f'{name}: {parameter} = {shown} accepted'
            assert parameter in result.reason and allowed in result.reason, result.reason
        assert values_of(nodes[name]) == before, name


def bad_values(row, robot) -> list:
    """Values `row` must refuse on `robot`: numbers out of its range, NaN and ±inf (each
    element of an array, at a count it takes), 100 000 values, a count it does not take, a
    link or frame the model does not allow, a string not among its choices."""
    listed = isinstance(row.default, list)
    sample = row.default[0] if listed else row.default
    if isinstance(sample, bool):
        return []
    if isinstance(sample, str):
        bad = (['not one of them'] if row.choices is not None else
               {LINK: ['nowhere', robot.base_link], SENSOR_FRAME: [robot.tip_link, 'a b'],
                '': []}[row.names])
    elif isinstance(sample, int):
        bad = [row.range[0] - 1, row.range[1] + 1]
    else:
        low, high = row.range
        bad = [low - 1.0 - abs(low), high + 1.0 + abs(high), 1e308, -1e308, NAN, INF, -INF]
    if not listed:
        return bad
    taken = row.size or row.per_joint or len(row.default)
    counts = [TOO_MANY] + ([row.size + 1] if row.size else []) + (
        [row.per_joint * robot.n + 1] if row.per_joint else [])
    return [[x] * taken for x in bad] + [[sample] * count for count in counts]


def says_what_it_allows(row, problem: str) -> bool:
    """Whether a refusal of `row` names the parameter and what it allows."""
    rules = [row.allowed.replace('`', '').removesuffix(' each'), 'values, but', 'not a frame name',
             'a frame the joints', 'not a link']
    return row.name in problem and any(rule and rule in problem for rule in rules)




@pytest.mark.parametrize('name', TABLED)
def test_every_row_refuses_what_breaks_it_in_the_one_check_of_start_and_run_time(name, robot):
    table = node_class(name).PARAMETERS
    tried = 0
    for row in table.rows:
        for bad in bad_values(row, robot):
            problems = table.problems({row.name: bad}, robot)
            assert len(problems) == 1 and says_what_it_allows(row, problems[0]), \
                (row.name, str(bad)[:40], problems)
            tried += 1
    assert tried


@pytest.mark.parametrize('name', WRITABLE)
def test_every_writable_parameter_refuses_what_breaks_it_over_the_service_and_keeps_its_value(
        context, robot, name):
    node = make(node_class(name), name, context)
    with spinning(context, node, Node('parameter_probe', context=context)) as executor:
        probe = executor.get_nodes()[-1]
        before = values_of(node)
        tried = [(row.name, value) for row in node.PARAMETERS.rows if not row.read_only
                 for value in bad_values(row, robot)]
        for (parameter, value), result in zip(tried, set_remotely(probe, executor, name, tried),
                                              strict=True):
            assert not result.successful, f'{name}: {parameter} = {str(value)[:40]} accepted'
            assert parameter in result.reason, result.reason
            assert len(result.reason) < 2000, 'a refusal shows a long value cut short'
        assert tried and values_of(node) == before


@pytest.mark.parametrize('name', TABLED)
def test_a_start_refuses_every_array_that_breaks_its_row_naming_each(context, robot, name):
    """rclpy checks no array: every one of a node's arrays, 100 000 values each, in one
    parameter file is refused by the check its run-time sets get, naming each."""
    table = node_class(name).PARAMETERS
    arrays = {row.name: [row.default[0]] * TOO_MANY for row in table.rows
              if isinstance(row.default, list)}
    with pytest.raises(StartupError) as refused:
        node_class(name)(context=context, parameter_overrides=[
            Parameter(k, value=v) for k, v in arrays.items()])
    message = str(refused.value)
    assert message.startswith(f'{name}: ')
    for parameter in arrays:
        assert f'{parameter} = [' in message and f'{TOO_MANY} values, but' in message
    assert MAX_VALUES < TOO_MANY
