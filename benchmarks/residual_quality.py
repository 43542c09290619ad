"""Residual quality on the simulated cobot (ROS-free): noise floor and contact error per model.

SimulatedCobot (Panda, smooth random motion, the sim's default sensor noise, and the per-joint
eq. 23 friction that the identification runs use, core/sim/harness.simulator_config) feeds the
same samples to the three residuals of core/chain/residual.py (fast, rnea, momentum_observer), each
with the URDF dynamics and the sim's true friction, so what remains is sensor noise, the
models' approximations (fast drops M q̈ + C q̇) and their lags.
- free motion (no contact, after SETTLE s): RMS of τ_ext per joint = the noise floor;
- scripted contacts (FORCE N on a random link, random direction and point, DURATION s with
  RAMP s ramps): error τ_ext − Jᵀ F (true, `sim.true_external_torque()`), RMS over the whole
  contact and at steady state (from STEADY s after full force to the start of the ramp down).
With `--model-file` (a Panda model from `contact-estimation identify fit`), fast and
momentum_observer also run on the identified gravity and friction, as on a real arm:

    .venv/bin/python -m contact_estimation identify simulate --robot panda \
        --out out/panda_sweeps.csv
    .venv/bin/python -m contact_estimation identify fit out/panda_sweeps.csv --robot panda \
        --out out/panda_model.yaml
    .venv/bin/python benchmarks/residual_quality.py [--quick] [--model-file out/panda_model.yaml]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from tqdm import tqdm

from contact_estimation.core.identification.identified_model import IdentifiedModel
from contact_estimation.core.chain.residual import MODELS, make_residual
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.cobot import SimulatedCobot
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.harness import closed_loop, simulator_config
from contact_estimation.core.sim.scenario import PointForce, Scenario
from contact_estimation.core.identification.trajectory import make_trajectory

SETTLE = 0.5                               # s ignored at the start (filters filling)
FORCE, DURATION, RAMP, SPACING = 30.0, 0.5, 0.05, 1.0  # N, s, s, s between onsets
STEADY = 0.1                               # s after full force: the transient is over
LINKS = ['panda_link3', 'panda_link4', 'panda_link5', 'panda_link6', 'panda_link7']
MOTION = {'type': 'smooth_random', 'seed': 1, 'speed_scale': 0.3, 'amplitude': 0.5}


class Fanout:
    """A residual that feeds every model the same sample (closed_loop drives one residual)
    and keeps each model's τ_ext."""

    def __init__(self, residuals: dict):
        self.residuals = residuals
        self.outputs = {kind: [] for kind in residuals}

    def update(self, t, q, v, tau) -> np.ndarray:
        for kind, residual in self.residuals.items():
            tau_ext = np.array(residual.update(t, q, v, tau))
            self.outputs[kind].append(tau_ext)
        return tau_ext


def contacts(count: int, first: float, rng) -> list[PointForce]:
    return [PointForce(LINKS[rng.integers(len(LINKS))], rng.uniform(-0.05, 0.05, 3),
                       FORCE * (d := rng.normal(size=3)) / np.linalg.norm(d),
                       first + k * SPACING, DURATION, RAMP) for k in range(count)]


def rms(x: np.ndarray) -> np.ndarray:
    """Per joint (columns), then over all joints as the last entry."""
    return np.append(np.sqrt(np.mean(x ** 2, axis=0)), np.sqrt(np.mean(x ** 2)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='3 s free motion, 4 contacts')
    parser.add_argument('--model-file', help='identified Panda model (identify fit) to add')
    args = parser.parse_args(argv)
    free, count = (3.0, 4) if args.quick else (30.0, 30)
    robot = RobotModel.load('panda')
    forces = contacts(count, free, np.random.default_rng(0))
    sim = SimulatedCobot(robot, make_trajectory(robot, MOTION), Scenario(forces=forces),
                         SimConfig(friction=simulator_config(robot).friction))
    residuals = {kind: make_residual(kind, robot, friction_model='continuous',
                                     friction_params=sim.config.friction) for kind in MODELS}
    if args.model_file:
        identified = IdentifiedModel.load(args.model_file, robot)
        residuals |= {f'{kind} (identified)': make_residual(kind, robot, identified)
                      for kind in ('fast', 'momentum_observer')}
    fanout = Fanout(residuals)
    seconds = free + count * SPACING
    with tqdm(total=int(round(seconds / sim.dt)), unit='step', desc='simulating') as bar:
        trace = closed_loop(sim, fanout, seconds=seconds, progress=bar.update)
    t, true = trace['t'], trace['tau_true']
    quiet = (t >= SETTLE) & (t < free)
    during = np.zeros_like(quiet)
    steady = np.zeros_like(quiet)
    for f in forces:
        during |= (t >= f.start) & (t < f.start + f.duration)
        steady |= (t >= f.start + f.ramp + STEADY) & (t < f.start + f.duration - f.ramp)

    joints = ' | '.join(f'  J{j + 1}' for j in range(robot.n))
    header = f'{"model":30s} | {joints} |  all'
    rule = ''.join('+' if c == '|' else '-' for c in header)

    def rows(values) -> list[str]:
        return [f'{kind:30s} | ' + ' | '.join(f'{x:4.2f}' for x in values(np.array(out)))
                for kind, out in fanout.outputs.items()]

    print(f'\nPanda, smooth random motion, sim sensor noise (σ_q {sim.config.position_noise} rad, '
          f'σ_q̇ {sim.config.velocity_noise} rad/s, σ_τ {sim.config.effort_noise} N·m); '
          f'URDF dynamics + the sim\'s true friction; {seconds:.0f} s simulated')
    print(f'\nnoise floor: RMS of τ_ext in free motion ({free - SETTLE:.1f} s), N·m')
    print('\n'.join([header, rule, *rows(lambda est: rms(est[quiet]))]))
    print(f'\ncontacts: {count} × {FORCE:.0f} N, {DURATION} s each; RMS of the true Jᵀ F: '
          + ' '.join(f'{x:.2f}' for x in rms(true[during])) + ' N·m')
    print('error τ_ext − Jᵀ F during the contacts (ramps included), RMS, N·m')
    print('\n'.join([header, rule, *rows(lambda est: rms(est[during] - true[during]))]))
    print(f'error at steady state ({STEADY} s after full force), RMS, N·m')
    print('\n'.join([header, rule, *rows(lambda est: rms(est[steady] - true[steady]))]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
