"""arctan, arctan2, arcsin, arccos for float32 and float64, vectorizable.

arctan reduces |x| to [0, tan(pi/8)] with the identities atan(x) = pi/2 - atan(1/x) and
atan(x) = pi/4 + atan((x-1)/(x+1)), then uses an odd polynomial; the offsets are added as
hi + lo pairs. arctan2 divides the smaller of |x|, |y| by the larger and fixes the quadrant
with selects (every IEEE special case of C99 atan2 included). arcsin/arccos go through
arctan2 with sqrt((1-x)(1+x)), which is accurate near +-1 because 1-x is exact there.

Example::

    from numaccel.lower.mathlib_atan import arctan2_f32
    # inside a Numba loop: out[i] = arctan2_f32(y[i], x[i])
"""
from __future__ import annotations

import numba
import numpy as np

from numaccel.lower.mathlib_core import copysign, div, fma, poly
from numaccel.lower.mathlib_exp_log import F32, F64, FloatInfo

_ATAN_F64 = (-0.333333333333332, 0.1999999999995323, -0.14285714280164843,
             0.11111110782068846, -0.09090897722758683, 0.07692059672740645,
             -0.06663098691497502, 0.05847855513402667, -0.050391733355753365,
             0.038061701893150494, -0.01790455571420118)
_ATAN_F32 = (-0.33332948966591325, 0.19977703186239923, -0.13877601735880649,
             0.08053463202828591)

_PI = (3.141592653589793, 1.2246467991473532e-16)
_PIO2 = (1.5707963267948966, 6.123233995736766e-17)
_PIO4 = (0.7853981633974483, 3.061616997868383e-17)


def _hilo(fi: FloatInfo, pair) -> tuple:
    hi = fi.ft(pair[0])
    # the float32 low part: what float32(hi) dropped, plus the float64 low part
    lo = fi.ft((pair[0] - float(hi)) + pair[1])
    return hi, lo


def make_atan(fi: FloatInfo):
    """Build (atan, atan2, asin, acos) for one float type."""
    one, zero = fi.c(1), fi.c(0)
    coef = fi.tup(_ATAN_F32 if fi.f32 else _ATAN_F64)
    t3p8, t1p8 = fi.c(2.414213562373095), fi.c(0.41421356237309503)
    pi_hi, pi_lo = _hilo(fi, _PI)
    pio2_hi, pio2_lo = _hilo(fi, _PIO2)
    pio4_hi, pio4_lo = _hilo(fi, _PIO4)
    inf = fi.inf

    @numba.njit(inline="always")
    def atan_kernel(t):
        z = t * t
        return fma(t * z, poly(z, coef), t)

    @numba.njit(inline="always")
    def atan(x):
        ax = abs(x)
        big = ax > t3p8
        mid = ax > t1p8
        t = div(-one, ax) if big else (div(ax - one, ax + one) if mid else ax)
        hi = pio2_hi if big else (pio4_hi if mid else zero)
        lo = pio2_lo if big else (pio4_lo if mid else zero)
        r = hi + (atan_kernel(t) + lo)
        return copysign(r, x)

    @numba.njit(inline="always")
    def atan2(y, x):
        ax, ay = abs(x), abs(y)
        swap = ay > ax
        t = div(ax, ay) if swap else div(ay, ax)
        t = one if (ax == inf) and (ay == inf) else t
        t = zero if (ax == zero) and (ay == zero) else t
        # t in [0, 1]: one reduction step around pi/4
        mid = t > t1p8
        u = div(t - one, t + one) if mid else t
        a = atan_kernel(u)
        a = pio4_hi + (a + pio4_lo) if mid else a
        a = (pio2_hi - a) + pio2_lo if swap else a
        a = (pi_hi - a) + pi_lo if copysign(one, x) < zero else a
        return copysign(a, y)

    @numba.njit(inline="always")
    def asin(x):
        return atan2(x, np.sqrt((one - x) * (one + x)))

    @numba.njit(inline="always")
    def acos(x):
        return atan2(np.sqrt((one - x) * (one + x)), x)

    return atan, atan2, asin, acos


arctan_f32, arctan2_f32, arcsin_f32, arccos_f32 = make_atan(F32)
arctan_f64, arctan2_f64, arcsin_f64, arccos_f64 = make_atan(F64)
