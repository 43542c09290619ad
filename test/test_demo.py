"""`contact-estimation demo` as the README runs it: every node as a real process, a scenario.

The demo ends by itself once the scenario has played out (its events arrive in simulated
time, however slow the machine); the timeout here only catches a demo that never ends.
"""
import os
import re
import subprocess
import sys

import yaml
from demo_run import demo_output

from contact_estimation import manifest, view_picture
from contact_estimation.commands.demo import STARTUP_TIMEOUT, WALL_DEADLINE
from contact_estimation.commands.demo_model import MODEL_FILE, THRESHOLDS_FILE
from contact_estimation.core.identification.identified_model import IdentifiedModel
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.ros.testing import isolate_ros_domain


def _identified_and_calibrated(out_dir, printout: str, robot: str) -> None:
    """The demo ran the suite with the model and thresholds it made (issue 28): both files in
    its folder, made for `robot`; residual_node loaded the model, the detector's collision
    thresholds are the calibrated ones; the summary says what they hold."""
    model_path, thresholds_path = out_dir / MODEL_FILE, out_dir / THRESHOLDS_FILE
    model = IdentifiedModel.load(model_path, RobotModel.load(robot))  # refused for another arm
    assert model.robot == robot and model.friction_model == 'continuous'
    with open(thresholds_path) as f:
        thresholds = yaml.safe_load(f)
    detector = thresholds['collision_detector']['ros__parameters']
    assert detector['robot'] == robot
    assert thresholds['contact_localizer']['ros__parameters']['robot'] == robot
    with open(out_dir / 'recording_parameters.yaml') as f:
        given = yaml.safe_load(f)
    assert given['residual_node']['ros__parameters']['model_file'] == str(model_path)
    chain_log = (out_dir / 'logs' / 'contact_estimation_chain.log').read_text()
    assert f'residual (identified model {model_path})' in chain_log, chain_log
    # Each joint over ψ in the collision event: ψ_0 ≤ ψ ≤ ψ_max of the calibrated file, not
    # the shipped constant thresholds.
    with open(manifest.node('collision_detector').parameters_path()) as f:
        shipped = yaml.safe_load(f)['collision_detector']['ros__parameters']
    joints = list(RobotModel.load(robot).joint_names)
    collision = next(line for line in printout.splitlines() if 'collision: ' in line)
    over = re.findall(r'(\w+) \|τ_ext\| [\d.]+ > ([\d.]+) N·m', collision)
    assert over, collision
    for joint, psi in over:
        j = joints.index(joint)
        assert detector['thresholds_position'][j] - 0.005 <= float(psi) \
            <= detector['threshold_max'][j], (collision, detector)
        assert float(psi) not in shipped['thresholds_position'], collision
    summary = printout.split('Model and thresholds, made in')[1].split('What each node')[0]
    assert f'identify fit on 30 s of free motion → {model_path}' in summary, summary
    assert 'fit residual RMS per joint (N·m)' in summary, summary
    assert f'→ {thresholds_path}: ψ = min(ψ_0' in summary, summary
    assert all(joint in summary for joint in joints), summary
    assert "calibrate's promise: Aim (at most 1 false stop per hour)" in summary, summary
    assert f'--config {thresholds_path} --config {out_dir / "recording_parameters.yaml"}' \
        in printout, printout


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
    assert re.search(r'touch: a slow, smooth rise \(\d+% within 50 ms\) within every touch limit',
                     printout), printout
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
    _identified_and_calibrated(out_dir, printout, 'panda')
    # Issue 40: the live view ran beside it and recorded what it showed, the push's arrows.
    scenes = [scene for _, scene in view_picture.recorded(out_dir / 'view.mcap')['/view/scene']]
    assert any({'contact/truth', 'contact/fused'} <= {
        e.id for e in scene.entities if e.arrows} for scene in scenes), scenes[-1:]


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
    _identified_and_calibrated(out_dir, proc.stdout, 'ur5')


def test_a_stop_of_any_cause_latched_before_the_push_fails_the_demo(context):
    """Issue 37: the demo says plainly when the stop latched before the push it is meant to
    show, and fails, whatever the cause (here `behind`): the push's collision later changes
    the latched stop's cause, and was taken for the push detected."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

    from contact_estimation.commands.demo import TopicMonitor, _topic, _verdict
    from contact_estimation.core.chain.contact_class import TOUCH
    from contact_estimation.core.chain.detector import COLLISION
    from contact_estimation.ros.conversions import seconds_to_stamp

    def event(stamp: float, cause: str) -> DiagnosticArray:
        msg = DiagnosticArray(status=[DiagnosticStatus(message=f'{cause} at {stamp}', values=[
            KeyValue(key='event', value=cause)])])
        msg.header.stamp = seconds_to_stamp(stamp)
        return msg

    def verdict(*events: DiagnosticArray) -> tuple[str, bool]:
        monitor = TopicMonitor(context)
        try:
            monitor.contact_spans = [[10.0, 1.0, 11.5, 2.0], [20.0, 3.0, None, None]]
            for msg in (event(10.3, TOUCH), *events, event(20.015, COLLISION)):
                monitor._on_event(_topic('collision_detector', 'events'), 0.0, msg)
            return _verdict(monitor, [TOUCH, COLLISION])
        finally:
            monitor.node.destroy_node()

    assert verdict()[1]  # the touch yielded to, the push detected: OK
    text, shown = verdict(event(15.0, 'behind'))
    assert not shown and 'stop latched at 15.000 s' in text and 'behind' in text, text


def test_a_proximity_stop_before_the_push_fails_the_demo(context):
    """A stop of the proximity monitor after its first release and before the push fails the
    demo, with its reason; its start-up stop, and a stop after the push, do not; a start-up
    that still held the arm at the push is said plainly."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from std_msgs.msg import Bool

    from contact_estimation.commands.demo import PROXIMITY, TopicMonitor, _topic, _verdict
    from contact_estimation.core.chain.detector import COLLISION
    from contact_estimation.ros.conversions import seconds_to_stamp
    from contact_estimation.ros.diagnostics import ERROR, level_byte

    def verdict(*stops: tuple[float, bool]) -> tuple[str, bool]:
        monitor = TopicMonitor(context)
        try:
            monitor.contact_spans = [[20.0, 3.0, None, None]]  # the push, received at 3 s
            for now, stop in stops:
                monitor._on_proximity_stop(_topic(PROXIMITY, 'stop'), now, Bool(data=stop))
                status = DiagnosticStatus(name='/' + PROXIMITY, message='behind: 61 ms late',
                                          level=level_byte(ERROR) if stop else 0)
                monitor._on_diagnostics('/diagnostics', now, DiagnosticArray(status=[status]))
            collision = DiagnosticArray(status=[DiagnosticStatus(message='collision', values=[
                KeyValue(key='event', value=COLLISION)])])
            collision.header.stamp = seconds_to_stamp(20.01)
            monitor._on_event(_topic('collision_detector', 'events'), 3.1, collision)
            return _verdict(monitor, [COLLISION])
        finally:
            monitor.node.destroy_node()

    assert verdict((0.5, True), (1.5, False), (3.5, True))[1]  # start-up, then after the push
    text, shown = verdict((0.5, True), (1.5, False), (2.5, True))
    assert not shown and 'proximity monitor stopped the arm at 2.50 s' in text, text
    assert 'behind: 61 ms late' in text, text
    text, shown = verdict((0.5, True))
    assert shown and 'still starting when the push came' in text, text
    assert 'behind: 61 ms late' in text, text


def test_a_message_the_monitor_cannot_read_fails_the_demo_and_does_not_end_it(context):
    """A handler's error (here a /diagnostics status the monitor misreads) is named in the
    summary, which is then not healthy; the monitor goes on with the next message."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from rclpy.serialization import serialize_message

    from contact_estimation.commands.demo import SIM, TopicMonitor, _summary, _topic
    monitor = TopicMonitor(context)
    try:
        topic = _topic(SIM, 'diagnostics')
        bad = DiagnosticArray(status=[DiagnosticStatus(name='/' + SIM, values=[
            KeyValue(key='simulated_time', value='not a number')])])
        monitor._received(topic, serialize_message(bad))
        good = DiagnosticArray(status=[DiagnosticStatus(name='/' + SIM, values=[
            KeyValue(key='simulated_time', value='1.5')])])
        monitor._received(topic, serialize_message(good))
        assert monitor.simulated_time == 1.5
        text, healthy = _summary(monitor, {})
        assert not healthy and 'could not read a message on' in text and 'ValueError' in text
    finally:
        monitor.node.destroy_node()
