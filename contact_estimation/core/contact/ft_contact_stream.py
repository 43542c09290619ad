"""What the ft_contact_estimator node does between messages, without ROS: its settings, the
checks of a raw F/T reading, the pairing of streams by stamp, the resting check of the `~/zero`
service, the offset and ellipsoid files, and the
compensation residual in free motion. The estimate itself is core/contact/ft_contact.py (seed 004).

Times are stamps in seconds (the samples' own clock), never sample counts: real drivers
publish at ~100 Hz with jitter, F/T sensors often faster.
"""
from __future__ import annotations

import math
import os
from collections import deque
from dataclasses import dataclass

import numpy as np
import yaml

from contact_estimation.core.chain.detector import TORQUE_THRESHOLDS
from contact_estimation.core.compiled import kernel
from contact_estimation.core.contact.ft_compensation import (COMPENSATIONS, CONVENTIONS,
                                                             ROBOT_ON_SENSOR,
                                                             BaseForceResidual,
                                                             BaseWrenchCompensator,
                                                             FtContactError, SensorMount)
from contact_estimation.core.robot.body_surfaces import SURFACE_MODELS, Ellipsoid
from contact_estimation.core.input_rejected import (NOT_FINITE, OUT_OF_ORDER, SATURATED,
                                                    ZERO_READING, InputRejected)
from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.robot.pose import (POSITION_RANGE, RPY_RANGE, position,
                                                rotation_from_rpy)
from contact_estimation.core.settings import SENSOR_FRAME, checked, setting


@dataclass(frozen=True)
@checked
class FtEstimatorConfig:
    """The ft_contact_estimator's settings but the locator's (`FtLocatorConfig`) and the
    payload's."""

    sensor_frame_id: str = setting(
        '', "frame_id of the F/T readings; others are dropped ('' = the robot's base link)",
        name='sensor.frame_id', names=SENSOR_FRAME)
    sensor_reports: str = setting(
        ROBOT_ON_SENSOR, 'the wrench of the robot on the sensor (the sim cobot) or of the '
        'mount on the robot', choices=CONVENTIONS, name='sensor.reports')
    sensor_position: tuple = setting(
        (0.0, 0.0, 0.0), 'the point the sensor refers its moments to, x y z in the base '
        'frame, m', range=POSITION_RANGE, size=3, name='sensor.position')
    sensor_rpy: tuple = setting(
        (0.0, 0.0, 0.0), "the sensor's axes in the base frame: roll, pitch, yaw about the "
        'fixed x, y, z axes, rad (as a URDF origin)', range=RPY_RANGE, size=3,
        name='sensor.rpy')
    force_limit: float = setting(
        2500.0, 'a force component this large (N) is saturated: the reading is dropped',
        range=(1.0, 1e5), name='sensor.force_limit')
    torque_limit: float = setting(
        400.0, 'a moment component this large (N·m) is saturated: the reading is dropped',
        range=(0.1, 1e4), name='sensor.torque_limit')
    surface_model: str = setting(
        'mesh', 'the collision meshes, or one ellipsoid per link (seed 004 eq. 23)',
        choices=SURFACE_MODELS)
    ellipsoid_file: str = setting(
        '', 'YAML of ellipsoids per link (centre, semi_axes, optional axes) for '
        "surface_model ellipsoid; '' = fitted to the meshes")
    contact_threshold: tuple = setting(
        (0.5,), '|τ_ext| (N·m) at which a joint counts as loaded by a contact (seed 004 '
        'current constraint)', range=TORQUE_THRESHOLDS, per_joint=1)
    stamp_tolerance: float = setting(
        0.005, 'most time between the stamps of a reading and the joint state it is paired '
        'with (s)', range=(0.0, 1.0))
    compensation: str = setting(
        'momentum_observer', 'the reaction of the moving arm from its momentum (no q̈; a low '
        'pass of 1/observer_gain s) or from RNEA with q̈ fitted over '
        'acceleration_filter.window_duration', choices=COMPENSATIONS)
    observer_gain: float = setting(
        50.0, 'bandwidth K of the momentum observer (1/s): the compensated wrench follows a '
        'change within ~1/K s, noise averaged as long', range=(0.1, 1000.0))
    peak_window: float = setting(
        0.002, "span (s) of the base force residual whose peaks go to the force limit's check "
        '(peak_force; the momentum difference over it, no low pass): an impact lasts 8-60 ms; '
        '2 ms read 20 of 20 simulated impacts within ±10 %, 4 ms a hand\'s 5-20 % low',
        range=(0.0005, 0.1), name='peak_force.window')
    peak_floor: float = setting(
        20.0, 'a peak_force below this (N) is not published (free motion reads < 12 N in '
        'simulation); peaks of each 1/max_rate s of stamps. From half of it every F/T reading '
        'is compensated for the peak (not only compensation_rate), back from the last one '
        'compensated', range=(0.0, 1e4), name='peak_force.floor')
    acceleration_window: float = setting(
        0.04, "time span of joint states in the quadratic fit that gives q̈ for the arm's "
        'reaction (s; lag about half)', range=(0.002, 1.0),
        name='acceleration_filter.window_duration')
    localizer_timeout: float = setting(
        0.1, "the contact localizer's link is used while its point is at most this older or "
        'newer than the sample (s)', range=(0.0, 10.0))
    max_rate: float = setting(
        100.0, 'most point estimates per second (Hz): in a contact, the first residual of '
        'each 1/max_rate s of stamps paired with its compensated wrench is located (each '
        'estimate costs ~0.4 ms of CPU)', range=(0.1, 1000.0))
    compensation_rate: float = setting(
        250.0, "most F/T readings compensated per second (Hz); a faster sensor's readings in "
        'between are skipped (the momentum observer takes any step): at 1 kHz, every reading '
        'cost the estimation thread more than it had', range=(1.0, 10000.0))
    input_timeout: float = setting(
        0.5, 'a stream silent this long (s, wall clock) while the other arrives is reported; '
        'nothing is estimated meanwhile', range=(0.01, 60.0))
    zero_duration: float = setting(0.5, '~/zero averages this long a rest (s)',
                                   range=(0.01, 60.0), name='zero.duration')
    zero_rest_speed: float = setting(
        0.01, 'the arm is at rest while every joint is slower than this (rad/s)',
        range=(1e-5, 1.0), name='zero.rest_speed')
    offset_file: str = setting(
        '~/.ros/contact_estimation/ft_sensor_offset.yaml', 'where ~/zero stores the sensor '
        "offset and the node reads it at start ('' = not stored)")

    def mount(self) -> SensorMount:
        """The sensor's mounting (core/robot/pose.py's convention); ValueError if no pose."""
        return SensorMount(self.sensor_reports, rotation_from_rpy(self.sensor_rpy, 'sensor.rpy'),
                           position(self.sensor_position, 'sensor.position'))

    def thresholds(self, n_joints: int) -> np.ndarray:
        """`contact_threshold` for each of `n_joints` joints (core/per_joint.py), N·m."""
        return per_joint('contact_threshold', self.contact_threshold, n_joints, unit=' N·m')


# How far back (s of stamps) samples are kept for pairing.
PAIRING_HISTORY = 1.0
# Most samples any buffer of this module keeps, whatever their stamps say (bounded by count
# as well as by age: a stamp far off must never let a buffer grow): 10 s at 1 kHz.
MAX_BUFFERED = 10_000


def check_reading(reading: np.ndarray, force_limit: float, torque_limit: float) -> None:
    """InputRejected unless the raw reading [f; m] (float) is usable: finite ('not_finite'),
    not all zero ('zero_reading': a sensor that stopped measuring reads exactly 0, while an
    arm standing on it weighs), within the limits on every axis ('saturated')."""
    fault = _reading_fault(reading, force_limit, torque_limit) if reading.shape == (6,) \
        else _NOT_FINITE
    if fault == _NOT_FINITE:
        raise InputRejected(NOT_FINITE, f'F/T reading {reading.tolist()} is not finite: '
                           'dropped')
    if fault == _ZERO:
        raise InputRejected(ZERO_READING, 'F/T reading is exactly zero (sensor not '
                           'measuring?): dropped')
    if fault == _SATURATED:
        over = np.flatnonzero(np.abs(reading) >= np.repeat([force_limit, torque_limit], 3))
        axes = ', '.join(['fx', 'fy', 'fz', 'mx', 'my', 'mz'][i] for i in over)
        raise InputRejected(SATURATED, f'F/T reading saturated on {axes} (limits '
                           f'{force_limit:g} N, {torque_limit:g} N·m): dropped')


_USABLE, _NOT_FINITE, _ZERO, _SATURATED = range(4)  # `_reading_fault`'s answers


@kernel
def _reading_fault(reading, force_limit, torque_limit):
    """What `check_reading` refuses a reading of 6 values for, in its order (_NOT_FINITE,
    _ZERO, _SATURATED), or _USABLE: one call where numpy's checks were seven, at 250 Hz."""
    for i in range(6):
        if not math.isfinite(reading[i]):
            return _NOT_FINITE
    zero = True
    for i in range(6):
        zero = zero and reading[i] == 0.0
    if zero:
        return _ZERO
    for i in range(3):
        if abs(reading[i]) >= force_limit or abs(reading[3 + i]) >= torque_limit:
            return _SATURATED
    return _USABLE


class RateSlots:
    """At most `rate` stamps a second, the same ones whoever replays the stream: a stamp is
    taken when it is the first in its slot of 1/rate s of the stamps' own time axis (not
    1/rate after the last one taken, which would depend on where the stream started). A
    stamp in an earlier slot (a restarted clock) is taken too."""

    def __init__(self, rate: float):
        self.rate = float(rate)
        self._slot = None

    def take(self, t: float) -> bool:
        # + a millionth of a slot: a stamp on a slot edge (to rounding) opens that slot
        slot = math.floor(t * self.rate + 1e-6)  # int(np.floor(...)), a tenth of its time
        if slot == self._slot:
            return False
        self._slot = slot
        return True


class PeakForce:
    """The largest compensated base force of each slot of 1/`rate` s of stamps (RateSlots),
    when it reaches `floor` N: for one contact the base force is the contact force itself,
    f_cB = p (seed 004, eqs. 4–6), wherever it acts, so its peak is the contact's peak force
    for the force limit's check (issue 38), though the point is not known from it. `add`
    gives the peak of the slot a stamp closes, (stamp, force), or None."""

    def __init__(self, rate: float, floor: float):
        self._slots, self.floor = RateSlots(rate), float(floor)
        self._held: tuple[float, np.ndarray, float] | None = None   # stamp, force, |force|

    def add(self, t: float, force: np.ndarray) -> tuple[float, np.ndarray] | None:
        closed = self._held if self._slots.take(t) else None
        if closed is not None:
            self._held = None
        magnitude = math.sqrt(force @ force)   # at 250 Hz: np.linalg.norm costs 3 × more
        if magnitude >= self.floor and (self._held is None or magnitude > self._held[2]):
            self._held = (t, np.array(force, dtype=float), magnitude)
        return closed[:2] if closed else None


class PeakForceTracker:
    """The peak contact force of each 1/`max_rate` s for the force limit's check (issue 38):
    `BaseForceResidual` over `window` s (seed 004 eq. 20, ../shared/METHODS.md §004: for one
    contact the base force is the contact force, f_cB = p, wherever it acts) into `PeakForce`.

    At rest it sees only the readings the F/T estimator compensates (`compensation_rate`,
    250 Hz: one each 4 ms, ~30 µs each, its CPU budget from issue 35); a 9 ms hand impact
    falls between them (its peak read 13-68 % low depending on the phase). Once the residual
    (or its form with the newest reading, `BaseForceResidual.newest`) reaches `floor` / 2
    (free motion: ≤ 6.4 N over 4 ms in simulation) a burst begins: the readings skipped
    since the last sample (`skipped(after, before)`: (t, reading, q, v) each, asked for only
    then) are added, and every reading is to be added (`bursting`) until
    `BURST_HOLD` s after the residual was last that large. `add` returns the peaks
    (stamp, force N, base frame) of the slots it closed."""

    BURST_HOLD = 0.02   # s: two slots of the default max_rate after the last large residual

    def __init__(self, compensator: BaseWrenchCompensator, window: float, max_rate: float,
                 floor: float):
        self._compensator = compensator
        self._residual = BaseForceResidual(window)
        self._slots = PeakForce(max_rate, floor)
        self.level = floor / 2.0
        self._until = -np.inf   # the burst's end (stamp)
        self._last = -np.inf    # the newest stamp added

    def bursting(self, t: float) -> bool:
        """Whether the reading stamped `t` is to be added though the rate would skip it."""
        return t <= self._until

    def add(self, t: float, static_force: np.ndarray, momentum: np.ndarray,
            skipped=lambda after, before: ()) -> list[tuple[float, np.ndarray]]:
        """One sample: its static force R_f − f₀ and the arm's linear momentum P
        (`MomentumWrenchObserver.static`, `.momentum`, or `terms`)."""
        last, self._last = self._last, t
        force = self._residual.add(t, static_force, momentum)
        if force is None:
            return []
        newest = self._residual.newest   # the force seen first: a burst from that reading
        large = max(force @ force, newest @ newest) >= self.level ** 2
        peaks = []
        if large and not self.bursting(t):
            self._until = t + self.BURST_HOLD
            for sample in skipped(last, t):   # the burst's start, at every reading
                peaks += self._close(sample[0], self._residual.add(*self.terms(*sample)))
            force = self._residual.add(t, static_force, momentum)
        if large:
            self._until = t + self.BURST_HOLD
        return peaks + self._close(t, force)

    def terms(self, t: float, reading: np.ndarray, q: np.ndarray,
              v: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(t, R_f − f₀, P) of a reading with its joint state, for `add`."""
        return (t, self._compensator.static_wrench(reading, q)[:3],
                self._compensator.robot.base_momentum(q, v)[0])

    def _close(self, t: float, force: np.ndarray | None) -> list[tuple[float, np.ndarray]]:
        if force is None:
            return []
        peak = self._slots.add(t, force)
        return [peak] if peak is not None else []


class StampPairing:
    """Pairs each sample of a primary stream with the sample of a secondary stream nearest in
    stamp, within `tolerance` seconds; a secondary sample may serve several primaries.

    Both streams arrive in stamp order, in any interleaving. A primary is paired once the
    secondary stream has reached its stamp (no later secondary could be nearer), so a
    secondary that arrives late delays the pairing rather than mismatching it. A primary
    with no secondary within `tolerance` is `unmatched`; one still waiting after `history`
    seconds of newer primaries is unmatched too (the secondary stream stopped).
    """

    def __init__(self, tolerance: float, history: float = PAIRING_HISTORY):
        self.tolerance = float(tolerance)
        self.history = float(history)
        self._secondary: deque = deque()
        self._pending: deque = deque()
        self.unmatched: list = []  # primaries (t, item) dropped by the last call

    def add_primary(self, t: float, item) -> list[tuple]:
        """Add a primary sample; returns the pairs (t, item, t_secondary, secondary) made."""
        self.unmatched = []
        self._pending.append((t, item))
        while self._pending and (self._pending[0][0] < t - self.history
                                 or len(self._pending) > MAX_BUFFERED):
            self.unmatched.append(self._pending.popleft())
        return self._resolve()

    def add_secondary(self, t: float, item) -> list[tuple]:
        """Add a secondary sample. One at the last one's stamp is that sample again: ignored.
        An earlier one is InputRejected 'out_of_order', unless it is `history` earlier: the
        clock restarted, and so does the pairing."""
        self.unmatched = []
        last = self._secondary[-1][0] if self._secondary else -np.inf
        if t == last:
            return []
        if t < last - self.history:
            self._secondary.clear()
            self._pending.clear()
        elif t < last:
            raise InputRejected(OUT_OF_ORDER, f'stamp {t:.6f} before the last one '
                               f'({last:.6f}): dropped')
        self._secondary.append((t, item))
        while self._secondary[0][0] < t - self.history or len(self._secondary) > MAX_BUFFERED:
            self._secondary.popleft()
        return self._resolve()

    def paired(self, t: float) -> tuple | None:
        """(t_secondary, secondary) for a primary stamped `t` that was skipped, as
        `add_primary` would pair it; None if none is within `tolerance` or the secondary
        stream has not reached `t`."""
        if not self._secondary or self._secondary[-1][0] < t:
            return None
        nearest = self._nearest(t)
        return nearest if abs(nearest[0] - t) <= self.tolerance else None

    def _resolve(self) -> list[tuple]:
        pairs = []
        newest = self._secondary[-1][0] if self._secondary else -np.inf
        while self._pending and self._pending[0][0] <= newest:
            t, item = self._pending.popleft()
            nearest = self._nearest(t)
            if abs(nearest[0] - t) <= self.tolerance:
                pairs.append((t, item, *nearest))
            else:
                self.unmatched.append((t, item))
        return pairs

    def _nearest(self, t: float) -> tuple:
        """The secondary nearest to t, given that the newest is at or after t."""
        best = self._secondary[-1]
        for candidate in reversed(self._secondary):
            if abs(candidate[0] - t) < abs(best[0] - t):
                best = candidate
            if candidate[0] < t:
                break
        return best


class RestingWindow:
    """The raw readings of the last `duration` seconds with their joint state, and how long
    the arm has been at rest (every |q̇| below `rest_speed`): what `~/zero` averages."""

    def __init__(self, duration: float, rest_speed: float):
        self.duration = float(duration)
        self.rest_speed = float(rest_speed)
        self._samples: deque = deque()  # (t, reading, q)
        self._rest_since: float | None = None
        self._moving: tuple[str, float] | None = None  # the fastest joint, its speed

    def add(self, t: float, reading: np.ndarray, q: np.ndarray, v: np.ndarray,
            joint_names) -> None:
        speed = np.abs(v)
        if speed.max() >= self.rest_speed:  # said only when asked: this runs at 1 kHz
            if self._samples:
                self._samples.clear()
            self._rest_since = None
            self._moving = (joint_names, speed)
            return
        if self._rest_since is None:
            self._rest_since = t
        self._samples.append((t, reading, q))
        while self._samples[0][0] < t - self.duration or len(self._samples) > MAX_BUFFERED:
            self._samples.popleft()

    def offset(self, compensator: BaseWrenchCompensator) -> np.ndarray:
        """The sensor offset from the readings at rest (`resting_offset`); FtContactError
        with the reason when the arm moves or has not rested for `duration`."""
        if self._rest_since is None:
            if self._moving is None:
                raise FtContactError('no F/T reading with a joint state yet')
            joint_names, speed = self._moving
            fastest = int(np.argmax(speed))
            raise FtContactError(f'the arm is moving ({joint_names[fastest]} at '
                                 f'{speed[fastest]:.3f} rad/s, rest is below '
                                 f'{self.rest_speed:g} rad/s)')
        rested = self._samples[-1][0] - self._rest_since
        if rested < self.duration:
            raise FtContactError(f'the arm has rested for {rested:.2f} s of the '
                                 f'{self.duration:g} s needed: try again')
        _, readings, q = zip(*self._samples)
        return compensator.resting_offset(np.array(readings), np.array(q))


def load_offset(path: str) -> np.ndarray | None:
    """The offset `save_offset` wrote (None: no file yet); FtContactError if unreadable."""
    path = os.path.expanduser(path)
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            offset = np.asarray(yaml.safe_load(f)['offset'], dtype=float)
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as err:
        raise FtContactError(f'offset file {path}: {err}') from err
    if offset.shape != (6,) or not np.isfinite(offset).all():
        raise FtContactError(f'offset file {path}: offset must be 6 finite numbers')
    return offset


def save_offset(path: str, offset: np.ndarray, frame_id: str, stamp: float) -> str:
    """Write the offset (sensor frame: fx fy fz in N, mx my mz in N·m); returns the path."""
    path = os.path.expanduser(path)
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with open(path, 'w') as f:
        f.write('# F/T sensor offset measured by ft_contact_estimator ~/zero on a resting '
                'arm:\n# fx fy fz (N) mx my mz (N·m) in the sensor frame, subtracted from '
                'every reading.\n')
        yaml.safe_dump({'offset': [float(x) for x in offset], 'frame_id': frame_id,
                        'stamp': float(stamp)}, f)
    return path


def load_ellipsoids(path: str) -> dict[str, Ellipsoid]:
    """Ellipsoids per link from YAML, in each link's frame:

        panda_link3: {centre: [0, 0, -0.05], semi_axes: [0.07, 0.07, 0.14]}
        panda_link5: {centre: [...], semi_axes: [...], axes: [9 values, columns row-major]}

    `axes` defaults to the link's own axes. FtContactError if the file is unreadable."""
    try:
        with open(os.path.expanduser(path)) as f:
            entries = yaml.safe_load(f) or {}
        return {link: Ellipsoid(entry['centre'],
                                np.reshape(entry.get('axes', np.eye(3).ravel()), (3, 3)),
                                entry['semi_axes'])
                for link, entry in entries.items()}
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as err:
        raise FtContactError(f'ellipsoid file {path}: {err}') from err


class RunningRms:
    """RMS of ‖f‖ and ‖τ‖ of the compensated wrench over the last `seconds` of stamps."""

    def __init__(self, seconds: float = 1.0):
        self.seconds = seconds
        self._squares: deque = deque()  # (t, ‖f‖², ‖τ‖²)
        self._sums = np.zeros(2)

    def add(self, t: float, wrench: np.ndarray) -> tuple[float, float]:
        squares = np.array([wrench[:3] @ wrench[:3], wrench[3:] @ wrench[3:]])
        self._squares.append((t, squares))
        self._sums += squares
        while self._squares[0][0] < t - self.seconds or len(self._squares) > MAX_BUFFERED:
            self._sums -= self._squares.popleft()[1]
        force, torque = np.sqrt(np.maximum(self._sums, 0.0) / len(self._squares))
        return float(force), float(torque)
