"""`identify payload`: a tool's mass and centre of mass from a short log of the arm carrying it."""
import numpy as np
import pytest
import yaml

from contact_estimation.commands import identify as command
from contact_estimation.core.identification.identification import IdentificationError
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.identification.payload_identification import identify_payload
from contact_estimation.core.identification.recording import JointRecording, write_csv
from contact_estimation.core.chain.residual import StaticTerms, make_residual
from contact_estimation.core.robot.robot_model import RobotModel
from test_residual import Trajectory, _identified

TOOL = Payload(3.0, (0.02, -0.03, 0.10))  # the Panda carries up to 3 kg
NOISE = 0.05  # N·m, torque sensor noise


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


def _log(robot, payload, rng, amplitude=0.5, duration=12.0):
    """~100 Hz (steps 4-10 ms) of slow motion carrying `payload`, noisy torques."""
    loaded = payload.carried_by(robot)
    traj = Trajectory(loaded, rng, amplitude=amplitude, frequency=0.1)
    t = np.cumsum(rng.uniform(4e-3, 10e-3, int(duration / 7e-3)))
    q, v, a = (np.array(x) for x in zip(*(traj.state(tk) for tk in t)))
    tau = np.array([loaded.rnea(*state) for state in zip(q, v, a)])
    tau += rng.normal(0.0, NOISE, tau.shape)
    return JointRecording(list(robot.joint_names), t, q, v, tau, 'synthetic log')


def test_a_known_payload_is_recovered_and_cancels_in_the_residual(panda):
    fit = identify_payload(StaticTerms(panda), _log(panda, TOOL, np.random.default_rng(1)))
    assert fit.payload.mass == pytest.approx(TOOL.mass, abs=0.05)
    np.testing.assert_allclose(fit.payload.centre_of_mass, TOOL.centre_of_mass, atol=0.005)
    assert fit.poorly_determined() == []
    assert fit.mass_error < 0.05 and (fit.centre_error < 0.005).all()
    assert fit.rms == pytest.approx(NOISE, rel=0.3)  # the noise is all that is left
    # The estimate declared, the arm at rest holding the tool shows (almost) nothing.
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.4, 1.6, 0.7])
    residual = make_residual('fast', panda, payload=fit.payload)
    held = residual.update(0.0, q, np.zeros(panda.n), TOOL.carried_by(panda).gravity(q))
    assert np.abs(held).max() < 0.2


def test_a_log_that_never_turns_the_flange_is_refused_with_what_is_missing(panda):
    rng = np.random.default_rng(2)
    still = _log(panda, TOOL, rng, amplitude=0.0, duration=2.0)  # one rest pose
    with pytest.raises(IdentificationError, match='orientations'):
        identify_payload(StaticTerms(panda), still)


def test_identify_payload_writes_the_residual_and_ft_node_parameter_file(panda, tmp_path, capsys):
    log = _log(panda, TOOL, np.random.default_rng(3))
    late = [200, 900]  # a real driver's: a few samples arrive after their successor
    for name in ('t', 'q', 'v', 'effort'):
        values = getattr(log, name)
        for k in late:
            values[[k, k + 1]] = values[[k + 1, k]]
    write_csv(tmp_path / 'tool.csv', log)
    # the bare arm's identified model (here: its URDF values) is used instead of the URDF
    _identified(panda, 1.0, 'coulomb_viscous', [0.0, 0.0]).save(tmp_path / 'arm.yaml')
    out = tmp_path / 'payload.yaml'
    assert command.main(['payload', str(tmp_path / 'tool.csv'), '--robot', 'panda',
                         '--model-file', str(tmp_path / 'arm.yaml'), '--out', str(out)]) == 0
    printed = capsys.readouterr().out
    assert 'mass' in printed and '±' in printed and 'panda_hand' in printed
    assert '4 samples out of time order' in printed
    written = yaml.safe_load(out.read_text())
    loaded = written['residual_node']['ros__parameters']['payload']
    assert written['ft_contact_estimator']['ros__parameters']['payload'] == loaded
    assert written['residual_node']['ros__parameters']['robot'] == 'panda'  # made for it
    assert loaded['link'] == 'panda_hand'
    assert loaded['mass'] == pytest.approx(TOOL.mass, abs=0.05)
    np.testing.assert_allclose(loaded['centre_of_mass'], TOOL.centre_of_mass, atol=0.005)
    # a bare arm is no payload: refused, no file
    write_csv(tmp_path / 'bare.csv', _log(panda, Payload(), np.random.default_rng(4)))
    assert command.main(['payload', str(tmp_path / 'bare.csv'), '--robot', 'panda', '--out',
                         str(tmp_path / 'none.yaml')]) == command.BAD_INPUT
    assert 'kg' in capsys.readouterr().err and not (tmp_path / 'none.yaml').exists()
