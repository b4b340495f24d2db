"""Reuse of large output buffers between calls of compiled code.

A fresh large array costs its first touch: the kernel zeroes every page the first time
it is written (8-9 ms per 64 MB here, a third of a 16M-element float32 map). A program
that calls an accelerated function in a loop and drops each result allocates and
faults in the same amount of memory again and again. The ``cpu`` backend therefore
allocates arrays of at least ``MIN_BYTES`` from this pool: each is a view of a pooled
``uint8`` buffer, and a buffer is handed out again once nothing but the pool refers to
it (the result, and every view of it, was dropped: views keep their base alive).

Held memory: at most ``numaccel.config.buffer_pool_bytes`` (default 1 GiB; 0 turns
pooling off); free buffers are released to make room for new sizes, and
``release()`` drops every free buffer. What differs from ``np.empty``: a pooled
array's ``base`` is its buffer (``flags.owndata`` is False), so ``ndarray.resize`` on
it raises; values, dtype, shape and strides are the same.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from ..config import config

MIN_BYTES = 1 << 22

_np_empty = getattr(np.empty, "__wrapped__", np.empty)
_buffers: dict[int, list] = {}      # nbytes -> pooled buffers of that size
_held = [0]                          # bytes in _buffers
_lock = threading.Lock()
_FREE_REFS = 3                       # list slot, loop variable, getrefcount's argument


def _release_free(need: int) -> None:
    """Drop free buffers until ``need`` more bytes fit under the cap (lock held)."""
    cap = config.buffer_pool_bytes
    for size in list(_buffers):
        lst = _buffers[size]
        keep = []
        for b in lst:
            if _held[0] + need > cap and sys.getrefcount(b) == _FREE_REFS:
                _held[0] -= size
            else:
                keep.append(b)
        if keep:
            _buffers[size] = keep
        else:
            del _buffers[size]


def empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, from the pool when it is large (see module doc)."""
    dtype = np.dtype(dtype)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    if nbytes < MIN_BYTES or nbytes > config.buffer_pool_bytes or dtype.hasobject:
        return _np_empty(shape, dtype)
    with _lock:
        for b in _buffers.get(nbytes, ()):
            if sys.getrefcount(b) == _FREE_REFS:
                return b.view(dtype).reshape(shape)
        if _held[0] + nbytes > config.buffer_pool_bytes:
            _release_free(nbytes)
            if _held[0] + nbytes > config.buffer_pool_bytes:
                return _np_empty(shape, dtype)
        b = _np_empty(nbytes, np.uint8)
        _buffers.setdefault(nbytes, []).append(b)
        _held[0] += nbytes
        return b.view(dtype).reshape(shape)


def owns(a) -> bool:
    """Whether ``a`` owns its memory (as ``a.base is None``), counting a pooled array
    that covers its whole buffer as owning it, and an array compiled code allocated
    (its base is Numba's memory record: the compiled wrapper returns a copy for every
    view of its arguments, so such an array is memory of its own)."""
    b = a.base
    if b is None or type(b).__name__ == "_MemInfo":
        return True
    return type(b) is np.ndarray and b.base is None and b.dtype == np.uint8 and \
        b.ndim == 1 and b.nbytes == a.nbytes and a.flags.c_contiguous and \
        b.ctypes.data == a.ctypes.data and any(x is b for x in _buffers.get(b.nbytes, ()))


def held_bytes() -> int:
    """Bytes the pool holds (in use or free)."""
    return _held[0]


def release() -> None:
    """Drop every free pooled buffer (their memory goes back to the system)."""
    with _lock:
        cap, config.buffer_pool_bytes = config.buffer_pool_bytes, 0
        try:
            _release_free(1)
        finally:
            config.buffer_pool_bytes = cap
