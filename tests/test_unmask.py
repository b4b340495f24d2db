"""Masked updates ``y[m] = f(x[m], ...)`` compile to ``where(m, f(x, ...), y)`` (the
unmask pass): results equal NumPy's, and the rewrite fires only where it is sound."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import numaccel

from conftest import assert_same, check_np


def ops_of(f):
    """Op names of the graph the cpu backend compiled (after its rewrites)."""
    return [n.op for n in f.entries[-1].run.graph.nodes]


def rewritten(f):
    ops = ops_of(f)
    return "where" in ops and "setitem" not in ops and "getitem" not in ops


def update(x, z):
    y = x.copy()
    m = x > z
    y[m] = np.sqrt(np.abs(x[m] * 2.0 + z[m])) - 1.0
    return y


def test_masked_update_becomes_where(rng):
    x, z = rng.standard_normal((30, 7)), rng.standard_normal((30, 7))
    f = check_np(update, x, z, backend="cpu", fullgraph=True)
    assert rewritten(f)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8"])
def test_scalar_value_every_dtype(rng, dtype):
    def fn(a, t):
        b = a.copy()
        b[a > t] = 3
        return b
    a = (rng.standard_normal(50) * 10).astype(dtype)
    f = check_np(fn, a, a.dtype.type(2), backend="cpu", fullgraph=True)
    assert rewritten(f)


def test_float_value_into_int_array_truncates_like_numpy(rng):
    def fn(a):
        m = a > 3
        a[m] = a[m] * 1.5 - 0.25            # float64 values cast to int64 on assignment
        return a
    f = check_np(fn, rng.integers(-10, 10, 40), backend="cpu", fullgraph=True)
    assert rewritten(f)


def test_integer_division_with_zeros_outside_the_mask(rng):
    # the rewritten kernel divides at every position, the zeros too: no error, and the
    # values there are discarded
    def fn(a, d):
        q = np.zeros_like(a)
        m = d != 0
        q[m] = a[m] // d[m] + a[m] % d[m]
        return q
    a, d = rng.integers(-50, 50, 64), rng.integers(-2, 3, 64)
    d[:5] = 0
    f = check_np(fn, a, d, backend="cpu", fullgraph=True)
    assert rewritten(f)


def test_nan_inf_and_empty(rng):
    def fn(x):
        y = x.copy()
        m = np.isfinite(x)
        y[m] = np.exp(-x[m])
        return y
    x = rng.standard_normal(20)
    x[[1, 5, 9]] = [np.nan, np.inf, -np.inf]
    assert rewritten(check_np(fn, x, backend="cpu", fullgraph=True))
    check_np(fn, np.empty(0), backend="cpu", fullgraph=True)
    check_np(fn, np.full(3, np.nan), backend="cpu", fullgraph=True)    # no True at all


def test_non_contiguous_and_size_one(rng):
    x = rng.standard_normal((9, 12))[::2, ::3]
    check_np(update, x, x.T.copy().T, backend="cpu", fullgraph=True)
    check_np(update, rng.standard_normal((1, 1)), rng.standard_normal((1, 1)),
             backend="cpu", fullgraph=True)


def test_mandelbrot_loop_is_rewritten_and_dynamic(rng):
    def mandel(c, iters):
        z = np.zeros_like(c)
        n = np.zeros(c.shape, np.int64)
        for _ in range(iters):
            m = np.abs(z) <= 2.0
            z[m] = z[m] * z[m] + c[m]
            n[m] += 1
        return n, z

    f = numaccel.accelerate(mandel, backend="cpu", fullgraph=True)
    for shape in [(8, 9), (11, 13), (5, 7)]:
        c = rng.uniform(-2, 1, shape) + 1j * rng.uniform(-1.5, 1.5, shape)
        assert_same(f(c, 12), mandel(c, 12))
    assert "setitem" not in ops_of(f) and ops_of(f).count("where") >= 12


def test_not_rewritten_when_unsound_or_not_matching(rng):
    x = rng.standard_normal((6, 5))

    def row_mask(x):                # mask over rows only: not of x's full shape
        y = x.copy()
        y[x[:, 0] > 0] = 0.0
        return y

    def other_mask(x):              # the value is gathered under a different mask
        y = x.copy()
        m, k = x > 0, ~(x <= 0)       # equal masks, but two of them
        y[m] = x[k] * 2.0
        return y

    def reduced_value(x):           # a reduction on the path: not lane by lane
        y = x.copy()
        m = x > 0
        y[m] = np.cumsum(x[m])
        return y

    for fn in (row_mask, other_mask, reduced_value):
        f = check_np(fn, x, backend="cpu", fullgraph=True)
        assert "where" not in ops_of(f), fn.__name__


def test_gathered_values_used_elsewhere_and_scalars_from_them(rng):
    def fn(x):
        y = x.copy()
        m = x > 0.2
        v = x[m]
        y[m] = v - v.mean()         # a 0-d reduction of the gather is a scalar operand
        return y, v * 2
    f = check_np(fn, rng.standard_normal((4, 9)), backend="cpu", fullgraph=True)
    assert "where" in ops_of(f) and "setitem" not in ops_of(f)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 40), st.floats(-1, 1), st.sampled_from(["float32", "float64"]),
       st.integers(0, 2 ** 31))
def test_hypothesis_against_numpy(n, t, dtype, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(dtype)
    z = np.full(n, t, dtype)
    check_np(update, x, z, backend="cpu", fullgraph=True, calls=1)


@pytest.mark.parametrize("fullgraph", [True, False])
def test_mask_counts_cost_linear_trace_time(monkeypatch, fullgraph):
    # each x[m] needs the count of m while tracing: peeks reuse the values of the
    # previous ones (the loop's history is not recomputed per iteration)
    import numaccel.interp as interp
    calls = [0]
    real = interp._value

    def counting(*a, **k):
        calls[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(interp, "_value", counting)

    def loop(x, iters):
        for _ in range(iters):
            m = np.abs(x) < 1.5
            x[m] = x[m] * 1.1 + 0.01
        return x

    used = {}
    for iters in (10, 40):
        calls[0] = 0
        x = np.linspace(-2, 2, 64)
        f = numaccel.accelerate(loop, backend="cpu", fullgraph=fullgraph)
        assert_same(f(x.copy(), iters), loop(x.copy(), iters))
        used[iters] = calls[0]
    assert used[40] < 6 * used[10], used
