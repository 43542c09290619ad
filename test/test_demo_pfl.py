"""`contact-estimation demo --scenario config/scenarios/demo_pfl.yaml` (issue 38): the arm
brought inside the protective distance of a person's hand with no contact and no stop, at most
v_max toward it, then pressed over the hand's quasi-static limit: the proximity monitor's stop
`pfl`. Every node as a real process; the
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
def test_the_pfl_demo_nears_the_hand_with_no_stop_and_stops_pfl_over_the_limit(tmp_path):
    isolate_ros_domain()
    proc = subprocess.run(
        [sys.executable, '-m', 'contact_estimation', 'demo', '--scenario',
         'config/scenarios/demo_pfl.yaml', '--out', str(tmp_path / 'demo_pfl')],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
        timeout=STARTUP_TIMEOUT + WALL_DEADLINE + 120)
    assert proc.returncode == 0, proc.stdout
    assert 'demo: OK' in proc.stdout and 'the scenario played out' in proc.stdout, proc.stdout
    verdict = proc.stdout.split('\nverdict: ')[1]
    reached = re.search(r'the right_hand \(hand_fingers\) inside its protective distance from '
                        r'[\d.]+ s \(simulated; S_p ([\d.]+) m, where separation monitoring stops '
                        r'the arm\), the arm at most ([\d.]+) m/s toward it there \(v_max '
                        r'([\d.]+) m/s\), nearest (\d+) mm, no contact, no stop', verdict)
    assert reached, verdict
    protective, approach, v_max, nearest = (float(value) for value in reached.groups())
    assert 0.0 < approach <= v_max and 0.0 < nearest < protective * 1e3, verdict
    # The stop names its cause, the region, the force and the limit (the hand's quasi-static).
    assert re.search(r'the press at [\d.]+ s stopped the arm \d+ ms after its start: pfl: '
                     r'\d+ N on panda_\w+ against right_hand \(hand_fingers\): over its '
                     r'quasi-static limit 140 N', verdict), verdict
