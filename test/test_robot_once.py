"""The robot given once (issue 28): config/robot.yaml's `/**` section reaches every node,
a node section made for another robot is refused before start, and a per-joint parameter
sized for another arm is refused at start naming the node, the parameter and the fix."""
import os

import pytest
import yaml

from contact_estimation import manifest
from contact_estimation.commands.up import robot_files
from contact_estimation.nodes.collision_detector import CollisionDetectorNode
from contact_estimation.nodes.contact_localizer import ContactLocalizerNode
from contact_estimation.ros.node_main import StartupError


def _file(tmp_path, name: str, sections: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({k: {'ros__parameters': v} for k, v in sections.items()}))
    return str(path)


def _node(node_class, context, *files):
    return node_class(context=context, cli_args=[
        '--ros-args', *[a for f in files for a in ('--params-file', f)]])


def test_one_wildcard_line_sets_every_node_s_robot(context, tmp_path):
    mine = _file(tmp_path, 'mine.yaml', {'/**': {'robot': 'ur5'}})
    files = [manifest.node('contact_localizer').parameters_path(),
             manifest.robot_parameters_path(), mine]
    assert manifest.suite_robot(files)['robot'] == 'ur5'
    node = _node(ContactLocalizerNode, context, *files)
    try:
        assert node.robot.n == 6 and node.value('robot') == 'ur5'
    finally:
        node.destroy_node()


def test_up_robot_is_a_wildcard_file_after_the_user_s(tmp_path):
    mine = _file(tmp_path, 'mine.yaml', {'/**': {'robot': 'panda'}})
    files = robot_files([mine], 'ur5')
    try:
        assert files[0] == mine
        assert manifest.suite_robot([manifest.robot_parameters_path(), *files])['robot'] == 'ur5'
    finally:
        os.remove(files[-1])


def test_a_file_made_for_another_robot_is_refused_naming_both(context, tmp_path):
    """What `calibrate --robot ur5` writes, given to a Panda suite: refused before start,
    naming the file and both robots; given with the robot set for every node, taken."""
    made = _file(tmp_path, 'thresholds.yaml', {
        'collision_detector': {'robot': 'ur5', 'thresholds_position': [3.0] * 6}})
    detector_files = [manifest.node('collision_detector').parameters_path(),
                      manifest.robot_parameters_path()]
    with pytest.raises(ValueError, match=r"thresholds\.yaml was made for ur5 \(its "
                                         r"collision_detector section says so\), but the "
                                         r"suite's robot is panda"):
        manifest.suite_robot([*detector_files, made])
    robot_for_all = _file(tmp_path, 'robot.yaml', {'/**': {'robot': 'ur5'}})
    assert manifest.suite_robot([*detector_files, made, robot_for_all])['robot'] == 'ur5'
    # As rcl reads them: the suite's `/**` robot over the node's own section (which only says
    # what the file was made for), and the node then refuses the thresholds sized for ur5.
    with pytest.raises(StartupError,
                       match=r'thresholds_position = \[3\.0, .*\]: 6 values, but panda has 7'):
        _node(CollisionDetectorNode, context, *detector_files, made)
    node = _node(CollisionDetectorNode, context, *detector_files, made, robot_for_all)
    try:
        assert node.robot.n == 6
    finally:
        node.destroy_node()


@pytest.mark.parametrize('node_class, parameter', [
    (ContactLocalizerNode, 'gate_thresholds'), (CollisionDetectorNode, 'threshold_max')])
def test_a_parameter_sized_for_another_arm_is_refused_naming_node_parameter_and_fix(
        context, tmp_path, node_class, parameter):
    name = 'contact_localizer' if node_class is ContactLocalizerNode else 'collision_detector'
    panda_sized = _file(tmp_path, 'panda_sized.yaml', {'/**': {'robot': 'ur5'},
                                                       name: {parameter: [20.0] * 7}})
    with pytest.raises(StartupError) as refusal:
        _node(node_class, context, manifest.node(name).parameters_path(),
              manifest.robot_parameters_path(), panda_sized)
    message = str(refusal.value)
    assert message.startswith(f'{name}: {parameter} = [20.0, ')
    assert '(7 values)]: 7 values, but ur5 has 6 joints' in message
    assert 'give 1, or 6' in message and '--robot ur5' in message
