"""Playing the simulated cobot against the wall clock: the lockstep with the suite and the
hold when the time scaling f_S stops coming.

A follower of f_S (seed 003 eq. 8: t_i = t_{i−1} + f_S Δt) plays at f_S = 1 until the first
f_S arrives; from then on, no f_S for `timeout` seconds means hold (f_S = 0) until one
arrives again: the detector that sends it may be dead, and a controller must not go on at
the last speed it was told (docs/collision_events.md says the same to real controllers).
"""
from __future__ import annotations


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

    def __init__(self, timeout: float):
        if not timeout > 0.0:
            raise ValueError(f'time_scaling.timeout must be > 0 s, got {timeout}')
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
