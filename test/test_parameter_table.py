"""ros/params.py's tables without a node: rows made from core settings, configs built,
values checked, docs written."""
from dataclasses import dataclass

import pytest

from contact_estimation.core.settings import setting
from contact_estimation.ros.params import Parameter, ParameterTable, rows


@dataclass(frozen=True)
class Filter:
    gain: float = setting(2.0, 'how strong, 1/s', range=(0.0, 10.0))
    window: tuple = setting((0.1, 0.2), 'span, s', name='window_duration')
    kind: str = setting('fast', 'which filter', choices=('fast', 'slow'))
    limits: float | tuple = setting(1.0, 'largest step, rad', range=(0.0, 3.0), per_joint=1)
    order: int = 2  # not a setting: no row

    def __post_init__(self):
        if self.gain <= 0:
            raise ValueError(f'gain = {self.gain}: must be > 0')


TABLE = rows(Filter, 'filter.') + ParameterTable(
    Parameter('rate', 'checks per second, Hz', 50.0, (1.0, 100.0), read_only=True),
    renamed={'filter_gain': 'filter.gain'})


def test_a_setting_declared_on_a_core_field_is_a_row_at_its_default():
    assert TABLE.defaults() == {'filter.gain': 2.0, 'filter.window_duration': [0.1, 0.2],
                                'filter.kind': 'fast', 'filter.limits': [1.0], 'rate': 50.0}
    assert TABLE['filter.window_duration'].type_name == 'double array'
    assert TABLE['filter.limits'].per_joint == 1 and TABLE['filter.gain'].per_joint == 0


def test_the_rows_build_the_core_config_which_validates_once():
    values = {**TABLE.defaults(), 'filter.gain': 3.0}
    assert TABLE.build(Filter, values) == Filter(3.0, [0.1, 0.2], 'fast', [1.0])
    assert TABLE.feeding(Filter) == ('filter.gain', 'filter.window_duration', 'filter.kind',
                                     'filter.limits')
    with pytest.raises(ValueError, match='gain = -1'):
        TABLE.build(Filter, {**values, 'filter.gain': -1.0})


def test_a_value_not_among_the_choices_or_an_element_out_of_range_is_named():
    assert TABLE.problems({'filter.kind': 'slow', 'filter.limits': [0.5, 2.0]}) == []
    assert TABLE.problems({'filter.kind': 'medium', 'filter.limits': [0.5, 4.0]}) == [
        "filter.kind = 'medium': 'medium' is not one of fast, slow",
        'filter.limits = [0.5, 4.0]: 4 outside 0 … 3 (each element)']


def test_tables_add_up_and_refuse_a_name_twice():
    more = TABLE + ParameterTable(Parameter('extra', 'one more', 'x'), renamed={'old': 'extra'})
    assert more.names[-1] == 'extra' and more.renamed == {'filter_gain': 'filter.gain',
                                                          'old': 'extra'}
    with pytest.raises(ValueError, match='twice'):
        TABLE + TABLE


@pytest.mark.parametrize('row, message', [
    (dict(name='a', description='', default=[]), 'empty list'),
    (dict(name='a', description='', default='x', choices=('y', 'z')), 'not one of y, z'),
])
def test_a_row_without_a_usable_default_is_refused_at_import(row, message):
    with pytest.raises(ValueError, match=message):
        Parameter(**row)


def test_a_setting_whose_default_is_not_among_its_choices_is_refused_at_import():
    with pytest.raises(ValueError, match='not one of'):
        setting('medium', 'which filter', choices=('fast', 'slow'))


def test_the_docs_show_every_row_its_allowed_values_and_the_renamed_names():
    text = TABLE.markdown()
    assert ('| `filter.gain` | double |  | `2.0` | 0 … 10 | how strong, 1/s → `Filter.gain` |'
            in text)
    assert '| `filter.kind` | string |  | `\'fast\'` | `fast`, `slow` | which filter' in text
    assert ('| `filter.limits` | double array | one, or one per joint | `[1.0]` | 0 … 3 each '
            in text)
    assert '*(read-only)*' in text and '`filter_gain` → `filter.gain`' in text
