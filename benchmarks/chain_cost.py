"""The 1 kHz chain's own Python per sample, stage by stage, without ROS (issue 26).

A Panda joint-state stream at 1 kHz (7 arm joints + 2 finger joints, as the franka driver
publishes them; free motion with a contact on one joint now and then, `_ros_load.PandaStream`)
goes through the core objects the way the nodes build them from config/*.yaml:
`JointStateConditioner.condition` (joint_state_listener), the residual (residual_node: its
configured model, and each other model for comparison), `AccelerationEstimate` and
`CollisionDetector.update` (collision_detector), `TimeScaling.react` (its f_S). Prints µs per
sample per stage (median, p99) and the chain's total as % of one core at 1 kHz; rclpy's own
receiving comes on top (issue 26: ~7–10 % of a core). A second table: µs to decode one
message of the stream from its CDR bytes (a `raw=True` subscription) with ros/cdr.py
against rclpy's deserialize_message.

    .venv/bin/python benchmarks/chain_cost.py [--seconds S] [--repeat N]
"""
from __future__ import annotations

import argparse
import array
import os
import sys
import time

import numpy as np
import yaml
from geometry_msgs.msg import WrenchStamped
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState

from _ros_load import Contacts, PandaStream, machine, table
from contact_estimation.core.chain.detector import (AccelerationEstimate, CollisionDetector,
                                                    DetectorConfig, DetectorSettings)
from contact_estimation.core.chain.joint_state_conditioning import (ConditioningConfig,
                                                                    JointStateConditioner)
from contact_estimation.core.chain.residual import MODELS, ResidualConfig
from contact_estimation.core.chain.time_scaling import TimeScaling, TimeScalingConfig
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.nodes import collision_detector, joint_state_listener, residual_node
from contact_estimation.ros import cdr
from contact_estimation.ros.conversions import seconds_to_stamp, wrench_stamped

RATE = 1000.0
CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config')
# A 20 N·m contact on joint 4 for 0.3 s every 2 s: the detector latches, the reaction holds.
CONTACTS = Contacts(joint=3, offset=20.0, period=2.0, duration=0.3)
RECEIPT_DELAY = 2e-4  # s between a sample's stamp and its receipt (the nodes' `now`)
STAGES = ('conditioner', 'residual', 'acceleration', 'detector', 'time scaling')


def shipped_values(node: str, table_) -> dict:
    """The node's parameter values as config/<node>.yaml sets them over its table."""
    with open(os.path.join(CONFIG, f'{node}.yaml'), encoding='utf-8') as f:
        tree = yaml.safe_load(f)[node]['ros__parameters']

    def flat(branch: dict, prefix: str = '') -> dict:
        out = {}
        for key, value in branch.items():
            if isinstance(value, dict):
                out.update(flat(value, f'{prefix}{key}.'))
            else:
                out[f'{prefix}{key}'] = value
        return out
    return {**table_.defaults(), **flat(tree)}


class Chain:
    """The core objects of listener → residual node → detector, configured as the nodes do."""

    def __init__(self, robot: RobotModel, model: str | None = None):
        listener = shipped_values('joint_state_listener', joint_state_listener.PARAMETERS)
        self.conditioner = JointStateConditioner.for_robot(
            robot, joint_state_listener.PARAMETERS.build(ConditioningConfig, listener))
        values = shipped_values('residual_node', residual_node.PARAMETERS)
        if model is not None:
            values['model'] = model
        config = residual_node.PARAMETERS.build(ResidualConfig, values)
        self.model = config.model
        self.residual = config.residual(robot, None,
                                        residual_node.PARAMETERS.build(Payload, values))
        table_ = collision_detector.PARAMETERS
        values = shipped_values('collision_detector', table_)
        self.detector = CollisionDetector(DetectorConfig.build(
            robot.joint_names, **table_.fields(DetectorSettings, values)))
        self.acceleration = AccelerationEstimate(values['acceleration_filter.window_duration'])
        self.scaling = TimeScaling(table_.build(TimeScalingConfig, values))


def run(chain: Chain, stream: PandaStream, count: int) -> np.ndarray:
    """ns per stage (columns: STAGES) for each of `count` samples that came out whole."""
    clock = time.perf_counter_ns
    spent = np.zeros((count, len(STAGES)), dtype=np.int64)
    # As rclpy hands them over: a new name list and array.array fields per message.
    names = [list(stream.names) for _ in range(count)]
    extra = [0.0] * (len(stream.names) - stream.q.shape[1])
    fields = [[array.array('d', list(values[i]) + extra) for i in range(count)]
              for values in (stream.q, stream.v, stream.effort)]
    in_use = bool(chain.detector.config.acceleration_gain.any())
    done = 0
    for i in range(count):
        t = (i + 1) / RATE
        now = t + RECEIPT_DELAY
        start = clock()
        result = chain.conditioner.condition(t, names[i], fields[0][i], fields[1][i],
                                             fields[2][i], now=now, stamp=i)
        conditioned = clock()
        sample = result.sample
        if sample is None:
            continue
        tau_ext = chain.residual.update(sample.t, sample.q, sample.v, sample.tau)
        residual = clock()
        acceleration = chain.acceleration.update(sample.t, sample.q, in_use=in_use)
        accelerated = clock()
        state = chain.detector.update(now, tau_ext, sample.v, acceleration, stamp=sample.t)
        detected = clock()
        chain.scaling.react(now, state, tau_ext, sample.v)
        reacted = clock()
        spent[done] = (conditioned - start, residual - conditioned, accelerated - residual,
                       detected - accelerated, reacted - detected)
        done += 1
    return spent[:done]


def decode_times(stream: PandaStream, count: int) -> list[str]:
    """Rows of µs per decode (median, p99) of `count` messages of the stream."""
    joint_states, wrenches = [], []
    for i in range(count):
        msg = JointState(name=stream.names, position=list(stream.q[i]) + stream._extra,
                         velocity=list(stream.v[i]) + stream._extra,
                         effort=list(stream.effort[i]) + stream._extra)
        msg.header.stamp = seconds_to_stamp((i + 1) / RATE)
        joint_states.append(serialize_message(msg))
        wrenches.append(serialize_message(wrench_stamped(
            msg.header.stamp, stream.base_link, stream.wrench[i, :3], stream.wrench[i, 3:])))
    clock = time.perf_counter_ns
    rows = []
    for name, decode, messages in (
            ('JointState: deserialize_message', lambda raw: deserialize_message(raw, JointState),
             joint_states),
            ('JointState: cdr.decode_joint_state', cdr.decode_joint_state, joint_states),
            ('JointState: cdr.stamp_of', cdr.stamp_of, joint_states),
            ('WrenchStamped: deserialize_message',
             lambda raw: deserialize_message(raw, WrenchStamped), wrenches),
            ('WrenchStamped: cdr.decode_wrench_stamped', cdr.decode_wrench_stamped, wrenches)):
        spent = np.empty(count)
        for i, raw in enumerate(messages):
            start = clock()
            decode(raw)
            spent[i] = clock() - start
        spent /= 1e3
        rows.append(f'{name:40s} | {np.median(spent):9.2f} | {np.percentile(spent, 99):9.2f}')
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=20.0,
                        help='seconds of 1 kHz stream per run')
    parser.add_argument('--repeat', type=int, default=3,
                        help='runs; the figures are those of the run with the lowest total')
    args = parser.parse_args(argv)
    print(f'machine: {machine()}')
    robot = RobotModel.load('panda')
    count = int(args.seconds * RATE)
    stream = PandaStream(robot, RATE, count, fingers=True, contacts=CONTACTS, wrenches=True)

    def best(chain_of) -> np.ndarray:
        runs = [run(chain_of(), stream, count) for _ in range(args.repeat)]
        return min(runs, key=lambda spent: np.median(spent.sum(axis=1)))

    chain = Chain(robot)
    spent = best(lambda: Chain(robot)) / 1e3  # µs
    rows = [f'{name:28s} | {np.median(column):9.1f} | {np.percentile(column, 99):9.1f}'
            for name, column in zip(STAGES, spent.T)]
    total = spent.sum(axis=1)
    rows[1] = rows[1].replace('residual'.ljust(28), f'residual ({chain.model})'.ljust(28))
    rows.append(f'{"total":28s} | {np.median(total):9.1f} | {np.percentile(total, 99):9.1f}')
    print(f'\n{spent.shape[0]} samples at {RATE:g} Hz, best of {args.repeat} runs; total '
          f'{np.median(total) / 1e3 * RATE / 10:.1f} % of one core at {RATE:g} Hz (median; '
          f'rclpy\'s receiving not included)\n')
    for model in MODELS:
        if model != chain.model:
            other = best(lambda: Chain(robot, model))[:, 1] / 1e3
            rows.insert(-1, f'{"residual (" + model + ")":28s} | {np.median(other):9.1f} | '
                        f'{np.percentile(other, 99):9.1f}')
    print(table('stage                        | µs median | µs p99', rows))
    decoded = min(count, 5000)
    print(f'\nDecoding one message of the stream ({len(stream.names)} joints), {decoded} '
          'messages:\n')
    print(table('decode                                   | µs median | µs p99',
                decode_times(stream, decoded)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
