"""MJCF of the simulated cobot, generated from the robot's own description.

One body per joint of the chain, with the joint frames, axes and inertial parameters of
pinocchio's model, so that MuJoCo's rigid-body dynamics are exactly `RobotModel.rnea`.
MuJoCo's world is the robot's `base_link` frame. Every collision object of the robot's
description is a geom of its own (primitives as such, meshes as mesh assets), so contacts and
lidar hits lie on the links' collision surfaces; the robot does not collide with itself.
The 6-axis F/T sensor (seed 004) is a massless body between the base and joint 1.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin

from contact_estimation.core.robot.pose import rotation_from_rpy
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.scenario import Obstacle

FT_SITE = 'ft_sensor'
FLOOR = 'floor'
OBSTACLE_PREFIX = 'obstacle/'
ROBOT_PREFIX = 'robot/'


def _fmt(values) -> str:
    return ' '.join(repr(float(v)) for v in np.ravel(values))


def _quat(rotation: np.ndarray) -> str:
    q = pin.Quaternion(rotation)
    return _fmt([q.w, q.x, q.y, q.z])


def _robot_geom(assets: ET.Element, body: ET.Element, geometry: pin.GeometryObject,
                placement: pin.SE3) -> None:
    """One collision object of the robot as a MuJoCo geom of `body`, placed by `placement`.

    Primitives keep their shape (coal and MuJoCo both size them by half extents, radius and
    half length along z); a mesh becomes one of `assets`, the vertices and triangles coal
    loaded (the URDF's scale applied). MuJoCo collides with a mesh's convex hull and casts
    rays at its triangles. Robot geoms collide with obstacles only: contype 1 / conaffinity 0
    never matches itself.
    """
    shape, name = geometry.geometry, ROBOT_PREFIX + geometry.name
    kind = type(shape).__name__
    if kind.startswith('BVHModel'):
        triangles = [[t[k] for k in range(3)]
                     for t in map(shape.tri_indices, range(shape.num_tris))]
        ET.SubElement(assets, 'mesh', name=name, vertex=_fmt(shape.vertices()),
                      face=' '.join(str(i) for i in np.ravel(triangles)))
        attrs = {'type': 'mesh', 'mesh': name}
    elif kind == 'Box':
        attrs = {'type': 'box', 'size': _fmt(shape.halfSide)}
    elif kind == 'Sphere':
        attrs = {'type': 'sphere', 'size': repr(shape.radius)}
    elif kind in ('Cylinder', 'Capsule'):
        attrs = {'type': kind.lower(), 'size': _fmt([shape.radius, shape.halfLength])}
    else:
        raise ValueError(f'collision shape {kind} of {geometry.name!r} is not supported')
    ET.SubElement(body, 'geom', name=name, pos=_fmt(placement.translation),
                  quat=_quat(placement.rotation), contype='1', conaffinity='0',
                  rgba='0.9 0.9 0.9 1', **attrs)


def _joint(body: ET.Element, robot: RobotModel, j: int) -> None:
    """Hinge or slide along the pinocchio joint's motion subspace, with its position limits."""
    joint = robot.model.joints[j]
    data = joint.createData()
    joint.calc(data, pin.neutral(robot.model))
    linear, angular = np.asarray(data.S).ravel()[:3], np.asarray(data.S).ravel()[3:]
    revolute = np.linalg.norm(angular) > 0
    attrs = {'name': robot.joint_names[j - 1], 'type': 'hinge' if revolute else 'slide',
             'axis': _fmt(angular if revolute else linear)}
    lower, upper = (limit[j - 1] for limit in robot.position_limits)
    if np.isfinite(lower) and np.isfinite(upper):
        attrs['range'] = _fmt([lower, upper])
    ET.SubElement(body, 'joint', **attrs)


def _obstacle(world: ET.Element, obstacle: Obstacle) -> None:
    """A fixed obstacle as a geom of the world; one with a mass as a body sliding along its
    own axes on springs (`Obstacle`), its joints named after its geom."""
    name = OBSTACLE_PREFIX + obstacle.name
    pose = {'pos': _fmt(obstacle.position),
            'quat': _quat(rotation_from_rpy(obstacle.rpy, f'obstacle {obstacle.name} rpy'))}
    contact = {'condim': str(obstacle.condim)}
    if obstacle.solref is not None:
        contact['solref'] = _fmt(obstacle.solref)
    if obstacle.solimp is not None:
        contact['solimp'] = _fmt(obstacle.solimp)
    parent, geom_pose = world, pose
    if obstacle.mass > 0.0:
        parent = ET.SubElement(world, 'body', name=name, gravcomp='1', **pose)  # held up
        geom_pose = {}
        for axis in obstacle.axes:
            ET.SubElement(parent, 'joint', type='slide', axis=_fmt(np.eye(3)['xyz'.index(axis)]),
                          name=name if len(obstacle.axes) == 1 else f'{name}/{axis}',
                          stiffness=repr(obstacle.spring), damping=repr(obstacle.spring_damping))
        ET.SubElement(parent, 'inertial', pos='0 0 0', mass=repr(obstacle.mass),
                      diaginertia=_fmt([obstacle.mass * 1e-3] * 3))
    ET.SubElement(parent, 'geom', name=name, type=obstacle.shape, size=_fmt(obstacle.size),
                  contype='0', conaffinity='1', rgba='0.8 0.3 0.2 0.6', **geom_pose, **contact)


def build_mjcf(robot: RobotModel, obstacles: list[Obstacle], config: SimConfig) -> str:
    """MJCF of the robot on its F/T sensor, the obstacles and the floor; world = base frame."""
    model = robot.model
    pin.framesForwardKinematics(model, robot.data, pin.neutral(model))
    base_inverse = robot.data.oMf[model.getFrameId(robot.base_link)].inverse()

    root = ET.Element('mujoco', model=robot.name or 'robot')
    ET.SubElement(root, 'compiler', angle='radian', inertiafromgeom='false', autolimits='true')
    ET.SubElement(root, 'option', timestep=repr(config.timestep), integrator=config.integrator,
                  gravity=_fmt(base_inverse.rotation @ model.gravity.linear))
    assets = ET.SubElement(root, 'asset')
    world = ET.SubElement(root, 'worldbody')
    lidar = config.lidar
    if lidar.floor:
        # Seen by the lidar, never touched (contype = conaffinity = 0). A thin box, not a
        # plane: mj_multiRay culls planes by a zero bounding radius and misses most rays.
        ET.SubElement(world, 'geom', name=FLOOR, type='box', size='5 5 0.005',
                      pos=_fmt([0, 0, lidar.floor_height - 0.005]), contype='0',
                      conaffinity='0', rgba='0.5 0.5 0.5 1')

    bodies = {0: world}
    # Massless body between the base and joint 1: the F/T sensor measures its link to the world.
    sensor_body = ET.SubElement(world, 'body', name=FT_SITE)
    ET.SubElement(sensor_body, 'site', name=FT_SITE, size='0.02')
    for j in range(1, model.njoints):
        parent = model.parents[j]
        placement = model.jointPlacements[j]
        if parent == 0:
            placement = base_inverse * placement
        body = ET.SubElement(sensor_body if parent == 0 else bodies[parent], 'body',
                             name=robot.joint_links[j - 1], pos=_fmt(placement.translation),
                             quat=_quat(placement.rotation))
        bodies[j] = body
        _joint(body, robot, j)
        inertia = model.inertias[j]
        i = inertia.inertia
        ET.SubElement(body, 'inertial', pos=_fmt(inertia.lever), mass=repr(inertia.mass),
                      fullinertia=_fmt([i[0, 0], i[1, 1], i[2, 2], i[0, 1], i[0, 2], i[1, 2]]))
    for geometry in robot.collision_model.geometryObjects:
        joint = geometry.parentJoint
        _robot_geom(assets, bodies[joint], geometry,
                    base_inverse * geometry.placement if joint == 0 else geometry.placement)
    for obstacle in obstacles:  # after the arm: its joints are the first in qpos
        _obstacle(world, obstacle)
    sensors = ET.SubElement(root, 'sensor')
    ET.SubElement(sensors, 'force', site=FT_SITE)
    ET.SubElement(sensors, 'torque', site=FT_SITE)
    return ET.tostring(root, encoding='unicode')
