"""Elementwise template under the CUDA simulator (or a real device), against NumPy."""
from __future__ import annotations

import math

import numpy as np
import pytest
from _common import BF16, FLOATS, SIZE, assert_close, f32, on_device_only, rand
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

from numaccel.kernels_gpu import copy, elementwise

CHAIN = elementwise("def chain(x, y):\n    return math.exp(-x) * 0.5 + x * y")


def chain_ref(x, y):
    return np.exp(-f32(x)) * 0.5 + f32(x) * f32(y)


@pytest.mark.parametrize("dtype", FLOATS)
def test_chain_broadcast_every_dtype(dtype):
    rng = np.random.default_rng(1)
    x = rand(rng, (3, 5 * SIZE), dtype)
    y = rand(rng, (5 * SIZE,), dtype)
    assert_close(CHAIN(x, y), chain_ref(x, y), dtype)


def test_three_d_broadcast_and_mixed_dtypes_promote_like_numpy():
    rng = np.random.default_rng(2)
    x = rand(rng, (2, 1, 4), np.float16)
    y = rand(rng, (3, 1), np.float32)
    got = CHAIN(x, y)
    assert got.shape == (2, 3, 4) and got.dtype == np.float32
    assert_close(got, chain_ref(x, y), np.float32, rtol_scale=10)


def test_non_contiguous_and_fortran_views():
    rng = np.random.default_rng(3)
    base = rand(rng, (6, 8))
    x = base[::2, 1::3]            # strided
    y = np.asfortranarray(rand(rng, x.shape))
    assert_close(CHAIN(x, y), chain_ref(x, y), np.float32)
    assert_close(CHAIN(base.T, 1.0), chain_ref(base.T, 1.0), np.float32)


def test_device_function_and_plain_function_forms():
    @cuda.jit(device=True)
    def fma(a, b, c):
        return a * b + c

    def hyp(a, b):
        return math.sqrt(a * a + b * b)

    rng = np.random.default_rng(4)
    a, b, c = (rand(rng, (7,)) for _ in range(3))
    assert_close(elementwise(fma)(a, b, c), f32(a) * f32(b) + f32(c), np.float32)
    assert_close(elementwise(hyp)(a, b), np.hypot(f32(a), f32(b)), np.float32)


def test_weak_python_scalars_keep_the_array_dtype():
    axpb = elementwise("def axpb(x, a, b):\n    return a * x + b")
    x = np.linspace(-1, 1, 9).astype(np.float16)
    got = axpb(x, 2.0, 1)
    assert got.dtype == np.float16
    assert_close(got, 2.0 * f32(x) + 1, np.float16)
    xb = x.astype(BF16)
    assert axpb(xb, 2.0, 1).dtype == BF16


def test_empty_size_one_and_zero_d():
    assert CHAIN(np.zeros((0, 3), np.float32), np.ones(3, np.float32)).shape == (0, 3)
    x = np.full((1, 1), 0.5, np.float32)
    assert_close(CHAIN(x, np.float32(2.0)), chain_ref(x, 2.0), np.float32)
    z = CHAIN(np.array(0.25, np.float32), np.array(4.0, np.float32))
    assert z.shape == () and abs(float(z) - (math.exp(-0.25) * 0.5 + 1.0)) < 1e-6


def test_nan_and_inf_propagate():
    x = np.array([np.nan, np.inf, -np.inf, 0.0], np.float32)
    y = np.array([1.0, 0.0, 1.0, np.inf], np.float32)
    with np.errstate(all="ignore"):
        ref = chain_ref(x, y)
    with np.errstate(all="ignore"):      # the simulator computes with NumPy scalars
        got = CHAIN(x, y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = ~np.isnan(ref)
    np.testing.assert_array_equal(got[fin], ref[fin].astype(np.float32))


def test_integer_inputs_and_out_argument():
    relu = elementwise("def relu(x):\n    return x if x > 0 else 0")
    x = np.arange(-5, 7, dtype=np.int32).reshape(3, 4)
    got = relu(x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.maximum(x, 0))
    out = cuda.device_array((3, 4), np.float32)
    assert relu(x, out=out, out_dtype=np.float32) is out
    np.testing.assert_array_equal(out.copy_to_host(), np.maximum(x, 0).astype(np.float32))


def test_device_inputs_give_device_results():
    x = cuda.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
    got = CHAIN(x, 1.0)
    assert not isinstance(got, np.ndarray)
    np.testing.assert_allclose(got.copy_to_host(), chain_ref(x.copy_to_host(), 1.0), rtol=2e-6)


def test_copy_makes_strided_views_contiguous_and_converts():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 0, 1)[::2]
    np.testing.assert_array_equal(copy(x), x)
    np.testing.assert_array_equal(copy(x, out_dtype=np.float16), x.astype(np.float16))
    xb = x.astype(BF16)
    np.testing.assert_array_equal(copy(xb).view(np.uint16), xb.view(np.uint16))


def test_bad_broadcast_and_source_errors():
    with pytest.raises(ValueError, match="do not broadcast"):
        CHAIN(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(ValueError, match="exactly one function"):
        elementwise("x = 1")


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.data())
def test_broadcasting_matches_numpy_for_random_shapes(shape, data):
    other = [d if data.draw(st.booleans()) else 1 for d in shape]
    other = other[data.draw(st.integers(0, len(other) - 1)):]
    rng = np.random.default_rng(len(shape))
    x, y = rand(rng, shape), rand(rng, other)
    assert_close(CHAIN(x, y), chain_ref(x, y), np.float32)


@on_device_only()
def test_cupy_inputs_zero_copy_and_large_grid():
    cp = pytest.importorskip("cupy")
    x = cp.random.standard_normal(1 << 22, dtype=cp.float32)
    y = cp.random.standard_normal(1 << 22, dtype=cp.float32)
    got = CHAIN(x, y)
    assert isinstance(got, cp.ndarray)
    ref = cp.exp(-x) * 0.5 + x * y
    assert float(cp.abs(got - ref).max()) < 1e-5


def test_bf16_rounding_is_bit_identical_to_ml_dtypes():
    bits = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
                     0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7F8000, 0x7F7FFFFF], np.uint32)
    x = np.concatenate([bits.view(np.float32),
                        np.random.default_rng(9).standard_normal(40).astype(np.float32)])
    got = copy(x, out_dtype=BF16)
    np.testing.assert_array_equal(got.view(np.uint16), x.astype(BF16).view(np.uint16))
    np.testing.assert_array_equal(copy(got, out_dtype=np.float32), x.astype(BF16).astype(
        np.float32))
