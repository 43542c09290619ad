"""A participant killed and started again: does another process's stop go silent? (issue 36)

    PYTHONPATH=$PWD python benchmarks/restart_stall.py [--restarts 16] [--runs 3]
                            [--publisher-defaults] [--stop-process]
                            [--monitor-suite-settings | --monitor-udp]

`hostile.py --phases kills` saw both stops go ~350 ms silent a few seconds after one of the
suite's processes was killed and started again. Here, three processes: a publisher at
SCHED_FIFO 41 (where the stops' heartbeats beat) sends a stop every 50 ms from one thread
and a data message every 50 ms from another; a monitor at SCHED_FIFO 60 receives the stop,
as a controller keeping the README's contract; a third program, subscribed to the data,
killed with SIGKILL and started again `--restarts` times (2 s busy after its start, as a
process importing and loading its models is). The publisher and the restarted program run
with the suite's Fast DDS settings (launcher.transport_environment), as the suite's stop
processes do (`--publisher-defaults`: the publisher on Fast DDS's defaults); the monitor
with the defaults, as a controller would (`--monitor-suite-settings`: with the suite's;
`--monitor-udp`: with the suite's stop processes', UDPv4 only).
`--stop-process`: the stop from a fourth process that sends nothing else, at SCHED_FIFO 42,
on the suite's settings without shared memory (UDPv4 only, no port health check to sleep
in); the publisher sends the data alone.
Printed per run: the monitor's gaps over 150 ms, each publish call of the publisher that
took over 50 ms and each time the stop's thread woke more than 150 ms after the last (waiting
for the interpreter lock), each with the time since the restarted program's last start or
kill.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ros_load import machine, realtime_priority  # noqa: E402

from contact_estimation.launcher import transport_environment  # noqa: E402
from contact_estimation.ros.qos import STOP_QOS  # noqa: E402
from contact_estimation.ros.stop_process import stop_environment  # noqa: E402
from contact_estimation.ros.testing import isolate_ros_domain  # noqa: E402

PERIOD = 0.05     # s between two stops (the heartbeat) and two data messages
CONTRACT = 0.150  # s without a stop after which a controller stops (README)
BLOCKED = 0.05    # s: a publish call this long (a beat) is reported
LIFE = 4.0        # s the restarted program runs before it is killed
BUSY = 2.0        # s of it spent computing right after its start


def fast_dds_defaults() -> None:
    """This process on Fast DDS's default settings, not the suite's."""
    for name in [n for n in os.environ if n.startswith(('FASTDDS', 'FASTRTPS'))]:
        del os.environ[name]


def timed(events, what: str, publisher, message) -> float:
    """Publishes `message`; reports the call if it took over BLOCKED. When it returned."""
    began = time.monotonic()
    publisher.publish(message)
    ended = time.monotonic()
    if ended - began > BLOCKED:
        events.put((ended, f'{what} publish blocked {(ended - began) * 1e3:.0f} ms'))
    return ended


def send_stops(events, stop) -> None:
    """The stop every PERIOD from this thread; each time it woke over CONTRACT after the last."""
    from std_msgs.msg import Bool
    last = time.monotonic()
    while True:
        woke = time.monotonic()
        if woke - last > CONTRACT:
            events.put((woke, f'stop thread woke {(woke - last) * 1e3:.0f} ms after its last '
                              'publish'))
        last = timed(events, 'stop', stop, Bool(data=False))
        time.sleep(PERIOD)


def publish(events, suite_settings: bool, stop_thread: bool) -> None:
    """Data from one thread every PERIOD and, with `stop_thread`, the stop from another."""
    realtime_priority(41)
    if suite_settings:
        os.environ.update(transport_environment())
    else:
        fast_dds_defaults()
    import rclpy
    from std_msgs.msg import Bool, Float64
    rclpy.init()
    node = rclpy.create_node('restart_stall_publisher')
    data = node.create_publisher(Float64, 'restart_stall/data', 10)

    def send_data() -> None:
        while True:
            timed(events, 'data', data, Float64(data=1.0))
            time.sleep(PERIOD)

    threading.Thread(target=send_data, daemon=True).start()
    if stop_thread:
        send_stops(events, node.create_publisher(Bool, 'restart_stall/stop', STOP_QOS))
    threading.Event().wait()


def stop_process(events) -> None:
    """The stop alone, from a process that sends nothing else, one over the publisher's
    priority, on the suite's settings without shared memory: UDPv4 only, so no port's health
    check to sleep in (issue 36)."""
    realtime_priority(42)
    os.environ.update(stop_environment())
    import rclpy
    from std_msgs.msg import Bool
    rclpy.init()
    node = rclpy.create_node('restart_stall_stop')
    send_stops(events, node.create_publisher(Bool, 'restart_stall/stop', STOP_QOS))


def monitor(seconds: float, events, result, settings: str) -> None:
    """Receives the stop for `seconds`, on Fast DDS's `defaults`, the `suite`'s settings or
    those of its stop processes (`udp`); its gaps over CONTRACT."""
    realtime_priority(60)
    if settings == 'suite':
        os.environ.update(transport_environment())
    elif settings == 'udp':
        os.environ.update(stop_environment())
    else:
        fast_dds_defaults()
    import rclpy
    from std_msgs.msg import Bool
    rclpy.init()
    node = rclpy.create_node('restart_stall_monitor')
    heard: list[float] = []

    def on_stop(_message) -> None:
        now = time.monotonic()
        if heard and now - heard[-1] > CONTRACT:
            events.put((now, f'monitor: no stop for {(now - heard[-1]) * 1e3:.0f} ms'))
        heard.append(now)

    node.create_subscription(Bool, 'restart_stall/stop', on_stop, STOP_QOS)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.01)
    gaps = [b - a for a, b in zip(heard, heard[1:])]
    result.put((len(heard), max(gaps, default=float('nan'))))


def restarted() -> None:
    """The program killed and started again: the suite's settings, busy after its start."""
    os.environ.update(transport_environment())
    import rclpy
    from std_msgs.msg import Float64
    rclpy.init()
    node = rclpy.create_node('restart_stall_restarted')
    node.create_subscription(Float64, 'restart_stall/data', lambda m: None, 10)
    end = time.monotonic() + BUSY
    while time.monotonic() < end:
        pass
    while True:
        rclpy.spin_once(node, timeout_sec=0.05)


def run(restarts: int, publisher_suite: bool, monitor_settings: str,
        own_stop_process: bool) -> tuple[int, float, list[tuple[float, str]]]:
    """Stops heard, the longest gap, and each event with the time since the run's start and
    since the last start or kill of the restarted program."""
    began = time.monotonic()
    moments: list[tuple[float, str]] = [(began, 'the run began')]
    spawn = multiprocessing.get_context('spawn')
    events, result = spawn.Queue(), spawn.Queue()
    watcher = spawn.Process(target=monitor, daemon=True,
                            args=(restarts * (LIFE + 1.0) + 6.0, events, result, monitor_settings))
    watcher.start()
    senders = [spawn.Process(target=publish, daemon=True,
                             args=(events, publisher_suite, not own_stop_process))]
    if own_stop_process:
        senders.append(spawn.Process(target=stop_process, args=(events,), daemon=True))
    for sender in senders:
        sender.start()
    time.sleep(3.0)  # discovery
    for k in range(restarts):
        program = spawn.Process(target=restarted, daemon=True)
        program.start()
        moments.append((time.monotonic(), f'restart {k + 1} started'))
        time.sleep(LIFE)
        os.kill(program.pid, signal.SIGKILL)
        program.join()
        moments.append((time.monotonic(), f'restart {k + 1} killed'))
        time.sleep(1.0)
    heard, longest = result.get(timeout=60.0)
    for sender in senders:
        sender.kill()
    found = []
    while not events.empty():
        found.append(events.get())
    described = []
    for t, text in sorted(found):
        since, what = max(m for m in moments if m[0] <= t)
        described.append((t - began, f'{text} ({t - since:.1f} s after {what})'))
    return heard, longest, described


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--restarts', type=int, default=16)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--publisher-defaults', action='store_true',
                        help="the publisher on Fast DDS's defaults, not the suite's settings")
    monitor_settings = parser.add_mutually_exclusive_group()
    monitor_settings.add_argument('--monitor-suite-settings', action='store_const',
                                  dest='monitor', const='suite', default='defaults',
                                  help="the monitor on the suite's settings, not Fast DDS's "
                                       'defaults')
    monitor_settings.add_argument('--monitor-udp', action='store_const', dest='monitor',
                                  const='udp', help="the monitor on the suite's stop "
                                                    'processes\' settings: UDPv4 only')
    parser.add_argument('--stop-process', action='store_true',
                        help='the stop from a process of its own on UDPv4 only')
    args = parser.parse_args()
    isolate_ros_domain()
    print(machine())
    for k in range(args.runs):
        heard, longest, found = run(args.restarts, not args.publisher_defaults,
                                    args.monitor, args.stop_process)
        print(f'\nrun {k + 1}: {args.restarts} restarts, {heard} stops heard, longest gap '
              f'{longest * 1e3:.0f} ms')
        for t, text in found:
            print(f'  {t:7.3f} s  {text}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
