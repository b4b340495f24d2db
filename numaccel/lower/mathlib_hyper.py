"""arcsinh, arccosh, arctanh, logaddexp, logaddexp2 and hypot, vectorizable.

float64 versions are built from the log/log1p/exp kernels with the usual cancellation-free
rewrites (fdlibm's); float32 versions run the float64 code and round once, which is cheap
next to their accuracy gain. ``np.hypot`` inside Numba is a libm call, hence ``hypot`` here.

Example::

    from numaccel.lower.mathlib_hyper import logaddexp_f32
    # inside a Numba loop: out[i] = logaddexp_f32(a[i], b[i])
"""
# ruff: noqa: PLR0124, FURB136
# (x != x is the NaN test, and "a if a > b else b" is not max(): the select order decides
# which NaN or signed zero comes out, so both are written out on purpose)
from __future__ import annotations

import numba
import numpy as np

from numaccel.lower.mathlib_core import copysign, div
from numaccel.lower.mathlib_exp_log import exp2_f64, exp_f64, log1p_f64, log_f64

_ONE, _TWO, _HALF, _ZERO = np.float64(1), np.float64(2), np.float64(0.5), np.float64(0)
_LN2 = np.float64(0.6931471805599453)
_INV_LN2 = np.float64(1.4426950408889634)
_BIG = np.float64(2.0 ** 28)       # beyond: sqrt(x^2 + 1) == |x| in float64
_INF = np.float64(np.inf)
_NAN = np.float64(np.nan)
_SCALE_UP = np.float64(2.0 ** 600)
_SCALE_DN = np.float64(2.0 ** -600)


@numba.njit(inline="always")
def arcsinh_f64(x):
    """asinh: log1p(a + a^2 / (1 + sqrt(1 + a^2))) below 2, log(2a + ...) up to 2^28."""
    a = abs(x)
    ac = _ONE if a > _BIG else a                 # keeps a^2 finite on the unused branches
    t = ac * ac
    small = log1p_f64(ac + div(t, _ONE + np.sqrt(_ONE + t)))
    mid = log_f64(_TWO * ac + div(_ONE, np.sqrt(t + _ONE) + ac))
    r = small if a < _TWO else mid
    r = log_f64(a) + _LN2 if a > _BIG else r
    return copysign(r, x)


@numba.njit(inline="always")
def arccosh_f64(x):
    """acosh: log1p(t + sqrt(2t + t^2)) near 1, log(2x - 1/(x + sqrt(x^2-1))), log x + ln2."""
    xc = _TWO if (x > _BIG) or not (x >= _ONE) else x
    t = xc - _ONE
    near = log1p_f64(t + np.sqrt(_TWO * t + t * t))
    mid = log_f64(_TWO * xc - div(_ONE, xc + np.sqrt(xc * xc - _ONE)))
    r = near if x < _TWO else mid
    r = log_f64(x) + _LN2 if x > _BIG else r
    return r if x >= _ONE else (x if x != x else _NAN)


@numba.njit(inline="always")
def arctanh_f64(x):
    """atanh: 0.5 log1p(2a + 2a^2/(1-a)) below 0.5, 0.5 log1p(2a/(1-a)) up to 1."""
    a = abs(x)
    d = _ONE - a
    small = _HALF * log1p_f64(_TWO * a + div(_TWO * a * a, d))
    large = _HALF * log1p_f64(div(_TWO * a, d))
    r = small if a < _HALF else large
    r = _INF if a == _ONE else r
    r = _NAN if a > _ONE else r
    return copysign(r, x)


@numba.njit(inline="always")
def logaddexp_f64(x, y):
    """log(exp(x) + exp(y)) = max + log1p(exp(-|x - y|)) without overflow."""
    m = x if x > y else y
    d = -abs(x - y)
    r = m + log1p_f64(exp_f64(d))
    r = x + _LN2 if x == y else r                # also +-inf with itself
    return _NAN if (x != x) or (y != y) else r


@numba.njit(inline="always")
def logaddexp2_f64(x, y):
    """log2(2^x + 2^y) = max + log1p(2^-|x - y|) / ln2."""
    m = x if x > y else y
    d = -abs(x - y)
    r = m + log1p_f64(exp2_f64(d)) * _INV_LN2
    r = x + _ONE if x == y else r
    return _NAN if (x != x) or (y != y) else r


@numba.njit(inline="always")
def hypot_f64(x, y):
    """sqrt(x^2 + y^2), scaled so it neither overflows nor underflows; inf beats NaN."""
    ax, ay = abs(x), abs(y)
    a = ax if ax > ay else ay
    b = ay if ax > ay else ax
    big = a > _SCALE_UP
    tiny = a < _SCALE_DN
    s = _SCALE_DN if big else (_SCALE_UP if tiny else _ONE)
    inv = _SCALE_UP if big else (_SCALE_DN if tiny else _ONE)
    a2, b2 = a * s, b * s
    r = np.sqrt(a2 * a2 + b2 * b2) * inv
    r = _NAN if (x != x) or (y != y) else r
    return _INF if (ax == _INF) or (ay == _INF) else r


@numba.njit(inline="always")
def arcsinh_f32(x):
    """asinh for float32, through float64."""
    return np.float32(arcsinh_f64(np.float64(x)))


@numba.njit(inline="always")
def arccosh_f32(x):
    """acosh for float32, through float64."""
    return np.float32(arccosh_f64(np.float64(x)))


@numba.njit(inline="always")
def arctanh_f32(x):
    """atanh for float32, through float64."""
    return np.float32(arctanh_f64(np.float64(x)))


@numba.njit(inline="always")
def logaddexp_f32(x, y):
    """logaddexp for float32, through float64."""
    return np.float32(logaddexp_f64(np.float64(x), np.float64(y)))


@numba.njit(inline="always")
def logaddexp2_f32(x, y):
    """logaddexp2 for float32, through float64."""
    return np.float32(logaddexp2_f64(np.float64(x), np.float64(y)))


@numba.njit(inline="always")
def hypot_f32(x, y):
    """hypot for float32: float64 squares cannot overflow, so no scaling is needed."""
    a, b = np.float64(x), np.float64(y)
    r = np.sqrt(a * a + b * b)
    r = _NAN if (x != x) or (y != y) else r
    return np.float32(_INF if (abs(a) == _INF) or (abs(b) == _INF) else r)
