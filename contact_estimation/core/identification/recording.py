"""Joint-state recordings (t, q, q̇, τ), their CSV files, and a JointState message as a row.

CSV format (one header line, then one row per sample; lines starting with '#' are comments):

    t,<joint>/position,<joint>/velocity,<joint>/effort,...   (the three columns for every joint,
                                                              in any order)

with t in s, position in rad (m for prismatic joints), velocity in rad/s and effort in N·m —
the fields of sensor_msgs/JointState. A trajectory file written by `identify plan` has the
same columns without efforts.

Recordings in rosbag2 bags are read and written by contact_estimation/suite_bag.py (every
bag of the package is there), which reads a CSV file too (`read_recording`).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contact_estimation.core.chain.joint_order import JointOrder
from contact_estimation.core.chain.stamps import nanoseconds
from contact_estimation.core.robot.robot_model import RobotModel

FIELDS = ('position', 'velocity', 'effort')


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
