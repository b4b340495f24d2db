"""np.searchsorted: the traced op, its branchless parallel CPU kernel, and boolean-mask
counts in segmented traces."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import numaccel
from numaccel.backends import find_kernel
from numaccel.kernels_cpu.search import searchsorted
from numaccel.trace.tracer import TraceState

from conftest import check_np

DTYPES = ["float64", "float32", "int64", "int32", "uint64", "uint32"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", ["left", "right"])
def test_kernel_matches_numpy(dtype, side, rng):
    for n in (0, 1, 2, 3, 7, 101, 1000):
        a = np.sort(rng.integers(0, 40, n)).astype(dtype)       # duplicates
        v = rng.integers(0, 45, 3000).astype(dtype)
        assert np.array_equal(searchsorted(a, v, side), np.searchsorted(a, v, side))
    a = np.sort(rng.integers(0, 40, 64)).astype(dtype)
    v2 = rng.integers(0, 45, (7, 9)).astype(dtype)[:, ::2]      # 2-D, non-contiguous
    got = searchsorted(a[::2], v2, side)
    assert got.shape == v2.shape and np.array_equal(got, np.searchsorted(a[::2], v2, side))
    got = searchsorted(a, a.dtype.type(5), side)                 # 0-d key -> scalar
    assert got == np.searchsorted(a, a.dtype.type(5), side) and np.ndim(got) == 0
    assert searchsorted(a, np.zeros(0, dtype), side).shape == (0,)


@pytest.mark.parametrize("side", ["left", "right"])
def test_kernel_nan_inf_and_parallel_sizes(side, rng):
    a = np.array([-np.inf, -1.0, 0.0, 0.0, 2.5, np.inf, np.nan, np.nan])
    v = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, 1.0, 3.0, -5.0])
    assert np.array_equal(searchsorted(a, v, side), np.searchsorted(a, v, side))
    a = np.sort(rng.standard_normal(97))
    v = rng.standard_normal(1 << 15)                     # above the parallel threshold
    assert np.array_equal(searchsorted(a, v, side), np.searchsorted(a, v, side))
    with pytest.raises(ValueError, match="side"):
        searchsorted(a, v, "middle")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=True, width=32), max_size=40),
       st.lists(st.floats(allow_nan=True, width=32), max_size=40),
       st.sampled_from(["left", "right"]))
def test_kernel_hypothesis(a, v, side):
    a = np.sort(np.array(a, np.float32))
    v = np.array(v, np.float32)
    assert np.array_equal(searchsorted(a, v, side), np.searchsorted(a, v, side))


def test_traced_searchsorted_is_one_graph_with_the_kernel(rng):
    edges = np.sort(rng.standard_normal(41))
    y = rng.standard_normal(5000) * 2

    def f(y, edges):
        iy = np.searchsorted(edges, y, side="right") - 1
        return iy, edges.searchsorted(y[:7]), np.searchsorted(edges, 0.5)
    acc = check_np(f, y, edges, backend="cpu", fullgraph=True)
    assert acc.cache_info().graph_breaks == 0
    assert find_kernel("searchsorted", "cpu", edges, y, side="right").name == \
        "searchsorted_cpu"
    steps = [s for s in acc.entries[-1].run.steps if type(s).__name__ == "NumpyStep"]
    assert [s for s in steps if s.n.op == "searchsorted" and s.kernels]
    # cases the kernel does not take run NumPy's function: mixed dtypes, sorter=
    check_np(lambda a, v: np.searchsorted(a, v), np.arange(10), y, backend="cpu")
    check_np(lambda a, v: np.searchsorted(a, v, sorter=np.argsort(a)), y[:50], y,
             backend="cpu")
    assert find_kernel("searchsorted", "cpu", np.arange(10), y) is None
    with pytest.raises(ValueError):
        numaccel.accelerate(lambda a, v: np.searchsorted(a, v, side="up"),
                            backend="cpu")(edges, y)


def test_mask_count_in_segmented_trace_does_not_recompute(rng, monkeypatch):
    # a function with a graph break re-runs its Python each call: the size of a boolean
    # mask of computed values then comes from running the segment, not from a second
    # evaluation of the mask's inputs in the reference interpreter (peek)
    def f(x, w):
        keep = (x * 2 - 1) > 0
        idx = (x[keep] * 10).astype(np.int64)
        return np.bincount(idx, weights=w[keep], minlength=12)   # bincount: graph break

    monkeypatch.setattr(numaccel.config, "segmented_mode", "trace")   # not timing-based
    x, w = rng.random(2000), rng.random(2000)
    acc = check_np(f, x, w, backend="cpu", calls=3)
    peeks = []
    orig = TraceState.peek
    monkeypatch.setattr(TraceState, "peek", lambda self, t: peeks.append(1) or orig(self, t))
    for _ in range(3):
        np.testing.assert_allclose(acc(x, w), f(x, w))
    assert not peeks
