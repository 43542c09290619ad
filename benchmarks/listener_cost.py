"""The joint-state listener's per-sample path, part by part (issue 35).

The chain's process is built as `up` builds it (benchmarks/chain_wake.py's `chain_nodes`),
and a Panda stream (7 arm + 2 finger joints, free motion), serialised as the driver sends it,
goes through the listener's parts one after the other, each over the whole stream: the CDR
read (ros/cdr.py), `JointStateConditioner.condition`, the listener's `_condition` (both and
the node around them) and the shared-memory write of each sample (`SampleRingWriter.write`).
Prints µs of this thread's CPU per message (the best of `--repeat` passes: the least
disturbed by other work on the machine), in a tight loop (warm caches: a 1 kHz wake pays
more, benchmarks/chain_wake.py).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/listener_cost.py [--messages N] [--repeat R]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import timeit

from _ros_load import PandaStream, machine, table
from chain_wake import chain_nodes, serialised, stamped
from contact_estimation.core.chain.sample_ring import SampleRingWriter
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.ros import cdr
from contact_estimation.ros.testing import ros_context

RECEIPT_DELAY = 2e-4  # s between a message's stamp and its receipt (the listener's `now`)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--messages', type=int, default=3000, help='messages per pass')
    parser.add_argument('--repeat', type=int, default=9, help='passes; the best is shown')
    args = parser.parse_args(argv)
    print(f'machine: {machine()}')
    robot = RobotModel.load('panda')
    start = time.time() - 10.0
    raws = [stamped(raw, start + i * 1e-3) for i, raw in
            enumerate(serialised(PandaStream(robot, 1000.0, args.messages)))]
    states = [cdr.decode_joint_state(raw) for raw in raws]
    with ros_context() as context:
        nodes = chain_nodes(context)
        try:
            listener = nodes[0]
            conditioner = listener._conditioner

            def decode():
                for raw in raws:
                    cdr.decode_joint_state(raw)

            def condition():
                conditioner.reset()
                for s in states:
                    conditioner.condition(s.stamp, s.names, s.position, s.velocity, s.effort,
                                          now=s.stamp + RECEIPT_DELAY)

            def listen():
                conditioner.reset()
                for raw, s in zip(raws, states):
                    listener._condition(raw, s.stamp + RECEIPT_DELAY)

            conditioner.reset()
            samples = [dataclasses.replace(sample, tau_ext=sample.q)
                       for raw, s in zip(raws, states)
                       if (sample := listener._condition(raw, s.stamp + RECEIPT_DELAY))]
            writer = SampleRingWriter('contact_estimation_listener_cost', robot.n)

            def write():
                for sample in samples:
                    writer.write(sample)

            rows = []
            for name, part in (('cdr.decode_joint_state', decode),
                               ('JointStateConditioner.condition', condition),
                               ('listener._condition (both + node)', listen),
                               ('SampleRingWriter.write', write)):
                best = min(timeit.Timer(part, timer=time.thread_time).repeat(args.repeat, 1))
                rows.append(f'{name:34s} | {1e6 * best / len(raws):6.2f}')
            writer.close()
        finally:
            for node in nodes:
                node.destroy_node()
    print(f'\n{len(samples)} samples of {len(raws)} messages, best of {args.repeat} passes\n')
    print(table('part                               | µs/message', rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
