"""Map kernels with float32 sin/cos/tan: the fast loop and the fix-up of big arguments.

The vectorized loop calls ``sin_fast_f32`` (exact only up to ``TRIG_FAST_MAX_F32``) and
flags blocks holding a bigger argument; ``fixup`` (compiled only once that happens)
recomputes those blocks with ``sin_f32``. Checked for launches on one thread and on
several, rank-2 strided kernels (blocks of whole rows), a trig argument computed from
another trig result, float16/bfloat16 storage, against NumPy by hypothesis, and in the
assembly (the fast loop is packed vector code without libm calls).
"""
from __future__ import annotations

import re

import numba
import numpy as np
import pytest

import numaccel
from numaccel.lower.mathlib_trig import TRIG_FAST_MAX_F32, cos_f32, sin_f32

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

B = float(TRIG_FAST_MAX_F32)
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 3.4e38, -B,
                    np.nextafter(np.float32(B), np.float32(np.inf))], np.float32)


def _inputs(n, rng, big_every=997):
    x = rng.uniform(-5, 5, n).astype(np.float32)
    x[::big_every] = rng.uniform(B, 1e30, x[::big_every].size).astype(np.float32)
    sp = x[1::big_every]
    sp[:] = np.resize(SPECIAL, sp.size)
    return x


def _chain(x, y):
    return np.sin(x) * y + np.cos(x) + np.tan(x * np.float32(0.5))


def _chain_ref(x, y):
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    xh = (x * np.float32(0.5)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.sin(xd) * yd + np.cos(xd) + np.tan(xh)


def _close(got, ref):
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=3e-6, atol=3e-6)


@pytest.fixture(autouse=True, scope="module")
def step_kernels():
    """Map kernels also for small inputs (else the compiled wrapper runs them, with the
    all-range functions: tested by test_cpu_wrapper.py and test_trig_f32.py)."""
    numaccel.config.compiled_wrapper = False
    yield
    numaccel.config.compiled_wrapper = True


def _module(f):
    """The kernel module of a function compiled to one map kernel."""
    (step,) = f.entries[-1].run.steps
    (mod,) = step.mods.values()
    return mod


@pytest.mark.parametrize("n", [1000, numaccel.config.parallel_min + 12345],
                         ids=["one-thread", "threads"])
def test_big_arguments_are_fixed_up(n, monkeypatch):
    import numaccel.lower.cpu as cpu
    ran = []

    def spy(fn, args, n0, size):
        ran.append(fn.__name__)
        return launch(fn, args, n0, size)

    launch = cpu.launch
    monkeypatch.setattr(cpu, "launch", spy)
    rng = np.random.default_rng(n)
    x, y = _inputs(n, rng), rng.standard_normal(n).astype(np.float32)
    f = numaccel.accelerate(_chain)
    small = np.clip(x, -3, 3)
    _close(f(small, y), _chain_ref(small, y))
    # no big argument yet: the fix-up did not run (and, in the first test, was never
    # compiled; both tests share one kernel module)
    assert ran == ["kernel"]
    if n < numaccel.config.parallel_min:
        assert not _module(f).fixup.signatures
    got = f(x, y)
    assert got.dtype == np.float32
    _close(got, _chain_ref(x, y))
    assert ran == ["kernel", "kernel", "fixup"]


def test_rank2_strided_and_nested_trig():
    rng = np.random.default_rng(3)
    x = _inputs(600 * 700, rng).reshape(600, 700)[:, ::2]
    f = numaccel.accelerate(lambda a: np.sin(np.sin(a) * np.float32(1e6)) + np.cos(a))
    got = f(x)
    # reference: the all-range float32 functions, elementwise (an ulp of sin(a) becomes
    # ~0.06 after * 1e6, so NumPy's own float32 sin is no reference here)
    ref = _nested_ref(np.ascontiguousarray(x).reshape(-1)).reshape(x.shape)
    np.testing.assert_allclose(got, ref, rtol=2e-7, atol=2e-7)


@numba.njit
def _nested_ref(a):
    out = np.empty_like(a)
    for i in range(a.size):
        out[i] = sin_f32(sin_f32(a[i]) * np.float32(1e6)) + cos_f32(a[i])
    return out


def test_rank2_wide_rows_big_in_one_row():
    # rows longer than a block: one row per block; only the last row needs the fix-up
    x = np.random.default_rng(6).uniform(-3, 3, (4, 3 * numaccel.config.parallel_min)).astype(np.float32)
    x = x[:, ::3]
    x[3, ::5] = 1e7
    f = numaccel.accelerate(lambda a: np.cos(a) * np.float32(3))
    _close(f(x), np.cos(x.astype(np.float64)) * 3)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_narrow_storage(dt):
    dtype = numaccel.bfloat16 if dt == "bfloat16" else np.float16
    x = _inputs(numaccel.config.parallel_min + 7, np.random.default_rng(4))
    if dt == "float16":
        x = np.where(np.abs(x) > 6e4, np.float32(6e4), x)     # float16 has no 1e30
    xb = x.astype(dtype)
    f = numaccel.accelerate(lambda a: np.sin(a) * 2.0)
    got = f(xb)
    assert got.dtype == dtype
    with np.errstate(invalid="ignore"):
        ref = np.sin(xb) * 2.0        # NumPy: sin in float32, rounded to dtype
    g, r = got.astype(np.float32), ref.astype(np.float32)
    assert np.array_equal(np.isnan(g), np.isnan(r))
    # both round a float32 sin to the narrow type: equal but where the two float32
    # results straddle a rounding boundary (one narrow ulp)
    ulp = 2.0 ** (-7 if dt == "bfloat16" else -10)
    np.testing.assert_allclose(g, r, rtol=ulp, atol=2 ** -24)
    assert np.mean(g[~np.isnan(g)] != r[~np.isnan(r)]) < 1e-3


_LIBM = re.compile(r"\$_?_?(sin|cos|tan|sinf|cosf|tanf|exp|expf)\b")


def test_fast_loop_vectorizes(monkeypatch):
    # through Numba (not the native cache), so that its dispatcher has the signature
    monkeypatch.setattr(numaccel.config, "native_kernels", False)
    f = numaccel.accelerate(_chain)
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    f(x, x)
    disp = _module(f).kernel
    # compiled again, uncached (Numba cannot inspect code it loaded from its cache)
    fresh = numba.njit(error_model="numpy")(disp.py_func)
    sig = disp.signatures[0]
    fresh.compile(sig)
    asm = fresh.inspect_asm(sig)
    assert not _LIBM.search(asm), _LIBM.search(asm)[0]
    reg = "zmm" if numaccel.cpu_capability() == "avx512" else "[xyz]mm"
    # packed float32 fmas: the vectorized loop (a scalar one has only vfmadd...ss)
    assert re.search(rf"vfn?madd\d+ps\s.*%{reg}", asm), "no packed float32 fma"


_arrays = hnp.arrays(np.float32, st.integers(0, 300),
                     elements=st.floats(width=32, allow_nan=True, allow_infinity=True))


@settings(max_examples=40, deadline=None)
@given(x=_arrays)
def test_hypothesis_against_numpy(x):
    f = _hyp_fn()
    y = np.float32(0.75) - x[::-1]
    got = f(x, y)
    ref = _chain_ref(x, y)
    both_nan = np.isnan(got) & np.isnan(ref)
    with np.errstate(invalid="ignore"):
        # beyond 1e6 only tan near a pole (float32 x * 0.5 has moved it) or a product
        # near float32 overflow: no digits to compare
        ok = both_nan | np.isclose(got.astype(np.float64), ref, rtol=1e-5, atol=1e-5) | \
            (np.abs(ref) > 1e6)
    assert ok.all(), (x[~ok], got[~ok], ref[~ok])


_HYP = []


def _hyp_fn():
    # one accelerated function for every example: compiled once per rank/layout
    if not _HYP:
        _HYP.append(numaccel.accelerate(_chain))
    return _HYP[0]
