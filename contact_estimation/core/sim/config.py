"""Settings of the simulated cobot: physics, friction, controller, sensor noise, the driver's
effort, a payload, lidar."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.pose import (POSITION_RANGE, RPY_RANGE, position,
                                                rotation_from_rpy)
from contact_estimation.core.settings import checked, setting
from contact_estimation.core.sim.driver import MotorCurrent


@dataclass
@checked
class LidarConfig:
    """Rays from `position` (base frame); the lidar's x axis looks forward, rotated by `rpy`
    (roll, pitch, yaw about the fixed axes: core/robot/pose.py, the one mounting convention).
    `rows` × `columns` rays spread over the vertical and
    horizontal fields of view (rad)."""

    position: tuple = setting((1.5, 0.0, 1.0), 'lidar origin x y z (m, base frame)',
                              range=POSITION_RANGE, size=3)
    rpy: tuple = setting((0.0, 0.35, np.pi), 'lidar roll pitch yaw (rad, base frame, fixed '
                         'axes); its x axis looks forward', range=RPY_RANGE, size=3)
    rows: int = setting(32, 'rays per column', range=(1, 1024))
    columns: int = setting(128, 'rays per row', range=(1, 4096))
    vertical_fov: float = setting(1.0, 'vertical field of view (rad)', range=(0.0, 3.1))
    horizontal_fov: float = setting(1.6, 'horizontal field of view (rad)', range=(0.0, 6.3))
    max_range: float = setting(5.0, 'farthest hit (m)', range=(0.1, 100.0))
    range_noise: float = setting(0.005, 'range noise σ (m, Gaussian)', range=(0.0, 1.0))
    floor: bool = setting(True, 'a floor plane the lidar sees (the arm never touches it)')
    floor_height: float = setting(0.0, 'floor height (m, base frame)', range=(-10.0, 10.0))

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
@checked
class SimConfig:
    timestep: float = 0.001
    integrator: str = 'implicitfast'
    friction: tuple | np.ndarray = setting(
        # Each γ ≥ 0: a negative one makes friction drive the joint (energy in, and a
        # negative implicit damping f'(q̇) in the step); 1e4 is far beyond any joint's
        # friction torques (tens of N·m) and tanh slopes (tens of s/rad).
        DEFAULT_FRICTION, 'joint friction γ1 … γ6 (seed 001 eq. 23): one row for every joint, '
        'or one per joint, row after row', range=(0.0, 1e4), per_joint=6)
    # Computed-torque controller: closed-loop natural frequency and damping ratio; the share
    # of the friction model it feeds forward (at the reference velocity).
    natural_frequency: float = setting(
        25.0, 'computed-torque closed-loop ω_n (rad/s)', range=(1.0, 200.0),
        name='controller.natural_frequency')
    damping_ratio: float = setting(1.0, 'computed-torque damping ratio', range=(0.1, 5.0),
                                   name='controller.damping_ratio')
    friction_compensation: float = setting(
        0.7, 'share of the friction fed forward', range=(0.0, 1.0),
        name='controller.friction_compensation')
    position_noise: float = setting(1e-5, 'joint position noise σ (rad, Gaussian)',
                                    range=(0.0, 0.1), name='noise.position')
    velocity_noise: float = setting(1e-3, 'joint velocity noise σ (rad/s)', range=(0.0, 1.0),
                                    name='noise.velocity')
    effort_noise: float = setting(0.05, 'joint torque noise σ (N·m)', range=(0.0, 10.0),
                                  name='noise.effort')
    ft_force_noise: float = setting(0.1, 'F/T force noise σ (N)', range=(0.0, 100.0),
                                    name='noise.ft_force')
    ft_torque_noise: float = setting(0.01, 'F/T torque noise σ (N·m)', range=(0.0, 10.0),
                                     name='noise.ft_torque')
    noise_seed: int = setting(0, "noise random seed (also of the driver's timing)",
                              range=(0, 2 ** 31 - 1), name='noise.seed')
    # Effort as a driver computes it from motor current (seed 001 eqs. 1–2) instead of a joint
    # torque sensor's τ + effort_noise; None: the torque sensor.
    motor_current: MotorCurrent | None = None
    # Carried by the arm; its controller compensates it (as a real arm told of its tool), the
    # estimators see it only when they are told too. A scenario's payload wins.
    payload: Payload = field(default_factory=Payload)
    lidar: LidarConfig = field(default_factory=LidarConfig)
