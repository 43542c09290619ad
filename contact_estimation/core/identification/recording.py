"""Joint-state recordings (t, q, q̇, τ) read from ROS 2 bags or CSV files, and written to bags.

CSV format (one header line, then one row per sample; lines starting with '#' are comments):

    t,<joint>/position,<joint>/velocity,<joint>/effort,...   (the three columns for every joint,
                                                              in any order)

with t in s, position in rad (m for prismatic joints), velocity in rad/s and effort in N·m —
the fields of sensor_msgs/JointState. A trajectory file written by `identify plan` has the
same columns without efforts.

Bags: rosbag2 directories (sqlite3 or mcap storage; a .db3 / .mcap file inside one works too)
with sensor_msgs/msg/JointState on a topic (default /joint_states). The header stamp is the
sample time (the bag's receive time when the stamp is zero). Messages that do not carry all
the requested joints (e.g. a gripper's own joint states) are skipped.
"""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contact_estimation.core.chain.joint_order import JointOrder
from contact_estimation.core.chain.stamps import nanoseconds, sec_nanosec
from contact_estimation.core.robot.robot_model import RobotModel

JOINT_STATE_TYPE = 'sensor_msgs/msg/JointState'
DEFAULT_TOPIC = '/joint_states'
FIELDS = ('position', 'velocity', 'effort')
STORAGES = ('sqlite3', 'mcap')


class RecordingError(ValueError):
    """A recording cannot be read or does not hold what is asked of it."""


@dataclass
class JointRecording:
    """Samples of joint states; arrays are (N,) for t and (N, n) for q, v, effort."""

    joint_names: list[str]
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    effort: np.ndarray
    source: str = ''

    def in_model_order(self, robot: RobotModel) -> 'JointRecording':
        """The same samples with columns in `robot.joint_names` order (extra joints dropped)."""
        columns = JointOrder(robot.joint_names).map(self.joint_names).model_order
        if columns is None:
            missing = [name for name in robot.joint_names if name not in self.joint_names]
            raise RecordingError(
                f'{self.source or "the recording"} has no data for joints {missing} of robot '
                f'{robot.name or "(unnamed)"}; it has joints {self.joint_names}: a recording of '
                f'another robot?')
        return JointRecording(list(robot.joint_names), self.t, self.q[:, columns],
                              self.v[:, columns], self.effort[:, columns], self.source)


def read_recording(path, robot: RobotModel | None = None,
                   topic: str = DEFAULT_TOPIC) -> JointRecording:
    """A CSV file or a rosbag2 bag, in `robot`'s joint order when a robot is given."""
    path = Path(path)
    if not path.exists():
        raise RecordingError(f'recording {str(path)!r} does not exist')
    names = list(robot.joint_names) if robot is not None else None
    if path.is_file() and path.suffix.lower() == '.csv':
        recording = read_csv(path)
    else:
        recording = read_bag(path, topic, names)
    return recording.in_model_order(robot) if robot is not None else recording


def read_csv(path) -> JointRecording:
    """Read the CSV format of the module docstring."""
    path = Path(path)
    try:
        with open(path, encoding='utf-8', newline='') as f:
            lines = [line for line in f if line.strip() and not line.lstrip().startswith('#')]
    except (OSError, UnicodeDecodeError) as err:
        raise RecordingError(f'cannot read {path}: {err}') from err
    if not lines:
        raise RecordingError(f'{path} is empty')
    header = [h.strip() for h in next(csv.reader(lines[:1]))]
    if 't' not in header:
        raise RecordingError(f'{path}: the header has no "t" (time) column: {lines[0].strip()}')
    joints = list(dict.fromkeys(h.rpartition('/')[0] for h in header if '/' in h))
    columns = {}
    for joint in joints:
        for name in FIELDS:
            key = f'{joint}/{name}'
            if key not in header:
                raise RecordingError(f'{path}: joint {joint!r} has no "{key}" column')
            columns[key] = header.index(key)
    if not joints:
        raise RecordingError(f'{path}: no "<joint>/position" columns in the header')
    if len(lines) < 2:
        raise RecordingError(f'{path} has a header but no samples')
    try:
        table = np.loadtxt(lines[1:], delimiter=',', ndmin=2)
    except ValueError as err:
        raise RecordingError(f'{path}: unreadable sample rows ({err})') from err
    if table.shape[1] != len(header):
        raise RecordingError(f'{path}: rows have {table.shape[1]} values, the header '
                             f'{len(header)} columns')

    def block(name):
        return table[:, [columns[f'{j}/{name}'] for j in joints]]

    return JointRecording(joints, table[:, header.index('t')], block('position'),
                          block('velocity'), block('effort'), str(path))


def write_csv(path, recording: JointRecording) -> None:
    """Write `recording` in the CSV format of the module docstring."""
    header = ['t'] + [f'{j}/{name}' for j in recording.joint_names for name in FIELDS]
    blocks = np.stack([recording.q, recording.v, recording.effort], axis=2)  # N × n × 3
    table = np.column_stack([recording.t, blocks.reshape(len(recording.t), -1)])
    np.savetxt(path, table, delimiter=',', header=','.join(header), comments='', fmt='%.17g')


def _bag_directory(path: Path) -> Path:
    """The rosbag2 directory: `path` itself, or the folder of a .db3 / .mcap file."""
    if path.is_file() and path.suffix in ('.db3', '.mcap'):
        path = path.parent
    if not (path / 'metadata.yaml').is_file():
        raise RecordingError(f'{path} is neither a CSV file nor a rosbag2 directory '
                             f'(no metadata.yaml)')
    return path


def read_bag(path, topic: str = DEFAULT_TOPIC,
             joint_names: list[str] | None = None) -> JointRecording:
    """JointState messages on `topic`, for `joint_names` (default: those of the first message)."""
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.typesys import Stores, get_typestore

    directory = _bag_directory(Path(path))
    rows, skipped = [], 0
    try:
        with AnyReader([directory], default_typestore=get_typestore(Stores.LATEST)) as reader:
            connections = [c for c in reader.connections if c.topic == topic]
            if not connections:
                topics = sorted({c.topic for c in reader.connections})
                raise RecordingError(f'{directory} has no topic {topic} (it has {topics})')
            if any(c.msgtype != JOINT_STATE_TYPE for c in connections):
                raise RecordingError(f'{topic} in {directory} is {connections[0].msgtype}, '
                                     f'not {JOINT_STATE_TYPE}')
            order = None if joint_names is None else JointOrder(joint_names)
            for connection, receive_ns, raw in reader.messages(connections=connections):
                msg = reader.deserialize(raw, connection.msgtype)
                order = order or JointOrder(msg.name)
                row = joint_state_row(msg, order, receive_ns, directory)
                if row is None:
                    skipped += 1
                else:
                    rows.append(row)
    except AnyReaderError as err:
        raise RecordingError(f'cannot read the bag {directory}: {err}') from err
    if not rows:
        raise RecordingError(f'{topic} in {directory} has no message with all joints '
                             f'{joint_names} ({skipped} messages with other joints)')
    table = np.array(rows)
    joint_names = order.joint_names
    n = len(joint_names)
    return JointRecording(list(joint_names), table[:, 0], table[:, 1:1 + n],
                          table[:, 1 + n:1 + 2 * n], table[:, 1 + 2 * n:], str(directory))


def joint_state_row(msg, order: JointOrder, receive_ns: int = 0,
                    source: object = 'a joint state') -> list[float] | None:
    """[t, q, q̇, τ] of a JointState message (rclpy's or a bag reader's) in `order`'s joints,
    t in s from its stamp (`receive_ns` when the stamp is zero); None when it lacks one of
    those joints, RecordingError when it lacks values."""
    names = list(msg.name)
    rows = order.map(names).model_order
    if rows is None:
        return None
    row = [(nanoseconds(msg.header.stamp.sec, msg.header.stamp.nanosec) or receive_ns) * 1e-9]
    for name in FIELDS:
        values = np.asarray(getattr(msg, name), dtype=float)
        if values.size != len(names):
            raise RecordingError(f'{source}: a JointState message has {values.size} {name} '
                                 f'values for {len(names)} joints; identification needs '
                                 f'position, velocity and effort of every joint')
        row.extend(values[rows])
    return row


def write_bag(path, recording: JointRecording, topic: str = DEFAULT_TOPIC,
              storage: str = 'sqlite3') -> None:
    """Write `recording` as JointState messages to a new rosbag2 directory."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    if storage not in STORAGES:
        raise ValueError(f'storage {storage!r}: choose one of {", ".join(STORAGES)}')
    store = get_typestore(Stores.LATEST)
    JointState = store.types[JOINT_STATE_TYPE]
    Header = store.types['std_msgs/msg/Header']
    Time = store.types['builtin_interfaces/msg/Time']
    plugin = StoragePlugin.MCAP if storage == 'mcap' else StoragePlugin.SQLITE3
    with Writer(os.fspath(path), version=Writer.VERSION_LATEST, storage_plugin=plugin) as writer:
        connection = writer.add_connection(topic, JOINT_STATE_TYPE, typestore=store)
        for k, t in enumerate(recording.t):
            stamp_ns = int(round(t * 1e9))
            sec, nanosec = sec_nanosec(stamp_ns)
            msg = JointState(
                header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=''),
                name=list(recording.joint_names), position=recording.q[k].astype(float),
                velocity=recording.v[k].astype(float), effort=recording.effort[k].astype(float))
            writer.write(connection, stamp_ns, store.serialize_cdr(msg, JOINT_STATE_TYPE))
