"""Every node's declared parameter defaults (taken from core) are what config/ ships."""
import importlib
import inspect

import pytest
import yaml

from contact_estimation import manifest
from contact_estimation.ros.suite_node import SuiteNode

# Parameters rclpy declares on every node itself.
_RCLPY_PARAMETERS = {'use_sim_time', 'start_type_description_service'}


def _flat(tree: dict, prefix: str = '') -> dict:
    """Nested YAML parameters → {'a.b': value}, as ROS names them."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f'{prefix}{key}.'))
        else:
            flat[prefix + key] = value
    return flat


def _node_class(spec) -> type:
    module = importlib.import_module(spec.module)
    classes = [c for c in vars(module).values() if inspect.isclass(c)
               and issubclass(c, SuiteNode) and c.__module__ == module.__name__]
    assert len(classes) == 1, f'{spec.module}: one SuiteNode per node module'
    return classes[0]


@pytest.mark.parametrize('name', sorted(manifest.nodes()))
def test_the_shipped_parameter_file_holds_every_parameter_at_its_default(context, name):
    spec = manifest.node(name)
    with open(spec.parameters_path()) as f:
        shipped = _flat(yaml.safe_load(f)[name]['ros__parameters'])
    node = _node_class(spec)(context=context)  # no parameter file: the declared defaults
    try:
        declared = {n: node.get_parameter(n).value
                    for n in node._parameters if n not in _RCLPY_PARAMETERS}
    finally:
        node.destroy_node()
    assert set(shipped) == set(declared), name
    for parameter, value in shipped.items():
        default = declared[parameter]
        assert value == (list(default) if isinstance(default, (list, tuple)) else default), \
            f'{name}: {parameter} ships {value!r}, the node declares {default!r}'
