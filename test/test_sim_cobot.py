"""The MuJoCo simulated cobot (core/sim/) and its reference motions
(core/identification/trajectory.py).

The simulation must obey the model the estimators assume, M q̈ + C q̇ + g + f(q̇) = τ + τ_ext
(RobotModel.rnea + seed 001 eq. 23 friction), with τ_ext = Σ J(p)ᵀ F of its ground truth.
"""
import os
import re

import numpy as np
import open3d as o3d
import pinocchio as pin
import pytest

from contact_estimation.core.identification.trajectory import (
    SmoothRandomTrajectory,
    TimeScaler,
    WaypointTrajectory,
    make_trajectory,
)
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.sim.cobot import SimulatedCobot, _friction_and_slope
from contact_estimation.core.sim.config import LidarConfig, SimConfig
from contact_estimation.core.sim.scenario import Scenario, ScenarioError

NOISELESS = dict(position_noise=0.0, velocity_noise=0.0, effort_noise=0.0,
                 ft_force_noise=0.0, ft_torque_noise=0.0)
# A pose with the forearm out in front of the base.
POSE = np.array([0.0, 0.3, 0.0, -1.8, 0.0, 2.1, 0.8])
PLANAR = os.path.join(os.path.dirname(__file__), '..', 'urdf', 'planar_4link.urdf')
# Tolerance of "on the link's surface" (m): LinkSurfaces meshes the primitives within 0.5 % of
# their radius (0.3 mm on the planar arm); one capsule per link was 15-50 mm off.
ON_SURFACE = 1e-3


@pytest.fixture(scope='module')
def planar():
    return RobotModel.load(PLANAR)


def _sim(robot, scenario: dict | None = None, trajectory=None, **config) -> SimulatedCobot:
    scenario = Scenario.from_dict(scenario or {}, robot)
    trajectory = trajectory or make_trajectory(robot, scenario.trajectory or
                                               {'type': 'smooth_random', 'seed': 2})
    lidar = LidarConfig(range_noise=0.0, floor=False)
    return SimulatedCobot(robot, trajectory, scenario,
                          SimConfig(**{**NOISELESS, 'lidar': lidar, **config}))


def _run(sim: SimulatedCobot, steps: int):
    """True q, q̇, τ and ground-truth τ_ext of each step, and q̇ one step later."""
    rows = []
    for _ in range(steps):
        sim.step()
        rows.append((sim.q, sim.v, sim.tau, sim.true_external_torque()))
    q, v, tau, tau_ext = (np.array(x) for x in zip(*rows))
    return q, v, tau, tau_ext


def _check_dynamics(sim, q, v, tau, tau_ext, estimate_share: float | None = 0.01) -> None:
    """τ_ext = M q̈ + C q̇ + g + f − τ from the model (RobotModel.rnea, q̈ the velocity change
    of each step) against the ground truth.

    Exact (to solver precision) with friction as the simulator integrates it: implicitly,
    linearised about the step's start velocity (module doc of sim_cobot). With the friction
    of the step's end velocity, as an estimator with the true friction model would use it,
    the error stays within `estimate_share` of τ_ext (impacts that cross the Coulomb slope in
    one step; None: not checked)."""
    a = np.diff(v, axis=0) / sim.dt
    rigid = np.array([sim.robot.rnea(q[k], v[k], a[k]) for k in range(len(a))])
    f, slope = _friction_and_slope(v[:-1], *sim._friction)
    implicit = rigid + f + np.maximum(slope, 0.0) * (v[1:] - v[:-1]) - tau[:-1]
    np.testing.assert_allclose(implicit, tau_ext[:-1], atol=1e-4)
    if estimate_share is None:
        return
    estimate = rigid + sim.friction(v[1:]) - tau[:-1]
    error = estimate - tau_ext[:-1]
    assert np.sqrt(np.mean(error ** 2)) < estimate_share * np.sqrt(np.mean(tau_ext ** 2))


# ------------------------------------------------------------------------- dynamics
def test_dynamics_agree_with_the_model_and_the_scripted_force(robot):
    sim = _sim(robot, {'forces': [{'link': 'panda_link5', 'point': [0.05, 0.0, -0.13],
                                   'force': [0.0, 30.0, -20.0], 'start': 0.2,
                                   'duration': 0.4}]})
    q, v, tau, tau_ext = _run(sim, 800)
    assert np.abs(tau_ext).max() > 5.0          # the force is felt
    assert np.abs(v).max() > 0.1                # while the arm moves
    _check_dynamics(sim, q, v, tau, tau_ext)


def test_obstacle_contact_is_ground_truth_with_the_model_dynamics(robot):
    """The arm sweeps its hand into a box: the contact shows on the hand, pushing the arm
    back (force against the motion), and the dynamics agree with its τ_ext."""
    end = POSE.copy()
    end[0] = 0.8
    sweep = WaypointTrajectory([POSE, end], [1.0])
    hand = robot.link_pose(sweep.sample(0.6)[0], 'panda_hand')[1]  # where the hand will be
    box = {'name': 'box', 'shape': 'box', 'size': [0.05, 0.05, 0.05], 'position': hand.tolist()}
    sim = _sim(robot, {'obstacles': [box]}, trajectory=sweep)
    q, v, tau, tau_ext = _run(sim, 900)
    contact_steps = np.flatnonzero(np.abs(tau_ext).max(axis=1) > 0)
    assert len(contact_steps) > 50
    k = contact_steps[len(contact_steps) // 2]
    assert np.dot(tau_ext[k], v[contact_steps[0]]) < 0  # it resists the motion
    _check_dynamics(sim, q, v, tau, tau_ext)


def test_ft_sensor_at_rest_reads_the_weight_of_the_robot(robot):
    sim = _sim(robot, trajectory=WaypointTrajectory([POSE], []))
    for _ in range(200):
        sim.step()
    assert np.abs(sim.v).max() < 1e-6
    force, torque = sim.ft_wrench()
    model, data = robot.model, robot.model.createData()
    pin.forwardKinematics(model, data, robot.configuration(POSE))
    pin.updateFramePlacements(model, data)
    to_base = data.oMf[model.getFrameId(robot.base_link)].inverse()
    gravity = to_base.rotation @ model.gravity.linear
    weight = np.zeros(3)
    moment = np.zeros(3)
    for j in range(1, model.njoints):
        com = (to_base * data.oMi[j]).act(model.inertias[j].lever)
        weight += model.inertias[j].mass * gravity
        moment += np.cross(com, model.inertias[j].mass * gravity)
    np.testing.assert_allclose(force, weight, atol=1e-6)
    np.testing.assert_allclose(torque, moment, atol=1e-6)
    assert force[2] < -100.0  # a panda weighs more than 10 kg


def test_sensor_noise_has_the_configured_spread(robot):
    sim = SimulatedCobot(robot, WaypointTrajectory([POSE], []), config=SimConfig(noise_seed=4))
    errors = []
    for _ in range(2000):
        sim.step()
        q, v, tau = sim.joint_state()
        errors.append(np.concatenate([q - sim.q, v - sim.v, tau - sim.tau]))
    spread = np.array(errors).std(axis=0).reshape(3, -1)
    config = sim.config
    for row, sigma in zip(spread, (config.position_noise, config.velocity_noise,
                                   config.effort_noise)):
        np.testing.assert_allclose(row, sigma, rtol=0.1)


# ------------------------------------------------------------------- scripted force
def test_scripted_force_is_jacobian_transpose_times_force(robot):
    point, force_link = np.array([0.05, 0.0, -0.13]), np.array([-30.0, 5.0, 0.0])
    sim = _sim(robot, {'forces': [{'link': 'panda_link5', 'point': point.tolist(),
                                   'force': force_link.tolist(), 'frame': 'link',
                                   'start': 0.1, 'duration': 0.3, 'ramp': 0.1}]})
    seen = {}
    for _ in range(450):
        sim.step()
        seen[round(sim.time, 3)] = (sim.q, sim.true_external_torque(), sim.true_contacts())
    for t in (0.05, 0.42):
        assert not np.any(seen[t][1]) and seen[t][2] == []
    for t, share in ((0.15, 0.5), (0.25, 1.0)):
        q, tau_ext, contacts = seen[t]
        rotation, _ = robot.link_pose(q, 'panda_link5')
        expected = robot.point_jacobian(q, 'panda_link5', point).T @ (rotation @ force_link)
        np.testing.assert_allclose(tau_ext, share * expected, atol=1e-9)
        assert [c.link for c in contacts] == ['panda_link5']
        np.testing.assert_allclose(contacts[0].point, point)
        np.testing.assert_allclose(contacts[0].force, share * force_link, atol=1e-9)


# ---------------------------------------------------------------------------- lidar
def test_lidar_sees_the_obstacle_box_and_the_robot(robot):
    centre, half = np.array([0.4, 0.7, 0.2]), np.array([0.15, 0.1, 0.2])
    sim = _sim(robot, {'obstacles': [{'name': 'box', 'shape': 'box', 'size': half.tolist(),
                                      'position': centre.tolist()}]},
               trajectory=WaypointTrajectory([POSE], []))
    sim.step()
    points = sim.lidar_points()
    on_box = np.abs(np.max(np.abs(points - centre) / half, axis=1) - 1.0) < 1e-6
    assert on_box.sum() > 20
    on_robot = LinkSurfaces(robot).closest_points(sim.q, points).distance < ON_SURFACE
    assert on_robot.sum() > 20
    assert on_box.sum() + on_robot.sum() == len(points)  # no floor: nothing else to see


# ---------------------------------------------------------------- collision geometry
@pytest.mark.parametrize('name, q', [
    ('panda', np.array([0.0, 0.0, 0.0, -0.07, 0.0, 0.5, 0.8])),  # stretched up
    ('planar', np.array([0.3, 0.8, -0.9, 0.6])),
])
def test_lidar_hits_lie_on_the_collision_surfaces_of_the_links(robot, planar, name, q):
    """Each collision object of the description is a MuJoCo geom of its own shape (mesh
    triangles, boxes, cylinders), so noiseless lidar hits on the arm lie on its links'
    surfaces as LinkSurfaces builds them (open3d reads the mesh files itself)."""
    arm = robot if name == 'panda' else planar
    sim = SimulatedCobot(arm, WaypointTrajectory([q], []), config=SimConfig(
        **NOISELESS, lidar=LidarConfig(range_noise=0.0, floor=False, rows=64, columns=256)))
    sim.step()
    points = sim.lidar_points()
    assert len(points) > 200
    surfaces = LinkSurfaces(arm)
    hits = surfaces.closest_points(sim.q, points)
    assert hits.distance.max() < ON_SURFACE
    assert len(set(surfaces.link_names(hits.link))) >= 4  # not one link seen from afar


def _distance_to_link(surfaces: LinkSurfaces, link: str, points: np.ndarray) -> np.ndarray:
    """Distance of points (link frame) to the link's collision surface."""
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(surfaces.mesh(link)))
    return scene.compute_distance(o3d.core.Tensor(points.astype(np.float32))).numpy()


@pytest.mark.parametrize('name, start, link, point, shape, size', [
    ('panda', POSE, 'panda_hand', [0.0, 0.0, 0.0], 'box', [0.05, 0.05, 0.05]),
    ('planar', np.array([0.0, 0.5, 0.5, 0.3]), 'link3', [0.175, 0.0, 0.0], 'cylinder',
     [0.04, 0.2]),
])
def test_obstacle_contact_point_lies_on_the_contacted_link(robot, planar, name, start, link,
                                                           point, shape, size):
    """The arm sweeps a link into an obstacle and presses on: every ground-truth contact
    point lies on the surface of the link it names, although MuJoCo's contact point lies
    midway through the penetration (here up to 4 mm inside the link)."""
    arm = robot if name == 'panda' else planar
    end = start.copy()
    end[0] = 0.8
    sweep = WaypointTrajectory([start, end], [1.0])
    rotation, origin = arm.link_pose(sweep.sample(0.6)[0], link)  # the link at t = 0.6 s
    obstacle = {'name': 'o', 'shape': shape, 'size': size,
                'position': (rotation @ point + origin).tolist()}
    sim = _sim(arm, {'obstacles': [obstacle]}, trajectory=sweep)
    surfaces = LinkSurfaces(arm)
    contacts = []
    for _ in range(900):
        sim.step()
        contacts += sim.true_contacts()
    assert len(contacts) > 50 and link in {c.link for c in contacts}
    assert max(np.linalg.norm(c.force) for c in contacts) > 20.0  # pressed, not grazed
    for contacted in {c.link for c in contacts}:
        points = np.array([c.point for c in contacts if c.link == contacted])
        assert _distance_to_link(surfaces, contacted, points).max() < ON_SURFACE


# ------------------------------------------------------------------------- scenarios
@pytest.mark.parametrize('raw, message', [
    ({'forse': []}, "unknown keys ['forse']"),
    ({'robot': 'ur5'}, "written for robot 'ur5'"),
    ({'forces': [{'link': 'nowhere', 'point': [0, 0, 0], 'force': [1, 0, 0], 'start': 0,
                  'duration': 1}]}, "link 'nowhere' is not a moving link"),
    ({'forces': [{'link': 'panda_link5', 'point': [0, 0], 'force': [1, 0, 0], 'start': 0,
                  'duration': 1}]}, 'point must be 3 finite numbers'),
    ({'forces': [{'link': 'panda_link5', 'point': [0, 0, 0], 'force': [1, 0, 0],
                  'duration': 1}]}, "'start'"),
    ({'forces': [{'link': 'panda_link5', 'point': [0, 0, 0], 'force': [1, 0, 0], 'start': 0,
                  'duration': 0.1, 'ramp': 0.2}]}, 'ramp <= duration / 2'),
    ({'obstacles': [{'name': 'b', 'shape': 'cone', 'size': [1], 'position': [0, 0, 0]}]},
     'obstacle shape must be one of'),
    ({'obstacles': [{'name': 'b', 'shape': 'box', 'size': [1, -1, 1],
                     'position': [0, 0, 0]}]}, 'sizes must be positive'),
    ({'trajectory': {'type': 'spline'}}, 'trajectory type must be one of'),
    ({'trajectory': {'type': 'waypoints', 'waypoints': [[0] * 7, [0] * 7],
                     'durations': [1]}}, 'outside the joint limits'),
])
def test_bad_scenario_is_refused_with_a_clear_message(robot, raw, message):
    with pytest.raises(ScenarioError, match=re.escape(message)):
        Scenario.from_dict(raw, robot)


def test_scenario_file_error_names_the_file_and_shipped_scenarios_load(robot, tmp_path):
    from contact_estimation import manifest
    bad = tmp_path / 'bad.yaml'
    bad.write_text('obstacles: [{name: b, shape: box, size: [1, 1], position: [0, 0, 0]}]\n')
    with pytest.raises(ScenarioError, match=f'{bad}: .*size of a box must be 3'):
        Scenario.load(str(bad), robot)
    demo = Scenario.load(manifest.share_path('config', 'scenarios', 'demo.yaml'), robot)
    assert demo.forces and demo.obstacles and demo.trajectory['type'] == 'smooth_random'
    assert not Scenario.load(manifest.share_path('config', 'scenarios', 'free_motion.yaml'),
                             robot).forces


def test_demo_scenario_pushes_without_touching_the_box(robot):
    """The demo's box is for the lidar only: over the scenario, contacts come from the push."""
    from contact_estimation import manifest
    scenario = Scenario.load(manifest.share_path('config', 'scenarios', 'demo.yaml'), robot)
    sim = SimulatedCobot(robot, make_trajectory(robot, scenario.trajectory), scenario,
                         SimConfig(**NOISELESS))
    links = set()
    for k in range(8000):
        sim.step()
        if k % 10 == 0:
            links |= {c.link for c in sim.true_contacts()}
    assert links == {scenario.forces[0].link}


# --------------------------------------------------------------------- time scaling
def test_time_scaling_zero_holds_the_reference_and_negative_goes_back(robot):
    sim = _sim(robot, {'trajectory': {'type': 'smooth_random', 'seed': 5}})
    for _ in range(300):
        sim.step()
    assert sim.set_time_scaling(0.0) == 0.0
    held = sim.scaler.path_time
    q_hold = sim.scaler.trajectory.sample(held)[0]
    for _ in range(600):
        sim.step()
    q_settled = sim.q
    for _ in range(400):
        sim.step()
    assert sim.scaler.path_time == held
    # Stopped, up to a creep onto the held reference: near zero speed the friction's steep
    # slope (seed 001 eq. 23) damps the controller's pull on the last few centiradians.
    assert np.abs(sim.v).max() < 0.01
    assert np.linalg.norm(sim.q - q_hold) < np.linalg.norm(q_settled - q_hold) < 0.1
    assert sim.set_time_scaling(-3.0) == -1.0  # never faster than planned
    for _ in range(100):
        sim.step()
    assert sim.scaler.path_time == pytest.approx(held - 0.1)
    with pytest.raises(ValueError, match='finite'):
        sim.set_time_scaling(float('nan'))


# ----------------------------------------------------------------------- trajectories
def test_smooth_random_trajectory_stays_within_limits_and_speed(robot):
    trajectory = SmoothRandomTrajectory(robot, seed=7, speed_scale=0.4, margin=0.2)
    t = np.linspace(0.0, 120.0, 20001)
    q, v, a = (np.array(x) for x in zip(*(trajectory.sample(s) for s in t)))
    lower, upper = robot.position_limits
    assert np.all(q >= lower + 0.2 - 1e-12) and np.all(q <= upper - 0.2 + 1e-12)
    assert np.all(np.abs(v) <= 0.4 * robot.velocity_limits + 1e-12)
    dt = t[1] - t[0]
    np.testing.assert_allclose(np.gradient(q, dt, axis=0)[1:-1], v[1:-1], atol=1e-3)
    np.testing.assert_allclose(np.gradient(v, dt, axis=0)[1:-1], a[1:-1], atol=1e-2)


def test_waypoint_trajectory_rests_at_each_waypoint(robot):
    points = np.array([POSE, POSE + 0.3, POSE - 0.2])
    trajectory = make_trajectory(robot, {'type': 'waypoints', 'waypoints': points.tolist(),
                                         'durations': [1.0, 2.0]})
    for t, expected in ((-1.0, points[0]), (0.0, points[0]), (1.0, points[1]),
                        (3.0, points[2]), (9.0, points[2])):
        q, v, a = trajectory.sample(t)
        np.testing.assert_allclose(q, expected, atol=1e-12)
        np.testing.assert_allclose(v, 0.0, atol=1e-12)
    q, v, _ = trajectory.sample(0.5)
    np.testing.assert_allclose(q, (points[0] + points[1]) / 2)
    np.testing.assert_allclose(v, 1.875 * (points[1] - points[0]))  # 30 s²(1−s)² at s = ½


def test_time_scaler_plays_the_path_on_the_scaled_clock(robot):
    trajectory = WaypointTrajectory([POSE, POSE + 0.5], [1.0])
    scaler = TimeScaler(trajectory, 0.01)
    scaler.set_scaling(0.5)
    for _ in range(50):
        scaler.advance()
    assert scaler.path_time == pytest.approx(0.25)
    q, v, a = scaler.reference()
    q_path, v_path, a_path = trajectory.sample(0.25)
    np.testing.assert_allclose(q, q_path)
    np.testing.assert_allclose(v, 0.5 * v_path)
    np.testing.assert_allclose(a, 0.25 * a_path)
    scaler.set_scaling(-1.0)
    for _ in range(100):
        scaler.advance()
    assert scaler.path_time == 0.0
    np.testing.assert_allclose(scaler.reference()[1], 0.0)


def test_a_moving_compliant_obstacle_recoils_and_bears_the_spring_force_of_its_stiffness(robot):
    """A part of mass m on a soft holding spring, contact spring k (solref in MuJoCo's direct
    form, k / μ), hit by the sweeping hand: it recoils, the arm's dynamics still agree with
    its τ_ext, and the peak force is the two-mass spring's v √(μ k) (Annex A.3.2 of ISO/TS
    15066; benchmarks/pfl_sim.py relies on it). The arm's joints stay the first in qpos."""
    from contact_estimation.core.contact.pfl import effective_mass, reduced_mass
    from contact_estimation.core.sim.scenario import Obstacle
    end = POSE.copy()
    end[0] = 0.8
    sweep = WaypointTrajectory([POSE, end], [1.0])
    q_hit = sweep.sample(0.5)[0]
    hand = robot.link_pose(q_hit, 'panda_hand')[1]
    direction = robot.point_jacobian(q_hit, 'panda_hand', np.zeros(3)) @ sweep.sample(0.5)[1]
    direction /= np.linalg.norm(direction)
    mass, k = 0.6, 75_000.0
    mu = reduced_mass(mass, effective_mass(robot, q_hit, 'panda_hand', hand, direction))
    yaw = np.arctan2(direction[1], direction[0])
    part = Obstacle('part', 'sphere', (0.04,), hand + 0.12 * direction,
                    np.array([0.0, 0.0, yaw]), mass=mass, spring=mass * (2 * np.pi) ** 2,
                    solref=(-k / mu, -0.2 * np.sqrt(k * mu) / mu),
                    solimp=(0.99, 0.99, 0.001, 0.5, 2.0), condim=1)
    sim = SimulatedCobot(robot, sweep, Scenario(obstacles=[part]), SimConfig(**NOISELESS))
    first, speed, rows = [], None, []   # |F| over the first impact, until it lets go
    for _ in range(900):
        sim.step()
        rows.append((sim.q, sim.v, sim.tau, sim.true_external_torque()))
        force = sum(np.linalg.norm(c.force) for c in sim.true_contacts())
        if force and speed is None:
            speed = float(robot.point_jacobian(sim.q, 'panda_hand', np.zeros(3)) @ sim.v
                          @ direction)
        if speed is not None and (not first or first[-1] > 0.0):
            first.append(force)
    peak = max(first)
    assert speed is not None and speed > 0.3
    assert sim.data.qpos[robot.n] > 0.01                       # the part recoiled
    assert abs(peak - speed * np.sqrt(mu * k)) < 0.15 * speed * np.sqrt(mu * k)
    # stiff repeated impacts cross the Coulomb slope: only the exact identity holds
    _check_dynamics(sim, *(np.array(x) for x in zip(*rows)), estimate_share=None)
