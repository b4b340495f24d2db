"""exp, exp2, expm1, log, log2, log10, log1p for float32 and float64, vectorizable.

Each function is built once by a factory per float type (the constants are closure
variables, which Numba freezes as typed constants, so float32 code stays float32). All
special cases are selects, never branches, so LLVM if-converts and widens the whole body.
Coefficients come from ``numaccel.lower.mathlib_fit``. See ``numaccel.lower.mathlib`` for the
accuracy table and the registry.

Example::

    import numba, numpy as np
    from numaccel.lower.mathlib_exp_log import exp_f32

    @numba.njit
    def f(a, out):
        for i in range(a.size):
            out[i] = exp_f32(a[i])
"""
# ruff: noqa: PLR0124, FURB136
# (x != x is the NaN test, and "a if a > b else b" is not max(): the select order decides
# which NaN or signed zero comes out, so both are written out on purpose)
from __future__ import annotations

from fractions import Fraction

import numba
import numpy as np

from numaccel.lower.mathlib_core import (
    div,
    f32_as_i32,
    f64_as_i64,
    fma,
    i32_as_f32,
    i64_as_f64,
    poly,
    rint,
    two_prod,
)

_LN2 = Fraction("0.69314718055994530941723212145817656807550013436025525412068000949")
_LN10 = Fraction("2.3025850929940456840179914546843642076011014886287729760333279010")
_LOG10_2 = Fraction("0.30102999566398119521373889472449302676818988146210854131")

_EXP_F64 = (0.5, 0.16666666666666682, 0.041666666666666095, 0.008333333333317039,
            0.0013888888889115538, 0.00019841269896369904, 2.4801586926757137e-05,
            2.7557234876546103e-06, 2.755758177915134e-07, 2.5112031530976966e-08,
            2.082663872776821e-09)
_EXP_F32 = (0.49999993447032265, 0.16666520607595103, 0.04166838795769407,
            0.008368719560303722, 0.0013814620547022403)
_EXP2_F64 = (0.6931471805599453, 0.24022650695910072, 0.05550410866482169,
             0.00961812910762833, 0.0013333558146392673, 0.00015403530393640814,
             1.5252733854335458e-05, 1.3215486594870261e-06, 1.017805193439691e-07,
             7.054974482435517e-09, 4.456571711572975e-10, 2.5625429424112536e-11)
_EXP2_F32 = (0.6931472028740757, 0.24022647911835282, 0.05550332429172462,
             0.009618437432858883, 0.0013398891353249797, 0.00015353379763990697)
_EXPM1_F64 = (0.16666666666666677, 0.04166666666666658, 0.00833333333332216,
              0.0013888888888942607, 0.00019841269884939846, 2.4801587198351715e-05,
              2.7557245298526764e-06, 2.7557386930391265e-07, 2.5108684432068352e-08,
              2.0878946562665708e-09)
_EXPM1_F32 = (0.16666548651519872, 0.04166685338401663, 0.0083660472863823,
              0.001389831126654841)
_LOG_F64 = (0.6666666666666734, 0.3999999999941617, 0.2857142874206254, 0.22222198605688928,
            0.18183562684101334, 0.1531409133661105, 0.14795553760621907)
_LOG_F32 = (0.6666677613128498, 0.39977567998998514, 0.29871109108711297)


class FloatInfo:
    """Per-type constants shared by the factories (plain attributes, frozen at compile)."""

    def __init__(self, ft: type) -> None:
        self.ft = ft
        f32 = ft is np.float32
        self.f32 = f32
        self.mant = 23 if f32 else 52
        self.bias = 127 if f32 else 1023
        self.as_f = i32_as_f32 if f32 else i64_as_f64
        self.as_i = f32_as_i32 if f32 else f64_as_i64
        self.ity = np.int32 if f32 else np.int64
        self.tiny = ft(np.finfo(ft).tiny)
        self.inf = ft(np.inf)
        self.nan = ft(np.nan)

    def c(self, v) -> object:
        """One constant of this float type."""
        return self.ft(v)

    def tup(self, vals) -> tuple:
        """A coefficient tuple of this float type."""
        return tuple(self.ft(v) for v in vals)

    def split(self, v: Fraction, zero_bits: int) -> tuple:
        """``v`` as hi + lo, hi with its last ``zero_bits`` mantissa bits cleared.

        Clearing bits makes ``k * hi`` exact for integers k below ``2**zero_bits``.
        """
        hi = self.ft(float(v))
        bits = np.array(hi).view(self.ity)
        bits = bits & ~self.ity((1 << zero_bits) - 1)
        hi = bits.view(self.ft)[()]
        lo = self.ft(float(v - Fraction(float(hi))))
        return hi, lo


def make_exp(fi: FloatInfo):
    """Build (exp, exp_core, scale) for one float type."""
    one, zero = fi.c(1), fi.c(0)
    log2e = fi.c(1 / _LN2)
    ln2hi, ln2lo = fi.ft(float(_LN2)), fi.ft(float(_LN2 - Fraction(float(fi.ft(float(_LN2))))))
    coef = fi.tup(_EXP_F32 if fi.f32 else _EXP_F64)
    # beyond these the result is inf / 0; clamping keeps the exponent arithmetic in range
    xmax = fi.c(89.0 if fi.f32 else 710.0)
    xmin = fi.c(-104.0 if fi.f32 else -746.0)
    as_f, bias, mant, ity = fi.as_f, fi.bias, fi.mant, fi.ity

    @numba.njit(inline="always")
    def exp_core(x):
        # e^x = p * 2^k with |r| <= ln2/2; the fma makes k*ln2hi + remainder exact
        k = rint(x * log2e)
        r = fma(-k, ln2hi, x)
        r = fma(-k, ln2lo, r)
        p = one + fma(r * r, poly(r, coef), r)
        return p, k

    @numba.njit(inline="always")
    def scale(p, k):
        # p * 2^k in two steps so that k in [-2*bias, 2*bias] neither overflows the exponent
        # field nor double-rounds subnormal results (the first product is exact)
        ki = ity(k)
        k1 = ki >> 1
        k2 = ki - k1
        return p * as_f((k1 + bias) << mant) * as_f((k2 + bias) << mant)

    @numba.njit(inline="always")
    def exp(x):
        xc = xmax if x > xmax else x
        xc = xmin if xc < xmin else xc
        xc = zero if x != x else xc
        p, k = exp_core(xc)
        y = scale(p, k)
        return x if x != x else y

    return exp, exp_core, scale


def make_exp2(fi: FloatInfo, scale):
    one, zero = fi.c(1), fi.c(0)
    coef = fi.tup(_EXP2_F32 if fi.f32 else _EXP2_F64)
    xmax = fi.c(129.0 if fi.f32 else 1025.0)
    xmin = fi.c(-152.0 if fi.f32 else -1080.0)

    @numba.njit(inline="always")
    def exp2(x):
        xc = xmax if x > xmax else x
        xc = xmin if xc < xmin else xc
        xc = zero if x != x else xc
        k = rint(xc)
        r = xc - k
        y = scale(fma(r, poly(r, coef), one), k)
        return x if x != x else y

    return exp2


def make_expm1(fi: FloatInfo, scale):
    one, zero, half = fi.c(1), fi.c(0), fi.c(0.5)
    log2e = fi.c(1 / _LN2)
    ln2hi, ln2lo = fi.ft(float(_LN2)), fi.ft(float(_LN2 - Fraction(float(fi.ft(float(_LN2))))))
    coef = fi.tup(_EXPM1_F32 if fi.f32 else _EXPM1_F64)
    xmax = fi.c(89.0 if fi.f32 else 710.0)
    # below xmin, e^x < ulp(1)/4 and expm1 rounds to -1
    xmin = fi.c(-18.0 if fi.f32 else -40.0)
    kbig = fi.c(fi.mant)
    as_f, bias, mant, ity = fi.as_f, fi.bias, fi.mant, fi.ity

    @numba.njit(inline="always")
    def expm1(x):
        xc = xmax if x > xmax else x
        xc = xmin if xc < xmin else xc
        xc = zero if x != x else xc
        k = rint(xc * log2e)
        r = fma(-k, ln2hi, xc)
        r = fma(-k, ln2lo, r)
        r2 = r * r
        em1 = r + fma(r2, half, r2 * r * poly(r, coef))
        # small k: 2^k em1 + (2^k - 1), where 2^k - 1 is exact; large k: (em1 + 1) 2^k
        kc = kbig if k > kbig else k
        t = as_f((ity(kc) + bias) << mant)
        y = fma(t, em1, t - one)
        y = scale(em1 + one, k) if k > kbig else y
        y = x if x == zero else y      # keeps -0
        return x if x != x else y

    return expm1


def make_log(fi: FloatInfo):
    """Build (log_parts, log, log2, log10, log1p) for one float type."""
    one, two, half, zero = fi.c(1), fi.c(2), fi.c(0.5), fi.c(0)
    coef = fi.tup(_LOG_F32 if fi.f32 else _LOG_F64)
    # 12 free low bits: e * hi stays exact for |e| < 4096
    ln2hi, ln2lo = fi.split(_LN2, 12 if not fi.f32 else 9)
    inv_ln2, inv_ln2_lo = fi.ft(float(1 / _LN2)), fi.ft(float(1 / _LN2 - Fraction(float(
        fi.ft(float(1 / _LN2))))))
    inv_ln10, inv_ln10_lo = fi.ft(float(1 / _LN10)), fi.ft(float(1 / _LN10 - Fraction(float(
        fi.ft(float(1 / _LN10))))))
    lg2hi, lg2lo = fi.split(_LOG10_2, 12 if not fi.f32 else 9)
    sqrth_bits = fi.ity(np.array(fi.ft(np.sqrt(0.5))).view(fi.ity))
    mant_mask = fi.ity((1 << fi.mant) - 1)
    up = fi.c(2.0 ** (fi.mant + 2))
    up_e = fi.c(fi.mant + 2)
    tiny, inf, nan = fi.tiny, fi.inf, fi.nan
    as_f, as_i, mant, ft = fi.as_f, fi.as_i, fi.mant, fi.ft
    del mant_mask

    @numba.njit(inline="always")
    def log_parts(x):
        # x = 2^e z with z in [sqrt(1/2), sqrt(2)); f = z - 1 exact; s = f / (2 + f).
        # Returns e, f, hfsq = f^2/2 and the odd tail s*(hfsq + R) of log(1+f).
        sub = x < tiny
        xs = x * up if sub else x
        bits = as_i(xs)
        ix = bits - sqrth_bits
        k = ix >> mant
        z = as_f(bits - (k << mant))
        e = ft(k)
        e = e - up_e if sub else e
        f = z - one
        s = div(f, two + f)
        w = s * s
        r = w * poly(w, coef)
        hfsq = half * f * f
        return e, f, hfsq, s * (hfsq + r)

    @numba.njit(inline="always")
    def fix(x, y):
        # log-family special cases: NaN/inf pass through, 0 -> -inf, negative -> NaN
        y = -inf if x == zero else y
        y = x if (x != x) or (x == inf) else y
        return nan if x < zero else y

    @numba.njit(inline="always")
    def log(x):
        e, f, hfsq, t = log_parts(x)
        y = e * ln2hi - ((hfsq - (t + e * ln2lo)) - f)
        return fix(x, y)

    @numba.njit(inline="always")
    def log_hilo(f, hfsq, t):
        # log(1+f) as hi + lo with |lo| <~ ulp(hi)
        hi = f - hfsq
        lo = ((f - hi) - hfsq) + t
        return hi, lo

    @numba.njit(inline="always")
    def log2(x):
        e, f, hfsq, t = log_parts(x)
        hi, lo = log_hilo(f, hfsq, t)
        ph, pl = two_prod(hi, inv_ln2)
        w = e + ph
        corr = (e - w) + ph          # exact: |e| >= 1 > |ph| or e == 0
        y = w + (corr + (pl + fma(lo, inv_ln2, hi * inv_ln2_lo)))
        return fix(x, y)

    @numba.njit(inline="always")
    def log10(x):
        e, f, hfsq, t = log_parts(x)
        hi, lo = log_hilo(f, hfsq, t)
        a = e * lg2hi
        ph, pl = two_prod(hi, inv_ln10)
        w = a + ph
        bb = w - a
        corr = (a - (w - bb)) + (ph - bb)
        y = w + (corr + (pl + fma(lo, inv_ln10, fma(hi, inv_ln10_lo, e * lg2lo))))
        return fix(x, y)

    @numba.njit(inline="always")
    def log1p(x):
        u = one + x
        e, f, hfsq, t = log_parts(u)
        # u = 1 + x lost the low bits of x: c = (1 + x) - u, relative to u
        c = div(one - (u - x), u) if e > zero else div(x - (u - one), u)
        y = e * ln2hi - ((hfsq - (t + (e * ln2lo + c))) - f)
        y = x if (x == zero) or (x != x) or (x == inf) else y
        y = -inf if x == -one else y
        return nan if x < -one else y

    return log_parts, log, log2, log10, log1p


F32 = FloatInfo(np.float32)
F64 = FloatInfo(np.float64)

exp_f32, exp_core_f32, scale_f32 = make_exp(F32)
exp_f64, exp_core_f64, scale_f64 = make_exp(F64)
exp2_f32 = make_exp2(F32, scale_f32)
exp2_f64 = make_exp2(F64, scale_f64)
expm1_f32 = make_expm1(F32, scale_f32)
expm1_f64 = make_expm1(F64, scale_f64)
log_parts_f32, log_f32, log2_f32, log10_f32, log1p_f32 = make_log(F32)
log_parts_f64, log_f64, log2_f64, log10_f64, log1p_f64 = make_log(F64)
