"""`contact-estimation replay` on the demo's recording, against what the live demo did.

The live run's timing slack: it ran on a loaded machine, its simulator skipped time when it
fell behind and best-effort subscribers lost samples, so the live nodes saw pauses in the
joint states up to the longest gap in the recording's stamps; an event may be placed that
much earlier or later. The replay sees the recorded samples, each exactly once, in stamp order.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from demo_run import demo_output, recorded

from contact_estimation import manifest
from contact_estimation.commands.demo_model import THRESHOLDS_FILE
from contact_estimation.contact_pictures import BagContacts
from contact_estimation.core.contact.contact import contact_error
from contact_estimation.suite_bag import messages, stamp_ns

EVENTS = '/contact_estimation/collision_events'
RESIDUAL = '/contact_estimation/residual'


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    demo_dir, _ = demo_output(tmp_path_factory)
    out = tmp_path_factory.mktemp('replay')
    proc = subprocess.run(
        [sys.executable, '-m', 'contact_estimation', 'replay', str(demo_dir / 'recording'),
         '--config', str(demo_dir / THRESHOLDS_FILE),  # as the demo ran: its calibration
         '--config', str(demo_dir / 'recording_parameters.yaml'), '--out', str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
        timeout=600)
    assert proc.returncode == 0, proc.stdout
    return demo_dir / 'recording', out, proc.stdout


def _stop_events(bag, topic: str = EVENTS) -> list[tuple[float, str]]:
    """(stamp s, cause) of the collision detector's events on `topic` (the replay's at the
    root, the demo's `recorded` in its namespace); cause 'cleared' lowers the stop."""
    found = []
    for _, _, _, msg in messages(bag, [topic]):
        for status in msg.status:
            cause = next(kv.value for kv in status.values if kv.key == 'event')
            found.append((stamp_ns(msg) * 1e-9, cause))
    return found


def _slack(recording) -> float:
    """The longest pause in the recorded joint states plus the detector's persistence time."""
    joint_states = messages(recording, [recorded('/joint_states')])
    stamps = np.array([stamp_ns(m) for _, _, _, m in joint_states])
    with open(manifest.node('collision_detector').parameters_path()) as f:
        persistence = yaml.safe_load(f)['collision_detector']['ros__parameters'][
            'persistence_time']
    return np.diff(stamps).max() * 1e-9 + persistence


def test_replay_prints_stops_estimates_and_sensors_and_writes_its_bag_plot_and_pictures(runs):
    _, out, printout = runs
    assert 'Stops (s since the first input; cause):' in printout
    assert 'collision: panda_joint' in printout
    assert 'localizer (contact_localizer, from joint torques (residual) and' in printout
    assert 'F/T (ft_contact_estimator, from the base F/T sensor (' in printout
    assert (out / 'replay.png').stat().st_size > 10_000
    assert (out / 'replay' / 'metadata.yaml').is_file()
    topics = {topic for topic, _, _, _ in messages(out / 'replay')}
    assert {'/joint_states', '/tf', '/robot_description', EVENTS, RESIDUAL,
            '/contact_estimation/stop', '/contact_estimate/ft/point',
            '/sim/contact/point'} <= topics
    assert 'contact pictures: ' in printout


def _stop_up(events, t: float) -> bool:
    """Whether the stop is up at `t` after these events (each raises it but a clear)."""
    before = [cause for stamp, cause in events if stamp <= t]
    return bool(before) and before[-1] not in ('cleared', 'waiting')


def test_the_replay_stops_when_the_live_run_stopped(runs):
    """Whenever the live detector reported a collision (stamped with the joint state it came
    from), the replay's stop is up within the slack, and a collision during the push the
    replay reports within the slack too; the replay's stop clears once the joint states
    arrive and is up at the end of the push.

    Not compared: the live stale-input stops. The live watchdogs run on the wall clock and
    fire when a starved process falls behind (CPU, not data), which a replay on the stamps
    cannot see; and the live start-up clear comes when the last node has started, after the
    recording began."""
    recording, out, _ = runs
    live, replayed = _stop_events(recording, recorded(EVENTS)), _stop_events(out / 'replay')
    assert any(cause == 'collision' for _, cause in live), live
    slack = _slack(recording)
    truth = BagContacts.read(recording).contacts['truth']
    assert any(cause == 'cleared' and t < min(truth) for t, cause in replayed), replayed
    replayed_collisions = np.array([t for t, cause in replayed if cause == 'collision'])
    for t, cause in live:
        if cause != 'collision':
            continue
        assert _stop_up(replayed, t + slack), (t, live, replayed, slack)
        if min(truth) - slack <= t <= max(truth) + slack:
            assert np.abs(replayed_collisions - t).min() <= slack, (t, live, replayed, slack)
    assert _stop_up(replayed, max(truth)), replayed


def test_the_replay_computes_the_live_residual_and_estimates(runs):
    recording, out, _ = runs
    live_residual, replayed_residual = (
        {stamp_ns(m): np.array(m.effort) for _, _, _, m in messages(bag, [topic])}
        for bag, topic in ((recording, recorded(RESIDUAL)), (out / 'replay', RESIDUAL)))
    common = set(live_residual) & set(replayed_residual)
    assert len(common) > len(live_residual) / 4
    differences = [np.abs(live_residual[s] - replayed_residual[s]).max() for s in common]
    assert np.median(differences) < 0.2  # N·m; the push is 35 N, τ_ext up to ~15 N·m

    live, replayed = BagContacts.read(recording), BagContacts.read(out / 'replay')
    # F/T estimates of the same stamp on the same link: the same point and force.
    same = [contact_error(replayed.contacts['F/T'][s], live.contacts['F/T'][s])
            for s in set(live.contacts['F/T']) & set(replayed.contacts['F/T'])]
    same = [e for e in same if e.right_link]
    assert same, 'no F/T estimate of the same stamp and link'
    assert np.median([e.point for e in same]) < 0.01
    assert np.median([e.force for e in same]) < 0.1
    # The localizer estimates while the push lasts, naming the link the live one named most.
    truth = live.contacts['truth']
    during = {label: [c.link for s, c in run.contacts['localizer'].items()
                      if min(truth) <= s <= max(truth)]
              for label, run in (('live', live), ('replay', replayed))}
    assert during['replay'], 'no localizer estimate during the push'
    if during['live']:
        most = max(set(during['live']), key=during['live'].count)
        assert most in during['replay']


def _in_namespace(recording, copy, namespace: str) -> None:
    """A copy of `recording` as a suite in `namespace` records it: every topic but the
    global ones moved into the namespace (its /tf and /robot_description stay)."""
    from rosbags.highlevel import AnyReader
    from rosbags.rosbag2 import StoragePlugin, Writer

    from contact_estimation.suite_bag import typestore
    store = typestore()
    with AnyReader([recording], default_typestore=store) as reader, Writer(
            copy, version=Writer.VERSION_LATEST, storage_plugin=StoragePlugin.MCAP) as writer:
        moved = {c.id: writer.add_connection(
            c.topic if c.topic in ('/tf', '/robot_description', '/diagnostics')
            else f'/{namespace}{c.topic}', c.msgtype, typestore=store)
            for c in reader.connections}
        for connection, log_ns, raw in reader.messages():
            writer.write(moved[connection.id], log_ns, raw)


def test_a_recording_moved_into_another_namespace_replays_as_the_same_recording(runs, tmp_path):
    """Issue 39: the replay and the pictures take every topic from nodes.yaml, in the
    namespace the recording's suite ran in (found from its joint states): the session's demo
    ran in one (demo_run.NAMESPACE, replayed by `runs`), and its recording moved into another
    gives the same stops."""
    recording, out, _ = runs
    moved = tmp_path / 'left'
    _in_namespace(recording, moved, 'left')
    assert BagContacts.read(moved).contacts['truth'].keys() == BagContacts.read(
        recording).contacts['truth'].keys()
    demo_dir = recording.parent
    proc = subprocess.run(
        [sys.executable, '-m', 'contact_estimation', 'replay', str(moved),
         '--config', str(demo_dir / THRESHOLDS_FILE),
         '--config', str(demo_dir / 'recording_parameters.yaml'),
         '--out', str(tmp_path / 'out')],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
        timeout=600)
    assert proc.returncode == 0, proc.stdout
    assert _stop_events(tmp_path / 'out' / 'replay') == _stop_events(out / 'replay')
    assert 'contact pictures: ' in proc.stdout


def test_a_users_bag_with_joint_states_only_is_replayed_sample_by_sample(tmp_path):
    """A sqlite3 bag of joint states alone, as a real arm's driver records them (here the
    simulated arm's driver, 2 s at 1 kHz): every sample goes through the chain, and the
    summary says which sensors were missing."""
    from contact_estimation.suite_bag import write_bag
    from contact_estimation.core.robot.robot_model import RobotModel
    from contact_estimation.core.sim.harness import record_on_simulator
    from contact_estimation.core.identification.trajectory import make_trajectory

    robot = RobotModel.load('panda')
    lower, upper = robot.position_limits
    middle = (lower + upper) / 2
    trajectory = make_trajectory(robot, {'type': 'waypoints', 'durations': [2.0],
                                         'waypoints': np.vstack([middle, middle + 0.2])})
    recording = record_on_simulator(robot, trajectory)
    bag = tmp_path / 'arm'
    write_bag(bag, recording, storage='sqlite3')
    proc = subprocess.run(
        [sys.executable, '-m', 'contact_estimation', 'replay', str(bag), '--out',
         str(tmp_path / 'out')],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
        timeout=600)
    assert proc.returncode == 0, proc.stdout
    assert f'/joint_states {len(recording.t)}' in proc.stdout
    assert 'no lidar cloud' in proc.stdout and '(none in the bag)' in proc.stdout
    assert 'no ground truth /sim/contact/* in the recording' in proc.stdout
    counts = {}
    for topic, _, _, _ in messages(tmp_path / 'out' / 'replay'):
        counts[topic] = counts.get(topic, 0) + 1
    # Every sample the listener passes on gives one residual (the first few fill its
    # velocity filter's window).
    assert len(recording.t) - 25 <= counts[RESIDUAL] <= len(recording.t)
    assert counts['/joint_states'] == len(recording.t)
