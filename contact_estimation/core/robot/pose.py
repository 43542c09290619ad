"""A sensor's mounting, as every parameter file gives it: position x y z (m) and roll, pitch,
yaw (rad) about the fixed x, y, z axes of the parent frame, as a URDF `<origin xyz rpy>`.

The lidar, the skeleton tracker and the F/T sensor of the nodes, and the simulated lidar,
all use this one convention: R = R_z(yaw) R_y(pitch) R_x(roll).
"""
from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

# The ranges of a mounting's parameters: a sensor within 100 m of the robot's base (a cell is
# tens of metres at most), and each angle within a turn either way (a URDF rpy is within ±π;
# ±2π also takes the same angle given the other way round).
POSITION_RANGE = (-100.0, 100.0)
RPY_RANGE = (-2 * np.pi, 2 * np.pi)


def rotation_from_rpy(rpy, name: str = 'rpy') -> np.ndarray:
    """3×3 rotation of roll, pitch, yaw (rad, fixed axes); ValueError naming `name` unless
    three finite numbers."""
    angles = np.asarray(rpy, dtype=float).ravel()
    if angles.shape != (3,) or not np.isfinite(angles).all():
        raise ValueError(f'{name} takes 3 finite numbers (roll, pitch, yaw in rad, about the '
                         f'fixed x, y, z axes), got {angles.tolist()}')
    return Rotation.from_euler('xyz', angles).as_matrix()


def rotation_from_quaternion(quaternion) -> np.ndarray:
    """3×3 rotation of a quaternion x y z w (ROS order, e.g. from TF); ValueError if not one."""
    q = np.asarray(quaternion, dtype=float).ravel()
    norm = np.linalg.norm(q) if q.shape == (4,) else 0.0
    if not np.isfinite(norm) or norm < 1e-6:
        raise ValueError(f'not a rotation quaternion (x, y, z, w): {q.tolist()}')
    return Rotation.from_quat(q / norm).as_matrix()


def position(xyz, name: str = 'position') -> np.ndarray:
    """x y z (m) as an array; ValueError naming `name` unless three finite numbers."""
    point = np.asarray(xyz, dtype=float).ravel()
    if point.shape != (3,) or not np.isfinite(point).all():
        raise ValueError(f'{name} takes 3 finite numbers (x, y, z in m), '
                         f'got {point.tolist()}')
    return point
