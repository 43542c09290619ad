"""The demo's recording (ros/bag_recorder.py, suite_bag.py) read back with rosbags: the topics
a viewer needs with their ROS 2 types, counts that agree with the bag's metadata, /tf for
every link from the joint states, and a contact marker in a link frame that /tf resolves to
where the model's forward kinematics puts that point."""
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest
import yaml
from demo_run import demo_output, recorded

from contact_estimation import manifest
from contact_estimation.ros.bag_recorder import MARKER_ARRAY, TRUTH_MARKERS, robot_of
from contact_estimation.suite_bag import (DESCRIPTION_TOPIC, TF_TOPIC, messages, stamp_ns,
                                          suite_topics)

# What the recording must hold for Foxglove and rviz (the demo produces every one of them).
REQUIRED = [recorded(t) for t in (
    '/joint_states', TF_TOPIC, DESCRIPTION_TOPIC, '/lidar/points', '/contact_estimation/stop',
    '/contact_estimation/time_scaling', '/contact_estimation/collision_events',
    '/contact_estimate/point', '/contact_estimate/wrench', '/contact_estimate/ft/point',
    '/contact_estimate/ft/wrench', '/contact_estimate/markers', '/sim/contact/point',
    '/sim/contact/wrench', '/sim/contact/joint_torque', TRUTH_MARKERS)]


@pytest.fixture(scope='module')
def recording(tmp_path_factory):
    out_dir, printout = demo_output(tmp_path_factory)
    bag = out_dir / 'recording'
    assert f'recording: {bag}' in printout
    by_topic: dict[str, list] = {}
    types = {}
    for topic, msgtype, log_ns, msg in messages(bag):
        by_topic.setdefault(topic, []).append((log_ns, msg))
        types[topic] = msgtype
    return bag, by_topic, types


def test_the_recording_is_an_mcap_rosbag2_with_every_topic_and_its_ros2_type(recording):
    bag, by_topic, types = recording
    with open(bag / 'metadata.yaml') as f:
        info = yaml.safe_load(f)['rosbag2_bagfile_information']
    assert info['storage_identifier'] == 'mcap'
    assert [p for p in info['relative_file_paths']] == ['recording.mcap']
    counts = {t['topic_metadata']['name']: t['message_count']
              for t in info['topics_with_message_count']}
    meta_types = {t['topic_metadata']['name']: t['topic_metadata']['type']
                  for t in info['topics_with_message_count']}
    for topic in REQUIRED:
        assert by_topic.get(topic), f'{topic} missing from the recording'
    # Counts in metadata.yaml (what `ros2 bag info` shows) are the messages read back.
    assert counts == {topic: len(msgs) for topic, msgs in by_topic.items()}
    expected_types = {recorded(topic): msgtype for topic, msgtype in {
        **suite_topics(), TF_TOPIC: 'tf2_msgs/msg/TFMessage',
        DESCRIPTION_TOPIC: 'std_msgs/msg/String', TRUTH_MARKERS: MARKER_ARRAY}.items()}
    for topic, msgtype in types.items():
        assert msgtype == expected_types[topic] == meta_types[topic]
    # Latched topics are offered transient local, as their publishers do.
    qos = {t['topic_metadata']['name']: t['topic_metadata']['offered_qos_profiles'][0]
           for t in info['topics_with_message_count']}
    assert qos[DESCRIPTION_TOPIC]['durability'] == 'transient_local'
    assert qos[recorded('/contact_estimation/stop')]['durability'] == 'transient_local'
    assert qos[recorded('/joint_states')]['durability'] == 'volatile'
    assert len(by_topic[DESCRIPTION_TOPIC]) == 1


def test_tf_holds_every_link_at_joint_state_stamps_under_the_rviz_fixed_frame(recording):
    _, by_topic, _ = recording
    robot = robot_of('sim_cobot')
    urdf = ET.fromstring(by_topic[DESCRIPTION_TOPIC][0][1].data)
    urdf_links = {link.get('name') for link in urdf.iter('link')}
    joint_stamps = {stamp_ns(msg) for _, msg in by_topic[recorded('/joint_states')]}
    with open(manifest.share_path('rviz/contact_estimation.rviz')) as f:
        fixed_frame = yaml.safe_load(f)['Visualization Manager']['Global Options']['Fixed Frame']
    assert fixed_frame == robot.base_link
    for _, tf in by_topic[TF_TOPIC]:
        assert {t.header.frame_id for t in tf.transforms} == {robot.base_link}
        assert {t.child_frame_id for t in tf.transforms} == urdf_links - {robot.base_link}
        assert stamp_ns(tf.transforms[0]) in joint_stamps
    # At most one /tf per 10 ms of stamps (DEFAULT_TF_RATE), so fewer than the joint states.
    assert len(by_topic[TF_TOPIC]) < len(by_topic[recorded('/joint_states')])
    # The viewer finds the meshes: package:// URIs became files of this machine.
    assert 'package://' not in by_topic[DESCRIPTION_TOPIC][0][1].data


def _transform_at(tf_messages, link: str, stamp: int) -> pin.SE3:
    """The base → link transform of the /tf message nearest in stamp."""
    nearest = min(tf_messages, key=lambda m: abs(stamp_ns(m[1].transforms[0]) - stamp))[1]
    t = next(t.transform for t in nearest.transforms if t.child_frame_id == link)
    rotation = pin.Quaternion(t.rotation.w, t.rotation.x, t.rotation.y, t.rotation.z)
    return pin.SE3(rotation.matrix(), np.array([t.translation.x, t.translation.y,
                                                t.translation.z]))


@pytest.mark.parametrize('topic, ns', [
    (recorded('/contact_estimate/markers'), 'contact_estimate'),
    (recorded(TRUTH_MARKERS), 'truth')])
def test_a_contact_marker_in_a_link_frame_resolves_through_tf_to_the_contact_point(
        recording, topic, ns):
    _, by_topic, _ = recording
    robot = robot_of('sim_cobot')
    spheres = [m for _, array in by_topic[topic] for m in array.markers
               if m.ns == ns and m.type == m.SPHERE and m.action == m.ADD]
    assert spheres, f'no {ns} marker'
    sphere = spheres[len(spheres) // 2]
    link, stamp = sphere.header.frame_id, stamp_ns(sphere)
    assert link in robot.link_joint
    p = sphere.pose.position
    in_link = np.array([p.x, p.y, p.z])
    via_tf = _transform_at(by_topic[TF_TOPIC], link, stamp).act(in_link)
    # The same point by forward kinematics of the joint state nearest the marker's stamp.
    _, state = min(by_topic[recorded('/joint_states')],
                   key=lambda m: abs(stamp_ns(m[1]) - stamp))
    q = np.array([state.position[list(state.name).index(j)] for j in robot.joint_names])
    rotation, translation = robot.link_pose(q, link)
    # The arm holds still while pushed (f_S = 0); /tf is at most 10 ms from the marker.
    assert np.linalg.norm(via_tf - (rotation @ in_link + translation)) < 0.02
