"""Every node's parameter table (ros/params.py) is what it declares, what config/ ships and
what docs/parameters.md shows."""
import array
import os

import pytest
import yaml

from contact_estimation import manifest
from contact_estimation.commands.parameters import markdown, node_class
from contact_estimation.ros.node_main import StartupError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Parameters rclpy declares on every node itself.
_RCLPY_PARAMETERS = {'use_sim_time', 'start_type_description_service'}


def _flat(tree: dict, prefix: str = '') -> dict:
    """Nested YAML parameters → {'a.b': value}, as ROS names them."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f'{prefix}{key}.'))
        else:
            flat[prefix + key] = value
    return flat


@pytest.mark.parametrize('name', sorted(manifest.nodes()))
def test_the_shipped_parameter_file_sets_parameters_of_the_table_at_their_defaults(name):
    """config/<node>.yaml is the user's starting point: what it sets is the table's default.
    A new parameter is one row of the table (docs/parameters.md lists every one); the file
    need not repeat it."""
    spec = manifest.node(name)
    with open(spec.parameters_path()) as f:
        shipped = _flat(yaml.safe_load(f)[name]['ros__parameters'])
    table = node_class(name).PARAMETERS
    assert set(shipped) <= set(table.names), name
    for parameter, value in shipped.items():
        assert value == table[parameter].default, \
            f'{name}: {parameter} ships {value!r}, the table says {table[parameter].default!r}'


@pytest.mark.parametrize('name', sorted(manifest.nodes()))
def test_a_node_declares_its_table_and_nothing_else(context, name):
    node = node_class(name)(context=context)  # no parameter file: the declared defaults
    try:
        declared = {n: node.get_parameter(n).value
                    for n in node._parameters if n not in _RCLPY_PARAMETERS}
    finally:
        node.destroy_node()
    table = node_class(name).PARAMETERS
    assert set(declared) == set(table.names)
    for parameter, value in declared.items():
        assert (list(value) if isinstance(value, (list, tuple, array.array)) else value) \
            == table[parameter].default, parameter


def test_docs_parameters_md_is_the_tables_as_generated():
    path = os.path.join(ROOT, 'docs', 'parameters.md')
    with open(path, encoding='utf-8') as f:
        assert f.read() == markdown(sorted(manifest.nodes())), \
            'run: contact-estimation parameters --write docs/parameters.md'


@pytest.mark.parametrize('name', sorted(manifest.nodes()))
def test_every_node_starts_with_its_shipped_parameter_file(context, name):
    """No parameter of config/<node>.yaml is unknown to the node (it would be refused)."""
    spec = manifest.node(name)
    node = node_class(name)(context=context,
                             cli_args=['--ros-args', '--params-file', spec.parameters_path()])
    try:
        assert node.unknown_parameters() == []
    finally:
        node.destroy_node()


@pytest.mark.parametrize('name, renamed, new_name', [
    ('collision_detector', {'consecutive_samples': 25}, 'persistence_time'),
    ('collision_detector', {'acceleration_window': 20}, 'acceleration_filter.window_duration'),
    ('ft_contact_estimator', {'acceleration_window': 0.04},
     'acceleration_filter.window_duration'),
    ('ft_contact_estimator', {'sensor': {'orientation_rpy': [0.0, 0.0, 0.0]}}, 'sensor.rpy'),
    ('contact_localizer', {'lidar': {'orientation': [0.0, 0.0, 0.0, 1.0]}}, 'lidar.rpy'),
    ('joint_state_listener', {'velocity_filter': {'window': 20}},
     'velocity_filter.window_duration'),
    ('residual_node', {'wrist_wrench_timeout': 0.1}, 'wrist_wrench.timeout'),
    ('residual_node', {'wrist_link': 'panda_link8'}, 'wrist_wrench.link'),
    ('proximity_monitor', {'lidar': {'orientation': [0.0, 0.0, 0.0, 1.0]}}, 'lidar.rpy'),
    ('sim_cobot', {'time_scaling_timeout': 0.5}, 'time_scaling.timeout')])
def test_a_parameter_the_node_does_not_have_refuses_the_start(context, tmp_path, name,
                                                              renamed, new_name):
    """rclpy keeps a value for an undeclared name without complaint: a user's old parameter
    file would do nothing while they believe it is in force."""
    path = tmp_path / 'old.yaml'
    path.write_text(yaml.safe_dump({name: {'ros__parameters': {
        **renamed, 'threshold_of_everything': 3.0, 'robot': 'panda'}}}))
    with pytest.raises(StartupError) as refused:
        node_class(name)(context=context,
                                         cli_args=['--ros-args', '--params-file', str(path)])
    message = str(refused.value)
    old_name = next(iter(_flat(renamed)))
    assert f'{old_name} (renamed: now {new_name})' in message
    listed = message.split('would do nothing: ')[1].split(' (`ros2')[0].split('; ')
    # robot is declared by every node: not listed.
    assert [entry.split(' ')[0] for entry in listed] == sorted([old_name,
                                                                'threshold_of_everything'])
