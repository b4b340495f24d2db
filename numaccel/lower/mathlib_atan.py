"""arctan, arctan2, arcsin, arccos for float32 and float64, vectorizable.

arctan reduces |x| to [0, 7/16] with atan(x) = atan(c) + atan((x - c)/(1 + c x)) for
c in {1/2, 1, 3/2} and atan(x) = pi/2 - atan(1/x) (fdlibm's intervals, written as selects),
then uses an odd polynomial; the offsets are added as hi + lo pairs. arctan2 divides the smaller of |x|, |y| by the larger and fixes the quadrant
with selects (every IEEE special case of C99 atan2 included). arcsin/arccos go through
arctan2 with sqrt((1-x)(1+x)), which is accurate near +-1 because 1-x is exact there.

Example::

    from numaccel.lower.mathlib_atan import arctan2_f32
    # inside a Numba loop: out[i] = arctan2_f32(y[i], x[i])
"""
# (x != x is the NaN test, and "a if a > b else b" is not max(): the select order decides
# which NaN or signed zero comes out, so both are written out on purpose)
from __future__ import annotations

import numba
import numpy as np

from numaccel.lower.mathlib_core import copysign, div, fma, poly
from numaccel.lower.mathlib_exp_log import F32, F64, FloatInfo

# (atan(x) - x) / x^3 as a polynomial in x^2 on [0, (7/16)^2]
_ATAN_F64 = (-0.3333333333333292, 0.19999999999873627, -0.14285714272257502,
             0.11111110394884811, -0.0909088687095782, 0.07691872166931535,
             -0.06661033367947485, 0.05833319038977516, -0.049758949251875344,
             0.036509843257330005, -0.016265093903511083)
_ATAN_F32 = (-0.3333330342755327, 0.19997737232779703, -0.14229568789680358,
             0.10490718982610096, -0.05818896699027562)

_ATAN_HALF = (0.4636476090008061, 2.2698777452961687e-17)
_ATAN_3HALF = (0.982793723247329, 1.3903311031230998e-17)
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
    one, zero, two = fi.c(1), fi.c(0), fi.c(2)
    coef = fi.tup(_ATAN_F32 if fi.f32 else _ATAN_F64)
    c1, c2, c3, c4 = fi.c(7 / 16), fi.c(11 / 16), fi.c(19 / 16), fi.c(39 / 16)
    one_half = fi.c(1.5)
    pi_hi, pi_lo = _hilo(fi, _PI)
    pio2_hi, pio2_lo = _hilo(fi, _PIO2)
    pio4_hi, pio4_lo = _hilo(fi, _PIO4)
    ah_hi, ah_lo = _hilo(fi, _ATAN_HALF)
    a3_hi, a3_lo = _hilo(fi, _ATAN_3HALF)
    inf = fi.inf

    @numba.njit(inline="always")
    def atan_kernel(t):
        z = t * t
        return fma(t * z, poly(z, coef), t)

    @numba.njit(inline="always")
    def atan(x):
        # fdlibm's intervals: atan(|x|) = atan(c) + atan((|x| - c) / (1 + c |x|)) with
        # c in {0, 1/2, 1, 3/2, inf}; |reduced| <= 7/16 and little cancellation with atan(c).
        # One division with selected operands; the numerators are exact.
        a = abs(x)
        i1, i2, i3, i4 = a >= c1, a >= c2, a >= c3, a >= c4
        num = -one if i4 else (a - one_half if i3 else (a - one if i2 else (
            fma(two, a, -one) if i1 else a)))
        den = a if i4 else (fma(one_half, a, one) if i3 else (a + one if i2 else (
            two + a if i1 else one)))
        hi = pio2_hi if i4 else (a3_hi if i3 else (pio4_hi if i2 else (ah_hi if i1 else zero)))
        lo = pio2_lo if i4 else (a3_lo if i3 else (pio4_lo if i2 else (ah_lo if i1 else zero)))
        r = hi + (atan_kernel(div(num, den)) + lo)
        return copysign(r, x)

    @numba.njit(inline="always")
    def atan2(y, x):
        ax, ay = abs(x), abs(y)
        swap = ay > ax
        t = div(ax, ay) if swap else div(ay, ax)
        t = one if (ax == inf) and (ay == inf) else t
        t = zero if (ax == zero) and (ay == zero) else t
        a = atan(t)
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
