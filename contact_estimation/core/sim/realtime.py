"""Playing the simulated cobot against the wall clock: the sim node's pacing defaults and the
hold when the time scaling f_S stops coming.

A follower of f_S (seed 003 eq. 8: t_i = t_{i−1} + f_S Δt) plays at f_S = 1 until the first
f_S arrives; from then on, no f_S for `timeout` seconds means hold (f_S = 0) until one
arrives again: the detector that sends it may be dead, and a controller must not go on at
the last speed it was told (docs/collision_events.md says the same to real controllers).
"""
from __future__ import annotations

# The one source of the sim node's pacing defaults, by sim_cobot parameter name (the
# physics and sensor defaults are SimConfig's and LidarConfig's; config/sim_cobot.yaml ships
# the same values: test/test_node_defaults.py).
DEFAULTS = {
    'publish_rate': 1000.0,          # Hz, joint states, F/T and ground truth
    'timer_period': 0.005,           # s between stepping calls (each runs the steps due)
    'max_catch_up': 0.05,            # s; a longer lag behind the wall clock is skipped
    'publish_clock': False,          # True: /clock is simulated time, and no time is skipped
    'lockstep.lead': 0.02,           # s the sim may run ahead of the listener (publish_clock):
                                     # well within the suite's input timeouts (≥ 0.05 s)
    'lockstep.timeout': 10.0,        # s (wall) it waits for the listener before going on
    'time_scaling_timeout': 0.15,    # s: 3 periods of the detector's 20 Hz heartbeat
}


class Lockstep:
    """How far the simulation may step: at most `lead` seconds of simulated time beyond the
    newest sample the suite has taken (its listener's output), so that a graph that starts
    late or cannot keep up slows the simulation instead of losing samples. From `start` on
    (the sim node starts once the suite listens) the start counts as taken; after `timeout`
    seconds of wall time without a sample taken (the suite died or stopped listening), the
    simulation is not held back."""

    def __init__(self, lead: float, timeout: float):
        if not (lead > 0.0 and timeout > 0.0):
            raise ValueError(f'lockstep lead and timeout must be > 0 s, got {lead}, {timeout}')
        self.lead, self.timeout = float(lead), float(timeout)
        self._taken: float | None = None     # simulated time of the newest sample taken
        self._heard = 0.0                    # wall time it was heard

    def start(self, simulated: float, wall: float) -> None:
        """The simulation starts at `simulated`: it may run `lead` beyond it."""
        self._taken, self._heard = simulated, wall

    def taken(self, simulated: float, wall: float) -> None:
        if self._taken is None or simulated > self._taken:
            self._taken = simulated
        self._heard = wall

    def steps(self, due: int, simulated: float, dt: float, wall: float) -> int:
        """Of `due` steps of `dt` from `simulated`, how many may be taken now."""
        if self._taken is None or wall - self._heard > self.timeout:
            return due
        return max(0, min(due, int((self._taken + self.lead - simulated) / dt)))


class ScalingTimeout:
    """Whether a follower of f_S must hold because the f_S stream, once started, stopped.

    Times are seconds on one monotonic clock chosen by the caller.
    """

    def __init__(self, timeout: float = DEFAULTS['time_scaling_timeout']):
        if not timeout > 0.0:
            raise ValueError(f'time_scaling_timeout must be > 0 s, got {timeout}')
        self.timeout = float(timeout)
        self._received: float | None = None  # time of the latest f_S
        self.holding = False                 # f_S timed out and none came since

    def received(self, now: float) -> None:
        """An f_S arrived (and was applied) at `now`: holding ends."""
        self._received, self.holding = now, False

    def check(self, now: float) -> float | None:
        """The silence (s) when the stream times out at this check, else None: the caller
        then applies f_S = 0. Before the first f_S and while holding, None."""
        if self._received is None or self.holding or now - self._received <= self.timeout:
            return None
        self.holding = True
        return now - self._received
