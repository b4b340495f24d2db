"""sin, cos, tan for float32 and float64 over the whole float range, vectorizable.

Argument reduction is a branch-free Payne-Hanek by multiplication: a table indexed by the
exponent of x holds the few bits of 2/pi that matter for x (those whose product with x is
not a multiple of 4), split into doubles; products with x are exact (fma two-products for
float64, 28-bit chunks for float32), so the quadrant and the reduced argument (as a
double-double) are exact up to ~2^-100 for every finite x. For float64, LLVM turns the table
loads into gathers; float32 needs only 212 bits of 2/pi, so it cuts its three chunks out of
four 64-bit words with selects and vector shifts (no gathers). There is no scalar fallback
path at all.

float32 computes in float32 (16 lanes per zmm, not 8): |x| <= TRIG_FAST_MAX_F32 (2^18)
reduces by a float32 Cody-Waite to a double-float argument, larger x by the Payne-Hanek
above (in float64, then split into a float32 pair); both feed the same float32 sin/cos
kernels. ``sin_f32`` selects between the two reductions per lane (so it computes both);
``sin_fast_f32`` & co. have only the Cody-Waite, and ``trig_big_f32`` tells where they do
not apply (map kernels: a fast main loop, then a fix-up of the flagged blocks).

Example::

    import numba, numpy as np
    from numaccel.lower.mathlib_trig import sin_f64

    @numba.njit
    def f(a, out):
        for i in range(a.size):
            out[i] = sin_f64(a[i])
"""
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
    fast_two_sum,
    fma,
    i64_as_f64,
    poly,
    rint,
    two_prod,
    two_sum,
)

_SIN_F64 = (-0.1666666666666663, 0.008333333333322115, -0.00019841269829586462,
            2.755731362030847e-06, -2.5050747591811712e-08, 1.5896220082780417e-10)
_COS_F64 = (0.041666666666666595, -0.0013888888888873051, 2.48015872888484e-05,
            -2.755731417834981e-07, 2.087570071361853e-09, -1.135852986902814e-11)
_SIN_F32 = (-0.1666665460451841, 0.008332160451828071, -0.00019515241429631376)
_COS_F32 = (0.041666645675331494, -0.0013887315890049698, 2.4433115878795903e-05)


def _two_over_pi_bits(nbits: int) -> int:
    """floor(2/pi * 2**nbits), exactly, by Machin's formula in integer arithmetic."""
    guard = 64
    prec = nbits + guard

    def atan_inv(n: int) -> int:   # atan(1/n) * 2**prec
        total, term, k, n2 = 0, (1 << prec) // n, 1, n * n
        sign = 1
        while term:
            total += sign * (term // k)
            term //= n2
            k += 2
            sign = -sign
        return total

    pi = 16 * atan_inv(5) - 4 * atan_inv(239)      # pi * 2**prec (error < 2**-guard/2)
    return (1 << (nbits + 1 + prec)) // pi


_NB = 1400
_TOPI = _two_over_pi_bits(_NB)     # bit j of 2/pi (weight 2^-j) is bit (_NB - j) here


def _window(j0: int, nbits: int, sc: int = 0) -> float:
    """2^sc times the bits of 2/pi with weights 2^-j0 ... 2^-(j0+nbits-1), exactly."""
    shift = _NB - (j0 + nbits - 1)
    chunk = (_TOPI >> shift) & ((1 << nbits) - 1)
    return float(chunk) * 2.0 ** (sc - (j0 + nbits - 1))


def _table_f64() -> np.ndarray:
    # row eb (biased exponent of x): 4 doubles of 2/pi starting where x * bit stops being a
    # multiple of 4; for eb > 1200 the row is scaled by 2^256 (x is scaled by 2^-256)
    tab = np.zeros((2048, 4))
    for eb in range(2048):
        e = eb - 1075
        j0 = max(1, e - 1)
        sc = 256 if eb > 1200 else 0
        for i in range(4):
            tab[eb, i] = _window(j0 + 53 * i, 53, sc)
    return tab.reshape(-1)


_TAB64 = _table_f64()

_PIO2_HI = 1.5707963267948966
_PIO2_LO = 6.123233995736766e-17
_PIO4 = 0.7853981633974483

_s64 = tuple(np.float64(c) for c in _SIN_F64)
_c64 = tuple(np.float64(c) for c in _COS_F64)
_ONE, _HALF, _ZERO, _QUARTER, _FOUR = (np.float64(1.0), np.float64(0.5), np.float64(0.0),
                                       np.float64(0.25), np.float64(4.0))
_DOWN = np.float64(2.0 ** -256)
_NAN64 = np.float64(np.nan)
_NAN32 = np.float32(np.nan)
_I52 = np.int64(52)
_I23 = np.int64(23)
_M11 = np.int64(0x7FF)
_M8 = np.int64(0xFF)


@numba.njit(inline="always")
def _mod4(n):
    return n - _FOUR * np.floor(n * _QUARTER)


@numba.njit(inline="always")
def reduce_f64(x):
    """|x| > pi/4, finite -> (q, hi, lo): x = (q + (hi + lo)/(pi/2)) * pi/2, q in 0..3.

    Exact products (fma) accumulated as a double-double, whole multiples of 4 dropped.
    """
    ax = abs(x)
    eb = (f64_as_i64(ax) >> _I52) & _M11
    base = eb * 4
    xs = ax * _DOWN if eb > 1200 else ax
    p0h, p0l = two_prod(xs, _TAB64[base])
    p1h, p1l = two_prod(xs, _TAB64[base + 1])
    p2 = fma(xs, _TAB64[base + 2], xs * _TAB64[base + 3])
    n = rint(p0h)
    hi = p0h - n
    q = _mod4(n)
    n = rint(p0l)
    q = q + n
    hi, lo = two_sum(hi, p0l - n)
    hi, lo2 = two_sum(hi, p1h)
    n = rint(hi)
    hi = hi - n
    q = q + n
    lo = lo + (lo2 + (p1l + p2))
    hi, lo = fast_two_sum(hi, lo)
    n = rint(hi)
    hi = hi - n
    q = q + n
    hi, lo = fast_two_sum(hi, lo)
    # fraction of a quadrant -> radians, as a double-double
    rh, rl = two_prod(hi, _PIO2_HI)
    rl = rl + fma(hi, _PIO2_LO, lo * _PIO2_HI)
    rh, rl = fast_two_sum(rh, rl)
    neg = x < _ZERO
    q = _mod4(-q if neg else q)
    return q, (-rh if neg else rh), (-rl if neg else rl)


@numba.njit(inline="always")
def _sin_k64(x, y):
    z = x * x
    v = z * x
    return x + fma(y, _ONE - _HALF * z, v * poly(z, _s64))


@numba.njit(inline="always")
def _cos_k64(x, y):
    z = x * x
    hz = _HALF * z
    w = _ONE - hz
    return w + (((_ONE - w) - hz) + fma(z * z, poly(z, _c64), -x * y))


@numba.njit(inline="always")
def _arg64(x):
    small = abs(x) <= _PIO4
    xr = _ZERO if small else x
    q, hi, lo = reduce_f64(xr)
    q = _ZERO if small else q
    hi = x if small else hi
    lo = _ZERO if small else lo
    return np.int64(q), hi, lo


@numba.njit(inline="always")
def sin_f64(x):
    q, hi, lo = _arg64(x)
    s = _sin_k64(hi, lo)
    c = _cos_k64(hi, lo)
    r = c if q & 1 else s
    r = -r if q & 2 else r
    r = x if x == _ZERO else r           # keeps -0
    return r if abs(x) < np.inf else _NAN64


@numba.njit(inline="always")
def cos_f64(x):
    q, hi, lo = _arg64(x)
    s = _sin_k64(hi, lo)
    c = _cos_k64(hi, lo)
    r = s if q & 1 else c
    r = -r if (q + 1) & 2 else r
    return r if abs(x) < np.inf else _NAN64


@numba.njit(inline="always")
def tan_f64(x):
    q, hi, lo = _arg64(x)
    s = _sin_k64(hi, lo)
    c = _cos_k64(hi, lo)
    r = div(-c, s) if q & 1 else div(s, c)
    r = x if x == _ZERO else r
    return r if abs(x) < np.inf else _NAN64


# float32 needs bits 1..212 of 2/pi: four 64-bit words, picked with selects and funnel shifts
# (vector shifts) instead of a table gather, which costs ~0.7 ns per element on Zen 4
_W = [np.uint64((_TOPI >> (_NB - 64 * (i + 1))) & ((1 << 64) - 1)) for i in range(4)]
_W0, _W1, _W2, _W3 = _W
_U0, _U1, _U6, _U63, _U64 = (np.uint64(0), np.uint64(1), np.uint64(6), np.uint64(63),
                             np.uint64(64))
_U1023, _U52 = np.uint64(1023), np.uint64(52)


@numba.njit(inline="always")
def _topi_chunk(p, n):
    """Bits p+1 .. p+n of 2/pi (n <= 53, p + n <= 256) as their exact float64 value."""
    w = p >> _U6
    s = p & _U63
    hi = _W0 if w == _U0 else (_W1 if w == _U1 else (_W2 if w == np.uint64(2) else _W3))
    lo = _W1 if w == _U0 else (_W2 if w == _U1 else (_W3 if w == np.uint64(2) else _U0))
    win = (hi << s) | ((lo >> _U1) >> (_U63 - s))
    v = np.float64(win >> (_U64 - n))
    return v * i64_as_f64((_U1023 - (p + n)) << _U52)


@numba.njit(inline="always")
def reduce_f32(x):
    """float32 x with |x| > pi/4, finite -> (q, r) in float64, r = x - q pi/2 (mod 2 pi)."""
    ax = np.float64(abs(x))
    eb = (np.int64(f32_as_i32(abs(x))) >> _I23) & _M8
    # first bit of 2/pi whose product with x is not a multiple of 4, 0-based
    p = np.uint64(eb - 152) if eb > 152 else _U0
    p0 = ax * _topi_chunk(p, np.uint64(28))                     # exact: 24 x 28 bits
    p1 = ax * _topi_chunk(p + np.uint64(28), np.uint64(28))     # exact
    p2 = ax * _topi_chunk(p + np.uint64(56), np.uint64(53))
    n = rint(p0)
    q = _mod4(n)
    hi, lo = two_sum(p0 - n, p1)
    lo = lo + p2
    hi, lo = fast_two_sum(hi, lo)
    n = rint(hi)
    q = q + n
    r = ((hi - n) + lo) * _PIO2_HI
    neg = x < np.float32(0)
    q = _mod4(-q if neg else q)
    return q, (-r if neg else r)


# float32, |x| <= TRIG_FAST_MAX_F32: Cody-Waite in float32 lanes (16 per zmm). j*C1 is
# exact inside the fma and x - j*C1 is a multiple of 2^-24 below 1, so a is exact; a - j*C2
# is kept as a double-float (two_prod + an exact two-sum), C3 and the rounding errors go to
# the low part. Measured over every float32 below 2^18: sin 0.88, cos 0.79, tan 1.06 ulp.
# Above the bound the error grows (j*C2's rounding, the tail of pi/2 beyond C3), so the
# all-range functions switch to reduce_f32 there.
# Cost model: a zmm loop is bound by its float adds/muls/fmas (one port on client Intel
# cores, where compares, blends and logic go to another), so the code below spends those
# sparingly: no renormalization of (rh, rl), blends to order the two-sum, the quadrant
# from an integer conversion, both kernels' corrections from shared products.
TRIG_FAST_MAX_F32 = np.float32(2.0 ** 18)
_PIO2_X = Fraction(_PIO2_HI) + Fraction(_PIO2_LO)          # pi/2 to ~2^-107
_C1 = np.float32(_PIO2_HI)
_C2 = np.float32(float(_PIO2_X - Fraction(float(_C1))))
_C3 = np.float32(float(_PIO2_X - Fraction(float(_C1)) - Fraction(float(_C2))))
_TOPI_F32 = np.float32(0.6366197723675814)
_s32 = tuple(np.float32(c) for c in _SIN_F32)
_c32 = tuple(np.float32(c) for c in _COS_F32)
_Z32, _H32, _ONE32 = np.float32(0), np.float32(0.5), np.float32(1)
_INF32 = np.float32(np.inf)
_JMAX = np.float32(2.0 ** 24)
_I1, _I2 = np.int32(1), np.int32(2)


@numba.njit(inline="always")
def _red_fast32(x):
    """float32 |x| <= TRIG_FAST_MAX_F32 -> (j, rh, rl): x = j pi/2 + rh + rl, float32,
    |rl| below ~ulp(rh) + 2^-31 (not renormalized: the kernels only need it small)."""
    j = rint(x * _TOPI_F32)
    a = fma(-j, _C1, x)
    p, pe = two_prod(j, _C2)
    # a - p exactly as s + e: a fast two-sum with the larger operand first (selects
    # instead of Knuth's branch-free two-sum, which costs three more additions)
    mp = -p
    sw = abs(a) < abs(p)
    u = mp if sw else a
    v = a if sw else mp
    s = u + v
    e = v - (s - u)
    return j, s, fma(-j, _C3, e - pe)


@numba.njit(inline="always")
def _red_huge32(x):
    """Any finite float32 |x| > pi/4 -> (j, rh, rl) as _red_fast32 (j = quadrant 0..3)."""
    q, r = reduce_f32(x)
    rh = np.float32(r)
    return np.float32(q), rh, np.float32(r - np.float64(rh))


@numba.njit(inline="always")
def _arg32(x):
    # a select: both reductions run in every lane, ~5x the cost of the fast path alone
    # (so map kernels call the _fast functions in their main loop, see trig_big_f32)
    big = abs(x) > TRIG_FAST_MAX_F32
    j, rh, rl = _red_fast32(_Z32 if big else x)
    jb, rhb, rlb = _red_huge32(x if big else _Z32)
    return (jb if big else j), (rhb if big else rh), (rlb if big else rl)


@numba.njit(inline="always")
def _kernels32(rh, rl):
    """(sin hi, sin lo, cos hi, cos lo) of rh + rl, |rh| <~ pi/4, |rl| << |rh|.

    sin = rh + rh z P(z) + rl (1 - z/2); cos = w + (1 - rh^2/2 - w) + z^2 Q(z) - rh rl,
    with w = 1 - rh^2/2 rounded once (an fma of the exact half, hrh) and its rounding
    error recovered by a second fma (1 - w is exact: w lies in [0.69, 1])."""
    z = rh * rh
    hrh = _H32 * rh
    t = rh * rl
    sl = fma(rh * z, poly(z, _s32), fma(-hrh, t, rl))
    w = fma(-hrh, rh, _ONE32)
    werr = fma(-hrh, rh, _ONE32 - w)
    cl = fma(z * z, poly(z, _c32), werr - t)
    return rh, sl, w, cl


@numba.njit(inline="always")
def _quadrant(j):
    """j mod 4 as an int32 (any float j: NaN and huge values give 0, never an undefined
    conversion; their results are NaN or unused anyway)."""
    return np.int32(j if abs(j) < _JMAX else _Z32)


@numba.njit(inline="always")
def _sin32(x, j, rh, rl):
    s, sl, c, cl = _kernels32(rh, rl)
    q = _quadrant(j)
    odd = (q & _I1) != 0
    v = (c if odd else s) + (cl if odd else sl)
    v = -v if (q & _I2) != 0 else v
    v = x if x == _Z32 else v                         # keeps -0
    return v if abs(x) < _INF32 else _NAN32


@numba.njit(inline="always")
def _cos32(x, j, rh, rl):
    s, sl, c, cl = _kernels32(rh, rl)
    q = _quadrant(j)
    odd = (q & _I1) != 0
    v = (s if odd else c) + (sl if odd else cl)
    v = -v if ((q + _I1) & _I2) != 0 else v
    return v if abs(x) < _INF32 else _NAN32


@numba.njit(inline="always")
def _tan32(x, j, rh, rl):
    s, sl, c, cl = _kernels32(rh, rl)
    odd = (_quadrant(j) & _I1) != 0
    nh, nl = (-c, -cl) if odd else (s, sl)
    dh, dl = (s, sl) if odd else (c, cl)
    # (nh + nl) / (dh + dl): one correction step on the float32 quotient
    d = dh + dl
    t = div(nh + nl, d)
    t = t + div(fma(-t, dh, nh) + fma(-t, dl, nl), d)
    t = x if x == _Z32 else t
    return t if abs(x) < _INF32 else _NAN32


@numba.njit(inline="always")
def sin_f32(x):
    j, rh, rl = _arg32(x)
    return _sin32(x, j, rh, rl)


@numba.njit(inline="always")
def cos_f32(x):
    j, rh, rl = _arg32(x)
    return _cos32(x, j, rh, rl)


@numba.njit(inline="always")
def tan_f32(x):
    j, rh, rl = _arg32(x)
    return _tan32(x, j, rh, rl)


# The _fast variants are bit-exact copies of the above for |x| <= TRIG_FAST_MAX_F32 (and
# for inf/NaN) and wrong above it: a map kernel calls them in its vectorized loop, ORs
# trig_big_f32 of their arguments into a flag per block, and its caller reruns only the
# flagged blocks with the all-range functions (cpu_codegen.map_source).
@numba.njit(inline="always")
def sin_fast_f32(x):
    j, rh, rl = _red_fast32(x)
    return _sin32(x, j, rh, rl)


@numba.njit(inline="always")
def cos_fast_f32(x):
    j, rh, rl = _red_fast32(x)
    return _cos32(x, j, rh, rl)


@numba.njit(inline="always")
def tan_fast_f32(x):
    j, rh, rl = _red_fast32(x)
    return _tan32(x, j, rh, rl)


@numba.njit(inline="always")
def trig_big_f32(x):
    """1 where the _fast functions are wrong for argument x (finite, beyond the bound)."""
    ax = abs(x)
    return np.int32(1) if (ax > TRIG_FAST_MAX_F32) & (ax < _INF32) else np.int32(0)
