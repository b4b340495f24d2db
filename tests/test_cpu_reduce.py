"""Reductions over leading axes (column kernels) and the var/std decomposition give
NumPy's results on the cpu backend."""
import numpy as np
import pytest

import numaccel
from numaccel.lower.passes import decompose

from conftest import BF16, check_np, cpu


pytestmark = pytest.mark.usefixtures("step_wrapper")


def steps_of(acc):
    return acc.entries[-1].run.steps


def column_kernels(acc):
    return [s for s in steps_of(acc) if type(s).__name__ == "ReduceStep" and
            any(key[1] == "col" for key in s.mods)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool",
                                   "float16", BF16])
@pytest.mark.parametrize("name", ["sum", "max", "min", "mean", "prod", "any", "all"])
def test_leading_axis_reductions_run_as_column_kernels(name, dtype, rng):
    x = rng.standard_normal((37, 5, 19)) * 3
    if name == "prod":
        x = np.abs(x) / 12 + 0.8          # products of 37 stay in float16's range
    x = x.astype(dtype)
    fn = getattr(np, name)
    # bfloat16 reductions run as NumPy calls (not fused yet): only the values are checked
    kernel = column_kernels if dtype != BF16 else (lambda acc: True)
    if name in ("sum", "prod", "mean") and dtype == "float16":
        # NumPy adds float16/bfloat16 rows in the narrow dtype, one rounding per row;
        # numaccel accumulates in float64 and rounds once: compare with the exact result
        acc = numaccel.accelerate(lambda x: fn(x, axis=0), backend="cpu")
        got = acc(x)
        exact = fn(x.astype(np.float64), axis=0)
        assert got.dtype == fn(x, axis=0).dtype and got.shape == exact.shape
        np.testing.assert_allclose(got.astype(np.float64), exact, rtol=1e-2, atol=1e-2)
        assert column_kernels(acc)
        return
    for axis in (0, (0, 1)):
        acc = cpu(lambda x: fn(x, axis=axis), x, calls=1)
        assert kernel(acc), f"{name} axis={axis}: no column kernel ran"
        cpu(lambda x: fn(x, axis=axis, keepdims=True), x, calls=1)
    # a fused producer, a broadcast operand (stride 0 along the reduced axis) and a scalar
    y = (rng.standard_normal(19) * 3).astype(dtype)
    acc = cpu(lambda x, y: fn(x * y + 1, axis=0), x, y, calls=1)
    assert kernel(acc)


def test_column_reductions_of_views_nan_and_edge_shapes(rng):
    x = rng.standard_normal((50, 40))
    x[3, 7] = np.nan
    x[10, 8] = np.inf
    cpu(lambda x: (x.max(axis=0), x.min(axis=0), x.sum(axis=0)), x)
    cpu(lambda x: x[::3, 1::2].sum(axis=0), x)          # strided rows and columns
    cpu(lambda x: x.T.sum(axis=0), x)                   # reduce the contiguous axis
    cpu(lambda x: x.sum(axis=0), rng.standard_normal((1, 7)))
    cpu(lambda x: x.mean(axis=0), rng.standard_normal((9, 1)))
    cpu(lambda x: (x.sum(axis=0), x.mean(axis=0)), np.zeros((0, 4)))
    cpu(lambda x: x.sum(axis=0), np.zeros((4, 0)))
    f = numaccel.accelerate(lambda x: x.max(axis=0), backend="cpu")
    with pytest.raises(ValueError, match="zero-size"):
        f(np.zeros((0, 3)))


def test_large_column_reductions_split_in_fixed_chunks(rng, monkeypatch):
    # above the parallel threshold dim 0 is cut into chunks whose partials are combined
    # in order: results equal NumPy's and repeat bit for bit
    monkeypatch.setattr(numaccel.config, "parallel_min", 1 << 10)
    x = rng.standard_normal((1001, 37)).astype(np.float32)
    acc = cpu(lambda x: (x.sum(axis=0), x.max(axis=0), (x * x).mean(axis=0)), x,
              calls=3, rtol=1e-4, atol=1e-4)   # NumPy sums float32 rows in float32
    assert column_kernels(acc)
    a = acc(x)
    for threads in (1, 3):
        # the chunks, not the threads running them, fix the order of the sums
        monkeypatch.setattr(numaccel.config, "num_threads", threads)
        for u, v in zip(a, acc(x)):
            assert np.array_equal(u, v)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_var_std_decompose_into_fused_reductions(dtype, rng):
    x = rng.standard_normal((23, 6, 5)).astype(dtype) * 4 + 10

    def f(x):
        return (x.var(), x.std(axis=0), np.var(x, axis=(0, 2), keepdims=True),
                x.std(axis=1, ddof=1), np.var(x, axis=-1, ddof=2, keepdims=True),
                (x - x.mean(axis=0)) / x.std(axis=0))
    acc = cpu(f, x, rtol=2e-5 if dtype == "float32" else 1e-12)
    assert not [s for s in steps_of(acc) if type(s).__name__ == "NumpyStep" and
                s.n.op in ("var", "std")], "var/std ran as NumPy calls"


def test_var_std_edge_cases(rng):
    with np.errstate(all="ignore"):
        cpu(lambda x: (x.var(axis=0), x.std(ddof=1)), np.array([[np.nan, 1.0], [2.0, 3.0]]))
        cpu(lambda x: (x.var(axis=0), x.std()), np.zeros((0, 3)))      # nan, as NumPy
        cpu(lambda x: (x.var(ddof=1), x.std(axis=1, ddof=5)), rng.standard_normal((1, 4)))
        cpu(lambda x: x.std(axis=0), np.full((5, 3), np.inf))
    # not decomposed (other accumulation dtypes, complex |d|^2, dtype=): still right
    cpu(lambda x: (x.var(axis=0), x.std()), rng.integers(0, 9, (6, 4)))
    cpu(lambda x: x.var(axis=0), rng.standard_normal((6, 4)).astype(np.float16), rtol=1e-3)
    cpu(lambda x: x.std(axis=0), rng.standard_normal((6, 4)) + 1j)
    cpu(lambda x: x.var(axis=0, dtype=np.float64), rng.standard_normal((6, 4)).astype("f4"))


def test_decompose_leaves_other_graphs_alone():
    from numaccel.graph import Graph
    from numaccel.ir import AVal
    g = Graph()
    x = g.add("input", [], {"index": 0}, AVal((3,), np.float64))
    g.outputs = [g.add("negative", [x.id], {}, AVal((3,), np.float64)).id]
    assert decompose(g) is g


def test_var_shares_the_callers_mean(rng):
    # (x - x.mean(0)) / x.std(0): the decomposed std reuses the caller's mean (CSE), so
    # two mean passes run (the mean, the mean of squares), not three
    acc = cpu(lambda x: (x - x.mean(axis=0)) / x.std(axis=0), rng.standard_normal((30, 7)))
    means = [s for s in steps_of(acc) if type(s).__name__ == "ReduceStep" and
             s.node.op == "mean"]
    assert len(means) == 2
    acc = cpu(lambda x: (x.mean(), x.var()), rng.standard_normal((30, 7)))
    assert len([s for s in steps_of(acc) if type(s).__name__ == "ReduceStep"]) == 2


def blocked_kernels(acc):
    """Generated sources of the reduce steps that fold their last axis in blocks."""
    return [src for s in steps_of(acc) if type(s).__name__ == "ReduceStep"
            for src in s.sources if "lanes" in src]


@pytest.mark.parametrize("n", [0, 1, 17, 255, 257, 9000])
@pytest.mark.parametrize("name", ["sum", "max", "min", "mean", "prod", "any", "all"])
def test_reductions_fold_their_last_axis_in_blocks(name, n, rng):
    # the reduce kernel runs its elementwise producer as a vectorizable block loop and
    # folds each block into lane accumulators: cross every block/lane boundary
    x = rng.standard_normal((3, n))
    if name in ("max", "min") and n > 3:
        x[1, n // 2] = np.nan            # NaN propagates from any lane
        x[2, n - 1] = np.inf
    if name == "prod":
        x = 1 + x / 50                   # products of 1000 stay finite
    fn = getattr(np, name)
    if name in ("max", "min") and n == 0:
        return                           # NumPy raises (tested elsewhere)
    acc = cpu(lambda x: fn(np.log1p(np.abs(x)) + x), x, calls=1)
    if n > 1:
        assert blocked_kernels(acc), "the reduction did not run in blocks"
    cpu(lambda x: fn(np.exp(-x * x)), x.ravel(), calls=1)               # 1-D
    cpu(lambda x: fn(x[:, ::2] * 2), x, calls=1)                        # strided view
    cpu(lambda x: fn(np.exp(x[None] + x[:, None]), axis=(1, 2)), x[:, :40], calls=1)
    cpu(lambda x: fn((x > 0.1) & (x < 2)), x, calls=1)                  # bool producer
    xi = (x * 10).astype(np.int32)
    cpu(lambda x: fn(x * 3 - 1), xi, calls=1)                           # exact integers

