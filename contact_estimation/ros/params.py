"""One declarative parameter table per node: the declaration, the validation and the docs.

generate_parameter_library's idea, in Python (it is not on PyPI): each node lists its
parameters once, a `Parameter` row each (name, default, description, range or choices, values
per joint or in all, what of the robot a string names, read-only, and the core field it
feeds). A setting of core is declared once, on the field of the config it feeds
(core/settings.setting); `rows(Config)` makes its rows. A parameter of the node itself (a
rate, a timeout of its own) is a `Parameter` row in the node's table.
`ParameterTable.declare` declares them all on the node, `check` checks their values at start,
`fields` builds the core config from them, `markdown` writes docs/parameters.md, and
test/test_node_defaults.py checks config/<node>.yaml against the table.

Names are grouped with dots (`time_scaling.alpha`); a table's `renamed` maps old names to new
ones, so that a parameter file with an old name is refused with the new one (ros/suite_node.py).

One check, `Parameter.problem`, runs on every value at start (`check`) and on every run-time
set (`ParameterGuard`), and names the parameter, the value and what it allows: a number
(every number of an array) finite and within the row's range; an array of `size` values,
of `per_joint` or that many per joint of the robot, or of at most MAX_VALUES; a string among
the choices; a link or a sensor frame (`names`) checked against the robot model. rclpy's
descriptor ranges (scalars only) say the same to `ros2 param describe`. Values reach the
check as lists, tuples or array.array (what the parameter service gives).
"""
from __future__ import annotations

import array
import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                SetParametersResult)
from rclpy.node import Node

from contact_estimation.core.settings import (DURATION, LINK, SENSOR_FRAME, TIMEOUT, WINDOW,
                                              bounds, setting_of, shown)
from contact_estimation.core.settings import problem as core_problem


# Values an array row without `per_joint` or `size` holds at most: far more than any arm needs
# (n × k friction parameters, m × n waypoints, a skeleton's keypoints), far fewer than the
# 100 000 a careless set sent (issue 36).
MAX_VALUES = 10_000
# A sensor's frame_id: letters, digits, _ . - and /, as ROS and TF name frames (one leading /
# is stripped, as tf2 does).
_FRAME_NAME = re.compile(r'/?[A-Za-z0-9_][A-Za-z0-9_./-]*')


@dataclass(frozen=True)
class Parameter:
    """One parameter: `field` = (core config class, field name) it feeds, or None when the
    node itself uses it. `per_joint`: values per joint (a list of that many for every joint,
    or that many per joint; 0: not per joint); `size`: exactly that many values (a vector);
    `names`: core/settings.LINK or SENSOR_FRAME, what of the robot a string names. A number
    (or each number of a list) needs a `range`."""

    name: str
    description: str
    default: Any
    range: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None
    per_joint: int = 0
    read_only: bool = False
    field: tuple[type, str] | None = None
    timing: str = ''  # core/settings.WINDOW, TIMEOUT or DURATION: ros/input_rate.py logs it
    size: int = 0
    names: str = ''

    def __post_init__(self):
        default = self.default
        if isinstance(default, tuple):
            default = list(default)
        if self.per_joint and not isinstance(default, list):
            default = [default]
        if isinstance(default, list) and not default:
            raise ValueError(f'{self.name}: an empty list default has no ROS type')
        object.__setattr__(self, 'default', default)
        if self._numbers and self.range is None:
            raise ValueError(f'{self.name}: a number needs a range')
        if self.names not in ('', LINK, SENSOR_FRAME):
            raise ValueError(f'{self.name}: names {self.names!r} is not {LINK!r} or '
                             f'{SENSOR_FRAME!r}')
        problem = self.problem(default)
        if problem:
            raise ValueError(f'the default breaks the row: {problem}')

    @property
    def _sample(self) -> Any:
        return self.default[0] if isinstance(self.default, list) else self.default

    @property
    def _numbers(self) -> bool:
        """Whether its values are numbers (int or float, not bool)."""
        return isinstance(self._sample, (int, float)) and not isinstance(self._sample, bool)

    @property
    def type_name(self) -> str:
        """Its ROS parameter type, as `ros2 param describe` names it."""
        name = {bool: 'bool', int: 'integer', float: 'double', str: 'string'}[type(self._sample)]
        return f'{name} array' if isinstance(self.default, list) else name

    @property
    def allowed(self) -> str:
        """The values it allows, as the docs and `ros2 param describe` say it ('' = any)."""
        each = ' each' if isinstance(self.default, list) else ''
        if self.choices is not None:
            return ', '.join(f'`{choice}`' for choice in self.choices) + each
        if self._numbers:
            return f'{bounds(self.range)}{each}'
        if self.names == LINK:
            return "a link the joints move ('' = tip_link)"
        if self.names == SENSOR_FRAME:
            return 'a frame name, not one the joints move'
        return ''

    @property
    def count(self) -> str:
        """How many values it takes, for the docs ('' = one)."""
        if self.per_joint:
            k = 'one' if self.per_joint == 1 else str(self.per_joint)
            return f'{k}, or {k} per joint'
        if self.size:
            return str(self.size)
        return f'up to {MAX_VALUES}' if isinstance(self.default, list) else ''

    def descriptor(self) -> ParameterDescriptor:
        descriptor = ParameterDescriptor(description=self.description, read_only=self.read_only)
        if self._numbers:
            low, high = self.range
            if isinstance(self._sample, int) and not isinstance(self.default, list):
                descriptor.integer_range = [
                    IntegerRange(from_value=int(low), to_value=int(high), step=0)]
            elif not isinstance(self.default, list):
                descriptor.floating_point_range = [
                    FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)]
        constraints = [f'{self.count} values' if self.count else '',
                       self.allowed.replace('`', '')]
        descriptor.additional_constraints = ': '.join(filter(None, constraints))
        return descriptor

    def problem(self, value: Any, robot=None) -> str | None:
        """Why `value` breaks this row (None when it does not), naming the parameter, the
        value and what the row allows: how many values it has, a number not finite or
        outside the range, a string not among the choices or not what `names` says. What
        depends on the arm, the values per joint and the links and frames, is checked
        against `robot` (a RobotModel; without it, as for a row's default, it is not)."""
        listed = isinstance(value, (list, tuple, array.array))
        count = self._count_problem(len(value), robot) if listed else None
        if count:  # before any element is read: a count refused costs nothing
            return f'{self.name} = {shown(value)}: {count}'
        bounded = core_problem(self.name, value, self.range if self._numbers else None,
                               self.choices)
        if bounded or self.choices is not None or self._numbers:
            return bounded
        if self.names and robot is not None:
            values = value if listed else [value]
            return next(filter(None, (self._name_problem(x, robot) for x in values)), None)
        return None

    def _count_problem(self, count: int, robot) -> str | None:
        """Why an array of `count` values is not as many as the row takes (None when it
        is): exactly `size`, `per_joint` or that many per joint of `robot`, or at most
        MAX_VALUES."""
        values = f'{count} value' + ('' if count == 1 else 's')
        if self.size and count != self.size:
            return f'{values}, but it takes exactly {self.size}'
        if self.per_joint and robot is not None and count not in (
                self.per_joint, self.per_joint * robot.n):
            return (f'{values}, but {robot.name} has {robot.n} joints: give '
                    f'{self.per_joint}, or {self.per_joint * robot.n} ({self.per_joint} per '
                    f'joint, in the order {", ".join(robot.joint_names)}; a file '
                    '`contact-estimation calibrate` or `identify` made for another arm? make '
                    f'it again with --robot {robot.name})')
        if count > MAX_VALUES:
            return f'{values}, but it takes at most {MAX_VALUES}'
        return None

    def _name_problem(self, value: str, robot) -> str | None:
        """Why string `value` is not what `names` says of `robot` (None when it is)."""
        if value == '':
            return None
        if self.names == LINK:
            if value in robot.link_joint:
                return None
            return (f'{self.name} = {shown(value)}: not a link the joints of {robot.name} '
                    f"move: '' ({robot.tip_link}) or one of {', '.join(robot.link_joint)}")
        if not _FRAME_NAME.fullmatch(value):
            return (f'{self.name} = {shown(value)}: not a frame name (letters, digits, '
                    "_ . - and /), nor ''")
        if value.lstrip('/') in robot.moving_frames:
            return (f'{self.name} = {shown(value)}: a frame the joints of {robot.name} move, '
                    "never at one pose in the base frame: give the sensor's own frame (its "
                    "messages' frame_id), fixed in the base frame, or ''")
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
                              declared.timing, declared.size, declared.names))
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

    def problems(self, values: Mapping[str, Any], robot) -> list[str]:
        """Why values by name break their rows (Parameter.problem, against `robot`): the one
        check of a value, at start (`check`) and of every run-time set (ParameterGuard)."""
        return [problem for name, value in values.items() if name in self._by_name
                for problem in [self._by_name[name].problem(value, robot)] if problem]

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
        """Declare every row on `node` at its default or the value a parameter file gives
        (rclpy refuses a number outside its row's range: ParameterException naming it);
        `check` then checks every value as a run-time set is."""
        for row in self.rows:
            node.declare_parameter(row.name, row.default, row.descriptor())

    def check(self, node: Node, robot) -> None:
        """StartupError naming `node` and each declared value that breaks its row
        (`problems`, against `robot`, the RobotModel the node runs with)."""
        problems = self.problems(self.values(node), robot)
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
    what no parameter may do (a value that breaks its row: Parameter.problem, against the
    node's `robot`, as at start; `use_sim_time` on while nobody publishes /clock: the node's
    time would stand still, and with it every timeout), then asks `apply({name: value})`,
    the node's own check and use of the values (None to accept or a message to refuse). A
    refused set leaves every parameter as it was; the message, which names the values
    refused, goes back to the caller (`ros2 param set`)."""

    def __init__(self, node: Node, table: ParameterTable, robot):
        self._node, self._table, self._robot = node, table, robot
        self.apply: Callable[[dict[str, Any]], str | None] | None = None
        node.add_on_set_parameters_callback(self._callback)

    def refusals(self, changes: Mapping[str, Any]) -> list[str]:
        """What no node accepts in `changes`, each saying what and why."""
        problems = self._table.problems(changes, self._robot)
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
