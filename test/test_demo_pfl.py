"""`contact-estimation demo --scenario config/scenarios/demo_pfl.yaml` (issue 38): a person's
hand in the arm's swing, reached with no stop before it at most v_max, then pressed over its
quasi-static limit: the proximity monitor's stop `pfl`. Every node as a real process; the
demo ends by itself once the scenario has played out (simulated time, however slow the
machine); the timeout only catches a demo that never ends."""
import os
import re
import subprocess
import sys

import pytest

from contact_estimation.commands.demo import STARTUP_TIMEOUT, WALL_DEADLINE
from contact_estimation.ros.testing import isolate_ros_domain


@pytest.mark.xfail(strict=False, reason='known open: 0 of 3 runs OK so far (docs/performance.md '
                   '"The PFL demo"): the suite\'s arm reached the hand later than the bare '
                   'simulation, and the press over the limit got no estimate over it')
def test_the_pfl_demo_reaches_the_hand_with_no_stop_and_stops_pfl_over_the_limit(tmp_path):
    isolate_ros_domain()
    proc = subprocess.run(
        [sys.executable, '-m', 'contact_estimation', 'demo', '--scenario',
         'config/scenarios/demo_pfl.yaml', '--out', str(tmp_path / 'demo_pfl')],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
        timeout=STARTUP_TIMEOUT + WALL_DEADLINE + 120)
    assert proc.returncode == 0, proc.stdout
    assert 'demo: OK' in proc.stdout and 'the scenario played out' in proc.stdout, proc.stdout
    verdict = proc.stdout.split('\nverdict: ')[1]
    reached = re.search(r'the hand_fingers reached at [\d.]+ s \(simulated\) with no stop '
                        r'before it, at ([\d.]+) m/s toward it \(v_max ([\d.]+) m/s\), true peak '
                        r'force (\d+) N \(transient limit 271 N\)', verdict)
    assert reached, verdict
    approach, v_max, peak = (float(value) for value in reached.groups())
    assert 0.0 < approach <= v_max and 0.0 < peak <= 271.0, verdict
    # The stop names its cause, the region, the force and the limit (the hand's quasi-static).
    assert re.search(r'stopped the arm \d+ ms after its start: pfl: \d+ N on panda_\w+ against '
                     r'right_hand \(hand_fingers\): over its quasi-static limit 140 N', verdict), \
        verdict
