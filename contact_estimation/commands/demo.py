"""`contact-estimation demo`: the simulated cobot and every node, a scripted scenario, a report.

Starts every node of nodes.yaml as its own process (as `ros2 launch ... sim:=true` would),
listens to every topic they declare for `--seconds`, then prints what each node received and
published, the collision detector's events, and the reaction of seed 003 to the scenario's
contact (hold, then resume by itself once the contact is over, while the latched stop signal
stays up until `~/reset`), and writes a PNG: estimated against true external joint torque,
the stop signal and the time-scaling factor. Exits 1 if a node died or a node published
nothing.
"""
from __future__ import annotations

import argparse
import importlib
import os
import time
from collections import defaultdict

import numpy as np
import yaml

from contact_estimation import manifest
from contact_estimation.launcher import NodeSet
from contact_estimation.ros.conversions import stamp_to_seconds

DEFAULT_SCENARIO = 'config/scenarios/demo.yaml'
STARTUP_TIMEOUT = 30.0  # s for every node to import, start and connect


def _message_class(type_name: str):
    package, kind, name = type_name.split('/')
    return getattr(importlib.import_module(f'{package}.{kind}'), name)


class TopicMonitor:
    """Counts every manifest topic and keeps the time series the plot needs."""

    def __init__(self, context):
        from rclpy.node import Node

        from contact_estimation.ros.qos import SENSOR_QOS
        self.node = Node('contact_estimation_demo_monitor', context=context)
        self.counts: dict[str, int] = defaultdict(int)
        self.series: dict[str, list] = defaultdict(list)
        self.start = time.monotonic()
        topics = {}
        for spec in manifest.nodes().values():
            for key in list(spec.publishes) + list(spec.subscribes):
                topics[spec.topic(key)] = spec.message_type(key)
        for topic, type_name in topics.items():
            self.node.create_subscription(_message_class(type_name), topic,
                                          lambda msg, t=topic: self._received(t, msg), SENSOR_QOS)

    def _received(self, topic: str, msg) -> None:
        self.counts[topic] += 1
        now = time.monotonic() - self.start
        if hasattr(msg, 'effort') and topic in (_topic('residual_node', 'residual'),
                                                _topic('sim_cobot', 'true_contact_torque')):
            self.series[topic].append((now, np.array(msg.effort)))
        elif hasattr(msg, 'data') and isinstance(msg.data, (bool, float)):
            self.series[topic].append((now, float(msg.data)))
        elif topic == _topic('collision_detector', 'events'):
            for status in msg.status:
                self.series[topic].append((now, stamp_to_seconds(msg.header.stamp),
                                           status.message))


def _residual_matching_the_sim() -> dict:
    """residual_node parameters that model the simulated joints' friction (seed 001 eq. 23).

    On a real arm these come from `contact-estimation identify`; the demo knows the truth.
    """
    with open(manifest.node('sim_cobot').parameters_path()) as f:
        sim = yaml.safe_load(f)['sim_cobot']['ros__parameters']
    return {'friction_model': 'continuous', 'friction_parameters': sim['friction']}


def _wait_for_pipeline(monitor: TopicMonitor, executor, nodes: NodeSet, timeout: float) -> bool:
    """Spin until the first residual arrives (every node imported and connected)."""
    residual = _topic('residual_node', 'residual')
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not monitor.counts.get(residual):
        executor.spin_once(timeout_sec=0.05)
        if len(nodes.alive()) < len(nodes.processes):
            return False
    return bool(monitor.counts.get(residual))


def _topic(node: str, key: str) -> str:
    return manifest.node(node).topic(key)


def _summary(monitor: TopicMonitor, seconds: float, exit_codes: dict[str, int]) -> tuple[str, bool]:
    lines, healthy = [], True
    for spec in manifest.nodes().values():
        code = exit_codes.get(spec.name)
        status = 'ran to the end' if code in (0, -2, None) else f'DIED (exit code {code})'
        healthy &= code in (0, -2, None)
        lines.append(f'{spec.name}: {status}')
        for direction, entries in (('published', spec.publishes), ('received', spec.subscribes)):
            for key in entries:
                topic = spec.topic(key)
                n = monitor.counts.get(topic, 0)
                lines.append(f'    {direction:9s} {topic:42s} {n:7d} msgs {n / seconds:8.1f} Hz')
            if direction == 'published' and entries and not any(
                    monitor.counts.get(spec.topic(k)) for k in entries):
                healthy = False
                lines.append('    !! published nothing')
    return '\n'.join(lines), healthy


def _first(times: np.ndarray, mask: np.ndarray) -> float | None:
    hits = times[mask]
    return float(hits[0]) if hits.size else None


def _reaction(monitor: TopicMonitor) -> str:
    """The seed 003 reaction to the first contact, from the ground truth and f_S as received.

    Times are the demo monitor's receive times (s since start): the order of events is
    right, the delays between them are not measurements (benchmarks/ measures those).
    """
    truth = monitor.series.get(_topic('sim_cobot', 'true_contact_torque'), [])
    scaling = monitor.series.get(_topic('collision_detector', 'time_scaling'), [])
    stops = monitor.series.get(_topic('collision_detector', 'stop'), [])
    touching = np.array([np.any(np.abs(effort) > 0) for _, effort in truth], dtype=bool)
    if not touching.any() or not scaling:
        return '    no contact while the demo watched (or no f_S): nothing to react to'
    t_truth = np.array([t for t, _ in truth])
    onset = _first(t_truth, touching)
    end = _first(t_truth, (t_truth > onset) & ~touching)
    t_s, f_s = (np.array(x) for x in zip(*scaling))
    lines = [f'    contact (ground truth) from {onset:6.2f} s to '
             + (f'{end:6.2f} s' if end is not None else 'the end')]
    held = _first(t_s, (t_s >= onset) & (f_s <= 0.0))
    if held is None:
        return '\n'.join(lines + ['    hold: f_S never reached 0 (contact not detected)'])
    lines.append(f'    hold:    f_S = 0 from {held:6.2f} s: the arm holds where it is')
    resumed = None if end is None else _first(t_s, (t_s > max(end, held)) & (f_s > 0.0))
    if resumed is None:
        lines.append('    resume:  not yet (the contact lasted, or the demo ended first)')
    else:
        full = _first(t_s, (t_s > resumed) & (f_s >= 1.0))
        lines.append(f'    resume:  f_S > 0 again from {resumed:6.2f} s, after the contact ended: '
                     'the motion resumes by itself'
                     + (f', at full speed (f_S = 1) from {full:.2f} s' if full else ''))
    if stops and stops[-1][1]:
        lines.append('    stop:    still latched (True) at the end: the stop signal is the safety '
                     'latch and clears only with ~/reset (hold_time 0); f_S is the seed 003 '
                     'reaction for controllers that re-time their trajectory')
    return '\n'.join(lines)


def _plot(monitor: TopicMonitor, path: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    residual = monitor.series.get(_topic('residual_node', 'residual'), [])
    truth = monitor.series.get(_topic('sim_cobot', 'true_contact_torque'), [])
    fig, (ax_tau, ax_stop) = plt.subplots(2, 1, figsize=(11, 7), sharex=True,
                                          gridspec_kw={'height_ratios': [3, 1]})
    if residual:
        t, tau = zip(*residual)
        tau = np.array(tau)
        for j in range(tau.shape[1]):
            line, = ax_tau.plot(t, tau[:, j], lw=0.8, label=f'τ_ext,{j + 1} estimated')
            if truth:
                tt, true = zip(*truth)
                ax_tau.plot(tt, np.array(true)[:, j], '--', color=line.get_color(), lw=1.2)
    ax_tau.set_ylabel('external joint torque (N·m)')
    ax_tau.set_title('estimated (solid) and true (dashed) external joint torque')
    ax_tau.legend(ncol=4, fontsize=7, loc='upper left')
    ax_tau.grid(alpha=0.3)
    for key, node, label in (('stop', 'collision_detector', 'stop (1 = stop)'),
                             ('time_scaling', 'collision_detector', 'time scaling f_S')):
        data = monitor.series.get(_topic(node, key), [])
        if data:
            t, v = zip(*data)
            ax_stop.step(t, v, where='post', label=label)
    ax_stop.set_xlabel('time since start (s)')
    ax_stop.legend(fontsize=8, loc='lower left')
    ax_stop.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='contact-estimation demo', description=__doc__)
    parser.add_argument('--seconds', type=float, default=12.0, help='scenario length (s)')
    parser.add_argument('--scenario', default=DEFAULT_SCENARIO,
                        help='scenario file for the simulated cobot')
    parser.add_argument('--out', default='out/demo', help='folder for the plot and node logs')
    args = parser.parse_args(argv)
    scenario = args.scenario if os.path.isabs(args.scenario) else manifest.share_path(args.scenario)
    if not os.path.isfile(scenario):
        parser.error(f'--scenario {args.scenario}: no such file')
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')

    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from tqdm import tqdm

    os.makedirs(args.out, exist_ok=True)
    context = Context()
    rclpy.init(context=context)
    monitor = TopicMonitor(context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(monitor.node)
    nodes = NodeSet([s.name for s in manifest.selected(with_sim=True)],
                    overrides={'sim_cobot': {'scenario': scenario},
                               'residual_node': _residual_matching_the_sim()},
                    log_dir=os.path.join(args.out, 'logs'))
    print(f'demo: starting {", ".join(nodes.names)}; scenario {args.scenario}', flush=True)
    nodes.start()
    try:
        if not _wait_for_pipeline(monitor, executor, nodes, STARTUP_TIMEOUT):
            print(f'demo: no residual within {STARTUP_TIMEOUT:.0f} s of start', flush=True)
        with tqdm(total=round(args.seconds), unit='s', desc='demo') as bar:
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                executor.spin_once(timeout_sec=0.01)
                elapsed = min(round(args.seconds), int(args.seconds - (end - time.monotonic())))
                bar.update(elapsed - bar.n)
                for name, code in nodes.newly_dead():
                    tqdm.write(f'demo: node {name} exited with code {code}:\n'
                               + nodes.log_tail(name))
    finally:
        exit_codes = {n: p.returncode for n, p in nodes.processes.items() if p.poll() is not None}
        nodes.stop()
        executor.shutdown()
        monitor.node.destroy_node()
        context.try_shutdown()
    text, healthy = _summary(monitor, args.seconds, exit_codes)
    print('\nWhat each node published and received (as seen by the demo monitor):\n' + text)
    events = monitor.series.get(_topic('collision_detector', 'events'), [])
    print('\nCollision detector events (received at; header stamp):' if events
          else '\nNo collision detector events.')
    for t, stamp, message in events:
        print(f'    {t:6.2f} s; {stamp:.3f}  {message}')
    print('\nReaction to the contact (seed 003 time scaling f_S; demo monitor receive times):\n'
          + _reaction(monitor))
    plot_path = os.path.join(args.out, 'demo.png')
    _plot(monitor, plot_path)
    print(f'\nplot: {plot_path}\nnode logs: {os.path.join(args.out, "logs")}')
    print('demo: OK' if healthy else 'demo: FAILED (see above)')
    return 0 if healthy else 1
