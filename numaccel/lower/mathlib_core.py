"""Building blocks of numaccel's vectorizable math: bitcasts, fma, rint, double-double.

Everything here is a Numba intrinsic or an ``inline="always"`` function that lowers to a
single LLVM instruction or intrinsic (``bitcast``, ``llvm.fma``, ``llvm.rint``,
``llvm.copysign``, ``llvm.floor``), all of which LLVM's loop vectorizer widens to zmm code.
Numba's own ``math.floor`` returns an int and ``np.rint`` may go through libm, hence these.

Example::

    import numba, numpy as np
    from numaccel.lower.mathlib_core import f64_as_i64, i64_as_f64, fma

    @numba.njit
    def next_up(x):
        return i64_as_f64(f64_as_i64(x) + 1)

    next_up(1.0) - 1.0 == np.finfo(np.float64).eps
"""
# (x != x is the NaN test, and "a if a > b else b" is not max(): the select order decides
# which NaN or signed zero comes out, so both are written out on purpose)
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = [
    "copysign",
    "div",
    "f32_as_i32",
    "f64_as_i64",
    "fast_two_sum",
    "floor",
    "fma",
    "i32_as_f32",
    "i64_as_f64",
    "rint",
    "two_prod",
    "two_sum",
]

_I32, _I64 = ir.IntType(32), ir.IntType(64)


def _int_to(builder, val, fromty, width):
    """Truncate or sign-extend an integer LLVM value to ``width`` bits."""
    have = fromty.bitwidth
    target = ir.IntType(width)
    if have > width:
        return builder.trunc(val, target)
    if have < width:
        return builder.sext(val, target) if fromty.signed else builder.zext(val, target)
    return val


@intrinsic
def f64_as_i64(typingctx, x):
    """Reinterpret a float64's bits as an int64 (no conversion)."""
    if x != types.float64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], _I64)

    return types.int64(types.float64), codegen


@intrinsic
def i64_as_f64(typingctx, x):
    """Reinterpret the low 64 bits of any integer as a float64 (no conversion)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(_int_to(builder, args[0], x, 64), ir.DoubleType())

    return types.float64(x), codegen


@intrinsic
def f32_as_i32(typingctx, x):
    """Reinterpret a float32's bits as an int32 (no conversion)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], _I32)

    return types.int32(types.float32), codegen


@intrinsic
def i32_as_f32(typingctx, x):
    """Reinterpret the low 32 bits of any integer as a float32 (truncating wider ints).

    Taking any integer type matters: Numba types ``int32 + int32`` as int64, and the
    truncation here lets LLVM keep the whole computation in 32-bit lanes.
    """
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(_int_to(builder, args[0], x, 32), ir.FloatType())

    return types.float32(x), codegen


def _llvm_float(ty):
    return ir.DoubleType() if ty == types.float64 else ir.FloatType()


def _unary_intrinsic(name):
    def impl(typingctx, x):
        if x not in (types.float32, types.float64):
            return None

        def codegen(context, builder, sig, args):
            fty = _llvm_float(x)
            fn = builder.module.declare_intrinsic(f"llvm.{name}", [fty],
                                                  ir.FunctionType(fty, [fty]))
            return builder.call(fn, args)

        return x(x), codegen

    return impl


rint = intrinsic(_unary_intrinsic("rint"))
rint.__doc__ = "Round to the nearest integer, ties to even (``llvm.rint``), float result."
floor = intrinsic(_unary_intrinsic("floor"))
floor.__doc__ = "Floor as a float (``llvm.floor``); Numba's ``math.floor`` returns an int."


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` with one rounding (``llvm.fma``: vfmadd on x86-64 with FMA)."""
    if not (a == b == c and a in (types.float32, types.float64)):
        return None

    def codegen(context, builder, sig, args):
        fty = _llvm_float(a)
        fn = builder.module.declare_intrinsic("llvm.fma", [fty],
                                              ir.FunctionType(fty, [fty, fty, fty]))
        return builder.call(fn, args)

    return a(a, a, a), codegen


@intrinsic
def copysign(typingctx, x, y):
    """``|x|`` with the sign bit of ``y`` (``llvm.copysign``)."""
    if not (x == y and x in (types.float32, types.float64)):
        return None

    def codegen(context, builder, sig, args):
        fty = _llvm_float(x)
        fn = builder.module.declare_intrinsic("llvm.copysign", [fty],
                                              ir.FunctionType(fty, [fty, fty]))
        return builder.call(fn, args)

    return x(x, x), codegen


@intrinsic
def div(typingctx, a, b):
    """IEEE ``a / b`` (inf/NaN on zero divisors), whatever the caller's ``error_model``.

    Numba's default ``error_model="python"`` turns ``/`` into a zero test plus a raise, which
    both changes the IEEE result and blocks vectorization.
    """
    if not (a == b and a in (types.float32, types.float64)):
        return None

    def codegen(context, builder, sig, args):
        return builder.fdiv(args[0], args[1])

    return a(a, a), codegen


@numba.njit(inline="always")
def two_prod(a, b):
    """Exact product as ``(hi, lo)`` with ``hi + lo == a * b`` (needs a true fma)."""
    hi = a * b
    return hi, fma(a, b, -hi)


@numba.njit(inline="always")
def fast_two_sum(a, b):
    """Exact sum as ``(hi, lo)``, valid when ``|a| >= |b|`` (or a == 0)."""
    s = a + b
    return s, b - (s - a)


@numba.njit(inline="always")
def two_sum(a, b):
    """Exact sum as ``(hi, lo)`` for any finite ``a``, ``b`` (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@intrinsic
def poly(typingctx, x, c):
    """Horner evaluation of ``c[0] + c[1] x + ... + c[n] x^n`` with fma, fully unrolled.

    ``c`` is a homogeneous tuple of the float type of ``x`` (a global constant). Emitted
    straight as an fma chain: a Python loop over the tuple would index it dynamically, which
    LLVM does not always unroll for long tuples, and a non-unrolled inner loop stops the
    caller's loop from vectorizing.
    """
    if x not in (types.float32, types.float64):
        return None
    if not (isinstance(c, types.UniTuple) and c.dtype == x and c.count >= 1):
        return None

    def codegen(context, builder, sig, args):
        fty = _llvm_float(x)
        fn = builder.module.declare_intrinsic("llvm.fma", [fty],
                                              ir.FunctionType(fty, [fty, fty, fty]))
        xv, cv = args
        r = builder.extract_value(cv, c.count - 1)
        for i in range(c.count - 2, -1, -1):
            r = builder.call(fn, [r, xv, builder.extract_value(cv, i)])
        return r

    return x(x, c), codegen


def f32c(*vals: float) -> tuple:
    """Tuple of float32 constants (typed float32 by Numba when used as a global)."""
    return tuple(np.float32(v) for v in vals)


def f64c(*vals: float) -> tuple:
    """Tuple of float64 constants."""
    return tuple(np.float64(v) for v in vals)
