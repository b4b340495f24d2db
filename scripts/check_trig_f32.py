"""Exhaustive check of numaccel's float32 sin/cos/tan over every finite float32.

For each x >= 0 (the negatives through a bit-exact symmetry check, f(-x) = -f(x) or f(x)):
the error in float32 ulp of ``<f>_f32`` against NumPy in float64 (max below and above
``TRIG_FAST_MAX_F32``, and a count of errors above 0.5/1/1.5/2 ulp), the difference from
NumPy's own float32 function, and that ``<f>_fast_f32`` equals ``<f>_f32`` bit for bit up to
the bound. About 5 minutes per function on 2 cores; ``tests/test_trig_f32.py`` checks a
dense sample of the same in the test suite.

    .venv/bin/python scripts/check_trig_f32.py sin cos tan
    .venv/bin/python scripts/check_trig_f32.py sin lo=0x3f000000 hi=0x40000000   # bit range
"""
from __future__ import annotations

import sys
import time

import numba
import numpy as np

from numaccel.lower import mathlib_trig as mt
from numaccel.lower.mathlib_core import f32_as_i32, i64_as_f64

CHUNK = 1 << 24


def _ours(name):
    f, ff = getattr(mt, f"{name}_f32"), getattr(mt, f"{name}_fast_f32")

    @numba.njit(parallel=True, error_model="numpy")
    def run(x, g, gm, gf):
        for i in numba.prange(x.size):
            g[i] = f(x[i])
            gm[i] = f(-x[i])
            gf[i] = ff(x[i])
    return run


@numba.njit(parallel=True, error_model="numpy")
def _ulps(g, r, out):
    """|g - r| in ulp of float32 at r (0 where equal or both NaN, inf where one is NaN)."""
    for i in numba.prange(g.size):
        r32 = np.float32(r[i])
        e = (np.int64(f32_as_i32(abs(r32))) >> 23) & 0xFF
        e = 1 if e == 0 else e
        ulp = i64_as_f64(np.int64(e - 150 + 1023) << 52)
        d = abs(np.float64(g[i]) - r[i]) / ulp
        same = (np.float64(g[i]) == r[i]) or (g[i] != g[i] and r[i] != r[i])
        out[i] = 0.0 if same else (d if d == d else np.inf)


def _as_float(bits):
    return float(np.array([bits], np.int32).view(np.float32)[0])


def check(name, lo=0, hi=0x7F800000):
    run = _ours(name)
    bound = int(np.float32(mt.TRIG_FAST_MAX_F32).view(np.int32))
    worst = {"fast": (0.0, 0), "big": (0.0, 0), "numpy": (0.0, 0)}
    over = np.zeros(4, np.int64)
    bad = 0
    for s in range(lo, hi, CHUNK):
        bits = np.arange(s, min(hi, s + CHUNK), dtype=np.int64).astype(np.int32)
        x = bits.view(np.float32)
        g, gm, gf = np.empty_like(x), np.empty_like(x), np.empty_like(x)
        run(x, g, gm, gf)
        with np.errstate(all="ignore"):
            ref = getattr(np, name)(x.astype(np.float64))
            npf = getattr(np, name)(x).astype(np.float64)
        err, errn = np.empty(x.size), np.empty(x.size)
        _ulps(g, ref, err)
        _ulps(g, npf, errn)
        want = g if name == "cos" else -g
        bad += int((gm.view(np.int32) != want.view(np.int32)).sum())
        bad += int(((bits <= bound) & (gf.view(np.int32) != g.view(np.int32))).sum())
        for key, e in (("fast", np.where(bits <= bound, err, -1)),
                       ("big", np.where(bits > bound, err, -1)), ("numpy", errn)):
            i = int(np.argmax(e))
            if e[i] > worst[key][0]:
                worst[key] = (float(e[i]), int(bits[i]))
        over += [(err > v).sum() for v in (0.5, 1, 1.5, 2)]
    return worst, over, bad


def main(argv):
    lo, hi = 0, 0x7F800000
    names = []
    for a in argv:
        if a.startswith(("lo=", "hi=")):
            lo, hi = (int(a[3:], 0), hi) if a[:2] == "lo" else (lo, int(a[3:], 0))
        else:
            names.append(a)
    for name in names or ["sin", "cos", "tan"]:
        t = time.time()
        worst, over, bad = check(name, lo, hi)
        w = {k: f"{v[0]:.4f} ulp at {_as_float(v[1])!r}" for k, v in worst.items()}
        print(f"{name}: |x| <= 2^18 max {w['fast']}; above {w['big']}; vs NumPy float32 "
              f"{w['numpy']}; errors > 0.5/1/1.5/2 ulp: {over.tolist()}; symmetry or "
              f"fast-path mismatches: {bad}; {time.time() - t:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
