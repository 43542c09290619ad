"""What the one parameter check costs the thread that runs it (issue 36).

Every run-time set runs `ros/params.Parameter.problem` on the node's executor thread, the
thread of the chain's callbacks in composed mode: a set must not keep it long, refused or
not. Prints the CPU time of the calling thread per set, ms (median, max over --repeat sets:
what the set takes from that thread, whatever else the machine runs), of:
- the check alone (`ParameterTable.problems`, against the Panda), and
- `set_parameters_atomically` on a collision detector node (the check, rclpy's descriptor
  checks and the node's own apply: what the executor runs once the service request is
  deserialised), the values given as array.array, as the parameter service gives them;
for the values issue 36 found accepted, a 100 000-value array (refused by its count before any
element is read) and the largest array a row without a count takes (MAX_VALUES, each element
checked).

    .venv/bin/python benchmarks/parameter_check.py [--repeat N]
"""
from __future__ import annotations

import argparse
import array
import statistics
import time

from rclpy.parameter import Parameter

from _ros_load import machine, table
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.nodes import collision_detector, residual_node
from contact_estimation.ros.params import MAX_VALUES
from contact_estimation.ros.testing import isolate_ros_domain, ros_context

CASES = [  # (what, table, parameter, value, refused)
    ('thresholds_position, 7 values', collision_detector, 'thresholds_position',
     array.array('d', [4.0] * 7), False),
    ('touch.max_torque = [nan]', collision_detector, 'touch.max_torque',
     array.array('d', [float('nan')]), True),
    ('touch.max_torque, 100 000 values', collision_detector, 'touch.max_torque',
     array.array('d', [30.0] * 100_000), True),
    (f'friction_parameters, {MAX_VALUES} values', residual_node, 'friction_parameters',
     array.array('d', [0.0] * MAX_VALUES), False),
    ("payload.link = 'nonsense'", residual_node, 'payload.link', 'nonsense', True),
]


def timed(call, repeat: int) -> tuple[float, float]:
    """(median, max) CPU ms of this thread in each of `repeat` calls."""
    times = []
    for _ in range(repeat):
        start = time.thread_time()
        call()
        times.append((time.thread_time() - start) * 1e3)
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--repeat', type=int, default=50)
    args = parser.parse_args()
    print(machine())
    robot = RobotModel.load('panda')
    rows = []
    for what, module, name, value, refused in CASES:
        problems = module.PARAMETERS.problems({name: value}, robot)
        assert bool(problems) == refused, (what, problems)
        median, most = timed(lambda: module.PARAMETERS.problems({name: value}, robot),
                             args.repeat)
        rows.append(f'{what:<36} | {"refused" if refused else "passed":<7} | {median:8.3f} | '
                    f'{most:8.3f}')
    print('\nThe check alone (ParameterTable.problems), CPU ms per set')
    print(table(f'{"value":<36} | {"check":<7} | {"median":>8} | {"max":>8}', rows))

    isolate_ros_domain()
    rows = []
    with ros_context() as context:
        node = collision_detector.CollisionDetectorNode(context=context)
        try:
            for what, module, name, value, refused in CASES:
                if module is not collision_detector:
                    continue
                result = node.set_parameters_atomically([Parameter(name, value=value)])
                assert result.successful != refused, (what, result.reason)
                median, most = timed(lambda: node.set_parameters_atomically(
                    [Parameter(name, value=value)]), args.repeat)
                rows.append(f'{what:<36} | {"refused" if refused else "taken":<7} | '
                            f'{median:8.3f} | {most:8.3f}')
        finally:
            node.destroy_node()
    print('\nA set on the collision detector (set_parameters_atomically), CPU ms per set')
    print(table(f'{"value":<36} | {"set":<7} | {"median":>8} | {"max":>8}', rows))


if __name__ == '__main__':
    main()
