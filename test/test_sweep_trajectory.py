"""The identification sweeps (seed 001 §2.1) as a simulated-cobot scenario: `type: sweeps`."""
import os

import numpy as np
import pytest

from contact_estimation.commands import identify as command
from contact_estimation.core.identification.excitation import SweepSettings, plan_sweeps
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.harness import simulator_config
from contact_estimation.core.sim.scenario import Scenario, ScenarioError
from contact_estimation.core.identification.trajectory import TRAJECTORY_TYPES, make_trajectory

SPATIAL = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'spatial_6r.urdf')
SPEC = {'type': 'sweeps', 'speeds': [0.2, 0.6], 'amplitude': 0.4, 'joints': ['joint2', 'joint4'],
        'seed': 3}


@pytest.fixture(scope='module')
def spatial():
    return RobotModel.load(SPATIAL)


def test_a_sweeps_spec_is_the_plan_of_the_same_settings(spatial):
    assert 'sweeps' in TRAJECTORY_TYPES
    trajectory = make_trajectory(spatial, dict(SPEC))
    plan = plan_sweeps(spatial, SweepSettings(speeds=(0.2, 0.6), amplitude=0.4, joints=(1, 3),
                                              seed=3))
    assert trajectory.duration == pytest.approx(plan.duration)
    assert {p.joint for p in trajectory.passes} == {1, 3}
    for t in np.linspace(0.0, plan.duration, 37):
        for mine, theirs in zip(trajectory.sample(t), plan.sample(t)):
            np.testing.assert_allclose(mine, theirs, atol=1e-12)
    default = make_trajectory(spatial, {'type': 'sweeps'})
    assert default.duration == pytest.approx(plan_sweeps(spatial).duration)


@pytest.mark.parametrize('change, message', [
    ({'speed_scale': 0.3}, r"unknown \['speed_scale'\]"),
    ({'joints': ['joint9']}, r"sweeps joints \['joint9'\] are not joints of robot 'spatial_6r'"),
    ({'speeds': [0.2, -0.1]}, 'positive speeds'),
])
def test_bad_sweeps_specs_are_refused_by_name(spatial, change, message):
    with pytest.raises(ValueError, match=message):
        make_trajectory(spatial, {**SPEC, **change})
    with pytest.raises(ScenarioError, match='bad trajectory'):
        Scenario.from_dict({'trajectory': {**SPEC, **change}}, spatial)


def test_identify_plan_writes_a_scenario_the_simulated_cobot_runs(spatial, tmp_path, capsys):
    """`identify plan --scenario`: the CSV for the arm and a scenario file with the same
    sweeps; the scenario loads like the sim_cobot node loads it and the arm follows it."""
    csv, scenario_file = tmp_path / 'plan.csv', tmp_path / 'sweeps.yaml'
    assert command.main(['plan', '--robot', SPATIAL, '--speeds', '0.2', '0.6', '--amplitude',
                         '0.4', '--out', str(csv), '--rate', '50',
                         '--scenario', str(scenario_file)]) == 0
    printed = capsys.readouterr().out
    assert 'min) at 50 Hz' in printed and 'sim_cobot scenario' in printed
    assert 'too few for the friction models continuous (6), stribeck (4)' in printed
    scenario = Scenario.load(str(scenario_file), spatial)
    assert scenario.trajectory['type'] == 'sweeps'
    trajectory = make_trajectory(spatial, scenario.trajectory)
    rows = np.loadtxt(csv, delimiter=',', skiprows=1)
    assert rows[-1, 0] == pytest.approx(trajectory.duration, abs=0.02)
    for row in rows[::97]:
        q, v, _ = trajectory.sample(row[0])
        np.testing.assert_allclose(row[1:1 + spatial.n], q, atol=1e-6)
        np.testing.assert_allclose(row[1 + spatial.n:], v, atol=1e-6)
    sim = SimulatedCobot(spatial, trajectory, scenario, simulator_config(spatial, 0.0))
    for _ in range(1500):
        sim.step()
    reference = trajectory.sample(sim.time)[0]
    assert np.max(np.abs(sim.q - reference)) < 0.01
    assert np.max(np.abs(sim.q - trajectory.sample(0.0)[0])) > 0.1  # it has moved
