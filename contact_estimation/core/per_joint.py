""""One value for every joint, or one per joint": the one reading of such a setting.

Thresholds, gains, torque constants, gear ratios and friction rows are all given this way
(a single value is the common case; a list of one per joint tunes each joint).
"""
from __future__ import annotations

import numpy as np


def per_joint(name: str, value, n_joints: int, low: float = -np.inf, strict: bool = False,
              unit: str = '', high: float = np.inf, high_name: str = '',
              width: int | None = None) -> np.ndarray:
    """`value` (a scalar, 1 or `n_joints` values; with `width`, `width` values or `width`
    per joint, flat or as rows) as a float array of `n_joints` (× `width`), validated.

    Raises ValueError naming the parameter when the count is wrong or a value is not finite,
    below `low` (or equal to it when `strict`) or above `high` (the parameter `high_name`,
    or the plain bound when unnamed).
    """
    array = np.asarray(value, dtype=float).ravel()
    shape = (n_joints,) if width is None else (n_joints, width)
    one = 1 if width is None else width
    if array.size == one:
        array = np.broadcast_to(array, shape).copy()
    elif array.size == n_joints * one:
        array = array.reshape(shape)
    else:
        each = '' if width is None else f' × {width}'
        raise ValueError(f'{name}: expected {one} or {n_joints}{each} values (one for every '
                         f'joint or one per joint), got {array.size}')
    for index, x in np.ndenumerate(array):
        where = ','.join(str(i) for i in index)
        if not np.isfinite(x) or x < low or (strict and x == low):
            bound = '' if low == -np.inf else (f' and > {low:g}' if strict else f' and >= {low:g}')
            raise ValueError(f'{name}[{where}] = {x:g}{unit} is invalid: must be finite{bound}')
        if x > high:
            if high_name:
                raise ValueError(f'{name}[{where}] = {x:g}{unit} is above {high_name} = '
                                 f'{high:g}: it would switch detection off (raise {high_name} '
                                 'to allow it)')
            raise ValueError(f'{name}[{where}] = {x:g}{unit} is above {high:g}')
    return array
