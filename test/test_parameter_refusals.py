"""Parameters all or nothing, and no value that switches a safety function off (issue 19):
a refused set changes nothing inside the node; 1e308 thresholds, gains and gates, a 1e308
observer gain and negative gear ratios are refused unless a ceiling is raised explicitly."""
import os

import pytest
from rclpy.parameter import Parameter

from contact_estimation.nodes.collision_detector import CollisionDetectorNode
from contact_estimation.nodes.contact_localizer import ContactLocalizerNode
from contact_estimation.nodes.joint_state_listener import JointStateListenerNode
from contact_estimation.nodes.proximity_monitor import ProximityMonitorNode
from contact_estimation.nodes.residual_node import ResidualNode

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config')


def make(node_class, name, context):
    return node_class(context=context, cli_args=[
        '--ros-args', '--params-file', os.path.join(CONFIG, f'{name}.yaml')])


def refused(node, **values) -> bool:
    """Set `values` at once (atomically); True when the node refused them."""
    return not node.set_parameters_atomically(
        [Parameter(k, value=v) for k, v in values.items()]).successful


@pytest.mark.parametrize('good', [{'reaction_time': 2.0}, {'body_timeout': 5.0}])
def test_a_refused_set_changes_nothing_in_the_proximity_monitor(context, good):
    monitor = make(ProximityMonitorNode, 'proximity_monitor', context)
    try:
        before = monitor.monitor.config
        assert refused(monitor, **good, **{'lidar.rpy': [0.0, 0.0, 0.0, 0.0]})
        assert monitor.monitor.config is before
        name, value = next(iter(good.items()))
        assert monitor.value(name) != value
        assert not refused(monitor, **good)  # alone it is fine, and taken
        assert getattr(monitor.monitor.config, name) > getattr(before, name)
    finally:
        monitor.destroy_node()


@pytest.mark.parametrize('name', ['thresholds_position', 'thresholds_force', 'threshold_max',
                                  'speed_gain', 'acceleration_gain'])
def test_detector_values_that_switch_detection_off_are_refused_unless_the_ceiling_is_raised(
        context, name):
    detector = make(CollisionDetectorNode, 'collision_detector', context)
    try:
        before = detector.detector.config
        assert refused(detector, **{name: [1e308]})
        assert detector.detector.config is before
        assert refused(detector, **{name: [150.0]})
        values = {name: [150.0], 'threshold_ceiling': 200.0}
        if name.startswith('thresholds'):
            values['threshold_max'] = [150.0]
        assert not refused(detector, **values)
    finally:
        detector.destroy_node()


@pytest.mark.parametrize('node_class, name, values', [
    (ContactLocalizerNode, 'contact_localizer', {'gate_thresholds': [1e308]}),
    (ResidualNode, 'residual_node', {'observer_gain': [1e308]}),
    (JointStateListenerNode, 'joint_state_listener', {'gear_ratios': [-100.0]}),
    (JointStateListenerNode, 'joint_state_listener', {'torque_constants': [-0.1]})])
def test_values_that_defeat_estimation_are_refused(context, node_class, name, values):
    node = make(node_class, name, context)
    try:
        assert refused(node, **values)
        key, value = next(iter(values.items()))
        assert node.value(key) != value
    finally:
        node.destroy_node()
