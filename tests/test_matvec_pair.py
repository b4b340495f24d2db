"""``X.T @ f(X @ v, ...)`` (a GLM gradient) as one pass over X (lower/cpu_gemv.py).

Every case compares with NumPy AND checks whether the plan fused the pair: a silent
fall back to two matvecs would pass the value checks unnoticed."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numaccel
from numaccel.config import config
from numaccel.lower.cpu import CompiledGraph
from numaccel.lower import cpu_gemv
from numaccel.lower.cpu_gemv import MatvecPairStep

from conftest import assert_same


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def grad(X, w, b, y):
    p = sigmoid(X @ w + b)
    err = p - y
    return X.T @ err / len(y), err.mean(), p


@pytest.fixture(autouse=True, scope="module")
def always_pair():
    # the test matrices fit in any cache: fuse them anyway (the size rule has its test)
    saved = list(cpu_gemv._LLC)
    cpu_gemv._LLC[:] = [0]
    yield
    cpu_gemv._LLC[:] = saved


def run(fn, *args, fused=1, rtol=None, atol=None):
    ref = fn(*args)
    f = numaccel.accelerate(fn, backend="cpu")
    for _ in range(2):
        got = f(*args)
        assert_same(got, ref, rtol=rtol, atol=atol)
    e = f.entries[0]
    assert e.kind == "graph" and isinstance(e.run, CompiledGraph), e.reason
    pairs = [s for s in e.run.steps if isinstance(s, MatvecPairStep)]
    assert len(pairs) == fused, e.run.describe()
    return f


def data(rng, n, d, dtype=np.float64):
    X = rng.standard_normal((n, d)).astype(dtype)
    w = (rng.standard_normal(d) * 0.3).astype(dtype)
    y = (rng.random(n) < 0.5).astype(np.int64)
    return X, w, y


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("pmin", [10 ** 9, 1000])     # one chunk; 16 chunks on threads
def test_logistic_gradient(rng, monkeypatch, dtype, pmin):
    monkeypatch.setattr(config, "parallel_min", pmin)
    X, w, y = data(rng, 3000, 37, dtype)
    tol = dict(rtol=2e-4, atol=1e-5) if dtype == np.float32 else {}
    f = run(grad, X, w, dtype(0.25), y, **tol)
    assert "matvec pair" in f.entries[0].run.describe()


def test_gradient_descent_loop_fuses_every_step(rng):
    def train(X, y, lr, iters):
        w = np.zeros(X.shape[1])
        losses = np.empty(iters)
        for t in range(iters):
            p = sigmoid(X @ w)
            w -= lr * (X.T @ (p - y)) / len(y)
            losses[t] = -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
        return w, losses

    X, _, y = data(rng, 2000, 20)
    run(train, X, y, 0.5, 5, fused=5)


def test_least_squares_and_values_used_after(rng):
    def ls(X, w, y, mask):
        r = X @ w - y
        e = np.where(mask, r, 0.0) * 2.0
        return X.T @ e, r, e.sum()

    X, w, _ = data(rng, 1500, 30)
    y = rng.standard_normal(1500)
    run(ls, X, w, y, rng.random(1500) < 0.7)


def test_broadcast_scalar_operands_and_int_rows(rng):
    def f(X, w, s, one, c):
        return X.T @ ((X @ w) * s + one - c)

    X, w, _ = data(rng, 1200, 25)
    run(f, X, w, np.float64(0.5), np.ones(1), np.arange(1200))


def test_nan_inf_and_views(rng):
    X, w, y = data(rng, 1100, 31)
    X[3, 4], X[7, 0], w[2] = np.nan, np.inf, 0.0
    run(grad, X, w, 0.0, y)
    big, _, _ = data(rng, 2200, 40)
    run(grad, big[::2, :31], w, 0.0, y)             # rows with a stride: fused
    run(grad, big[:1100, :31], w, 0.0, y)           # a column slice, rows still unit


def test_fallback_for_columns_with_stride_and_fortran_order(rng):
    X, w, y = data(rng, 1100, 62)
    f = run(grad, X[:, ::2], w[::2], 0.0, y)         # fused in the plan, runs the steps
    assert f(X[:, ::2], w[::2], 0.0, y)[0].shape == (31,)
    run(grad, np.asfortranarray(X), w, 0.0, y)


def test_empty_dims(rng):
    for n, d in ((0, 600), (600, 0)):
        monkey = config.compiled_wrapper
        config.compiled_wrapper = False
        try:
            X, w, y = data(rng, n, d)
            ref = grad(X, w, 0.0, y) if n else None
            f = numaccel.accelerate(grad)
            with np.errstate(all="ignore"):
                got = f(X, w, 0.0, y)
                ref = grad(X, w, 0.0, y)
            assert_same(got, ref)
        finally:
            config.compiled_wrapper = monkey


def test_not_fused_when_a_write_or_a_read_sits_between(rng):
    def write_between(X, w):
        z = X @ w
        X[0, 0] = 5.0             # the second product must see the write
        return X.T @ (z * 2.0)

    X, w, _ = data(rng, 1000, 40)
    ref = write_between(X.copy(), w)
    f = numaccel.accelerate(write_between)
    Xa = X.copy()
    assert_same(f(Xa, w), ref)
    assert Xa[0, 0] == 5.0

    def read_between(X, w, v):
        z = X @ w
        u = X @ (v + z[:v.shape[0]].sum())   # reads z before the kernel needs it
        e = z * u
        return X.T @ e

    run(read_between, X, w, rng.standard_normal(40), fused=0)


def test_results_do_not_depend_on_thread_count(rng, monkeypatch):
    monkeypatch.setattr(config, "parallel_min", 1000)
    X, w, y = data(rng, 5000, 33)
    out = []
    for k in (1, 2, 3):
        monkeypatch.setattr(config, "num_threads", k)
        out.append(numaccel.accelerate(grad)(X, w, 0.1, y)[0])
    assert all(np.array_equal(out[0], o) for o in out[1:])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 300), d=st.integers(1, 40), f32=st.booleans(),
       pmin=st.sampled_from([1, 500, 10 ** 9]), seed=st.integers(0, 2 ** 16))
def test_hypothesis_against_numpy(n, d, f32, pmin, seed):
    rng = np.random.default_rng(seed)
    dtype = np.float32 if f32 else np.float64
    X, w, y = data(rng, n, d, dtype)
    saved = config.compiled_wrapper, config.parallel_min
    config.compiled_wrapper, config.parallel_min = False, pmin   # small: the step path
    try:
        tol = dict(rtol=2e-4, atol=1e-5) if f32 else {}
        run(grad, X, w, dtype(-0.5), y, **tol)
    finally:
        config.compiled_wrapper, config.parallel_min = saved


def test_a_matrix_in_half_the_cache_keeps_two_blas_matvecs(rng):
    # the pair saves the second read of X from DRAM; an X in cache is read twice from
    # cache, where BLAS wins
    X, w, y = data(rng, 300, 20)
    try:
        cpu_gemv._LLC[:] = [X.nbytes]
        run(grad, X, w, 0.1, y, fused=0)
        cpu_gemv._LLC[:] = [X.nbytes - 1]
        run(grad, X, w, 0.1, y, fused=1)
    finally:
        cpu_gemv._LLC[:] = [0]


def test_pair_min_bytes_reads_the_last_level_cache():
    saved = list(cpu_gemv._LLC)
    try:
        cpu_gemv._LLC.clear()
        got = cpu_gemv.pair_min_bytes()
        try:
            with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as fh:
                txt = fh.read().strip()
        except OSError:
            pytest.skip("no L3 size in /sys")
        unit = {"K": 1024, "M": 1024 * 1024}[txt[-1]]
        assert got == int(txt[:-1]) * unit // 2 > 0
    finally:
        cpu_gemv._LLC[:] = saved
