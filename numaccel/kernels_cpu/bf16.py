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
    """Reinterpret the low 32 bits of an integer as a float32 (no conversion).

    Any integer type is accepted because Numba widens ``uint32 op uint32`` to 64 bits."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = args[0]
        if x.bitwidth > 32:
            v = builder.trunc(v, ir.IntType(32))
        elif x.bitwidth < 32:
            v = builder.zext(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())

    return types.float32(x), codegen


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


# float16 travels as uint16 bits too (Numba has no float16 on CPU). Integer bit tricks
# (LLVM's half type would need compiler-rt calls that are not linked into Numba).
_F16_SCALE = np.uint32(0x77800000)  # 2**112 as float32 bits: rebias f16 exponent to f32


@numba.njit(inline="always")
def f16_to_f32(bits):
    """uint16 float16 bits -> float32 (exact, incl. subnormals, inf and NaN)."""
    h = np.uint32(bits)
    o = np.uint32((h & np.uint32(0x7FFF)) << np.uint32(13))
    f = u32_as_f32(o) * u32_as_f32(_F16_SCALE)
    if (o & np.uint32(0x0F800000)) == np.uint32(0x0F800000):
        f = u32_as_f32(o | np.uint32(0x7F800000))
    sign = np.uint32((h & np.uint32(0x8000)) << np.uint32(16))
    return u32_as_f32(f32_as_u32(f) | sign)


@numba.njit(inline="always")
def f32_to_f16(x):
    """float32 -> uint16 float16 bits, round to nearest even (as NumPy's astype)."""
    f = f32_as_u32(np.float32(x))
    sign = f & np.uint32(0x80000000)
    f = f ^ sign
    if f >= np.uint32(0x47800000):            # >= 65536 (after rounding): inf, or NaN
        o = np.uint32(0x7E00) if f > np.uint32(0x7F800000) else np.uint32(0x7C00)
    elif f < np.uint32(0x38800000):           # below the smallest normal: subnormal / 0
        v = u32_as_f32(f) + u32_as_f32(np.uint32(0x3F000000))
        o = np.uint32(f32_as_u32(v) - np.uint32(0x3F000000))
    else:
        odd = (f >> np.uint32(13)) & np.uint32(1)
        f = np.uint32(f + np.uint32(0xC8000FFF) + odd)  # rebias exponent, round half even
        o = np.uint32(f >> np.uint32(13))
    return np.uint16(o | (sign >> np.uint32(16)))
