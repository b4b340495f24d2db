"""Offline fitter for the polynomial coefficients used by ``numaccel.lower.mathlib``.

Not imported at run time. It documents (and reproduces) where every coefficient tuple in the
``mathlib_*`` modules comes from: a near-minimax fit (Lawson's iteratively reweighted least
squares on Chebyshev nodes, in 50-digit ``mpmath`` arithmetic) of a smooth remainder function,
with the weight chosen so that the *final* function's relative error is what is minimised.

Needs ``mpmath`` (ships with sympy/torch; not a numaccel dependency). Run::

    python -m numaccel.lower.mathlib_fit            # prints every table
    python -m numaccel.lower.mathlib_fit exp_f64     # one table

Example::

    >>> from numaccel.lower.mathlib_fit import fit            # doctest: +SKIP
    >>> import mpmath as mp
    >>> c, err = fit(lambda t: mp.exp(t), -0.35, 0.35, range(8))  # doctest: +SKIP
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np


def fit(f: Callable, a: float, b: float, powers: Sequence[int],
        weight: Callable | None = None, npts: int = 200, iters: int = 30
        ) -> tuple[list[float], float]:
    """Near-minimax ``sum(c_i t**p_i)`` for ``f`` on ``[a, b]``, minimising ``|w (f - p)|``.

    Returns the coefficients (as Python floats, 50-digit values rounded to double) and the
    maximum weighted error on the nodes.
    """
    import mpmath as mp

    mp.mp.dps = 50
    powers = list(powers)
    a, b = mp.mpf(a), mp.mpf(b)
    ts = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (k + mp.mpf(0.5)) / npts)
          for k in range(npts)]
    ts += [a, b]
    fv = [f(t) for t in ts]
    wv = [weight(t) if weight is not None else mp.mpf(1) for t in ts]
    lam = [mp.mpf(1) / len(ts)] * len(ts)
    n = len(powers)
    basis = [[t ** p for p in powers] for t in ts]
    coef = None
    best = None
    for _ in range(iters):
        # weighted normal equations: sum lam w^2 (f - B c)^2
        A = mp.matrix(n, n)
        rhs = mp.matrix(n, 1)
        for j in range(len(ts)):
            lw = lam[j] * wv[j] ** 2
            bj = basis[j]
            for r in range(n):
                rhs[r] += lw * bj[r] * fv[j]
                for c in range(r, n):
                    A[r, c] += lw * bj[r] * bj[c]
        for r in range(n):
            for c in range(r):
                A[r, c] = A[c, r]
        coef = mp.lu_solve(A, rhs)
        errs = [abs(wv[j] * (fv[j] - sum(coef[i] * basis[j][i] for i in range(n))))
                for j in range(len(ts))]
        emax = max(errs)
        if best is None or emax < best[1]:
            best = ([coef[i] for i in range(n)], emax)
        tot = sum(lam[j] * errs[j] for j in range(len(ts)))
        lam = [lam[j] * errs[j] / tot for j in range(len(ts))]
    return [float(c) for c in best[0]], float(best[1])


def _tables() -> dict:
    import mpmath as mp

    mp.mp.dps = 50
    ln2 = mp.log(2)
    sq = mp.sqrt(2)
    smax = (sq - 1) / (sq + 1)
    q4 = mp.pi / 4

    def safe(g, t0):
        # remainder functions are 0/0 at the origin: nudge away from it
        return lambda t: g(t if abs(t) > mp.mpf(10) ** -30 else mp.mpf(t0))

    def expq(t):     # (e^t - 1 - t)/t^2
        return (mp.exp(t) - 1 - t) / t ** 2

    def exp2q(t):    # (2^t - 1)/t
        return (mp.power(2, t) - 1) / t

    def expm1q(t):   # (e^t - 1 - t - t^2/2)/t^3
        return (mp.expm1(t) - t - t * t / 2) / t ** 3

    def logr(z):     # (2 atanh(s) - 2 s)/s / z, s = sqrt z
        s = mp.sqrt(z)
        return (2 * mp.atanh(s) - 2 * s) / s / z

    def logr3(z):    # (2 atanh(s) - 2 s - 2 s^3/3)/s^5
        s = mp.sqrt(z)
        return (2 * mp.atanh(s) - 2 * s - 2 * s ** 3 / 3) / s ** 5

    def sinq(z):     # (sin r - r)/r^3
        r = mp.sqrt(z)
        return (mp.sin(r) - r) / r ** 3

    def cosq(z):     # (cos r - 1 + r^2/2)/r^4
        r = mp.sqrt(z)
        return (mp.cos(r) - 1 + z / 2) / z ** 2

    def atanq(z):    # (atan x - x)/x^3
        x = mp.sqrt(z)
        return (mp.atan(x) - x) / x ** 3

    def erfq(z):     # erf(x)/x
        x = mp.sqrt(z)
        return mp.erf(x) / x

    e = mp.mpf(10) ** -40
    out = {}
    h = ln2 / 2
    out["exp_f64"] = lambda: fit(safe(expq, e), -h, h, range(11),
                         lambda t: t * t / mp.exp(t))
    out["exp_f32"] = lambda: fit(safe(expq, e), -h, h, range(5), lambda t: t * t / mp.exp(t))
    out["exp2_f64"] = lambda: fit(safe(exp2q, e), -0.5, 0.5, range(12),
                          lambda t: t / mp.power(2, t))
    out["exp2_f32"] = lambda: fit(safe(exp2q, e), -0.5, 0.5, range(6), lambda t: t / mp.power(2, t))
    out["expm1_f64"] = lambda: fit(safe(expm1q, e), -h, h, range(10),
                           lambda t: t ** 3 / mp.expm1(t) if t != 0 else 0)
    out["expm1_f32"] = lambda: fit(safe(expm1q, e), -h, h, range(4),
                           lambda t: t ** 3 / mp.expm1(t) if t != 0 else 0)
    out["log_f64"] = lambda: fit(safe(logr, e), 0, smax ** 2, range(7),
                         lambda z: z * mp.sqrt(z) / mp.atanh(mp.sqrt(z)) / 2 if z else 0)
    out["log_f32"] = lambda: fit(safe(logr, e), 0, smax ** 2, range(3),
                         lambda z: z * mp.sqrt(z) / mp.atanh(mp.sqrt(z)) / 2 if z else 0)
    out["logdd_f64"] = lambda: fit(safe(logr3, e), 0, smax ** 2, range(7),
                           lambda z: z ** 2 * mp.sqrt(z) / mp.atanh(mp.sqrt(z)) / 2
                           if z else 0)
    out["sin_f64"] = lambda: fit(safe(sinq, e), 0, q4 ** 2, range(6),
                         lambda z: z ** 1.5 / mp.sin(mp.sqrt(z)) if z else 0)
    out["cos_f64"] = lambda: fit(safe(cosq, e), 0, q4 ** 2, range(6),
                         lambda z: z ** 2 / mp.cos(mp.sqrt(z)))
    out["sin_f32"] = lambda: fit(safe(sinq, e), 0, q4 ** 2, range(3),
                         lambda z: z ** 1.5 / mp.sin(mp.sqrt(z)) if z else 0)
    out["cos_f32"] = lambda: fit(safe(cosq, e), 0, q4 ** 2, range(3),
                         lambda z: z ** 2 / mp.cos(mp.sqrt(z)))
    z716 = (mp.mpf(7) / 16) ** 2     # fdlibm's reduced interval [0, 7/16]
    out["atan_f64"] = lambda: fit(safe(atanq, e), 0, z716, range(11),
                          lambda z: z ** 1.5 / mp.atan(mp.sqrt(z)) if z else 0)
    out["atan_f32"] = lambda: fit(safe(atanq, e), 0, z716, range(5),
                          lambda z: z ** 1.5 / mp.atan(mp.sqrt(z)) if z else 0)
    out["erf_f64"] = lambda: fit(safe(erfq, e), 0, 1, range(13),
                         lambda z: mp.sqrt(z) / mp.erf(mp.sqrt(z)) if z else 1)
    # erfc(x) exp(x^2) as a polynomial in u = 1/(1 + x) on x in [1, 6]: smooth and flat
    out["erfc_f64"] = lambda: fit(lambda u: mp.erfc(1 / u - 1) * mp.exp((1 / u - 1) ** 2),
                          mp.mpf(1) / 7, mp.mpf(1) / 2, range(18),
                          lambda u: 1 / (mp.erfc(1 / u - 1) * mp.exp((1 / u - 1) ** 2)))
    return out


if __name__ == "__main__":
    tabs = _tables()
    for name, thunk in tabs.items():
        if len(sys.argv) > 1 and name not in sys.argv[1:]:
            continue
        coef, err = thunk()
        eps = np.finfo(np.float32 if name.endswith("f32") else np.float64).eps
        print(f"# {name}: max weighted error {err:.3g} = {err / eps:.3g} eps")
        print(f"_{name.upper()} = (" + ", ".join(repr(c) for c in coef) + ")")
