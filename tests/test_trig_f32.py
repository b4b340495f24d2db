"""float32 sin/cos/tan of numaccel.lower.mathlib_trig: both paths and their agreement.

``sin_f32`` reduces by float32 Cody-Waite up to ``TRIG_FAST_MAX_F32`` and by the float64
Payne-Hanek above it; ``sin_fast_f32`` (a map kernel's vectorized loop) has only the first
path and must equal ``sin_f32`` bit for bit there, ``trig_big_f32`` flags where it does not
apply. Errors are in float32 ulp against NumPy in float64 (test_mathlib's ``ulp_error``),
and against NumPy's own float32 functions (SIMD code good to a few ulp), over dense samples
of every scale up to 3.4e38, the floats nearest to multiples of pi/2 (where the reduced
argument cancels most), and special values. The exhaustive sweep over all 2^32 floats is
too slow for the suite: ``scripts/check_trig_f32.py``; ``python tests/test_trig_f32.py``
prints the sampled table.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from numaccel.lower import mathlib
from numaccel.lower import mathlib_trig as mt
from test_mathlib import apply, kernel, reference, ulp_error

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings
from hypothesis import strategies as st

NAMES = ["sin", "cos", "tan"]
B = np.float32(mt.TRIG_FAST_MAX_F32)
# scales of the dense uniform samples: the fast path, its bound, the Payne-Hanek range
SCALES = [np.pi / 4, 10, 1e4, float(B), 1e6, 1e9, 1e20, 1e30, 3.4e38]
# hardest float32 arguments for a pi/2 reduction: mantissas of the worst cases, any exponent
HARD = [16367173.0, 8363672.0, 13176795.0, 10513771.0]
# NumPy's float32 sin/cos/tan against the same reference: a few ulp (tan the most)
NUMPY_F32_SLACK = 4


def inputs(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    parts = [rng.uniform(-s, s, n) for s in SCALES]
    parts.append(rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-45, 38.5, n))
    k = np.concatenate([np.arange(1, 1 << 17), rng.integers(1 << 17, 1 << 40, n)])
    near = (k * (np.pi / 2)).astype(np.float32)
    parts += [near, np.nextafter(near, np.float32(0)), np.nextafter(near, np.float32(np.inf))]
    parts.append(np.ldexp(np.repeat(HARD, 160), np.tile(np.arange(-40, 120), len(HARD))))
    parts.append([B, np.nextafter(B, np.float32(0)), np.nextafter(B, np.float32(np.inf)),
                  0.0, 1e-45, 1e-40, 1.1754944e-38, 1e-20, 0.7853982, 1.5707964, 3.1415927,
                  3.4028235e38, np.inf, np.nan])
    with np.errstate(over="ignore"):
        x = np.concatenate([np.asarray(p, np.float64).ravel() for p in parts])
        x = x[np.abs(x) <= 3.4028235e38].astype(np.float32)
    return np.concatenate([x, -x])


@pytest.fixture(scope="module")
def x():
    return inputs()


def _np(name, x):
    with np.errstate(all="ignore"):
        return getattr(np, name)(x)


@pytest.mark.parametrize("name", NAMES)
def test_accuracy_every_scale(name, x):
    got = apply(name, np.float32, x)
    err = ulp_error(got, reference(name, x, np.float32), np.float32)
    bound = mathlib.MAX_ULP[name]["float32"]
    for s in (B, np.inf):       # the fast path, then everything
        sel = np.abs(x) <= s
        assert err[sel].max() <= bound, f"{name} |x| <= {s}: {err[sel].max():.3f} ulp"
    # against NumPy's float32 function (itself off by a few ulp)
    npv = _np(name, x)
    assert ulp_error(got, npv.astype(np.float64), np.float32).max() <= bound + NUMPY_F32_SLACK


@pytest.mark.parametrize("name", NAMES)
def test_special_values_exact(name):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45,
                  1.1754942e-38, -1.1754942e-38, 3.4028235e38, -3.4028235e38], np.float32)
    got = apply(name, np.float32, x)
    npv = _np(name, x)
    fin = np.isfinite(x)
    assert np.isnan(got[~fin]).all()
    tiny = fin & (np.abs(x) < 1e-30)
    # sin/tan of a tiny x is x (sign of zero included), cos is 1
    assert np.array_equal(got[tiny].view(np.uint32), npv[tiny].view(np.uint32))


@pytest.mark.parametrize("name", NAMES)
def test_fast_variant_equals_all_range(name, x):
    got = apply(name, np.float32, x)
    fast = np.empty_like(x)
    kernel(getattr(mt, f"{name}_fast_f32"), 1)(x, fast)
    big = np.empty(x.size, np.int32)
    kernel(mt.trig_big_f32, 1)(x, big)
    ok = np.abs(x) <= B
    np.testing.assert_array_equal(big, (~ok & np.isfinite(x)).astype(np.int32))
    same = ok | ~np.isfinite(x)
    assert np.array_equal(fast[same].view(np.uint32), got[same].view(np.uint32))


@pytest.mark.parametrize("name", NAMES)
def test_symmetry(name, x):
    got, neg = apply(name, np.float32, x), apply(name, np.float32, -x)
    want = got if name == "cos" else -got
    assert np.array_equal(neg.view(np.uint32), want.view(np.uint32))


def test_bounded_and_pythagorean(x):
    s, c = apply("sin", np.float32, x), apply("cos", np.float32, x)
    fin = np.isfinite(x)
    assert (np.abs(s[fin]) <= 1).all() and (np.abs(c[fin]) <= 1).all()
    one = s[fin].astype(np.float64) ** 2 + c[fin].astype(np.float64) ** 2
    assert np.abs(one - 1).max() < 4e-7


@settings(max_examples=200, deadline=None)
@given(x=st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True),
       name=st.sampled_from(NAMES))
def test_hypothesis_against_numpy(x, name):
    a = np.array([x], np.float32)
    got = apply(name, np.float32, a)
    bound = mathlib.MAX_ULP[name]["float32"]
    assert ulp_error(got, reference(name, a, np.float32), np.float32)[0] <= bound
    npv = _np(name, a)
    assert ulp_error(got, npv.astype(np.float64), np.float32)[0] <= bound + NUMPY_F32_SLACK
    if abs(x) <= B:
        fast = np.empty_like(a)
        kernel(getattr(mt, f"{name}_fast_f32"), 1)(a, fast)
        assert fast.view(np.uint32)[0] == got.view(np.uint32)[0]


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    xs = inputs()
    print(f"{'':5s} {'|x|<=2^18':>10s} {'all':>8s} {'vs np.f32':>10s}")
    for nm in NAMES:
        g = apply(nm, np.float32, xs)
        e = ulp_error(g, reference(nm, xs, np.float32), np.float32)
        en = ulp_error(g, _np(nm, xs).astype(np.float64), np.float32)
        print(f"{nm:5s} {e[np.abs(xs) <= B].max():10.3f} {e.max():8.3f} {en.max():10.3f}")
