"""Pictures of the arm at a contact: the true force and each estimate drawn as arrows on it.

MuJoCo's offscreen renderer draws the robot of `sim.mjcf` (its collision surfaces, the
surfaces contacts happen on) at joint angles q, with one arrow per force: the force ON the
robot, ending at its point of application (the push comes from outside, as the rviz markers
of ros/markers.py draw it), and a small sphere at the point. matplotlib frames the image with
a legend and a table of the links and errors. Arrays in, PNG out; no ROS.

Rendering needs an OpenGL context: headless, MUJOCO_GL=egl (libegl1 and Mesa's
libegl-mesa0 / libgl1-mesa-dri on Debian, installed by run.sh) or MUJOCO_GL=osmesa.
`render_unavailable()` says why not when it cannot, so that callers skip the picture.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Callable

import numpy as np

from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.mjcf import build_mjcf

WIDTH, HEIGHT = 960, 720        # px of the rendered view
ARROW_PER_NEWTON = 0.008        # m of arrow per N
ARROW_WIDTH = 0.02              # m
POINT_RADIUS = 0.012            # m
TRUTH_RGBA = (0.0, 0.7, 0.1, 1.0)
# See-through, so that the thinner truth shows inside an estimate that lies on it.
ESTIMATE_RGBA = ((0.15, 0.4, 1.0, 0.4), (1.0, 0.5, 0.0, 0.4), (0.8, 0.2, 0.8, 0.4))


@dataclass(frozen=True)
class Arrow:
    """A force to draw: `point` (m) and `force` (N, on the robot), both in the base frame,
    and a sphere of `radius` (m) at the point (a zero force: the sphere alone, a mark)."""

    label: str
    point: np.ndarray
    force: np.ndarray
    rgba: tuple[float, float, float, float]
    radius: float = POINT_RADIUS


@dataclass(frozen=True)
class ColourScale:
    """What the colour of some marks means, for a picture's colour bar: `colour(x)` (RGB in
    [0, 1]) over x from 0 to `top`, with a `label`."""

    label: str
    colour: Callable[[float], tuple[float, float, float]]
    top: float = 1.0


def render_unavailable() -> str:
    """'' when an offscreen OpenGL context can be made, else why not (for the user)."""
    os.environ.setdefault('MUJOCO_GL', 'egl')
    try:
        import mujoco
        context = mujoco.GLContext(16, 16)
        context.make_current()
        context.free()
    except Exception as err:  # noqa: BLE001 - any GL failure means: no picture
        return (f'no OpenGL context (MUJOCO_GL={os.environ["MUJOCO_GL"]}: '
                f'{type(err).__name__}: {err}); on Debian/Ubuntu `./run.sh setup` installs '
                'libegl1 libegl-mesa0 libgl1-mesa-dri')
    return ''


def _scene_xml(robot: RobotModel, obstacles) -> str:
    """The simulator's MJCF with a light, a sky-grey background and an offscreen buffer."""
    root = ET.fromstring(build_mjcf(robot, list(obstacles), SimConfig()))
    visual = ET.SubElement(root, 'visual')
    ET.SubElement(visual, 'global', offwidth=str(WIDTH), offheight=str(HEIGHT))
    ET.SubElement(visual, 'headlight', ambient='0.35 0.35 0.35', diffuse='0.5 0.5 0.5')
    ET.SubElement(visual, 'quality', shadowsize='0')
    ET.SubElement(root.find('asset'), 'texture', type='skybox', builtin='gradient',
                  rgb1='0.9 0.93 0.96', rgb2='0.55 0.6 0.68', width='256', height='256')
    world = root.find('worldbody')
    ET.SubElement(world, 'light', pos='1 -1 3', dir='-0.3 0.3 -1', diffuse='0.5 0.5 0.5')
    return ET.tostring(root, encoding='unicode')


def _camera(mujoco, target: np.ndarray, force: np.ndarray, distance: float):
    """A free camera looking at `target` from outside the surface the force pushes on
    (against the force), turned 55° aside so the arrow is seen along its length, and from
    above."""
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.lookat[:] = target
    camera.distance = distance
    outward = -np.asarray(force, dtype=float)
    outward[2] = 0.0
    if np.linalg.norm(outward) < 1e-9:
        outward = np.array([1.0, 0.0, 0.0])
    outward /= np.linalg.norm(outward)
    aside = np.array([-outward[1], outward[0], 0.0])
    angle = np.radians(55.0)
    view_from = np.cos(angle) * outward + np.sin(angle) * aside
    camera.azimuth = np.degrees(np.arctan2(-view_from[1], -view_from[0]))
    camera.elevation = -25.0
    return camera


def _project(position: np.ndarray, forward: np.ndarray, up: np.ndarray, fovy: float,
             point: np.ndarray) -> tuple[float, float] | None:
    """Pixel (column, row) of a base-frame point seen by a camera at `position` looking along
    `forward` (vertical field of view `fovy`, degrees); None behind the camera."""
    offset = point - position
    depth = offset @ forward
    if depth <= 1e-6:
        return None
    half = np.tan(np.radians(fovy) / 2) * depth
    x = offset @ np.cross(forward, up) / (half * WIDTH / HEIGHT)
    y = offset @ up / half
    return (x + 1) / 2 * WIDTH, (1 - y) / 2 * HEIGHT


class ContactScene:
    """The robot's MuJoCo model and an offscreen renderer, kept for several views (one
    compiled model, one GL context). Close it when done."""

    def __init__(self, robot: RobotModel, obstacles=()):
        os.environ.setdefault('MUJOCO_GL', 'egl')
        import mujoco
        self._mujoco = mujoco
        self.model = mujoco.MjModel.from_xml_string(_scene_xml(robot, obstacles))
        self.data = mujoco.MjData(self.model)
        self.renderer = mujoco.Renderer(self.model, HEIGHT, WIDTH)

    def close(self) -> None:
        self.renderer.close()

    def camera(self, arrow: Arrow | None, distance: float = 1.2):
        """A camera on `arrow`'s point, from outside the surface it pushes on."""
        return _camera(self._mujoco, arrow.point if arrow else np.zeros(3),
                       arrow.force if arrow else np.ones(3), distance)

    def render(self, q: np.ndarray, arrows: list[Arrow], camera) -> tuple[np.ndarray, Callable]:
        """The arm at `q` with `arrows` seen by `camera`: the RGB image (HEIGHT × WIDTH × 3,
        uint8) and the function that maps a base-frame point to its pixel (column, row) in
        it, None behind the camera."""
        mujoco = self._mujoco
        self.data.qpos[:] = q
        mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, camera)
        scene = self.renderer.scene
        for k, arrow in enumerate(arrows):
            # The first arrow (the truth) thinner, seen inside the estimates that lie on it.
            width = ARROW_WIDTH * (0.6 if k == 0 and len(arrows) > 1 else 1.0)
            point = np.asarray(arrow.point, dtype=float)
            tail = point - ARROW_PER_NEWTON * np.asarray(arrow.force, dtype=float)
            _add_geom(mujoco, scene, mujoco.mjtGeom.mjGEOM_SPHERE, arrow.rgba,
                      size=[arrow.radius] * 3, pos=point)
            if np.linalg.norm(tail - point) > 1e-4:
                geom = _add_geom(mujoco, scene, mujoco.mjtGeom.mjGEOM_ARROW, arrow.rgba)
                mujoco.mjv_connector(geom, mujoco.mjtGeom.mjGEOM_ARROW, width, tail, point)
                # MuJoCo 3.3 draws an arrow half as long as the size mjv_connector sets
                # (test/test_render.py checks that the arrow reaches its point).
                geom.size[2] *= 2.0
        # The head between the two eyes of MuJoCo's stereo cameras (mjv_averageCamera).
        head = mujoco.mjv_averageCamera(scene.camera[0], scene.camera[1])
        view = (np.array(head.pos), np.array(head.forward), np.array(head.up))
        fovy = self.model.vis.global_.fovy
        image = self.renderer.render().copy()
        return image, lambda point: _project(*view, fovy, np.asarray(point, dtype=float))


def render_view(robot: RobotModel, q: np.ndarray, arrows: list[Arrow], obstacles=(),
                distance: float = 1.2) -> tuple[np.ndarray, Callable]:
    """`ContactScene.render` once, the camera on the first arrow's point."""
    scene = ContactScene(robot, obstacles)
    try:
        return scene.render(q, arrows, scene.camera(arrows[0] if arrows else None, distance))
    finally:
        scene.close()


def save_contact_animation(path: str, robot: RobotModel,
                           frames: list[tuple[np.ndarray, list[Arrow], str]], obstacles=(),
                           fps: float = 10.0, scale: float = 0.6) -> None:
    """An animated GIF at `path`: one frame per (q, arrows, caption), the camera fixed on the
    strongest first arrow (the truth, where there is one), `scale` times the view's size."""
    from PIL import Image, ImageDraw
    scene = ContactScene(robot, obstacles)
    firsts = [arrows[0] for _, arrows, _ in frames if arrows]
    camera = scene.camera(max(firsts, key=lambda a: np.linalg.norm(a.force)) if firsts
                          else None)
    images = []
    try:
        for q, arrows, caption in frames:
            image = Image.fromarray(scene.render(q, arrows, camera)[0])
            image = image.resize((int(WIDTH * scale), int(HEIGHT * scale)))
            draw = ImageDraw.Draw(image)
            draw.rectangle((0, 0, image.width, 16), fill=(255, 255, 255))
            draw.text((4, 2), caption, fill=(0, 0, 0))
            images.append(image.convert('P', palette=Image.Palette.ADAPTIVE, colors=128))
    finally:
        scene.close()
    images[0].save(path, save_all=True, append_images=images[1:], loop=0,
                   duration=int(1000 / fps), optimize=True)


def _add_geom(mujoco, scene, kind, rgba, size=(0.0, 0.0, 0.0), pos=(0.0, 0.0, 0.0)):
    if scene.ngeom >= scene.maxgeom:
        raise RuntimeError('MuJoCo scene full: too many arrows')
    geom = scene.geoms[scene.ngeom]
    mujoco.mjv_initGeom(geom, kind, np.asarray(size, dtype=float),
                        np.asarray(pos, dtype=float), np.eye(3).ravel(),
                        np.asarray(rgba, dtype=np.float32))
    scene.ngeom += 1
    return geom


def save_contact_picture(path: str, robot: RobotModel, q: np.ndarray, arrows: list[Arrow],
                         title: str, table: list[str], obstacles=(),
                         scale: ColourScale | None = None) -> None:
    """`render_view` framed as a PNG at `path`: the view with each arrow labelled at its
    tail, `title` above, `table` (lines: links, errors) below, and `scale`'s colour bar in
    the upper right when given."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap, Normalize
    from matplotlib.patches import Patch

    image, project = render_view(robot, q, arrows, obstacles)
    title_height, table_height = 0.35, 0.2 * len(table) + 0.15  # inches
    height = HEIGHT / 100 + title_height + table_height
    fig = plt.figure(figsize=(WIDTH / 100, height), dpi=100)
    ax = fig.add_axes([0.0, table_height / height, 1.0, HEIGHT / 100 / height])
    ax.imshow(image)
    ax.set_axis_off()
    for k, arrow in enumerate(arrows):
        tail = project(arrow.point - ARROW_PER_NEWTON * np.asarray(arrow.force))
        if tail is not None and 0 <= tail[0] < WIDTH and 0 <= tail[1] < HEIGHT:
            # Stacked below the tail: tails of close forces coincide.
            ax.annotate(arrow.label, tail, xytext=(8, -8 - 18 * k), textcoords='offset points',
                        color='black', fontsize=11, fontweight='bold',
                        bbox={'boxstyle': 'round,pad=0.2', 'fc': arrow.rgba[:3],
                              'alpha': 0.85, 'lw': 0})
    ax.legend(handles=[Patch(color=a.rgba[:3], alpha=max(a.rgba[3], 0.6), label=a.label)
                       for a in arrows],
              loc='lower right', fontsize=11, framealpha=0.9)
    if scale is not None:
        shades = ListedColormap([scale.colour(x) for x in np.linspace(0.0, scale.top, 256)])
        bar = fig.add_axes([0.72, 1.0 - (title_height + 0.5) / height, 0.25, 0.18 / height])
        fig.colorbar(ScalarMappable(Normalize(0.0, scale.top), shades), cax=bar,
                     orientation='horizontal').set_label(scale.label, fontsize=10)
    fig.text(0.01, 1.0 - 0.08 / height, title, fontsize=12, va='top', fontweight='bold')
    fig.text(0.01, 0.06 / height, '\n'.join(table), fontsize=9.5, va='bottom',
             family='monospace')
    fig.savefig(path, dpi=100)
    plt.close(fig)
