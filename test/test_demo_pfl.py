"""`contact-estimation demo --scenario config/scenarios/demo_pfl.yaml` (issue 38): the arm
brought inside the protective distance of a person's hand with no contact and no stop, at most
v_max toward it, then pressed over the hand's quasi-static limit: the proximity monitor's stop
`pfl`. Every node as a real process; the demo ends by itself once the scenario has played
out (simulated time, however slow the machine); the timeout only catches a demo that never
ends. And the verdict (commands/demo_pfl.py PersonWatch) on the messages of a scene that did
not show it: it fails, saying why."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from sensor_msgs.msg import JointState

from contact_estimation.commands.demo import STARTUP_TIMEOUT, WALL_DEADLINE, scenario_settings
from contact_estimation.commands.demo_pfl import PersonWatch
from contact_estimation.core.identification.trajectory import make_trajectory
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.scenario import Scenario
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.testing import isolate_ros_domain


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


SCENARIO = 'config/scenarios/demo_pfl.yaml'


def _watched_approach(stop_at: float | None = None) -> PersonWatch:
    """A PersonWatch fed the scenario's path as joint states up to its press (every 5 ms,
    received at its simulated time), the monitor's status of the hand inside its protective
    distance from 4.5 s, its stop clear from 1 s (raised at `stop_at`, if given)."""
    arm = RobotModel.load('panda')
    scenario = Scenario.load(SCENARIO, arm)
    watch, path = PersonWatch(scenario, arm), make_trajectory(arm, scenario.trajectory)
    watch.on_stop(1.0, False)
    for t in np.arange(0.0, scenario.forces[0].start, 0.005):
        q, v, _ = path.sample(t)
        state = JointState(position=q.tolist(), velocity=v.tolist())
        state.header.stamp = seconds_to_stamp(t)
        watch.on_joint_state(t, state)
        if t >= 4.5 and round(t / 0.005) % 20 == 0:
            parts = DiagnosticArray(status=[DiagnosticStatus(name='proximity/right_hand', values=[
                KeyValue(key='distance', value='0.05'), KeyValue(key='margin', value='-0.1'),
                KeyValue(key='protective_distance', value='0.15')])])
            parts.header.stamp = seconds_to_stamp(t)
            watch.on_parts(t, parts)
        if stop_at is not None and abs(t - stop_at) < 1e-6:
            watch.on_stop(t, True)
    return watch


@pytest.mark.parametrize('spans, stop_at, words', [
    ([[6.0, 6.0, 6.1, 6.1]], None, 'a contact at 6.000 s'),
    ([[11.0, 11.0, 12.5, 12.5]], 4.6, 'the proximity monitor stopped the arm while it moved'),
    ([[11.0, 11.0, 12.5, 12.5]], None, 'no contact stopped pfl')])
def test_the_verdict_fails_a_scene_that_did_not_show_it_saying_why(spans, stop_at, words):
    passed, shown = _watched_approach(stop_at).verdict(spans, [])
    assert not shown and 'FAILED' in passed and words in passed, passed


def test_the_verdict_reports_the_approach_against_v_max():
    text, _ = _watched_approach().verdict([[11.0, 11.0, 12.5, 12.5]], [])
    found = re.search(r'at most ([\d.]+) m/s toward it there \(v_max ([\d.]+) m/s\), nearest '
                      r'(\d+) mm', text)
    assert found, text
    speed, v_max, nearest = (float(value) for value in found.groups())
    assert 0.0 < speed < v_max and 0 < nearest < 50, text


def test_the_monitor_status_gives_its_stop_for_pfl_and_counts_by_cause():
    watch = _watched_approach()
    reason = 'pfl: 212 N on panda_link4 against right_hand (hand_fingers): over its ...'
    status = DiagnosticStatus(level=DiagnosticStatus.ERROR, message=reason, values=[
        KeyValue(key='behind', value='2'), KeyValue(key='pfl', value='1'),
        KeyValue(key='pfl', value=reason.removeprefix('pfl: '))])  # the count, the reason
    assert watch.on_status(12.0, status) and watch.pfl_stop == (12.0, reason)
    assert 'behind 2, pfl 1' in watch.stop_causes(11.0, 12.0)


def test_a_scenario_showing_pfl_without_people_is_refused(tmp_path):
    path = tmp_path / 'no_people.yaml'
    path.write_text('shows: [person_reached, pfl]\n')
    with pytest.raises(ValueError, match='people'):
        scenario_settings(str(path))


def test_a_scenario_showing_nothing_a_verdict_judges_is_refused(tmp_path):
    """Else the demo would print OK having judged nothing."""
    path = tmp_path / 'contact_only.yaml'
    path.write_text('shows: [contact, hold]\n')
    with pytest.raises(ValueError, match='none that a verdict judges'):
        scenario_settings(str(path))
