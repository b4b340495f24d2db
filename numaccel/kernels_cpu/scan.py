"""Prefix scans (``np.cumsum``, ``np.maximum/minimum.accumulate``) on several threads: the
``scan`` op's CPU kernel, for 1-D arrays and along the last axis of C-contiguous ones.

NumPy's scan is one sequential loop: every element waits for the add (or compare) of the
one before, ~4 cycles each (cumsum of 2.5M float64: 5.7 ms, memory would allow ~1 ms).
Here the array is cut into ``CHUNKS`` chunks (by size only, so results do not depend on
the thread count): each chunk is scanned on its own, in parallel; then each chunk's
offset (the scan of the chunk totals before it) is combined into its elements, a loop
without a dependency chain that vectorizes.

Results: integer sums and max/min are exact; a float sum adds the same terms in another
grouping (each element is offset + its chunk's partial sum), within a few ulp of the
running sum NumPy computes. max/min propagate NaN as NumPy's do.

Along the last axis (``np.cumsum(x, axis=-1)`` of a 2-D or larger array) each row is one
sequential scan, in NumPy's order (bit-identical); rows are split between the threads and
four rows run interleaved, so that four dependency chains are in flight instead of one
(NumPy's cumsum of 40000 rows of 252 float64: ~40 ms).
"""
from __future__ import annotations

import numba
import numpy as np

CHUNKS = 16


@numba.njit(inline="always")
def _comb(op, a, b):
    # op 0: add, 1: maximum, 2: minimum (NaN wins, as np.maximum/np.minimum)
    if op == 0:
        return a + b
    if op == 1:
        return b if (b > a or b != b) else a
    return b if (b < a or b != b) else a


@numba.njit(nogil=True, cache=True)
def scan_chunks(x, out, op, n, nchunks, lo, hi):
    """Scan chunks ``[lo, hi)`` of ``x`` into ``out`` (each chunk from its own start)."""
    for c in range(lo, hi):
        a, b = n * c // nchunks, n * (c + 1) // nchunks
        if a == b:
            continue
        out[a] = x[a]           # the stores cast to the result dtype (bool -> int64)
        s = out[a]
        for i in range(a + 1, b):
            out[i] = x[i]
            s = _comb(op, s, out[i])
            out[i] = s


@numba.njit(nogil=True, cache=True)
def add_offsets(out, offsets, op, n, nchunks, lo, hi):
    """Combine chunk ``c``'s offset into its elements, for chunks ``[lo, hi)`` (> 0)."""
    for c in range(max(lo, 1), hi):
        a, b = n * c // nchunks, n * (c + 1) // nchunks
        o = offsets[c]
        for i in range(a, b):
            out[i] = _comb(op, o, out[i])


@numba.njit(nogil=True, cache=True)
def chunk_offsets(out, offsets, op, n, nchunks):
    """``offsets[c]``: the scan of the totals of chunks ``0 .. c-1`` (``c >= 1``)."""
    acc = out[n // nchunks - 1]
    for c in range(1, nchunks):
        a, b = n * c // nchunks, n * (c + 1) // nchunks
        offsets[c] = acc
        if b > a:
            acc = _comb(op, acc, out[b - 1])


@numba.njit(nogil=True, cache=True)
def scan_rows(x, out, op, lo, hi):
    """Scan rows ``[lo, hi)`` of 2-D ``x`` into ``out``, four rows at a time (the stores
    cast to the result dtype, as in scan_chunks)."""
    n = x.shape[1]
    if n == 0:
        return
    r = lo
    while r + 4 <= hi:
        out[r, 0] = x[r, 0]
        out[r + 1, 0] = x[r + 1, 0]
        out[r + 2, 0] = x[r + 2, 0]
        out[r + 3, 0] = x[r + 3, 0]
        s0, s1, s2, s3 = out[r, 0], out[r + 1, 0], out[r + 2, 0], out[r + 3, 0]
        for j in range(1, n):
            out[r, j] = x[r, j]
            out[r + 1, j] = x[r + 1, j]
            out[r + 2, j] = x[r + 2, j]
            out[r + 3, j] = x[r + 3, j]
            s0 = _comb(op, s0, out[r, j])
            s1 = _comb(op, s1, out[r + 1, j])
            s2 = _comb(op, s2, out[r + 2, j])
            s3 = _comb(op, s3, out[r + 3, j])
            out[r, j] = s0
            out[r + 1, j] = s1
            out[r + 2, j] = s2
            out[r + 3, j] = s3
        r += 4
    for q in range(r, hi):
        out[q, 0] = x[q, 0]
        s = out[q, 0]
        for j in range(1, n):
            out[q, j] = x[q, j]
            s = _comb(op, s, out[q, j])
            out[q, j] = s


def scan_last_axis(x, out, op: int) -> np.ndarray:
    """Scan C-contiguous ``x`` along its last axis into ``out`` (its result dtype, same
    shape) with ``op`` (0 add, 1 max, 2 min), rows split between the threads."""
    from ..lower.cpu_threads import launch
    n = x.shape[-1]
    if x.size == 0:
        return out
    x2, o2 = x.reshape(-1, n), out.reshape(-1, n)
    launch(scan_rows, [x2, o2, op], x2.shape[0], x.size)
    return out


def scan(x, out, op: int) -> np.ndarray:
    """Scan 1-D ``x`` into ``out`` (its result dtype) with ``op`` (0 add, 1 max, 2 min)
    on the cpu backend's threads."""
    from ..lower.cpu_threads import launch
    n = x.shape[0]
    k = min(CHUNKS, n)
    launch(scan_chunks, [x, out, op, n, k], k, n)
    offsets = np.empty(k, out.dtype)
    chunk_offsets(out, offsets, op, n, k)
    launch(add_offsets, [out, offsets, op, n, k], k, n)
    return out
