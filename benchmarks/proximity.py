"""Proximity monitor (seed 002, issue 12): pair-test speed, cycle times, and how early it warns
and stops before the simulated Panda hits an obstacle. ROS-free, in-process.

1. Pair test: the seed's sizes (a robot of 119 spheres against a human arm of ~33) and the
   Panda's default 52 spheres against a whole person, person far (plain distances) and near
   (every pair also gets the directional speed term). One `update` is the monitor's cycle per
   joint state: two forward-kinematics passes (sphere centres and their finite-difference
   velocities) plus the pair test, whose time is the cycle minus the two passes.
2. Lidar objects: a ~20 000-point scan of the simulated cell (lidar 80 × 256 rays) goes
   through the contact localizer's pipeline, core/contact/lidar_fusion.py (workspace crop and floor
   cut, voxels, self-filter against the robot's meshes, DBSCAN), as the node does, then into
   objects of spheres (`set_clusters`, 10 Hz), checked at the node's `check_rate` (100 Hz,
   each on the latest of the 1 kHz joint states) and, for comparison, at every joint state.
3. Obstacles (core/sim/): the Panda sweeps joint 1 by 2 rad in 3 s (hand up to ~0.8 m/s) past a ball
   placed so that the arm's true clearance on the reference path is the one in the table
   (negative: the arm runs into it). Lidar at 10 Hz through lidar_fusion, the monitor as the
   node runs it: a check every 1/check_rate on the latest joint state, the check period
   added to the reaction time. Open loop (the monitor does not act): warning (speed scale
   < 1) and stop times before the first physical contact in MuJoCo, and stops in free motion
   past the ball (false stops: no contact). Closed loop: the speed scale re-times the
   trajectory (as the sim cobot plays min(f_S, s), seed 003 eq. 8).

    .venv/bin/python benchmarks/proximity.py [--quick]
"""
from __future__ import annotations

import argparse
import time

from dataclasses import replace

import numpy as np

from contact_estimation.core.contact.lidar_fusion import LidarFusion
from contact_estimation.core.contact.proximity import (DEFAULT_PARTS, HumanModel,
                                               ProximityConfig, ProximityMonitor,
                                               standing_skeleton)
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.config import LidarConfig, SimConfig
from contact_estimation.core.sim.scenario import Obstacle, Scenario
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.identification.trajectory import make_trajectory
from contact_estimation.nodes.proximity_monitor import PARAMETERS

SEED_ROBOT_SPACING = 0.0202  # m: the Panda in 119 spheres, seed 002's robot
ARM_SPACING = 0.021          # m: upper arm, forearm and hand in 32 spheres (the seed's arm: 33)
SWEEP_START = np.array([-1.0, 0.3, 0.0, -1.8, 0.0, 2.1, 0.8])
SWEEP = {'type': 'waypoints', 'waypoints': [SWEEP_START.tolist(),
                                            (SWEEP_START + [2.0, 0, 0, 0, 0, 0, 0]).tolist()],
         'durations': [3.0]}
BALL_RADIUS = 0.06
LIDAR = LidarConfig(rows=80, columns=256, rpy=(0.0, 0.8, np.pi), vertical_fov=1.0,
                    horizontal_fov=1.6)
CHECK_PERIOD = 1.0 / PARAMETERS['check_rate'].default  # s, the node's check period
# The node adds its check period to the reaction time; the ball does not move.
STATIC_OBSTACLES = ProximityConfig(object_speed=0.0,
                                   reaction_time=ProximityConfig().reaction_time + CHECK_PERIOD)
MOVING_OBJECTS = replace(STATIC_OBSTACLES, object_speed=ProximityConfig().object_speed)


def timed(call, repeat: int) -> np.ndarray:
    """Seconds per call, `repeat` calls."""
    times = np.empty(repeat)
    for k in range(repeat):
        start = time.perf_counter()
        call(k)
        times[k] = time.perf_counter() - start
    return times


def moving_states(robot: RobotModel, count: int):
    trajectory = make_trajectory(robot, {'type': 'smooth_random', 'seed': 1, 'speed_scale': 0.3})
    return [trajectory.sample(0.001 * k)[:2] for k in range(count)]


# ------------------------------------------------------------------ 1. pair test
def pair_test(robot: RobotModel, repeat: int) -> None:
    print('\n## 1. Pair test (seed 002: r + r\' ≥ ‖c − c\'‖ over all pairs, with S_p)\n')
    print('| robot spheres | body | body spheres | pairs | person | cycle p50 | cycle p99 '
          '| pair test p50 | pairs/s |')
    print('|---|---|---|---|---|---|---|---|---|')
    seed_robot = LinkSurfaces(robot, sphere_spacing=SEED_ROBOT_SPACING)
    default_robot = LinkSurfaces(robot)
    arm = HumanModel([p for p in DEFAULT_PARTS if p.name.startswith('left_')],
                     sphere_spacing=ARM_SPACING)
    states = moving_states(robot, repeat)
    hand = robot.link_pose(states[0][0], 'panda_hand')[1]
    for surfaces, human, body in ((seed_robot, arm, 'left arm'),
                                  (default_robot, HumanModel(), 'whole person')):
        fk = np.median(timed(lambda k: surfaces.sphere_centres(states[k][0]), repeat))
        for where, centre in (('far', hand + [1.5, 0.6, 0.2]), ('near', hand + [0.55, 0.2, 0.0])):
            monitor = ProximityMonitor(surfaces, STATIC_OBSTACLES, human)
            skeleton = standing_skeleton(centre)  # near: the left hand ~5 cm from the gripper
            monitor.set_skeleton(0.0, skeleton)
            bodies = human.bodies(skeleton)
            spheres = sum(len(b.radii) for b in bodies)
            boxes = sum(b.box_centre is not None for b in bodies)
            cycle = timed(lambda k: monitor.update(0.0, *states[k]), repeat)
            pairs = len(surfaces.sphere_radii) * (spheres + boxes)
            pair_time = np.median(cycle) - 2 * fk
            print(f'| {len(surfaces.sphere_radii)} | {body} | {spheres}'
                  f'{f" + {boxes} box" if boxes else ""} | {pairs} | {where} '
                  f'| {1e6 * np.median(cycle):.0f} µs | {1e6 * np.percentile(cycle, 99):.0f} µs '
                  f'| {1e6 * pair_time:.0f} µs | {pairs / pair_time / 1e6:.1f} M |')
    print(f'\nForward kinematics of the sphere centres: {1e6 * fk:.0f} µs per pass, two per cycle.')


# ------------------------------------------------------------------ 2. lidar objects
def cell_obstacles() -> list[Obstacle]:
    """A cell around the arm: a ball by its path, a table, a box on it, a person-sized column."""
    return [Obstacle('ball', 'sphere', (BALL_RADIUS,), np.array([0.7, 0.0, 0.4])),
            Obstacle('table', 'box', (0.4, 0.3, 0.02), np.array([0.0, 0.75, 0.3])),
            Obstacle('crate', 'box', (0.1, 0.1, 0.1), np.array([0.1, 0.7, 0.42])),
            Obstacle('person', 'capsule', (0.2, 0.6), np.array([0.9, -0.8, 0.8]))]


def lidar_objects(robot: RobotModel, repeat: int) -> None:
    print('\n## 2. Lidar objects: a ~20 000-point scan at 10 Hz through lidar_fusion, checks at '
          f'{1 / CHECK_PERIOD:.0f} Hz on the latest 1 kHz joint state\n')
    surfaces = LinkSurfaces(robot)
    sim = SimulatedCobot(robot, make_trajectory(robot, SWEEP),
                         Scenario(obstacles=cell_obstacles()), SimConfig(lidar=LIDAR))
    sim.step()
    points = sim.lidar_points()
    fusion = LidarFusion(surfaces)
    pipeline = timed(lambda k: fusion.update(0.0, sim.q, points), max(3, repeat // 200))
    obstacles = fusion.update(0.0, sim.q, points)
    monitor = ProximityMonitor(surfaces, STATIC_OBSTACLES)
    spheres = timed(lambda k: monitor.set_clusters(0.0, obstacles.clusters), max(5, repeat // 50))
    states = moving_states(robot, repeat)
    cycle = timed(lambda k: monitor.update(0.0, *states[k]), repeat)
    body_spheres = sum(len(b.radii) for b in monitor.update(0.0, *states[0]).bodies)
    cloud = 10 * (np.median(pipeline) + np.median(spheres))
    print('| points | obstacle points (lidar_fusion) | objects | object spheres | pairs '
          '| lidar_fusion | clusters → spheres | check p50 | check p99 '
          f'| CPU at {1 / CHECK_PERIOD:.0f} Hz + 10 Hz clouds | at 1 kHz + 10 Hz |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    print(f'| {len(points)} | {len(obstacles.points)} | {len(obstacles.clusters)} '
          f'| {body_spheres} | {body_spheres * len(surfaces.sphere_radii)} '
          f'| {1e3 * np.median(pipeline):.0f} ms | {1e3 * np.median(spheres):.1f} ms '
          f'| {1e6 * np.median(cycle):.0f} µs | {1e6 * np.percentile(cycle, 99):.0f} µs '
          f'| {100 * (np.median(cycle) / CHECK_PERIOD + cloud):.0f} % of a core '
          f'| {100 * (1000 * np.median(cycle) + cloud):.0f} % |')


# ------------------------------------------------------------------ 3. obstacles
def reference_path(robot: RobotModel, step: float = 0.01) -> np.ndarray:
    trajectory = make_trajectory(robot, SWEEP)
    return np.array([trajectory.sample(t)[0] for t in np.arange(0.0, 3.0 + step, step)])


def ball_placements(robot: RobotModel, surfaces: LinkSurfaces, clearances) -> list[np.ndarray]:
    """Ball centres beside the hand's path at mid-sweep, pushed out radially so that the true
    clearance (arm meshes to ball surface, over the reference path) is each of `clearances`."""
    path = reference_path(robot)
    middle = robot.link_pose(path[len(path) // 2], 'panda_hand')[1]
    outward = np.array([middle[0], middle[1], 0.0]) / np.hypot(middle[0], middle[1])
    shifts = np.arange(-0.1, 0.4, 0.001)
    centres = middle + shifts[:, None] * outward
    clearance = np.min([surfaces.closest_points(q, centres).distance for q in path], axis=0)
    clearance -= BALL_RADIUS
    return [centres[np.argmin(np.abs(clearance - c))] for c in clearances]


def sweep_past(robot, surfaces, ball: np.ndarray, config: ProximityConfig, closed_loop: bool):
    """One sweep past the ball; returns the times of the first warning, stop and contact, the
    number of stop episodes, the smallest monitored distance and the path time reached."""
    scenario = Scenario(obstacles=[Obstacle('ball', 'sphere', (BALL_RADIUS,), ball)])
    sim = SimulatedCobot(robot, make_trajectory(robot, SWEEP), scenario, SimConfig(lidar=LIDAR))
    monitor, fusion = ProximityMonitor(surfaces, config), LidarFusion(surfaces)
    first = {'warning': None, 'stop': None, 'contact': None}
    stops, stopped, closest = 0, False, np.inf
    check_every = round(CHECK_PERIOD / sim.dt)
    for k in range(int(3.5 / sim.dt)):
        sim.step()
        if first['contact'] is None and sim.true_contacts():
            first['contact'] = sim.time
        if k % 100 == 0:
            monitor.set_clusters(sim.time,
                                 fusion.update(sim.time, sim.q, sim.lidar_points()).clusters)
        if k % check_every:
            continue
        q, velocity, _ = sim.joint_state()
        result = monitor.update(sim.time, q, velocity)
        if closed_loop:
            sim.set_time_scaling(result.speed_scale)
        closest = min(closest, np.min(result.body_distance, initial=np.inf))
        if sim.time > 0.2:  # past the scale's start-up ramp
            if first['warning'] is None and result.body_warning.any():
                first['warning'] = sim.time
            if result.stop and not stopped:
                stops += 1
                first['stop'] = first['stop'] or sim.time
            stopped = result.stop
    return first, stops, closest, sim.scaler.path_time


def moment(t: float | None) -> str:
    return 'none' if t is None else f'{t:.3f} s'


def obstacles(robot: RobotModel, clearances) -> None:
    print('\n## 3. Obstacles on the simulated Panda (ball r = 6 cm beside the hand\'s path)\n')
    surfaces = LinkSurfaces(robot)
    balls = ball_placements(robot, surfaces, clearances)
    print('| true clearance | object speed | open loop: contact at | warning before contact '
          '| stop before contact | stop episodes (false if no contact) | closed loop: contact '
          '| closest (spheres) | path time reached |')
    print('|---|---|---|---|---|---|---|---|---|')
    configs = [STATIC_OBSTACLES]
    for clearance, ball in zip(clearances, balls):
        for config in configs + ([MOVING_OBJECTS] if clearance < 0 else []):
            first, stops, _, _ = sweep_past(robot, surfaces, ball, config, closed_loop=False)
            loop, _, closest, path_time = sweep_past(robot, surfaces, ball, config,
                                                     closed_loop=True)
            contact = first['contact']
            lead = {event: '–' if contact is None or first[event] is None
                    else f'{1e3 * (contact - first[event]):.0f} ms'
                    for event in ('warning', 'stop')}
            print(f'| {100 * clearance:+.0f} cm | {config.object_speed} m/s | {moment(contact)} '
                  f'| {lead["warning"]} | {lead["stop"]} | {stops} | {moment(loop["contact"])} '
                  f'| {100 * closest:.1f} cm | {path_time:.2f} / 3.00 s |')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='fewer repetitions and scenarios')
    args = parser.parse_args()
    robot = RobotModel.load('panda')
    repeat = 300 if args.quick else 3000
    pair_test(robot, repeat)
    lidar_objects(robot, repeat)
    obstacles(robot, [-0.03, 0.10] if args.quick else [-0.03, 0.02, 0.05, 0.10, 0.20])


if __name__ == '__main__':
    main()
