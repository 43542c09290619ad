"""residual_node: joint state (position, velocity, torque) → external joint torque τ_ext.

Reads the listener's conditioned joint state (model joint order, effort = joint torque),
runs one of the residuals of core/chain/residual.py and publishes τ_ext (N·m, project sign:
τ_ext = J(p)ᵀF for a force F on the robot) as a JointState whose effort is τ_ext, with the
stamp of the sample it came from. With a wrist F/T sensor (force/position hybrid tasks,
seed 001 §3.1) the measured task wrench is removed (core/chain/wrist_wrench.py has the rules), so
that only unintended contacts remain. `process_joint_states` is a batch's work: its
subscription calls it with one sample, or the listener directly in composed mode with every
sample of its wake (contact_estimation/composed.py); the samples, now with τ_ext, go on to
the detector and the estimators as one batch, and are published while anyone subscribes.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState

from contact_estimation.core.chain.residual import (Residual, ResidualConfig,
                                                    SampleOrderError)
from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.wrist_wrench import WristWrench, WristWrenchConfig
from contact_estimation.core.compiled import kernel
from contact_estimation.core.identification.identified_model import IdentifiedModel, ModelFileError
from contact_estimation.core.input_rejected import WRONG_SIZE, InputRejected
from contact_estimation.core.robot.payload import Payload
from contact_estimation.ros.conversions import wrench_to_arrays
from contact_estimation.ros.diagnostics import OK
from contact_estimation.ros.input_rate import InputRateLog
from contact_estimation.ros.joint_states import JointStateReader, JointStateWriter
from contact_estimation.ros.node_main import run
from contact_estimation.ros.params import ROBOT, ParameterTable, rows
from contact_estimation.ros.suite_node import SuiteNode

NAME = 'residual_node'


PARAMETERS = ROBOT + rows(ResidualConfig) + rows(Payload, 'payload.') + rows(
    WristWrenchConfig, 'wrist_wrench.') + ParameterTable(
    renamed={'wrist_link': 'wrist_wrench.link',
             **{f'wrist_wrench_{field}': f'wrist_wrench.{field}'
                for field in ('enabled', 'timeout', 'on_robot')}})

# Parameters that choose and tune the residual; any change rebuilds it (and restarts it).
_REBUILT = frozenset(PARAMETERS.feeding(ResidualConfig) + PARAMETERS.feeding(Payload)
                     + PARAMETERS.feeding(WristWrenchConfig))


@dataclass
class _Setup:
    """What the parameters build: the residual and, when enabled, the wrist wrench."""

    residual: Residual
    description: str
    wrist: WristWrench | None


class ResidualNode(SuiteNode):
    PARAMETERS = PARAMETERS

    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        with self.starting():
            self._setup = self._build(self.values())
        self._joint_names = list(self.robot.joint_names)
        self._joint_states = JointStateReader(self._joint_names, model_order_only=True)
        self.problems.set_status(OK, self._setup.description)
        self._output = self.output('residual', JointState, only_when_listened=True)
        self._writer = JointStateWriter(self._joint_names)
        _all_finite(np.zeros(len(self._joint_names)))  # compiled or cache-loaded now, not live
        self.receive('joint_state', JointState, self._on_joint_state, None,
                     on_batch=self.process_joint_states)
        self.subscribe('wrist_wrench', WrenchStamped, self._on_wrench)
        self.on_parameter_change(self._on_parameter_change)
        self._rate = InputRateLog(self, self._unused_time_settings, self._observer_lag)
        self.get_logger().info(f'{self._setup.description}; reading '
                               f'{self.spec.topic("joint_state")}, publishing '
                               f'{self.spec.topic("residual")}')

    # ------------------------------------------------------------------ parameters
    def _build(self, values: dict) -> _Setup:
        """The residual these parameter values describe; ValueError/ModelFileError if bad."""
        config = PARAMETERS.build(ResidualConfig, values)
        identified = (IdentifiedModel.load(config.model_file, self.robot)
                      if config.model_file else None)
        tool = PARAMETERS.build(Payload, values)
        built = config.residual(self.robot, identified, tool)
        wrist = PARAMETERS.build(WristWrenchConfig, values).wrist(self.robot)
        source = (f'identified model {config.model_file}' if identified else
                  f'URDF gravity, {config.friction_model} friction')
        carried = (f', {tool.mass:g} kg payload at {list(tool.centre_of_mass)} m in '
                   f'{tool.carrier(self.robot)}' if tool else '')
        removed = f', wrist wrench at {wrist.link} removed' if wrist else ''
        return _Setup(built, f'{config.model} residual ({source}{carried}{removed})', wrist)

    def _on_parameter_change(self, changes: dict) -> str | None:
        if _REBUILT.isdisjoint(changes):
            return None
        try:
            self._setup = self._build(self.values(changes))
        except (ValueError, ModelFileError) as err:
            return str(err)
        self.problems.set_status(OK, self._setup.description)
        self.get_logger().info(f'now: {self._setup.description}')
        return None

    # -------------------------------------------------------------------- messages
    def _on_wrench(self, msg: WrenchStamped) -> None:
        t = self.believed(msg.header.stamp, 'wrist wrench')
        if self._setup.wrist is None or t is None:
            return
        try:
            self._setup.wrist.receive(t, msg.header.frame_id, *wrench_to_arrays(msg))
        except InputRejected as err:
            self.problems.report(err.kind, str(err))

    def _on_joint_state(self, msg: JointState) -> None:
        sample = self.joint_sample(msg, self._joint_states, 'joint state')
        if sample is not None:  # one not believed is never a new time base
            self.process_joint_states((sample,))

    def process_joint_states(self, samples) -> None:
        """Joint states (finite, model order, in stamp order) → τ_ext, set on each sample;
        they go to the nodes that read the residual in this process (composed mode) as one
        batch and are published while anyone subscribes, with their stamps.

        The listener calls this directly in composed mode; `_on_joint_state` otherwise.
        """
        residuals = [r for r in map(self._residual_of, samples) if r is not None]
        if not residuals:
            return
        self._output.send_batch(residuals, lambda r: self._writer.write(
            r.stamp, r.frame_id, r.q, r.v, r.tau_ext))
        self.problems.traffic['residuals_published'] += len(residuals)
        self._rate.add_batch(residuals)

    def _residual_of(self, sample: JointSample) -> JointSample | None:
        """The sample with its τ_ext, or None (dropped, and counted)."""
        if sample.tau is None:
            self.problems.report(WRONG_SIZE, 'joint state without joint torques: dropped')
            return None
        t, q, v, tau = sample.t, sample.q, sample.v, sample.tau
        setup = self._setup
        try:
            tau_ext = setup.residual.update(t, q, v, tau)
        except SampleOrderError as err:
            self.problems.report('out_of_order', f'{err}: dropped')
            return None
        if setup.residual.last_gap:
            self.problems.report('gap', f'joint-state time jumped by '
                                 f'{setup.residual.last_gap:.3f} s (a pause, or a restarted '
                                 f'clock): residual restarted')
        if setup.wrist is not None:
            tau_ext = self._without_task_force(t, q, tau_ext, setup.wrist)
        if not _all_finite(tau_ext):
            # Finite inputs whose model terms overflow: an observer that integrated it would
            # stay NaN. Start over and publish nothing; the detector's timeout stops the arm
            # if this persists.
            setup.residual.reset()
            self.problems.report('non_finite_residual', 'τ_ext came out NaN/inf: residual '
                                 'restarted, sample dropped')
            return None
        # q̈ handed on: this residual's fit, else the listener's (issue 35: fitted once).
        return JointSample(t, q, v, tau, tau_ext, sample.stamp, sample.frame_id,
                           setup.residual.acceleration or sample.acceleration)

    def _unused_time_settings(self) -> tuple[str, ...]:
        """For InputRateLog: the q̈ window is in use only by the rnea residual."""
        return () if self.value('model') == 'rnea' else ('acceleration_filter.window_duration',)

    def _observer_lag(self) -> dict[str, float]:
        """For InputRateLog: the momentum observer's time constant 1/K_O (s), its lag."""
        if self.value('model') != 'momentum_observer':
            return {}
        return {'observer time constant': 1.0 / float(np.min(self.value('observer_gain')))}

    def _without_task_force(self, t: float, q: np.ndarray, tau_ext: np.ndarray,
                            wrist: WristWrench) -> np.ndarray:
        task = wrist.joint_torque(t, q)
        if task is None:
            self.problems.report('wrist_wrench_stale', 'no wrist wrench within '
                                 f'{wrist.timeout} s of the joint state: task force not '
                                 'removed')
            return tau_ext
        return tau_ext - task


@kernel
def _all_finite(values) -> bool:
    """np.isfinite(values).all(), without numpy's dispatch of two calls per sample."""
    for value in values:
        if not math.isfinite(value):
            return False
    return True


def main(args=None):
    return run(ResidualNode, args)


if __name__ == '__main__':
    sys.exit(main())
