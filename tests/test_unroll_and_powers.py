"""Reductions over a short static axis unrolled into elementwise ops (lower/unroll.py),
and the literal powers computed through sqrt and divisions (cpu_codegen._small_power)."""
import numpy as np
import pytest

import numaccel
from numaccel.lower.unroll import MAX_LEN

from conftest import assert_same, cpu, kernels_of


pytestmark = pytest.mark.usefixtures("step_wrapper")


def step_kinds(acc):
    return [type(s).__name__ for s in kernels_of(acc).steps]


def special(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    vals = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30]
    flat[:len(vals) * 5:5] = np.array(vals, dtype=dtype)[:len(flat[:len(vals) * 5:5])]
    return x


# ------------------------------------------------------------------------------ unroll

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("red", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("k", range(2, MAX_LEN + 1))
def test_short_last_axis_reductions_equal_numpy(red, k, dtype, rng):
    x = special(rng, (7, 9, k), dtype)
    acc = cpu(lambda x: getattr(np, red)(x * 2.0 - 1.0, axis=-1), x)
    # unrolled: one map kernel (reading views of x), no reduction step
    kinds = step_kinds(acc)
    assert kinds.count("MapStep") == 1 and not {"ReduceStep", "RowStep"} & set(kinds), kinds


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_any_axis_and_keepdims(axis, keepdims, rng):
    x = rng.standard_normal((3, 4, 3, 5))
    x = x[:, :, :, ::2]                         # a non-contiguous view: (3, 4, 3, 3)
    cpu(lambda x: np.sqrt(np.abs(x)).sum(axis=axis, keepdims=keepdims) + 1.0, x)
    cpu(lambda x: x.mean(axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "int64"])
def test_integer_max_and_min_unroll_and_sums_keep_numpys_wider_type(dtype, rng):
    x = rng.integers(0, 100, (6, 5, 3)).astype(dtype)
    acc = cpu(lambda x: np.maximum(x.max(axis=2), x.min(axis=2)), x)
    assert "ReduceStep" not in step_kinds(acc) and "RowStep" not in step_kinds(acc)
    cpu(lambda x: x.sum(axis=2), x)              # int8 sums to int64: not unrolled
    cpu(lambda x: x.mean(axis=1), x)


def test_broadcast_producer_pairwise_distances(rng):
    """The n-body pattern: a (n, n, 3) difference of broadcast views, squared and summed
    over the short axis, then used again. Nothing of shape (n, n, 3) is stored."""
    pos = rng.standard_normal((40, 3))
    mass = rng.uniform(0.5, 1.5, 40)

    def accel(pos, mass):
        d = pos[np.newaxis, :, :] - pos[:, np.newaxis, :]
        r2 = (d ** 2).sum(axis=-1) + 0.01
        inv_r3 = r2 ** -1.5
        return (d * (mass[np.newaxis, :] * inv_r3)[:, :, np.newaxis]).sum(axis=1)

    acc = cpu(accel, pos, mass, rtol=1e-12, atol=1e-12)
    kinds = step_kinds(acc)
    assert "RowStep" not in kinds, kinds


def test_size_one_and_empty_other_dims(rng):
    cpu(lambda x: x.sum(axis=-1), rng.standard_normal((1, 1, 3)))
    cpu(lambda x: x.max(axis=0), rng.standard_normal((2, 1)))
    cpu(lambda x: (x * 2.0).sum(axis=-1), np.zeros((0, 4)))
    cpu(lambda x: x.mean(axis=1), np.zeros((5, 3, 0), np.float32))


def test_long_or_symbolic_axes_stay_reductions(rng):
    x = rng.standard_normal((6, MAX_LEN + 1))
    acc = cpu(lambda x: (x * 2.0).sum(axis=-1), x)
    assert {"ReduceStep", "RowStep"} & set(step_kinds(acc))
    f = numaccel.accelerate(lambda x: (x * 2.0).sum(axis=-1), dynamic=True)
    for n in (3, 4):
        y = rng.standard_normal((5, n))
        assert_same(f(y), (y * 2.0).sum(axis=-1))


# ------------------------------------------------------------------------------ powers

def _power_inputs(dtype):
    fi = np.finfo(dtype)
    rng = np.random.default_rng(7)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -2.5, 1.0, 2.0, fi.tiny, fi.tiny / 8,
            fi.max, fi.max / 3, fi.eps, 1 / fi.eps]
    logs = rng.uniform(np.log(float(fi.tiny)) / 1.1, np.log(float(fi.max)) / 1.1, 4000)
    return np.concatenate([np.array(vals, dtype), np.exp(logs).astype(dtype)])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("e", [1.5, -0.5, -1.5, -2, 2, 3, 0.5, -1])
def test_literal_powers_equal_numpy(e, dtype):
    x = _power_inputs(dtype)
    ref = np.power(x, e)
    f = numaccel.accelerate(lambda x: x ** e, backend="cpu")
    with np.errstate(all="ignore"):
        got = f(x)
    assert got.dtype == ref.dtype
    # the same special values (NaN, +-inf, zeros with their sign) ...
    same_class = (np.isnan(got) == np.isnan(ref)) & (np.isinf(got) == np.isinf(ref))
    assert same_class.all(), (x[~same_class], got[~same_class], ref[~same_class])
    fin = np.isfinite(ref)
    assert (np.signbit(got) == np.signbit(ref))[~np.isnan(ref)].all()
    assert (got[np.isinf(ref)] == ref[np.isinf(ref)]).all()
    # ... and within 2 ulp elsewhere (results NumPy itself gets to <= 0.5-1 ulp)
    ulp = np.spacing(np.abs(ref[fin]).astype(dtype))
    err = np.abs(got[fin].astype(np.float64) - ref[fin].astype(np.float64))
    assert (err <= 2 * ulp.astype(np.float64)).all(), err.max()


def test_symbolic_leading_dim_with_a_short_static_axis(rng):
    def f(x, c):
        return ((x - c[np.newaxis, :]) ** 2).sum(axis=-1) + x.max(axis=1)

    acc = numaccel.accelerate(f, backend="cpu")
    c = rng.standard_normal(3)
    for n in (5, 9, 17):
        x = rng.standard_normal((n, 3))
        numaccel.mark_dynamic(x, 0)
        assert_same(acc(x, c), f(x, c))
    assert acc.cache_info().compiles == 1        # one graph, symbolic in dim 0
    kinds = step_kinds(acc)
    assert not {"ReduceStep", "RowStep"} & set(kinds), kinds
