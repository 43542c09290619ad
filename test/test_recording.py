"""Joint-state recordings: CSV and rosbag2 (sqlite3 and mcap) round trips and clear errors."""
import numpy as np
import pytest

from contact_estimation.core.identification.recording import (JointRecording, RecordingError,
                                                              write_csv)
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.suite_bag import read_recording, write_bag

SPATIAL = 'urdf/spatial_6r.urdf'


@pytest.fixture(scope='module')
def robot():
    import os
    return RobotModel.load(os.path.join(os.path.dirname(__file__), '..', SPATIAL))


def _recording(names, samples=50, seed=0):
    rng = np.random.default_rng(seed)
    n = len(names)
    return JointRecording(list(names), 0.5 + np.arange(samples) * 0.002,
                          rng.normal(size=(samples, n)), rng.normal(size=(samples, n)),
                          rng.normal(size=(samples, n)))


def _same(a, b, atol=0.0):
    np.testing.assert_allclose(a.t, b.t, atol=max(atol, 1e-9))
    for field in ('q', 'v', 'effort'):
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), atol=atol)


def test_csv_round_trip_in_model_order(robot, tmp_path):
    shuffled = list(reversed(robot.joint_names))
    original = _recording(shuffled)
    write_csv(tmp_path / 'r.csv', original)
    back = read_recording(tmp_path / 'r.csv', robot)
    assert back.joint_names == robot.joint_names
    np.testing.assert_allclose(back.q, original.q[:, ::-1])
    _same(read_recording(tmp_path / 'r.csv'), original)


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_bag_round_trip(robot, tmp_path, storage):
    original = _recording(robot.joint_names)
    write_bag(tmp_path / 'bag', original, storage=storage)
    _same(read_recording(tmp_path / 'bag', robot), original)
    with pytest.raises(RecordingError, match='no topic /other'):
        read_recording(tmp_path / 'bag', robot, topic='/other')


def test_a_recording_of_another_robot_is_named(robot, tmp_path):
    write_csv(tmp_path / 'r.csv', _recording([f'panda_joint{i}' for i in range(1, 8)]))
    with pytest.raises(RecordingError, match='another robot'):
        read_recording(tmp_path / 'r.csv', robot)


def test_unreadable_inputs(tmp_path):
    with pytest.raises(RecordingError, match='does not exist'):
        read_recording(tmp_path / 'missing.csv')
    (tmp_path / 'r.csv').write_text('t,j/position,j/velocity\n0,1,2\n')
    with pytest.raises(RecordingError, match='j/effort'):
        read_recording(tmp_path / 'r.csv')
    (tmp_path / 'dir').mkdir()
    with pytest.raises(RecordingError, match='metadata.yaml'):
        read_recording(tmp_path / 'dir')
