"""The demo's residual model and detector thresholds, made as a user makes them for a real
arm (issue 28; README "For a real arm: checklist", steps 4 and 5), before the live run.

1. Record the simulated arm's ordinary free motion ROS-free (core/sim): its joint states
   q, q̇, τ as its driver publishes them, all that a user records of a real arm; nothing of
   the simulator's parameters (friction, noise) reaches what follows.
2. `identify fit`'s identification from ordinary motion (seed 001 eq. 6, friction eq. 23:
   core/identification/motion_identification.py) on IDENTIFICATION_S of it → MODEL_FILE, the
   file `identify fit` writes (it names the robot and its structure: residual_node refuses
   it on another arm).
3. residual_node's residual (its default settings) with that model on CALIBRATION_S of
   other free motion, and `calibrate`'s calibration (its defaults: margin 2, half held
   out, ψ_max a third of each joint's effort limit) → THRESHOLDS_FILE, the file `calibrate`
   writes (its sections name the robot).
The demo runs the suite with these files instead of the simulator's friction and the shipped
4 N·m, and its summary says what they hold (`DemoModel.summary`).

It runs in a child process with single-threaded BLAS (`make`): on a loaded 2-core machine
OpenBLAS's threads made the identification's least squares 2-3 times slower.

The arm is the one sim_cobot simulates with its shipped parameters (SimConfig's defaults,
which config/sim_cobot.yaml ships: test/test_node_defaults.py) at its 1 kHz, moving as its
default free motion does (smooth random at 0.3 of the velocity limits), with other seeds of
motion and noise than the demo's run (config/scenarios/demo*.yaml: seed 3, noise seed 0).
"""
from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from contact_estimation import manifest
from contact_estimation.commands.calibrate import parameter_file
from contact_estimation.commands.identify import model_metadata, motion_method
from contact_estimation.commands.up import robot_value
from contact_estimation.core.chain.residual import ResidualConfig
from contact_estimation.core.chain.threshold_calibration import (Calibration, calibrate,
                                                                 caps_from_effort)
from contact_estimation.core.identification.identification import in_time_order
from contact_estimation.core.identification.identified_model import IdentifiedModel
from contact_estimation.core.identification.motion_identification import (
    MotionIdentification,
    identify_motion,
)
from contact_estimation.core.identification.recording import JointRecording
from contact_estimation.core.identification.trajectory import (FirstSeconds,
                                                               SmoothRandomSettings,
                                                               make_trajectory)
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.harness import record_on_simulator

IDENTIFICATION_S = 30.0  # s of free motion `identify fit` gets
CALIBRATION_S = 30.0     # s of other free motion `calibrate` gets (half of it held out)
FRICTION_MODEL = 'continuous'  # seed 001 eq. 23, `identify fit`'s default
# `identify fit --starts`: starting points per nonlinear fit. On these recordings its default 8
# found the same fits as 2 (RMS equal to 0.1 mN·m on the Panda and the UR5) in 3.5 times the
# CPU time (3.8 s against 1.1 s for the UR5).
STARTS = 2
MODEL_FILE = 'model.yaml'            # in the demo's output folder
THRESHOLDS_FILE = 'thresholds.yaml'  # in the demo's output folder
# (motion seed, noise seed) of each recording: not the demo run's (3, 0).
SEEDS = {'identification': (1, 1), 'calibration': (2, 2)}
INERTIA = {'urdf': "the description's inertia kept", 'fitted': 'its inertia fitted too'}


@dataclass(frozen=True)
class DemoModel:
    """The files made for `robot`, and what identification found and calibration promises."""

    robot: str            # as the files name it (a name or a URDF path)
    model_path: str       # MODEL_FILE, absolute
    thresholds_path: str  # THRESHOLDS_FILE, absolute
    summary: str          # `summary`'s lines

    @property
    def overrides(self) -> dict[str, dict[str, object]]:
        """Parameter values by node: residual_node's model_file."""
        return {'residual_node': {'model_file': self.model_path}}

    @property
    def parameter_files(self) -> tuple[str, ...]:
        """The parameter files the suite is given (as `up --config`)."""
        return (self.thresholds_path,)


def summary(robot_name: str, model_path: str, thresholds_path: str,
            fit: MotionIdentification, calibration: Calibration, seconds: float) -> str:
    """What identification found and calibration proposed and promises, in a few lines."""
    rms = fit.rms[FRICTION_MODEL]
    return '\n'.join([
        f'Model and thresholds, made in {seconds:.0f} s before the run from the simulated '
        f'{robot_name}\'s joint states only, as for a real arm (README checklist, steps 4-5):',
        f'    identify fit on {fit.duration:.0f} s of free motion → {model_path}: gravity '
        f'({len(fit.basis.independent)} base parameters) and {FRICTION_MODEL} friction (seed '
        f'001 eq. 23) per joint, {INERTIA[fit.inertia]}; fit residual RMS per joint (N·m): '
        + ', '.join(f'{name} {value:.3f}' for name, value in zip(fit.robot.joint_names, rms)),
        f'    calibrate on {CALIBRATION_S:g} s of other free motion (residual_node\'s residual '
        f'with that model) → {thresholds_path}: ψ = min(ψ_0 + k_v|q̇| + k_a|q̈|, ψ_max) per '
        'joint:',
        *('        ' + line for line in calibration.thresholds_table().splitlines()),
        '    calibrate\'s promise: ' + calibration.aim()])


def _progress(desc: str):
    """`progress(iterable, total, desc)` for the core's loops, as a bar named `desc`."""
    return lambda iterable, total, **_: tqdm(iterable, total=total, desc=desc, leave=False,
                                             mininterval=1.0)


def free_motion(robot: RobotModel, seconds: float, purpose: str) -> JointRecording:
    """`seconds` of the simulated arm's free motion as its driver publishes it, in time
    order (`identify fit` sorts a recording so)."""
    motion_seed, noise_seed = SEEDS[purpose]
    spec = {'type': 'smooth_random', 'seed': motion_seed,
            'speed_scale': SmoothRandomSettings.speed_scale,
            'amplitude': SmoothRandomSettings.amplitude}
    trajectory = FirstSeconds(make_trajectory(robot, spec), seconds)
    recording = record_on_simulator(robot, trajectory, SimConfig(noise_seed=noise_seed),
                                    progress=_progress(f'demo: recording {purpose} motion'))
    return in_time_order(recording)[0]


def make(robot: str | None, out_dir: str) -> DemoModel:
    """`identify_and_calibrate` in a child process with single-threaded BLAS (module doc);
    its errors are raised here."""
    threads = os.environ.get('OPENBLAS_NUM_THREADS')
    os.environ['OPENBLAS_NUM_THREADS'] = '1'  # read by the child's OpenBLAS as it loads
    try:
        with multiprocessing.get_context('spawn').Pool(1) as pool:
            return pool.apply(identify_and_calibrate, (robot, out_dir))
    finally:
        if threads is None:
            del os.environ['OPENBLAS_NUM_THREADS']
        else:
            os.environ['OPENBLAS_NUM_THREADS'] = threads


def identify_and_calibrate(robot: str | None, out_dir: str) -> DemoModel:
    """Identify, calibrate and write both files in `out_dir` for the suite's robot (`robot`,
    as `demo --robot` gives it, or config/robot.yaml's); ValueError (from identification or
    calibration) if the motion cannot give them."""
    from contact_estimation.ros.bag_recorder import robot_of
    began = time.monotonic()
    name = (robot_value(robot) if robot
            else manifest.suite_robot([manifest.robot_parameters_path()])['robot'])
    arm = robot_of('sim_cobot', {'robot': name})
    model_path = os.path.abspath(os.path.join(out_dir, MODEL_FILE))
    thresholds_path = os.path.abspath(os.path.join(out_dir, THRESHOLDS_FILE))
    print(f'demo: identifying {name} from {IDENTIFICATION_S:g} s of simulated free motion '
          f'(identify fit), then calibrating on {CALIBRATION_S:g} s more (calibrate)',
          flush=True)
    recording = free_motion(arm, IDENTIFICATION_S, 'identification')
    fit = identify_motion(arm, recording, FRICTION_MODEL, (FRICTION_MODEL,), STARTS,
                          progress=_progress('demo: identify fit'))
    fit.model(FRICTION_MODEL, model_metadata(
        f'{IDENTIFICATION_S:g} s of the simulated {name}\'s free motion (contact-estimation demo)',
        name, motion_method(FRICTION_MODEL, fit.inertia))).save(model_path)

    free = free_motion(arm, CALIBRATION_S, 'calibration')
    # As residual_node builds it from its defaults and the model file.
    residual = ResidualConfig().residual(arm, IdentifiedModel.load(model_path, arm))
    samples = zip(free.t, free.q, free.v, free.effort)
    tau_ext = np.array([residual.update(*sample) for sample in tqdm(
        samples, total=len(free.t), desc='demo: residual', leave=False, mininterval=1.0)])
    calibration = calibrate(free.t, free.q, free.v, tau_ext, arm.joint_names,
                            threshold_max=caps_from_effort(arm.effort_limits),
                            source=f'{CALIBRATION_S:g} s of the simulated {name}\'s free '
                                   'motion (contact-estimation demo)')
    with open(thresholds_path, 'w', encoding='utf-8') as f:
        f.write(parameter_file(calibration, 'position', name))
    return DemoModel(name, model_path, thresholds_path, summary(
        name, model_path, thresholds_path, fit, calibration, time.monotonic() - began))
