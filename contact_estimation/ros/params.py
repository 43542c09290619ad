"""One declarative parameter table per node: the declaration, the validation and the docs.

generate_parameter_library's idea, in Python (it is not on PyPI): each node lists its
parameters once, a `Parameter` row each (name, default, description, range, read-only, and
the core field it feeds). `ParameterTable.declare` declares them all on the node (values out of
range are refused, naming the parameter), `fields` builds the core config from their
values, `markdown` writes docs/parameters.md, and test/test_node_defaults.py checks
config/<node>.yaml against the table. A new parameter is one row.

Names are grouped with dots (`time_scaling.alpha`); a table's `renamed` maps old names to new
ones, so that a parameter file with an old name is refused with the new one (ros/suite_node.py).
A default is the core's: omitted, it is the dataclass default of the field the row feeds.

A row's range bounds a number, or each element of an array (rclpy checks only scalars; the
elements are checked here, at start and by `ParameterGuard` at run time, naming the value).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                SetParametersResult)
from rclpy.node import Node

_FROM_FIELD = object()  # a row's default is the dataclass default of its field


@dataclass(frozen=True)
class Parameter:
    """One parameter: `field` = (core config class, field name) it feeds, or None when the
    node itself uses it (a rate, a timeout of its own)."""

    name: str
    description: str
    default: Any = _FROM_FIELD
    range: tuple[float, float] | None = None
    read_only: bool = False
    field: tuple[type, str] | None = None
    per_joint: int = 0  # values per joint (a list of one, or of this many per joint); 0: not

    def __post_init__(self):
        default = self.default
        if default is _FROM_FIELD:
            default = _field_default(self.name, self.field)
        if isinstance(default, tuple):
            default = list(default)
        if isinstance(default, list) and not default:
            raise ValueError(f'{self.name}: an empty list default has no ROS type')
        object.__setattr__(self, 'default', default)

    @property
    def type_name(self) -> str:
        """Its ROS parameter type, as `ros2 param describe` names it."""
        sample = self.default[0] if isinstance(self.default, list) else self.default
        name = {bool: 'bool', int: 'integer', float: 'double', str: 'string'}[type(sample)]
        return f'{name} array' if isinstance(self.default, list) else name

    def descriptor(self) -> ParameterDescriptor:
        descriptor = ParameterDescriptor(description=self.description, read_only=self.read_only)
        if self.range is not None:
            low, high = self.range
            if isinstance(self.default, bool):
                pass
            elif isinstance(self.default, int):
                descriptor.integer_range = [
                    IntegerRange(from_value=int(low), to_value=int(high), step=0)]
            elif isinstance(self.default, float):
                descriptor.floating_point_range = [
                    FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)]
            each = 'each element of ' if isinstance(self.default, list) else ''
            descriptor.additional_constraints = f'{low} <= {each}{self.name} <= {high}'
        return descriptor

    def out_of_range(self, value: Any) -> str | None:
        """Why the elements of array `value` break this row's range (None when they do not,
        or for a scalar: rclpy checks those against the descriptor)."""
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


def _field_default(name: str, field: tuple[type, str] | None) -> Any:
    if field is None:
        raise ValueError(f'{name}: a parameter of the node itself needs a default')
    config, field_name = field
    for f in dataclasses.fields(config):
        if f.name == field_name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise ValueError(f'{name}: {config.__name__}.{field_name} has no default')
    raise ValueError(f'{name}: {config.__name__} has no field {field_name!r}')


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

    def out_of_range(self, values: Mapping[str, Any]) -> list[str]:
        """Why array values by name break their rows' element ranges (ranges of scalars
        rclpy checks itself)."""
        return [problem for name, value in values.items() if name in self._by_name
                for problem in [self._by_name[name].out_of_range(value)] if problem]

    def defaults(self) -> dict[str, Any]:
        return {row.name: row.default for row in self.rows}

    def declare(self, node: Node) -> None:
        """Declare every row on `node`: a value from a parameter file out of the row's range
        is refused by rclpy (ParameterException naming the parameter and the range)."""
        for row in self.rows:
            node.declare_parameter(row.name, row.default, row.descriptor())
        problems = self.out_of_range(self.values(node))
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
        lines = ['| parameter | type | default | range | description |',
                 '|---|---|---|---|---|']
        for row in self.rows:
            low_high = '' if row.range is None else f'{row.range[0]:g} … {row.range[1]:g}'
            if low_high and isinstance(row.default, list):
                low_high += ' each'
            fed = '' if row.field is None else f' → `{row.field[0].__name__}.{row.field[1]}`'
            read_only = ' *(read-only)*' if row.read_only else ''
            description = row.description.replace('|', '\\|')
            lines.append(f'| `{row.name}` | {row.type_name} | `{row.default!r}` | {low_high} '
                         f'| {description}{read_only}{fed} |')
        if self.renamed:
            lines.append('')
            lines.append('Renamed (a parameter file with the old name is refused): ' + ', '.join(
                f'`{old}` → `{new}`' for old, new in self.renamed.items()) + '.')
        return '\n'.join(lines)


class ParameterGuard:
    """The one run-time check of a node's parameter sets, before anything changes: refuses
    what no parameter may do (array elements outside their row's range; `use_sim_time` on
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
        problems = self._table.out_of_range(changes)
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


def payload_table(read_only: bool) -> ParameterTable:
    """`payload.*` (core/robot/payload.Payload): residual_node, ft_contact_estimator and
    sim_cobot have the same rows, so one parameter file block configures all three."""
    from contact_estimation.core.robot.payload import Payload
    return ParameterTable(
        Parameter('payload.mass', 'mass of the tool or part on payload.link, kg (0 = none): '
                  'part of the arm, so carrying it is not a contact', range=(0.0, 1000.0),
                  read_only=read_only, field=(Payload, 'mass')),
        Parameter('payload.centre_of_mass', 'payload centre of mass, m, in the frame of '
                  'payload.link (contact-estimation identify payload estimates it and the '
                  'mass)', range=(-10.0, 10.0), read_only=read_only,
                  field=(Payload, 'centre_of_mass')),
        Parameter('payload.link', "link carrying the payload ('' = tip_link)",
                  read_only=read_only, field=(Payload, 'link')))


def load_robot(node: Node):
    """The RobotModel the ROBOT parameters (declared) name; StartupError with the reason
    when it cannot be loaded; a warning when its collision geometry could not be (nodes that
    need link surfaces then refuse)."""
    from contact_estimation.core.robot.robot_model import RobotModel, RobotModelError
    from contact_estimation.ros.node_main import StartupError
    values = ROBOT.values(node)
    try:
        model = RobotModel.load(values['robot_description'] or values['robot'],
                                values['base_link'], values['tip_link'])
    except (RobotModelError, OSError) as err:
        raise StartupError(f'{node.get_name()}: cannot load the robot: {err}') from err
    if model.geometry_error:
        node.get_logger().warning(f'robot {model.name!r} without link geometry: '
                                  f'{model.geometry_error}')
    return model


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
