"""Identification (seed 001 §2): sweep plan, base gravity parameters, friction fits, the command."""
import os

import numpy as np
import pytest

from contact_estimation.commands import identify as command
from contact_estimation.core import friction
from contact_estimation.core.excitation import SweepSettings, plan_sweeps
from contact_estimation.core.identification import (IdentificationError, fit_friction,
                                                    gravity_basis, identify,
                                                    joint_parameter_counts)
from contact_estimation.core.identified_model import IdentifiedModel
from contact_estimation.core.recording import JointRecording, read_recording, write_csv
from contact_estimation.core.robot_model import RobotModel

SPATIAL = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'spatial_6r.urdf')
SHORT = SweepSettings(speeds=(0.2, 0.6), repetitions=1, amplitude=0.4)
FRICTION = np.array([0.05, 40.0, 4.0, 0.4, 40.0, 0.1])  # eq. 23 ground truth, every joint


@pytest.fixture(scope='module')
def spatial():
    return RobotModel.load(SPATIAL)


@pytest.fixture(scope='module')
def synthetic(spatial):
    """The short plan at 100 Hz with τ = g(q) + f(q̇) + 0.05 N·m noise (no dynamics)."""
    series = plan_sweeps(spatial, SHORT).series(100.0)
    rng = np.random.default_rng(0)
    tau = (np.array([spatial.gravity(q) for q in series.q])
           + friction.continuous(series.v, *FRICTION) + 0.05 * rng.standard_normal(series.q.shape))
    return JointRecording(spatial.joint_names, series.t, series.q, series.v, tau, 'synthetic')


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


def test_base_gravity_parameters_of_the_seed_001_arm(spatial):
    """Joint 1 vertical, 2-3 parallel, 4-5-6 wrist: two first moments perpendicular to the
    axis for each of links 2-6 (the masses fold into them) = 10. Per joint, joint 2 depends
    on 10 and joint 3 on 8 (the distinct terms of seed 001 eqs. 19 and 20); joint 4 on 6:
    eq. 21 lists 4 because the seed leaves out link 6's moments (its centre of mass is on
    joint 6's axis; ours too, and they come out 0 below)."""
    basis = gravity_basis(spatial)
    assert len(basis.independent) == 10
    assert joint_parameter_counts(spatial, basis).tolist() == [0, 10, 8, 6, 4, 2]
    values = dict(zip(basis.independent, basis.base_values(spatial)))
    assert abs(values['link6/my']) < 1e-12 and abs(values['link6/mz']) < 1e-12
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


def test_identification_from_synthetic_sweeps(spatial, synthetic):
    result = identify(spatial, synthetic, ('continuous', 'coulomb_viscous'), starts=3)
    model = result.model('continuous', {'data_source': 'synthetic'})
    for q in spatial.random_configuration(np.random.default_rng(3), 50):
        np.testing.assert_allclose(model.gravity(spatial, q), spatial.gravity(q), atol=0.05)
    speeds = np.array([0.2, 0.4, 0.6])
    for i in range(spatial.n):
        np.testing.assert_allclose(
            friction.get('continuous')(speeds, result.friction['continuous'][i].parameters),
            friction.continuous(speeds, *FRICTION), atol=0.03)
    assert 'ε' in result.table()


@pytest.mark.parametrize('spoil, message', [
    (lambda r: r.effort.__setitem__((100, 2), np.nan), 'NaN'),
    (lambda r: r.effort.__setitem__((slice(300, 310), 1), 150.0), 'saturated'),
    (lambda r: r.q.__setitem__((slice(None), 4), r.q[0, 4]), r"joints \['joint5'\] never moved"),
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
    import re
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
    assert command.main(['fit', str(tmp_path / 'r.csv'), '--robot', 'panda', '--out', str(out)]) == 2
    assert 'another robot' in capsys.readouterr().err and not out.exists()


def test_end_to_end_on_the_simulated_cobot(spatial, tmp_path, capsys):
    """identify simulate → mcap bag → identify fit → YAML the residual node loads + plots."""
    bag, out, plots = tmp_path / 'sweeps', tmp_path / 'model.yaml', tmp_path / 'plots'
    sweep = ['--robot', SPATIAL, '--speeds', '0.2', '0.6', '--repetitions', '1',
             '--amplitude', '0.4']
    assert command.main(['simulate', *sweep, '--out', str(bag), '--storage', 'mcap',
                         '--rate', '250']) == 0
    assert read_recording(bag, spatial).effort.shape[1] == spatial.n
    assert command.main(['fit', str(bag), '--robot', SPATIAL, '--out', str(out),
                         '--plots', str(plots), '--starts', '3']) == 0
    printed = capsys.readouterr().out
    assert 'ε      continuous' in printed
    model = IdentifiedModel.load(out, spatial)
    assert model.metadata['data_source'] == str(bag)
    assert set(model.metadata['fit_quality']['friction_epsilon_N2m2']) == set(friction.MODELS)
    errors = [np.abs(model.gravity(spatial, q) - spatial.gravity(q))
              for q in spatial.random_configuration(np.random.default_rng(4), 200)]
    assert np.all(np.mean(errors, axis=0) < 0.1)
    assert sorted(os.listdir(plots)) == [f'joint{i}.png' for i in range(1, 7)]
