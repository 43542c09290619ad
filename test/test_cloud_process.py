"""The cloud worker process (ros/cloud_process.py, issue 35): it finds what a replay finds in
the node's thread; a newer cloud replaces the one waiting; a worker killed or hung is
reported and replaced; closing, or the node's process ending by SIGINT or SIGKILL, leaves no
worker; beside a real-time thread it starts at normal scheduling and works just below it."""
import os
import signal
import subprocess
import threading
import time
from dataclasses import replace

import numpy as np
import pytest
from sensor_msgs.msg import PointField

from contact_estimation.core.contact.lidar_fusion import CloudConfig
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.ros.cloud_process import CloudJob, CloudProcess, CloudRecipe
from contact_estimation.ros.conversions import CloudLayout, seconds_to_stamp, xyz_to_cloud
from contact_estimation.ros.sensor_frames import IDENTITY
from contact_estimation.ros.testing import node_process

Q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
SPACING = {'sphere_spacing': 0.05}
RECIPE = CloudRecipe('panda', '', '', SPACING)
TIMEOUT = 60.0  # s: a worker starts in seconds, more on a loaded machine


@pytest.fixture(scope='module')
def surfaces(robot):
    return LinkSurfaces(robot, **SPACING)


class Reports:
    """What a CloudProcess reports (kind, detail) and logs."""

    def __init__(self):
        self.faults: list[tuple[str, str]] = []
        self.lines: list[str] = []

    def report(self, kind: str, detail: str) -> None:
        self.faults.append((kind, detail))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.faults]


@pytest.fixture
def worker(surfaces):
    """A CloudProcess in real time, and what it reports; closed after the test."""
    reports = Reports()
    clouds = CloudProcess(RECIPE, surfaces, 'test', True, reports.report, reports.lines.append)
    yield clouds, reports
    clouds.close()


def cloud(robot, t: float, points: np.ndarray | None = None):
    """A job and its bytes: a 4 cm cube 25 cm beside the hand and the arm's own links."""
    if points is None:
        rotation, origin = robot.link_pose(Q, 'panda_hand')
        grid = np.stack(np.meshgrid(*[np.arange(-2, 3) * 0.01] * 3), -1).reshape(-1, 3)
        own = np.vstack([robot.link_pose(Q, link)[1] for link in ('panda_link4', 'panda_link6')])
        points = np.vstack([origin + [0.25, 0.0, 0.0] + grid, own])
    msg = xyz_to_cloud(seconds_to_stamp(t), 'panda_link0', points)
    return CloudJob(t, Q, CloudLayout.of(msg), IDENTITY, CloudConfig(), 100), msg.data


def wait_for(clouds: CloudProcess, condition, results: list | None = None) -> bool:
    """Take the worker's results (into `results`) until `condition()`; False after TIMEOUT."""
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end:
        result = clouds.take()
        if result is not None and results is not None:
            results.append(result)
        if condition():
            return True
        time.sleep(0.005)
    return False


def ready(clouds: CloudProcess) -> bool:
    return clouds.status().startswith('ready')


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


def test_the_worker_finds_what_a_replay_finds_in_the_nodes_thread(worker, surfaces, robot):
    clouds, reports = worker
    in_node = CloudProcess(RECIPE, surfaces, 'test', False, reports.report, reports.lines.append)
    job, data = cloud(robot, 1.0)
    results = []
    clouds.submit(job, data)
    assert wait_for(clouds, lambda: results, results), clouds.status()
    assert clouds.pid != os.getpid() and alive(clouds.pid)
    in_node.submit(job, data)
    replayed = in_node.take()
    assert replayed is not None, 'a replay has the result at the next take'
    live, replayed = results[0].obstacles, replayed.obstacles
    assert results[0].t == 1.0 and len(live.clusters) == 1, 'the cube, not the arm'
    for a, b in ((live.points, replayed.points), (live.labels, replayed.labels),
                 (live.proximity.distance, replayed.proximity.distance),
                 (live.proximity.obstacle_point, replayed.proximity.obstacle_point)):
        np.testing.assert_array_equal(a, b)
    assert results[0].cpu > 0.0 and not reports.faults


def test_a_cloud_without_xyz_comes_back_rejected_with_its_kind(worker, robot):
    clouds, _ = worker
    job, data = cloud(robot, 2.0)
    fields = tuple((name, 4 * i, PointField.FLOAT32) for i, name in enumerate('abc'))
    job = replace(job, layout=replace(job.layout, fields=fields))
    results = []
    clouds.submit(job, data)
    assert wait_for(clouds, lambda: results, results)
    assert results[0].obstacles is None and results[0].rejected.kind == 'bad_cloud'
    assert 'needs x, y, z' in str(results[0].rejected)


def test_a_newer_cloud_replaces_the_one_waiting_and_is_counted(worker, robot):
    clouds, _ = worker
    assert wait_for(clouds, lambda: ready(clouds)), clouds.status()
    for t in (1.0, 2.0, 3.0):  # the first goes to the worker; the second waits, the third wins
        clouds.submit(*cloud(robot, t))
    results = []
    assert wait_for(clouds, lambda: any(r.t == 3.0 for r in results), results)
    assert [r.t for r in results] == [1.0, 3.0] and clouds.dropped == 1


def test_a_killed_worker_is_reported_and_replaced(worker, robot):
    clouds, reports = worker
    assert wait_for(clouds, lambda: ready(clouds)), clouds.status()
    first = clouds.pid
    os.kill(first, signal.SIGKILL)
    assert wait_for(clouds, lambda: 'cloud_worker_died' in reports.kinds())
    assert clouds.fault and 'exited' in clouds.fault and clouds.restarts == 1
    assert wait_for(clouds, lambda: ready(clouds)), clouds.status()
    assert clouds.pid != first and not clouds.fault and not alive(first)
    results = []
    clouds.submit(*cloud(robot, 4.0))
    assert wait_for(clouds, lambda: results, results)
    assert results[0].obstacles is not None


def test_a_hung_worker_is_killed_reported_and_replaced(worker, robot):
    clouds, reports = worker
    assert wait_for(clouds, lambda: ready(clouds)), clouds.status()
    first = clouds.pid
    os.kill(first, signal.SIGSTOP)  # handed a cloud it never answers
    clouds.submit(*cloud(robot, 5.0))
    assert wait_for(clouds, lambda: 'cloud_worker_hung' in reports.kinds())
    assert 'made no progress' in clouds.fault
    assert wait_for(clouds, lambda: ready(clouds)), clouds.status()
    assert clouds.pid != first and not alive(first)


def test_close_leaves_no_worker_even_while_it_starts(surfaces):
    reports = Reports()
    for wait in (False, True):
        clouds = CloudProcess(RECIPE, surfaces, 'test', True, reports.report,
                              reports.lines.append)
        if wait:
            assert wait_for(clouds, lambda: ready(clouds)), clouds.status()
        pid = clouds.pid
        clouds.close()
        assert not alive(pid)
    assert not reports.faults


def test_beside_a_real_time_thread_the_worker_starts_at_normal_scheduling_then_just_below(
        surfaces):
    """The node's thread at SCHED_FIFO 2 (as `up --priority` runs a stop's process): the
    worker it starts imports at normal scheduling and, once ready, runs at SCHED_FIFO 1; a
    thread the node starts afterwards keeps the node's scheduling."""
    found = {}

    def real_time():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(2))
        except OSError as err:
            found['refused'] = err
            return
        clouds = CloudProcess(RECIPE, surfaces, 'test', True, Reports().report, print)
        try:
            found['starting'] = os.sched_getscheduler(clouds.pid)
            later = threading.Thread(  # as the executor's threads start after the nodes
                target=lambda: found.update(later=os.sched_getscheduler(0)))
            later.start()
            later.join()
            if wait_for(clouds, lambda: ready(clouds)):
                found['ready'] = (os.sched_getscheduler(clouds.pid),
                                  os.sched_getparam(clouds.pid).sched_priority)
        finally:
            clouds.close()

    thread = threading.Thread(target=real_time)
    thread.start()
    thread.join()
    if 'refused' in found:
        pytest.skip(f'SCHED_FIFO not allowed here: {found["refused"]}')
    assert found == {'starting': os.SCHED_OTHER, 'later': os.SCHED_FIFO,
                     'ready': (os.SCHED_FIFO, 1)}


def _worker_of(node: subprocess.Popen) -> int:
    """The cloud worker among the node process's children (waited for)."""
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end and node.poll() is None:
        for task in os.listdir(f'/proc/{node.pid}/task'):
            with open(f'/proc/{node.pid}/task/{task}/children', encoding='ascii') as f:
                for child in f.read().split():
                    with open(f'/proc/{child}/cmdline', 'rb') as cmdline:
                        if b'contact_estimation.ros.cloud_process' in cmdline.read():
                            return int(child)
        time.sleep(0.05)
    raise AssertionError(f'no cloud worker under the node (exit code {node.poll()})')


@pytest.mark.parametrize('how', [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_the_node_process_ending_leaves_no_worker(how):
    """Ctrl-C or SIGTERM: the node ends it (destroy_node); SIGKILL: the kernel does
    (PR_SET_PDEATHSIG)."""
    with node_process('proximity_monitor') as node:
        worker = _worker_of(node)
        node.send_signal(how)
        node.wait(TIMEOUT)
        end = time.monotonic() + TIMEOUT
        while alive(worker) and time.monotonic() < end:
            time.sleep(0.05)
        assert not alive(worker)
