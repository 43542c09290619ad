"""sensor_msgs/JointState and geometry_msgs/WrenchStamped from their serialised bytes.

At 1 kHz, building a Python message object costs more than the work done with it (issue 26:
rclpy receiving one JointState stream takes 10.7 % of a core, 7.4 % with `raw=True`). A
subscription created with `raw=True` hands its callback the message as rclpy received it:
little-endian CDR (XCDR1), a 4-byte encapsulation header (00 01 00 00), then the fields,
each aligned to its size counted from the end of that header. Strings are a uint32 length
(with the terminating NUL) and the bytes; sequences a uint32 count and the elements; float64
elements are 8-aligned (no padding when the sequence is empty). Bytes after the last field
(serialisers pad the buffer) are ignored.

This module reads those bytes straight into plain values: `decode_joint_state` (stamp,
frame_id, names, position/velocity/effort as float64 arrays), `decode_wrench_stamped`
(stamp, frame_id, force, torque) and `stamp_of` (the header stamp alone, to drop a message
cheaply before decoding the rest). Bytes that are not such a message (truncated, garbled,
big-endian, a string without its NUL or not UTF-8) raise ValueError saying where; nothing
is read beyond the buffer.

How a node uses it (instead of the message type's callback):

    self.create_subscription(JointState, topic, self._on_raw, qos, raw=True)

    def _on_raw(self, raw: bytes) -> None:
        try:
            state = cdr.decode_joint_state(raw)
        except ValueError as err:
            self.problems.report(MALFORMED, str(err))   # counted, never a crash
            return
        ... state.stamp, state.names, state.position ...

The arrays are read-only views of `raw` (no copy): take a copy before writing into one.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

ENCAPSULATION = b'\x00\x01'  # CDR, little-endian (bytes 2–3: options, not used)
_HEADER = 4
_UINT32 = struct.Struct('<I')
_STAMP = struct.Struct('<iI')
_FLOAT64 = np.dtype('<f8')


class JointStateData(NamedTuple):
    """A sensor_msgs/JointState's values."""

    stamp: float                 # s: sec + nanosec · 1e-9 (as ros/conversions.stamp_to_seconds)
    sec: int
    nanosec: int
    frame_id: str
    names: tuple[str, ...]
    position: np.ndarray         # float64, read-only
    velocity: np.ndarray
    effort: np.ndarray


class WrenchStampedData(NamedTuple):
    """A geometry_msgs/WrenchStamped's values."""

    stamp: float
    sec: int
    nanosec: int
    frame_id: str
    force: np.ndarray            # (3,) float64, read-only
    torque: np.ndarray


class _Reader:
    """Reads fields in order from CDR bytes, checking each against the buffer's end."""

    __slots__ = ('raw', 'at', 'what')

    def __init__(self, raw, what: str):
        self.raw = raw = bytes(raw) if not isinstance(raw, bytes) else raw
        self.what = what
        if len(raw) < _HEADER + _STAMP.size:
            raise ValueError(f'{what}: {len(raw)} bytes, too short for a CDR header and stamp')
        if raw[:2] != ENCAPSULATION:
            raise ValueError(f'{what}: encapsulation {raw[:2].hex()}, expected '
                             f'{ENCAPSULATION.hex()} (little-endian CDR)')
        self.at = _HEADER

    def need(self, size: int, field: str) -> int:
        """The offset of `size` bytes of `field`, advanced past them."""
        at = self.at
        if size > len(self.raw) - at:
            raise ValueError(f'{self.what}: truncated: {field} needs {size} bytes at offset '
                             f'{at - _HEADER}, {len(self.raw) - at} left')
        self.at = at + size
        return at

    def align(self, size: int) -> None:
        self.at += -(self.at - _HEADER) % size

    def stamp(self) -> tuple[float, int, int]:
        sec, nanosec = _STAMP.unpack_from(self.raw, self.need(_STAMP.size, 'stamp'))
        return sec + nanosec * 1e-9, sec, nanosec

    def count(self, field: str, element_size: int) -> int:
        """A sequence's length, refused when its elements could not fit in what is left."""
        self.align(4)
        count, = _UINT32.unpack_from(self.raw, self.need(4, f'{field} length'))
        if count * element_size > len(self.raw) - self.at:
            raise ValueError(f'{self.what}: {field} of {count} elements does not fit in the '
                             f'{len(self.raw) - self.at} bytes left')
        return count

    def string(self, field: str) -> str:
        size = self.count(field, 1)
        if size == 0:
            return ''
        at = self.need(size, field)
        raw = self.raw
        if raw[at + size - 1] != 0:
            raise ValueError(f'{self.what}: {field} at offset {at - _HEADER} does not end '
                             'with NUL')
        try:
            return raw[at:at + size - 1].decode()
        except UnicodeDecodeError as err:
            raise ValueError(f'{self.what}: {field} is not UTF-8: {err}') from None

    def float64s(self, field: str, count: int | None = None) -> np.ndarray:
        """A float64 sequence, or `count` float64 (a fixed-size field)."""
        if count is None:
            count = self.count(field, 8)
            if count == 0:
                return np.empty(0)
        self.align(8)
        at = self.need(8 * count, field)
        return np.frombuffer(self.raw, _FLOAT64, count, at)


class _NameCache:
    """A driver sends the same names in every message: the bytes of the last list read are
    kept with the names, and the same bytes at the same offset (hence the same alignment)
    are the same names, not decoded again."""

    def __init__(self):
        self._last: tuple[int, bytes, tuple[str, ...]] = (0, b'', ())

    def read(self, reader: _Reader) -> tuple[str, ...]:
        at, block, names = self._last  # one tuple: threads never see half of an update
        start = reader.at
        if start == at and reader.raw.startswith(block, at):
            reader.at = at + len(block)
            return names
        names = tuple(reader.string('name') for _ in range(reader.count('names', 4)))
        self._last = (start, reader.raw[start:reader.at], names)
        return names


_NAMES = _NameCache()


def stamp_of(raw) -> float:
    """The header stamp (s) of a serialised stamped message, nothing else decoded."""
    reader = _Reader(raw, 'stamped message')
    return reader.stamp()[0]


class _JointStateShape:
    """A driver sends messages of one shape: the same length, frame_id and names, and the
    same number of positions, velocities and efforts. The last shape read is kept, and a
    message of that length whose bytes from the stamp's end to the names' end are those same
    bytes, and whose encapsulation and three counts are too (one `struct` read with the
    stamp), is read straight from the offsets: every check of a full read would find what
    it found then. Its arrays are slices of one view of the bytes from the first value to
    the last (each float64 array starts 8-aligned, so the slices fall on elements)."""

    def __init__(self):
        # (length, fixed bytes, frame_id, names, head Struct, counts, start, size, slices)
        self._last = None

    def read(self, raw: bytes) -> JointStateData | None:
        """`raw` decoded when it has the last shape read, else None."""
        last = self._last  # one tuple: threads never see half of an update
        if last is None or len(raw) != last[0] or not raw.startswith(last[1], _FIXED):
            return None
        head = last[4].unpack_from(raw)
        if head[3:] != last[5] or head[0] != ENCAPSULATION:
            return None
        return _from_shape(raw, last, head[1], head[2])

    def remember(self, reader: _Reader, fixed_end: int, frame_id: str,
                 names: tuple[str, ...]) -> JointStateData:
        """Read the three arrays after the names in full, and keep the message's shape."""
        arrays = []
        for field in ('position', 'velocity', 'effort'):
            reader.align(4)
            count_at = reader.at
            count = reader.float64s(field).size
            arrays.append((count_at, count, reader.at - 8 * count))
        (at0, n0, _), (at1, n1, _), (at2, n2, _) = arrays
        head = struct.Struct(f'<2s2xiI{at0 - _FIXED}xI{at1 - at0 - 4}xI{at2 - at1 - 4}xI')
        given = [(at, count) for _, count, at in arrays if count]
        start = min((at for at, _ in given), default=0)
        size = max((at + 8 * count for at, count in given), default=start) - start
        slices = tuple(slice((at - start) // 8, (at - start) // 8 + count) if count
                       else slice(0, 0) for _, count, at in arrays)
        shape = self._last = (len(reader.raw), reader.raw[_FIXED:fixed_end], frame_id, names,
                              head, (n0, n1, n2), start, size // 8, slices)
        sec, nanosec = _STAMP.unpack_from(reader.raw, _HEADER)
        return _from_shape(reader.raw, shape, sec, nanosec)


def _from_shape(raw: bytes, shape: tuple, sec: int, nanosec: int) -> JointStateData:
    """`raw`, a message of `shape` (`_JointStateShape`), stamped (`sec`, `nanosec`)."""
    _, _, frame_id, names, _, _, start, size, (position, velocity, effort) = shape
    values = np.frombuffer(raw, _FLOAT64, size, start)
    return JointStateData(sec + nanosec * 1e-9, sec, nanosec, frame_id, names,
                          values[position], values[velocity], values[effort])


_FIXED = _HEADER + _STAMP.size  # what follows the stamp: frame_id, names
_SHAPE = _JointStateShape()


def decode_joint_state(raw) -> JointStateData:
    """A sensor_msgs/JointState from its CDR bytes; ValueError when they are not one. At
    1 kHz a message of the last shape read is read from its offsets (`_JointStateShape`)."""
    if isinstance(raw, bytes):
        known = _SHAPE.read(raw)
        if known is not None:
            return known
    reader = _Reader(raw, 'JointState')
    reader.stamp()
    frame_id = reader.string('frame_id')
    names = _NAMES.read(reader)
    return _SHAPE.remember(reader, reader.at, frame_id, names)


def decode_wrench_stamped(raw) -> WrenchStampedData:
    """A geometry_msgs/WrenchStamped from its CDR bytes; ValueError when they are not one."""
    reader = _Reader(raw, 'WrenchStamped')
    stamp, sec, nanosec = reader.stamp()
    frame_id = reader.string('frame_id')
    wrench = reader.float64s('wrench', 6)
    return WrenchStampedData(stamp, sec, nanosec, frame_id, wrench[:3], wrench[3:])
