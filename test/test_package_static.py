"""Static checks of the ament_python package: launch file, manifest, setup.py, package.xml.

launch and launch_ros are not installable here, so the launch file is executed against
minimal stand-ins for the four launch classes it uses; what it asks to start is then
checked against setup.py's console scripts and the files on disk.
"""
import ast
import importlib
import importlib.util
import os
import sys
import types
import xml.etree.ElementTree as ET

import pytest
import yaml

from contact_estimation import manifest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration:
    values = {}

    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return self.values[self.name]


def _launch_stand_ins() -> dict:
    launch = types.ModuleType('launch')
    launch.LaunchDescription = lambda actions: list(actions)
    actions = types.ModuleType('launch.actions')
    actions.DeclareLaunchArgument = _Recorder
    actions.OpaqueFunction = _Recorder
    substitutions = types.ModuleType('launch.substitutions')
    substitutions.LaunchConfiguration = _LaunchConfiguration
    launch_ros = types.ModuleType('launch_ros')
    launch_ros_actions = types.ModuleType('launch_ros.actions')
    launch_ros_actions.Node = _Recorder
    return {'launch': launch, 'launch.actions': actions, 'launch.substitutions': substitutions,
            'launch_ros': launch_ros, 'launch_ros.actions': launch_ros_actions}


def _launched_nodes(sim: str, params_file: str) -> list[dict]:
    path = os.path.join(ROOT, 'launch', 'contact_estimation.launch.py')
    saved = {k: sys.modules.get(k) for k in _launch_stand_ins()}
    sys.modules.update(_launch_stand_ins())
    try:
        spec = importlib.util.spec_from_file_location('launch_under_test', path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        description = module.generate_launch_description()
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
    _LaunchConfiguration.values = {'sim': sim, 'params_file': params_file}
    declared = {a.args[0] for a in description if a.args}
    assert declared == {'sim', 'params_file'}
    opaque = [a for a in description if 'function' in a.kwargs]
    return [node.kwargs for a in opaque for node in a.kwargs['function'](None)]


def _console_scripts() -> set[str]:
    tree = ast.parse(open(os.path.join(ROOT, 'setup.py')).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.targets[0].id == 'NODE_SCRIPTS':
            return set(ast.literal_eval(node.value))
    raise AssertionError('setup.py has no NODE_SCRIPTS')


@pytest.mark.parametrize('sim', ['true', 'false'])
def test_launch_starts_console_scripts_with_existing_parameter_files(sim):
    launched = _launched_nodes(sim, '')
    scripts = _console_scripts()
    assert launched, 'the launch file starts no node'
    for node in launched:
        assert node['package'] == 'contact_estimation'
        assert node['executable'] in scripts, f'{node["executable"]} is not a console script'
        for params in node['parameters']:
            assert os.path.isfile(params), f'{node["name"]}: {params} does not exist'
            with open(params) as f:
                assert 'ros__parameters' in yaml.safe_load(f)[node['name']]
    names = {n['name'] for n in launched}
    assert ('sim_cobot' in names) == (sim == 'true')
    assert names >= {'joint_state_listener', 'residual_node', 'collision_detector'}


def test_launch_passes_the_user_parameter_file_after_the_defaults():
    for node in _launched_nodes('false', '/tmp/user.yaml'):
        assert node['parameters'][-1] == '/tmp/user.yaml'
        assert len(node['parameters']) == 2


def test_launch_and_runner_start_the_same_nodes():
    from contact_estimation.launcher import node_command
    for sim in (True, False):
        launched = {n['name'] for n in _launched_nodes(str(sim).lower(), '')}
        assert launched == {s.name for s in manifest.selected(sim)}
    for spec in manifest.nodes().values():
        cmd = node_command(spec.name)
        assert cmd[cmd.index('--params-file') + 1] == spec.parameters_path()


def test_every_manifest_node_has_a_module_with_main_and_declared_topics():
    for spec in manifest.nodes().values():
        module = importlib.import_module(spec.module)
        assert callable(module.main), spec.module
        for key in list(spec.publishes) + list(spec.subscribes):
            topic = spec.topic(key)
            package, kind, name = spec.message_type(key).split("/")
            assert hasattr(importlib.import_module(f"{package}.{kind}"), name)
            assert topic.startswith('/'), f'{spec.name}: topic {topic} is not absolute'


def test_setup_installs_share_files_that_exist():
    tree = ast.parse(open(os.path.join(ROOT, 'setup.py')).read())
    text = ast.unparse(tree)
    for folder in ('launch', 'config', 'urdf'):
        assert f"'share/' + PACKAGE + '/{folder}'" in text
    assert os.path.isfile(os.path.join(ROOT, 'resource', 'contact_estimation'))
    cfg = open(os.path.join(ROOT, 'setup.cfg')).read()
    assert 'script_dir=$base/lib/contact_estimation' in cfg
    assert 'install_scripts=$base/lib/contact_estimation' in cfg


def test_package_xml_is_format_3_and_names_message_dependencies():
    root = ET.parse(os.path.join(ROOT, 'package.xml')).getroot()
    assert root.get('format') == '3'
    assert root.findtext('name') == 'contact_estimation'
    deps = _package_xml_dependencies()
    for key in ('rclpy', 'sensor_msgs', 'geometry_msgs', 'std_msgs', 'std_srvs',
                'visualization_msgs', 'diagnostic_msgs', 'launch', 'launch_ros', 'pinocchio',
                'python3-numpy', 'python3-scipy', 'python3-yaml'):
        assert key in deps, f'package.xml lacks {key}'
    assert root.find('export/build_type').text == 'ament_python'


# rosdep stops at the first key it cannot resolve. Keys that install from pip exist only
# for some packages: list one here only after finding it in rosdistro's rosdep/python.yaml.
PIP_KEYS_IN_ROSDEP = {'python3-open3d-pip'}


def _package_xml_dependencies() -> set[str]:
    root = ET.parse(os.path.join(ROOT, 'package.xml')).getroot()
    return {e.text for e in root if e.tag.endswith('depend')}


def test_package_xml_declares_every_interface_package_the_code_imports():
    imported = set()
    for folder, _, files in os.walk(os.path.join(ROOT, 'contact_estimation')):
        for name in files:
            if name.endswith('.py'):
                tree = ast.parse(open(os.path.join(folder, name), encoding='utf-8').read())
                imported |= {node.module.split('.')[0] for node in ast.walk(tree)
                             if isinstance(node, ast.ImportFrom) and node.module
                             and node.module.split('.')[-1] in ('msg', 'srv', 'action')}
    assert imported >= {'sensor_msgs', 'rcl_interfaces'}
    assert imported <= _package_xml_dependencies()


def test_package_xml_pip_keys_are_known_to_rosdep():
    assert {d for d in _package_xml_dependencies() if d.endswith('-pip')} <= PIP_KEYS_IN_ROSDEP


def test_topics_shared_between_nodes_agree_on_their_message_type():
    types = {}
    for spec in manifest.nodes().values():
        for key in list(spec.publishes) + list(spec.subscribes):
            topic, kind = spec.topic(key), spec.message_type(key)
            assert types.setdefault(topic, kind) == kind, f'{topic}: {types[topic]} vs {kind}'
