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


def test_up_reports_a_node_that_dies_and_stops_the_rest_on_ctrl_c(tmp_path):
    config = tmp_path / 'bad.yaml'
    config.write_text(yaml.safe_dump({'residual_node': {'ros__parameters': {
        'model': 'fast', 'model_file': str(tmp_path / 'missing_model.yaml')}}}))
    proc = _cli('up', '--separate', '--config', str(config), '--log-dir', str(tmp_path / 'logs'))
    lines, deadline = [], time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if 'node residual_node exited with code 1' in line:
            break
    else:
        proc.kill()
        raise AssertionError('no report of the dead node:\n' + ''.join(lines))
    assert 'missing_model.yaml' in (tmp_path / 'logs' / 'residual_node.log').read_text()
    # Ctrl-C once the rest are running (each logs a line when it has started).
    rest = [spec.name for spec in manifest.selected(with_sim=False) if spec.name != 'residual_node']
    deadline = time.monotonic() + 60
    while not all(_has_started(tmp_path / 'logs' / f'{name}.log') for name in rest):
        assert time.monotonic() < deadline, f'not all of {rest} started'
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, out
    assert 'stopping' in out
    for name in rest:  # stopped cleanly: only the dead node is reported
        assert f'node {name} exited' not in out, out


def _has_started(log_path) -> bool:
    return log_path.exists() and '[INFO]' in log_path.read_text()


def test_up_runs_the_core_nodes_composed_in_one_process_and_stops_cleanly(tmp_path):
    logs = tmp_path / 'logs'
    proc = _cli('up', '--log-dir', str(logs))
    together = manifest.composed()
    log = logs / f'{together.name}.log'
    others = [s.name for s in manifest.selected(with_sim=False) if s.name not in together.nodes]
    deadline = time.monotonic() + 60
    # Each node logs one [INFO] line with its own name when it has started; Ctrl-C only
    # once all have (a node still importing would die of the KeyboardInterrupt).
    while not (log.exists() and all(f'[{name}]' in log.read_text() for name in together.nodes)
               and all(_has_started(logs / f'{name}.log') for name in others)):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, 'the node set did not start'
        time.sleep(0.1)
    # One process for the composed nodes, one for each other node.
    assert sorted(p.name for p in logs.iterdir()) == sorted(
        f'{name}.log' for name in [together.name, *others])
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert f'starting {together.name}' in out and 'exited' not in out, out


def test_up_refuses_a_missing_config_file(tmp_path):
    proc = _cli('up', '--config', str(tmp_path / 'nope.yaml'))
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and 'nope.yaml: no such file' in out


def test_up_refuses_a_priority_outside_sched_fifo(tmp_path):
    proc = _cli('up', '--priority', '150')
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and 'must be 0 (normal) or 1-99' in out
