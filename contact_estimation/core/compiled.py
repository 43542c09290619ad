"""Compiled per-sample kernels (issue 35): numba's `njit`, cached on disk.

The chain runs its arithmetic once per joint state, at 1 kHz. A numpy call on a 7-vector
costs about half a microsecond of dispatch for a few nanoseconds of work, so a stage's
arithmetic is written as one `@kernel` function of plain loops over preallocated arrays.

- `error_model='numpy'`: x / 0 gives ±inf or nan, as numpy does, instead of raising.
- `cache=True`: compiled on the first call in a fresh install and kept beside the module
  (or in NUMBA_CACHE_DIR where the package is read-only); later processes load it.
- `nogil=True`: a kernel lets the heartbeat thread run while it computes.

The replay and the live nodes call the same kernels, so they give the same bits.
"""
from __future__ import annotations

import numba


def kernel(function):
    """`function` compiled to machine code on its first call (numba's nopython mode)."""
    return numba.njit(cache=True, nogil=True, error_model='numpy')(function)
