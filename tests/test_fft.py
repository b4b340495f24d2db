"""np.fft traced as ``fft`` ops (ops/fft.py, trace/np_fft.py): NumPy's values, dtypes and
shapes, one graph (no break), NumPy's errors for what is not traced, and the threaded
CPU kernel bit-identical to NumPy."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numaccel
from numaccel.config import config
from numaccel.ops.fft import _cpu_fft

from conftest import assert_same

F = np.fft
DTYPES = [np.float32, np.float64, np.complex64, np.complex128, np.int32, np.bool_]


def tol(*arrays):
    single = any(np.asarray(a).dtype in (np.float32, np.complex64) for a in arrays)
    return dict(rtol=2e-5, atol=2e-5) if single else dict(rtol=1e-12, atol=1e-10)


def run(fn, *args, graphs=1):
    ref = fn(*args)
    f = numaccel.accelerate(fn)
    for _ in range(2):
        assert_same(f(*args), ref, **tol(ref if not isinstance(ref, tuple) else ref[0]))
    e = f.entries[0]
    assert e.kind == "graph", (e.kind, getattr(e, "reason", ""))
    return f


def data(rng, shape, dtype):
    x = rng.standard_normal(shape) * 3
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_dimensional_transforms(rng, dtype):
    x = data(rng, (6, 10), dtype)
    run(lambda a: (F.fft(a), F.ifft(a, axis=0), F.fft(a, n=7), F.ifft(a, n=13, norm="ortho")),
        x)
    if np.dtype(dtype).kind != "c":
        run(lambda a: (F.rfft(a), F.rfft(a, n=9, axis=0, norm="forward"),
                       F.irfft(F.rfft(a)), F.irfft(a, n=11, axis=0)), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, np.int64])
def test_multi_dimensional_transforms(rng, dtype):
    x = data(rng, (4, 6, 8), dtype)
    run(lambda a: (F.fft2(a), F.ifft2(a, s=(5, 9)), F.fftn(a), F.ifftn(a, axes=(0, 2)),
                   F.fftn(a, s=(3, -1), axes=(2, 0), norm="ortho")), x)
    if np.dtype(dtype).kind != "c":
        run(lambda a: (F.rfft2(a), F.rfftn(a, axes=(0, 1)), F.irfft2(F.rfft2(a)),
                       F.irfftn(F.rfftn(a), s=(4, 6, 8), axes=(0, 1, 2)), F.irfftn(a, axes=(1,)),
                       F.rfftn(a, s=(2, 5), axes=(1, 0), norm="forward")), x)


def test_shifts_views_and_fusion_around(rng):
    x = data(rng, (9, 12), np.float64)

    def lowpass(img, sigma):
        G = F.fftshift(F.fft2(img))
        ky, kx = np.arange(-4, 5)[:, None], np.arange(-6, 6)[None, :]
        G = G * np.exp(-(kx ** 2 + ky ** 2) / (2 * sigma ** 2))
        return F.ifft2(F.ifftshift(G)).real, np.abs(G) ** 2

    run(lowpass, x, 2.0)
    run(lambda a: (F.fft(a[::2, ::-1]), F.rfft2(a.T), F.fftshift(a, axes=1),
                   F.ifftshift(a, axes=(0,))), np.asfortranarray(x))


def test_empty_size_one_nan_inf(rng):
    run(lambda a: F.fft(a, axis=1), np.zeros((0, 8)))
    run(lambda a: (F.rfft(a), F.fft2(a)), np.ones((1, 1)))
    x = data(rng, (4, 8), np.float64)
    x[1, 2], x[2, 5] = np.nan, np.inf
    with np.errstate(invalid="ignore"):
        run(lambda a: (F.fft(a), F.irfft(F.rfft(a))), x)


def test_what_is_not_traced_breaks_and_raises_as_numpy(rng):
    x = data(rng, (4, 8), np.float64)
    for fn in (lambda a: F.fft(a, n=0), lambda a: F.rfft(a.astype(np.complex128)),
               lambda a: F.fft(a, axis=2), lambda a: F.fft2(a, axes=(0, 5)),
               lambda a: F.fft(a, norm="bad"), lambda a: F.irfft(a[:, :1])):
        with pytest.raises(Exception) as want:
            fn(x)
        with pytest.raises(want.type):
            numaccel.accelerate(fn)(x)
    # float16 and out= are NumPy's (a graph break), with NumPy's results
    f = numaccel.accelerate(lambda a: F.rfft(a) * 2)
    h = x.astype(np.float16)
    assert_same(f(h), F.rfft(h) * 2, rtol=2e-3, atol=2e-3)

    def with_out(a):
        o = np.empty((4, 8), np.complex128)
        F.fft(a, out=o)
        return o * 2
    assert_same(numaccel.accelerate(with_out)(x), with_out(x))


@pytest.mark.parametrize("shape,axis", [((64, 33), 1), ((40, 64), 0), ((3, 30, 16), 2),
                                        ((5, 2, 24), 0)])
def test_threaded_kernel_is_bit_identical(rng, monkeypatch, shape, axis):
    monkeypatch.setattr(config, "parallel_min", 1)
    monkeypatch.setattr(config, "num_threads", 3)
    x = data(rng, shape, np.float64)
    c = data(rng, shape, np.complex64)
    for a, kind, inv, n in ((x, "r2c", False, shape[axis]), (c, "c2c", False, 17),
                            (c, "c2c", True, shape[axis]), (c, "c2r", True, 10)):
        got = _cpu_fft(a, kind, inv, n, axis, "ortho")
        fn = {("r2c", False): F.rfft, ("c2c", False): F.fft, ("c2c", True): F.ifft,
              ("c2r", True): F.irfft}[kind, inv]
        ref = fn(a, n=n, axis=axis, norm="ortho")
        assert got.dtype == ref.dtype and np.array_equal(got, ref)


def test_large_program_uses_the_threaded_kernel(rng, monkeypatch):
    monkeypatch.setattr(config, "parallel_min", 1000)
    img = data(rng, (96, 80), np.float64)
    f = run(lambda a: F.irfft2(F.rfft2(a) * 0.5, s=a.shape), img)
    assert "numpy" in f.entries[0].run.describe()        # opaque: a NumPy-kind step


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=3),
       n=st.one_of(st.none(), st.integers(1, 9)), axis=st.integers(-3, 2),
       norm=st.sampled_from([None, "backward", "ortho", "forward"]),
       cplx=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_hypothesis_against_numpy(shape, n, axis, norm, cplx, seed):
    rng = np.random.default_rng(seed)
    x = data(rng, tuple(shape), np.complex128 if cplx else np.float64)
    if not -len(shape) <= axis < len(shape):
        axis = -1
    fns = [lambda a: F.fft(a, n, axis, norm), lambda a: F.ifft(a, n, axis, norm),
           lambda a: F.irfft(a, n, axis, norm) if n or a.shape[axis] > 1 else a]
    if not cplx:
        fns.append(lambda a: F.rfft(a, n, axis, norm))
    for fn in fns:
        run(fn, x)
