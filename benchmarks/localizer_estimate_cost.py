"""The contact localizer's CPU per estimate (issue 35): `FusedContactEstimator.estimate` as the
contact_localizer node builds it (LocalizerConfig's defaults, torque noise δ_w/5), in-process,
thread CPU time, on the simulated Panda.

The samples: benchmarks/ft_contact.py's simulation (the sim cobot in smooth random motion,
pushes of 5-60 N within 30° of the normal on every moving link, 0.3 s each with 50 ms ramps):
τ_ext from the momentum observer, the base wrench from `MomentumWrenchObserver`. Per push the
first `ONSET` samples over the gate (|τ_ext,i| over `GATE`: where a contact's first estimate
is, the base wrench's compensation lagging) and every 10th sample of its plateau. Each sample
is estimated with the base wrench, without it, and as the node does
(`estimate_or_without_wrench`: with it, and without it too when that estimate is
inconsistent, as a contact's first estimate often is while the wrench's compensation lags).

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/localizer_estimate_cost.py [--quick]
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import ft_contact
import numpy as np

from contact_estimation.core.contact.contact_localization import LocalizerConfig
from contact_estimation.core.contact.ft_compensation import (BaseWrenchCompensator,
                                                             MomentumWrenchObserver)
from contact_estimation.core.contact.fused_contact import FusedContactEstimator, SensorNoise
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.robot.surfaces import LinkSurfaces
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.scenario import Scenario

GATE = 0.5   # N·m: the detector's thresholds are of this order on the sim cobot
ONSET = 10   # samples over the gate per push, from its first
REPEAT = 3   # calls per sample and kind; the least CPU of them counts (the machine is shared)


def samples(robot, surfaces, pushes: int):
    """(q, τ_ext, base wrench, at the onset) of the pushes' onsets and plateaus."""
    rng = np.random.default_rng(11)
    forces = ft_contact.random_pushes(robot, surfaces, rng, pushes)
    observer = MomentumWrenchObserver(BaseWrenchCompensator(robot), ft_contact.OBSERVER_GAIN)
    seconds = forces[-1].start + ft_contact.DURATION + ft_contact.GAP
    taken, over = [], {}
    for k, (cobot, q, v, _, reading, tau) in enumerate(ft_contact.steps(
            robot, Scenario(forces=forces), SimConfig(), seconds)):
        wrench = observer.update(cobot.time, reading, q, v)
        push = next((i for i, p in enumerate(forces)
                     if p.start <= cobot.time <= p.start + p.duration), None)
        if push is None or np.max(np.abs(tau)) < GATE:
            continue
        over[push] = over.get(push, 0) + 1
        plateau = (forces[push].start + ft_contact.RAMP + ft_contact.SETTLE <= cobot.time
                   <= forces[push].start + ft_contact.DURATION - ft_contact.RAMP)
        if over[push] <= ONSET or (plateau and k % 10 == 0):
            taken.append((q.copy(), tau.copy(), wrench.copy(), over[push] <= ONSET))
    return taken


def cpu(call) -> float:
    """The least thread CPU time (s) of `REPEAT` calls."""
    best = np.inf
    for _ in range(REPEAT):
        start = time.thread_time()
        call()
        best = min(best, time.thread_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='6 pushes, not 24')
    args = parser.parse_args()
    robot = RobotModel.load('panda')
    surfaces = LinkSurfaces(robot, point_spacing=0.02)
    settings = LocalizerConfig()
    fused = FusedContactEstimator(surfaces, noise=SensorNoise(settings.delta_w / 5),
                                  **dataclasses.asdict(settings))
    taken = samples(robot, surfaces, 6 if args.quick else 24)
    rows = {'with the base wrench': [], 'without it': [],
            "as the node: with it, without it when inconsistent": [],
            '… of those, the wrench left out': []}
    for q, tau, wrench, _ in taken:
        rows['with the base wrench'].append(cpu(lambda: fused.estimate(q, tau, wrench)))
        rows['without it'].append(cpu(lambda: fused.estimate(q, tau)))
        node = cpu(lambda: the_nodes_estimate(fused, q, tau, wrench))
        rows["as the node: with it, without it when inconsistent"].append(node)
        if the_nodes_estimate(fused, q, tau, wrench)[1]:
            rows['… of those, the wrench left out'].append(node)
    onsets = sum(onset for *_, onset in taken)
    print(f'{len(taken)} samples, {onsets} of them at an onset; thread CPU per estimate, the '
          f'least of {REPEAT} calls\n')
    print('| estimate | samples | median | p95 |')
    print('|---|---|---|---|')
    for name, values in rows.items():
        print(f'| {name} | {len(values)} | {1e6 * np.median(values):.0f} µs | '
              f'{1e6 * np.percentile(values, 95):.0f} µs |')


def the_nodes_estimate(fused, q, tau, wrench):
    """The contact_localizer node's estimate and whether it left the base wrench out."""
    return fused.estimate_or_without_wrench(q, tau, wrench)


if __name__ == '__main__':
    main()
