"""ros/params.py's tables without a node: defaults from core, configs built, docs written."""
from dataclasses import dataclass

import pytest

from contact_estimation.ros.params import Parameter, ParameterTable


@dataclass(frozen=True)
class Filter:
    gain: float = 2.0
    window: tuple = (0.1, 0.2)

    def __post_init__(self):
        if self.gain <= 0:
            raise ValueError(f'gain = {self.gain}: must be > 0')


TABLE = ParameterTable(
    Parameter('filter.gain', 'how strong, 1/s', range=(0.0, 10.0), field=(Filter, 'gain')),
    Parameter('filter.window', 'span, s', field=(Filter, 'window')),
    Parameter('rate', 'checks per second, Hz', 50.0, (1.0, 100.0), read_only=True),
    renamed={'filter_gain': 'filter.gain'})


def test_a_row_that_feeds_a_field_takes_the_core_default():
    assert TABLE.defaults() == {'filter.gain': 2.0, 'filter.window': [0.1, 0.2], 'rate': 50.0}
    assert TABLE['filter.window'].type_name == 'double array'


def test_the_rows_build_the_core_config_which_validates_once():
    values = {**TABLE.defaults(), 'filter.gain': 3.0}
    assert TABLE.build(Filter, values) == Filter(3.0, [0.1, 0.2])
    assert TABLE.feeding(Filter) == ('filter.gain', 'filter.window')
    with pytest.raises(ValueError, match='gain = -1'):
        TABLE.build(Filter, {**values, 'filter.gain': -1.0})


def test_tables_add_up_and_refuse_a_name_twice():
    more = TABLE + ParameterTable(Parameter('extra', 'one more', 'x'), renamed={'old': 'extra'})
    assert more.names[-1] == 'extra' and more.renamed == {'filter_gain': 'filter.gain',
                                                          'old': 'extra'}
    with pytest.raises(ValueError, match='twice'):
        TABLE + TABLE


@pytest.mark.parametrize('row, message', [
    (dict(name='a', description='no default and no field'), 'needs a default'),
    (dict(name='a', description='', field=(Filter, 'gains')), "no field 'gains'"),
    (dict(name='a', description='', default=[]), 'empty list'),
])
def test_a_row_without_a_usable_default_is_refused_at_import(row, message):
    with pytest.raises(ValueError, match=message):
        Parameter(**row)


def test_the_docs_show_every_row_its_range_and_the_renamed_names():
    text = TABLE.markdown()
    assert '| `filter.gain` | double | `2.0` | 0 … 10 | how strong, 1/s → `Filter.gain` |' in text
    assert '*(read-only)*' in text and '`filter_gain` → `filter.gain`' in text
