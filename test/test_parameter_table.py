"""ros/params.py's tables without a node: rows made from core settings, configs built,
values checked (against the Panda), docs written."""
import array
import math
from dataclasses import dataclass

import pytest

from contact_estimation.core.settings import LINK, SENSOR_FRAME, setting
from contact_estimation.ros.params import MAX_VALUES, Parameter, ParameterTable, rows


@dataclass(frozen=True)
class Filter:
    gain: float = setting(2.0, 'how strong, 1/s', range=(0.0, 10.0))
    window: tuple = setting((0.1, 0.2), 'span, s', range=(0.0, 1.0), name='window_duration')
    centre: tuple = setting((0.0, 0.0, 0.0), 'x y z, m', range=(-1.0, 1.0), size=3)
    link: str = setting('', "the link it is on ('' = tip_link)", names=LINK)
    frame: str = setting('', "the sensor's frame_id", names=SENSOR_FRAME)
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
                                'filter.centre': [0.0, 0.0, 0.0], 'filter.link': '',
                                'filter.frame': '', 'filter.kind': 'fast',
                                'filter.limits': [1.0], 'rate': 50.0}
    assert TABLE['filter.window_duration'].type_name == 'double array'
    assert TABLE['filter.limits'].per_joint == 1 and TABLE['filter.gain'].per_joint == 0


def test_the_rows_build_the_core_config_which_validates_once():
    values = {**TABLE.defaults(), 'filter.gain': 3.0}
    assert TABLE.build(Filter, values) == Filter(3.0, [0.1, 0.2], [0.0, 0.0, 0.0], '', '',
                                                 'fast', [1.0])
    assert TABLE.feeding(Filter) == ('filter.gain', 'filter.window_duration', 'filter.centre',
                                     'filter.link', 'filter.frame', 'filter.kind',
                                     'filter.limits')
    with pytest.raises(ValueError, match='gain = -1'):
        TABLE.build(Filter, {**values, 'filter.gain': -1.0})


def test_a_value_not_among_the_choices_or_an_element_out_of_range_is_named(robot):
    assert TABLE.problems({'filter.kind': 'slow', 'filter.limits': [0.5] * 7}, robot) == []
    assert TABLE.problems({'filter.kind': 'medium', 'filter.limits': [0.5, 4.0] + [1.0] * 5},
                          robot) == [
        "filter.kind = 'medium': 'medium' is not one of fast, slow",
        'filter.limits = [0.5, 4.0, 1.0, 1.0, 1.0, 1.0, … (7 values)]: 4.0 outside 0 … 3 '
        '(each element)']


@pytest.mark.parametrize('name, value, refusal', [
    ('filter.gain', math.nan, 'filter.gain = nan: nan outside 0 … 10'),
    ('filter.gain', math.inf, 'filter.gain = inf: inf outside 0 … 10'),
    ('rate', 1e308, 'rate = 1e+308: 1e+308 outside 1 … 100'),
    # the parameter service gives arrays as array.array (`ros2 param set`, issue 36)
    ('filter.limits', array.array('d', [1e308]), 'filter.limits = [1e+308]: 1e+308 outside'),
    ('filter.window_duration', [0.1, -math.inf], '-inf outside 0 … 1 (each element)'),
    ('filter.limits', [1.0, 1.0], 'filter.limits = [1.0, 1.0]: 2 values, but panda has 7 '
                                  'joints: give 1, or 7 (1 per joint, in the order panda_joint1'),
    ('filter.limits', [1.0] * 100_000, '… (100000 values)]: 100000 values, but panda has 7'),
    ('filter.centre', [0.0, 0.0], 'filter.centre = [0.0, 0.0]: 2 values, but it takes exactly 3'),
    ('filter.window_duration', [0.1] * (MAX_VALUES + 1),
     f'{MAX_VALUES + 1} values, but it takes at most {MAX_VALUES}'),
    ('filter.link', 'nowhere', "filter.link = 'nowhere': not a link the joints of panda move: "
                               "'' (panda_hand) or one of panda_link1, "),
    ('filter.link', 'panda_link0', 'not a link the joints of panda move'),  # the base
    ('filter.frame', 'panda_link3', "filter.frame = 'panda_link3': a frame the joints of "
                                    'panda move, never at one pose in the base frame'),
    ('filter.frame', '/panda_hand_tcp', 'a frame the joints of panda move'),
    ('filter.frame', 'a b', "filter.frame = 'a b': not a frame name"),
    ('filter.frame', '/' * 1000, "filter.frame = '//////"),
])
def test_every_value_that_breaks_its_row_is_refused_naming_it_the_value_and_the_rule(
        robot, name, value, refusal):
    problems = TABLE.problems({name: value}, robot)
    assert len(problems) == 1 and refusal in problems[0], problems
    assert len(problems[0]) < 600, 'a refusal shows a long value cut short'


@pytest.mark.parametrize('name, value', [
    ('filter.link', ''), ('filter.link', 'panda_link4'), ('filter.link', 'panda_hand_tcp'),
    ('filter.frame', ''), ('filter.frame', 'lidar_link'), ('filter.frame', '/camera/depth'),
    ('filter.frame', 'panda_link0'),  # fixed in the base frame
    ('filter.limits', array.array('d', [3.0])), ('filter.centre', (1.0, -1.0, 0.0))])
def test_values_within_their_rows_pass(robot, name, value):
    assert TABLE.problems({name: value}, robot) == []


def test_tables_add_up_and_refuse_a_name_twice():
    more = TABLE + ParameterTable(Parameter('extra', 'one more', 'x'), renamed={'old': 'extra'})
    assert more.names[-1] == 'extra' and more.renamed == {'filter_gain': 'filter.gain',
                                                          'old': 'extra'}
    with pytest.raises(ValueError, match='twice'):
        TABLE + TABLE


@pytest.mark.parametrize('row, message', [
    (dict(name='a', description='', default=[]), 'empty list'),
    (dict(name='a', description='', default='x', choices=('y', 'z')), 'not one of y, z'),
    (dict(name='a', description='', default=[1.0]), 'a number needs a range'),
    (dict(name='a', description='', default=3), 'a number needs a range'),
    (dict(name='a', description='', default=[0.0], range=(0.0, 1.0), size=3), 'exactly 3'),
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
