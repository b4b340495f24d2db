"""bfloat16 <-> float32 conversions usable inside Numba kernels.

Numba rejects bfloat16 arrays, so bf16 data travels as its uint16 bits
(``a.view(np.uint16)``). Inside kernels, ``bf16_to_f32`` widens the bits (a 16-bit
left shift) and ``f32_to_bf16`` rounds to nearest even, bit-identical to ml_dtypes'
conversion (NaN stays a quiet NaN with its sign). Both are small enough to inline and
vectorize.

Example::

    from numaccel.kernels_cpu.bf16 import bf16_to_f32, f32_to_bf16

    @numba.njit
    def scale(bits, out_bits, s):
        for i in range(bits.size):
            out_bits[i] = f32_to_bf16(bf16_to_f32(bits[i]) * s)
"""
from __future__ import annotations

import ml_dtypes
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

bfloat16 = np.dtype(ml_dtypes.bfloat16)


@intrinsic
def u32_as_f32(typingctx, x):
    """Reinterpret the bits of a uint32 as a float32 (no conversion)."""
    if x != types.uint32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@intrinsic
def f32_as_u32(typingctx, x):
    """Reinterpret the bits of a float32 as a uint32 (no conversion)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@numba.njit(inline="always")
def bf16_to_f32(bits):
    """uint16 bf16 bits -> float32 (exact)."""
    return u32_as_f32(np.uint32(np.uint32(bits) << np.uint32(16)))


@numba.njit(inline="always")
def f32_to_bf16(x):
    """float32 -> uint16 bf16 bits, round to nearest even; NaN -> quiet NaN."""
    v = f32_as_u32(np.float32(x))
    if (v & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        # NaN: keep sign and top payload bits, force the quiet bit (as ml_dtypes does)
        return np.uint16((v >> np.uint32(16)) | np.uint32(0x40))
    rounded = v + np.uint32(0x7FFF) + ((v >> np.uint32(16)) & np.uint32(1))
    # `uint32 >> 16` is typed uint64 by Numba; the explicit uint32 keeps the truncation
    return np.uint16(np.uint32(rounded) >> np.uint32(16))


def as_bits(a: np.ndarray) -> np.ndarray:
    """View a bfloat16 array as its uint16 bits (no copy); other arrays pass through."""
    return a.view(np.uint16) if a.dtype == bfloat16 else a


def from_bits(bits: np.ndarray) -> np.ndarray:
    """View uint16 bits as a bfloat16 array (no copy)."""
    return bits.view(bfloat16)


@numba.njit(parallel=True, cache=True)
def _f32_to_bf16_array(src, dst):
    for i in numba.prange(src.size):
        dst[i] = f32_to_bf16(src[i])


@numba.njit(parallel=True, cache=True)
def _bf16_to_f32_array(src, dst):
    for i in numba.prange(src.size):
        dst[i] = bf16_to_f32(src[i])


def to_bf16(a: np.ndarray) -> np.ndarray:
    """float32 array -> bfloat16 array (same shape), with Numba's rounding helper."""
    src = np.ascontiguousarray(a, dtype=np.float32)
    dst = np.empty(src.shape, np.uint16)
    _f32_to_bf16_array(src.reshape(-1), dst.reshape(-1))
    return from_bits(dst)


def bf16_to_float32(a: np.ndarray) -> np.ndarray:
    """bfloat16 array -> float32 array (exact)."""
    src = np.ascontiguousarray(as_bits(a))
    dst = np.empty(src.shape, np.float32)
    _bf16_to_f32_array(src.reshape(-1), dst.reshape(-1))
    return dst
