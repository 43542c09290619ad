"""Declared parameters with descriptors and ranges, validated at start and at run time."""
from __future__ import annotations

from typing import Any, Callable

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                SetParametersResult)
from rclpy.node import Node


def declare(node: Node, name: str, default: Any, description: str,
            low: float | None = None, high: float | None = None,
            read_only: bool = False) -> Any:
    """Declare `name` with a descriptor (and a range for numbers); return its value.

    Out-of-range values from a parameter file are refused by rclpy at declaration, with
    a message naming the parameter and the range.
    """
    descriptor = ParameterDescriptor(description=description, read_only=read_only)
    if low is not None and high is not None:
        if isinstance(default, bool):
            pass
        elif isinstance(default, int):
            descriptor.integer_range = [
                IntegerRange(from_value=int(low), to_value=int(high), step=0)]
        elif isinstance(default, float):
            descriptor.floating_point_range = [
                FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)]
        descriptor.additional_constraints = f'{low} <= {name} <= {high}'
    return node.declare_parameter(name, default, descriptor).value


def on_change(node: Node, apply: Callable[[dict[str, Any]], str | None]) -> None:
    """Call `apply({name: value})` on every run-time parameter change.

    `apply` returns None to accept or a message to refuse; a refused change leaves every
    parameter as it was and the message goes back to the caller (`ros2 param set`).
    """
    def callback(params) -> SetParametersResult:
        try:
            problem = apply({p.name: p.value for p in params})
        except (ValueError, TypeError) as err:
            problem = str(err)
        except Exception as err:  # noqa: BLE001 -- a set must never end the node (ros/guard.py)
            problem = f'unexpected {type(err).__name__}: {err}'
            problems = getattr(node, 'problems', None)  # a SuiteNode's counter
            if problems is not None:
                problems.report(f'unexpected_{type(err).__name__}',
                                f'parameter change refused: {problem}')
        if problem:
            node.get_logger().error(f'parameter change refused: {problem}')
        return SetParametersResult(successful=problem is None, reason=problem or '')
    node.add_on_set_parameters_callback(callback)


def declare_payload(node: Node, read_only: bool):
    """Declare `payload.mass`, `payload.centre_of_mass`, `payload.link` (core/robot/payload.py's
    defaults) and return the Payload they describe (ValueError if bad). residual_node and
    ft_contact_estimator share them, so one parameter file block configures both."""
    from contact_estimation.core.robot.payload import DEFAULTS, Payload
    declare(node, 'payload.mass', DEFAULTS['payload.mass'], 'mass of the tool or part on '
            'payload.link, kg (0 = none): part of the arm, so carrying it is not a contact',
            0.0, 1000.0, read_only)
    declare(node, 'payload.centre_of_mass', list(DEFAULTS['payload.centre_of_mass']),
            'payload centre of mass, m, in the frame of payload.link (contact-estimation '
            'identify payload estimates it and the mass)', read_only=read_only)
    declare(node, 'payload.link', DEFAULTS['payload.link'], "link carrying the payload "
            "('' = tip_link)", read_only=read_only)
    return Payload.from_parameters({name: node.get_parameter(name).value for name in DEFAULTS})


def declare_robot(node: Node):
    """Declare `robot`, `robot_description`, `base_link`, `tip_link` and load the RobotModel.

    Every node that needs the arm's model shares these four parameters, so one parameter
    file section (or `robot_description` from robot_state_publisher) configures them all.
    Raises StartupError with the reason when the model cannot be loaded; logs a warning when
    its collision geometry could not be (nodes that need link surfaces then refuse).
    """
    from contact_estimation.core.robot.robot_model import RobotModel, RobotModelError
    from contact_estimation.ros.node_main import StartupError
    robot = declare(node, 'robot', 'panda',
                    'example-robot-data name (panda, ur5, ...) or URDF file path', read_only=True)
    description = declare(node, 'robot_description', '',
                          'URDF XML string (as robot_state_publisher takes it); wins over robot',
                          read_only=True)
    base_link = declare(node, 'base_link', '',
                        "first link of the chain ('' = the robot's usual base)", read_only=True)
    tip_link = declare(node, 'tip_link', '',
                       "last link of the chain ('' = the robot's usual tip)", read_only=True)
    try:
        model = RobotModel.load(description or robot, base_link, tip_link)
    except (RobotModelError, OSError) as err:
        raise StartupError(f'{node.get_name()}: cannot load the robot: {err}') from err
    if model.geometry_error:
        node.get_logger().warning(f'robot {model.name!r} without link geometry: '
                                  f'{model.geometry_error}')
    return model
