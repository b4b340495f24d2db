"""np.sort / np.argsort / ndarray.sort traced, and the top-k rewrite of
``np.argsort(x, axis=-1)[..., :k]`` (ops/sorting.py, lower/topk.py, kernels_cpu/topk.py)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import numaccel
from numaccel.kernels_cpu.topk import argsort_topk

from conftest import assert_same, check_np


def with_specials(x):
    x = x.copy()
    flat = x.reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = np.inf
    flat[5::13] = -np.inf
    flat[6::17] = -0.0
    flat[8::17] = 0.0
    return x


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_sort_and_argsort_equal_numpy(backend, axis, rng):
    x = with_specials(rng.standard_normal((6, 9)))
    check_np(lambda x: (np.sort(x, axis=axis), np.argsort(x, axis=axis, kind="stable")), x,
             backend=backend)
    check_np(lambda x: np.sort(x[:, ::2] * 2.0, axis=axis, stable=True) + 1.0, x,
             backend=backend)


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint16", "float32", "bool"])
def test_dtypes_and_in_place_method(dtype, rng):
    x = (rng.standard_normal((5, 8)) * 4).astype(dtype)

    def f(x):
        y = x.copy()
        y.sort(axis=0, kind="stable")
        return y, x.argsort(kind="stable"), np.sort(x, axis=None)

    check_np(f, x, backend="cpu")


def test_what_the_tracer_does_not_take_still_runs(rng):
    x = rng.standard_normal((4, 5))
    f = numaccel.accelerate(lambda x: np.argsort(x, stable=True, kind="quicksort"))
    with pytest.raises(ValueError):
        np.argsort(x, stable=True, kind="quicksort")
    with pytest.raises(ValueError):
        f(x)
    rec = np.zeros(3, dtype=[("a", "i4"), ("b", "f8")])
    g = numaccel.accelerate(lambda r: np.sort(r, order="b"))
    assert_same(g(rec), np.sort(rec, order="b"))


# ------------------------------------------------------------------------------ top-k

def steps_of(acc):
    run = acc.entries[-1].run
    return run.describe()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", [0, 1, 5, 20])
def test_knn_argsort_slice_becomes_topk(dtype, k, rng):
    x = with_specials(np.round(rng.standard_normal((13, 80)), 1).astype(dtype))  # ties
    x2 = x[:, ::-1]                                                    # a strided view

    def knn(x):
        order = np.argsort(x, axis=1, kind="stable")[:, :k]
        return order, np.take_along_axis(x, order, axis=1)

    for a in (x, x2):
        acc = check_np(knn, a, backend="cpu")
        assert "argsort_topk" in steps_of(acc)


def test_topk_of_the_default_sort_gives_a_stable_order_of_ties(rng):
    x = rng.standard_normal((30, 200))
    f = numaccel.accelerate(lambda x: np.argsort(x)[:, :8], backend="cpu")
    assert_same(f(x), np.argsort(x)[:, :8])        # no ties: the one order
    t = np.round(x)
    assert_same(f(t), np.argsort(t, kind="stable")[:, :8])


def test_topk_is_not_used_where_it_would_change_or_lose_something(rng):
    x = rng.standard_normal((6, 40))
    ints = (x * 3).astype(np.int64)
    cases = [
        (lambda x: np.argsort(x, axis=1)[:, :5], ints),                 # integer ties
        (lambda x: (lambda o: (o[:, :5], o))(np.argsort(x, axis=1)), x),  # full order used
        (lambda x: np.argsort(x, axis=0)[:2], x),                        # not the last axis
        (lambda x: np.argsort(x, axis=1)[:, :30], x),                    # k too large
        (lambda x: np.argsort(x, axis=1)[:, 1:5], x),                    # not a prefix
    ]
    for fn, a in cases:
        acc = check_np(fn, a, backend="cpu")
        assert "argsort_topk" not in steps_of(acc)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(0, 5), n=st.integers(1, 60), k_frac=st.floats(0, 1),
       levels=st.integers(1, 6), nan_frac=st.floats(0, 0.5), seed=st.integers(0, 2 ** 16))
def test_topk_kernel_is_a_stable_argsort_prefix(rows, n, k_frac, levels, nan_frac, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, levels, (rows, n)).astype(np.float64) - 0.0 * rng.random((rows, n))
    x[rng.random((rows, n)) < nan_frac] = np.nan
    k = int(k_frac * n)
    assert_same(argsort_topk(x, k), np.argsort(x, axis=-1, kind="stable")[..., :k])
    assert_same(argsort_topk(x.astype(np.float32), k),
                np.argsort(x.astype(np.float32), axis=-1, kind="stable")[..., :k])


def test_topk_kernel_large_parallel_and_errors(rng):
    x = rng.standard_normal((300, 500))
    assert_same(argsort_topk(x, 12), np.argsort(x, axis=-1, kind="stable")[:, :12])
    with pytest.raises(ValueError, match="outside"):
        argsort_topk(x, 501)


def test_sorting_an_argument_in_place_is_seen_by_the_caller(rng):
    def f(x):
        x.sort(axis=1)
        return x[:, 0] * 2.0

    check_np(f, with_specials(rng.standard_normal((5, 7))), backend="cpu")
