"""`contact-estimation demo` as the README runs it: every node as a real process, a scenario.

The demo ends by itself once the scenario has played out (its events arrive in simulated
time, however slow the machine); the timeout here only catches a demo that never ends.
"""
import os
import subprocess
import sys

import yaml
from demo_run import demo_output

from contact_estimation import manifest
from contact_estimation.commands.demo import STARTUP_TIMEOUT, WALL_DEADLINE
from contact_estimation.ros.testing import isolate_ros_domain


def test_demo_runs_every_node_reports_their_topics_and_the_reaction_and_writes_a_plot(
        tmp_path_factory):
    """The session's one demo run (demo_run.py), which the recording and replay tests read
    too: no second full demo."""
    out_dir, printout = demo_output(tmp_path_factory)
    assert 'demo: OK' in printout
    assert 'verdict: no stop before the push' in printout, printout
    assert 'the scenario played out' in printout, printout
    assert 'simulation: ' in printout  # kept up, or says it could not
    for spec in manifest.selected(with_sim=True):
        assert f'{spec.name}: ran to the end' in printout
        for key in spec.publishes:
            assert spec.topic(key) in printout
    # Events arrive as DiagnosticArray (header stamp printed); the collision is among them.
    assert 'Collision detector events (received at; header stamp):' in printout
    assert 'collision: panda_joint' in printout
    # Issue 29: the hand's touch first, yielded to with no stop (a stop during it fails the
    # demo), then the push, an impact.
    assert 'touch: slow, smooth rise within every touch limit' in printout, printout
    assert 'yielded to with no stop' in printout.split('verdict:')[1], printout
    assert 'impact: ' in printout.split('collision: panda_joint')[1], printout
    # Seed 003: the push of config/scenarios/demo.yaml holds the arm, then it resumes by
    # itself while the stop stays latched.
    reaction = printout.split('Reaction to the contact')[1]
    assert 'hold:    f_S = 0 from' in reaction, printout
    assert 'the motion resumes by itself' in reaction, printout
    assert 'stop:    still latched' in reaction, printout
    # The localizer's estimates of the push, against the simulator's truth of the same stamps.
    localization = printout.split('Contact estimates against the ground truth')[1]
    assert 'link right in' in localization, printout
    assert (out_dir / 'demo.png').stat().st_size > 10_000


def test_the_demo_on_a_6_joint_arm_detects_and_locates_the_push(tmp_path):
    """`demo --robot ur5`: the robot given once reaches every node and the simulated UR5
    (config/scenarios/demo_ur5.yaml pushes its forearm); stop, reaction and estimates."""
    isolate_ros_domain()
    out_dir = tmp_path / 'demo_ur5'
    proc = subprocess.run(
        [sys.executable, '-m', 'contact_estimation', 'demo', '--robot', 'ur5', '--out',
         str(out_dir)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=os.environ.copy(), timeout=STARTUP_TIMEOUT + WALL_DEADLINE + 60)
    assert proc.returncode == 0, proc.stdout
    assert 'verdict: no stop before the push' in proc.stdout, proc.stdout
    events = proc.stdout.split('Collision detector events')[1].split('Reaction')[0]
    assert any(f'collision: {joint}' in events for joint in (
        'shoulder_lift_joint', 'elbow_joint')), proc.stdout
    localization = proc.stdout.split('Contact estimates against the ground truth')[1]
    assert 'link right in' in localization, proc.stdout
    with open(out_dir / 'recording_parameters.yaml') as f:
        assert yaml.safe_load(f)['/**']['ros__parameters'] == {'robot': 'ur5'}
