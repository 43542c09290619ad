"""The suite's recordings: MCAP rosbag2 bags that Foxglove opens and `ros2 bag play` plays.

A `SuiteBag` holds the topics of nodes.yaml as they were sent (CDR bytes, as DDS carries them
and rclpy's `serialize_message` makes them), plus what a viewer needs to draw the arm:

- `/robot_description` (std_msgs/String, the URDF, once, offered transient local as
  robot_state_publisher does), with its `package://` mesh URIs turned into `file://` paths
  that exist on this machine, so that Foxglove and rviz find the meshes without a ROS
  package path;
- `/tf` (tf2_msgs/TFMessage): every link of the robot in the base link's frame, from the
  model's forward kinematics (core/robot/robot_model.py) of the joint states, stamped with the joint
  state's stamp, at most `tf_rate` times a second of stamps (viewers interpolate between).

Log times are the times the messages were received (ns of the recorder's clock); `ros2 bag
play` replays in that order with the QoS recorded per topic (latched topics transient local).
Reading (`messages`) gives rosbags messages in log-time order. Uses rosbags, not rclpy.

Every bag of the package is read and written here: the suite's recordings, and the
joint-state recordings `identify` and `calibrate` take (`read_recording`: a bag, or a CSV
file of core/identification/recording.py; `write_bag`). Those are rosbag2 directories
(sqlite3 or mcap storage; a .db3 / .mcap file inside one works too) with
sensor_msgs/msg/JointState on a topic (default /joint_states); the header stamp is the sample
time (the bag's receive time when the stamp is zero), and messages that do not carry all the
requested joints (e.g. a gripper's own joint states) are skipped.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path
from typing import Iterator

import numpy as np
import pinocchio as pin

from contact_estimation import manifest
from contact_estimation.core.chain.joint_order import JointOrder
from contact_estimation.core.chain.stamps import nanoseconds, sec_nanosec
from contact_estimation.core.identification.recording import (JointRecording, RecordingError,
                                                              joint_state_row, read_csv)
from contact_estimation.core.robot.robot_model import RobotModel

TF_TOPIC = '/tf'
TF_TYPE = 'tf2_msgs/msg/TFMessage'
DESCRIPTION_TOPIC = '/robot_description'
DESCRIPTION_TYPE = 'std_msgs/msg/String'
JOINT_STATES = manifest.topic('joint_state_listener', 'joint_states')
JOINT_STATE = 'sensor_msgs/msg/JointState'
STORAGES = ('sqlite3', 'mcap')  # of a joint-state recording (`write_bag`)
DEFAULT_TF_RATE = 100.0  # Hz of joint-state stamps
# Topics whose publishers are transient local (the latched stop signals, input_stale), as
# nodes.yaml names them (relative): a late subscriber, rviz among them, gets their last value
# at once.
LATCHED = tuple(manifest.node(name).topic(key) for name, key in (
    ('collision_detector', 'stop'), ('proximity_monitor', 'stop'),
    ('joint_state_listener', 'input_stale')))
_PACKAGE_URI = re.compile(r'package://([^/"\s]+)/([^"\s<]+)')


def typestore():
    """The rosbags type store of the ROS 2 release rclpy comes from (Kilted)."""
    from rosbags.typesys import Stores, get_typestore
    return get_typestore(Stores.ROS2_KILTED)


def suite_topics(namespace: str = '') -> dict[str, str]:
    """Every topic nodes.yaml names (published or read), fully qualified in `namespace`, with
    its message type; not /clock (the bag has its own times)."""
    topics = {}
    for spec in manifest.nodes().values():
        for key in list(spec.publishes) + list(spec.subscribes):
            if spec.topic(key) != '/clock':
                topics[spec.resolved_topic(key, namespace)] = spec.message_type(key)
    return topics


def viewer_urdf(robot: RobotModel) -> str:
    """The robot's URDF with each `package://pkg/path` mesh URI that resolves in the model's
    package directories replaced by its `file://` path (others are left as they are)."""
    def resolve(match: re.Match) -> str:
        for directory in robot.package_dirs:
            for candidate in (Path(directory, match[1], match[2]), Path(directory, match[2])):
                if candidate.is_file():
                    return candidate.resolve().as_uri()
        return match[0]
    return _PACKAGE_URI.sub(resolve, robot.urdf_xml)


def latched(topic: str) -> bool:
    """Whether `topic` (fully qualified, in any namespace) is offered transient local."""
    return topic == DESCRIPTION_TOPIC or any(topic.endswith(f'/{name}') for name in LATCHED)


def recorded_namespace(bag: str | os.PathLike) -> str:
    """The namespace of the suite `bag` recorded ('' for the root): the one its joint states
    topic is in. ValueError when it holds the joint states of several namespaces."""
    from rosbags.highlevel import AnyReader
    with AnyReader([Path(bag)], default_typestore=typestore()) as reader:
        topics = {connection.topic for connection in reader.connections}
    found = sorted({t[:-len(JOINT_STATES)].strip('/') for t in topics
                    if t.endswith(JOINT_STATES)})
    if len(found) > 1:
        raise ValueError(f'{bag} holds the joint states of several namespaces '
                         f'({", ".join(f"/{ns}" if ns else "the root" for ns in found)}): '
                         'choose one with --namespace')
    return found[0] if found else ''


def _qos(transient_local: bool):
    from rosbags.interfaces import (Qos, QosDurability, QosHistory, QosLiveliness,
                                    QosReliability, QosTime)
    infinite = QosTime(sec=0x7FFFFFFF, nsec=0xFFFFFFFF)
    return Qos(history=QosHistory.KEEP_LAST, depth=10 if transient_local else 100,
               reliability=QosReliability.RELIABLE,
               durability=(QosDurability.TRANSIENT_LOCAL if transient_local
                           else QosDurability.VOLATILE),
               deadline=infinite, lifespan=infinite, liveliness=QosLiveliness.AUTOMATIC,
               liveliness_lease_duration=infinite, avoid_ros_namespace_conventions=False)


def _stamp(store, ns: int):
    sec, nanosec = sec_nanosec(ns)
    return store.types['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec)


def remove_earlier_bag(path: str | os.PathLike) -> None:
    """Remove an earlier bag at `path` that a SuiteBag wrote (metadata.yaml and .mcap files
    only, finished or left by a run that died); refuse anything else there."""
    path = Path(path)
    if not path.exists():
        return
    if not path.is_dir() or any(p.name != 'metadata.yaml' and p.suffix != '.mcap'
                                for p in path.iterdir()):
        raise FileExistsError(f'{path} exists and is not a recording of ours: move it away')
    shutil.rmtree(path)


class SuiteBag:
    """A new MCAP rosbag2 directory at `path` (it must not exist) for `robot`'s suite.

    `write(topic, msgtype, log_ns, cdr)` adds one message (its topic is added on first use);
    `write_joint_state(log_ns, stamp_ns, names, positions, cdr)` also writes /tf when due.
    Close it (or use it as a context manager) to write metadata.yaml.
    """

    def __init__(self, path: str | os.PathLike, robot: RobotModel,
                 tf_rate: float = DEFAULT_TF_RATE):
        from rosbags.rosbag2 import StoragePlugin, Writer
        self.path = Path(path)
        self.robot = robot
        self._store = typestore()
        self._writer = Writer(self.path, version=Writer.VERSION_LATEST,
                              storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections = {}
        self.counts: dict[str, int] = {}
        self._tf_period_ns = int(1e9 / tf_rate)
        self._last_tf_ns: int | None = None
        self._links = [f.name for f in robot.model.frames
                       if f.type == pin.FrameType.BODY and f.name != robot.base_link]
        self._joint_order = JointOrder(robot.joint_names)
        self._description_written = False

    def __enter__(self) -> 'SuiteBag':
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._writer is None

    def close(self) -> None:
        """Write the metadata and close the bag (again: nothing)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def write(self, topic: str, msgtype: str, log_ns: int, cdr: bytes) -> None:
        """One serialised message (CDR, little endian, as rclpy and DDS make them)."""
        if not self._description_written:
            self._description_written = True
            description = self._store.types[DESCRIPTION_TYPE](data=viewer_urdf(self.robot))
            self.write(DESCRIPTION_TOPIC, DESCRIPTION_TYPE, log_ns,
                       self._store.serialize_cdr(description, DESCRIPTION_TYPE))
        connection = self._connections.get(topic)
        if connection is None:
            connection = self._connections[topic] = self._writer.add_connection(
                topic, msgtype, typestore=self._store,
                offered_qos_profiles=[_qos(latched(topic))])
        self._writer.write(connection, log_ns, cdr)
        self.counts[topic] = self.counts.get(topic, 0) + 1

    def write_joint_state(self, log_ns: int, stamp_ns: int, names: list[str],
                          positions, cdr: bytes, topic: str = JOINT_STATES) -> None:
        """A JointState on `topic`, and /tf from its positions once `1 / tf_rate` of stamps
        has passed since the last (skipped when it lacks a joint of the chain)."""
        self.write(topic, JOINT_STATE, log_ns, cdr)
        if self._last_tf_ns is not None and 0 <= stamp_ns - self._last_tf_ns < self._tf_period_ns:
            return
        order = self._joint_order.map(names).model_order
        if order is None:
            return
        self._last_tf_ns = stamp_ns
        q = np.asarray(positions, dtype=float)[order]
        self.write(TF_TOPIC, TF_TYPE, log_ns, self._tf_cdr(stamp_ns, q))

    def _tf_cdr(self, stamp_ns: int, q: np.ndarray) -> bytes:
        types = self._store.types
        Header, Transform = types['std_msgs/msg/Header'], types['geometry_msgs/msg/Transform']
        Vector3 = types['geometry_msgs/msg/Vector3']
        Quaternion = types['geometry_msgs/msg/Quaternion']
        header = Header(stamp=_stamp(self._store, stamp_ns), frame_id=self.robot.base_link)
        transforms = []
        for link, (rotation, translation) in zip(self._links,
                                                 self.robot.link_poses(q, self._links)):
            quat = pin.Quaternion(rotation)
            transforms.append(types['geometry_msgs/msg/TransformStamped'](
                header=header, child_frame_id=link,
                transform=Transform(translation=Vector3(*map(float, translation)),
                                    rotation=Quaternion(x=quat.x, y=quat.y, z=quat.z,
                                                        w=quat.w))))
        return self._store.serialize_cdr(types[TF_TYPE](transforms=transforms), TF_TYPE)


def messages(path: str | os.PathLike, topics: list[str] | None = None
             ) -> Iterator[tuple[str, str, int, object]]:
    """(topic, message type, log time ns, rosbags message) of a rosbag2 bag (MCAP or sqlite3,
    ROS 2 types), in log-time order; only `topics` when given."""
    from rosbags.highlevel import AnyReader
    store = typestore()
    with AnyReader([Path(path)], default_typestore=store) as reader:
        connections = [c for c in reader.connections if topics is None or c.topic in topics]
        if not connections:  # rosbags reads every connection when given none
            return
        for connection, log_ns, raw in reader.messages(connections=connections):
            yield connection.topic, connection.msgtype, log_ns, reader.deserialize(
                raw, connection.msgtype)


def messages_by_stamp(bag: str, types: dict[str, str]
                      ) -> tuple[list[tuple[int, str, bytes]], list[str]]:
    """(stamp ns, topic, CDR) of the bag's messages on the topics of `types` whose type is
    the one given, in header stamp order (the log time for a zero stamp; every input type
    begins with a std_msgs/Header); and a line for each topic skipped for its type.

    The messages are held in memory as CDR (~300 bytes per joint state)."""
    from rosbags.highlevel import AnyReader

    found, skipped = [], []
    with AnyReader([Path(bag)], default_typestore=typestore()) as reader:
        connections = []
        for connection in reader.connections:
            if connection.topic not in types:
                continue
            if connection.msgtype != types[connection.topic]:
                skipped.append(f'{connection.topic} is {connection.msgtype}, not '
                               f'{types[connection.topic]}: not replayed')
                continue
            connections.append(connection)
        for connection, log_ns, raw in reader.messages(connections=connections):
            found.append((cdr_header_stamp_ns(raw) or log_ns, connection.topic, bytes(raw)))
    found.sort(key=lambda entry: entry[0])
    return found, skipped


def cdr_header_stamp_ns(raw) -> int:
    """The stamp of a CDR message that begins with a std_msgs/Header: after the 4-byte
    encapsulation (byte 1: 1 little endian, 0 big endian), int32 sec and uint32 nanosec."""
    return nanoseconds(*struct.unpack_from('<iI' if raw[1] == 1 else '>iI', raw, 4))


def stamp_ns(msg) -> int:
    """A message's header stamp in ns (a bag reader's message or rclpy's)."""
    return nanoseconds(msg.header.stamp.sec, msg.header.stamp.nanosec)


# ------------------------------------------------ joint-state recordings (identify, calibrate)
def read_recording(path, robot: RobotModel | None = None,
                   topic: str = JOINT_STATES) -> JointRecording:
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


def _bag_directory(path: Path) -> Path:
    """The rosbag2 directory: `path` itself, or the folder of a .db3 / .mcap file."""
    if path.is_file() and path.suffix in ('.db3', '.mcap'):
        path = path.parent
    if not (path / 'metadata.yaml').is_file():
        raise RecordingError(f'{path} is neither a CSV file nor a rosbag2 directory '
                             f'(no metadata.yaml)')
    return path


def read_bag(path, topic: str = JOINT_STATES,
             joint_names: list[str] | None = None) -> JointRecording:
    """JointState messages on `topic`, for `joint_names` (default: those of the first message)."""
    from rosbags.highlevel import AnyReader, AnyReaderError

    directory = _bag_directory(Path(path))
    rows, skipped = [], 0
    try:
        with AnyReader([directory], default_typestore=typestore()) as reader:
            connections = [c for c in reader.connections if c.topic == topic]
            if not connections:
                topics = sorted({c.topic for c in reader.connections})
                raise RecordingError(f'{directory} has no topic {topic} (it has {topics})')
            if any(c.msgtype != JOINT_STATE for c in connections):
                raise RecordingError(f'{topic} in {directory} is {connections[0].msgtype}, '
                                     f'not {JOINT_STATE}')
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


def write_bag(path, recording: JointRecording, topic: str = JOINT_STATES,
              storage: str = 'sqlite3') -> None:
    """Write `recording` as JointState messages to a new rosbag2 directory."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    if storage not in STORAGES:
        raise ValueError(f'storage {storage!r}: choose one of {", ".join(STORAGES)}')
    store = typestore()
    JointState = store.types[JOINT_STATE]
    Header = store.types['std_msgs/msg/Header']
    Time = store.types['builtin_interfaces/msg/Time']
    plugin = StoragePlugin.MCAP if storage == 'mcap' else StoragePlugin.SQLITE3
    with Writer(os.fspath(path), version=Writer.VERSION_LATEST, storage_plugin=plugin) as writer:
        connection = writer.add_connection(topic, JOINT_STATE, typestore=store)
        for k, t in enumerate(recording.t):
            stamp_ns = int(round(t * 1e9))
            sec, nanosec = sec_nanosec(stamp_ns)
            msg = JointState(
                header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=''),
                name=list(recording.joint_names), position=recording.q[k].astype(float),
                velocity=recording.v[k].astype(float), effort=recording.effort[k].astype(float))
            writer.write(connection, stamp_ns, store.serialize_cdr(msg, JOINT_STATE))
