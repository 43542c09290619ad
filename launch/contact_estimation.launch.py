"""Launch the contact_estimation node set on a ROS 2 install.

    ros2 launch contact_estimation contact_estimation.launch.py [sim:=true] [params_file:=FILE]
                                                                [rviz:=true] [separate:=true]
                                                                [priority:=N] [namespace:=NS]
                                                                [robot:=NAME|URDF]
                                                                [robot_description:=XML]

The nodes, their executables and parameter files come from contact_estimation/nodes.yaml
(read through contact_estimation.manifest), the same list `contact-estimation up` starts.
The core nodes run composed in three processes, the chain, the estimators and the proximity
monitor (nodes.yaml `composed`: the same nodes, names and parameters; each takes its own
section of the parameter files); separate:=true starts one process per node instead. Every
process reads its nodes' files, the robot from config/robot.yaml (`/**`), then params_file;
robot:= (an example-robot-data name or a URDF path) or robot_description:= (the URDF XML)
set it for every node, and files whose node sections name another robot are refused
(manifest.suite_robot). namespace:=NS puts every node in namespace NS (every topic but
/diagnostics moves with it, and the simulated /clock: one suite per arm in one graph); with
sim:=true every node runs on the simulator's clock (use_sim_time). priority:=N runs the
processes that raise a stop at SCHED_FIFO priority N and below (chrt -f; nodes.yaml
`realtime`), below the robot driver's; auto (the default): 40 where the OS allows it, else
normal priority with a warning; 0: normal (README, Real-time priority).
A process that dies is started again as `contact-estimation up` does (launcher.RestartPolicy),
with the exit code of the one before in its environment, so that its stops come back latched
until ~/reset (core/restart.py).
rviz:=true also starts rviz2 with rviz/contact_estimation.rviz and, for its robot model,
robot_state_publisher with the URDF of the robot the nodes load; each only where the
distribution has it.
"""
import os
import time

from launch import LaunchDescription
from launch.actions import (DeclareLaunchArgument, LogInfo, OpaqueFunction,
                            RegisterEventHandler, TimerAction)
from launch.event_handlers import OnProcessExit
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from contact_estimation import manifest


def _flag(context, name: str) -> bool:
    return LaunchConfiguration(name).perform(context).lower() in ('true', '1', 'yes')


def _robot_argument_file(context) -> list[str]:
    """A `/**` parameter file with robot:= and robot_description:= when given."""
    from contact_estimation.launcher import parameter_file
    values = {key: LaunchConfiguration(key).perform(context)
              for key in ('robot', 'robot_description')}
    values = {key: value for key, value in values.items() if value}
    if not values:
        return []
    if values.get('robot', '').endswith('.urdf'):
        values['robot'] = os.path.abspath(values['robot'])
    return [parameter_file({manifest.WILDCARD: values})]


def _parameter_files(spec: manifest.Process, context, robot_file: list[str],
                     overrides: dict[str, dict[str, object]]) -> list[str]:
    """The parameter file of each node the process runs, config/robot.yaml, the user's,
    `robot_file` (robot:=), then `overrides` by node name (in a file of node sections: a dict
    would set each value on every node of a composed process); in a namespace, copies whose
    sections name the nodes there (launcher.placed_in_namespace)."""
    import atexit
    import shutil
    import tempfile

    from contact_estimation.launcher import parameter_file, placed_in_namespace
    user_file = LaunchConfiguration('params_file').perform(context)
    files = ([manifest.node(name).parameters_path() for name in spec.node_names]
             + [manifest.robot_parameters_path()] + ([user_file] if user_file else [])
             + robot_file)
    if overrides:
        files.append(parameter_file(overrides))
        # Kept while the launch runs (a respawned node reads its files again).
        atexit.register(os.remove, files[-1])
    namespace = LaunchConfiguration('namespace').perform(context).strip('/')
    if not namespace:
        return files
    folder = tempfile.mkdtemp(prefix='contact_estimation_ns_')
    # Kept while the launch runs (a respawned node reads its files again), removed with it.
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return [placed_in_namespace(path, namespace, folder) for path in files]


def _nodes(context):
    from contact_estimation.launcher import (SIMULATED_CLOCK_NOTE, RestartPolicy,
                                             chosen_priority, process_priority,
                                             realtime_prefix, simulated_clock,
                                             transport_environment)

    started = []
    priority, meaning = chosen_priority(LaunchConfiguration('priority').perform(context)
                                        or 'auto')
    print(f'[contact_estimation] {meaning}', flush=True)
    namespace = LaunchConfiguration('namespace').perform(context).strip('/')
    placed = ({'namespace': namespace, 'remappings': [('/clock', f'/{namespace}/clock')]}
              if namespace else {})
    sim = _flag(context, 'sim')
    clock = simulated_clock() if sim else {}
    if sim:
        print(f'[contact_estimation] {SIMULATED_CLOCK_NOTE}', flush=True)
    robot_file = _robot_argument_file(context)
    # The suite's Fast DDS settings (config/fastdds.xml: big lidar clouds), as `up` gives them.
    transport = {name: value for name, value in transport_environment().items()
                 if os.environ.get(name) != value}
    processes = manifest.processes(sim, _flag(context, 'separate'))
    # Every node the same robot: refused here, naming the files, before anything starts.
    names = tuple(n for spec in processes for n in spec.node_names)
    user_file = LaunchConfiguration('params_file').perform(context)
    manifest.suite_robot([manifest.robot_parameters_path()]
                         + ([user_file] if user_file else []) + robot_file, names)
    for spec in processes:
        # A name would rename every node of the composed process: only a node gets one.
        named = {'name': spec.name} if isinstance(spec, manifest.NodeSpec) else {}
        on_clock = {n: clock[n] for n in spec.node_names if n in clock}
        fifo = process_priority(spec.name, priority)
        prefix = {'prefix': ' '.join(realtime_prefix(fifo))} if fifo else {}
        arguments = dict(package=manifest.PACKAGE, executable=spec.executable, output='screen',
                         parameters=_parameter_files(spec, context, robot_file, on_clock),
                         **named, **prefix, **placed)
        started += _supervised(spec.name, arguments, RestartPolicy(), transport)
    return started


def _supervised(name: str, arguments: dict, policy, environment: dict[str, str],
                previous_code: int | None = None) -> list:
    """The Node of `arguments` with `environment` added to its own, and what starts it again
    when it dies while the launch runs (launch_ros's respawn would start it with the same
    environment: the new process must know it is a restart)."""
    from contact_estimation.launcher import restart_environment
    node = Node(**arguments, additional_env={**environment,
                                             **restart_environment(previous_code)})
    started = time.monotonic()

    def on_exit(event, context):
        if context.is_shutdown:
            return None
        pause, line = policy.verdict(name, event.returncode, time.monotonic() - started)
        if pause is None:
            return [LogInfo(msg=line)]
        return [LogInfo(msg=line), TimerAction(period=pause, actions=_supervised(
            name, arguments, policy, environment, event.returncode))]
    return [node, RegisterEventHandler(OnProcessExit(target_action=node, on_exit=on_exit))]


def _installed(package: str) -> bool:
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    try:
        get_package_share_directory(package)
    except PackageNotFoundError:
        return False
    return True


def _viewers(context):
    """rviz2 and robot_state_publisher (the robot model's TF and /robot_description)."""
    if not _flag(context, 'rviz'):
        return []
    actions = []
    if _installed('robot_state_publisher'):
        from contact_estimation.core.robot.robot_model import RobotModel
        files = _parameter_files(manifest.node('residual_node'), context,
                                 _robot_argument_file(context), {})
        robot = manifest.suite_robot(files, ('residual_node',))
        urdf = RobotModel.load(robot['robot_description'] or robot['robot'],
                               robot['base_link'], robot['tip_link']).urdf_xml
        actions.append(Node(package='robot_state_publisher', executable='robot_state_publisher',
                            name='robot_state_publisher', output='screen',
                            parameters=[{'robot_description': urdf}]))
    else:
        actions.append(LogInfo(msg='rviz:=true: robot_state_publisher is not installed, so '
                                   'rviz shows no robot model'))
    if _installed('rviz2'):
        actions.append(Node(package='rviz2', executable='rviz2', name='rviz2', output='screen',
                            arguments=['-d', manifest.share_path('rviz',
                                                                 'contact_estimation.rviz')]))
    else:
        actions.append(LogInfo(msg='rviz:=true: rviz2 is not installed'))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument('sim', default_value='false',
                              description='also start the MuJoCo simulated cobot'),
        DeclareLaunchArgument('params_file', default_value='',
                              description='parameter file applied over the defaults'),
        DeclareLaunchArgument('rviz', default_value='false',
                              description='also start rviz2 (and robot_state_publisher)'),
        DeclareLaunchArgument('priority', default_value='auto',
                              description='SCHED_FIFO priority of the chain that raises the '
                                          "stop (chrt -f), below the driver's; 0 = normal"),
        DeclareLaunchArgument('namespace', default_value='',
                              description='ROS namespace of every node (one suite per arm)'),
        DeclareLaunchArgument('robot', default_value='',
                              description="every node's robot: an example-robot-data name "
                                          "(ur5) or a URDF path ('' = config/robot.yaml, "
                                          'then params_file)'),
        DeclareLaunchArgument('robot_description', default_value='',
                              description="every node's robot as URDF XML (wins over robot)"),
        DeclareLaunchArgument('separate', default_value='false',
                              description='one process per node instead of the core nodes '
                                          'composed in three processes'),
        OpaqueFunction(function=_nodes),
        OpaqueFunction(function=_viewers),
    ])
