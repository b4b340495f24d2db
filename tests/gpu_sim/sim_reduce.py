"""Block reductions, softmax and layer norm under the simulator (or a device) vs NumPy/torch."""
from __future__ import annotations

import numpy as np
import pytest
from _common import BF16, FLOATS, SIZE, assert_close, f32, on_device_only, rand, tol

from numaccel.kernels_gpu import (layer_norm, reduce_argmax, reduce_argmin, reduce_max,
                                  reduce_min, reduce_sum, softmax)

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_sum_and_max_every_axis_and_dtype(dtype, axis):
    rng = np.random.default_rng(0)
    x = rand(rng, (3, 21 * SIZE, 4), dtype)
    got = reduce_sum(x, axis=axis)
    assert got.dtype == np.dtype(dtype)
    # float32 accumulation: compare against the float64 sum with an error bound
    n = x.size if axis is None else x.shape[axis]
    assert_close(got, np.sum(f32(x), axis=axis), dtype, atol=tol(dtype) * np.sqrt(n) * 4)
    np.testing.assert_array_equal(f32(reduce_max(x, axis=axis)), np.max(f32(x), axis=axis))
    np.testing.assert_array_equal(f32(reduce_min(x, axis=axis)), np.min(f32(x), axis=axis))


@pytest.mark.parametrize("axis", [None, 0, 1, 2])
def test_argmax_argmin_first_occurrence_and_nan(axis):
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, size=(4, 9, 3)).astype(np.float32)   # many ties
    x[1, 4, 2] = np.nan
    x[2, 2, 0] = np.nan
    x[2, 6, 0] = np.nan
    for f, ref in ((reduce_argmax, np.argmax), (reduce_argmin, np.argmin)):
        got = f(x, axis=axis)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, ref(x, axis=axis))


def test_nan_propagates_through_max_and_sum():
    x = np.ones((2, 10), np.float32)
    x[1, 7] = np.nan
    np.testing.assert_array_equal(np.isnan(reduce_max(x, axis=1)), [False, True])
    np.testing.assert_array_equal(np.isnan(reduce_sum(x, axis=1)), [False, True])
    np.testing.assert_array_equal(reduce_max(np.array([-np.inf, -np.inf], np.float32)),
                                  np.float32(-np.inf))


def test_keepdims_non_contiguous_and_size_one():
    rng = np.random.default_rng(2)
    base = rand(rng, (5, 8, 6))
    x = base[:, ::2].transpose(2, 0, 1)         # (6, 5, 4), strided
    assert_close(reduce_sum(x, axis=1, keepdims=True), np.sum(x, axis=1, keepdims=True),
                 np.float32)
    np.testing.assert_array_equal(reduce_argmax(x, axis=2), np.argmax(x, axis=2))
    one = rand(rng, (1, 1, 3))
    np.testing.assert_array_equal(reduce_max(one, axis=0), np.max(one, axis=0))


def test_empty_reductions():
    z = np.zeros((3, 0), np.float32)
    np.testing.assert_array_equal(reduce_sum(z, axis=1), np.zeros(3, np.float32))
    assert reduce_sum(z, axis=0).shape == (0,)
    with pytest.raises(ValueError, match="no identity"):
        reduce_max(z, axis=1)
    with pytest.raises(ValueError, match="out of bounds"):
        reduce_sum(z, axis=2)
    with pytest.raises(TypeError, match="float32"):
        reduce_sum(np.ones(3, np.int32))


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_matches_torch(dtype):
    rng = np.random.default_rng(3)
    x = rand(rng, (4, 13 * SIZE), dtype, scale=3.0)
    x[1, :] = -np.inf                               # fully masked row -> NaN like torch
    x[2, 3] = -np.inf
    ref = torch.softmax(torch.tensor(f32(x)), dim=-1).numpy()
    got = softmax(x)
    np.testing.assert_array_equal(np.isnan(f32(got)), np.isnan(ref))
    ok = ~np.isnan(ref)
    assert_close(np.asarray(got)[ok], ref[ok], dtype, rtol_scale=2)


def test_softmax_other_axis_and_3d():
    rng = np.random.default_rng(4)
    x = rand(rng, (3, 5, 4))
    for axis in (0, 1):
        ref = torch.softmax(torch.tensor(x), dim=axis).numpy()
        assert_close(softmax(x, axis=axis), ref, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_matches_torch(dtype, affine):
    rng = np.random.default_rng(5)
    x = rand(rng, (2, 3, 10 * SIZE), dtype, scale=2.0) + 3
    n = x.shape[-1]
    w = rand(rng, (n,), dtype) if affine else None
    b = rand(rng, (n,), dtype) if affine else None
    tw = torch.tensor(f32(w)) if affine else None
    tb = torch.tensor(f32(b)) if affine else None
    ref = torch.nn.functional.layer_norm(torch.tensor(f32(x)), (n,), tw, tb, 1e-5).numpy()
    assert_close(layer_norm(x, w, b), ref, dtype, rtol_scale=4)


def test_layer_norm_errors_and_constant_rows():
    x = np.full((2, 6), 3.0, np.float32)
    np.testing.assert_array_equal(layer_norm(x), np.zeros((2, 6), np.float32))
    with pytest.raises(ValueError, match="weight must have shape"):
        layer_norm(x, np.ones(5, np.float32))


@on_device_only()
def test_large_rows_on_device():
    rng = np.random.default_rng(6)
    x = rand(rng, (64, 100_000))
    assert_close(reduce_sum(x, axis=1), np.sum(f32(x), axis=1), np.float32, atol=5e-3)
    np.testing.assert_array_equal(reduce_argmax(x, axis=0), np.argmax(x, axis=0))
