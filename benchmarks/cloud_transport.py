"""The largest lidar cloud that gets through at 10 Hz over localhost (issue 36).

    PYTHONPATH=$PWD python benchmarks/cloud_transport.py [--seconds 3] [--sizes 0.1 0.5 1 2 3 5]
                                                         [--discovery LOCALHOST|SUBNET]

For each transport setting, a publisher process sends PointCloud2 clouds of each size (MB of
point data, x y z float32) at 10 Hz for `--seconds` to a subscriber in another process that
subscribes as the proximity monitor and the localizer do (`CLOUD_QOS` of ros/qos.py: best
effort, keep the last 2); the table gives delivered / sent per size. The settings:

- default: Fast DDS as the PyPI wheels start it (no profile, no FASTDDS_* variable);
- shipped: the environment `up` and the launch file give the suite's processes
  (launcher.transport_environment: config/fastdds.xml), given to the publisher too, as a
  lidar driver that follows the README would run.

Both run on a domain of their own with ROS_AUTOMATIC_DISCOVERY_RANGE `--discovery` (LOCALHOST,
as the tests and the demo; SUBNET, ROS's default, as `up` runs unless the user sets it).
The subscriber takes the serialised bytes (no decoding), so a loss is the transport's, not
the reader's.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

RATE = 10.0          # Hz, as a real lidar
TOPIC = 'cloud_transport'
POINT_STEP = 12      # bytes: x y z float32
SIZES = (0.1, 0.5, 1.0, 2.0, 3.0, 5.0)  # MB of point data
SETTINGS = ('default', 'shipped')


def environment(setting: str, discovery: str) -> dict[str, str]:
    """The processes' environment for `setting` (module docstring), on this run's domain."""
    from contact_estimation.launcher import TRANSPORT_VARIABLES, transport_environment
    from contact_estimation.ros.testing import isolate_ros_domain
    isolate_ros_domain()
    env = {k: v for k, v in os.environ.items() if k not in TRANSPORT_VARIABLES}
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = discovery
    return transport_environment(env) if setting == 'shipped' else env


def points(megabytes: float) -> int:
    return int(megabytes * 1e6) // POINT_STEP


def publish(sizes: list[float], seconds: float) -> None:
    """The publisher: each size at RATE for `seconds` once the subscriber is matched; prints
    the clouds sent by size (JSON)."""
    import numpy as np
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import PointCloud2

    from contact_estimation.ros.conversions import xyz_to_cloud
    from contact_estimation.ros.qos import CLOUD_QOS

    rclpy.init()
    node = Node('cloud_transport_publisher')
    publisher = node.create_publisher(PointCloud2, TOPIC, CLOUD_QOS)
    deadline = time.monotonic() + 30.0
    while not publisher.get_subscription_count() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # discovery settles
    sent = {}
    for size in sizes:
        cloud = xyz_to_cloud(node.get_clock().now().to_msg(), 'lidar',
                             np.random.default_rng(0).random((points(size), 3)))
        count = int(seconds * RATE)
        start = time.monotonic()
        for k in range(count):
            time.sleep(max(start + k / RATE - time.monotonic(), 0.0))
            cloud.header.stamp = node.get_clock().now().to_msg()
            publisher.publish(cloud)
        sent[size] = count
        time.sleep(0.5)  # the last ones arrive before the next size
    print(json.dumps(sent), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def subscribe() -> None:
    """The subscriber: counts the clouds received by size until SIGINT, then prints them."""
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import PointCloud2

    from contact_estimation.ros.qos import CLOUD_QOS

    received: dict[int, int] = {}

    def count(raw: bytes) -> None:
        received[len(raw)] = received.get(len(raw), 0) + 1

    rclpy.init()
    node = Node('cloud_transport_subscriber')
    node.create_subscription(PointCloud2, TOPIC, count, CLOUD_QOS, raw=True)
    print('ready', flush=True)
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    print(json.dumps(received), flush=True)


def run(setting: str, discovery: str, sizes: list[float], seconds: float
        ) -> dict[float, tuple[int, int]]:
    """Sent and delivered clouds by size with `setting` in both processes."""
    env = environment(setting, discovery)
    me = [sys.executable, os.path.abspath(__file__)]
    subscriber = subprocess.Popen(me + ['--role', 'subscriber'], env=env, text=True,
                                  stdout=subprocess.PIPE)
    assert subscriber.stdout.readline().strip() == 'ready'
    publisher = subprocess.run(me + ['--role', 'publisher', '--seconds', str(seconds),
                                     '--sizes', *map(str, sizes)],
                               env=env, text=True, stdout=subprocess.PIPE, check=True)
    sent = {float(k): v for k, v in json.loads(publisher.stdout.splitlines()[-1]).items()}
    subscriber.send_signal(signal.SIGINT)
    out, _ = subscriber.communicate(timeout=30)
    by_length = {int(k): v for k, v in json.loads(out.splitlines()[-1]).items()}
    delivered = {}
    for size in sizes:  # a serialised cloud is its points and ~100 bytes of header and fields
        data = points(size) * POINT_STEP
        delivered[size] = sum(n for length, n in by_length.items()
                              if data <= length < data + 1000)
    return {size: (sent[size], delivered[size]) for size in sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--role', choices=('publisher', 'subscriber'), help=argparse.SUPPRESS)
    parser.add_argument('--seconds', type=float, default=3.0, help='per size (default 3)')
    parser.add_argument('--sizes', type=float, nargs='+', default=list(SIZES),
                        help='MB of point data (default 0.1 0.5 1 2 3 5)')
    parser.add_argument('--settings', nargs='+', choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument('--discovery', choices=('LOCALHOST', 'SUBNET'), default='LOCALHOST',
                        help='ROS_AUTOMATIC_DISCOVERY_RANGE (default LOCALHOST)')
    args = parser.parse_args()
    if args.role == 'publisher':
        return publish(args.sizes, args.seconds)
    if args.role == 'subscriber':
        return subscribe()
    results = {setting: run(setting, args.discovery, args.sizes, args.seconds)
               for setting in args.settings}
    print(f'\nPointCloud2 at {RATE:g} Hz for {args.seconds:g} s per size, best effort '
          '(`CLOUD_QOS` of ros/qos.py), publisher and subscriber in two processes on localhost: '
          'delivered / sent\n')
    print('| cloud | ' + ' | '.join(args.settings) + ' |')
    print('|---|' + '---|' * len(args.settings))
    for size in args.sizes:
        cells = [f'{results[s][size][1]} / {results[s][size][0]}' for s in args.settings]
        print(f'| {size:g} MB ({points(size):,} points) | ' + ' | '.join(cells) + ' |')


if __name__ == '__main__':
    main()
