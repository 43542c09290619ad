"""What the hand evidence of touch classification costs (issue 29): the proximity monitor's
check with a tracked person (which now also reduces each hand's distance to each link), the
hands message it publishes at every check, and the collision detector's read of it
(deserialise + `hands_seen`) in the chain's process, per message and at the 100 Hz check rate.

    PYTHONPATH=$PWD nice -n 5 .venv/bin/python benchmarks/hand_evidence.py

Best of 7 runs of 300 (checks) or 2000 (reads): the machine is shared, the best run is the
least disturbed. Nothing here runs per 1 kHz sample.
"""
from __future__ import annotations

import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.serialization import deserialize_message, serialize_message

from contact_estimation.core.contact.proximity import ProximityMonitor, standing_skeleton
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.ros.hands_messages import hands_message, hands_seen

Q = np.array([0.3, -0.4, 0.2, -2.0, 0.1, 1.6, 0.5])
CHECK_RATE = 100.0  # Hz, proximity_monitor's default check_rate


def best_of(call, repeats: int, runs: int = 7) -> float:
    """Seconds per call, the best run."""
    best = np.inf
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def main() -> None:
    robot = RobotModel.load('panda')
    monitor = ProximityMonitor(LinkSurfaces(robot, sphere_spacing=0.05))
    rows = []
    for label, centre in (('near the arm', [0.7, 0.0, 0.5]), ('2 m away', [2.5, 0.0, 0.5])):
        monitor.set_skeleton(0.0, standing_skeleton(np.array(centre), 0.0))
        velocity = np.full(robot.n, 0.5)
        check = best_of(lambda: monitor.update(0.01, Q, velocity), 300)
        result = monitor.update(0.01, Q, velocity)
        raw = serialize_message(hands_message(result, robot.name))
        read = best_of(lambda: hands_seen(deserialize_message(raw, DiagnosticArray), 0.0), 2000)
        reported = sum(len(s.values) for s in deserialize_message(raw, DiagnosticArray).status)
        rows.append((label, check, len(raw), reported, read))
    print('| person | check (with the hands) | hands message | hand-link pairs listed | '
          'detector read per message | detector read at 100 Hz |')
    print('|---|---|---|---|---|---|')
    for label, check, size, reported, read in rows:
        print(f'| {label} | {check * 1e3:.3f} ms | {size} bytes | {reported} | '
              f'{read * 1e6:.0f} µs | {read * CHECK_RATE * 100:.2f} % of a core |')


if __name__ == '__main__':
    main()
