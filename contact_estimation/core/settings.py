"""A setting a user may give, declared once on the field of the core config it feeds.

    @dataclass(frozen=True)
    class FilterConfig:
        gain: float = setting(2.0, 'how strong, 1/s', range=(0.0, 10.0))
        kind: str = setting('fast', 'which filter', choices=('fast', 'slow'))
        limits: float | tuple = setting(1.0, 'one value or one per joint', per_joint=1)

The field's default is the setting's; its metadata holds what a user needs to give a good
value: the description (with the unit), the allowed range (of a number, or of each element of
a list) or the choices (of a string, or of each element of a list of strings), how many values
it takes per joint or in all (`size`: a vector's 3), what of the robot a string names
(`names`: LINK or SENSOR_FRAME, checked against the loaded model), the name it has where it
differs from the field's, and, for a time in
seconds, what it is to the input's rate (`timing`: ros/input_rate.py logs what it comes to).
ros/params.rows makes one parameter row of each (the declaration, the check and
docs/parameters.md); core checks the values again when the config is built. Core stays free
of ROS: this is plain data.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

_KEY = 'contact_estimation.setting'

# A time setting's `timing` (core/chain/rate_statistics.timing_report): a DerivativeEstimator
# window (said in samples), a timeout (warned of when it is only a few input periods) or any
# other duration (said in periods).
WINDOW = 'window'
TIMEOUT = 'timeout'
DURATION = 'duration'

# What a string setting names (`names`), checked against the robot model it runs with
# (ros/params.Parameter.problem): a link the arm's joints move ('' = the tip link), or the
# frame of a sensor mounted off the arm, whose pose in the base frame is fixed ('' = none).
LINK = 'link'
SENSOR_FRAME = 'sensor frame'


@dataclass(frozen=True)
class Setting:
    """What a field's metadata says of it as a user setting."""

    description: str
    range: tuple[float, float] | None = None     # low, high (inclusive)
    choices: tuple[str, ...] | None = None       # the allowed strings
    per_joint: int = 0   # values per joint: that many for every joint, or that many per joint
    name: str = ''       # the setting's name where it is not the field's ('' = the field's)
    timing: str = ''     # WINDOW, TIMEOUT or DURATION for a time in seconds ('' = none)
    size: int = 0        # exactly this many values (a vector: 3; 0 = per_joint or a list)
    names: str = ''      # LINK or SENSOR_FRAME: what of the robot a string names ('' = none)


def setting(default: Any, description: str, *, range: tuple[float, float] | None = None,
            choices: tuple[str, ...] | None = None, per_joint: int = 0,
            name: str = '', timing: str = '', size: int = 0, names: str = '') -> Any:
    """A dataclass field at `default` that is a user setting (module docstring). A list
    default is stored as a tuple (a dataclass default must not be mutable)."""
    if isinstance(default, list):
        default = tuple(default)
    values = default if isinstance(default, tuple) else (default,)
    if choices is not None and not set(values) <= set(choices):
        raise ValueError(f'{name or description!r}: default {default!r} is not one of '
                         f'{", ".join(choices)}')
    return dataclasses.field(default=default, metadata={_KEY: Setting(
        description, range, tuple(choices) if choices is not None else None, per_joint,
        name, timing, size, names)})


def setting_of(field: dataclasses.Field) -> Setting | None:
    """The Setting a field declares, or None when the field is not a user setting."""
    return field.metadata.get(_KEY)
