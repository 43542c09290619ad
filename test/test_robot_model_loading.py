"""RobotModel loading: a name, a file and a URDF string give the same chain and geometry."""
import os

import numpy as np
import pytest

from contact_estimation.core.robot.robot_model import RobotModel

URDF_DIR = os.path.join(os.path.dirname(__file__), '..', 'urdf')


@pytest.mark.parametrize('name, tip, joints', [('panda', 'panda_hand', 7), ('ur5', 'tool0', 6)])
def test_urdf_string_without_tip_link_gives_the_same_model_as_the_name(name, tip, joints):
    by_name = RobotModel.load(name)
    from_string = RobotModel.load(by_name.urdf_xml)  # as robot_description delivers it
    for robot in (by_name, from_string):
        assert robot.tip_link == tip and robot.n == joints
        assert robot.geometry_error == ''
    assert from_string.joint_names == by_name.joint_names
    assert from_string.collision_model.ngeoms == by_name.collision_model.ngeoms > 0
    q = by_name.random_configuration(np.random.default_rng(0), 1)[0]
    np.testing.assert_allclose(from_string.gravity(q), by_name.gravity(q))


def urdf(robot_name, collision=''):
    """A two-link arm named `robot_name` whose second link has `collision` inside <collision>."""
    geometry = f'<collision><geometry>{collision}</geometry></collision>' if collision else ''
    inertial = ('<inertial><mass value="1"/>'
                '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>')
    return f'''<robot name="{robot_name}">
      <link name="base"/>
      <link name="arm">{inertial}{geometry}</link>
      <link name="hand">{inertial}</link>
      <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/>
        <axis xyz="0 1 0"/><limit lower="-2" upper="2" velocity="1" effort="10"/></joint>
      <joint name="wrist" type="revolute"><parent link="arm"/><child link="hand"/>
        <origin xyz="0.5 0 0"/><axis xyz="0 1 0"/>
        <limit lower="-2" upper="2" velocity="1" effort="10"/></joint>
    </robot>'''


def test_known_robot_name_without_its_usual_links_falls_back_to_root_and_deepest_link():
    robot = RobotModel.load(urdf('panda', '<box size="0.5 0.1 0.1"/>'))
    assert (robot.base_link, robot.tip_link) == ('base', 'hand')
    assert robot.joint_names == ['shoulder', 'wrist']


def test_missing_mesh_keeps_the_dynamics_and_says_why_there_is_no_geometry():
    mesh = '<mesh filename="package://no_such_description/meshes/arm.stl"/>'
    robot = RobotModel.load(urdf('two_link', mesh))
    assert robot.collision_model.ngeoms == 0
    assert 'no_such_description/meshes/arm.stl' in robot.geometry_error
    assert robot.gravity(np.zeros(2))[0] != 0.0


def test_urdf_without_collision_elements_says_so():
    robot = RobotModel.load(urdf('two_link'))
    assert 'no <collision>' in robot.geometry_error


STL = '''solid tetra
facet normal 0 0 -1
 outer loop
  vertex 0 0 0
  vertex 0 0.1 0
  vertex 0.1 0 0
 endloop
endfacet
facet normal 0 -1 0
 outer loop
  vertex 0 0 0
  vertex 0.1 0 0
  vertex 0 0 0.1
 endloop
endfacet
facet normal -1 0 0
 outer loop
  vertex 0 0 0
  vertex 0 0 0.1
  vertex 0 0.1 0
 endloop
endfacet
facet normal 1 1 1
 outer loop
  vertex 0.1 0 0
  vertex 0 0.1 0
  vertex 0 0 0.1
 endloop
endfacet
endsolid tetra
'''


def test_package_uris_resolve_in_the_share_directories_of_a_sourced_ros_install(
        tmp_path, monkeypatch):
    """On a ROS install, robot_description names meshes package://<pkg>/...: they are found
    under <prefix>/share/<pkg> for each prefix on AMENT_PREFIX_PATH, as colcon installs them."""
    prefix = tmp_path / 'install' / 'my_arm_description'
    share = prefix / 'share' / 'my_arm_description'
    (share / 'meshes').mkdir(parents=True)
    (share / 'meshes' / 'arm.stl').write_text(STL)
    index = prefix / 'share' / 'ament_index' / 'resource_index' / 'packages'
    index.mkdir(parents=True)
    (index / 'my_arm_description').write_text('')
    monkeypatch.delenv('ROS_PACKAGE_PATH', raising=False)
    monkeypatch.setenv('AMENT_PREFIX_PATH', str(prefix))
    robot = RobotModel.load(urdf('two_link',
                                 '<mesh filename="package://my_arm_description/meshes/arm.stl"/>'))
    assert robot.geometry_error == ''
    assert robot.collision_model.ngeoms == 1
    monkeypatch.setenv('AMENT_PREFIX_PATH', str(tmp_path / 'elsewhere'))
    assert 'my_arm_description' in RobotModel.load(robot.urdf_xml).geometry_error


def test_relative_mesh_paths_resolve_next_to_a_urdf_file(tmp_path):
    (tmp_path / 'arm.stl').write_text(STL)
    path = tmp_path / 'two_link.urdf'
    path.write_text(urdf('two_link', '<mesh filename="arm.stl"/>'))
    robot = RobotModel.load(str(path))
    assert robot.geometry_error == '' and robot.collision_model.ngeoms == 1


@pytest.mark.parametrize('name', ['planar_4link', 'spatial_6r'])
def test_project_urdfs_load_the_same_from_a_string(name):
    path = os.path.join(URDF_DIR, f'{name}.urdf')
    from_file = RobotModel.load(path)
    from_string = RobotModel.load(from_file.urdf_xml)
    assert (from_string.base_link, from_string.tip_link) == (from_file.base_link,
                                                             from_file.tip_link)
    assert from_string.collision_model.ngeoms == from_file.collision_model.ngeoms > 0
