"""contact_localizer's CPU use under the 1 kHz residual, without and with a contact.

The node runs as a real process and gets a Panda's residual at 1 kHz (smooth motion;
effort = τ_ext: zero, or τ_ext = J(p)ᵀF of a 30 N push on the forearm held the whole run,
as when a person guides the arm by hand and no stop is raised). Without a contact the node
only reads each residual and checks its gate; with one it estimates at most `max_rate`
times a second (each estimate some ms). CPU is % of one core over the measured period
(/proc/<pid>/stat), the machine as printed.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/localizer_load.py [--duration S] [--max-rate HZ ...]
"""
from __future__ import annotations

import argparse

import numpy as np

from geometry_msgs.msg import PointStamped

from _ros_load import Output, PandaStream, cpu_table, machine, run_load
from contact_estimation import manifest
from contact_estimation.core.robot.robot_model import RobotModel

NODE = 'contact_localizer'
RATE = 1000.0
LINK, POINT, FORCE = 'panda_link5', np.array([0.055, 0.0, -0.13]), np.array([-30.0, 0.0, 0.0])


def residual_stream(robot: RobotModel, count: int, contact: bool) -> PandaStream:
    """The Panda's motion with effort = τ_ext: zero, or the push J(p)ᵀF (F in the link frame)."""
    stream = PandaStream(robot, RATE, count, fingers=False)
    stream.effort[:] = 0.0
    if contact:
        for i, q in enumerate(stream.q):
            rotation, _ = robot.link_pose(q, LINK)
            stream.effort[i] = robot.point_jacobian(q, LINK, POINT).T @ (rotation @ FORCE)
    return stream


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=20.0, help='measured s per run')
    parser.add_argument('--max-rate', type=float, nargs='+', default=[20.0, 50.0],
                        help='max_rate values to run with a contact (Hz)')
    args = parser.parse_args(argv)
    robot = RobotModel.load('panda')
    count = int((args.duration + 2.0) * RATE)
    print(machine())
    runs = [('no contact', False, args.max_rate[0])] + [
        (f'contact, max_rate {rate:g} Hz', True, rate) for rate in args.max_rate]
    for title, contact, rate in runs:
        estimates = []
        spec = manifest.node(NODE)
        run = run_load({NODE: {'max_rate': rate}}, residual_stream(robot, count, contact),
                       spec.topic('residual'),
                       [Output(PointStamped, spec.topic('point'),
                               lambda msg, received: estimates.append(received))],
                       args.duration)
        print(f'\n{title}: {run.sent} residuals at {RATE:g} Hz, {len(estimates)} estimates '
              f'({len(estimates) / args.duration:.1f} per s, warm-up included)')
        print(cpu_table(run))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
