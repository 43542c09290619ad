"""Residuals against synthetic data generated with the rigid-body model itself.

Joint trajectories are prescribed (q(t) = q₀ + A sin ωt, so q̇ and q̈ are exact) and the
joint torque is what the robot must apply to follow them with an external force on it:
τ = M q̈ + C q̇ + g + f(q̇) − τ_ext, τ_ext = J(p)ᵀF. With the exact model every residual must
give back τ_ext (within its own approximation: no inertia for the fast one, a filter lag for
the observer, a differentiated q̈ for inverse dynamics).
"""
import numpy as np
import pytest

from contact_estimation.core.chain import friction
from contact_estimation.core.chain.residual import (
    MODELS,
    FastResidual,
    MomentumObserver,
    SampleOrderError,
    StaticTerms,
    make_residual,
)
from contact_estimation.core.identification.identified_model import (
    GRAVITY_PARAMETERS,
    GravityBasis,
    IdentifiedModel,
)
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel

FRICTION = ('continuous', np.array([0.3, 30.0, 5.0, 0.5, 30.0, 0.4]))


@pytest.fixture(scope='module')
def panda():
    return RobotModel.load('panda')


def _terms(robot):
    return StaticTerms(robot, None, *FRICTION)


def _friction(robot, v):
    return friction.joint_friction(FRICTION[0], np.tile(FRICTION[1], (robot.n, 1)), v)


class Trajectory:
    """q(t) = q₀ + A sin(ωt) per joint, and the torque that follows it under τ_ext(t, q)."""

    def __init__(self, robot, rng, amplitude=0.3, frequency=0.5):
        self.robot = robot
        lower, upper = robot.position_limits
        self.q0 = 0.5 * (lower + upper) + 0.2 * rng.uniform(-1, 1, robot.n)
        self.amplitude = amplitude * rng.uniform(0.5, 1.0, robot.n)
        self.omega = 2 * np.pi * frequency * rng.uniform(0.7, 1.3, robot.n)
        self.phase = rng.uniform(0, 2 * np.pi, robot.n)

    def state(self, t):
        s, c = np.sin(self.omega * t + self.phase), np.cos(self.omega * t + self.phase)
        q = self.q0 + self.amplitude * s
        v = self.amplitude * self.omega * c
        a = -self.amplitude * self.omega ** 2 * s
        return q, v, a

    def torque(self, q, v, a, tau_ext):
        return self.robot.rnea(q, v, a) + _friction(self.robot, v) - tau_ext


def _contact_torque(robot, q, force=np.array([10.0, -20.0, 15.0])):
    """τ_ext of a force on the robot at a point of link 5 (base frame force)."""
    return robot.point_jacobian(q, 'panda_link5', np.array([0.02, 0.05, -0.1])).T @ force


def _uneven_times(rng, duration, dt=1e-3):
    steps = dt * rng.uniform(0.5, 1.5, int(duration / dt))
    return np.cumsum(steps)


def test_fast_residual_gives_the_contact_torque_at_slow_constant_speed(panda):
    rng = np.random.default_rng(1)
    residual = FastResidual(_terms(panda), gap_threshold=0.1)
    for t, q in enumerate(panda.random_configuration(rng, 50)):
        v = rng.choice([-1, 1], panda.n) * 0.02  # slow: C q̇ is O(v²), friction fully on
        tau_ext = _contact_torque(panda, q)
        tau = panda.rnea(q, v, np.zeros(panda.n)) + _friction(panda, v) - tau_ext
        np.testing.assert_allclose(residual.update(float(t), q, v, tau), tau_ext, atol=0.02)


def test_fast_residual_ignores_inertia_so_it_errs_when_accelerating(panda):
    rng = np.random.default_rng(2)
    traj = Trajectory(panda, rng, amplitude=0.5, frequency=1.0)
    residual = FastResidual(_terms(panda), gap_threshold=0.1)
    q, v, a = traj.state(0.3)
    tau_ext = _contact_torque(panda, q)
    error = residual.update(0.3, q, v, traj.torque(q, v, a, tau_ext)) - tau_ext
    inertial = panda.rnea(q, v, a) - panda.gravity(q)  # M q̈ + C q̇, missing from the model
    np.testing.assert_allclose(error, -inertial, atol=1e-9)
    assert np.abs(error).max() > 0.1


def test_inverse_dynamics_residual_gives_the_contact_torque_in_motion(panda):
    rng = np.random.default_rng(3)
    traj = Trajectory(panda, rng)
    residual = make_residual('rnea', panda, None, *FRICTION, gap_threshold=0.1)
    errors, inertial = [], []
    for t in _uneven_times(rng, 1.0):
        q, v, a = traj.state(t)
        tau_ext = _contact_torque(panda, q)
        out = residual.update(t, q, v, traj.torque(q, v, a, tau_ext))
        if t > 0.2:  # after the differentiator's start-up
            errors.append(out - tau_ext)
            inertial.append(panda.rnea(q, v, a) - panda.gravity(q))
    rms_error = np.sqrt(np.mean(np.square(errors)))
    # What is left is the lag of the differentiated q̈ (≈ 10 ms): a small part of the
    # inertial torque the fast residual would miss.
    assert rms_error < 0.1 * np.sqrt(np.mean(np.square(inertial)))
    assert rms_error < 0.3


def test_momentum_observer_follows_a_step_with_time_constant_one_over_gain(panda):
    rng = np.random.default_rng(4)
    traj = Trajectory(panda, rng)
    gain = np.array([20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0])
    observer = MomentumObserver(_terms(panda), gap_threshold=0.1, gain=gain)
    step = rng.uniform(-5, 5, panda.n)
    t_step = 0.3
    times = _uneven_times(rng, 0.6)
    outputs = []
    for t in times:
        q, v, a = traj.state(t)
        tau_ext = step if t >= t_step else np.zeros(panda.n)
        outputs.append(observer.update(t, q, v, traj.torque(q, v, a, tau_ext)))
    outputs = np.array(outputs)
    before = times < t_step
    assert np.abs(outputs[before]).max() < 0.05  # free motion: no external torque seen
    # Sampled, the step happens between the last sample before it and the first after it.
    t_seen = 0.5 * (times[before][-1] + times[~before][0])
    expected = step * (1 - np.exp(-gain * (times[~before, None] - t_seen)))
    assert np.abs(outputs[~before] - expected).max() < 0.03 * np.abs(step).max()
    np.testing.assert_allclose(outputs[-1], step, atol=0.01 * np.abs(step).max())


def test_momentum_observer_converges_to_a_contact_force_in_motion(panda):
    rng = np.random.default_rng(5)
    traj = Trajectory(panda, rng)
    observer = make_residual('momentum_observer', panda, None, *FRICTION, observer_gain=100.0)
    for t in _uneven_times(rng, 0.5):
        q, v, a = traj.state(t)
        tau_ext = _contact_torque(panda, q)
        out = observer.update(t, q, v, traj.torque(q, v, a, tau_ext))
    # lag of 1/K behind a slowly changing J(q)ᵀF
    np.testing.assert_allclose(out, tau_ext, atol=0.05 * np.abs(tau_ext).max())


def test_momentum_observer_starts_over_after_a_gap(panda):
    rng = np.random.default_rng(6)
    traj = Trajectory(panda, rng, amplitude=0.5, frequency=1.0)
    observer = MomentumObserver(_terms(panda), gap_threshold=0.05, gain=50.0)
    tau_ext = rng.uniform(-5, 5, panda.n)
    times = np.concatenate([np.arange(0.001, 0.2, 0.001), 0.5 + np.arange(0.0, 0.2, 0.001)])
    outputs, gaps = [], []
    for t in times:
        q, v, a = traj.state(t)
        outputs.append(observer.update(t, q, v, traj.torque(q, v, a, tau_ext)))
        gaps.append(observer.last_gap)
    outputs, gaps = np.array(outputs), np.array(gaps)
    restart = np.flatnonzero(times >= 0.5)[0]
    assert np.flatnonzero(gaps).tolist() == [restart]
    assert gaps[restart] == pytest.approx(0.5 - times[restart - 1])
    np.testing.assert_array_equal(outputs[restart], np.zeros(panda.n))
    # No transient from integrating over the gap: it rises again from zero, never overshooting.
    after = outputs[restart:]
    assert (np.abs(after) <= np.abs(tau_ext) * 1.02 + 0.01).all()
    np.testing.assert_allclose(after[-1], tau_ext, atol=0.01 * np.abs(tau_ext).max())


def test_samples_must_move_forward_in_time(panda):
    residual = make_residual('fast', panda, gap_threshold=0.05)
    q = np.zeros(panda.n)
    residual.update(1.0, q, q, q)
    for repeated_or_late in (1.0, 0.97):
        with pytest.raises(SampleOrderError):
            residual.update(repeated_or_late, q, q, q)
    residual.reset()
    residual.update(0.5, q, q, q)


def test_a_time_base_that_restarts_far_back_restarts_the_observer(panda):
    observer = make_residual('momentum_observer', panda, gap_threshold=0.05)
    q, zero = np.full(panda.n, 0.2), np.zeros(panda.n)
    tau = panda.gravity(q) - 1.0
    for k in range(20):
        observer.update(100.0 + k * 1e-3, q, zero, tau)
    # The driver restarted its clock: a gap, not a stream of refused samples.
    np.testing.assert_array_equal(observer.update(3.0, q, zero, tau), zero)
    assert observer.last_gap == pytest.approx(97.019)
    assert np.abs(observer.update(3.001, q, zero, tau)).max() > 0.0


def _identified(robot, gravity_scale, friction_model, friction_params):
    """An IdentifiedModel over every gravity column, scaled from the URDF's values."""
    labels = [f'{link}/{p}' for link in robot.joint_links for p in GRAVITY_PARAMETERS]
    basis = GravityBasis(labels, [], np.zeros((len(labels), 0)))
    return IdentifiedModel(robot.name, robot.joint_names,
                           gravity_scale * basis.base_values(robot), basis, friction_model,
                           np.tile(friction_params, (robot.n, 1)))


def test_identified_model_replaces_gravity_and_friction(panda, tmp_path):
    _identified(panda, 1.1, 'coulomb_viscous', [0.0, 2.0]).save(tmp_path / 'panda.yaml')
    identified = IdentifiedModel.load(tmp_path / 'panda.yaml', panda)
    q, v = np.full(panda.n, 0.3), np.full(panda.n, 0.1)
    # its friction is used, not the one configured for the URDF case
    fast = make_residual('fast', panda, identified, 'coulomb_viscous', [5.0, 5.0])
    np.testing.assert_allclose(fast.update(0.0, q, v, np.zeros(panda.n)),
                               1.1 * panda.gravity(q) + 2.0 * v, atol=1e-9)
    # inverse dynamics: URDF inertia, identified gravity
    a = np.linspace(-1, 1, panda.n)
    rnea = make_residual('rnea', panda, identified, acceleration_window=0.02)
    for t in (0.0, 0.01, 0.02):  # constant acceleration: the fit is exact
        q_t, v_t = q + v * t + 0.5 * a * t ** 2, v + a * t
        out = rnea.update(t, q_t, v_t, np.zeros(panda.n))
    expected = panda.rnea(q_t, v_t, a) + 0.1 * panda.gravity(q_t) + 2.0 * v_t
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_bad_settings_are_refused_with_a_message(panda):
    with pytest.raises(ValueError, match='unknown residual model'):
        make_residual('kalman', panda)
    with pytest.raises(ValueError, match=r'friction_parameters \(coulomb_viscous: .*\): '
                       'expected 2 or 7 × 2 values'):
        make_residual('fast', panda, None, 'coulomb_viscous', [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r'observer_gain\[1\] = -1 1/s is invalid'):
        make_residual('momentum_observer', panda, observer_gain=[50.0, -1.0, 5, 5, 5, 5, 5])
    with pytest.raises(ValueError, match='gap_threshold'):
        make_residual('fast', panda, gap_threshold=0.0)


def test_link_jacobian_maps_a_link_wrench_as_the_point_jacobian_maps_a_force(panda):
    rng = np.random.default_rng(7)
    q = panda.random_configuration(rng, 1)[0]
    rotation, _ = panda.link_pose(q, 'panda_hand')
    point = np.array([0.0, 0.03, 0.1])  # on the hand, in its frame
    force = rng.normal(size=3) * 10  # in the hand frame
    # the same force as a wrench at the hand origin: [F; point × F]
    from_wrench = panda.link_wrench_torque(q, 'panda_hand', force, np.cross(point, force))
    from_force = panda.point_jacobian(q, 'panda_hand', point).T @ (rotation @ force)
    np.testing.assert_allclose(from_wrench, from_force, atol=1e-9)
    # a pure moment turns each joint by its axis' share of it
    moment = rng.normal(size=3)
    _, axes = panda.joint_axes(q)
    np.testing.assert_allclose(panda.link_wrench_torque(q, 'panda_hand', np.zeros(3), moment),
                               axes @ (rotation @ moment), atol=1e-9)
    assert panda.jacobian(q, 'panda_hand').shape == (6, panda.n)
    with pytest.raises(ValueError, match='not in the robot model'):
        panda.jacobian(q, 'no_such_link')


def test_removing_the_wrist_wrench_leaves_only_the_collision(panda):
    """A tool pressing on a workpiece (seed 001 §3.1), measured by a wrist F/T sensor."""
    rng = np.random.default_rng(8)
    traj = Trajectory(panda, rng, amplitude=0.02, frequency=0.1)  # slow hybrid-task motion
    residual = make_residual('fast', panda, None, *FRICTION)
    tool_point = np.array([0.0, 0.0, 0.1])  # tool tip in the hand frame
    push = np.array([5.0, 0.0, -30.0])  # workpiece on the tool, base frame
    for t in np.arange(0.0, 1.0, 0.01):
        q, v, a = traj.state(t)
        task = panda.point_jacobian(q, 'panda_hand', tool_point).T @ push
        collision = _contact_torque(panda, q) if t > 0.5 else np.zeros(panda.n)
        tau = traj.torque(q, v, a, task + collision)
        # what a sensor at panda_link8 reads: the push and its moment about the link8 origin
        (r_hand, p_hand), (r_sensor, p_sensor) = panda.link_poses(q, ['panda_hand', 'panda_link8'])
        lever = r_sensor.T @ (r_hand @ tool_point + p_hand - p_sensor)
        force = r_sensor.T @ push
        left = residual.update(t, q, v, tau) - panda.link_wrench_torque(
            q, 'panda_link8', force, np.cross(lever, force))
        np.testing.assert_allclose(left, collision, atol=0.05)
        assert np.abs(task).max() > 5.0  # the task force alone would look like a collision


TOOL = Payload(5.0, (0.02, -0.03, 0.12))  # a 5 kg tool, centre of mass in the hand frame


@pytest.mark.parametrize('kind', MODELS)
def test_a_declared_payload_is_not_a_contact_and_an_undeclared_one_is_its_weight(panda, kind):
    rng = np.random.default_rng(9)
    loaded = panda.with_payload(TOOL.mass, TOOL.centre_of_mass)
    traj = Trajectory(loaded, rng, amplitude=0.2, frequency=0.2)
    declared = make_residual(kind, panda, None, *FRICTION, payload=TOOL)
    undeclared = make_residual(kind, panda, None, *FRICTION)
    for t in _uneven_times(rng, 0.5):
        q, v, a = traj.state(t)
        tau = traj.torque(q, v, a, np.zeros(panda.n))  # the loaded arm, nothing touching it
        with_tool, without_tool = declared.update(t, q, v, tau), undeclared.update(t, q, v, tau)
    weight = loaded.gravity(q) - panda.gravity(q)
    assert np.abs(weight).max() > 5.0  # a payload worth declaring
    np.testing.assert_allclose(TOOL.gravity(panda, q), weight, atol=1e-9)
    # The fast residual (eq. 9) omits M q̈ + C q̇ of the arm as it is, tool included.
    fast = kind == 'fast'
    omitted = -(loaded.rnea(q, v, a) - loaded.gravity(q)) if fast else 0.0
    np.testing.assert_allclose(with_tool, omitted, atol=0.05)
    # Undeclared, the tool's weight m·g is an external force on the robot, τ_ext = J(c)ᵀ m g
    # (the negative of its share of g(q)), plus its inertia for the models that have any.
    tool = weight if fast else loaded.rnea(q, v, a) - panda.rnea(q, v, a)
    np.testing.assert_allclose(without_tool - with_tool, -tool, atol=0.05)
    np.testing.assert_allclose(tool, weight, atol=0.1 * np.abs(weight).max())


def test_the_payload_adds_to_an_identified_gravity(panda):
    identified = _identified(panda, 1.0, 'coulomb_viscous', [0.0, 0.0])
    q = np.full(panda.n, 0.3)
    loaded = panda.with_payload(TOOL.mass, TOOL.centre_of_mass)
    for kind in MODELS:
        residual = make_residual(kind, panda, identified, payload=TOOL)
        np.testing.assert_allclose(residual.update(0.0, q, np.zeros(panda.n), loaded.gravity(q)),
                                   0.0, atol=1e-9)


def test_a_payload_from_its_gravity_parameters_is_the_same_payload(panda):
    values = TOOL.parameters(panda)[:4]
    again = Payload.from_gravity_parameters(panda, values)
    assert again.mass == pytest.approx(TOOL.mass)
    np.testing.assert_allclose(again.centre_of_mass, TOOL.centre_of_mass, atol=1e-12)
    for bad in (dict(mass=-1.0), dict(mass=float('nan')), dict(centre_of_mass=(0.0, 1.0))):
        with pytest.raises(ValueError, match='payload|mass = '):
            Payload(**{'mass': 1.0, 'centre_of_mass': (0.0, 0.0, 0.0)} | bad)


def test_a_payload_on_another_link_weighs_on_the_joints_before_it(panda):
    """A part strapped to link 4: its share of g(q) is the loaded model's, and joints 5–7,
    past the link, carry none of it."""
    part = Payload(2.0, (0.05, 0.0, 0.02), 'panda_link4')
    q = np.linspace(-0.4, 0.6, panda.n)
    weight = part.carried_by(panda).gravity(q) - panda.gravity(q)
    np.testing.assert_allclose(part.gravity(panda, q), weight, atol=1e-9)
    assert np.abs(weight[1:4]).max() > 1.0 and np.abs(weight[4:]).max() < 1e-9
    identified = _identified(panda, 1.0, 'coulomb_viscous', [0.0, 0.0])
    residual = make_residual('fast', panda, identified, payload=part)
    np.testing.assert_allclose(residual.update(0.0, q, np.zeros(panda.n),
                                               part.carried_by(panda).gravity(q)), 0.0, atol=1e-9)
    with pytest.raises(ValueError, match='nowhere'):
        Payload(1.0, (0.0, 0.0, 0.0), 'nowhere').carried_by(panda)
