"""Launch the contact_estimation node set on a ROS 2 install.

    ros2 launch contact_estimation contact_estimation.launch.py [sim:=true] [params_file:=FILE]

The nodes, their executables and parameter files come from contact_estimation/nodes.yaml
(read through contact_estimation.manifest), the same list `contact-estimation up` starts.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from contact_estimation import manifest


def _nodes(context):
    with_sim = LaunchConfiguration('sim').perform(context).lower() in ('true', '1', 'yes')
    user_file = LaunchConfiguration('params_file').perform(context)
    return [
        Node(package=manifest.PACKAGE, executable=spec.executable, name=spec.name,
             output='screen',
             parameters=[spec.parameters_path()] + ([user_file] if user_file else []))
        for spec in manifest.selected(with_sim)
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument('sim', default_value='false',
                              description='also start the MuJoCo simulated cobot'),
        DeclareLaunchArgument('params_file', default_value='',
                              description='parameter file applied over the defaults'),
        OpaqueFunction(function=_nodes),
    ])
