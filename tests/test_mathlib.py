"""Accuracy and vectorization tests for numaccel.lower.mathlib.

Reference: NumPy in a wider type (float64 for float32 inputs, long double for float64
inputs; ``math.erf`` for erf), error measured in ulp of the result type, over dense random
ranges, random bit patterns (the whole float range incl. subnormals) and special values.
Special values (NaN, +-inf, +-0, overflow, underflow) must match NumPy exactly, sign of zero
included.

Run ``python tests/test_mathlib.py`` to print the measured error table.
"""
from __future__ import annotations

import math
import re
import warnings

import numba
import numpy as np
import pytest

from numaccel.lower import mathlib

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings
from hypothesis import strategies as st

DTYPES = [np.float32, np.float64]
_erf = np.frompyfunc(math.erf, 1, 1)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x < 0, e / (1 + e), 1 / (1 + e))


REFS = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "sigmoid": _sigmoid,
    "arctan": np.arctan, "arcsin": np.arcsin, "arccos": np.arccos, "cbrt": np.cbrt,
    "erf": lambda x: _erf(x.astype(np.float64)).astype(np.float64),
    "arctan2": np.arctan2, "power": np.power, "arcsinh": np.arcsinh, "arccosh": np.arccosh,
    "arctanh": np.arctanh, "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2,
    "hypot": np.hypot,
}
# (lo, hi) of the dense random sweeps, besides [-2, 2] and the bit patterns
RANGES = {
    "exp": (-750, 750), "exp2": (-1100, 1100), "expm1": (-50, 750), "log": (0, 1e3),
    "log2": (0, 10), "log10": (0, 100), "log1p": (-1, 3), "sin": (-1e6, 1e6),
    "cos": (-1e6, 1e6), "tan": (-100, 100), "tanh": (-20, 20), "sinh": (-720, 720),
    "cosh": (-720, 720), "sigmoid": (-800, 800), "arctan": (-10, 10), "arcsin": (-1, 1),
    "arccos": (-1, 1), "erf": (-7, 7), "cbrt": (-1e6, 1e6), "arcsinh": (-1e3, 1e3),
    "arccosh": (1, 1e3), "arctanh": (-1, 1),
}
UNARY = list(RANGES)
BINARY = ["arctan2", "power", "logaddexp", "logaddexp2", "hypot"]

SPECIALS = np.array([
    0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 10.0,
    1e-8, -1e-8, 100.0, -100.0, 5e-324, -5e-324, 1e-310, 2.2250738585072014e-308, 1.4e-45,
    1e-40, 1.1754944e-38, 1e300, -1e300, 3.4e38, -3.4e38, 88.72, 88.73, -87.3, -103.9,
    -104.0, 709.78, 709.79, -745.13, -745.2, 0.7071067811865476, 1.414213562373095,
    0.7853981633974483, 1.5707963267948966, 3.141592653589793, 1e22, 2.0 ** 1023, 1e10,
    0.9999999, -0.9999999, 20.0, -20.0, 9.0, 1e5, 65504.0,
])


def _wide(dt):
    return np.float64 if dt == np.float32 else np.longdouble


_KERNELS: dict = {}


def kernel(fn, nargs):
    """A plain loop calling ``fn`` (one compile per (fn, dtype), shared by the tests)."""
    if (fn, nargs) not in _KERNELS:
        if nargs == 1:
            @numba.njit
            def run(a, out):
                for i in range(a.size):
                    out[i] = fn(a[i])
        else:
            @numba.njit
            def run(a, b, out):
                for i in range(a.size):
                    out[i] = fn(a[i], b[i])
        _KERNELS[(fn, nargs)] = run
    return _KERNELS[(fn, nargs)]


def apply(name, dt, *args):
    fn = mathlib.MATH_FUNCS[name][np.dtype(dt).name]
    args = [np.ascontiguousarray(a, dtype=dt) for a in args]
    out = np.empty_like(args[0])
    kernel(fn, len(args))(*args, out)
    return out


def ulp_error(got, ref, dt, scale=None):
    """|got - ref| in ulp of dt at ref; 0 where both are the same inf/NaN; inf on mismatch.

    ``scale``: measure ulp at max(|ref|, scale) instead (an absolute-error criterion).
    """
    wide = _wide(dt)
    got_w = got.astype(wide)
    ref_w = np.asarray(ref).astype(wide)
    with np.errstate(over="ignore"):
        ref_r = ref_w.astype(dt)
    if scale is not None:
        ref_r = np.maximum(np.abs(ref_r), np.abs(scale).astype(dt))
    same = (got_w == ref_w) | (np.isnan(got_w) & np.isnan(ref_w))
    same |= np.isinf(ref_r) & (got == ref_r)          # overflow: ref rounds to inf
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got_w - ref_w) / np.spacing(np.abs(ref_r)).astype(wide)
    err = np.where(same, 0.0, err)
    return np.where(np.isnan(err), np.inf, err).astype(np.float64)


def sweep_inputs(name, dt, n=50_000, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = RANGES[name]
    fi = np.finfo(dt)
    parts = [rng.uniform(lo, hi, n), rng.uniform(-2, 2, n // 2), SPECIALS]
    if dt == np.float32:
        bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
        parts.append(bits.view(np.float32).astype(np.float64))
        # a strided sweep over every exponent/sign
        parts.append(np.arange(0, 2 ** 32, 16411, dtype=np.uint64).astype(np.uint32)
                     .view(np.float32).astype(np.float64))
    else:
        bits = rng.integers(-2 ** 63, 2 ** 63 - 1, n, dtype=np.int64)
        parts.append(bits.view(np.float64))
        parts.append(np.array([fi.max, -fi.max, fi.tiny, fi.smallest_subnormal]))
    with np.errstate(over="ignore"):
        return np.concatenate(parts).astype(dt)


def reference(name, x, dt):
    with np.errstate(all="ignore"):
        return REFS[name](x.astype(_wide(dt)))


def _binary_inputs(name, dt, n=30_000, seed=0):
    rng = np.random.default_rng(seed)
    sp = np.concatenate([SPECIALS, [-2.5, 1e10, -1e10, 0.1]])
    ys, xs = np.meshgrid(sp, sp)
    if name == "power":
        x = np.concatenate([rng.uniform(0, 10, n), rng.uniform(-10, 10, n),
                            rng.uniform(0.5, 2, n), xs.ravel()])
        y = np.concatenate([rng.uniform(-10, 10, n), np.round(rng.uniform(-10, 10, n)),
                            rng.uniform(-1000, 1000, n), ys.ravel()])
    else:
        x = np.concatenate([rng.uniform(-10, 10, n), rng.standard_cauchy(n), xs.ravel()])
        y = np.concatenate([rng.uniform(-10, 10, n), rng.standard_cauchy(n), ys.ravel()])
    with np.errstate(over="ignore"):
        return x.astype(dt), y.astype(dt)


def measure(name, dt):
    """Max ulp error of mathlib's name on dt, and the exact-special-value mismatch count."""
    if name in BINARY:
        x, y = _binary_inputs(name, dt)
        got = apply(name, dt, x, y)
        with np.errstate(all="ignore"):
            ref = REFS[name](x.astype(_wide(dt)), y.astype(_wide(dt)))
            npv = REFS[name](x, y)
        # x + log1p(exp(y - x)) cancels where the result crosses 0 (NumPy's too): absolute
        # error at the scale of the inputs
        scale = np.maximum(np.abs(x), np.abs(y)) if name.startswith("logaddexp") else None
    else:
        x = sweep_inputs(name, dt)
        got = apply(name, dt, x)
        ref = reference(name, x, dt)
        with np.errstate(all="ignore"):
            npv = REFS[name](x) if name != "erf" else ref.astype(dt)
        scale = None
    err = ulp_error(got, ref, dt, scale)
    special = ~np.isfinite(npv) | (npv == 0) | ~np.isfinite(got) | (got == 0)
    def same(a, b):
        return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))

    # where NumPy's own result is off (e.g. float32 exp2 flushing a subnormal to 0), the
    # correctly rounded wide reference is accepted instead
    with np.errstate(all="ignore"):
        bad = special & ~same(got, npv) & ~same(got, np.asarray(ref).astype(dt))
    return float(err.max()), int(bad.sum())


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", UNARY + BINARY)
def test_accuracy_and_specials(name, dt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        err, bad = measure(name, dt)
    bound = mathlib.MAX_ULP[name][np.dtype(dt).name]
    assert err <= bound, f"{name}[{np.dtype(dt).name}]: {err:.3g} ulp > {bound}"
    assert bad == 0, f"{name}[{np.dtype(dt).name}]: {bad} special values differ from NumPy"


def test_docstring_table_matches_bounds():
    rows = {}
    for line in mathlib.__doc__.splitlines():
        m = re.match(r"^(\w+)\s+([\d.]+)\s+([\d.]+)", line)
        if m and m.group(1) in mathlib.MAX_ULP:
            rows[m.group(1)] = {"float32": float(m.group(2)), "float64": float(m.group(3))}
    assert rows == {k: {d: float(v) for d, v in b.items()} for k, b in mathlib.MAX_ULP.items()}


_LIBM = re.compile(r"\$(?:_?_?)(exp|exp2|expm1|log|log2|log10|log1p|sin|cos|tan|sinh|cosh|"
                   r"tanh|atan|asin|acos|atan2|erf|pow|cbrt|asinh|acosh|atanh|hypot)f?\b")


def _host_has_avx512():
    import os

    import numaccel
    if os.environ.get("NUMACCEL_CPU_CAPABILITY") not in (None, "", "avx512"):
        return False
    return numaccel.cpu_capability() == "avx512"


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", UNARY + BINARY)
def test_vectorizes_without_libm(name, dt):
    fn = mathlib.MATH_FUNCS[name][np.dtype(dt).name]
    nargs = 2 if name in BINARY else 1
    run = kernel(fn, nargs)
    arr = numba.types.Array(numba.from_dtype(np.dtype(dt)), 1, "C")
    sig = (arr,) * (nargs + 1)
    run.compile(sig)
    asm = run.inspect_asm(sig)
    assert not _LIBM.search(asm), f"{name}: libm call in the loop: {_LIBM.search(asm)[0]}"
    if _host_has_avx512():
        assert re.search(r"v\w+p[sd]\s.*%zmm", asm), f"{name}[{dt.__name__}]: no zmm code"
    else:
        assert re.search(r"v\w+p[sd]\s.*%[xyz]mm", asm), f"{name}: no packed vector code"


@numba.njit(parallel=True)
def _fused32(x, y, out):
    for i in numba.prange(x.size):
        out[i] = (mathlib.sin_f32(x[i]) * y[i]
                  + mathlib.exp_f32(-x[i]) * np.float32(0.5) + mathlib.tanh_f32(y[i]))


@numba.njit
def _fused_generic(x, y, out):
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = mathlib.hypot(x[i, j], y[i, j]) + mathlib.exp(y[i, j])


@pytest.mark.parametrize("n", [0, 1, 17, 1000])
def test_fused_prange_kernel(n):
    rng = np.random.default_rng(n)
    # contiguous for every n (one compile); the 2-D test covers non-contiguous layouts
    x = rng.uniform(-5, 5, n).astype(np.float32)
    y = rng.uniform(-3, 3, n).astype(np.float32)
    out = np.empty(n, np.float32)
    _fused32(x, y, out)
    ref = np.sin(x) * y + np.exp(-x) * np.float32(0.5) + np.tanh(y)
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("shape", [(2, 3), (5, 7)])      # Fortran-ordered: one compile
def test_generic_dispatch_2d(dt, shape):
    rng = np.random.default_rng(1)
    x = np.asfortranarray(rng.uniform(0, 3, shape).astype(dt))
    y = rng.uniform(-2, 2, shape).astype(dt)
    out = np.empty(shape, dt)
    _fused_generic(x, y, out)
    ref = np.hypot(x, y) + np.exp(y)
    tol = 1e-5 if dt == np.float32 else 1e-13
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


def test_registry_and_source_names():
    for name, per in mathlib.MATH_FUNCS.items():
        assert set(per) == {"float32", "float64"}
        for dt, fn in per.items():
            assert getattr(mathlib, mathlib.source_name(name, dt)) is fn
    assert mathlib.source_name("exp", np.float32) == "exp_f32"
    assert mathlib.source_name("expit", "float64") == "sigmoid_f64"
    with pytest.raises(NotImplementedError, match="fmod"):
        mathlib.source_name("fmod", "float32")
    with pytest.raises(TypeError, match="float16"):
        mathlib.source_name("exp", "float16")
    np.testing.assert_allclose(mathlib.exp(np.array([0.0, 1.0])), [1.0, np.e])


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
def test_powi(dt):
    fn = mathlib.MATH_FUNCS["powi"][np.dtype(dt).name]

    @numba.njit
    def run(a, n, out):
        for i in range(a.size):
            out[i] = fn(a[i], n)

    x = np.concatenate([np.linspace(-3, 3, 101), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    x = x.astype(dt)
    for n in [0, 1, 2, 3, 5, 8, -1, -2, -3, 13]:
        out = np.empty_like(x)
        run(x, n, out)
        with np.errstate(all="ignore"):
            ref = np.power(x.astype(np.float64), n)
        np.testing.assert_allclose(out, ref.astype(dt), rtol=8 * np.finfo(dt).eps)


def test_bitcasts_roundtrip():
    @numba.njit
    def rt(a, b):
        return (mathlib.i64_as_f64(mathlib.f64_as_i64(a)),
                mathlib.i32_as_f32(mathlib.f32_as_i32(b)), mathlib.f64_as_i64(a))

    for v in [0.0, -0.0, 1.5, -np.inf, 5e-324]:
        a, b, bits = rt(v, np.float32(v))
        assert np.float64(a).tobytes() == np.float64(v).tobytes()
        assert np.float32(b).tobytes() == np.float32(v).tobytes()
        assert bits == np.array(v).view(np.int64)


@settings(max_examples=60, deadline=None)
@given(x=st.floats(width=32, allow_nan=True, allow_infinity=True),
       name=st.sampled_from(["exp", "log", "sin", "tanh", "sigmoid", "cbrt", "arctan"]))
def test_hypothesis_float32(x, name):
    a = np.array([x], np.float32)
    got = apply(name, np.float32, a)
    err = ulp_error(got, reference(name, a, np.float32), np.float32)
    assert err[0] <= mathlib.MAX_ULP[name]["float32"]


@settings(max_examples=80, deadline=None)
@given(x=st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
       name=st.sampled_from(["exp", "expm1", "log", "log1p", "sin", "cos", "tan", "tanh",
                             "arctan", "arcsin", "erf", "cbrt", "arcsinh"]))
def test_hypothesis_float64(x, name):
    a = np.array([x])
    got = apply(name, np.float64, a)
    err = ulp_error(got, reference(name, a, np.float64), np.float64)
    assert err[0] <= mathlib.MAX_ULP[name]["float64"]


@settings(max_examples=60, deadline=None)
@given(x=st.floats(allow_nan=True, allow_infinity=True),
       y=st.floats(min_value=-50, max_value=50))
def test_hypothesis_power_float64(x, y):
    a, b = np.array([x]), np.array([y])
    got = apply("power", np.float64, a, b)
    with np.errstate(all="ignore"):
        ref = np.power(a.astype(np.longdouble), b.astype(np.longdouble))
    assert ulp_error(got, ref, np.float64)[0] <= mathlib.MAX_ULP["power"]["float64"]


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    print(f"{'function':10s} {'float32':>8s} {'float64':>8s}")
    for nm in UNARY + BINARY:
        r = [measure(nm, d) for d in DTYPES]
        print(f"{nm:10s} {r[0][0]:8.3g} {r[1][0]:8.3g}   special mismatches {r[0][1]} {r[1][1]}")
