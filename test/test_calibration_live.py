"""`calibrate --live` gives the ψ of a replay of what it received (issue 35): a free motion,
with samples received twice and one received again late, is published over ROS on the
residual topic; the command records it live in a process of its own and calibrates; the same
samples in the same order, calibrated as a recording (the oracle), give the same thresholds
and name the same samples as those that set ψ."""
import os
import subprocess
import sys

import numpy as np
import yaml
from builtin_interfaces.msg import Time
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from test_calibration import DT, JOINTS, free_motion

from contact_estimation import manifest
from contact_estimation.commands.calibrate import NODE, parameter_file
from contact_estimation.core.chain.threshold_calibration import calibrate, caps_from_effort
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import spinning

RECORD_SECONDS = 20.0  # the command's --seconds: publishing 6 s of samples takes far less


def test_live_calibration_is_the_replay_s(context, robot, tmp_path):
    t, q, v, tau = free_motion(6.0)
    order = list(range(t.size))
    for k in (100, 2000, 4000):
        order.insert(k, order[k])  # received twice
    order.insert(2500, order[2000])  # received again 0.5 s after it came
    sec = np.floor(t[order]).astype(int)
    nanosec = np.round((t[order] - sec) * 1e9).astype(int)
    stamps = sec + nanosec * 1e-9  # as the recorder reads them (ros/cdr.py)
    topic = manifest.node(NODE).topic('residual')
    node = Node('calibration_live_publisher', context=context)
    depth = len(order)
    publisher = node.create_publisher(JointState, topic, QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE))
    out = tmp_path / 'live.yaml'
    command = [sys.executable, '-m', 'contact_estimation', 'calibrate', '--live', '--seconds',
               f'{RECORD_SECONDS:g}', '--robot', 'panda', '--margin', '1.5',
               '--persistence-time', f'{10 * DT:g}', '-o', str(out)]
    with spinning(context, node) as executor, subprocess.Popen(
            command, env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True) as process:
        assert spin_until(executor, lambda: publisher.get_subscription_count() > 0, 60.0), \
            'calibrate --live never subscribed'
        for k, row in enumerate(order):
            publisher.publish(JointState(
                header=Header(stamp=Time(sec=int(sec[k]), nanosec=int(nanosec[k]))),
                name=JOINTS, position=q[row].tolist(), velocity=v[row].tolist(),
                effort=tau[row].tolist()))
        printed, _ = process.communicate(timeout=RECORD_SECONDS + 120.0)
    assert process.returncode == 0, printed
    assert f'received {len(order)} residual samples' in printed
    replay = calibrate(stamps, q[order], v[order], tau[order], JOINTS, margin=1.5,
                       persistence_time=10 * DT,
                       threshold_max=caps_from_effort(robot.effort_limits))
    live = out.read_text()
    assert (yaml.safe_load(live)[NODE]['ros__parameters']
            == yaml.safe_load(parameter_file(replay, 'position', 'panda'))[NODE]
            ['ros__parameters'])
    assert replay.setting() in printed and replay.exclusions() in printed
    assert '4 stamp not after an earlier one' in replay.exclusions()
