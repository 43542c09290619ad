"""core/per_joint.py: the one reading of "one value for every joint, or one per joint"."""
import numpy as np
import pytest

from contact_estimation.core.per_joint import per_joint


def test_one_value_applies_to_every_joint_and_n_values_one_each():
    np.testing.assert_array_equal(per_joint('gain', 2.0, 3), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(per_joint('gain', [1.0, 2.0, 3.0], 3), [1.0, 2.0, 3.0])


def test_rows_of_a_width_apply_to_every_joint_or_come_one_per_joint_flat():
    rows = per_joint('friction', [1.0, 2.0], 3, width=2)
    assert rows.shape == (3, 2) and (rows == [1.0, 2.0]).all()
    flat = per_joint('friction', np.arange(6.0), 3, width=2)
    np.testing.assert_array_equal(flat, [[0, 1], [2, 3], [4, 5]])


@pytest.mark.parametrize('value, kwargs, message', [
    ([1.0, 2.0], {}, r'gain: expected 1 or 3 values \(one for every joint or one per joint\), '
     'got 2'),
    ([1.0, 2.0, 3.0], {'width': 2}, 'expected 2 or 3 × 2 values'),
    ([1.0, np.nan, 1.0], {}, r'gain\[1\] = nan is invalid: must be finite'),
    ([1.0, 0.0, 1.0], {'low': 0.0, 'strict': True}, r'gain\[1\] = 0 is invalid: .* > 0'),
    ([1.0, 9.0, 1.0], {'high': 5.0, 'high_name': 'ceiling'}, 'above ceiling = 5'),
])
def test_a_bad_value_is_refused_naming_the_parameter_and_the_joint(value, kwargs, message):
    with pytest.raises(ValueError, match=message):
        per_joint('gain', value, 3, **kwargs)
