"""The parallel 1-D scan (kernels_cpu/scan.py) behind np.cumsum and
np.maximum/minimum.accumulate on the cpu backend: NumPy's results and dtypes, exact for
integers and max/min, NaN propagated, independent of the thread count."""
import numpy as np
import pytest

import numaccel
from numaccel.config import config
from numaccel.kernels_cpu import scan as scan_mod
from numaccel.ops.prims import _cpu_scan

from conftest import assert_same

REF = {"add": np.cumsum, "maximum": np.maximum.accumulate,
       "minimum": np.minimum.accumulate}


def data(rng, n, dtype):
    if dtype == np.bool_:
        return rng.random(n) < 0.3
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, n).astype(dtype)
    return (rng.standard_normal(n) * 10).astype(dtype)


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("ufunc", ["add", "maximum", "minimum"])
@pytest.mark.parametrize("n", [1, 5, 16, 17, 1000, 4099])
def test_against_numpy(rng, dtype, ufunc, n):
    x = data(rng, n, dtype)
    ref = REF[ufunc](x)
    got = _cpu_scan(x, ufunc)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if np.dtype(dtype).kind == "f" and ufunc == "add":
        scale = np.maximum.accumulate(np.abs(x)) * np.arange(1, n + 1)
        tol = 4e-6 if dtype == np.float32 else 1e-13
        assert np.all(np.abs(got - ref) <= tol * scale)
    else:
        assert np.array_equal(got, ref)


def test_nan_inf_views_and_thread_counts(rng, monkeypatch):
    x = rng.standard_normal(5000)
    x[[0, 312, 4999]] = [np.inf, np.nan, -np.inf]
    for uf in ("add", "maximum", "minimum"):
        with np.errstate(invalid="ignore"):
            assert np.array_equal(_cpu_scan(x, uf), REF[uf](x), equal_nan=True)
    y = np.arange(12000.0).reshape(40, 300)
    assert np.array_equal(_cpu_scan(y[:, ::3], "add"), np.cumsum(y[:, ::3]))   # flattened
    outs = []
    for k in (1, 2, 3):
        monkeypatch.setattr(config, "num_threads", k)
        monkeypatch.setattr(config, "parallel_min", 1)
        outs.append(_cpu_scan(x[1:312], "add"))
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_accelerated_programs_use_it(rng, monkeypatch):
    monkeypatch.setattr(config, "parallel_min", 2000)
    calls = []
    orig = scan_mod.scan
    monkeypatch.setattr(scan_mod, "scan", lambda *a: calls.append(1) or orig(*a))

    def f(v, ids):
        starts = np.ones(v.shape[0], dtype=bool)
        starts[1:] = ids[1:] != ids[:-1]
        first = np.maximum.accumulate(np.where(starts, np.arange(v.shape[0]), 0))
        c = np.cumsum(v)
        return c, first, np.cumsum(v > 0), np.cumsum(v.reshape(50, -1))

    v = rng.standard_normal(5000)
    ids = np.sort(rng.integers(0, 40, 5000))
    ref = f(v, ids)
    got = numaccel.accelerate(f)(v, ids)
    assert_same(got, ref, rtol=1e-12, atol=1e-10)
    assert len(calls) == 4
    # small arrays and other forms stay NumPy's
    calls.clear()
    assert_same(numaccel.accelerate(lambda a: (np.cumsum(a), np.cumprod(a[:5]),
                                                np.cumsum(a.reshape(50, -1), axis=1)))(v),
                (np.cumsum(v), np.cumprod(v[:5]), np.cumsum(v.reshape(50, -1), axis=1)),
                rtol=1e-12, atol=1e-10)
    assert len(calls) == 1
