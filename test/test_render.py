"""core/sim/render.py: the arm drawn offscreen with force arrows that reach their points, and
the framed PNG of the right size."""
import numpy as np
import pytest
from PIL import Image

from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim import render
from contact_estimation.core.sim.render import Arrow, render_unavailable

Q = np.array([0.3, -0.4, 0.2, -2.0, 0.3, 1.8, 0.5])
LINK = 'panda_link5'


@pytest.fixture(scope='module')
def robot():
    reason = render_unavailable()
    if reason:
        pytest.skip(reason)
    return RobotModel.load('panda')


def _push(robot, rgba=render.TRUTH_RGBA) -> Arrow:
    """35 N on the side of the forearm, into the surface (as config/scenarios/demo.yaml)."""
    rotation, translation = robot.link_pose(Q, LINK)
    return Arrow('truth', rotation @ np.array([0.055, 0.0, -0.13]) + translation,
                 rotation @ np.array([-35.0, 0.0, 0.0]), rgba)




def test_an_arrow_is_drawn_from_its_tail_to_its_point(robot):
    arrow = _push(robot)
    bare, _ = render.render_view(robot, Q, [Arrow('none', arrow.point, arrow.force,
                                                  (0, 0, 0, 0))])
    drawn, project = render.render_view(robot, Q, [arrow])
    assert drawn.shape == bare.shape == (render.HEIGHT, render.WIDTH, 3)
    tail = arrow.point - render.ARROW_PER_NEWTON * arrow.force
    # Along the arrow, up to near its head, the picture turns the arrow's green.
    for share in (0.1, 0.5, 0.9):
        point = tail + share * (arrow.point - tail)
        c, r = (int(round(v)) for v in project(point))
        assert 1 <= c < render.WIDTH - 1 and 1 <= r < render.HEIGHT - 1
        patch = (slice(r - 1, r + 2), slice(c - 1, c + 2))
        before, after = bare[patch].astype(int), drawn[patch].astype(int)
        assert np.abs(after - before).max() > 40, f'nothing drawn {share:.0%} along the arrow'
        assert (after[..., 1] > after[..., 0] + 30).any(), 'not green'
    # Far from the arrow nothing changed.
    assert np.array_equal(bare[:20, :20], drawn[:20, :20])


def test_the_contact_picture_is_a_png_with_the_view_a_title_and_the_table(robot, tmp_path):
    path = tmp_path / 'contact.png'
    table = ['truth     panda_link5  |F|  35.0 N', 'localizer panda_link5  |F|  33.0 N']
    estimate = _push(robot, render.ESTIMATE_RGBA[0])
    render.save_contact_picture(str(path), robot, Q, [_push(robot), Arrow(
        'localizer', estimate.point, 0.9 * estimate.force, estimate.rgba)], 'a push', table)
    with Image.open(path) as image:
        assert image.format == 'PNG'
        assert image.width == render.WIDTH
        assert image.height > render.HEIGHT  # the title and the table around the view


def test_the_animation_has_a_frame_per_instant_at_the_scaled_size(robot, tmp_path):
    path = tmp_path / 'contact.gif'
    push = _push(robot)
    frames = [(Q, [Arrow('truth', push.point, share * push.force, push.rgba)], f'{share:.1f}')
              for share in (0.0, 0.5, 1.0)]
    render.save_contact_animation(str(path), robot, frames, scale=0.5)
    with Image.open(path) as image:
        assert image.format == 'GIF'
        assert image.n_frames == 3
        assert image.size == (render.WIDTH // 2, render.HEIGHT // 2)
