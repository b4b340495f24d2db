"""The parallel scans (kernels_cpu/scan.py) behind np.cumsum and
np.maximum/minimum.accumulate on the cpu backend: NumPy's results and dtypes, exact for
integers and max/min, NaN propagated, independent of the thread count; along the last
axis, row by row in NumPy's order (bit-identical)."""
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
    # small arrays and other forms stay NumPy's (axis=1: the row scan, tested below)
    calls.clear()
    assert_same(numaccel.accelerate(lambda a: (np.cumsum(a), np.cumprod(a[:5]),
                                                np.cumsum(a.reshape(50, -1), axis=1)))(v),
                (np.cumsum(v), np.cumprod(v[:5]), np.cumsum(v.reshape(50, -1), axis=1)),
                rtol=1e-12, atol=1e-10)
    assert len(calls) == 1


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("ufunc", ["add", "maximum", "minimum"])
@pytest.mark.parametrize("shape", [(9, 1), (7, 13), (4, 3, 50), (1, 300), (0, 5), (6, 0)])
def test_last_axis_rows_are_numpys_bit_for_bit(rng, monkeypatch, dtype, ufunc, shape):
    monkeypatch.setattr(config, "parallel_min", 1)
    x = data(rng, int(np.prod(shape)), dtype).reshape(shape)
    for axis in (-1, len(shape) - 1):
        ref = REF[ufunc](x, axis=axis)
        got = _cpu_scan(x, ufunc, axis=axis)
        assert got.dtype == ref.dtype and got.shape == ref.shape
        assert np.array_equal(got, ref)     # each row in NumPy's order: exact, floats too


def test_last_axis_nan_threads_and_what_stays_numpys(rng, monkeypatch):
    from numaccel.backends import find_kernel
    monkeypatch.setattr(config, "parallel_min", 1)
    x = rng.standard_normal((37, 41))
    x[3, 0], x[5, 40], x[30, 7] = np.nan, np.inf, -np.inf
    for uf in ("add", "maximum", "minimum"):
        with np.errstate(invalid="ignore"):
            assert np.array_equal(_cpu_scan(x, uf, axis=1), REF[uf](x, axis=1),
                                  equal_nan=True)
    outs = []
    for k in (1, 2, 3):
        monkeypatch.setattr(config, "num_threads", k)
        outs.append(_cpu_scan(x, "add", axis=1))
    assert all(np.array_equal(outs[0], o, equal_nan=True) for o in outs[1:])
    # another axis or a strided array: NumPy's own cumsum
    assert find_kernel("scan", "cpu", x, "add", axis=0) is None
    assert find_kernel("scan", "cpu", x[:, ::2], "add", axis=1) is None
    assert find_kernel("scan", "cpu", x, "add", axis=1) is not None


def test_accelerated_row_scans_use_the_kernel(rng, monkeypatch):
    monkeypatch.setattr(config, "parallel_min", 2000)
    calls = []
    orig = scan_mod.scan_last_axis
    monkeypatch.setattr(scan_mod, "scan_last_axis", lambda *a: calls.append(1) or orig(*a))

    def paths(z, drift, vol):     # mc_asian_option's shape of program
        log_s = np.log(100.0) + np.cumsum(drift + vol * z, axis=1)
        return np.exp(log_s).mean(axis=1), np.maximum.accumulate(z, axis=-1)

    z = rng.standard_normal((200, 63))
    ref = paths(z, 0.01, 0.2)
    got = numaccel.accelerate(paths)(z, 0.01, 0.2)
    assert_same(got, ref, rtol=1e-13, atol=1e-13)
    assert len(calls) == 2
