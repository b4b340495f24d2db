"""Row kernels: softmax/layernorm/logsumexp-like groups as one kernel per row block.

Each case compares with NumPy and checks the plan (a row kernel ran, with the expected
number of reductions), so a silent fallback to separate kernels is caught too."""
import ml_dtypes
import numpy as np
import pytest

import numaccel

from conftest import assert_same

BF16 = ml_dtypes.bfloat16


pytestmark = pytest.mark.usefixtures("step_wrapper")


def rows_of(f):
    d = f.entries[0].run.describe()
    return [line for line in d.splitlines() if line.startswith("kernel[row]")]


def check(fn, *args, reds=None, rtol=2e-5, atol=1e-6, **kw):
    ref = fn(*args)
    f = numaccel.accelerate(fn, **kw)
    for _ in range(2):
        assert_same(f(*args), ref, rtol=rtol, atol=atol)
    lines = rows_of(f)
    if reds is not None:
        assert [int(line.split(": ")[1].split()[0]) for line in lines] == reds, lines
    return f


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + np.float32(1e-5)) * g + b


def logsumexp(x):
    m = x.max(axis=1)
    return m + np.log(np.exp(x - m[:, None]).sum(axis=1))


def entropy(x):
    p = softmax(x)
    return -(p * np.log(p + np.float32(1e-12))).sum(axis=-1), p


@pytest.mark.parametrize("shape", [(64, 33), (3, 2500), (4, 5, 17), (7, 1), (1, 9)])
def test_softmax_layernorm_logsumexp(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32)
    b = rng.standard_normal(shape[-1]).astype(np.float32)
    check(softmax, x, reds=[2])
    check(layernorm, x, g, b, reds=[2])
    check(entropy, x, reds=[3])
    if x.ndim == 2:
        check(logsumexp, x, reds=[2])


def test_non_contiguous_float64_and_parallel_sizes(rng):
    x = rng.standard_normal((700, 800))
    check(softmax, x.T[::2], reds=[2], rtol=1e-12, atol=1e-14)
    check(softmax, x, reds=[2], rtol=1e-12, atol=1e-14)        # 560k elements: parallel
    check(lambda a: a - a.mean(axis=1, keepdims=True), x[:, 1:], reds=[1], rtol=1e-12,
          atol=1e-12)


def test_square_input_row_values_without_keepdims_are_not_per_row(rng):
    # x.max(axis=1) has shape (n,) and broadcasts along the LAST axis of (n, n)
    x = rng.standard_normal((6, 6))
    check(lambda a: a - a.max(axis=1), x, reds=[1])
    check(lambda a: (a - a.max(axis=1, keepdims=True), a.sum(axis=1) * 2), x, reds=[1, 1])


def test_row_values_read_outside_the_group(rng):
    x = rng.standard_normal((5, 40)).astype(np.float32)
    check(lambda a: (softmax(a), a.max(axis=-1, keepdims=True)), x)
    check(lambda a: np.cumsum(a.sum(axis=1)) + softmax(a)[:, 0], x)
    check(lambda a: softmax(a) @ a.T, x)


def test_dtypes_nan_and_empty_rows(rng):
    xb = rng.standard_normal((8, 20)).astype(BF16)
    check(lambda a: softmax(a.astype(np.float32)).astype(BF16), xb, reds=[2], rtol=2e-2,
          atol=1e-2)
    xi = rng.integers(-50, 50, (6, 9)).astype(np.int32)
    check(lambda a: (a.sum(axis=1), a.max(axis=1, keepdims=True) - a), xi, reds=[1, 1])
    check(lambda a: (a > 0).any(axis=1) & (a < 40).all(axis=1), xi)
    xn = rng.standard_normal((4, 30))
    xn[1, 7] = np.nan
    xn[2, :] = np.inf
    check(softmax, xn, reds=[2], rtol=1e-12)
    check(lambda a: a.min(axis=1) + a.max(axis=1), xn)
    check(lambda a: (a.sum(axis=1, keepdims=True) + a, a.mean(axis=1)), np.zeros((3, 0)))
    f = numaccel.accelerate(softmax)
    with pytest.raises(ValueError):
        f(np.zeros((3, 0)))


def test_dynamic_shapes_reuse_one_row_kernel(rng):
    f = numaccel.accelerate(softmax, dynamic=True)
    for n in (5, 9, 33):
        x = rng.standard_normal((n, n + 3)).astype(np.float32)
        np.testing.assert_allclose(f(x), softmax(x), rtol=2e-5, atol=1e-7)
    assert f.cache_info().compiles == 1
    assert len(rows_of(f)) == 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inf_at_the_start_of_a_tile(dtype):
    # a tile reduction once started from t[0] - t[0]: NaN for a row (or a tile of a long
    # row) beginning with +-inf instead of NumPy's +-inf
    x = np.random.default_rng(5).standard_normal((6, 2100)).astype(dtype)
    x[1, 0], x[2, 0], x[3, 1024], x[4, 0], x[4, 1] = np.inf, -np.inf, np.inf, np.inf, -np.inf
    check(lambda x: (x * 2).sum(axis=1, keepdims=True) + x, x, reds=[1])
    check(lambda x: np.abs(x).prod(axis=-1, keepdims=True) * x, np.clip(x, -1.001, 1.001),
          reds=[1], rtol=1e-4)
