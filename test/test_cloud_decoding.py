"""PointCloud2 decoding (ros/conversions.cloud_to_xyz) and the size check made from the header
before anything is decoded (ros/sensor_frames.check_cloud_size): issue 19's absurd clouds."""
import numpy as np
import pytest
from sensor_msgs.msg import PointCloud2, PointField

from contact_estimation.core.input_rejected import InputRejected
from contact_estimation.ros.conversions import cloud_to_xyz, seconds_to_stamp, xyz_to_cloud
from contact_estimation.ros.sensor_frames import check_cloud_size


def organised(points: np.ndarray, height: int, padding: int) -> PointCloud2:
    """`points` as `height` rows of float64 x, y, z plus 4 bytes of intensity, each row
    followed by `padding` bytes: a cloud whose row_step is not width × point_step."""
    width = len(points) // height
    point = np.dtype({'names': ['x', 'y', 'z', 'i'], 'formats': ['<f8'] * 3 + ['<f4'],
                      'offsets': [0, 8, 16, 24], 'itemsize': 28})
    rows = []
    for row in points.reshape(height, width, 3):
        packed = np.zeros(width, dtype=point)
        packed['x'], packed['y'], packed['z'] = row.T
        rows.append(packed.tobytes() + b'\xff' * padding)
    msg = PointCloud2(height=height, width=width, point_step=28, row_step=28 * width + padding,
                      fields=[PointField(name=n, offset=8 * k, datatype=PointField.FLOAT64,
                                         count=1) for k, n in enumerate('xyz')])
    msg.data = b''.join(rows)
    return msg


def test_an_organised_cloud_with_padded_rows_decodes_every_point_in_order():
    points = np.random.default_rng(1).normal(size=(60, 3))
    points[7] = np.nan  # no return: dropped
    got = cloud_to_xyz(organised(points, height=6, padding=5))
    np.testing.assert_array_equal(got, np.delete(points, 7, axis=0))


def test_rows_shorter_than_their_points_are_refused():
    msg = organised(np.zeros((12, 3)), height=3, padding=0)
    msg.row_step = 20
    with pytest.raises(ValueError, match='rows of 20 bytes'):
        cloud_to_xyz(msg)


@pytest.mark.parametrize('width, height, data', [
    (0, 2_000_000, b''), (2_000_000, 0, b''), (1000, 1000, b''),
    (10, 1, bytes(12 * 2_000))])   # more data than max_points of its points
def test_a_cloud_whose_header_declares_too_much_is_refused_at_once(width, height, data):
    msg = xyz_to_cloud(seconds_to_stamp(1.0), 'base', np.zeros((0, 3)))
    msg.width, msg.height, msg.data = width, height, data
    with pytest.raises(InputRejected) as refused:
        check_cloud_size(msg, max_points=1000)
    assert refused.value.kind == 'cloud_too_large'


def test_a_cloud_of_the_allowed_size_passes_and_one_point_more_is_refused():
    """The bound is `max_points` itself: a check that refused too early or too late fails."""
    assert check_cloud_size(xyz_to_cloud(seconds_to_stamp(1.0), 'base', np.zeros((1000, 3))),
                            1000) is None
    with pytest.raises(InputRejected, match='1001 × 1 points'):
        check_cloud_size(xyz_to_cloud(seconds_to_stamp(1.0), 'base', np.zeros((1001, 3))), 1000)


def test_a_400000_point_cloud_is_decimated_to_its_budget_from_the_raw_bytes():
    """Issue 27: every k-th point, picked before decoding, at most `budget` of them."""
    points = np.random.default_rng(2).uniform(-1.0, 1.0, size=(400_000, 3)).astype(np.float32)
    got = cloud_to_xyz(xyz_to_cloud(seconds_to_stamp(1.0), 'base', points), budget=10_000)
    np.testing.assert_array_equal(got, points[::40].astype(np.float64))


def test_an_organised_cloud_with_padded_rows_is_decimated_across_its_rows():
    points = np.random.default_rng(3).normal(size=(60, 3))
    got = cloud_to_xyz(organised(points, height=6, padding=5), budget=20)
    np.testing.assert_array_equal(got, points[::3])
