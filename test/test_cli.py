"""`contact-estimation` as a user runs it: real processes, real nodes."""
import os
import signal
import subprocess
import sys
import time

import yaml

from contact_estimation import manifest
from contact_estimation.ros.testing import isolate_ros_domain


def _cli(*args, **kwargs):
    isolate_ros_domain()
    return subprocess.Popen([sys.executable, '-m', 'contact_estimation', *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=os.environ.copy(), preexec_fn=_ctrl_c_as_in_a_terminal,
                            **kwargs)


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT as a terminal gives it, even when the tests run in the background: a shell's
    `&` starts them with SIGINT ignored, which every child inherits (`up` then never stops)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_help_and_unknown_command():
    out, _ = _cli('--help').communicate(timeout=30)
    assert 'identify' in out and 'demo' in out
    proc = _cli('fly')
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and 'invalid choice' in out


def test_up_restarts_a_node_that_dies_gives_up_on_a_crash_loop_and_stops_the_rest_on_ctrl_c(
        tmp_path):
    """A node that cannot start (its model file is missing) is started again, at once and
    then after a pause, and given up on after its third quick death; the rest run on."""
    config = tmp_path / 'bad.yaml'
    config.write_text(yaml.safe_dump({'residual_node': {'ros__parameters': {
        'model': 'fast', 'model_file': str(tmp_path / 'missing_model.yaml')}}}))
    proc = _cli('up', '--separate', '--config', str(config), '--log-dir', str(tmp_path / 'logs'))
    lines, deadline = [], time.monotonic() + 240
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if 'residual_node died (exit code 1)' in line and 'not restarted' in line:
            break
    else:
        proc.kill()
        raise AssertionError('no report of the given-up node:\n' + ''.join(lines))
    restarts = [line for line in lines if 'residual_node died (exit code 1)' in line]
    assert len(restarts) == 3 and 'restarting it,' in restarts[0], lines
    assert 'restarting it in 1 s' in restarts[1], lines
    assert 'missing_model.yaml' in (tmp_path / 'logs' / 'residual_node.log').read_text()
    # Ctrl-C once the rest are running (each logs a line when it has started).
    rest = [spec.name for spec in manifest.processes(False, separate=True)
            if spec.name != 'residual_node']
    deadline = time.monotonic() + 180
    while not all(_has_started(tmp_path / 'logs' / f'{name}.log') for name in rest):
        assert time.monotonic() < deadline, f'not all of {rest} started'
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, out
    assert 'residual_node: given up after it died 3 times' in out, out
    for name in rest:  # stopped cleanly
        assert f'{name}: stopped\n' in out, out


def _has_started(log_path) -> bool:
    return log_path.exists() and '[INFO]' in log_path.read_text()


def test_up_runs_the_core_nodes_composed_in_their_processes_and_stops_cleanly(tmp_path):
    logs = tmp_path / 'logs'
    proc = _cli('up', '--log-dir', str(logs))
    processes = manifest.composed()
    together = manifest.composed_nodes()
    others = [s.name for s in manifest.selected(with_sim=False) if s.name not in together]
    deadline = time.monotonic() + 180  # a loaded 2-core machine takes minutes

    def started(process) -> bool:
        log = logs / f'{process.name}.log'
        return log.exists() and all(f'[{name}]' in log.read_text() for name in process.nodes)

    # Each node logs one [INFO] line with its own name when it has started; Ctrl-C only
    # once all have (a node still importing would die of the KeyboardInterrupt).
    while not (all(started(p) for p in processes)
               and all(_has_started(logs / f'{name}.log') for name in others)):
        assert proc.poll() is None, proc.communicate()[0]
        if time.monotonic() > deadline:
            proc.send_signal(signal.SIGINT)  # no suite left running
            raise AssertionError('the node set did not start:\n' + proc.communicate()[0])
        time.sleep(0.1)
    # One process for each composed process (the chain, the estimators, the proximity
    # monitor), one for each other node.
    assert sorted(p.name for p in logs.iterdir()) == sorted(
        f'{name}.log' for name in [*(p.name for p in processes), *others])
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    summary = out[out.index('stopping'):]  # every process, stopped cleanly
    assert all(f'{name}: stopped\n' in summary for name in [*(p.name for p in processes),
                                                             *others]), out
    assert 'died' not in out, out


def test_up_refuses_a_missing_config_file(tmp_path):
    proc = _cli('up', '--config', str(tmp_path / 'nope.yaml'))
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and 'nope.yaml: no such file' in out


def test_up_refuses_a_priority_outside_sched_fifo(tmp_path):
    proc = _cli('up', '--priority', '150')
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and 'must be auto, 0 (normal) or 1-99' in out


def test_two_arms_in_two_namespaces_share_one_graph_and_a_push_stops_only_its_own(
        tmp_path, context):
    """`up --sim --namespace left` and `--namespace right` side by side: each suite reads its
    own arm (topics and simulated clock in its namespace); the push on the left arm stops the
    left arm, and the right arm, untouched, is never stopped by it."""
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import Bool

    from contact_estimation.ros.qos import STOP_QOS
    from contact_estimation.ros.spinning import spin_until
    detector = manifest.node('collision_detector')
    pushed = tmp_path / 'pushed.yaml'
    pushed.write_text(yaml.safe_dump({'robot': 'panda', 'forces': [{
        'link': 'panda_link5', 'point': [0.055, 0.0, -0.13], 'force': [-60.0, 0.0, 0.0],
        'frame': 'link', 'start': 2.0, 'duration': 60.0}]}))
    procs, stops, events = {}, {}, {}
    monitor = Node('two_arms_monitor', context=context)
    for arm in ('left', 'right'):
        config = tmp_path / f'{arm}.yaml'
        config.write_text(yaml.safe_dump({'sim_cobot': {'ros__parameters': {
            'scenario': str(pushed) if arm == 'left' else ''}}}))
        procs[arm] = _cli('up', '--sim', '--namespace', arm, '--config', str(config),
                          '--log-dir', str(tmp_path / arm))
        stops[arm], events[arm] = [], []
        monitor.create_subscription(Bool, detector.resolved_topic('stop', arm),
                                    lambda msg, arm=arm: stops[arm].append(msg.data), STOP_QOS)
        monitor.create_subscription(
            DiagnosticArray, detector.resolved_topic('events', arm),
            lambda msg, arm=arm: events[arm].extend(
                {kv.key: kv.value for kv in s.values}['event'] for s in msg.status), STOP_QOS)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(monitor)
    try:
        assert spin_until(executor, lambda: 'collision' in events['left'], 240.0), (
            events, [p.poll() for p in procs.values()])
        # The right arm's suite runs (its stop cleared on its own arm's input) and saw none.
        assert spin_until(executor, lambda: stops['right'] and stops['right'][-1] is False,
                          120.0), events['right']
        # The stop and the events are two topics: either may arrive first.
        assert spin_until(executor, lambda: stops['left'] and stops['left'][-1] is True,
                          60.0), stops['left']
        assert 'collision' not in events['right']
    finally:
        executor.shutdown()
        monitor.destroy_node()
        for proc in procs.values():
            proc.send_signal(signal.SIGINT)
        for proc in procs.values():
            proc.communicate(timeout=60)
