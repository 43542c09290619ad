"""`contact-estimation demo` as the README runs it: every node as a real process, a scenario."""
import os
import subprocess
import sys

from contact_estimation import manifest
from contact_estimation.ros.testing import isolate_ros_domain


def test_demo_runs_every_node_reports_their_topics_and_writes_a_plot(tmp_path):
    isolate_ros_domain()
    out_dir = tmp_path / 'demo'
    proc = subprocess.run(
        [sys.executable, '-m', 'contact_estimation', 'demo', '--seconds', '8',
         '--out', str(out_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
        timeout=120)
    assert proc.returncode == 0, proc.stdout
    assert 'demo: OK' in proc.stdout
    for spec in manifest.selected(with_sim=True):
        assert f'{spec.name}: ran to the end' in proc.stdout
        for key in spec.publishes:
            assert spec.topic(key) in proc.stdout
    assert (out_dir / 'demo.png').stat().st_size > 10_000
