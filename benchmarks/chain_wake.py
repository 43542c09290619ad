"""The chain's Python per wake, its nodes as `up` builds them, without DDS (issue 35).

The chain's process (joint_state_listener, residual_node, collision_detector, composed and
writing the shared samples) is built in this process with its config/ files; a Panda joint
state stream (`_ros_load.PandaStream`, 7 arm + 2 finger joints, free motion) is serialised
as the driver sends it and handed to the listener's raw callback as the executor would, at
1 kHz on the wall clock (this process at SCHED_FIFO 40, as `up` runs the chain), stamped
with it, in batches of 1 (a chain that keeps up: one message per wake), 5 or 20 (a chain
that woke late). Prints µs of this thread's CPU in the callback per sample (median, mean,
p99): what a wake costs the chain besides rclpy's own receiving (the floor); the thread's
CPU, not the wall clock, so other work on the machine moves it little. `--profile` prints
cProfile's top functions of the batches of 1.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/chain_wake.py [--seconds S] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import struct
import sys
import time

import numpy as np
from rclpy.serialization import serialize_message

from _ros_load import PandaStream, machine, realtime_priority, table
from contact_estimation import composed, manifest
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.testing import ros_context

RATE = 1000.0
BATCHES = (1, 5, 20)
WARMUP = 500  # samples


def chain_nodes(context):
    """The chain's process, as `up` starts it (its nodes' config/ files)."""
    return process_nodes(context, 'contact_estimation_chain')


def process_nodes(context, executable: str):
    """The composed process `executable`, as `up` starts it (its nodes' config/ files)."""
    process = manifest.composed_process(executable)
    files = [manifest.node(n).parameters_path() for n in process.nodes] + [
        manifest.robot_parameters_path()]
    return composed.build(process.nodes, shared_memory=True, context=context,
                          cli_args=['--ros-args', *[a for f in files
                                                     for a in ('--params-file', f)]])


def serialised(stream: PandaStream) -> list[bytearray]:
    """Every message of `stream` as the driver sends it, stamps to be set (`stamped`)."""
    return [bytearray(serialize_message(stream.message(i, seconds_to_stamp(0.0))))
            for i in range(len(stream))]


def stamped(raw: bytearray, t: float) -> bytes:
    """`raw` stamped `t` (s): the header's sec and nanosec follow the CDR encapsulation."""
    sec, nanosec = divmod(int(round(t * 1e9)), 1_000_000_000)
    struct.pack_into('<iI', raw, 4, sec, nanosec)
    return bytes(raw)


def feed(callback, messages: list[bytearray], count: int, batch: int, start: int
         ) -> np.ndarray:
    """µs of CPU (this thread's) per sample of `callback` given `count` messages in batches
    of `batch`, one batch every batch / RATE s, its newest stamped with the wall clock and
    the others 1 ms apart before it (closer when this process was kept from running)."""
    spent = []
    clock = time.thread_time
    last = next_at = time.time()
    for k in range(start, start + count, batch):
        next_at += batch / RATE
        time.sleep(max(next_at - time.time(), 0.0))
        now = time.time()
        step = min(1.0 / RATE, (now - last) / batch)
        raws = [stamped(messages[i], now - (k + batch - 1 - i) * step)
                for i in range(k, k + batch)]
        last = now
        began = clock()
        callback(raws)
        spent.append((clock() - began) / batch)
    return np.array(spent) * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=10.0, help='seconds per batch size')
    parser.add_argument('--profile', action='store_true',
                        help="cProfile's top functions of the batches of 1")
    args = parser.parse_args(argv)
    print(f'machine: {machine()}; this process at {realtime_priority(40)}, as the chain')
    robot = RobotModel.load('panda')
    count = int(args.seconds * RATE)
    messages = serialised(PandaStream(robot, RATE, WARMUP + len(BATCHES) * count))
    rows = []
    with ros_context() as context:
        nodes = chain_nodes(context)
        try:
            listener = next(n for n in nodes if n.get_name() == 'joint_state_listener')
            callback = listener.take_waiting
            feed(callback, messages, WARMUP, 1, 0)  # the filters fill, the stop clears
            start = WARMUP
            for batch in BATCHES:
                profile = cProfile.Profile() if args.profile and batch == 1 else None
                if profile:
                    profile.enable()
                spent = feed(callback, messages, count, batch, start)
                if profile:
                    profile.disable()
                start += count
                rows.append(f'{batch:5d} | {np.median(spent):9.1f} | {spent.mean():9.1f} | '
                            f'{np.percentile(spent, 99):9.1f}')
                if profile:
                    pstats.Stats(profile).sort_stats('tottime').print_stats(35)
            detector = next(n for n in nodes if n.get_name() == 'collision_detector')
            stop = detector.detector.state(detector.seconds())
        finally:
            for node in nodes:
                node.destroy_node()
    print(f'\nthe chain\'s callback, {count} samples per batch size at {RATE:g} Hz '
          f'(stop at the end: {stop.stop} {stop.cause})\n')
    print(table('batch | µs/sample median | mean | p99', rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
