"""Sensor messages into the robot's base frame: the frame lookup, cloud decoding and cloud
parameters that every node reading a lidar or a tracker shares (the contact localizer, the
proximity monitor).

A message's frame_id is the base frame, the frame named by `<prefix>.frame` whose pose in
the base frame `<prefix>.position` and `<prefix>.orientation` give, or any frame TF knows
when tf2_ros is installed (a ROS distribution has it; the PyPI wheels do not).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
from sensor_msgs.msg import PointCloud2
from std_msgs.msg import Header

from contact_estimation.core.contact.lidar_fusion import CloudConfig, to_base_frame
from contact_estimation.ros.conversions import cloud_to_xyz

try:  # a ROS distribution has it; the PyPI wheels do not
    import tf2_ros
except ImportError:
    tf2_ros = None

IDENTITY = ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])  # translation, quaternion x y z w
CLOUD_DEFAULTS = dataclasses.asdict(CloudConfig())


class SensorMessageError(ValueError):
    """A sensor message a node cannot use; `kind` is the problem's count on /diagnostics."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


class SensorFrame:
    """Where the frames of one sensor's messages are in the base frame.

    Declares `<prefix>.frame`, `<prefix>.position` (x y z, m) and `<prefix>.orientation`
    (quaternion x y z w) on `node`, a SuiteNode; `apply(changes)` takes new values at run
    time (CloudError when they are no pose), or `proposed(changes)` checks them and
    `use(proposed)` takes them.
    """

    def __init__(self, node, prefix: str, sensor: str):
        self._node, self._prefix, self._sensor = node, prefix, sensor
        node.declare(f'{prefix}.frame', '', f"the {sensor}'s frame_id, whose pose the next "
                     "two give ('' = none: messages in the base frame, or frames TF knows)")
        node.declare(f'{prefix}.position', list(IDENTITY[0]),
                     f'{sensor} origin x y z in the base frame, m')
        node.declare(f'{prefix}.orientation', list(IDENTITY[1]),
                     f'{sensor} orientation in the base frame, quaternion x y z w')
        self.parameters = tuple(f'{prefix}.{name}' for name in ('frame', 'position',
                                                                  'orientation'))
        self._tf_buffer = None  # made on the first message in a frame only TF knows
        self.apply({})

    def apply(self, changes: dict[str, Any]) -> None:
        """Take the pose parameters with `changes` applied; CloudError on a bad pose."""
        self.use(self.proposed(changes))

    def proposed(self, changes: dict[str, Any]) -> tuple[str, tuple]:
        """(frame, pose) of the parameters with `changes` applied, not yet in use (`use`),
        so that a node checks every changed parameter before it changes anything;
        CloudError on a bad pose."""
        value = lambda name: changes.get(name, self._node.value(name))  # noqa: E731
        frame, position, orientation = (value(name) for name in self.parameters)
        to_base_frame(np.zeros((0, 3)), position, orientation)  # CloudError on a bad pose
        return frame.lstrip('/'), (list(position), list(orientation))

    def use(self, proposed: tuple[str, tuple]) -> None:
        self.frame, self.pose = proposed

    def to_base(self, header: Header, points: np.ndarray) -> np.ndarray:
        """Points (N×3) in the message's frame → base frame; SensorMessageError
        'unknown_frame' when the frame's pose is not known."""
        return to_base_frame(points, *self._pose_of(header))

    def _pose_of(self, header: Header) -> tuple:
        frame = header.frame_id.lstrip('/')
        base = self._node.robot.base_link
        if frame == base:
            return IDENTITY
        if self.frame and frame == self.frame:
            return self.pose
        if tf2_ros is None:
            raise SensorMessageError(
                'unknown_frame', f'{self._sensor} message in frame {frame!r}: neither the base '
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
            raise SensorMessageError('unknown_frame', f'{self._sensor} message in frame '
                                     f'{frame!r}: no transform to {base!r} ({err})') from err
        t, r = transform.translation, transform.rotation
        return [t.x, t.y, t.z], [r.x, r.y, r.z, r.w]


def cloud_in_base_frame(msg: PointCloud2, frame: SensorFrame, max_points: int) -> np.ndarray:
    """A PointCloud2 → its finite points (N×3) in the base frame. SensorMessageError
    'cloud_too_large' (`check_cloud_size`), 'unknown_frame', 'bad_cloud' (no x, y, z or
    truncated) or 'cloud_not_finite' (points, none of them finite). An empty cloud gives no
    points."""
    check_cloud_size(msg, max_points)
    try:
        points = cloud_to_xyz(msg)
    except ValueError as err:
        raise SensorMessageError('bad_cloud', str(err)) from err
    size = msg.width * msg.height
    if size and not len(points):
        raise SensorMessageError('cloud_not_finite', f'cloud of {size} points, none of them '
                                 'finite')
    return frame.to_base(msg.header, points)


def check_cloud_size(msg: PointCloud2, max_points: int) -> None:
    """SensorMessageError 'cloud_too_large' when the cloud declares more than `max_points`
    points, rows or columns (a cloud of width 0 × height 2 000 000 holds no point but took
    seconds row by row), or carries more data than that many of its points: refused from the
    header, before anything is decoded."""
    size = msg.width * msg.height
    most_bytes = max_points * max(msg.point_step, 1)
    if max(size, msg.width, msg.height) > max_points or len(msg.data) > most_bytes:
        raise SensorMessageError('cloud_too_large', f'cloud of {msg.width} × {msg.height} '
                                 f'points in {len(msg.data)} bytes exceeds cloud.max_points '
                                 f'= {max_points} (of {msg.point_step} bytes each)')


# CloudConfig field → description and range of its `cloud.<field>` parameter.
_CLOUD_PARAMETERS = {
    'workspace_min': ('the cloud is cropped to the box from here (x y z, m, base frame; its z '
                      'cuts the floor)', None, None),
    'workspace_max': ('... to here (x y z, m)', None, None),
    'voxel_size': ('voxel grid of the cloud, m', 1e-3, 1.0),
    'self_margin': ("points this close to the robot are its own, m (covers the pose's error "
                    "at the cloud's stamp)", 0.0, 1.0),
    'cluster_eps': ('DBSCAN neighbourhood, m', 1e-3, 1.0),
    'cluster_min_points': ('DBSCAN core size', 1, 1000),
    'max_points': ('larger clouds are refused', 1, 10_000_000),
    'max_age': ('processed obstacles older than this are stale, s', 1e-3, 60.0),
}


def declare_cloud_parameters(node, skip: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Declare `cloud.<field>` for CloudConfig's fields (core/contact/lidar_fusion.py) but `skip`,
    at
    CloudConfig's defaults; returns the names declared."""
    declared = []
    for field, (description, low, high) in _CLOUD_PARAMETERS.items():
        if field in skip:
            continue
        default = CLOUD_DEFAULTS[field]
        node.declare(f'cloud.{field}', list(default) if isinstance(default, tuple) else default,
                     description, low, high)
        declared.append(f'cloud.{field}')
    return tuple(declared)


def cloud_config(value: Callable[[str], Any], declared: tuple[str, ...]) -> CloudConfig:
    """CloudConfig from the `declared` cloud parameters (the rest at their defaults);
    CloudError when the values are unusable."""
    return CloudConfig(**{name.split('.', 1)[1]: value(name) for name in declared})
