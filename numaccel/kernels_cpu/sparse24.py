"""Numba kernels for 2:4 semi-structured sparse weights (layout: docs/sparse24_layout.md).

Values travel as float32 arrays, or as their 16-bit patterns (Numba has no float16 or
bfloat16 arrays): bfloat16 as ``uint16`` and float16 as ``int16``, so that the element
type alone selects the widening (``widen``) at compile time.

- ``decompress``: compressed -> dense (the weight's dtype, or float32 for BLAS).
- ``linear_small``: y = x @ W.T for few rows of x (decoding): parallel over output rows,
  each row's values and metadata streamed once from memory, x gathered from cache.
- ``linear_tiled``: y = x @ W.T for many rows: x transposed so that every kept value
  multiplies a contiguous, vectorized run of x columns.

Example::

    import numpy as np
    from numaccel.kernels_cpu import sparse24
    from numaccel.sparse import to_sparse_semi_structured, prune_2_4

    s = to_sparse_semi_structured(prune_2_4(np.ones((4, 16), np.float32)))
    y = sparse24.linear(np.ones((2, 16), np.float32), s.values, s.meta, s.shape)
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic, overload

from .bf16 import bf16_to_f32, bfloat16


@intrinsic
def _f16_bits_to_f32(typingctx, x):
    """int16 holding IEEE half bits -> float32 (exact; vectorizes to vcvtph2ps)."""
    if x != types.int16:
        return None

    def codegen(context, builder, sig, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.int16), codegen


def widen(v):  # pragma: no cover - replaced inside Numba by the overload below
    """float32 / bf16 bits (uint16) / f16 bits (int16) -> float32."""
    raise NotImplementedError


@overload(widen, inline="always")
def _widen_impl(v):
    if v == types.float32:
        return lambda v: v
    if v == types.uint16:
        return lambda v: bf16_to_f32(v)
    if v == types.int16:
        return lambda v: _f16_bits_to_f32(v)
    return None


def kernel_view(values: np.ndarray) -> np.ndarray:
    """The array the kernels take for ``values``: float32 as is, 16-bit types as bits."""
    if values.dtype == np.float32:
        return values
    if values.dtype == bfloat16:
        return values.view(np.uint16)
    if values.dtype == np.float16:
        return values.view(np.int16)
    raise TypeError(f"2:4 kernels support float32, float16 and bfloat16 values, "
                    f"got {values.dtype}")


# --------------------------------------------------------------------------------------
# decompression


@numba.njit(parallel=True, cache=True)
def _scatter(values, meta, out):
    # out is zero-filled (by NumPy, which gets huge pages); write the kept values only
    m, k = out.shape
    nv = values.shape[1]
    for r in prange(m):
        for j in range(nv):
            c = 4 * (j >> 1) + ((meta[r, j >> 3] >> (2 * (j & 7))) & 3)
            if c < k:
                out[r, c] = values[r, j]


@numba.njit(parallel=True, cache=True)
def _scatter_widen(values, meta, out):
    m, k = out.shape
    nv = values.shape[1]
    for r in prange(m):
        for j in range(nv):
            c = 4 * (j >> 1) + ((meta[r, j >> 3] >> (2 * (j & 7))) & 3)
            if c < k:
                out[r, c] = widen(values[r, j])


def decompress(values: np.ndarray, meta: np.ndarray, shape: tuple,
               out_dtype=None) -> np.ndarray:
    """Dense ``shape`` array from compressed ``values``/``meta`` (weight dtype by default).

    Example::

        d = decompress(s.values, s.meta, s.shape)                      # exact
        d32 = decompress(s.values, s.meta, s.shape, out_dtype=np.float32)
    """
    dt = values.dtype if out_dtype is None else np.dtype(out_dtype)
    out = np.zeros(shape, dt)
    if out.size == 0:
        return out
    kv = kernel_view(values)
    if dt == values.dtype:
        _scatter(kv, meta, out.view(kv.dtype))
    elif dt == np.float32:
        _scatter_widen(kv, meta, out)
    else:
        raise TypeError(f"decompress to {dt} from {values.dtype} is not supported; "
                        "use the weight dtype or float32")
    return out
