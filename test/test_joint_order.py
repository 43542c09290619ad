"""Joint names → model order: core/chain/joint_order.JointOrder and
ros/joint_states.JointStateReader."""
import itertools

import numpy as np
import pytest
from sensor_msgs.msg import JointState

from contact_estimation.core.chain.joint_order import JointOrder
from contact_estimation.core.input_rejected import InputRejected
from contact_estimation.ros.joint_states import JointStateReader

MODEL = ['a', 'b', 'c']


def test_mapping_of_a_shuffled_message_with_extra_and_ignored_names():
    mapping = JointOrder(MODEL, ignored=['finger']).map(['finger', 'c', 'x', 'a', 'b'])
    np.testing.assert_array_equal(mapping.joints, [2, 0, 1])
    np.testing.assert_array_equal(mapping.rows, [1, 3, 4])
    assert mapping.unknown == ('x',)
    values = np.array([9.0, 3.0, 7.0, 1.0, 2.0])
    np.testing.assert_array_equal(values[mapping.model_order], [1.0, 2.0, 3.0])


def test_a_subset_maps_its_joints_but_has_no_model_order():
    mapping = JointOrder(MODEL).map(['b'])
    np.testing.assert_array_equal(mapping.joints, [1])
    assert mapping.model_order is None


def test_the_cache_stays_bounded_and_still_maps_right():
    order = JointOrder(MODEL + ['d', 'e'], cache_size=8)
    for names in itertools.permutations(order.joint_names):
        mapping = order.map(names)
        assert [names[r] for r in mapping.model_order] == list(order.joint_names)
    assert order.cached <= 8


def _message(names, position, velocity=None, effort=None):
    n = len(position)
    return JointState(name=names, position=position,
                      velocity=velocity if velocity is not None else [0.0] * n,
                      effort=effort if effort is not None else [0.0] * n)


def test_reader_puts_values_in_model_order_and_takes_an_unnamed_message_as_model_order():
    reader = JointStateReader(MODEL)
    q, v, tau = reader.read(_message(['c', 'a', 'b'], [3.0, 1.0, 2.0], effort=[30.0, 10.0, 20.0]))
    np.testing.assert_array_equal(q, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(tau, [10.0, 20.0, 30.0])
    q, _, _ = reader.read(_message([], [1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(q, [1.0, 2.0, 3.0])


def test_reader_field_is_none_without_one_value_per_name():
    reader = JointStateReader(MODEL)
    msg = _message(['c', 'a', 'b'], [3.0, 1.0, 2.0], velocity=[])
    assert reader.field(msg, 'velocity', reader.order(msg)) is None


@pytest.mark.parametrize('reader, msg, kind', [
    (JointStateReader(MODEL), _message(['a', 'b'], [1.0, 2.0]), 'wrong_joints'),
    (JointStateReader(MODEL, model_order_only=True), _message(['c', 'b', 'a'], [1.0] * 3),
     'wrong_joints'),
    (JointStateReader(MODEL), _message(MODEL, [1.0] * 3, velocity=[0.0]), 'wrong_size'),
    (JointStateReader(MODEL), _message(MODEL, [1.0, np.nan, 1.0]), 'not_finite'),
])
def test_reader_refuses_what_it_cannot_use_with_the_kind_of_problem(reader, msg, kind):
    with pytest.raises(InputRejected) as err:
        reader.read(msg)
    assert err.value.kind == kind


def test_reader_gives_none_for_an_optional_field_missing_or_not_finite():
    reader = JointStateReader(MODEL)
    msg = _message(MODEL, [1.0, np.nan, 1.0], velocity=[], effort=[1.0, 2.0, 3.0])
    q, v, tau = reader.read(msg, required=('effort',), optional=('position', 'velocity'))
    assert q is None and v is None
    np.testing.assert_array_equal(tau, [1.0, 2.0, 3.0])


def test_reader_passes_a_required_field_that_is_not_finite_when_asked_to():
    """The detector stops on a NaN residual: it must get it, not lose it as dropped."""
    reader = JointStateReader(MODEL)
    msg = _message(MODEL, [1.0] * 3, effort=[1.0, np.inf, 3.0])
    with pytest.raises(InputRejected):
        reader.read(msg, required=('effort',))
    _, _, tau = reader.read(msg, required=('effort',), finite=False)
    assert np.isinf(tau[1])
