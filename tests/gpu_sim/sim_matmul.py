"""Tiled matmul with epilogue under the simulator (or a device), against torch / NumPy."""
from __future__ import annotations

import numpy as np
import pytest
from _common import BF16, SIZE, assert_close, f32, on_device_only, rand
from numba import cuda

from numaccel.kernels_gpu import ACTIVATIONS, last_dispatch, matmul

torch = pytest.importorskip("torch")
F = torch.nn.functional
TORCH_ACT = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu,
             "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
             "sigmoid": torch.sigmoid, "tanh": torch.tanh}


@pytest.mark.parametrize("act", [a for a in ACTIVATIONS if a != "none"])
def test_every_activation_with_bias(act):
    rng = np.random.default_rng(0)
    a, b = rand(rng, (9, 13)), rand(rng, (13, 11))
    bias = rand(rng, (11,))
    ref = TORCH_ACT[act](torch.tensor(a) @ torch.tensor(b) + torch.tensor(bias)).numpy()
    assert_close(matmul(a, b, bias, act), ref, np.float32, rtol_scale=5)
    assert last_dispatch() == "numba"


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64])
@pytest.mark.parametrize("trans_b", [False, True])
def test_dtypes_trans_b_and_batch_dims(dtype, trans_b):
    rng = np.random.default_rng(1)
    a = rand(rng, (2, 5, 17 * SIZE), dtype)
    w = rand(rng, (7, 17 * SIZE), dtype)               # (N, K): a Linear weight
    b = w if trans_b else np.ascontiguousarray(w.T)
    got = matmul(a, b, trans_b=trans_b)
    assert got.shape == (2, 5, 7)
    ref = f32(a) @ f32(w).T
    assert_close(got, ref, dtype, rtol_scale=4, atol=float(np.abs(ref).max()) * 4e-6
                 if dtype in (np.float32, np.float64) else None)


def test_shapes_off_the_tile_grid_non_contiguous_and_degenerate():
    rng = np.random.default_rng(2)
    a = rand(rng, (20, 9)).T                              # (9, 20), not contiguous
    b = rand(rng, (20, 3))
    assert_close(matmul(a, b), f32(a) @ f32(b), np.float32, rtol_scale=5)
    v = rand(rng, (1, 20))
    assert_close(matmul(v, b), f32(v) @ f32(b), np.float32, rtol_scale=5)
    assert matmul(np.zeros((0, 4), np.float32), np.ones((4, 5), np.float32)).shape == (0, 5)
    bias = np.arange(5, dtype=np.float32)
    got = matmul(np.zeros((3, 0), np.float32), np.zeros((0, 5), np.float32), bias, "relu")
    np.testing.assert_array_equal(got, np.broadcast_to(bias, (3, 5)))


def test_nan_inf_propagate_and_out_dtype():
    a = np.array([[1.0, np.nan], [np.inf, 1.0]], np.float32)
    b = np.eye(2, dtype=np.float32)
    got = matmul(a, b, out_dtype=np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(np.isnan(got), np.isnan(a @ b))
    assert np.isinf(got[1, 0])


def test_device_arrays_in_and_out():
    rng = np.random.default_rng(3)
    a, b = rand(rng, (6, 4)), rand(rng, (4, 5))
    got = matmul(cuda.to_device(a), cuda.to_device(b))
    assert not isinstance(got, np.ndarray)
    assert_close(got.copy_to_host(), a @ b, np.float32, rtol_scale=5)


def test_errors():
    with pytest.raises(ValueError, match="inner dims"):
        matmul(np.ones((2, 3), np.float32), np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="unknown activation"):
        matmul(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32), activation="elu")
    with pytest.raises(TypeError, match="float32"):
        matmul(np.ones((2, 3), np.int32), np.ones((3, 2), np.int32))
    with pytest.raises(ValueError, match="bias"):
        matmul(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="bfloat16"):
        matmul(np.ones((2, 3), BF16), np.ones((3, 2), BF16), backend="cublas")


@on_device_only()
@pytest.mark.parametrize("backend", ["numba", "cublas"])
def test_large_on_device_both_paths(backend):
    cp = pytest.importorskip("cupy")
    a = cp.random.standard_normal((512, 384), dtype=cp.float32)
    b = cp.random.standard_normal((384, 640), dtype=cp.float32)
    bias = cp.random.standard_normal(640, dtype=cp.float32)
    got = matmul(a, b, bias, "gelu", backend=backend)
    assert last_dispatch() == backend and isinstance(got, cp.ndarray)
    ref = TORCH_ACT["gelu"](torch.tensor(cp.asnumpy(a), dtype=torch.float64)
                            @ torch.tensor(cp.asnumpy(b), dtype=torch.float64)
                            + torch.tensor(cp.asnumpy(bias), dtype=torch.float64)).numpy()
    # cuBLAS may use TF32 for float32: a looser bound there
    np.testing.assert_allclose(cp.asnumpy(got), ref, rtol=2e-2 if backend == "cublas" else 1e-4,
                               atol=2e-2 if backend == "cublas" else 1e-3)
