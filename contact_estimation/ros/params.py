"""One declarative parameter table per node: the declaration, the validation and the docs.

generate_parameter_library's idea, in Python (it is not on PyPI): each node lists its
parameters once, a `Parameter` row each (name, default, description, range or choices, values
per joint, read-only, and the core field it feeds). A setting of core is declared once, on
the field of the config it feeds (core/settings.setting: default, description, range,
choices, per joint); `rows(Config)` makes its rows. A parameter of the node itself (a rate, a
timeout of its own) is a `Parameter` row in the node's table. `ParameterTable.declare`
declares them all on the node (values out of range or not among the choices are refused,
naming the parameter), `fields` builds the core config from their values, `markdown` writes
docs/parameters.md, and test/test_node_defaults.py checks config/<node>.yaml against the
table.

Names are grouped with dots (`time_scaling.alpha`); a table's `renamed` maps old names to new
ones, so that a parameter file with an old name is refused with the new one (ros/suite_node.py).

A row's range bounds a number, or each element of an array; its choices are the strings a
string (or each element of a string array) may be. rclpy checks only the range of a scalar;
the rest is checked here, at start and by `ParameterGuard` at run time, naming the value.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                SetParametersResult)
from rclpy.node import Node

from contact_estimation.core.settings import DURATION, TIMEOUT, WINDOW, setting_of


@dataclass(frozen=True)
class Parameter:
    """One parameter: `field` = (core config class, field name) it feeds, or None when the
    node itself uses it. `per_joint`: values per joint (a list of that many for every joint,
    or that many per joint; 0: not per joint)."""

    name: str
    description: str
    default: Any
    range: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None
    per_joint: int = 0
    read_only: bool = False
    field: tuple[type, str] | None = None
    timing: str = ''  # core/settings.WINDOW, TIMEOUT or DURATION: ros/input_rate.py logs it

    def __post_init__(self):
        default = self.default
        if isinstance(default, tuple):
            default = list(default)
        if self.per_joint and not isinstance(default, list):
            default = [default]
        if isinstance(default, list) and not default:
            raise ValueError(f'{self.name}: an empty list default has no ROS type')
        object.__setattr__(self, 'default', default)
        problem = self.problem(default)
        if problem:
            raise ValueError(f'the default breaks the row: {problem}')

    @property
    def type_name(self) -> str:
        """Its ROS parameter type, as `ros2 param describe` names it."""
        sample = self.default[0] if isinstance(self.default, list) else self.default
        name = {bool: 'bool', int: 'integer', float: 'double', str: 'string'}[type(sample)]
        return f'{name} array' if isinstance(self.default, list) else name

    @property
    def allowed(self) -> str:
        """The values it allows, as the docs and `ros2 param describe` say it ('' = any)."""
        each = ' each' if isinstance(self.default, list) else ''
        if self.choices is not None:
            return ', '.join(f'`{choice}`' for choice in self.choices) + each
        if self.range is not None and not isinstance(self.default, bool):
            low, high = (f'{x}' if isinstance(x, int) else f'{x:g}' for x in self.range)
            return f'{low} … {high}{each}'
        return ''

    @property
    def count(self) -> str:
        """How many values it takes, for the docs ('' = one)."""
        if self.per_joint:
            k = 'one' if self.per_joint == 1 else str(self.per_joint)
            return f'{k}, or {k} per joint'
        return 'a list' if isinstance(self.default, list) else ''

    def descriptor(self) -> ParameterDescriptor:
        descriptor = ParameterDescriptor(description=self.description, read_only=self.read_only)
        if self.range is not None and not isinstance(self.default, bool):
            low, high = self.range
            if isinstance(self.default, int):
                descriptor.integer_range = [
                    IntegerRange(from_value=int(low), to_value=int(high), step=0)]
            elif isinstance(self.default, float):
                descriptor.floating_point_range = [
                    FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)]
            each = 'each element of ' if isinstance(self.default, list) else ''
            descriptor.additional_constraints = f'{low} <= {each}{self.name} <= {high}'
        if self.choices is not None:
            each = 'each element ' if isinstance(self.default, list) else ''
            descriptor.additional_constraints = f'{each}one of {", ".join(self.choices)}'
        return descriptor

    def problem(self, value: Any) -> str | None:
        """Why `value` breaks this row's choices, or the range of an array's elements (None
        when it does not; rclpy checks a scalar's range against the descriptor)."""
        if self.choices is not None:
            values = value if isinstance(value, (list, tuple)) else [value]
            bad = [x for x in values if x not in self.choices]
            if bad:
                each = ' (each element)' if isinstance(value, (list, tuple)) else ''
                return (f'{self.name} = {value!r}: {", ".join(repr(x) for x in bad[:3])} is '
                        f'not one of {", ".join(self.choices)}{each}')
            return None
        if self.range is None or not isinstance(value, (list, tuple)) or isinstance(
                self.default, bool) or not isinstance(self.default, list):
            return None
        low, high = self.range
        bad = [x for x in value if isinstance(x, (int, float)) and not (
            math.isfinite(x) and low <= x <= high)]
        if bad:
            return (f'{self.name} = {list(value)}: {", ".join(f"{x:g}" for x in bad[:3])} '
                    f'outside {low:g} … {high:g} (each element)')
        return None


def rows(config: type, prefix: str = '', *, read_only: bool = False,
         skip: tuple[str, ...] = ()) -> 'ParameterTable':
    """A row for each setting of core dataclass `config` (each field declared with
    core/settings.setting, but those in `skip`), in field order, named `prefix` + its name,
    at its default."""
    made = []
    for field in dataclasses.fields(config):
        declared = setting_of(field)
        if declared is None or field.name in skip:
            continue
        made.append(Parameter(prefix + (declared.name or field.name), declared.description,
                              field.default, declared.range, declared.choices,
                              declared.per_joint, read_only, (config, field.name),
                              declared.timing))
    if not made:
        raise ValueError(f'{config.__name__} declares no setting')
    return ParameterTable(*made)


class ParameterTable:
    """A node's parameters, in the order they are declared and documented; tables add up
    (`ROBOT + PAYLOAD + ...`), their `renamed` maps merge."""

    def __init__(self, *rows: Parameter, renamed: Mapping[str, str] | None = None):
        self.rows = tuple(rows)
        self.renamed = dict(renamed or {})
        self._by_name = {row.name: row for row in self.rows}
        if len(self._by_name) != len(self.rows):
            raise ValueError('a parameter table names a parameter twice')

    def __add__(self, other: 'ParameterTable') -> 'ParameterTable':
        return ParameterTable(*self.rows, *other.rows, renamed={**self.renamed, **other.renamed})

    def __getitem__(self, name: str) -> Parameter:
        return self._by_name[name]

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def unknown(self, names) -> list[str]:
        """Each of `names` (not in the table) as a refusal says it: with its new name where
        it was renamed."""
        return [f'{name} (renamed: now {self.renamed[name]})' if name in self.renamed else name
                for name in names]

    def problems(self, values: Mapping[str, Any]) -> list[str]:
        """Why values by name break their rows' choices or element ranges (ranges of
        scalars rclpy checks itself)."""
        return [problem for name, value in values.items() if name in self._by_name
                for problem in [self._by_name[name].problem(value)] if problem]

    def time_settings(self, values: Mapping[str, Any], unused: Iterable[str] = ()
                      ) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """The rows with a `timing` but `unused` (not in use now) at their `values` by name:
        (windows, timeouts, durations) for core/chain/rate_statistics.timing_report."""
        unused = set(unused)
        return tuple({row.name: values[row.name] for row in self.rows
                      if row.timing == timing and row.name not in unused}
                     for timing in (WINDOW, TIMEOUT, DURATION))

    def defaults(self) -> dict[str, Any]:
        return {row.name: row.default for row in self.rows}

    def declare(self, node: Node) -> None:
        """Declare every row on `node`: a value from a parameter file out of the row's range
        is refused by rclpy (ParameterException naming the parameter and the range), one not
        among its choices or with an array element out of range by StartupError."""
        for row in self.rows:
            node.declare_parameter(row.name, row.default, row.descriptor())
        problems = self.problems(self.values(node))
        if problems:
            from contact_estimation.ros.node_main import StartupError
            raise StartupError(f'{node.get_name()}: {"; ".join(problems)}')

    def values(self, node: Node, changes: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every row's value on `node`, with the `changes` of a run-time set applied."""
        changes = changes or {}
        return {name: changes[name] if name in changes else node.get_parameter(name).value
                for name in self._by_name}

    def feeding(self, config: type) -> tuple[str, ...]:
        """The names of the rows that feed a field of `config`."""
        return tuple(row.name for row in self.rows
                     if row.field is not None and row.field[0] is config)

    def fields(self, config: type, values: Mapping[str, Any]) -> dict[str, Any]:
        """{field: value} of the rows feeding `config`, from parameter `values` by name: the
        keyword arguments that build it (its own validation then runs once, in core)."""
        return {row.field[1]: values[row.name] for row in self.rows
                if row.field is not None and row.field[0] is config}

    def build(self, config: type, values: Mapping[str, Any]):
        """`config(**fields(config, values))`: ValueError from core on a bad value."""
        return config(**self.fields(config, values))

    def markdown(self) -> str:
        """The table as docs/parameters.md shows it."""
        lines = ['| parameter | type | values | default | allowed | description |',
                 '|---|---|---|---|---|---|']
        for row in self.rows:
            fed = '' if row.field is None else f' → `{row.field[0].__name__}.{row.field[1]}`'
            read_only = ' *(read-only)*' if row.read_only else ''
            description = row.description.replace('|', '\\|')
            lines.append(f'| `{row.name}` | {row.type_name} | {row.count} | `{row.default!r}` '
                         f'| {row.allowed} | {description}{read_only}{fed} |')
        if self.renamed:
            lines.append('')
            lines.append('Renamed (a parameter file with the old name is refused): ' + ', '.join(
                f'`{old}` → `{new}`' for old, new in self.renamed.items()) + '.')
        return '\n'.join(lines)


class ParameterGuard:
    """The one run-time check of a node's parameter sets, before anything changes: refuses
    what no parameter may do (a value not among its row's choices, array elements outside
    its range; `use_sim_time` on
    while nobody publishes /clock: the node's time would stand still, and with it every
    timeout), then asks `apply({name: value})`, the node's own check and use of the values
    (None to accept or a message to refuse). A refused set leaves every parameter as it was;
    the message, which names the values refused, goes back to the caller (`ros2 param set`)."""

    def __init__(self, node: Node, table: ParameterTable):
        self._node, self._table = node, table
        self.apply: Callable[[dict[str, Any]], str | None] | None = None
        node.add_on_set_parameters_callback(self._callback)

    def refusals(self, changes: Mapping[str, Any]) -> list[str]:
        """What no node accepts in `changes`, each saying what and why."""
        problems = self._table.problems(changes)
        clock = self._node.resolve_topic_name('/clock')
        if changes.get('use_sim_time') is True and not self._node.count_publishers(clock):
            problems.append(f'use_sim_time = true refused: nobody publishes {clock}, so this '
                            "node's time would stand still and no timeout would fire (start "
                            'the clock first)')
        return problems

    def _callback(self, params) -> SetParametersResult:
        changes = {p.name: p.value for p in params}
        try:
            problem = '; '.join(self.refusals(changes)) or (
                self.apply(changes) if self.apply else None)
        except (ValueError, TypeError) as err:
            problem = str(err)
        except Exception as err:  # noqa: BLE001 -- a set must never end the node (ros/guard.py)
            problem = f'unexpected {type(err).__name__}: {err}'
            problems = getattr(self._node, 'problems', None)  # a SuiteNode's counter
            if problems is not None:
                problems.report(f'unexpected_{type(err).__name__}',
                                f'parameter change refused: {problem}')
        if problem and not any(name in problem for name in changes):  # say what was refused
            problem = ', '.join(f'{k} = {v!r}' for k, v in changes.items()) + f': {problem}'
        if problem:
            self._node.get_logger().error(f'parameter change refused: {problem}')
        return SetParametersResult(successful=not problem, reason=problem or '')


def _robot_table() -> ParameterTable:
    return ParameterTable(
        Parameter('robot', 'example-robot-data name (panda, ur5, ...) or URDF file path',
                  'panda', read_only=True),
        Parameter('robot_description', 'URDF XML string (as robot_state_publisher takes '
                  'it); wins over robot', '', read_only=True),
        Parameter('base_link', "first link of the chain ('' = the robot's usual base)", '',
                  read_only=True),
        Parameter('tip_link', "last link of the chain ('' = the robot's usual tip)", '',
                  read_only=True))


# Every node that needs the arm's model has these: one parameter file section (or
# robot_state_publisher's `robot_description`) configures them all.
ROBOT = _robot_table()


def load_robot(node: Node):
    """The RobotModel the ROBOT parameters (declared) name; StartupError with the reason
    when it cannot be loaded; a warning when its collision geometry could not be (nodes that
    need link surfaces then refuse)."""
    from contact_estimation.core.robot.robot_model import RobotModel, RobotModelError
    from contact_estimation.ros.node_main import StartupError
    try:
        model = RobotModel.load(*robot_arguments(node))
    except (RobotModelError, OSError) as err:
        raise StartupError(f'{node.get_name()}: cannot load the robot: {err}') from err
    if model.geometry_error:
        node.get_logger().warning(f'robot {model.name!r} without link geometry: '
                                  f'{model.geometry_error}')
    return model


def robot_arguments(node: Node) -> tuple[str, str, str]:
    """RobotModel.load's arguments from the ROBOT parameters (declared): the source (the
    URDF `robot_description`, else `robot`), the base and the tip link."""
    values = ROBOT.values(node)
    return (values['robot_description'] or values['robot'], values['base_link'],
            values['tip_link'])


def check_joint_counts(node: Node, table: ParameterTable, robot) -> None:
    """StartupError naming the node, the parameter and the fix when a per-joint parameter
    (a row with `per_joint`) has neither one value (`per_joint` of them) nor one per joint
    of `robot`: a file sized for another arm."""
    from contact_estimation.ros.node_main import StartupError
    values = ROBOT.values(node)
    source = 'robot_description' if values['robot_description'] else values['robot']
    for row in table.rows:
        if not row.per_joint:
            continue
        count = len(node.get_parameter(row.name).value)
        if count not in (row.per_joint, row.per_joint * robot.n):
            raise StartupError(
                f'{node.get_name()}: {row.name} has {count} values but {robot.name} has '
                f'{robot.n} joints: give {row.per_joint}, or {row.per_joint * robot.n} '
                f'({row.per_joint} per joint, in the order {", ".join(robot.joint_names)}); '
                f'a file `contact-estimation calibrate` or `identify` made for another arm: '
                f'make it again with --robot {source}')
