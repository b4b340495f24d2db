"""Vectorized reductions of a scratch tile, called by row kernels (``cpu_rows``).

A kernel computes a reduction's inputs for up to ``cpu_rows.TILE`` elements of a row into a scratch
tile (a plain vectorized loop), then reduces the tile here. Floating-point sums may be
reassociated (``fastmath={'reassoc'}``: LLVM then vectorizes them; within tolerance of
NumPy's own pairwise summation, and the accumulator is float64 for float inputs). No
flag here assumes "no NaN/inf": max/min keep NumPy's NaN propagation through an explicit
NaN test, with eight independent lanes so the compare chain is not one long dependency.
"""
from __future__ import annotations

import numba
import numpy as np



@numba.njit(cache=True, fastmath={"reassoc", "nsz"})
def tile_sum(t, m):
    """sum of t[:m] (m >= 1). Starts from t[0], not from a zero made as t[0] - t[0]:
    that is NaN when t[0] is +-inf."""
    acc = t[0]
    for j in range(1, m):
        acc += t[j]
    return acc


@numba.njit(cache=True, fastmath={"reassoc", "nsz"})
def tile_prod(t, m):
    """product of t[:m] (m >= 1), from t[0] (as tile_sum)."""
    acc = t[0]
    for j in range(1, m):
        acc *= t[j]
    return acc


@numba.njit(cache=True)
def _has_nan(t, m):
    c = 0
    for j in range(m):
        c += t[j] != t[j]
    return c != 0


@numba.njit(cache=True)
def tile_imax(t, m):
    """max of t[:m] (m >= 1), ignoring NaN."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = t[0]
    nb = m // 8
    for b in range(nb):
        j = b * 8
        v0, v1, v2, v3 = t[j], t[j + 1], t[j + 2], t[j + 3]
        v4, v5, v6, v7 = t[j + 4], t[j + 5], t[j + 6], t[j + 7]
        a0 = v0 if v0 > a0 else a0
        a1 = v1 if v1 > a1 else a1
        a2 = v2 if v2 > a2 else a2
        a3 = v3 if v3 > a3 else a3
        a4 = v4 if v4 > a4 else a4
        a5 = v5 if v5 > a5 else a5
        a6 = v6 if v6 > a6 else a6
        a7 = v7 if v7 > a7 else a7
    a0 = a1 if a1 > a0 else a0
    a2 = a3 if a3 > a2 else a2
    a4 = a5 if a5 > a4 else a4
    a6 = a7 if a7 > a6 else a6
    a0 = a2 if a2 > a0 else a0
    a4 = a6 if a6 > a4 else a4
    r = a4 if a4 > a0 else a0
    for j in range(nb * 8, m):
        r = t[j] if t[j] > r else r
    return r


@numba.njit(cache=True)
def tile_max(t, m):
    """max of float t[:m] (m >= 1); NaN if any element is NaN."""
    r = tile_imax(t, m)
    return r if not _has_nan(t, m) else r + np.nan


@numba.njit(cache=True)
def tile_imin(t, m):
    """min of t[:m] (m >= 1), ignoring NaN."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = t[0]
    nb = m // 8
    for b in range(nb):
        j = b * 8
        v0, v1, v2, v3 = t[j], t[j + 1], t[j + 2], t[j + 3]
        v4, v5, v6, v7 = t[j + 4], t[j + 5], t[j + 6], t[j + 7]
        a0 = v0 if v0 < a0 else a0
        a1 = v1 if v1 < a1 else a1
        a2 = v2 if v2 < a2 else a2
        a3 = v3 if v3 < a3 else a3
        a4 = v4 if v4 < a4 else a4
        a5 = v5 if v5 < a5 else a5
        a6 = v6 if v6 < a6 else a6
        a7 = v7 if v7 < a7 else a7
    a0 = a1 if a1 < a0 else a0
    a2 = a3 if a3 < a2 else a2
    a4 = a5 if a5 < a4 else a4
    a6 = a7 if a7 < a6 else a6
    a0 = a2 if a2 < a0 else a0
    a4 = a6 if a6 < a4 else a4
    r = a4 if a4 < a0 else a0
    for j in range(nb * 8, m):
        r = t[j] if t[j] < r else r
    return r


@numba.njit(cache=True)
def tile_min(t, m):
    """min of float t[:m] (m >= 1); NaN if any element is NaN."""
    r = tile_imin(t, m)
    return r if not _has_nan(t, m) else r + np.nan


@numba.njit(cache=True)
def tile_any(t, m):
    c = 0
    for j in range(m):
        c += t[j] != 0
    return c != 0


@numba.njit(cache=True)
def tile_all(t, m):
    c = 0
    for j in range(m):
        c += t[j] == 0
    return c == 0


