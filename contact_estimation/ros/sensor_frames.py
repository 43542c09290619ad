"""Sensor messages into the robot's base frame: the frame lookup, cloud decoding and cloud
parameters that every node reading a lidar or a tracker shares (the contact localizer, the
proximity monitor, and their cloud worker: ros/cloud_process.py).

A message's frame_id is the base frame, the frame named by `<prefix>.frame` whose pose in
the base frame `<prefix>.position` and `<prefix>.rpy` give (core/robot/pose.py: the one
mounting convention of every sensor), or any frame TF knows when tf2_ros is installed (a ROS
distribution has it; the PyPI wheels do not). What cannot be used is InputRejected.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from sensor_msgs.msg import PointCloud2
from std_msgs.msg import Header

from contact_estimation.core.contact.lidar_fusion import CloudConfig, to_base_frame
from contact_estimation.core.input_rejected import (BAD_CLOUD, CLOUD_TOO_LARGE, NOT_FINITE,
                                                    UNKNOWN_FRAME, InputRejected)
from contact_estimation.core.robot.pose import (POSITION_RANGE, RPY_RANGE, position,
                                                rotation_from_quaternion, rotation_from_rpy)
from contact_estimation.core.settings import SENSOR_FRAME
from contact_estimation.ros.conversions import CloudLayout, xyz_from_bytes
from contact_estimation.ros.params import Parameter, ParameterTable, rows

try:  # a ROS distribution has it; the PyPI wheels do not
    import tf2_ros
except ImportError:
    tf2_ros = None

IDENTITY = (np.zeros(3), np.eye(3))  # translation, rotation


def sensor_frame_table(prefix: str, sensor: str) -> ParameterTable:
    """`<prefix>.frame`, `<prefix>.position`, `<prefix>.rpy`: where a sensor is mounted."""
    return ParameterTable(
        Parameter(f'{prefix}.frame', f"the {sensor}'s frame_id, whose pose the next two give "
                  "('' = none: messages in the base frame, or frames TF knows)", '',
                  names=SENSOR_FRAME),
        Parameter(f'{prefix}.position', f'{sensor} origin x y z in the base frame, m',
                  [0.0, 0.0, 0.0], POSITION_RANGE, size=3),
        Parameter(f'{prefix}.rpy', f'{sensor} orientation in the base frame: roll, pitch, yaw '
                  'about the fixed x, y, z axes, rad (as a URDF origin)', [0.0, 0.0, 0.0],
                  RPY_RANGE, size=3),
        renamed={f'{prefix}.orientation': f'{prefix}.rpy'})  # a quaternion before


class SensorFrame:
    """Where the frames of one sensor's messages are in the base frame, from the
    `sensor_frame_table(prefix, sensor)` parameters of `node`, a SuiteNode. `apply(changes)`
    takes new values at run time (ValueError when they are no pose), or `proposed(changes)`
    checks them and `use(proposed)` takes them.
    """

    def __init__(self, node, prefix: str, sensor: str):
        self._node, self._prefix, self._sensor = node, prefix, sensor
        self.parameters = sensor_frame_table(prefix, sensor).names
        self._tf_buffer = None  # made on the first message in a frame only TF knows
        self.apply({})

    def apply(self, changes: dict[str, Any]) -> None:
        """Take the pose parameters with `changes` applied; ValueError on a bad pose."""
        self.use(self.proposed(changes))

    def proposed(self, changes: dict[str, Any]) -> tuple[str, tuple]:
        """(frame, pose) of the parameters with `changes` applied, not yet in use (`use`),
        so that a node checks every changed parameter before it changes anything;
        ValueError on a bad pose."""
        value = lambda name: changes.get(name, self._node.value(name))  # noqa: E731
        frame, xyz, rpy = (value(name) for name in self.parameters)
        return frame.lstrip('/'), (position(xyz, self.parameters[1]),
                                   rotation_from_rpy(rpy, self.parameters[2]))

    def use(self, proposed: tuple[str, tuple]) -> None:
        self.frame, self.pose = proposed

    def to_base(self, header: Header, points: np.ndarray) -> np.ndarray:
        """Points (N×3) in the message's frame → base frame; InputRejected
        'unknown_frame' when the frame's pose is not known."""
        return to_base_frame(points, *self.pose_of(header))

    def pose_of(self, header: Header) -> tuple[np.ndarray, np.ndarray]:
        """The pose (translation, rotation) in the base frame of the message's frame at its
        stamp; InputRejected 'unknown_frame' when it is not known."""
        frame = header.frame_id.lstrip('/')
        base = self._node.robot.base_link
        if frame == base:
            return IDENTITY
        if self.frame and frame == self.frame:
            return self.pose
        if tf2_ros is None:
            raise InputRejected(
                UNKNOWN_FRAME, f'{self._sensor} message in frame {frame!r}: neither the base '
                f'frame {base!r} nor {self._prefix}.frame {self.frame!r} (and no tf2_ros to '
                'look it up)')
        return self._tf_pose(header, frame)

    def _tf_pose(self, header: Header, frame: str) -> tuple:
        """The frame's pose from TF at the message's stamp. The TF listener (a /tf
        subscription, costly at 1 kHz) starts with the first message that needs it."""
        from rclpy.time import Time
        if self._tf_buffer is None:
            self._tf_buffer = tf2_ros.Buffer()
            self._tf_listener = tf2_ros.TransformListener(self._tf_buffer, self._node)
        base = self._node.robot.base_link
        try:
            transform = self._tf_buffer.lookup_transform(
                base, frame, Time.from_msg(header.stamp)).transform
        except tf2_ros.TransformException as err:
            raise InputRejected(UNKNOWN_FRAME, f'{self._sensor} message in frame {frame!r}: '
                                f'no transform to {base!r} ({err})') from err
        t, r = transform.translation, transform.rotation
        return np.array([t.x, t.y, t.z]), rotation_from_quaternion([r.x, r.y, r.z, r.w])


def cloud_in_base_frame(msg: PointCloud2, frame: SensorFrame, max_points: int,
                        budget: int) -> np.ndarray:
    """A PointCloud2 → its finite points (N×3) in the base frame, at most `budget` of them
    (`points_in_base_frame`). InputRejected 'cloud_too_large' (`check_cloud_size`),
    'unknown_frame', 'bad_cloud' or 'not_finite'."""
    check_cloud_size(msg, max_points)
    return points_in_base_frame(CloudLayout.of(msg), msg.data, frame.pose_of(msg.header),
                                budget)


def points_in_base_frame(layout: CloudLayout, data, pose: tuple[np.ndarray, np.ndarray],
                         budget: int | None) -> np.ndarray:
    """A cloud's bytes (`data`, laid out as `layout` says) → its finite points (N×3) in the
    base frame, its frame being at `pose` (translation, rotation) there; at most `budget` of
    them (a larger cloud is decimated from its raw bytes, before decoding:
    ros/conversions.xyz_from_bytes). InputRejected 'bad_cloud' (no x, y, z or truncated) or
    'not_finite' (points, none of them finite). An empty cloud gives no points."""
    try:
        points = xyz_from_bytes(layout, data, budget)
    except ValueError as err:
        raise InputRejected(BAD_CLOUD, str(err)) from err
    size = layout.width * layout.height
    if size and not len(points):
        raise InputRejected(NOT_FINITE, f'cloud of {size} points, none of them finite')
    return to_base_frame(points, *pose)


def check_cloud_size(msg: PointCloud2, max_points: int) -> None:
    """InputRejected 'cloud_too_large' when the cloud declares more than `max_points`
    points, rows or columns (a cloud of width 0 × height 2 000 000 holds no point but took
    seconds row by row), or carries more data than that many of its points: refused from the
    header, before anything is decoded."""
    size = msg.width * msg.height
    most_bytes = max_points * max(msg.point_step, 1)
    if max(size, msg.width, msg.height) > max_points or len(msg.data) > most_bytes:
        raise InputRejected(CLOUD_TOO_LARGE, f'cloud of {msg.width} × {msg.height} points '
                            f'in {len(msg.data)} bytes exceeds cloud.max_points = '
                            f'{max_points} (of {msg.point_step} bytes each)')


# Points of a cloud decoded and processed at most (issue 27). open3d's voxel grid and DBSCAN
# cost ~2-3 ms per 1 000 points on a loaded 2-core machine, in the cloud worker's process
# (ros/cloud_process.py), whose CPU and the obstacles' age grow with it: 10 000 points keep a
# cloud to tens of ms; a 32 × 128 lidar fits.
BUDGET_POINTS = 10_000


def cloud_table(skip: tuple[str, ...] = ()) -> ParameterTable:
    """`cloud.<field>` for CloudConfig's fields (core/contact/lidar_fusion.py) but `skip`,
    and `cloud.budget_points`."""
    return rows(CloudConfig, 'cloud.', skip=skip) + ParameterTable(Parameter(
        'cloud.budget_points', 'a cloud of more points is decimated to this many (every k-th '
        'point, picked before decoding): the cloud worker\'s CPU per cloud, and the age of '
        'the obstacles it finds, grow with it', BUDGET_POINTS, (100, 1_000_000)))
