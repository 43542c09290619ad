"""A scenario's scripted person (core/sim/person.py): its skeleton puts the part of its region
where the scenario says, as the proximity monitor reads it; a bad person is refused at load."""
import numpy as np
import pytest

from contact_estimation.core.contact.pfl import PflCheck, tracked_parts
from contact_estimation.core.contact.proximity import HumanModel
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.scenario import Scenario, ScenarioError


@pytest.mark.parametrize('region, part', [('hand_fingers', 'right_hand'),
                                          ('lower_arm_wrist', 'right_forearm'),
                                          ('upper_arm_elbow', 'right_upper_arm')])
def test_the_skeleton_puts_the_part_of_the_region_at_the_position(region, part):
    position = np.array([0.6, 0.1, 0.5])
    person = Scenario.from_dict({'people': [{'name': 'p', 'region': region,
                                             'position': position.tolist(),
                                             'reach': [-1.0, 0.0, -0.5]}]},
                                RobotModel.load('panda')).people[0]
    bodies = HumanModel().bodies(person.keypoints())
    centre = {b.name: b.centres.mean(axis=0) for b in bodies if b.box_centre is None}
    assert np.linalg.norm(centre[part] - position) < 0.02, centre[part]
    touched, _ = PflCheck().region_of(position, tracked_parts(bodies))
    assert touched == part
    assert person.part == part


@pytest.mark.parametrize('person, words', [
    ({'name': 'p', 'region': 'chest', 'position': [1, 0, 1], 'reach': [-1, 0, 0]}, 'chest'),
    ({'name': 'p', 'region': 'hand_fingers', 'position': [1, 0, 1], 'reach': [0, 0, -1]},
     'vertical'),
    ({'name': 'p', 'region': 'hand_fingers', 'position': [1, 0], 'reach': [-1, 0, 0]},
     'position'),
    ({'name': 'p', 'region': 'hand_fingers', 'position': [1, 0, 1], 'reach': [-1, 0, 0],
      'speed': 1}, 'speed')])
def test_a_bad_person_is_refused_at_load_naming_what(person, words):
    with pytest.raises(ScenarioError, match=words):
        Scenario.from_dict({'people': [person]}, RobotModel.load('panda'))
