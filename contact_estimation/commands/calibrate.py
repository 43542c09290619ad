"""`contact-estimation calibrate`: collision-detector thresholds from free motion.

Reads the residual (τ_ext in the effort field, with q and q̇) of a free motion, from a
recording (CSV or ROS 2 bag of the residual topic) or live from the residual topic for
`--seconds`, and proposes ψ = ψ_0 + k_v|q̇| + k_a|q̈| per joint with a false-alarm margin
(core/chain/threshold_calibration.py): fitted on the first part of the recording, checked for
false alarms on the held-out rest. The samples that set each joint's ψ, and those left out
and why, are printed and written in the file's header. Prints a table, what the check
promises in plain words (and how long a recording a given promise needs), and writes a
parameter file for collision_detector (`collision_detector: ros__parameters:` form) with
a section for contact_localizer too, whose gate takes ψ_0 (so that every stop gets its
estimates), to pass to `up --config` or a launch file. The arm must not touch anything
while the motion is recorded.

    contact-estimation calibrate free_motion.csv -o config/thresholds.yaml
    contact-estimation calibrate --live --seconds 120 -o config/thresholds.yaml
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import yaml

from contact_estimation import manifest
from contact_estimation.core.chain.detector import (ACCELERATION_WINDOW_DURATION, DEFAULTS,
                                              PERSISTENCE_RULES, ROLES)
from contact_estimation.core.chain.joint_order import JointOrder
from contact_estimation.core.identification.recording import RecordingError
from contact_estimation.suite_bag import read_recording
from contact_estimation.core.robot.robot_model import RobotModel, RobotModelError
from contact_estimation.core.chain.threshold_calibration import (EFFORT_FRACTION, MARGIN,
                                                                 TOP_SHARE, Calibration,
                                                                 calibrate, caps_from_effort)

NODE = 'collision_detector'
# The node whose estimates the detector's thresholds gate (`gate_thresholds`).
LOCALIZER = 'contact_localizer'


# The recorder's queue: 10 s of residual at 1 kHz wait while Python is busy, so that a stall
# of the recording process loses nothing (the suite's SENSOR_QOS keeps 1 s).
RECORDER_DEPTH = 10000


PUBLISHER_WAIT = 10.0  # s the recorder waits to discover the residual's publisher (2 s was
# too short on a loaded machine: it then chose best-effort and lost samples), returning at once


def recorder_qos(publishers_reliable: bool):
    """Reliable when every publisher of the residual is (the suite's are: PIPELINE_QOS; DDS
    then resends what a loaded machine dropped), else best-effort (which matches any)."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=RECORDER_DEPTH,
                      reliability=(ReliabilityPolicy.RELIABLE if publishers_reliable else
                                   ReliabilityPolicy.BEST_EFFORT),
                      durability=DurabilityPolicy.VOLATILE)


def record_live(robot: RobotModel, seconds: float, topic: str):
    """(t, q, q̇, τ_ext) from the residual topic for `seconds`, in the robot's joint order and
    in the order received (calibrate leaves out what is out of order, and after holes).

    The messages are taken as raw CDR bytes (ros/cdr.py) on rclpy's EventsExecutor
    (`FastExecutor`, ros/node_main.py) into a deep queue, reliable when the publishers are: at
    1 kHz a Python SingleThreadedExecutor building message objects falls behind on a loaded
    machine, and a best-effort queue then loses samples (issue 35)."""
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from contact_estimation.ros import cdr
    from contact_estimation.ros.node_main import FastExecutor
    from contact_estimation.ros.spinning import spin_for, spin_until
    names = list(robot.joint_names)
    order = JointOrder(names)
    stamps, values = [], []
    refused = {'not a JointState': 0, 'other joints': 0, 'values missing': 0}

    def received(raw: bytes) -> None:
        try:
            state = cdr.decode_joint_state(raw)
        except ValueError:
            refused['not a JointState'] += 1
            return
        columns = order.map(state.names).model_order
        if columns is None:
            refused['other joints'] += 1
            return
        if not len(state.position) == len(state.velocity) == len(state.effort) == \
                len(state.names):
            refused['values missing'] += 1  # not a residual the calibration can use
            return
        stamps.append(state.stamp)
        values.append(np.concatenate([state.position[columns], state.velocity[columns],
                                      state.effort[columns]]))

    rclpy.init()
    try:
        node = Node('contact_estimation_calibrate')
        executor = FastExecutor()
        executor.add_node(node)
        spin_until(executor, lambda: bool(node.get_publishers_info_by_topic(topic)),
                   PUBLISHER_WAIT)
        publishers = node.get_publishers_info_by_topic(topic)
        reliable = bool(publishers) and all(
            p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in publishers)
        node.create_subscription(JointState, topic, received, recorder_qos(reliable), raw=True)
        print(f'recording {topic} for {seconds:g} s ({"reliable" if reliable else "best-effort"}'
              f', {len(publishers)} publisher(s)): move the arm freely, touch nothing',
              flush=True)
        spin_for(executor, seconds)
        executor.shutdown()
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
    said = ', '.join(f'{count} {why}' for why, count in refused.items() if count)
    print(f'received {len(stamps)} residual samples{" (refused: " + said + ")" if said else ""}',
          flush=True)
    if not stamps:
        raise RecordingError(f'no residual with joints {names} on {topic} in {seconds:g} s')
    table = np.array(values)
    n = len(names)
    return np.array(stamps), table[:, :n], table[:, n:2 * n], table[:, 2 * n:]


def parameter_file(calibration: Calibration, role: str, robot: str) -> str:
    """The YAML text of the proposed parameters, with a comment saying where they come from
    and, in each section, the `robot` they were made for (a suite with another robot refuses
    the file: manifest.suite_robot)."""
    c = calibration
    header = (f'# Proposed by `contact-estimation calibrate` from {c.source}:\n'
              f'# fitted on {c.fit_duration:.1f} s of free motion, margin {c.margin:g} over the '
              f'envelope through the mean of its largest {TOP_SHARE * 100:g} % of samples;\n'
              f'# checked on {c.heldout_duration:.1f} s '
              f'held out: {c.false_alarms} false alarms → at most '
              f'{c.false_alarm_bound_per_hour:.3g} per hour (95 %, exact Poisson bound)\n'
              f'# for motions like the recorded ones.\n'
              f'# Made for robot {robot}; joint order: {", ".join(c.joint_names)}.\n'
              + ''.join(f'# {line}\n' for line in (c.setting() + '\n' + c.exclusions())
                        .splitlines()))
    parameters = calibration.parameters(role)
    body = {NODE: {'ros__parameters': {'robot': robot, **parameters}},
            # a copy: the same list twice would be a YAML alias, which ROS refuses
            LOCALIZER: {'ros__parameters': {
                'robot': robot, 'gate_thresholds': list(parameters[f'thresholds_{role}'])}}}
    return header + yaml.safe_dump(body, sort_keys=False, default_flow_style=None)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='contact-estimation calibrate', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('recording', nargs='?', help='CSV file or ROS 2 bag of the residual')
    source.add_argument('--live', action='store_true', help='record the residual topic now')
    parser.add_argument('--seconds', type=float, default=60.0, help='live recording time, s')
    parser.add_argument('--topic', default=manifest.node(NODE).topic('residual'),
                        help='topic of the residual (in a bag, or live)')
    parser.add_argument('--robot', default='panda',
                        help='example-robot-data name or URDF path (the joint order)')
    parser.add_argument('--margin', type=float, default=MARGIN,
                        help='ψ = margin × the free-motion envelope through the mean of its '
                             f'largest {TOP_SHARE * 100:g} % of samples (>= 1)')
    parser.add_argument('--min-threshold', type=float, default=0.5, help='floor of ψ_0, N·m')
    parser.add_argument('--persistence', choices=PERSISTENCE_RULES,
                        default=DEFAULTS.persistence, help="eq. 7's persistence rule")
    parser.add_argument('--persistence-time', type=float, default=DEFAULTS.persistence_time,
                        help="eq. 7's persistence time, s")
    parser.add_argument('--holdout', type=float, default=0.5,
                        help='share of the recording (its end) held out to count false alarms')
    parser.add_argument('--threshold-max', type=float,
                        help="cap of ψ, N·m, for every joint (the detector's threshold_max; "
                             'default: --effort-fraction of each joint\'s URDF effort limit)')
    parser.add_argument('--effort-fraction', type=float, default=EFFORT_FRACTION,
                        help="without --threshold-max, ψ_max of each joint = this share of "
                             "its effort limit in the URDF (the fixed "
                             f"{DEFAULTS.threshold_max:g} N·m where the URDF has none)")
    parser.add_argument('--acceleration-window', type=float,
                        default=ACCELERATION_WINDOW_DURATION,
                        help="s of positions in the q̈ fit (the detector's "
                             'acceleration_filter.window_duration)')
    parser.add_argument('--no-speed', action='store_true', help='no speed term (k_v = 0)')
    parser.add_argument('--no-acceleration', action='store_true', help='no q̈ term (k_a = 0)')
    parser.add_argument('--role', choices=ROLES, default='position',
                        help='the role the joints had while recorded: whose thresholds to set')
    parser.add_argument('-o', '--output', help='write the parameter file here')
    args = parser.parse_args(argv)
    if args.live and not args.seconds > 0:
        parser.error('--seconds must be > 0')
    try:
        robot = RobotModel.load(args.robot)
        if args.live:
            t, q, v, tau = record_live(robot, args.seconds, args.topic)
            where = f'live {args.topic}'
        else:
            rec = read_recording(args.recording, robot, args.topic)
            t, q, v, tau, where = rec.t, rec.q, rec.v, rec.effort, args.recording
        calibration = calibrate(
            t, q, v, tau, robot.joint_names, margin=args.margin,
            min_threshold=args.min_threshold, persistence=args.persistence,
            persistence_time=args.persistence_time,
            acceleration_window=args.acceleration_window, holdout=args.holdout,
            threshold_max=(args.threshold_max if args.threshold_max is not None else
                           caps_from_effort(robot.effort_limits, args.effort_fraction)),
            use_speed=not args.no_speed,
            use_acceleration=not args.no_acceleration, source=where)
    except (RecordingError, RobotModelError, ValueError, OSError) as err:
        print(f'contact-estimation calibrate: {err}', file=sys.stderr)
        return 1
    print(calibration.table())
    text = parameter_file(calibration, args.role, args.robot)
    if args.output:
        with open(args.output, 'w', encoding='utf-8') as f:
            f.write(text)
        print(f'wrote {args.output}')
    else:
        print(text)
    return 0
