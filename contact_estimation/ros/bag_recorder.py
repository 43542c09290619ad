"""Record a running suite into a SuiteBag (suite_bag.py): every topic of nodes.yaml as it was
sent, /tf from the joint states and /robot_description.

The subscriptions are raw: rclpy hands over the CDR bytes DDS carried, which is what a rosbag2
stores, so nothing is parsed or serialised again (only /joint_states is parsed, for /tf).
They are best effort, so they hear best-effort and reliable publishers alike; a machine that
cannot keep up loses samples from the recording, not from the suite.
"""
from __future__ import annotations

import importlib
import os
import shutil

import yaml

from rclpy.node import Node
from rclpy.serialization import deserialize_message

from contact_estimation import manifest
from contact_estimation.core.robot_model import RobotModel
from contact_estimation.ros.qos import SENSOR_QOS
from contact_estimation.suite_bag import DEFAULT_TF_RATE, JOINT_STATES, SuiteBag, suite_topics


def message_class(type_name: str):
    """The rclpy message class of 'package/msg/Name'."""
    package, kind, name = type_name.split('/')
    return getattr(importlib.import_module(f'{package}.{kind}'), name)


class BagRecorder:
    """A node on `context` that writes every suite topic to a new MCAP bag at `path`."""

    def __init__(self, context, path: str | os.PathLike, robot: RobotModel,
                 tf_rate: float = DEFAULT_TF_RATE,
                 node_name: str = 'contact_estimation_recorder'):
        self.node = Node(node_name, context=context)
        self.bag = SuiteBag(path, robot, tf_rate)
        self._joint_state_class = message_class('sensor_msgs/msg/JointState')
        for topic, type_name in suite_topics().items():
            self.node.create_subscription(
                message_class(type_name), topic,
                lambda cdr, t=topic, m=type_name: self._received(t, m, cdr), SENSOR_QOS,
                raw=True)

    @classmethod
    def for_suite(cls, context, path: str | os.PathLike, node: str = 'sim_cobot',
                  overrides: dict | None = None) -> 'BagRecorder':
        """A recorder for the robot that `node`'s parameter file (and `overrides`) names;
        an earlier recording at `path` is replaced."""
        robot = robot_of(node, overrides)
        if os.path.isfile(os.path.join(path, 'metadata.yaml')):
            shutil.rmtree(path)
        return cls(context, path, robot)

    def _received(self, topic: str, type_name: str, cdr: bytes) -> None:
        if self.bag.closed:
            return
        log_ns = self.node.get_clock().now().nanoseconds
        if topic != JOINT_STATES:
            self.bag.write(topic, type_name, log_ns, cdr)
            return
        msg = deserialize_message(cdr, self._joint_state_class)
        stamp = msg.header.stamp
        self.bag.write_joint_state(log_ns, stamp.sec * 1_000_000_000 + stamp.nanosec,
                                   list(msg.name), msg.position, cdr)

    def close(self) -> None:
        """Finish the bag (metadata.yaml) and leave the graph."""
        self.bag.close()
        self.node.destroy_node()


def robot_of(node: str, overrides: dict | None = None) -> RobotModel:
    """The robot model node `node` loads from its parameter file and `overrides` (its
    `robot`, `robot_description`, `base_link`, `tip_link`, as ros/params.declare_robot)."""
    with open(manifest.node(node).parameters_path()) as f:
        values = yaml.safe_load(f)[node]['ros__parameters']
    values.update(overrides or {})
    return RobotModel.load(values.get('robot_description') or values.get('robot', 'panda'),
                           values.get('base_link', ''), values.get('tip_link', ''))


def write_parameters(overrides: dict[str, dict], path: str | os.PathLike) -> None:
    """The parameter values a run gave its nodes over their files (by node name), as a
    parameter file that `up --config` and `replay --config` take."""
    with open(path, 'w') as f:
        f.write('# The parameters this run set over config/<node>.yaml (replay --config).\n')
        yaml.safe_dump({node: {'ros__parameters': values}
                        for node, values in overrides.items()}, f, sort_keys=False)
