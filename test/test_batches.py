"""A backlog decided in one batch gives exactly what the samples give one by one (issue 35):
the chain built as `contact-estimation replay` builds it, fed the same joint states once a
message at a time (the replay) and once in batches of 1-40 (a chain that woke late), must
publish the same stops, on the same samples, with the same time scaling."""
import numpy as np
import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from contact_estimation import manifest
from contact_estimation.commands import replay
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.ros.conversions import seconds_to_stamp

RATE = 1000.0
SECONDS = 3.0
CLOCK_STAMPED = {'cleared', 'stale_input', 'waiting'}
WATCHED = {'/' + manifest.node('collision_detector').topic(key)
           for key in ('stop', 'time_scaling', 'events')}


def _recording(velocity: bool) -> list:
    """(stamp ns, raw joint state) of a Panda standing still, held against gravity, pushed
    on joint 4 with 20 N·m for 0.2 s of every second (the stop clears 0.1 s after each);
    without `velocity`, the listener estimates q̇ (and hands its q̈ on)."""
    robot = RobotModel.load('panda')
    q = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8])
    still = np.zeros(robot.n)
    tau = robot.rnea(q, still, still)
    rng = np.random.default_rng(5)
    start = 1_700_000_000.0
    recorded = []
    for i in range(int(SECONDS * RATE)):
        t = start + i / RATE + rng.uniform(0.0, 2e-4)  # a real driver's jitter
        effort = tau + rng.normal(0.0, 0.05, robot.n)
        if 0.3 <= (i / RATE) % 1.0 < 0.5:
            effort[3] -= 20.0
        msg = JointState(name=list(robot.joint_names),
                         position=q.tolist() if velocity else  # encoder noise: q̈ ≠ 0
                         (q + rng.normal(0.0, 1e-4, robot.n)).tolist(),
                         velocity=still.tolist() if velocity else [], effort=effort.tolist())
        msg.header.stamp = seconds_to_stamp(t)
        recorded.append((int(round(t * 1e9)), serialize_message(msg)))
    return recorded


@pytest.fixture(scope='module')
def recording():
    return _recording(velocity=True)


def _published(context, recording, batch_sizes, detector: str = '') -> list:
    """What the detector published, fed `recording` in batches of the given sizes (None:
    one message per step, as the replay feeds it); `detector`: more of its parameters."""
    seen = []
    run = replay.build(context, [_parameters(detector)],
                       lambda topic, _, msg: seen.append((topic, _content(msg)))
                       if topic in WATCHED else None)
    try:
        listener = next(n for n in run.nodes if n.get_name() == 'joint_state_listener')
        k = 0
        while k < len(recording):
            size = 1 if batch_sizes is None else int(batch_sizes[k % len(batch_sizes)])
            batch = recording[k:k + size]
            run.step(batch[-1][0])
            listener.take_waiting([raw for _, raw in batch])
            k += size
    finally:
        run.close()
    return seen


def _content(msg):
    """A stop or f_S value, or an event: stamped by its sample, or by the node's clock when
    it is no sample's (the stop cleared as input arrived, stale input), which a batch may
    read later than the replay does: then without its stamp."""
    if not hasattr(msg, 'status'):
        return msg.data
    events = [(s.message, tuple(sorted((v.key, v.value) for v in s.values)))
              for s in msg.status]
    if any(dict(values)['event'] in CLOCK_STAMPED for _, values in events):
        return [message for message, _ in events]
    return msg.header.stamp.sec, msg.header.stamp.nanosec, events


def _changes(published: list) -> dict[str, list]:
    """Per topic, its values with repeats left out (the heartbeat repeats f_S on a timer,
    which fires once per step: a batch is one step)."""
    changes: dict[str, list] = {}
    for topic, content in published:
        values = changes.setdefault(topic, [])
        if not values or values[-1] != content:
            values.append(content)
    return changes


def _parameters(more: str = '') -> str:
    import os
    import tempfile
    path = os.path.join(tempfile.mkdtemp(), 'detector.yaml')
    with open(path, 'w', encoding='utf-8') as f:
        f.write('collision_detector:\n  ros__parameters:\n    hold_time: 0.1\n    max_lag: 0.1\n'
                '    time_scaling:\n      resume_delay: 0.1\n      recovery_rate: 5.0\n' + more)
    return path


def _from_first_collision(published: list) -> list:
    """What was published from the first collision event on. Before it, f_S holds while
    the input is awaited, from the detector's watchdog timer, which the replay fires
    between samples and a batch before its samples: when the hold ends is the clock's, not
    the samples'."""
    first = next(k for k, (topic, content) in enumerate(published)
                 if topic.endswith('/collision_events') and len(content) == 3
                 and dict(content[2][0][1])['event'] == 'collision')
    return published[first:]


@pytest.mark.parametrize('velocity', [True, False], ids=['q̇ given', 'q̇ and q̈ fitted'])
def test_a_batch_gives_the_samples_decisions_one_by_one(context, recording, velocity):
    """With q̇ from the driver, and without (the listener fits q̇ and hands its q̈ on to the
    detector's acceleration term, issue 35)."""
    detector = '' if velocity else '    acceleration_gain: [0.5]\n'
    recorded = recording if velocity else _recording(velocity=False)
    one_by_one = _published(context, recorded, None, detector)
    sizes = np.random.default_rng(7).integers(1, 41, size=97)
    batched = _published(context, recorded, sizes, detector)
    stop = '/' + manifest.node('collision_detector').topic('stop')
    assert _changes(one_by_one)[stop].count(True) >= 3, \
        'the pushes did not stop the arm: nothing compared'
    assert _changes(batched)[stop] == _changes(one_by_one)[stop]
    live, replayed = (_changes(_from_first_collision(p)) for p in (batched, one_by_one))
    scaling = '/' + manifest.node('collision_detector').topic('time_scaling')
    # f_S runs on the node's clock: a batch's times are its clock less the stamps'
    # differences, equal to the replay's to the rounding of 1.7e9 s in a double (~1e-6 s).
    assert np.allclose(live.pop(scaling), replayed.pop(scaling), rtol=0.0, atol=1e-5)
    assert live == replayed
