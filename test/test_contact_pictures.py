"""contact_pictures.py with power and force limiting (issue 38): a small recording with the
localizer's estimates and the proximity monitor's checks on contact_estimation/pfl is read,
and each contact is drawn with a sphere in the colour of its margin, with a colour bar."""
import numpy as np
import pytest
from geometry_msgs.msg import PointStamped, WrenchStamped
from PIL import Image
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from contact_estimation import contact_pictures, manifest
from contact_estimation.contact_pictures import BagContacts, source_topics
from contact_estimation.core.contact.pfl import PflResult, margin_rgb
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim import render
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.pfl_messages import pfl_status
from contact_estimation.suite_bag import SuiteBag

Q = np.array([0.3, -0.4, 0.2, -2.0, 0.3, 1.8, 0.5])
LINK = 'panda_link5'
POINT = np.array([0.055, 0.0, -0.13])  # on the side of the forearm, in its frame
FORCE = np.array([-35.0, 0.0, 0.0])
# Two contacts, 4 s apart: one well within its limit (green), one over it (red).
CONTACTS = {1.0: 0.3, 5.0: 1.4}  # stamp s → margin


@pytest.fixture(scope='module')
def robot():
    return RobotModel.load('panda')


@pytest.fixture(scope='module')
def recording(robot, tmp_path_factory):
    """Joint states at Q, and at each contact's stamp the localizer's estimate and the
    monitor's check of it (stamped alike, as the monitor publishes it)."""
    path = tmp_path_factory.mktemp('pictures') / 'recording'
    point_topic, wrench_topic = source_topics('localizer')
    with SuiteBag(path, robot) as bag:
        for t in np.arange(0.5, 6.0, 0.1):
            msg = JointState(name=list(robot.joint_names), position=Q.tolist(),
                             velocity=[0.0] * len(Q), effort=[0.0] * len(Q))
            msg.header.stamp = seconds_to_stamp(t)
            bag.write_joint_state(int(t * 1e9), int(t * 1e9), msg.name, Q,
                                  serialize_message(msg), manifest.topic(
                                      'joint_state_listener', 'joint_states', ''))
        for t, margin in CONTACTS.items():
            stamp = seconds_to_stamp(t)
            point, wrench = PointStamped(), WrenchStamped()
            for msg in (point, wrench):
                msg.header.stamp, msg.header.frame_id = stamp, LINK
            point.point.x, point.point.y, point.point.z = POINT.tolist()
            wrench.wrench.force.x, wrench.wrench.force.y, wrench.wrench.force.z = FORCE.tolist()
            check = PflResult(t, LINK, POINT, 35.0, 'lower_arm_wrist', 'right_forearm',
                              'transient', 35.0 / margin, margin, margin > 0.95, 'why')
            log = int(t * 1e9)
            bag.write(point_topic, 'geometry_msgs/msg/PointStamped', log,
                      serialize_message(point))
            bag.write(wrench_topic, 'geometry_msgs/msg/WrenchStamped', log,
                      serialize_message(wrench))
            bag.write(manifest.topic('proximity_monitor', 'pfl', ''),
                      'diagnostic_msgs/msg/DiagnosticArray', log,
                      serialize_message(pfl_status(check, LINK, POINT, 'panda', stamp)))
    return path


def test_the_checks_are_read_and_each_contact_is_marked_in_its_margins_colour(robot, recording):
    found = BagContacts.read(recording)
    assert {t: m.margin for t, m in found.pfl.items()} == pytest.approx(CONTACTS)
    assert [found.pfl[t].over for t in sorted(found.pfl)] == [False, True]
    assert len(found.episodes()) == 2
    rotation, origin = robot.link_pose(Q, LINK)
    for t, margin in CONTACTS.items():
        arrows, table, _ = contact_pictures._arrows(found, robot, Q, t)
        mark = next(a for a in arrows if a.label.startswith('PFL'))
        assert mark.rgba[:3] == pytest.approx(margin_rgb(margin))
        assert mark.point == pytest.approx(rotation @ POINT + origin)
        assert mark.label == f'PFL {margin:.0%}'
        line = next(line for line in table if line.startswith('PFL'))
        assert 'lower_arm_wrist' in line and ('OVER' in line) == (margin > 1.0), line


def test_the_picture_shows_the_margins_colour_at_the_contact(robot, recording, tmp_path):
    """Rendered: around the contact point the picture is green for the contact within its
    limit and red for the one over it; the PNGs carry the colour bar."""
    if render.render_unavailable():
        pytest.skip(render.render_unavailable())
    found = BagContacts.read(recording)
    shades = {}
    for t, margin in CONTACTS.items():
        arrows, _, _ = contact_pictures._arrows(found, robot, Q, t)
        mark = next(a for a in arrows if a.label.startswith('PFL'))
        image, project = render.render_view(robot, Q, arrows)
        bare, _ = render.render_view(robot, Q, [a for a in arrows if a is not mark])
        column, row = (int(round(v)) for v in project(mark.point))
        near = (slice(row - 40, row + 41), slice(column - 40, column + 41))
        drawn = image[near].astype(int)
        changed = np.abs(drawn - bare[near].astype(int)).max(axis=2) > 40
        assert changed.sum() > 30, 'the mark is not seen'
        shades[margin] = drawn[changed].mean(axis=0)
    green, red = shades[0.3], shades[1.4]
    assert green[1] > green[0] + 40, green  # green: 0.3 of the limit
    assert red[0] > red[1] + 40, red        # red: over it
    paths, reason = contact_pictures.draw(recording, tmp_path, robot)
    assert not reason and len(paths) == 4, reason
    with Image.open(paths[0]) as picture:
        assert picture.format == 'PNG' and picture.width == render.WIDTH
