"""Branchless binary search, parallel over the keys (the ``searchsorted`` op's CPU kernel).

Each key halves the candidate range with a conditional move instead of a branch (a
random key mispredicts half of a branchy search's branches), and independent keys
overlap in the out-of-order core. Comparisons are NumPy's: NaN sorts after everything,
so a NaN key goes after every non-NaN element (``left``) or after all of them
(``right``), as ``np.searchsorted`` does on a sorted array with NaNs at the end.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

# below this many keys a parallel region costs more than it saves
_PARALLEL_KEYS = 1 << 14


@numba.njit(inline="always")
def _lt(x, y):
    # NumPy's sort order: NaN is larger than every number (and equal to NaN)
    return x < y or (y != y and x == x)


@numba.njit(inline="always")
def _search(a, n, x, right):
    if n == 0:
        return 0
    base = 0
    length = n
    while length > 1:
        half = length // 2
        y = a[base + half]
        # left: go up while a[mid] < x; right: while not x < a[mid] (a[mid] <= x)
        up = (not _lt(x, y)) if right else _lt(y, x)
        base = base + half if up else base
        length -= half
    y = a[base]
    last = (not _lt(x, y)) if right else _lt(y, x)
    return base + 1 if last else base


@numba.njit(parallel=True, nogil=True, cache=True)
def _search_par(a, v, out, right):
    n = a.shape[0]
    for i in prange(v.shape[0]):
        out[i] = _search(a, n, v[i], right)


@numba.njit(nogil=True, cache=True)
def _search_ser(a, v, out, right):
    n = a.shape[0]
    for i in range(v.shape[0]):
        out[i] = _search(a, n, v[i], right)


def searchsorted(a: np.ndarray, v: np.ndarray, side: str = "left") -> np.ndarray:
    """``np.searchsorted(a, v, side)`` for a sorted 1-D ``a`` of ``v``'s dtype."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    a = np.ascontiguousarray(a)
    flat = np.ascontiguousarray(v).reshape(-1)
    out = np.empty(flat.shape[0], np.intp)
    fn = _search_par if flat.shape[0] >= _PARALLEL_KEYS else _search_ser
    fn(a, flat, out, side == "right")
    return out.reshape(np.shape(v)) if np.ndim(v) else out[0]
