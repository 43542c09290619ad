"""A picture of the live view's layout (config/foxglove_layout.json) at a contact, drawn from
the messages the view recorded (`view --mcap`, the demo's OUT/view.mcap): the 3D panel's
SceneUpdate (core/view_scene.draw_scene) beside the stops, f_S and the speed scale,
|τ_ext|/ψ per joint and the collision events of the seconds around it. It is rendered with
matplotlib from the recording, not a screenshot of Foxglove (none runs here).

    python -m contact_estimation.view_picture out/demo/view.mcap docs/images/live_view.png

The instant is the middle of the longest run of scenes with the most contact arrows (the
fused estimate and the simulator's truth, and the F/T estimate when it has one), on the
stopped arm if the recording has such.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict

import numpy as np
from mcap.reader import make_reader

from contact_estimation.core.view_scene import STOPPED_ARM_COLOUR, draw_scene
from contact_estimation.foxglove_client import message_class

BEFORE, AFTER = 3.0, 1.0   # s of the plots around the pictured scene
EVENTS = 4                 # collision events listed


def recorded(path: str) -> dict[str, list[tuple[float, object]]]:
    """Every message of the recording by topic: (log time in s, decoded message)."""
    topics = defaultdict(list)
    classes = {}
    with open(path, 'rb') as f:
        for schema, channel, message in make_reader(f).iter_messages():
            if channel.message_encoding == 'json':
                decoded = json.loads(message.data)
            else:
                if schema.name not in classes:
                    classes[schema.name] = message_class(schema.name, schema.data)
                decoded = classes[schema.name].FromString(message.data)
            topics[channel.topic].append((message.log_time * 1e-9, decoded))
    return topics


def _shown(scene) -> tuple[int, bool]:
    """Its contact arrows and whether the arm is drawn stopped."""
    arm = [e for e in scene.entities if e.id == 'arm' and e.lines]
    stopped = bool(arm) and arm[0].lines[0].color.r == STOPPED_ARM_COLOUR[0]
    return sum(bool(e.arrows) for e in scene.entities if e.id.startswith('contact/')), stopped


def pictured(scenes: list[tuple[float, object]]) -> tuple[float, object]:
    """The scene in the middle of the longest run of those with the most contact arrows, on
    the stopped arm if there are such."""
    counts = [_shown(scene) for _, scene in scenes]
    most = max(counts)
    best, start = (0, 0), None
    for i, count in enumerate([*counts, None]):
        if count == most and start is None:
            start = i
        elif count != most and start is not None:
            best, start = max(best, (i - start, start)), None
    length, first = best
    return scenes[first + length // 2]


def render(path: str, png: str) -> str:
    """Draw the picture of the recording at `path` into `png`; says what it shows."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    topics = recorded(path)
    if not topics.get('/view/scene'):
        raise ValueError(f'{path}: no /view/scene (not a recording of the view?)')
    at, scene = pictured(topics['/view/scene'])
    fig = plt.figure(figsize=(13, 7.5), dpi=100)
    grid = fig.add_gridspec(4, 2, width_ratios=[1.4, 1], height_ratios=[0.8, 1, 1.5, 1])
    ax = fig.add_subplot(grid[:, 0], projection='3d')
    draw_scene(scene, ax)
    arm = [e for e in scene.entities if e.id == 'arm']
    centre = (np.mean([[p.x, p.y, p.z] for p in arm[0].lines[0].points], axis=0)
              if arm else np.zeros(3))
    for axis, middle in zip('xyz', centre):
        getattr(ax, f'set_{axis}lim')(middle - 0.45, middle + 0.45)
        getattr(ax, f'set_{axis}label')(f'{axis}, m')
    ax.set_box_aspect((1, 1, 1))
    ax.view_init(elev=20, azim=-60)
    ax.set_title('arm, contacts, people (/view/scene)')

    def series(topic: str, key: str) -> tuple[np.ndarray, list]:
        kept = [(t - at, m[key]) for t, m in topics.get(topic, [])
                if key in m and -BEFORE <= t - at <= AFTER]
        return np.array([t for t, _ in kept]), [v for _, v in kept]

    stops = fig.add_subplot(grid[0, 1])
    for offset, (key, label) in enumerate((('stop', 'stop'),
                                           ('proximity_stop', 'proximity stop'))):
        t, values = series('/view/stop', key)
        stops.step(t, np.array(values, dtype=float) + 1.5 * offset, where='post', label=label)
    stops.set_yticks([0, 1, 1.5, 2.5], ['off', 'stop', 'off', 'proximity'])
    stops.set_title('stops (/view/stop)', fontsize=9)
    scaling = fig.add_subplot(grid[1, 1], sharex=stops)
    for key, label in (('time_scaling', 'f_S (time scaling)'),
                       ('speed_scale', 'proximity speed scale')):
        t, values = series('/view/stop', key)
        scaling.plot(t, values, label=label)
    scaling.legend(fontsize=7, loc='lower left')
    scaling.set_title('f_S and speed scale', fontsize=9)
    torque = fig.add_subplot(grid[2, 1], sharex=stops)
    t, ratios = series('/view/torque', 'ratio')
    if ratios and ratios[-1]:
        values = np.array([[np.nan if v is None else v for v in r] for r in ratios])
        for joint in range(values.shape[1]):
            torque.plot(t, values[:, joint], label=f'joint {joint + 1}', linewidth=1)
        torque.legend(fontsize=7, ncol=4, loc='upper left')
    torque.axhline(1.0, color='k', linestyle='--', linewidth=0.8)
    torque.set_title('|τ_ext| / ψ (1: the threshold)', fontsize=9)
    torque.set_xlabel('s from the pictured scene')
    for panel in (stops, scaling, torque):
        panel.axvline(0.0, color='grey', linewidth=0.8)
    events = fig.add_subplot(grid[3, 1])
    events.axis('off')
    listed = [m for t, m in topics.get('/view/collision_events', []) if t <= at + AFTER]
    events.text(0, 1, 'collision events (class, evidence)\n' + '\n'.join(
        f'{m["message"][:70]}  ({m["values"].get("class", m["values"].get("event", ""))})'
        for m in listed[-EVENTS:]) if listed else 'no collision event', va='top', fontsize=8,
        family='monospace', transform=events.transAxes)
    fig.suptitle('The live view at a contact, rendered with matplotlib from the view\'s '
                 'recording (not a Foxglove screenshot)', fontsize=10)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    shown = sorted(e.id for e in scene.entities if e.id.startswith('contact/') and e.arrows)
    return f'{png}: the scene at {at:.2f} s of log time with {", ".join(shown) or "no contact"}'


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(render(sys.argv[1], sys.argv[2]))
