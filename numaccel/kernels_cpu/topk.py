"""The ``argsort_topk`` op's CPU kernel: the ``k`` smallest of each row, in order.

One pass per row keeps the best ``k`` (value, index) pairs sorted by insertion; an
element that does not beat the current ``k``-th costs one comparison, so a row of ``n``
costs about ``n`` comparisons for small ``k`` (a full sort: ``n log n`` and a copy).
Comparisons are NumPy's sort order (NaN after every number) and strict, so of equal
values the earlier index stays first: a stable sort's order. Rows run in parallel.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

_PARALLEL_ELEMS = 1 << 15


@numba.njit(inline="always")
def _before(v, w):
    return v < w or (w != w and v == v)


@numba.njit(inline="always")
def _row(x, r, k, vals, out):
    n = x.shape[1]
    cnt = 0
    for j in range(n):
        v = x[r, j]
        if cnt == k:
            if not _before(v, vals[k - 1]):
                continue
            p = k - 1
        else:
            p = cnt
            cnt += 1
        while p > 0 and _before(v, vals[p - 1]):
            vals[p] = vals[p - 1]
            out[r, p] = out[r, p - 1]
            p -= 1
        vals[p] = v
        out[r, p] = j


@numba.njit(parallel=True, nogil=True, cache=True)
def _topk_par(x, k, out):
    for r in prange(x.shape[0]):
        _row(x, r, k, np.empty(k, x.dtype), out)


@numba.njit(nogil=True, cache=True)
def _topk_ser(x, k, out):
    vals = np.empty(k, x.dtype)
    for r in range(x.shape[0]):
        _row(x, r, k, vals, out)


def argsort_topk(x: np.ndarray, k: int) -> np.ndarray:
    """``np.argsort(x, axis=-1, kind="stable")[..., :k]`` for ``0 <= k <= x.shape[-1]``."""
    n = x.shape[-1]
    if not 0 <= k <= n:
        raise ValueError(f"argsort_topk: k={k} is outside [0, {n}]")
    rows = x.reshape(-1, n) if n else np.empty((int(np.prod(x.shape[:-1])), 0), x.dtype)
    out = np.empty((rows.shape[0], k), np.intp)
    if k and rows.shape[0]:
        fn = _topk_par if rows.size >= _PARALLEL_ELEMS and rows.shape[0] > 1 else _topk_ser
        fn(rows, k, out)
    return out.reshape(x.shape[:-1] + (k,))
