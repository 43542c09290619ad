"""Messages to arrays and back (sensor_msgs_py is not on PyPI: PointCloud2 is packed here)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PointStamped, Vector3, WrenchStamped
from sensor_msgs.msg import PointCloud2, PointField


def stamp_to_seconds(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def seconds_to_stamp(seconds: float) -> Time:
    sec = int(np.floor(seconds))
    nanosec = min(int(round((seconds - sec) * 1e9)), 999_999_999)
    return Time(sec=sec, nanosec=nanosec)


def vector3(v) -> Vector3:
    return Vector3(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def wrench_stamped(stamp: Time, frame_id: str, force, torque) -> WrenchStamped:
    msg = WrenchStamped()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.wrench.force, msg.wrench.torque = vector3(force), vector3(torque)
    return msg


def wrench_to_arrays(msg: WrenchStamped) -> tuple[np.ndarray, np.ndarray]:
    f, t = msg.wrench.force, msg.wrench.torque
    return np.array([f.x, f.y, f.z]), np.array([t.x, t.y, t.z])


def point_stamped(stamp: Time, frame_id: str, point) -> PointStamped:
    msg = PointStamped()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.point.x, msg.point.y, msg.point.z = (float(c) for c in point[:3])
    return msg


def _xyz_fields() -> list[PointField]:
    """Fields of their own for each cloud: a reader that edits one cloud's fields must not
    change every later cloud's."""
    return [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
            for i, n in enumerate('xyz')]


def xyz_to_cloud(stamp: Time, frame_id: str, points: np.ndarray) -> PointCloud2:
    """N×3 array (metres) → unorganised PointCloud2 with float32 x, y, z."""
    points = np.ascontiguousarray(points, dtype=np.float32).reshape(-1, 3)
    msg = PointCloud2()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.height, msg.width = 1, len(points)
    msg.fields = _xyz_fields()
    msg.is_bigendian = False
    msg.point_step, msg.row_step = 12, 12 * len(points)
    msg.is_dense = bool(np.isfinite(points).all())
    msg.data = points.tobytes()
    return msg


_NUMPY_TYPES = {PointField.INT8: 'i1', PointField.UINT8: 'u1', PointField.INT16: 'i2',
                PointField.UINT16: 'u2', PointField.INT32: 'i4', PointField.UINT32: 'u4',
                PointField.FLOAT32: 'f4', PointField.FLOAT64: 'f8'}


@dataclass(frozen=True)
class CloudLayout:
    """Where a PointCloud2's points lie in its data: everything of the message but the bytes
    and the header, so that another process can decode the bytes (ros/cloud_process.py).
    `fields`: (name, offset, datatype) of each PointField."""

    fields: tuple[tuple[str, int, int], ...]
    width: int
    height: int
    point_step: int
    row_step: int
    is_bigendian: bool

    @classmethod
    def of(cls, msg: PointCloud2) -> 'CloudLayout':
        return cls(tuple((f.name, f.offset, f.datatype) for f in msg.fields), msg.width,
                   msg.height, msg.point_step, msg.row_step, bool(msg.is_bigendian))


def xyz_layout(count: int) -> CloudLayout:
    """The layout of an N×3 float64 array's bytes (little-endian, C order) as a cloud."""
    fields = tuple((name, 8 * i, PointField.FLOAT64) for i, name in enumerate('xyz'))
    return CloudLayout(fields, count, 1, 24, 24 * count, False)


def cloud_to_xyz(msg: PointCloud2, budget: int | None = None) -> np.ndarray:
    """PointCloud2 with x, y, z fields of any numeric type → N×3 float64, non-finite dropped
    (`xyz_from_bytes`)."""
    return xyz_from_bytes(CloudLayout.of(msg), msg.data, budget)


def xyz_from_bytes(layout: CloudLayout, data, budget: int | None = None) -> np.ndarray:
    """A cloud's bytes (`data`, laid out as `layout` says) → N×3 float64, non-finite dropped.

    With a `budget`, a cloud of more points is decimated first: every k-th point (k the
    smallest stride that leaves at most `budget`) is picked from the raw bytes, and only
    those are decoded, so that the work and memory of a cloud are bounded by the budget
    whatever its size (issue 27: a 400 000-point cloud held the interpreter for seconds).

    Raises ValueError for a cloud without x, y, z, with fields of unknown type or outside its
    point, or whose sizes disagree with its data.
    """
    fields = {name: (offset, datatype) for name, offset, datatype in layout.fields}
    if not all(n in fields for n in 'xyz'):
        raise ValueError(f'cloud has fields {sorted(fields)}, needs x, y, z')
    count = layout.width * layout.height
    if layout.point_step * count > len(data) or layout.row_step * layout.height > len(data):
        raise ValueError(f'cloud of {count} points with point_step {layout.point_step} '
                         f'does not fit its {len(data)} bytes')
    unknown = [n for n in 'xyz' if fields[n][1] not in _NUMPY_TYPES]
    if unknown:
        raise ValueError(f'cloud field(s) {unknown} of unknown datatype')
    order = '>' if layout.is_bigendian else '<'
    try:
        dtype = np.dtype({'names': list('xyz'),
                          'formats': [order + _NUMPY_TYPES[fields[n][1]] for n in 'xyz'],
                          'offsets': [fields[n][0] for n in 'xyz'],
                          'itemsize': layout.point_step})
    except ValueError as err:  # fields beyond point_step, or overlapping
        raise ValueError(f'cloud fields do not fit its point_step {layout.point_step}: {err}')
    if count and layout.row_step < layout.width * layout.point_step:
        raise ValueError(f'cloud rows of {layout.row_step} bytes cannot hold {layout.width} '
                         f'points of {layout.point_step} bytes')
    stride = 1 if budget is None or count <= budget else -(-count // budget)
    # The picked points' bytes (rows row_step bytes apart, each `width` points of point_step
    # bytes), gathered in one indexing: no Python loop over rows, nothing else copied.
    width = max(layout.width, 1)
    picked = np.arange(0, count, stride, dtype=np.int64)
    starts = picked // width * layout.row_step + picked % width * layout.point_step
    raw = np.frombuffer(data, dtype=np.uint8)
    structured = raw[starts[:, None] + np.arange(layout.point_step)].view(dtype).reshape(-1)
    xyz = np.stack([structured[n].astype(np.float64) for n in 'xyz'], axis=-1)
    return xyz[np.isfinite(xyz).all(axis=1)]
