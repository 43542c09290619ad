"""Identification from ordinary free motion (seed 001 eq. 6 with eq. 23 friction, issue 11):
known parameters recovered from a synthetic log, one-line refusals naming the joint and the
missing motion, the choice between sweeps and motion and between the description's and a
fitted inertia, and a model file the residual loads."""
import os

import numpy as np
import pinocchio as pin
import pytest

from contact_estimation.commands import identify as command
from contact_estimation.core.chain import friction
from contact_estimation.core.chain.residual import make_residual
from contact_estimation.core.identification.excitation import SweepSettings, plan_sweeps
from contact_estimation.core.identification.identification import (
    IdentificationError,
    gravity_error,
    in_time_order,
    recording_kind,
)
from contact_estimation.core.identification.identified_model import IdentifiedModel
from contact_estimation.core.identification.motion_identification import identify_motion
from contact_estimation.core.identification.recording import JointRecording, write_csv
from contact_estimation.core.identification.trajectory import SmoothRandomTrajectory
from contact_estimation.core.robot.robot_model import RobotModel

SPATIAL = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'spatial_6r.urdf')
FRICTION = np.array([0.1, 40.0, 4.0, 0.5, 40.0, 0.1])  # eq. 23 ground truth, every joint
NOISE = 0.1  # N·m


@pytest.fixture(scope='module')
def spatial():
    return RobotModel.load(SPATIAL)


def _free_motion(robot, truth=None, duration=40.0, seed=3, source='synthetic motion'):
    """A 100 Hz driver's log of smooth random motion: stamps 4-10 ms apart, τ from the
    inverse dynamics of `truth` (default: the description itself) plus eq. 23 friction and
    noise."""
    truth = truth or robot
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.uniform(0.004, 0.010, int(duration / 0.007)))
    trajectory = SmoothRandomTrajectory(robot, seed=seed, speed_scale=0.3)
    q, v, a = (np.array(x) for x in zip(*(trajectory.sample(s) for s in t)))
    tau = (np.array([truth.rnea(*state) for state in zip(q, v, a)])
           + friction.continuous(v, *FRICTION) + NOISE * rng.standard_normal(q.shape))
    return JointRecording(robot.joint_names, t, q, v + 1e-3 * rng.standard_normal(v.shape),
                          tau, source)


@pytest.fixture(scope='module')
def motion(spatial):
    return _free_motion(spatial)


@pytest.fixture(scope='module')
def result(spatial, motion):
    return identify_motion(spatial, motion, 'continuous', ('continuous', 'coulomb_viscous'))


def test_gravity_and_friction_are_recovered_from_ordinary_motion(spatial, result, motion):
    model = result.model('continuous', {})
    assert result.inertia == 'urdf'  # the log agrees with the description's inertia
    assert np.all(gravity_error(spatial, model, 500).mean(axis=0) < 0.02)
    speeds = np.geomspace(0.05, 0.5, 50)
    for i in range(spatial.n):
        gap = np.abs(friction.continuous(speeds, *model.friction_parameters[i])
                     - friction.continuous(speeds, *FRICTION))
        assert gap.max() < 0.05, (spatial.joint_names[i], gap.max())
    # The continuous model describes this friction better than Coulomb–viscous on every joint.
    assert np.all(result.rms['continuous'] < result.rms['coulomb_viscous'])
    assert np.all(result.rms['continuous'] < 1.5 * NOISE)


def test_the_report_says_how_well_each_joint_is_excited(result, spatial):
    table = result.table()
    assert 'inertia: urdf' in table and 'condition number' in table
    for joint in spatial.joint_names:
        assert joint in table
    assert np.all(result.gravity_error < 0.02)
    assert all(c.bands(0.2).size >= 6 for c in result.coverage)


def test_a_wrong_inertia_in_the_description_is_fitted_and_kept_out_of_gravity(spatial):
    truth = RobotModel.load(SPATIAL)
    for j in (2, 3):
        inertia = truth.model.inertias[j]
        truth.model.inertias[j] = pin.Inertia(inertia.mass, inertia.lever,
                                              3.0 * inertia.inertia + 0.05 * np.eye(3))
    log = _free_motion(spatial, truth)
    fitted = identify_motion(spatial, log, 'coulomb_viscous', ('coulomb_viscous',))
    kept = identify_motion(spatial, log, 'coulomb_viscous', ('coulomb_viscous',),
                           settings=_settings(inertia='urdf'))
    assert fitted.inertia == 'fitted' and 'disagrees' in fitted.inertia_reason
    errors = {name: gravity_error(spatial, r.model('coulomb_viscous', {}), 300).mean(axis=0)
              for name, r in (('fitted', fitted), ('kept', kept))}
    assert errors['fitted'].max() < 0.05
    assert errors['kept'].max() > 2 * errors['fitted'].max()


def _settings(**changes):
    from contact_estimation.core.identification.motion_identification import MotionSettings
    return MotionSettings(**changes)


def _run_fit(tmp_path, recording, robot_path, *extra):
    path = tmp_path / 'log.csv'
    write_csv(path, recording)
    out = tmp_path / 'model.yaml'
    code = command.main(['fit', str(path), '--robot', robot_path, '--out', str(out), *extra])
    return code, out


def test_a_joint_that_never_moves_is_named_in_one_line(spatial, motion, tmp_path, capsys):
    still = JointRecording(motion.joint_names, motion.t, motion.q.copy(), motion.v.copy(),
                           motion.effort, motion.source)
    still.q[:, 3] = still.q[0, 3]
    still.v[:, 3] = 1e-4
    code, out = _run_fit(tmp_path, still, SPATIAL)
    error = capsys.readouterr().err.strip()
    assert code == command.BAD_INPUT and not out.exists()
    assert len(error.splitlines()) == 1
    assert 'joint joint4 never moves' in error and 'rad/s' in error


def test_a_joint_moved_only_fast_is_told_which_speeds_are_missing(spatial, motion):
    """Joint 2 goes back and forth at 0.5 rad/s with instant turns: one speed band."""
    t = motion.t
    triangle = 0.4 * (2 * np.abs((t / 1.6) % 2 - 1) - 1)      # ±0.4 rad, 0.5 rad/s
    fast = JointRecording(motion.joint_names, t, motion.q.copy(), motion.v.copy(),
                          motion.effort, 'fast log')
    fast.q[:, 1] = triangle
    fast.v[:, 1] = np.gradient(triangle, t)
    with pytest.raises(IdentificationError) as caught:
        identify_motion(spatial, fast, 'continuous')
    message = str(caught.value)
    assert '\n' not in message
    assert 'joint joint2 moves only at 0.45-0.74 rad/s' in message
    assert 'record it moving below 0.45 rad/s' in message
    # The friction model with fewer parameters than the visited bands is not refused for it.
    with pytest.raises(IdentificationError, match='joint joint2 moves only at'):
        identify_motion(spatial, fast, 'coulomb_viscous')


def test_a_joint_moved_one_way_only_is_named(spatial, motion):
    one_way = JointRecording(motion.joint_names, motion.t, motion.q.copy(), motion.v.copy(),
                             motion.effort, 'one-way log')
    one_way.v[:, 0] = np.abs(one_way.v[:, 0])
    with pytest.raises(IdentificationError, match='joint joint1 moves only the positive way'):
        identify_motion(spatial, one_way, 'continuous')


def test_sweeps_stay_the_method_for_sweeps_and_motion_is_chosen_otherwise(spatial, motion):
    series = plan_sweeps(spatial, SweepSettings(speeds=(0.2, 0.6), amplitude=0.4)).series(100.0)
    sweeps = JointRecording(spatial.joint_names, series.t, series.q, series.v,
                            np.array([spatial.gravity(q) for q in series.q]), 'sweeps')
    assert recording_kind(sweeps, spatial)[0] == 'sweeps'
    kind, reason = recording_kind(motion, spatial)
    assert kind == 'motion' and 'joint1' in reason


def test_out_of_order_stamps_are_sorted_and_counted(motion):
    swapped = JointRecording(motion.joint_names, motion.t.copy(), motion.q, motion.v,
                             motion.effort)
    swapped.t[[10, 11]] = swapped.t[[11, 10]]
    swapped.t[20] = swapped.t[19]
    ordered, moved = in_time_order(swapped)
    assert moved == 3
    assert np.all(np.diff(ordered.t) > 0) and len(ordered.t) == len(motion.t) - 1


def test_the_command_fits_motion_and_the_residual_loads_the_model(spatial, motion, tmp_path,
                                                                   capsys):
    code, out = _run_fit(tmp_path, motion, SPATIAL, '--plots', str(tmp_path / 'plots'))
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert 'method: motion' in printed and 'what extra motion would help' in printed
    assert len(list((tmp_path / 'plots').glob('*.png'))) == spatial.n
    model = IdentifiedModel.load(out, spatial)
    assert model.metadata['fit_quality']['method'] == 'ordinary motion'
    # In free motion the rnea residual with the identified model is as small as with the
    # true gravity and friction.
    rms = {}
    for name, kwargs in (('identified', {'identified_model': model}),
                         ('truth', {'friction_model': 'continuous', 'friction_params': FRICTION})):
        residual = make_residual('rnea', spatial, **kwargs)
        external = np.array([residual.update(t, q, v, tau) for t, q, v, tau
                             in zip(motion.t, motion.q, motion.v, motion.effort)])[50:]
        rms[name] = np.sqrt(np.mean(external ** 2, axis=0))
    assert np.all(rms['identified'] < 1.05 * rms['truth']), rms
