"""Whether a lidar's clouds still arrive (issue 36). No ROS.

Clouds lost in transport (a 4.8 MB cloud that DDS drops) and a lidar that stopped look the
same to a node: nothing arrives, and nothing said so. Both are stale, whatever the reason, as
a skeleton that stops arriving is: more than `timeout` seconds since the last cloud arrived,
on the node's watchdog clock (arrival, not stamps: no cloud means no stamp to judge). Before
the first cloud a lidar may simply not be part of the cell, so it is stale only if it is
`required` and none arrived within `timeout` of the start.
"""
from __future__ import annotations

from dataclasses import dataclass

from contact_estimation.core.settings import checked, setting


@dataclass(frozen=True)
@checked
class LidarWatchConfig:
    """When the lidar counts as stale (the `lidar.timeout` and `lidar.required` settings)."""

    timeout: float = setting(
        0.5, 's: no cloud arrived for this long (on the watchdog clock) once one did → the '
        'lidar is stale (the proximity monitor stops; the localizer warns)', range=(0.05, 60.0))
    required: bool = setting(
        False, 'the cell has a lidar: also stale when no cloud arrived within timeout of the '
        'start')


class LidarWatch:
    """Arrivals of one lidar's clouds (`arrived(now)`, now in s on one clock) and whether it
    is stale (`stale(now)`), from `started` (s, same clock)."""

    def __init__(self, config: LidarWatchConfig, started: float):
        self.config = config
        self._started = started
        self._last: float | None = None

    def arrived(self, now: float) -> None:
        self._last = now

    def stale(self, now: float) -> str:
        """Why the lidar is stale, with the time since the last cloud ('' when it is not)."""
        timeout = self.config.timeout
        if self._last is not None and now - self._last > timeout:
            return (f'lidar stale: the last cloud arrived {now - self._last:.2f} s ago '
                    f'(lidar.timeout {timeout:g} s)')
        if self._last is None and self.config.required and now - self._started > timeout:
            return (f'lidar stale: no cloud arrived in the {now - self._started:.2f} s since '
                    f'the start (lidar.required, lidar.timeout {timeout:g} s)')
        return ''

    def summary(self, now: float) -> str:
        """The time since the last cloud, for /diagnostics."""
        if self._last is None:
            return 'no cloud yet' + (' (required)' if self.config.required else '')
        return f'last cloud {now - self._last:.2f} s ago'
