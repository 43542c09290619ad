"""Settings of the simulated cobot: physics, friction, controller, sensor noise, the driver's
effort, a payload, lidar."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.pose import position, rotation_from_rpy
from contact_estimation.core.sim.driver import MotorCurrent


@dataclass
class LidarConfig:
    """Rays from `position` (base frame); the lidar's x axis looks forward, rotated by `rpy`
    (roll, pitch, yaw about the fixed axes: core/robot/pose.py, the one mounting convention).
    `rows` × `columns` rays spread over the vertical and
    horizontal fields of view (rad)."""

    position: tuple = (1.5, 0.0, 1.0)
    rpy: tuple = (0.0, 0.35, np.pi)
    rows: int = 32
    columns: int = 128
    vertical_fov: float = 1.0
    horizontal_fov: float = 1.6
    max_range: float = 5.0
    range_noise: float = 0.005  # m, Gaussian σ
    floor: bool = True          # a floor plane the lidar sees (the arm never touches it)
    floor_height: float = 0.0   # m, in the base frame

    def __post_init__(self):
        """ValueError naming lidar.position or lidar.rpy unless 3 finite numbers each."""
        self.position = tuple(position(self.position, 'lidar.position'))
        rotation_from_rpy(self.rpy, 'lidar.rpy')
        self.rpy = tuple(float(angle) for angle in self.rpy)

    def directions(self) -> np.ndarray:
        """Unit ray directions (rows·columns × 3) in the base frame."""
        elevation = np.linspace(-self.vertical_fov / 2, self.vertical_fov / 2, self.rows)
        azimuth = np.linspace(-self.horizontal_fov / 2, self.horizontal_fov / 2, self.columns)
        el, az = (a.ravel() for a in np.meshgrid(elevation, azimuth, indexing='ij'))
        local = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=1)
        return local @ rotation_from_rpy(self.rpy, 'lidar.rpy').T


DEFAULT_FRICTION = (0.3, 40.0, 4.0, 1.0, 40.0, 0.2)  # seed 001 eq. 23: γ1 … γ6, every joint


@dataclass
class SimConfig:
    timestep: float = 0.001
    integrator: str = 'implicitfast'
    # Joint friction, seed 001 eq. 23: one row (γ1 … γ6) for every joint or one per joint.
    friction: np.ndarray = field(default_factory=lambda: np.array(DEFAULT_FRICTION))
    # Computed-torque controller: closed-loop natural frequency (rad/s) and damping ratio;
    # the share of the friction model it feeds forward (at the reference velocity).
    natural_frequency: float = 25.0
    damping_ratio: float = 1.0
    friction_compensation: float = 0.7
    position_noise: float = 1e-5  # rad, Gaussian σ of the measured joint positions
    velocity_noise: float = 1e-3  # rad/s
    effort_noise: float = 0.05    # N·m
    ft_force_noise: float = 0.1   # N
    ft_torque_noise: float = 0.01  # N·m
    noise_seed: int = 0
    # Effort as a driver computes it from motor current (seed 001 eqs. 1–2) instead of a joint
    # torque sensor's τ + effort_noise; None: the torque sensor.
    motor_current: MotorCurrent | None = None
    # Carried by the arm; its controller compensates it (as a real arm told of its tool), the
    # estimators see it only when they are told too. A scenario's payload wins.
    payload: Payload = field(default_factory=Payload)
    lidar: LidarConfig = field(default_factory=LidarConfig)
