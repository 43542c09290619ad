"""sim_cobot: a MuJoCo simulated cobot standing in for the arm (core/sim/).

Publishes what a torque-sensing cobot gives: joint states (effort = joint torque with
friction and noise), the wrench on a 6-axis F/T sensor under joint 1 (force and torque at the
base origin, base frame), and a lidar scan of the cell (base frame, float32 x y z). Ground
truth goes on its own topics: per contacted link, the contact point and force (link frame,
only while a contact exists) and, with every joint state, the true τ_ext as JointState effort.
The arm follows the trajectory of the parameters or of the scenario file, played back at the
time scaling f_S it receives (seed 003 eq. 8), combined with the proximity monitor's speed
scale s when one is published (core/chain/time_scaling.combined_scaling: min(f_S, s), and a yield
f_S < 0 slowed to f_S·s). Each plays at 1 until its first value arrives (at 0 with
`lockstep.speed_inputs`: the arm never moves before the suite's reaction signals have
spoken); from then on, no value for `time_scaling.timeout` means 0 (hold) until one arrives
again: the node that sends it may be dead, and a controller must not go on at the last speed
it was told (docs/collision_events.md says the same to real controllers).

It can play a real industrial arm's driver (`driver.*`, core/sim/driver.py): effort from
motor current, samples at irregular periods, a few out of order; and carry a payload
(`payload.*`). The defaults are a joint torque sensor at a fixed rate and no payload.

A scenario's people (core/sim/person.py) are solid where they reach in (their compliant body
part) and tracked: their skeleton (COCO-17 keypoints as a PoseArray in the base frame, as
the proximity monitor reads it) goes out at `skeleton_rate`, stamped on the simulated clock,
one array per person; a scenario without people publishes none.

Pace: a timer steps the physics as many steps as wall time requires, publishing the steps the
driver samples (every `rate / publish_rate`-th without jitter); stamps are start time +
simulated time of the sampled step. When it falls more than `max_catch_up` behind:
- with `publish_clock` (the demo, the tests and the benchmarks), it is the graph's clock:
  /clock carries the simulated time reached before each CLOCK_PERIOD (5 ms) of steps, every
  node runs with use_sim_time, and the simulation just runs slower than real time, with no
  gap in the stamps: the whole graph slows together (the f_S timeout is on simulated time
  too). The clock ticks every CLOCK_PERIOD however long a timer call's batch of steps is (up
  to `max_catch_up` once behind): a node judges a sample's stamp against the clock it last
  received, so a clock that stepped a whole batch at once was a batch behind the newest
  samples and, once the next batch's clock came before all of them were taken, a batch
  ahead of the oldest: a spread of two batches, 100 ms at 50 ms batches, which the detector
  took for a paused input (`stale_input`) on a loaded machine (issue 37). It also
  starts only once the listener subscribes and runs at most `lockstep.lead` ahead of the
  samples the listener has taken (its joint-state output, core/sim/realtime.Lockstep): a
  suite that starts late or falls behind slows the simulation instead of losing samples;
- without (as a stand-in for a real arm, on the wall clock), it skips the lost time (a gap in
  the stamps: a real driver's hiccup).
Either is reported on /diagnostics (`fell_behind`).
"""
from __future__ import annotations

import array
import sys
import time

import numpy as np
from geometry_msgs.msg import Point, PointStamped, Pose, PoseArray, WrenchStamped
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Float64

from contact_estimation import manifest
from contact_estimation.core.robot.payload import Payload
from contact_estimation.core.sim.cobot import SimulatedCobot, SimulationError
from contact_estimation.core.sim.config import LidarConfig, SimConfig
from contact_estimation.core.sim.driver import DriverStream, DriverTiming, MotorCurrent
from contact_estimation.core.sim.realtime import Lockstep, ScalingTimeout
from contact_estimation.core.sim.scenario import Scenario, ScenarioError
from contact_estimation.core.chain.time_scaling import combined_scaling
from contact_estimation.core.identification.trajectory import (TRAJECTORY_TYPES,
                                                               SmoothRandomSettings,
                                                               make_trajectory)
from contact_estimation.ros.contact_messages import contact_messages
from contact_estimation.ros.conversions import (seconds_to_stamp, stamp_to_seconds,
                                                wrench_stamped, xyz_to_cloud)
from contact_estimation.ros.diagnostics import ERROR, OK, WARN
from contact_estimation.ros.node_main import run
from contact_estimation.ros.params import ROBOT, Parameter, ParameterTable, rows
from contact_estimation.ros.qos import DRIVER_QOS, PIPELINE_QOS
from contact_estimation.ros.suite_node import SuiteNode

NAME = 'sim_cobot'

LOAD_PERIOD = 1.0     # s between CPU load figures on /diagnostics
# s of simulated time between two /clock messages with `publish_clock`, however many steps one
# timer call takes: the clock is never further than this behind the newest sample (module
# docstring, "Pace").
CLOCK_PERIOD = 0.005
EFFORT_SOURCES = ('joint_torque', 'motor_current')  # driver.effort


PARAMETERS = ROBOT + ParameterTable(
    Parameter('rate', 'physics rate (Hz): one MuJoCo step every 1/rate s',
              1.0 / SimConfig.timestep, (100.0, 5000.0), read_only=True),
    Parameter('publish_rate', 'joint state, F/T and ground-truth rate (Hz); divides rate',
              1000.0, (1.0, 5000.0), read_only=True),
    Parameter('timer_period', 'wall time (s) between stepping calls; each steps and publishes '
              'what is due (a 1 kHz rclpy timer costs more than the physics)', 0.005,
              (0.0005, 0.1), read_only=True),
    Parameter('max_catch_up', 'most wall time (s) one timer call catches up; more is skipped '
              'and reported', 0.05, (0.001, 1.0), read_only=True),
    Parameter('publish_clock', 'publish /clock (simulated time) and never skip time: run every '
              'other node with use_sim_time, and a machine that cannot keep up slows the '
              'whole graph together', False, read_only=True),
    Parameter('lockstep.lead', 'with publish_clock: most simulated time (s) the simulation '
              "runs ahead of the listener's output (well within the suite's input timeouts, "
              '>= 0.05 s); 0 = never wait', 0.02, (0.0, 10.0), read_only=True),
    Parameter('lockstep.timeout', 'wall time (s) the simulation waits for the listener before '
              'it goes on without it', 10.0, (0.01, 60.0), read_only=True),
    Parameter('lockstep.speed_inputs', 'with lockstep: the simulation starts only once f_S and '
              'the proximity speed scale have publishers too, and the arm holds until each has '
              'sent its first value (a suite process that starts late would otherwise stop an '
              'arm already moving, with a jolt the detector sees; up --sim and the demo set it)',
              False, read_only=True),
    Parameter('time_scaling.timeout', 'once an f_S (or a proximity speed scale) has arrived, '
              'none for this long means hold (0), s (both are repeated at 20 Hz: 3 periods)',
              0.15, (0.005, 10.0), read_only=True),
    Parameter('scenario', 'scenario YAML (forces, obstacles, trajectory); relative paths from '
              "the package share directory; '' = none", '', read_only=True),
    Parameter('trajectory.type', 'the trajectory (a scenario trajectory wins)',
              TRAJECTORY_TYPES[0], choices=TRAJECTORY_TYPES, read_only=True),
    # No arm's joint turns beyond ±2π rad (a UR's ±360°) nor slides ±10 m; a segment takes
    # more than 0 s (WaypointTrajectory) and not hours.
    Parameter('trajectory.waypoints', 'waypoints: m × n joint positions (rad), row after row',
              [0.0], (-10.0, 10.0), read_only=True),
    Parameter('trajectory.durations', 'waypoints: m − 1 segment durations (s)', [1.0],
              (0.001, 3600.0), read_only=True),
    Parameter('driver.effort', 'a joint torque sensor (τ + noise.effort) or the motor current '
              '(τ = G_m k_m i_m, seed 001 eqs. 1-2)', EFFORT_SOURCES[0],
              choices=EFFORT_SOURCES, read_only=True),
    Parameter('lidar.rate', 'scan rate (Hz); divides rate', 10.0, (0.1, 100.0),
              read_only=True),
    Parameter('skeleton_rate', "the scenario's people's tracked skeletons per second (Hz); "
              'divides rate', 50.0, (1.0, 1000.0), read_only=True),
    renamed={'time_scaling_timeout': 'time_scaling.timeout'},
) + rows(SmoothRandomSettings, 'trajectory.', read_only=True) + rows(
    SimConfig, read_only=True) + rows(MotorCurrent, 'driver.', read_only=True) + rows(
    DriverTiming, 'driver.', read_only=True) + rows(Payload, 'payload.', read_only=True) + rows(
    LidarConfig, 'lidar.', read_only=True)


class SimCobotNode(SuiteNode):
    PARAMETERS = PARAMETERS

    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        with self.starting():
            self.sim = self._make_simulation()
            self._driver = self._make_driver()
            self._scaling_watch = {key: ScalingTimeout(self.value('time_scaling.timeout'))
                                   for key in SPEED_INPUTS}
        rate = self.value('rate')
        self._lidar_every = round(rate / self.value('lidar.rate'))
        self._skeleton_every = (round(rate / self.value('skeleton_rate'))
                                if self.sim.scenario.people else 0)
        self._max_catch_up = max(1, round(self.value('max_catch_up') * rate))
        self._clock_every = max(1, round(CLOCK_PERIOD * rate))  # steps between /clock ticks
        self._base_frame = self.robot.base_link
        # Reused messages: the array.array fields skip rclpy's per-element checks.
        self._state_msg = JointState(name=list(self.robot.joint_names))
        self._truth_msg = JointState(name=list(self.robot.joint_names))
        for msg in (self._state_msg, self._truth_msg):
            msg.header.frame_id = self._base_frame
        # A sample the driver may hold back needs a message of its own.
        self._reorders = self._driver.timing.reorder_probability > 0

        self._pub = {key: self.publisher(key, kind, PIPELINE_QOS if key == 'lidar_points'
                                         else DRIVER_QOS) for key, kind in _MESSAGES.items()}
        if self._skeleton_every:
            self._pub['skeleton'] = self.publisher('skeleton', PoseArray)
        self._clock_pub = self.publisher('clock', Clock) if self.value('publish_clock') else None
        self._lockstep = None
        if self._clock_pub and self.value('lockstep.lead') > 0.0:
            self._lockstep = Lockstep(self.value('lockstep.lead'), self.value('lockstep.timeout'))
            self.subscribe('lockstep', JointState, self._on_taken)
        self._await_speed_inputs = bool(self._lockstep and self.value('lockstep.speed_inputs'))
        # The latest f_S and s; until the first arrives, 1, or 0 when the arm awaits them.
        self._scaling = dict.fromkeys(SPEED_INPUTS, 0.0 if self._await_speed_inputs else 1.0)
        self.sim.set_time_scaling(combined_scaling(*self._scaling.values()))
        for key in SPEED_INPUTS:
            self.subscribe(key, Float64, lambda msg, key=key: self._on_scaling(key, msg))
        self._steps = 0
        self._start: float | None = None  # monotonic time of step 0, set by the first call
        self._stamp_offset = 0.0           # ROS time of simulated time 0
        self.problems.set_status(OK, 'simulating')
        self._timer = self.create_timer(self.value('timer_period'), self._advance)
        self.get_logger().info(
            f'{self.robot.name or "robot"} at {rate:g} Hz, joint states at '
            f'{self.value("publish_rate"):g} Hz ± {self.value("driver.period_jitter") * 1e3:g} '
            f'ms, effort from {self.value("driver.effort").replace("_", " ")}, a '
            f'{self.sim.payload.mass:g} kg payload, lidar at {rate / self._lidar_every:g} Hz; '
            f'{len(self.sim.scenario.forces)} scripted forces, '
            f'{len(self.sim.scenario.obstacles)} obstacles, {len(self.sim.scenario.people)} '
            'people')

    # ------------------------------------------------------------------ parameters
    def _make_simulation(self) -> SimulatedCobot:
        """The simulation of the parameters: the core configs built from their rows
        (ValueError naming the parameter on a bad value), a scenario's settings winning."""
        v = self.value
        rate = v('rate')
        jitters = v('driver.period_jitter') > 0
        for name in ('lidar.rate', 'skeleton_rate') + (() if jitters else ('publish_rate',)):
            ratio = rate / v(name)
            if ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
                raise ValueError(f'{name} = {v(name):g} Hz must divide rate = {rate:g} Hz')
        scenario = Scenario()
        path = v('scenario')
        if path:
            resolved = path if path.startswith('/') else manifest.share_path(path)
            try:
                scenario = Scenario.load(resolved, self.robot)
            except ScenarioError as err:
                raise ValueError(f'scenario {err}') from err
        spec = scenario.trajectory or self._trajectory_spec()
        try:
            trajectory = make_trajectory(self.robot, spec)
        except (KeyError, TypeError) as err:
            raise ValueError(f'bad trajectory parameters: {err}') from err
        values = self.values()
        motor_current = (None if v('driver.effort') == 'joint_torque'  # its row's choices
                         else PARAMETERS.build(MotorCurrent, values))
        config = SimConfig(timestep=1.0 / rate, motor_current=motor_current,
                           payload=PARAMETERS.build(Payload, values),
                           lidar=PARAMETERS.build(LidarConfig, values),
                           **PARAMETERS.fields(SimConfig, values))
        return SimulatedCobot(self.robot, trajectory, scenario, config)

    def _make_driver(self) -> DriverStream:
        """When joint states are sampled and in which order they leave (core/sim/driver.py)."""
        timing = PARAMETERS.build(DriverTiming, self.values())
        return DriverStream(1.0 / self.value('publish_rate'), self.sim.dt, timing,
                            seed=self.value('noise.seed'))

    def _trajectory_spec(self) -> dict:
        kind = self.value('trajectory.type')
        if kind == 'waypoints':
            waypoints = np.asarray(self.value('trajectory.waypoints'), dtype=float)
            if waypoints.size % self.robot.n:
                raise ValueError(f'trajectory.waypoints has {waypoints.size} values, not a '
                                 f'multiple of the {self.robot.n} joints')
            return {'type': kind, 'waypoints': waypoints.reshape(-1, self.robot.n),
                    'durations': list(self.value('trajectory.durations'))}
        if kind == 'sweeps':  # the default sweep plan; a scenario file sets the rest
            return {'type': kind, 'seed': self.value('trajectory.seed')}
        options = ('seed', 'speed_scale', 'amplitude', 'margin')
        return {'type': kind, **{k: self.value(f'trajectory.{k}') for k in options}}

    # ------------------------------------------------------------------- messages
    def _on_scaling(self, key: str, msg: Float64) -> None:
        """f_S (any finite value) or the proximity speed scale (in [0, 1])."""
        proximity = key == 'proximity_speed_scale'
        if not (0.0 <= msg.data <= 1.0 if proximity else np.isfinite(msg.data)):
            self.problems.report(f'bad_{key}', f'{key} {msg.data} ignored: must be '
                                 + ('in [0, 1]' if proximity else 'finite'))
            return
        self._scaling[key] = msg.data
        self._scaling_watch[key].received(self._now())
        self.sim.set_time_scaling(combined_scaling(*self._scaling.values()))

    def _check_time_scaling(self, now: float) -> None:
        """Hold (0) for a stream that, once started, stopped for the timeout."""
        for key, watch in self._scaling_watch.items():
            silence = watch.check(now)
            if silence is not None:
                self._scaling[key] = 0.0
                self.sim.set_time_scaling(combined_scaling(*self._scaling.values()))
                self.problems.report(f'{key}_timeout', f'no {key.replace("_", " ")} for '
                                     f'{silence * 1e3:.0f} ms: holding')

    # ------------------------------------------------------------------- stepping
    def _suite_listening(self) -> bool:
        """The listener subscribes to the joint states and publishes what it takes."""
        return (self._pub['joint_states'].get_subscription_count() > 0
                and self.count_publishers(self.spec.topic('lockstep')) > 0
                and (not self._await_speed_inputs or all(
                    self.count_publishers(self.spec.topic(key)) > 0 for key in SPEED_INPUTS)))

    def _on_taken(self, msg: JointState) -> None:
        """The listener took a sample: the simulation may run `lockstep.lead` beyond it."""
        self._lockstep.taken(stamp_to_seconds(msg.header.stamp) - self._stamp_offset,
                             self.steady())

    def _now(self) -> float:
        """Now on the clock the f_S timeout runs on: the simulated time when this node is
        the graph's clock, else the steady clock (SuiteNode.steady)."""
        return self.sim.time if self._clock_pub else self.steady()

    def _advance(self) -> None:
        """Step the physics up to the wall clock (at most `max_catch_up` at once)."""
        now = self.steady()
        if self._start is None and self._lockstep is not None and not self._suite_listening():
            return  # the graph's clock waits for the suite: no sample is sent into the void
        self._check_time_scaling(self._now())
        if self._start is None:
            self._start, self._load_mark = now, (now, time.process_time(), 0)
            self._stamp_offset = self.stamp_clock()
            if self._lockstep is not None:
                self._lockstep.start(self.sim.time, now)
        due = int((now - self._start) / self.sim.dt) - self._steps
        if due > self._max_catch_up:
            lost = due - self._max_catch_up
            self._start += lost * self.sim.dt  # the wall time it could not simulate
            due = self._max_catch_up
            if self._clock_pub:
                self.problems.report('fell_behind', f'simulation slower than the wall clock '
                                     f'by {lost * self.sim.dt * 1e3:.0f} ms: the graph follows '
                                     'on simulated time')
            else:
                self._stamp_offset += lost * self.sim.dt
                self.problems.report('fell_behind', f'simulation fell behind the wall clock: '
                                     f'skipped {lost * self.sim.dt * 1e3:.0f} ms')
        if self._lockstep is not None:
            due = self._lockstep.steps(due, self.sim.time, self.sim.dt, now)
        self._publish_clock()
        try:
            for done in range(due):
                if done and done % self._clock_every == 0:
                    self._publish_clock()
                self.sim.step()
                self._publish(self._steps)
                self._steps += 1
        except SimulationError as err:
            self._timer.cancel()
            self.problems.report('diverged', str(err), ERROR)
            self.problems.set_status(ERROR, f'simulation stopped: {err}')
            return
        self._report_load(now)

    def _publish_clock(self) -> None:
        """With `publish_clock`: /clock at the time reached, before the samples after it."""
        if self._clock_pub:
            self._clock_pub.publish(Clock(clock=seconds_to_stamp(self._stamp_offset
                                                                 + self.sim.time)))

    def _publish(self, step: int) -> None:
        """The readings of physics step number `step` that are due at their rates."""
        sim = self.sim
        lidar_due = step % self._lidar_every == 0
        state_due = self._driver.due(step)
        skeleton_due = self._skeleton_every and step % self._skeleton_every == 0
        if not (lidar_due or state_due or skeleton_due):
            return
        stamp = seconds_to_stamp(self._stamp_offset + sim.time)
        if skeleton_due:
            self._publish_skeletons(stamp)
        if lidar_due:
            self._pub['lidar_points'].publish(
                xyz_to_cloud(stamp, self._base_frame, sim.lidar_points()))
        if not state_due:
            return
        q, v, tau = sim.joint_state()
        msg = self._state_msg
        if self._reorders:
            msg = JointState(name=msg.name)
            msg.header.frame_id = self._base_frame
        msg.header.stamp = stamp
        msg.position, msg.velocity, msg.effort = _doubles(q), _doubles(v), _doubles(tau)
        for leaving in self._driver.release(msg):
            self._pub['joint_states'].publish(leaving)
        force, torque = sim.ft_wrench()
        self._pub['ft_wrench'].publish(wrench_stamped(stamp, self._base_frame, force, torque))
        self._truth_msg.header.stamp = stamp
        self._truth_msg.effort = _doubles(sim.true_external_torque())
        self._pub['true_contact_torque'].publish(self._truth_msg)
        for contact in sim.true_contacts():
            point, wrench, _ = contact_messages(contact, stamp)
            self._pub['true_contact_point'].publish(point)
            self._pub['true_contact_wrench'].publish(wrench)

    def _publish_skeletons(self, stamp) -> None:
        """Each person's keypoints, as a tracker would send them (module docstring)."""
        for keypoints in self.sim.people_keypoints():
            msg = PoseArray(poses=[Pose(position=Point(x=x, y=y, z=z))
                                   for x, y, z in keypoints.tolist()])
            msg.header.stamp, msg.header.frame_id = stamp, self._base_frame
            self._pub['skeleton'].publish(msg)

    def _report_load(self, now: float) -> None:
        """CPU share of this process and simulated time on /diagnostics; WARN while behind."""
        wall, cpu, behind_before = self._load_mark
        if now - wall < LOAD_PERIOD:
            return
        cpu_now, behind = time.process_time(), self.problems.counts['fell_behind']
        self._load_mark = (now, cpu_now, behind)
        self.problems.values['cpu_load'] = f'{(cpu_now - cpu) / (now - wall):.3f}'
        self.problems.values['simulated_time'] = f'{self.sim.time:.3f}'
        # The stamp of simulated time 0: a scenario's times are simulated seconds from it.
        self.problems.values['clock_start'] = f'{self._stamp_offset:.6f}'
        self.problems.values['path_time'] = f'{self.sim.scaler.path_time:.3f}'
        silent = [key for key, watch in self._scaling_watch.items() if watch.holding]
        if silent:
            self.problems.set_status(WARN, f'holding: no {" or ".join(silent)} for more than '
                                     f'{self.value("time_scaling.timeout") * 1e3:.0f} ms')
        elif behind > behind_before:
            self.problems.set_status(WARN, 'falling behind the wall clock')
        else:
            self.problems.set_status(OK, 'simulating in real time')


# The speed factors the arm follows, in combined_scaling's order (nodes.yaml keys).
SPEED_INPUTS = ('time_scaling', 'proximity_speed_scale')

_MESSAGES = {'joint_states': JointState, 'ft_wrench': WrenchStamped, 'lidar_points': PointCloud2,
             'true_contact_point': PointStamped, 'true_contact_wrench': WrenchStamped,
             'true_contact_torque': JointState}


def _doubles(values: np.ndarray) -> array.array:
    out = array.array('d')
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return out


def main(args=None):
    return run(SimCobotNode, args)


if __name__ == '__main__':
    sys.exit(main())
