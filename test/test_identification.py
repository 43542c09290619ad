"""Identification (seed 001 §2): sweep plan, base gravity parameters, friction fits, the command."""
import itertools
import os
import re

import numpy as np
import pytest

from contact_estimation.commands import identify as command
from contact_estimation.core.chain import friction
from contact_estimation.core.identification.excitation import SweepSettings, plan_sweeps
from contact_estimation.core.identification.identification import (
    IdentificationError,
    fit_friction,
    gravity_basis,
    identify,
    starting_points,
)
from contact_estimation.core.identification.identified_model import (
    IdentifiedModel,
    ModelFileError,
    robot_structure,
)
from contact_estimation.core.identification.recording import JointRecording, write_csv
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.config import DEFAULT_FRICTION
from contact_estimation.suite_bag import read_recording

SPATIAL = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'spatial_6r.urdf')
SHORT = SweepSettings(speeds=(0.2, 0.6), repetitions=1, amplitude=0.4)
SIX = SweepSettings(speeds=(0.02, 0.04, 0.08, 0.15, 0.3, 0.6), amplitude=0.4, max_pass_time=3.0)
FRICTION = np.array([0.05, 40.0, 4.0, 0.4, 40.0, 0.1])  # eq. 23 ground truth, every joint


@pytest.fixture(scope='module')
def spatial():
    return RobotModel.load(SPATIAL)


def _synthetic(robot, settings, noise=0.05, source='synthetic'):
    """The plan at 100 Hz with τ = g(q) + f(q̇) + noise (no inertia: constant speeds)."""
    series = plan_sweeps(robot, settings).series(100.0)
    rng = np.random.default_rng(0)
    tau = (np.array([robot.gravity(q) for q in series.q])
           + friction.continuous(series.v, *FRICTION) + noise * rng.standard_normal(series.q.shape))
    return JointRecording(robot.joint_names, series.t, series.q, series.v, tau, source)


@pytest.fixture(scope='module')
def synthetic(spatial):
    """Six speeds: enough for every friction model (the continuous one has 6 parameters)."""
    return _synthetic(spatial, SIX)


@pytest.fixture(scope='module')
def two_speeds(spatial):
    return _synthetic(spatial, SHORT)


def test_the_plan_sweeps_every_joint_back_and_forth_inside_the_limits(spatial, tmp_path):
    trajectory = plan_sweeps(spatial, SHORT)
    assert {p.joint for p in trajectory.passes} == set(range(spatial.n))
    assert len(trajectory.passes) == spatial.n * 2 * 2  # speeds × (forward, back)
    series = trajectory.series(50.0)
    lower, upper = spatial.position_limits
    assert np.all(series.q >= lower) and np.all(series.q <= upper)
    moving = series.v[series.constant_speed]
    joint = series.moving_joint[series.constant_speed]
    plateau = np.abs(moving[np.arange(len(joint)), joint])
    assert set(np.round(plateau, 9)) == {0.2, 0.6}
    trajectory.write_csv(tmp_path / 'plan.csv', 50.0)
    header = (tmp_path / 'plan.csv').read_text().splitlines()[0].split(',')
    assert header[:2] == ['t', 'joint1/position'] and header[-1] == 'joint6/velocity'


# Seed 001 eqs. 19-21, term by term as printed (s = sin, c = cos, 23 = q2 + q3). Eq. 19 lists
# sin(q2+q3)·sin(q5) twice (its 6th and 9th terms; Table 1 gives both −0.0070), eq. 20 twice
# too (4th and 9th).
SEED_001_TERMS = {
    2: [{'s2'}, {'c2'}, {'c23'}, {'s23'}, {'s23', 'c5'}, {'s23', 's5'}, {'c23', 'c4'},
        {'c23', 's4'}, {'s23', 's5'}, {'c23', 'c4', 'c5'}, {'c23', 'c4', 's5'}],
    3: [{'s23'}, {'c23'}, {'s23', 'c5'}, {'s23', 's5'}, {'c23', 'c4'}, {'c23', 's4'},
        {'c4', 's5', 'c23'}, {'c4', 'c5', 'c23'}, {'s23', 's5'}],
    4: [{'s23', 'c4'}, {'s23', 's4'}, {'s23', 's4', 's5'}, {'s23', 's4', 'c5'}],
}


def _trig_terms(robot, columns, joint, samples=600):
    """The distinct trigonometric terms of joint `joint`'s gravity row over the regressor
    `columns`: each column is expanded, by exact least squares over random configurations,
    on the products of 1, sin or cos of each of q2, q2+q3, q4, q5, q6 (3⁵ linearly
    independent functions, which span every gravity torque of this arm)."""
    q = robot.random_configuration(np.random.default_rng(5), samples)
    angles = {'2': q[:, 1], '23': q[:, 1] + q[:, 2], '4': q[:, 3], '5': q[:, 4], '6': q[:, 5]}
    labels, functions = [], []
    for choice in itertools.product(('', 's', 'c'), repeat=len(angles)):
        f, label = np.ones(samples), set()
        for kind, (name, angle) in zip(choice, angles.items()):
            if kind:
                f = f * (np.sin(angle) if kind == 's' else np.cos(angle))
                label.add(kind + name)
        labels.append(frozenset(label))
        functions.append(f)
    dictionary = np.column_stack(functions)
    rows = np.array([columns(c)[joint] for c in q])
    coefficients = np.linalg.lstsq(dictionary, rows, rcond=None)[0]
    np.testing.assert_allclose(dictionary @ coefficients, rows, atol=1e-9)  # exact expansion
    return {labels[k] for k in np.flatnonzero(np.abs(coefficients).max(axis=1) > 1e-9)}, \
        int(np.linalg.matrix_rank(rows, tol=1e-9))


def test_gravity_terms_and_base_parameters_of_the_seed_001_arm(spatial):
    """urdf/spatial_6r.urdf has the structure of seed 001's arm: joint 1 vertical, 2-3
    parallel, 4-5-6 a roll-pitch-roll wrist. Its zero of q3 is a quarter turn from the seed's,
    so sin(q2+q3) and cos(q2+q3) trade places (up to sign) between the two.

    The base parameter set of the whole arm has 10 parameters: two first moments
    perpendicular to the joint axis for each of links 2-6 (masses and on-axis moments fold
    into them). Seed 001, like this URDF, has link 6's centre of mass on joint 6's axis, so
    its eqs. 19-21 have no q6; without link 6's two moments 8 remain.

    Joint by joint, the gravity rows of joints 2, 3 and 4 expand into exactly the distinct
    trigonometric terms of eqs. 19, 20 and 21: 10, 8 and 4 (eqs. 19 and 20 list 11 and 9
    with one term twice). But the ranks of these rows are 8, 6 and 4: each of link 5's two
    first moments enters rows 2 and 3 as a sum of two terms with one coefficient (here
    m₅c₅ₓ multiplies cos(q2+q3)·cos(q5) + sin(q2+q3)·cos(q4)·sin(q5)), so the seed's per-joint
    sets, one coefficient
    per term (Table 1: 11 + 9 + 4 values), are not minimal, and the three joints share the
    same 8 parameters rather than having 22 of their own.
    """
    basis = gravity_basis(spatial)
    assert len(basis.independent) == 10
    values = dict(zip(basis.independent, basis.base_values(spatial)))
    link6 = ['link6/my', 'link6/mz']  # link 6's moments off its axis: zero in the URDF
    assert all(abs(values[label]) < 1e-12 for label in link6)
    keep = [k for k, label in enumerate(basis.independent) if label not in link6]

    def columns(q):
        return basis.regressor(spatial, q)[:, keep]

    swap = {'s23': 'c23', 'c23': 's23'}
    ranks = {}
    for joint, printed in SEED_001_TERMS.items():
        seed_terms = {frozenset(swap.get(f, f) for f in term) for term in printed}
        terms, ranks[joint] = _trig_terms(spatial, columns, joint - 1)
        assert terms == seed_terms, joint
    assert [len(SEED_001_TERMS[j]) for j in (2, 3, 4)] == [11, 9, 4]  # as printed
    assert [len({frozenset(t) for t in SEED_001_TERMS[j]}) for j in (2, 3, 4)] == [10, 8, 4]
    assert ranks == {2: 8, 3: 6, 4: 4}
    stacked = np.vstack([columns(q)[1:4] for q in
                         spatial.random_configuration(np.random.default_rng(6), 100)])
    assert np.linalg.matrix_rank(stacked, tol=1e-9) == len(keep) == 8
    for q in spatial.random_configuration(np.random.default_rng(0), 5):  # exact regrouping
        np.testing.assert_allclose(basis.regressor(spatial, q) @ basis.base_values(spatial),
                                   spatial.gravity(q), atol=1e-10)


def test_base_parameters_reproduce_panda_gravity():
    panda = RobotModel.load('panda')
    basis = gravity_basis(panda)
    assert len(basis.independent) < 4 * panda.n
    q = panda.random_configuration(np.random.default_rng(1), 1)[0]
    np.testing.assert_allclose(basis.regressor(panda, q) @ basis.base_values(panda),
                               panda.gravity(q), atol=1e-10)


def test_friction_fits_recover_a_curve_and_rank_the_models():
    rng = np.random.default_rng(2)
    speed = np.repeat([0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8], 10)
    truth = friction.continuous(speed, 0.3, 60.0, 5.0, 1.0, 80.0, 0.2)
    tau = truth + 0.005 * rng.standard_normal(speed.size)
    fits = {name: fit_friction(name, speed, tau, starts=6) for name in friction.MODELS}
    continuous = fits['continuous']
    assert np.all(continuous.parameters >= friction.get('continuous').lower)
    np.testing.assert_allclose(friction.get('continuous')(speed, continuous.parameters), truth,
                               atol=0.02)
    assert continuous.epsilon < fits['coulomb_viscous'].epsilon  # seed 001 Table 3's ranking
    assert continuous.epsilon < 2 * speed.size * 0.005 ** 2


def test_the_default_plan_sweeps_a_dozen_log_spaced_speeds_in_reasonable_time(spatial):
    speeds = np.array(SweepSettings().speeds)
    assert 10 <= speeds.size <= 15 and speeds.min() <= 0.011 and speeds.max() >= 0.9
    np.testing.assert_allclose(np.diff(np.log(speeds)), np.log(speeds[1] / speeds[0]), rtol=0.02)
    trajectory = plan_sweeps(spatial, SweepSettings())
    for i in range(spatial.n):
        plateaus = {round(abs(p.speed), 9) for p in trajectory.passes if p.joint == i}
        assert len(plateaus) == speeds.size >= friction.get('continuous').minimum_speeds
    assert trajectory.duration < 30 * 60  # about 21 min


def test_default_speeds_recover_the_simulators_friction_down_to_standstill():
    """τ_f as matched on the default plan's speeds (25 positions each, 0.03 N·m noise) with
    the simulated cobot's eq. 23 friction: the continuous fit is within 3 % of it from half
    the slowest speed to the fastest (from 4 speeds at 0.1-0.8 rad/s it was 50 % low at
    0.02 rad/s)."""
    truth = np.array(DEFAULT_FRICTION)
    rng = np.random.default_rng(0)
    speeds = np.array(SweepSettings().speeds)
    speed = np.repeat(speeds, 25) * (1 + 0.002 * rng.standard_normal(25 * speeds.size))
    tau = friction.continuous(speed, *truth) + 0.03 * rng.standard_normal(speed.size)
    fit = fit_friction('continuous', speed, tau)
    assert fit.speeds == speeds.size and not fit.problem
    check = np.geomspace(speeds.min() / 2, speeds.max(), 100)
    np.testing.assert_allclose(friction.continuous(check, *fit.parameters),
                               friction.continuous(check, *truth), rtol=0.03)


def test_starting_points_vary_the_rate_constants_over_decades():
    """γ₂, γ₃, γ₅ (s/rad) are drawn log-uniformly over [0.1/v_max, 10/v_min], amplitudes
    (N·m) uniformly over [0, 2·level], the viscous γ₆ over [0, 2·level/v_max]."""
    model = friction.get('continuous')
    speeds = np.array(SweepSettings().speeds)
    starts = np.array(starting_points(model, 0.5, speeds, 400, np.random.default_rng(0)))[1:]
    pair = starts[:, 1:3].ravel()  # γ₂, γ₃ are drawn as a pair, then sorted
    assert pair.min() < 0.3 and pair.max() > 300
    counts = np.histogram(np.log10(pair), bins=[-1, 0, 1, 2, 3])[0]  # as many in each decade
    assert counts.min() > 0.6 * counts.max(), counts
    coulomb_rate = starts[:, 4]  # γ₅, clipped at its lower bound of 1 s/rad
    assert coulomb_rate.min() == model.lower[4] and coulomb_rate.max() > 300
    counts = np.histogram(np.log10(coulomb_rate), bins=[0.001, 1, 2, 3])[0]
    assert counts.min() > 0.6 * counts.max(), counts
    assert np.all(starts[:, 1] >= starts[:, 2])  # a Stribeck hump, not a dip
    for k in (0, 3):
        assert 0 <= starts[:, k].min() < 0.1 and 0.9 < starts[:, k].max() <= 1.0
    assert 0 <= starts[:, 5].min() and starts[:, 5].max() <= 1.0 / speeds.max()


def test_a_friction_model_with_more_parameters_than_swept_speeds_is_not_fitted(
        spatial, two_speeds, tmp_path, capsys):
    speed = np.repeat([0.1, 0.2, 0.4, 0.8], 10)
    fit = fit_friction('continuous', speed, friction.continuous(speed, *FRICTION))
    assert fit.problem == '4 distinct speeds for 6 parameters' and np.isnan(fit.epsilon)
    assert not fit_friction('stribeck', speed, friction.continuous(speed, *FRICTION)).problem
    result = identify(spatial, two_speeds, ('coulomb_viscous', 'continuous'), starts=2)
    assert all(f.problem for f in result.friction['continuous'])
    assert all(not f.problem for f in result.friction['coulomb_viscous'])
    assert 'not fitted (fewer distinct speeds than parameters): continuous: 2 distinct ' \
           'speeds for 6 parameters' in result.table()
    with pytest.raises(IdentificationError, match='continuous friction model was not fitted'):
        result.model('continuous', {})
    write_csv(tmp_path / 'r.csv', two_speeds)
    out = tmp_path / 'model.yaml'
    assert command.main(['fit', str(tmp_path / 'r.csv'), '--robot', SPATIAL, '--out', str(out),
                         '--friction-model', 'continuous', '--starts', '2']) == 2
    assert 'sweep at 6 or more distinct speeds' in capsys.readouterr().err and not out.exists()


def test_identification_from_synthetic_sweeps(spatial, synthetic):
    result = identify(spatial, synthetic, ('continuous', 'coulomb_viscous'), starts=4)
    model = result.model('continuous', {'data_source': 'synthetic'})
    for q in spatial.random_configuration(np.random.default_rng(3), 50):
        np.testing.assert_allclose(model.gravity(spatial, q), spatial.gravity(q), atol=0.05)
    speeds = np.geomspace(0.02, 0.6, 20)
    for i in range(spatial.n):
        np.testing.assert_allclose(
            friction.get('continuous')(speeds, result.friction['continuous'][i].parameters),
            friction.continuous(speeds, *FRICTION), atol=0.03)
    assert 'seed 001 Table 3' in result.table()


def _model_for(robot, structure=True):
    basis = gravity_basis(robot)
    return IdentifiedModel(robot.name, robot.joint_names, basis.base_values(robot), basis,
                           'coulomb_viscous', np.tile([0.5, 0.1], (robot.n, 1)),
                           structure=robot_structure(robot) if structure else None)


def test_a_model_file_of_another_robot_with_the_same_joint_names_is_refused(tmp_path):
    ur5, ur10 = RobotModel.load('ur5'), RobotModel.load('ur10')
    assert ur5.joint_names == ur10.joint_names
    _model_for(ur5).save(tmp_path / 'ur5.yaml')
    assert IdentifiedModel.load(tmp_path / 'ur5.yaml', ur5).structure == robot_structure(ur5)
    with pytest.raises(ModelFileError, match=r"identified for robot 'ur5'.*this robot 'ur10'"):
        IdentifiedModel.load(tmp_path / 'ur5.yaml', ur10)
    # A file without a fingerprint (written by hand) is taken only for a robot of its name.
    _model_for(ur5, structure=False).save(tmp_path / 'plain.yaml')
    assert IdentifiedModel.load(tmp_path / 'plain.yaml', ur5).structure is None
    with pytest.raises(ModelFileError, match=r"robot 'ur5', this robot is 'ur10'"):
        IdentifiedModel.load(tmp_path / 'plain.yaml', ur10)


def test_an_edited_robot_description_no_longer_takes_the_model(spatial, tmp_path):
    _model_for(spatial).save(tmp_path / 'model.yaml')
    with open(SPATIAL, encoding='utf-8') as f:
        xml = f.read()
    assert xml.count('<mass value="0.3"/>') == 1
    heavier_tool = RobotModel.load(xml.replace('<mass value="0.3"/>', '<mass value="1.3"/>'))
    assert heavier_tool.name == spatial.name and robot_structure(RobotModel.load(xml)) == \
        robot_structure(spatial)
    with pytest.raises(ModelFileError, match='kinematic and inertial structure differs'):
        IdentifiedModel.load(tmp_path / 'model.yaml', heavier_tool)


def test_a_recording_of_another_robot_is_refused_by_its_gravity(tmp_path, capsys):
    """UR5 sweeps fitted with the UR10 description (same joint names, limits wide enough):
    the identified gravity is 50 % off the UR10's, so no model is written."""
    ur5 = RobotModel.load('ur5')
    write_csv(tmp_path / 'ur5.csv', _synthetic(ur5, SHORT, source='ur5 sweeps'))
    out = tmp_path / 'model.yaml'
    assert command.main(['fit', str(tmp_path / 'ur5.csv'), '--robot', 'ur10', '--out', str(out),
                         '--friction-model', 'coulomb_viscous', '--starts', '2']) == 2
    err = capsys.readouterr().err
    assert re.search(r"implausibly far from the description of robot 'ur10'.*shoulder_lift_joint"
                     r".*recording of another robot", err), err
    assert not out.exists()
    assert command.main(['fit', str(tmp_path / 'ur5.csv'), '--robot', 'ur5', '--out', str(out),
                         '--friction-model', 'coulomb_viscous', '--starts', '2']) == 0
    assert IdentifiedModel.load(out, ur5).robot == 'ur5'


@pytest.mark.parametrize('spoil, message', [
    (lambda r: r.effort.__setitem__((100, 2), np.nan), 'NaN'),
    (lambda r: r.effort.__setitem__((slice(300, 310), 1), 150.0), 'saturated'),
    (lambda r: r.q.__setitem__((slice(None), 4), r.q[0, 4]), 'joint joint5 never moves'),
])
def test_bad_recordings_are_refused_by_name(spatial, synthetic, tmp_path, capsys, spoil, message):
    spoilt = JointRecording(synthetic.joint_names, synthetic.t.copy(), synthetic.q.copy(),
                            synthetic.v.copy(), synthetic.effort.copy(), 'spoilt')
    spoil(spoilt)
    if 'never' in message:
        spoilt.v[:, 4] = 0.0
    write_csv(tmp_path / 'bad.csv', spoilt)
    out = tmp_path / 'model.yaml'
    code = command.main(['fit', str(tmp_path / 'bad.csv'), '--robot', SPATIAL, '--out', str(out)])
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert 'contact-estimation identify fit' in err
    assert re.search(message, err), err


def test_too_little_data_and_another_robot(spatial, synthetic, tmp_path, capsys):
    short = JointRecording(synthetic.joint_names, synthetic.t[:100], synthetic.q[:100],
                           synthetic.v[:100], synthetic.effort[:100])
    write_csv(tmp_path / 'short.csv', short)
    out = tmp_path / 'model.yaml'
    assert command.main(['fit', str(tmp_path / 'short.csv'), '--robot', SPATIAL,
                         '--out', str(out)]) == 2
    assert 'only 100 samples' in capsys.readouterr().err
    write_csv(tmp_path / 'r.csv', synthetic)
    assert command.main(['fit', str(tmp_path / 'r.csv'), '--robot', 'panda',
                         '--out', str(out)]) == 2
    assert 'another robot' in capsys.readouterr().err and not out.exists()


def test_end_to_end_on_the_simulated_cobot(spatial, tmp_path, capsys):
    """identify simulate → mcap bag → identify fit → YAML the residual node loads + plots.
    Two speeds keep it short: only the 2-parameter Coulomb-viscous model can be fitted."""
    bag, out, plots = tmp_path / 'sweeps', tmp_path / 'model.yaml', tmp_path / 'plots'
    sweep = ['--robot', SPATIAL, '--speeds', '0.2', '0.6', '--repetitions', '1',
             '--amplitude', '0.4']
    assert command.main(['simulate', *sweep, '--out', str(bag), '--storage', 'mcap',
                         '--rate', '250']) == 0
    assert read_recording(bag, spatial).effort.shape[1] == spatial.n
    assert command.main(['fit', str(bag), '--robot', SPATIAL, '--out', str(out),
                         '--plots', str(plots), '--starts', '3',
                         '--friction-model', 'coulomb_viscous']) == 0
    printed = capsys.readouterr().out
    assert 'seed 001 Table 3' in printed
    table = {line.split()[0]: line.split()[1:] for line in printed.splitlines()
             if line.startswith('joint')}
    assert table['joint'][-3:] == ['coulomb_viscous', 'continuous', 'stribeck']
    for i in range(1, 7):  # points, speeds, gravity RMS, then ε per model
        points, speeds, rms, viscous, continuous, stribeck = table[f'joint{i}']
        assert int(speeds) == 2 and float(viscous) > 0 and continuous == stribeck == '-'
    model = IdentifiedModel.load(out, spatial)
    assert model.friction_model == 'coulomb_viscous' and model.structure == robot_structure(spatial)
    assert model.metadata['data_source'] == str(bag)
    assert set(model.metadata['fit_quality']['friction_epsilon_N2m2']) == set(friction.MODELS)
    errors = [np.abs(model.gravity(spatial, q) - spatial.gravity(q))
              for q in spatial.random_configuration(np.random.default_rng(4), 200)]
    assert np.all(np.mean(errors, axis=0) < 0.1)
    assert sorted(os.listdir(plots)) == [f'joint{i}.png' for i in range(1, 7)]
