"""Runs on the simulated cobot: the whole reaction loop ROS-free, and recordings for
identification.

The method modules (time_scaling, excitation, residual, detector) know nothing of the
simulator; this module wires them to it.
"""
from __future__ import annotations

import numpy as np

from contact_estimation.core.chain.detector import AccelerationEstimate, CollisionDetector
from contact_estimation.core.identification.recording import JointRecording
from contact_estimation.core.chain.residual import make_residual
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.config import DEFAULT_FRICTION, SimConfig
from contact_estimation.core.sim.driver import DriverStream, DriverTiming
from contact_estimation.core.chain.time_scaling import TimeScaling, TimeScalingConfig
from contact_estimation.core.identification.trajectory import make_trajectory


def closed_loop(sim, residual, detector=None, scaling: TimeScaling | None = None,
                seconds: float = 1.0, progress=None) -> dict:
    """Run the whole reaction ROS-free: simulated cobot → residual → detector → f_S → reference.

    `sim` is a SimulatedCobot, `residual` a core.residual.Residual (None: record the joint
    states only, tau_ext stays 0), `detector` a core.chain.detector.CollisionDetector (None: record
    the residual only), given q̇ and, when its thresholds have a q̈ term, q̈ as the detector
    node estimates it (AccelerationEstimate, its default window); with `scaling` None the
    reference is never re-timed. `progress(steps)` is called every 1000 steps. Returns
    per-step arrays: t, q, v, effort (measured), f_S, path_time (the reference's path
    parameter), tau_ext (estimated), tau_true (Σ JᵀF of the contacts), stop.
    """
    if detector is not None and residual is None:
        raise ValueError('a detector needs a residual to watch')
    if scaling is not None and detector is None:
        raise ValueError('time scaling needs a detector to tell it when to hold')
    steps = int(round(seconds / sim.dt))
    n = sim.robot.n
    trace = {'t': np.zeros(steps), 'q': np.zeros((steps, n)), 'v': np.zeros((steps, n)),
             'effort': np.zeros((steps, n)), 'f_S': np.ones(steps), 'path_time': np.zeros(steps),
             'tau_ext': np.zeros((steps, n)), 'tau_true': np.zeros((steps, n)),
             'stop': np.zeros(steps, dtype=bool)}
    uses_acceleration = detector is not None and detector.config.acceleration_gain.any()
    acceleration = AccelerationEstimate()
    for k in range(steps):
        sim.step()
        q, v, tau = sim.joint_state()
        tau_ext = np.zeros(n) if residual is None else residual.update(sim.time, q, v, tau)
        if detector is not None:
            state = detector.update(sim.time, tau_ext, v, acceleration.update(
                sim.time, q, in_use=uses_acceleration), position=q)
            trace['stop'][k] = state.stop
            if scaling is not None:
                trace['f_S'][k] = sim.set_time_scaling(scaling.react(sim.time, state, tau_ext, v))
        trace['t'][k], trace['q'][k], trace['v'][k], trace['effort'][k] = sim.time, q, v, tau
        trace['path_time'][k] = sim.scaler.path_time
        trace['tau_ext'][k], trace['tau_true'][k] = tau_ext, sim.true_external_torque()
        if progress is not None and (k + 1) % 1000 == 0:
            progress(1000)
    return trace


def simulate(robot, scenario, seconds: float, detector_config=None,
             scaling_config: TimeScalingConfig | None = None, progress=None) -> dict:
    """`closed_loop` on a SimulatedCobot playing `scenario` (its trajectory is required), with
    the momentum observer on the URDF model and the sim's own friction (so the residual's
    error is the sim's sensor noise and the observer's lag), a detector when
    `detector_config` is given and time scaling when `scaling_config` is."""
    sim = SimulatedCobot(robot, make_trajectory(robot, scenario.trajectory), scenario)
    residual = make_residual('momentum_observer', robot, friction_model='continuous',
                             friction_params=sim.config.friction)
    detector = CollisionDetector(detector_config) if detector_config is not None else None
    scaling = TimeScaling(scaling_config) if scaling_config is not None else None
    return closed_loop(sim, residual, detector, scaling, seconds, progress)


def simulator_config(robot: RobotModel, effort_noise: float = 0.2, seed: int = 0):
    """Simulated cobot settings for identification runs: seed 001 eq. 23 friction of the
    simulator's default (γ₁, γ₄, γ₆ for a 150 N·m joint) scaled with each joint's effort
    limit (the hump γ₁ with its square), so light wrist joints get light friction, fully fed
    forward (a real arm's position loop tracks the constant speeds), and `effort_noise` N·m of
    torque
    noise. Its `friction` rows are the ground truth the identification should recover."""
    limits = robot.effort_limits
    share = np.where(limits > 0, limits, 150.0) / 150.0
    rows = np.tile(np.asarray(DEFAULT_FRICTION, dtype=float), (robot.n, 1))
    rows[:, [3, 5]] *= share[:, None]
    # The Stribeck hump's falling slope is negative damping; on a light joint it beats the
    # controller's damping and the joint sticks and slips, so it shrinks faster.
    rows[:, 0] *= share ** 2
    return SimConfig(friction=rows, friction_compensation=1.0, effort_noise=effort_noise,
                     noise_seed=seed)


def record_on_simulator(robot: RobotModel, trajectory, config=None, rate: float = 1000.0,
                        progress=None, timing: DriverTiming = DriverTiming()):
    """Run `trajectory` on the simulated cobot and record its measured joint states (q, q̇, τ
    with the simulator's sensor noise) as its driver delivers them, at `rate` Hz with
    `timing` (core/sim/driver.py: jittered periods, samples out of order; its random draws
    seeded with the config's `noise_seed`, as the sim node does): a
    `recording.JointRecording` like one from the real arm, in the order the samples left.
    `progress(iterable, total, desc)` wraps the step loop (e.g. tqdm)."""
    sim = SimulatedCobot(robot, trajectory, config=config)
    steps = int(np.ceil(trajectory.duration / sim.dt)) + 1
    if timing.period_jitter == 0:  # a whole number of physics steps per period
        rate = 1.0 / (max(1, int(round(1.0 / (rate * sim.dt)))) * sim.dt)
    driver = DriverStream(1.0 / rate, sim.dt, timing, seed=sim.config.noise_seed)
    loop = range(steps) if progress is None else progress(range(steps), total=steps,
                                                           desc='simulating sweeps')
    samples = []
    for k in loop:
        sim.step()
        if driver.due(k):
            samples += driver.release((sim.time, *sim.joint_state()))
    t, q, v, tau = (np.array(column) for column in zip(*samples))
    return JointRecording(list(robot.joint_names), t, q, v, tau,
                          source=f'simulated {robot.name} sweeps')
