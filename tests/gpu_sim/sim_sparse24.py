"""2:4 sparse linear under the simulator (or a device) on numaccel.sparse's layout."""
from __future__ import annotations

import numpy as np
import pytest
from _common import BF16, SIZE, assert_close, f32, on_device_only, rand

from numaccel.kernels_gpu import Sparse24Device, sparse24_linear
from numaccel.sparse import SparseSemiStructuredArray, prune_2_4, to_sparse_semi_structured


def _weight(rng, m, k, dtype):
    return prune_2_4(rand(rng, (m, k))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("k", [16, 21, 40])
def test_matches_dense_every_dtype_and_padded_k(dtype, k):
    rng = np.random.default_rng(k)
    w = _weight(rng, 11 * SIZE, k, dtype)
    s = to_sparse_semi_structured(w)
    x = rand(rng, (2, 5, k), dtype)
    got = sparse24_linear(x, s)
    assert got.shape == (2, 5, 11 * SIZE) and got.dtype == np.dtype(dtype)
    assert_close(got, f32(x) @ f32(w).T, dtype, rtol_scale=4, atol=None)


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
def test_bias_and_activation_epilogue(act):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w = _weight(rng, 9, 32, np.float32)
    b = rand(rng, (9,))
    x = rand(rng, (7, 32))
    ref = torch.tensor(x) @ torch.tensor(w).T + torch.tensor(b)
    ref = {None: ref, "relu": torch.relu(ref), "gelu": torch.nn.functional.gelu(ref)}[act]
    wd = Sparse24Device.from_host(to_sparse_semi_structured(w))   # bytes copied once
    assert_close(sparse24_linear(x, wd, b, act), ref.numpy(), np.float32, rtol_scale=5)


def test_hand_worked_layout_bytes():
    # docs/sparse24_layout.md: values [1 2 3 4 0 0 5 0], meta 0xEE9C
    vals = np.array([[1, 2, 3, 4, 0, 0, 5, 0]], np.float32)
    meta = np.array([[0xEE9C]], np.uint16)
    s = SparseSemiStructuredArray(vals, meta, (1, 16))
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 16)
    dense = np.array([[1, 0, 0, 2, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0, 5, 0]], np.float32)
    np.testing.assert_array_equal(sparse24_linear(x, s), x @ dense.T)


def test_nan_in_weight_and_empty_batch():
    w = np.zeros((2, 16), np.float32)
    w[0, 1] = np.nan
    w[1, 2] = 1.0
    s = to_sparse_semi_structured(w)
    got = sparse24_linear(np.ones((3, 16), np.float32), s)
    assert np.isnan(got[:, 0]).all() and (got[:, 1] == 1).all()
    assert sparse24_linear(np.ones((0, 16), np.float32), s).shape == (0, 2)


def test_errors():
    s = to_sparse_semi_structured(np.zeros((2, 16), np.float32))
    with pytest.raises(ValueError, match=r"\(\.\.\., 16\)"):
        sparse24_linear(np.ones((3, 15), np.float32), s)
    with pytest.raises(TypeError, match="dtype"):
        sparse24_linear(np.ones((3, 16), np.float16), s)
    with pytest.raises(ValueError, match="bias"):
        sparse24_linear(np.ones((3, 16), np.float32), s, np.ones(3, np.float32))


@on_device_only()
def test_large_on_device_against_cublas():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(2)
    w = _weight(rng, 1024, 2048, np.float16)
    x = rand(rng, (256, 2048), np.float16)
    got = sparse24_linear(cp.asarray(x), to_sparse_semi_structured(w))
    ref = cp.asnumpy(cp.asarray(x).astype(cp.float32) @ cp.asarray(w).astype(cp.float32).T)
    np.testing.assert_allclose(f32(cp.asnumpy(got)), ref, rtol=1e-2, atol=5e-2)
