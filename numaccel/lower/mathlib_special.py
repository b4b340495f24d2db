"""tanh, sinh, cosh, sigmoid, erf, power, integer power and cbrt, vectorizable.

Built on the exp/expm1 kernels of ``mathlib_exp_log``. float64 ``power`` computes log(x) as
a double-double (exact two-products by fma), multiplies by y in double-double and feeds the
low part into the exp reduction, so |y log x| up to the overflow threshold keeps ~1 ulp.
float32 ``power``, ``erf`` and ``cbrt`` are computed in float64 and rounded once. Every
C99/NumPy special case of pow (0, inf, NaN, negative bases with integer exponents, +-1) is a
select.

Example::

    from numaccel.lower.mathlib_special import power_f64, tanh_f32
    # inside a Numba loop: out[i] = power_f64(x[i], y[i]) + tanh_f32(z[i])
"""
# ruff: noqa: PLR0124, FURB136
# (x != x is the NaN test, and "a if a > b else b" is not max(): the select order decides
# which NaN or signed zero comes out, so both are written out on purpose)
from __future__ import annotations

from fractions import Fraction

import numba
import numpy as np

from numaccel.lower.mathlib_core import (
    copysign,
    div,
    f64_as_i64,
    fast_two_sum,
    floor,
    fma,
    i64_as_f64,
    poly,
    rint,
    two_prod,
    two_sum,
)
from numaccel.lower.mathlib_exp_log import (
    _EXP_F64,
    _LN2,
    F32,
    F64,
    FloatInfo,
    exp_core_f32,
    exp_core_f64,
    exp_f32,
    exp_f64,
    expm1_f32,
    expm1_f64,
    log_f64,
    scale_f32,
    scale_f64,
)

_LOGDD_F64 = (0.4000000000000225, 0.28571428570102675, 0.22222222519379664,
              0.18181784413740407, 0.15386755225835966, 0.13256865813837587,
              0.13195891192793718)
_ERF_F64 = (1.1283791670955126, -0.3761263890318375, 0.11283791670954862,
            -0.026866170645073576, 0.00522397762478618, -0.0008548326978999229,
            0.00012055331045032439, -1.4925593680025227e-05, 1.6460975315311827e-06,
            -1.6350049323574448e-07, 1.4658028686012218e-08, -1.1366198026339375e-09,
            5.946098969355655e-11)
# erfc(x) exp(x^2) = P(1/(1+x)) on [1, 6]
_ERFC_F64 = (3.3380058946446653e-09, 0.5641894664081356, 0.5641892354361222,
             0.2821949195960478, -0.28494745291129375, -0.6591443710409265,
             -0.6493905525458329, 5.7204032290425255, -22.870545013616162, 111.88463906463488,
             -418.52542271266753, 1068.773883087761, -1912.3594311854188, 2440.310399682278,
             -2200.7142875343725, 1343.3113949720573, -500.6387325368822, 86.34120403318107)


def make_hyperbolic(fi: FloatInfo, exp, exp_core, scale, expm1):
    """Build (tanh, sinh, cosh, sigmoid) for one float type."""
    one, two, half, zero = fi.c(1), fi.c(2), fi.c(0.5), fi.c(0)
    # above this exp(-|x|) no longer matters next to exp(|x|) / 2
    big = fi.c(9.0 if fi.f32 else 20.0)
    xclamp = fi.c(90.0 if fi.f32 else 711.0)

    @numba.njit(inline="always")
    def tanh(x):
        t = expm1(-two * abs(x))
        return copysign(div(-t, t + two), x)

    @numba.njit(inline="always")
    def half_exp_big(ax):
        # exp(ax) / 2 without overflowing before the halving
        p, k = exp_core(xclamp if ax > xclamp else ax)
        return scale(p, k - one)

    @numba.njit(inline="always")
    def sinh(x):
        ax = abs(x)
        t = expm1(ax)
        r = half * (t + div(t, t + one))
        r = half_exp_big(ax) if ax > big else r
        return copysign(r, x)

    @numba.njit(inline="always")
    def cosh(x):
        ax = abs(x)
        e = exp(ax)
        r = half * e + div(half, e)
        r = half_exp_big(ax) if ax > big else r
        return r

    @numba.njit(inline="always")
    def sigmoid(x):
        # exp(-|x|) never overflows; for x < 0 use e / (1 + e) so tiny results stay exact
        e = exp(-abs(x))
        r = div(one, one + e)
        return e * r if x < zero else r

    return tanh, sinh, cosh, sigmoid


tanh_f32, sinh_f32, cosh_f32, sigmoid_f32 = make_hyperbolic(
    F32, exp_f32, exp_core_f32, scale_f32, expm1_f32)
tanh_f64, sinh_f64, cosh_f64, sigmoid_f64 = make_hyperbolic(
    F64, exp_f64, exp_core_f64, scale_f64, expm1_f64)


# ---------------------------------------------------------------------------------- erf
_ONE, _ZERO, _HALF, _TWO = np.float64(1), np.float64(0), np.float64(0.5), np.float64(2)
_erf = tuple(np.float64(c) for c in _ERF_F64)
_erfc = tuple(np.float64(c) for c in _ERFC_F64)
_SIX = np.float64(6.0)


@numba.njit(inline="always")
def erf_f64(x):
    """erf for float64: odd polynomial below 1, 1 - exp(-x^2) P(1/(1+x)) up to 6, then 1."""
    ax = abs(x)
    r_small = ax * poly(ax * ax, _erf)
    a = ax if ax < _SIX else _SIX
    a = _ONE if a < _ONE else a
    u = div(_ONE, _ONE + a)
    # exp(-a^2) with a^2 as hi + lo: the lo part is ~1e-16 relative but a^2 reaches 36
    sh, sl = two_prod(a, a)
    erfc = exp_f64(-sh) * (_ONE - sl) * poly(u, _erfc)
    r = r_small if ax < _ONE else _ONE - erfc
    r = _ONE if ax >= _SIX else r
    r = ax if ax != ax else r
    return copysign(r, x)


@numba.njit(inline="always")
def erf_f32(x):
    """erf for float32, through float64."""
    return np.float32(erf_f64(np.float64(x)))


# -------------------------------------------------------------------------------- power
_LN2HI, _LN2LO = F64.split(_LN2, 12)
_C23H = np.float64(2.0 / 3.0)
_C23L = np.float64(float(Fraction(2, 3) - Fraction(_C23H)))
_logdd = tuple(np.float64(c) for c in _LOGDD_F64)
_exp = tuple(np.float64(c) for c in _EXP_F64)
_SQRTH_BITS = np.int64(np.array(np.sqrt(0.5)).view(np.int64))
_TINY64 = np.float64(np.finfo(np.float64).tiny)
_UP54 = np.float64(2.0 ** 54)
_I52 = np.int64(52)
_LOG2E = np.float64(float(1 / _LN2))
_LN2F = np.float64(float(_LN2))
_LN2F_LO = np.float64(float(_LN2 - Fraction(float(_LN2))))
_INF, _NAN = np.float64(np.inf), np.float64(np.nan)
_TWO53 = np.float64(2.0 ** 53)


@numba.njit(inline="always")
def log_dd_f64(x):
    """log(x) for finite x > 0 as (hi, lo), |error| ~ 2^-100 |log x| (for power)."""
    sub = x < _TINY64
    xs = x * _UP54 if sub else x
    bits = f64_as_i64(xs)
    k = (bits - _SQRTH_BITS) >> _I52
    z = i64_as_f64(bits - (k << _I52))
    e = np.float64(k) - (np.float64(54) if sub else _ZERO)
    f = z - _ONE
    uh = _TWO + f
    ul = f - (uh - _TWO)
    sh = div(f, uh)
    sl = div(fma(-sh, uh, f) - sh * ul, uh)
    # log(z) = 2s + (2/3) s^3 + s^5 P(s^2); the s^3 term in double-double
    s2h, s2l = two_prod(sh, sh)
    s2l = fma(_TWO * sh, sl, s2l)
    s3h, s3l = two_prod(s2h, sh)
    s3l = fma(s2l, sh, fma(s2h, sl, s3l))
    t3h, t3l = two_prod(s3h, _C23H)
    t3l = fma(s3h, _C23L, fma(s3l, _C23H, t3l))
    tail = s3h * s2h * poly(s2h, _logdd)
    hi, lo = fast_two_sum(_TWO * sh, t3h)
    lo = lo + (_TWO * sl + (t3l + tail))
    hh, ll = two_sum(e * _LN2HI, hi)
    ll = ll + (lo + e * _LN2LO)
    return fast_two_sum(hh, ll)


@numba.njit(inline="always")
def _pow_core_f64(ax, y):
    # exp(y log ax) with y log ax as a double-double
    lh, ll = log_dd_f64(ax)
    ph, pl = two_prod(y, lh)
    # decide overflow on the plain product: for huge y, pl is inf - inf = NaN
    big = ph > np.float64(710.0)
    small = ph < np.float64(-746.0)
    pl = fma(y, ll, pl)
    ph, pl = fast_two_sum(ph, pl)
    phc = _ZERO if big or small or (ph != ph) else ph
    plc = _ZERO if big or small or (ph != ph) else pl
    k = rint(phc * _LOG2E)
    r = fma(-k, _LN2F, phc)            # exact
    r = fma(-k, _LN2F_LO, r) + plc
    p = _ONE + fma(r * r, poly(r, _exp), r)
    v = scale_f64(p, k)
    v = _INF if big else v
    return _ZERO if small else v


@numba.njit(inline="always")
def _pow_core_f32(ax, y):
    # float32 inputs: double log/exp leave ~2^-46 relative error, far below a float32 ulp
    return exp_f64(y * log_f64(ax))


def _make_power(core):
    @numba.njit(inline="always")
    def power(x, y):
        ax, ay = abs(x), abs(y)
        yfin = ay < _INF
        yint = floor(y) == y
        yodd = yint and (ay < _TWO53) and (floor(y * _HALF) != y * _HALF)
        xneg = x < _ZERO
        axs = ax if (ax > _ZERO) and (ax < _INF) else _ONE
        r = core(axs, y if yfin else _ZERO)
        r = (-r if yodd else (r if yint else _NAN)) if xneg else r
        # x = +-0 and x = +-inf
        r0 = _INF if y < _ZERO else _ZERO
        r = (copysign(r0, x) if yodd else r0) if ax == _ZERO else r
        ri = _ZERO if y < _ZERO else _INF
        r = (-ri if (yodd and xneg) else ri) if ax == _INF else r
        # y = +-inf
        ryi = _ONE if ax == _ONE else (_INF if (ax < _ONE) == (y < _ZERO) else _ZERO)
        r = r if yfin else ryi
        r = _NAN if (x != x) or (y != y) else r
        return _ONE if (y == _ZERO) or (x == _ONE) else r

    return power


_power64 = _make_power(_pow_core_f64)
_power32 = _make_power(_pow_core_f32)


@numba.njit(inline="always")
def power_f64(x, y):
    """x ** y for float64 (C99 pow semantics, as NumPy)."""
    return _power64(x, y)


@numba.njit(inline="always")
def power_f32(x, y):
    """x ** y for float32, computed in float64 and rounded once."""
    return np.float32(_power32(np.float64(x), np.float64(y)))


def _make_powi(ft):
    one = ft(1)

    @numba.njit(inline="always")
    def powi(x, n):
        # binary powering; the trip count depends on n only, so for a loop-invariant n LLVM
        # still vectorizes over x. Negative n: 1 / x^|n| (can overflow early, as C does not).
        m = abs(np.int64(n))
        r = one
        b = x
        while m != 0:
            r = r * b if m & 1 else r
            b = b * b
            m = m >> 1
        return div(one, r) if n < 0 else r

    return powi


powi_f32 = _make_powi(np.float32)
powi_f64 = _make_powi(np.float64)


# --------------------------------------------------------------------------------- cbrt
_THIRD = np.float64(1.0 / 3.0)
_CBRT_MAGIC = np.float64(2 * (1023 << 52) / 3 - 0.03 * (1 << 52))
_DOWN18 = np.float64(2.0 ** -18)
_BIG_CBRT = np.float64(2.0 ** 900)
_DOWN1002 = np.float64(2.0 ** -1002)
_UP334 = np.float64(2.0 ** 334)


@numba.njit(inline="always")
def cbrt_f64(x):
    """Cube root for float64: exponent/3 guess, two Halley steps, one exact-residual Newton."""
    ax = abs(x)
    sub = ax < _TINY64
    huge = ax > _BIG_CBRT
    a = ax * _UP54 if sub else ax
    a = a * _DOWN1002 if huge else a      # keeps y^3 in range during the iterations
    a = _ONE if not (a < _INF) or a == _ZERO else a
    # bits(cbrt a) ~ bits(a) / 3 + 2/3 bits(1.0): a guess within a few percent
    y = i64_as_f64(np.int64(np.float64(f64_as_i64(a)) * _THIRD + _CBRT_MAGIC))
    for _ in range(2):
        y3 = y * y * y
        y = y * div(y3 + _TWO * a, _TWO * y3 + a)
    y2h, y2l = two_prod(y, y)
    y3h, y3l = two_prod(y2h, y)
    y3l = fma(y2l, y, y3l)
    res = (a - y3h) - y3l
    y = fma(div(res, y2h), _THIRD, y)
    y = y * _DOWN18 if sub else y
    y = y * _UP334 if huge else y
    y = copysign(y, x)
    return x if (x == _ZERO) or not (ax < _INF) else y


@numba.njit(inline="always")
def cbrt_f32(x):
    """Cube root for float32, through float64."""
    return np.float32(cbrt_f64(np.float64(x)))
