"""Static checks of the ament_python package: launch file, manifest, setup.py, package.xml.

launch and launch_ros are not installable here, so the launch file is executed against
minimal stand-ins for the launch classes it uses (and for the ament index it asks which
viewer packages are installed); what it asks to start is then
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
from contact_estimation.launcher import simulated_clock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A user's parameter file (the launch file reads the robot from every file it passes).
USER_FILE = os.path.join(ROOT, 'config', 'collision_detector.yaml')


class _Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _Registered(_Recorder):
    """RegisterEventHandler: what restarts a process (left out of `_launched` but asked)."""


class _LaunchConfiguration:
    values = {}

    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return self.values[self.name]


class _PackageNotFoundError(KeyError):
    pass


def _launch_stand_ins(installed: set[str]) -> dict:
    def share_directory(package):
        if package not in installed:
            raise _PackageNotFoundError(package)
        return f'/opt/ros/share/{package}'

    ament_index = types.ModuleType('ament_index_python')
    ament_packages = types.ModuleType('ament_index_python.packages')
    ament_packages.get_package_share_directory = share_directory
    ament_packages.PackageNotFoundError = _PackageNotFoundError
    launch = types.ModuleType('launch')
    launch.LaunchDescription = lambda actions: list(actions)
    actions = types.ModuleType('launch.actions')
    actions.DeclareLaunchArgument = _Recorder
    actions.OpaqueFunction = _Recorder
    actions.LogInfo = _Recorder
    actions.RegisterEventHandler = _Registered
    actions.TimerAction = _Recorder
    event_handlers = types.ModuleType('launch.event_handlers')
    event_handlers.OnProcessExit = _Recorder
    substitutions = types.ModuleType('launch.substitutions')
    substitutions.LaunchConfiguration = _LaunchConfiguration
    launch_ros = types.ModuleType('launch_ros')
    launch_ros_actions = types.ModuleType('launch_ros.actions')
    launch_ros_actions.Node = _Recorder
    return {'launch': launch, 'launch.actions': actions, 'launch.substitutions': substitutions,
            'launch.event_handlers': event_handlers,
            'launch_ros': launch_ros, 'launch_ros.actions': launch_ros_actions,
            'ament_index_python': ament_index, 'ament_index_python.packages': ament_packages}


def _launched(sim: str, params_file: str, rviz: str = 'false',
              installed: frozenset = frozenset(), separate: str = 'false',
              priority: str = '0', namespace: str = '', robot: str = '',
              handlers: bool = False) -> list[_Recorder]:
    """The actions the launch file's OpaqueFunctions return for these arguments, with
    `installed` the ROS packages the ament index knows; with `handlers`, only the event
    handlers (what restarts a process), else all but them."""
    path = os.path.join(ROOT, 'launch', 'contact_estimation.launch.py')
    stand_ins = _launch_stand_ins(set(installed))
    saved = {k: sys.modules.get(k) for k in stand_ins}
    sys.modules.update(stand_ins)
    try:
        spec = importlib.util.spec_from_file_location('launch_under_test', path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        description = module.generate_launch_description()
        _LaunchConfiguration.values = {'sim': sim, 'params_file': params_file, 'rviz': rviz,
                                       'separate': separate, 'priority': priority,
                                       'namespace': namespace, 'robot': robot,
                                       'robot_description': ''}
        declared = {a.args[0] for a in description if a.args}
        assert declared == set(_LaunchConfiguration.values)
        opaque = [a for a in description if 'function' in a.kwargs]
        return [action for a in opaque for action in a.kwargs['function'](None)
                if isinstance(action, _Registered) == handlers]
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value


def _launched_nodes(sim: str, params_file: str, separate: str = 'false',
                    robot: str = '') -> list[dict]:
    return [action.kwargs for action in _launched(sim, params_file, separate=separate,
                                                  robot=robot)]


def test_rviz_starts_rviz2_with_the_config_and_robot_state_publisher_with_the_urdf():
    launched = [a.kwargs for a in _launched(
        'false', '', rviz='true', installed=frozenset({'rviz2', 'robot_state_publisher'}))]
    viewers = {n['name']: n for n in launched if n['package'] != 'contact_estimation'}
    assert set(viewers) == {'rviz2', 'robot_state_publisher'}
    config = viewers['rviz2']['arguments'][viewers['rviz2']['arguments'].index('-d') + 1]
    assert config == manifest.share_path('rviz', 'contact_estimation.rviz')
    assert os.path.isfile(config)
    urdf = ET.fromstring(viewers['robot_state_publisher']['parameters'][0]['robot_description'])
    assert urdf.get('name') == 'panda'
    assert 'panda_joint7' in {j.get('name') for j in urdf.iter('joint')}


def test_rviz_without_the_viewer_packages_says_so_and_starts_the_nodes():
    launched = _launched('false', '', rviz='true', separate='true')
    messages = [a.kwargs['msg'] for a in launched if 'msg' in a.kwargs]
    assert any('rviz2 is not installed' in m for m in messages)
    assert any('robot_state_publisher is not installed' in m for m in messages)
    assert {a.kwargs['name'] for a in launched if 'name' in a.kwargs} == {
        s.name for s in manifest.processes(False, separate=True)}


def _rviz_topics(tree) -> set[str]:
    """Every topic an rviz config names (a display's `Topic` or `Description Topic`)."""
    found = set()
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key.endswith('Topic') and isinstance(value, dict):
                found.add(value['Value'])
            found |= _rviz_topics(value)
    elif isinstance(tree, list):
        for item in tree:
            found |= _rviz_topics(item)
    return found


def test_rviz_config_parses_and_names_only_topics_the_nodes_publish():
    with open(os.path.join(ROOT, 'rviz', 'contact_estimation.rviz')) as f:
        config = yaml.safe_load(f)
    topics = _rviz_topics(config)
    published = {spec.resolved_topic(key) for spec in manifest.nodes().values()
                 for key in spec.publishes}
    # robot_state_publisher (launch rviz:=true) publishes the robot model's description.
    assert topics - published == {'/robot_description'}
    assert {'/contact_estimate/markers', '/lidar/points'} <= topics
    displays = {d['Class'] for d in config['Visualization Manager']['Displays']}
    assert {'rviz_default_plugins/RobotModel', 'rviz_default_plugins/MarkerArray',
            'rviz_default_plugins/PointCloud2'} <= displays


def _console_scripts() -> set[str]:
    """setup.py's NODE_SCRIPTS and COMPOSED_SCRIPTS."""
    tree = ast.parse(open(os.path.join(ROOT, 'setup.py')).read())
    values = {node.targets[0].id: ast.literal_eval(node.value) for node in ast.walk(tree)
              if isinstance(node, ast.Assign) and node.targets[0].id in ('NODE_SCRIPTS',
                                                                          'COMPOSED_SCRIPTS')}
    assert len(values) == 2, 'setup.py lacks NODE_SCRIPTS or COMPOSED_SCRIPTS'
    return {*values['NODE_SCRIPTS'], *values['COMPOSED_SCRIPTS']}


@pytest.mark.parametrize('sim', ['true', 'false'])
def test_launch_starts_console_scripts_with_existing_parameter_files(sim):
    launched = _launched_nodes(sim, '', separate='true')
    scripts = _console_scripts()
    assert launched, 'the launch file starts no node'
    for node in launched:
        assert node['package'] == 'contact_estimation'
        assert node['executable'] in scripts, f'{node["executable"]} is not a console script'
        files = [p for p in node['parameters'] if isinstance(p, str)]
        assert files and all(isinstance(p, dict) for p in node['parameters'][len(files):])
        assert files[1] == manifest.robot_parameters_path()
        for params in files:
            assert os.path.isfile(params), f'{node["name"]}: {params} does not exist'
            with open(params) as f:
                section = '/**' if params == files[1] else node['name']
                assert 'ros__parameters' in yaml.safe_load(f)[section]
    names = {n['name'] for n in launched}
    assert ('sim_cobot' in names) == (sim == 'true')
    assert names >= {'joint_state_listener', 'residual_node', 'collision_detector'}


@pytest.mark.parametrize('sim', ['true', 'false'])
def test_launch_runs_the_composed_processes_by_default(sim):
    launched = _launched_nodes(sim, USER_FILE)
    for together in manifest.composed():
        assert together.executable in _console_scripts()
        [process] = [n for n in launched if n['executable'] == together.executable]
        assert 'name' not in process  # a name would rename every node of the process
        # Each node's own parameter file (its section, by node name), the suite's robot
        # (`/**`), then the user's; with the simulated cobot, every node on its clock and
        # the stopping nodes' max_lag (launcher.simulated_clock), each under its node's name
        # (a dict would set the detector's max_lag on the listener too).
        expected = [manifest.node(n).parameters_path() for n in together.nodes]
        files = process['parameters']
        assert files[:len(expected) + 2] == expected + [manifest.robot_parameters_path(),
                                                        USER_FILE]
        assert all(isinstance(f, str) for f in files)
        if sim == 'true':
            with open(files[-1]) as f:
                assert yaml.safe_load(f) == {n: {'ros__parameters': simulated_clock()[n]}
                                             for n in together.nodes}
        else:
            assert len(files) == len(expected) + 2
        for name, params in zip(together.nodes, process['parameters']):
            with open(params) as f:
                assert 'ros__parameters' in yaml.safe_load(f)[name]
    executables = {p.executable for p in manifest.composed()}
    others = {n['name'] for n in launched if n['executable'] not in executables}
    composed = set(manifest.composed_nodes())
    assert others.isdisjoint(composed)
    assert others | composed == {s.name for s in manifest.selected(sim == 'true')}


@pytest.mark.parametrize('separate', ['true', 'false'])
def test_launch_with_a_priority_runs_what_stops_under_chrt_and_nothing_else(separate):
    """The processes that raise a stop at the priority given and below (nodes.yaml
    `realtime`), the estimators and the simulator at normal priority; 0: none."""
    launched = [a.kwargs for a in _launched('true', '', separate=separate, priority='40')]
    expected = {}
    for process in manifest.composed():
        if process.realtime is not None:
            prefix = f'chrt -f {40 - process.realtime}'
            names = process.nodes if separate == 'true' else (process.executable,)
            expected.update({name: prefix for name in names})
    prioritised = {n.get('name', n['executable']): n['prefix'] for n in launched
                   if 'prefix' in n}
    assert prioritised == expected and 'chrt -f 40' in expected.values()
    assert all('prefix' not in a.kwargs for a in _launched('true', '', priority='0'))


def test_heartbeats_beat_above_the_suite_and_the_cloud_worker_below_every_stop():
    """Issue 36: a stop process (ros/stop_process.py) over every process of the suite (none
    keeps it from the CPU); the proximity monitor, whose work is bounded, above the chain,
    whose backlog is not (its interpreter lock is then never held by a thread the chain
    starves); its cloud worker below every process that raises a stop."""
    from contact_estimation.ros.stop_signal import heartbeat_steps, steps_below_stops
    priority = {p.key: 40 - p.realtime for p in manifest.composed() if p.realtime is not None}
    stopping = {p.key for p in manifest.stopping_processes()}
    assert stopping == {'chain', 'proximity'}
    assert priority['proximity'] > priority['chain'] > priority['estimation']
    for name in ('collision_detector', 'proximity_monitor'):
        process = manifest.process_of(name)
        assert priority[process.key] + heartbeat_steps(name) == max(priority.values()) + 1
    worker = priority['proximity'] - steps_below_stops('proximity_monitor')
    assert worker == min(priority[key] for key in stopping) - 1


def test_launch_in_a_namespace_moves_every_process_and_its_clock():
    launched = [a.kwargs for a in _launched('true', '', separate='true', namespace='left')]
    assert launched and all(n['namespace'] == 'left' for n in launched)
    assert all(n['remappings'] == [('/clock', '/left/clock')] for n in launched)
    sim = next(n for n in launched if n['name'] == 'sim_cobot')
    with open(sim['parameters'][-1]) as f:
        assert yaml.safe_load(f) == {'/left/sim_cobot': {'ros__parameters': {
            'publish_clock': True, 'lockstep.speed_inputs': True}}}
    # The parameter files name the nodes in the namespace: rcl would apply `sim_cobot:` to
    # /sim_cobot only, and the suite would run on its defaults without a word.
    with open(sim['parameters'][0]) as f:
        assert list(yaml.safe_load(f)) == ['/left/sim_cobot']
    with open(sim['parameters'][1]) as f:
        assert list(yaml.safe_load(f)) == ['/**']  # every node in every namespace


def test_launch_robot_argument_sets_every_node_s_robot_after_the_user_file():
    for node in _launched_nodes('true', USER_FILE, separate='true', robot='ur5'):
        *files, on_clock = node['parameters']  # the simulated clock's values come last
        assert files[-2] == USER_FILE
        with open(files[-1]) as f:
            assert yaml.safe_load(f) == {'/**': {'ros__parameters': {'robot': 'ur5'}}}
        with open(on_clock) as f:
            assert list(yaml.safe_load(f)) == [node['name']]


def test_launch_refuses_a_file_made_for_another_robot(tmp_path):
    made_for_ur5 = tmp_path / 'thresholds.yaml'
    made_for_ur5.write_text(yaml.safe_dump({'collision_detector': {'ros__parameters': {
        'robot': 'ur5', 'thresholds_position': [3.0] * 6}}}))
    with pytest.raises(ValueError, match="made for ur5 .*collision_detector.*suite's robot is "
                                         'panda'):
        _launched_nodes('false', str(made_for_ur5))
    assert _launched_nodes('false', str(made_for_ur5), robot='ur5')


def test_launch_passes_the_user_parameter_file_after_the_defaults():
    for node in _launched_nodes('false', USER_FILE, separate='true'):
        assert node['parameters'][-1] == USER_FILE
        assert node['parameters'][1] == manifest.robot_parameters_path()
        assert len(node['parameters']) == 3


def test_launch_and_runner_start_the_same_nodes():
    from contact_estimation.launcher import node_command
    for sim in (True, False):
        launched = {n['name'] for n in _launched_nodes(str(sim).lower(), '', separate='true')}
        assert launched == {s.name for s in manifest.processes(sim, separate=True)}
    for spec in manifest.nodes().values():
        cmd = node_command(spec.name)
        files = [cmd[i + 1] for i, a in enumerate(cmd) if a == '--params-file']
        assert files == [spec.parameters_path(), manifest.robot_parameters_path()]


def test_launch_restarts_a_process_that_dies_with_its_exit_code_until_it_keeps_dying():
    """Each process has an OnProcessExit handler: a death while the launch runs starts the
    same process again with the exit code in its environment (its stops come back latched:
    core/restart.py), at once, then after pauses; after three quick deaths, a message; at
    shutdown, nothing."""
    from contact_estimation.core.restart import RESTARTED_AFTER
    chain = manifest.process_of('collision_detector').name
    handlers = _launched('false', '', handlers=True)
    assert len(handlers) == len(manifest.processes(False, separate=False))
    on_exit = next(h.args[0].kwargs for h in handlers
                   if h.args[0].kwargs['target_action'].kwargs['executable'] == chain)
    first = on_exit['target_action'].kwargs
    assert RESTARTED_AFTER not in first['additional_env']  # the transport settings only

    def died(handler, shutting_down=False):
        event = types.SimpleNamespace(returncode=-9)
        return handler['on_exit'](event, types.SimpleNamespace(is_shutdown=shutting_down))

    assert died(on_exit, shutting_down=True) is None
    pauses = []
    for _ in range(2):
        message, timer = died(on_exit)
        assert 'killed by SIGKILL' in message.kwargs['msg']
        pauses.append(timer.kwargs['period'])
        node, handler = timer.kwargs['actions']
        assert node.kwargs['additional_env'] == {**first['additional_env'], RESTARTED_AFTER: '-9'}
        assert {k: v for k, v in node.kwargs.items() if k != 'additional_env'} == {
            k: v for k, v in first.items() if k != 'additional_env'}
        on_exit = handler.args[0].kwargs
    assert pauses == [0.0, 1.0]
    [message] = died(on_exit)
    assert 'not restarted' in message.kwargs['msg']


def test_every_manifest_node_has_a_module_with_main_and_declared_topics():
    for spec in manifest.nodes().values():
        module = importlib.import_module(spec.module)
        assert callable(module.main), spec.module
        for key in list(spec.publishes) + list(spec.subscribes):
            topic = spec.topic(key)
            package, kind, name = spec.message_type(key).split("/")
            assert hasattr(importlib.import_module(f"{package}.{kind}"), name)
            # Relative, so that a namespace moves it (two arms in one graph), but for the
            # global /diagnostics and /clock.
            assert topic.startswith('/') == (topic in ('/diagnostics', '/clock')), \
                f'{spec.name}: topic {topic}'
            assert spec.resolved_topic(key, 'left') in (f'/left/{topic}', topic)


def test_setup_installs_share_files_that_exist():
    tree = ast.parse(open(os.path.join(ROOT, 'setup.py')).read())
    text = ast.unparse(tree)
    for folder in ('launch', 'config', 'urdf', 'rviz'):
        assert f"'share/' + PACKAGE + '/{folder}'" in text
    assert os.path.isfile(os.path.join(ROOT, 'resource', 'contact_estimation'))
    cfg = open(os.path.join(ROOT, 'setup.cfg')).read()
    assert 'script_dir=$base/lib/contact_estimation' in cfg
    assert 'install_scripts=$base/lib/contact_estimation' in cfg



def _fastdds_profiles(name: str) -> dict[str, str]:
    """config/<name>'s shared-memory transport, data writer profile and announcement
    period, as canonical XML text (comments and whitespace left out)."""
    namespace = {'dds': 'http://www.eprosima.com'}
    root = ET.parse(os.path.join(ROOT, 'config', name)).getroot()
    parts = {'shared memory': next(d for d in root.iterfind('.//dds:transport_descriptor',
                                                            namespace)
                                   if d.findtext('dds:type', namespaces=namespace) == 'SHM'),
             'data writer': root.find('.//dds:data_writer', namespace),
             'announcements': root.find('.//dds:leaseAnnouncement', namespace)}
    return {key: ET.canonicalize(ET.tostring(part), strip_text=True)
            for key, part in parts.items()}


def test_the_localhost_fastdds_settings_keep_the_shipped_transport_and_writer_settings():
    """fastdds_localhost.xml differs from fastdds.xml in where it looks for peers only: the
    segment that carries big clouds, the writers' heartbeat and the announcement period
    hold with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST too."""
    assert _fastdds_profiles('fastdds_localhost.xml') == _fastdds_profiles('fastdds.xml')


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
