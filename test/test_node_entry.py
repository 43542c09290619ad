"""The node entry (contact_estimation/nodes/__main__.py): how a node process starts and stops."""
import os
import signal
import subprocess
import sys
import time

from contact_estimation.launcher import node_command
from contact_estimation.ros.testing import isolate_ros_domain

DEADLINE = 120.0  # s: generous, for a loaded machine


def _mapped(pid: int, library: str) -> bool:
    try:
        with open(f'/proc/{pid}/maps') as f:
            return library in f.read()
    except OSError:  # the process has gone
        return True


def test_a_node_stopped_while_it_still_imports_exits_quietly_with_code_0(tmp_path):
    """Ctrl-C while the node's module imports (the localizer's open3d takes a second or more)
    is a stop, not a crash: no KeyboardInterrupt traceback, exit code 0, which
    `contact-estimation up` and `ros2 launch` report as a clean exit."""
    isolate_ros_domain()
    log_path = tmp_path / 'contact_localizer.log'
    with open(log_path, 'w') as log:
        proc = subprocess.Popen(node_command('contact_localizer'), stdout=log,
                                stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            # numpy is loaded by the node module's imports, after the entry has taken the
            # signals and long before open3d, pinocchio and rclpy are in.
            deadline = time.monotonic() + DEADLINE
            while not _mapped(proc.pid, '_multiarray_umath') and time.monotonic() < deadline:
                time.sleep(0.001)
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=DEADLINE)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    output = log_path.read_text()
    assert code == 0, output
    assert 'Traceback' not in output and 'KeyboardInterrupt' not in output, output


def test_the_entry_names_the_processes_it_starts_when_given_another_name():
    done = subprocess.run([sys.executable, '-m', 'contact_estimation.nodes', 'no_such_node'],
                          capture_output=True, text=True, timeout=DEADLINE,
                          env=os.environ.copy())
    assert done.returncode == 2
    assert 'collision_detector' in done.stderr and 'contact_estimation_chain' in done.stderr
