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
ros/params.rows makes one parameter row of each (the declaration and docs/parameters.md).

The range and the choices are checked in one place, `problem`: by ros/params on every value a
node is given (at start and on every run-time set) and, through `@checked` on the config
class, whenever a core config is built (SettingError, one shape of message). A config's own
`__post_init__` keeps only what `problem` cannot say: rules that span several fields and
normalisations (test/test_settings.py fails on a range checked anywhere else). Core stays free
of ROS: this is plain data.

    @dataclass(frozen=True)
    @checked
    class FilterConfig: ...
"""
from __future__ import annotations

import array
import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

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


class SettingError(ValueError):
    """A value outside its setting's declared range or choices (`problem` says which)."""


_SHOWN_VALUES = 6  # values of an array a refusal shows


def shown(value: Any) -> str:
    """`value` as a refusal shows it: a long array or string cut short."""
    if isinstance(value, np.ndarray):
        value = value.ravel().tolist()
    if isinstance(value, (list, tuple, array.array)):
        head = ', '.join(shown(x) for x in value[:_SHOWN_VALUES])
        more = f', … ({len(value)} values)' if len(value) > _SHOWN_VALUES else ''
        return f'[{head}{more}]'
    if isinstance(value, str) and len(value) > 60:
        return f'{value[:60]!r}… ({len(value)} characters)'
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def bounds(range: tuple[float, float]) -> str:
    """A range as refusals and docs say it: `low … high`."""
    low, high = (f'{x}' if isinstance(x, int) else f'{x:g}' for x in range)
    return f'{low} … {high}'


def _within(x: Any, low: float, high: float) -> bool:
    """Whether `x` is a finite number (not a bool) in [low, high]."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.number)):
        return False
    return math.isfinite(x) and low <= x <= high


def problem(name: str, value: Any, range: tuple[float, float] | None = None,
            choices: tuple[str, ...] | None = None) -> str | None:
    """Why `value` (one value, or a list, tuple, array of them) is outside `range` (finite
    numbers within it, inclusive) or `choices` (None when it is not): the one check of a
    setting's declared bounds, naming the setting `name`, the value and what is allowed."""
    listed = isinstance(value, (list, tuple, array.array, np.ndarray))
    values = np.ravel(value).tolist() if isinstance(value, np.ndarray) else (
        value if listed else [value])
    each = ' (each element)' if listed else ''
    if choices is not None:
        bad = [x for x in values if x not in choices]
        if bad:
            return (f'{name} = {shown(value)}: {", ".join(shown(x) for x in bad[:3])} is not '
                    f'one of {", ".join(choices)}{each}')
    elif range is not None:
        low, high = range
        bad = [x for x in values if not _within(x, low, high)]
        if bad:
            return (f'{name} = {shown(value)}: {", ".join(shown(x) for x in bad[:3])} outside '
                    f'{bounds(range)}{each}')
    return None


def check_settings(config: Any) -> None:
    """SettingError naming every setting field of dataclass instance `config` whose value is
    outside its declared range or choices (`problem`)."""
    problems = [found for field in dataclasses.fields(config)
                for declared in [setting_of(field)] if declared is not None
                for found in [problem(declared.name or field.name, getattr(config, field.name),
                                      declared.range, declared.choices)] if found]
    if problems:
        raise SettingError('; '.join(problems))


def checked(cls: type) -> type:
    """Class decorator, under @dataclass, on a core config with setting fields: `check_settings`
    runs when an instance is built, before the class's own `__post_init__` (if any)."""
    if '__dataclass_fields__' in cls.__dict__:
        raise TypeError(f'{cls.__name__}: put @checked under @dataclass (dataclass must see '
                        'the __post_init__ it adds)')
    own = getattr(cls, '__post_init__', None)

    def __post_init__(self):
        check_settings(self)
        if own is not None:
            own(self)

    __post_init__.__doc__ = own.__doc__ if own is not None else check_settings.__doc__
    cls.__post_init__ = __post_init__
    return cls
