"""Flash SDPA forward/backward under the simulator (or a device) against torch's SDPA."""
from __future__ import annotations

import numpy as np
import pytest
from _common import BF16, SIZE, f32, on_device_only, rand

from numaccel.kernels_gpu import (scaled_dot_product_attention,
                                  scaled_dot_product_attention_backward,
                                  scaled_dot_product_attention_with_lse)

torch = pytest.importorskip("torch")
F = torch.nn.functional
TOLS = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 4e-3, BF16: 3e-2,
        np.dtype(np.float64): 1e-10}


def _torch_ref(q, k, v, g, **kw):
    """torch in float64 on the (already rounded) inputs: out and grads."""
    tq, tk, tv = (torch.tensor(f32(a), requires_grad=True) for a in (q, k, v))
    tkw = {n: torch.tensor(a if a.dtype == np.bool_ else f32(a)) if isinstance(a, np.ndarray)
           else a for n, a in kw.items()}
    out = F.scaled_dot_product_attention(tq, tk, tv, **tkw)
    out.backward(torch.tensor(f32(g)))
    return out.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


def _check(got, ref, dtype, what):
    t = TOLS[np.dtype(dtype)]
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), what
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(f32(got), ref, rtol=t, atol=t * scale, err_msg=what)


def _run(dtype, qshape, kshape, vshape, seed=0, **kw):
    rng = np.random.default_rng(seed)
    q, k, v = rand(rng, qshape, dtype), rand(rng, kshape, dtype), rand(rng, vshape, dtype)
    out, lse = scaled_dot_product_attention_with_lse(q, k, v, **kw)
    g = rand(rng, out.shape, dtype)
    ro, rdq, rdk, rdv = _torch_ref(q, k, v, g, **kw)
    _check(out, ro, dtype, "out")
    dq, dk, dv = scaled_dot_product_attention_backward(g, q, k, v, out, lse, **kw)
    for name, a, r in (("dq", dq, rdq), ("dk", dk, rdk), ("dv", dv, rdv)):
        _check(a, r, dtype, name)
    return out, lse


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64])
def test_plain_every_dtype(dtype):
    L = 6 * SIZE
    _run(dtype, (1, 2, L, 4), (1, 2, L + 1, 4), (1, 2, L + 1, 3))


@pytest.mark.parametrize("L,S", [(5, 7), (7, 3)])
def test_causal_is_top_left_aligned(L, S):
    _run(np.float32, (2, 1, L, 4), (2, 1, S, 4), (2, 1, S, 4), is_causal=True)


def test_bool_mask_with_a_fully_masked_row_gives_zeros():
    rng = np.random.default_rng(3)
    m = rng.random((5, 6)) > 0.4
    m[2] = False
    out, lse = _run(np.float32, (1, 2, 5, 4), (1, 2, 6, 4), (1, 2, 6, 4), attn_mask=m)
    assert (np.asarray(out)[:, :, 2] == 0).all() and np.isneginf(np.asarray(lse)[:, :, 2]).all()


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_float_mask_broadcast_over_heads(dtype):
    rng = np.random.default_rng(4)
    m = rand(rng, (2, 1, 4, 5), dtype)
    m[0, 0, 1, :3] = -np.inf
    _run(dtype, (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), attn_mask=m)


def test_gqa_scale_and_3d_inputs():
    _run(np.float32, (1, 4, 5, 4), (1, 2, 6, 4), (1, 2, 6, 2), enable_gqa=True, scale=0.3)
    _run(np.float32, (3, 5, 4), (3, 6, 4), (3, 6, 4))          # (H, L, E)
    _run(np.float32, (5, 4), (6, 4), (6, 4), is_causal=True)   # (L, E)


def test_non_contiguous_inputs_and_size_one_dims():
    rng = np.random.default_rng(5)
    q = rand(rng, (1, 4, 2, 6)).transpose(0, 2, 1, 3)[:, :, :3]   # (1, 2, 3, 6) strided
    k = rand(rng, (1, 2, 1, 6))
    v = rand(rng, (1, 2, 1, 6))
    ref = F.scaled_dot_product_attention(*(torch.tensor(np.ascontiguousarray(a))
                                           for a in (q, k, v))).numpy()
    _check(scaled_dot_product_attention(q, k, v), ref, np.float32, "out")


def test_empty_sequences_match_torch():
    q = np.ones((1, 1, 3, 4), np.float32)
    k = np.ones((1, 1, 0, 4), np.float32)
    got = scaled_dot_product_attention(q, k, k)
    ref = F.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, k))).numpy()
    np.testing.assert_array_equal(got, ref)
    assert scaled_dot_product_attention(q[:, :, :0], q, q).shape == (1, 1, 0, 4)


def test_nan_in_a_key_poisons_only_rows_that_see_it():
    q = np.ones((1, 1, 3, 2), np.float32)
    k = np.ones((1, 1, 3, 2), np.float32)
    k[0, 0, 2, 0] = np.nan
    v = rand(np.random.default_rng(7), (1, 1, 3, 2))
    got = scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = F.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)),
                                         is_causal=True).numpy()
    assert np.isnan(ref[0, 0, 2]).all() and not np.isnan(ref[0, 0, :2]).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))


def test_errors_say_what_to_do():
    q = np.ones((1, 2, 3, 4), np.float32)
    with pytest.raises(NotImplementedError, match="dropout"):
        scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        scaled_dot_product_attention(q, q, q, np.ones((3, 3), bool), is_causal=True)
    with pytest.raises(TypeError, match="one dtype"):
        scaled_dot_product_attention(q, q.astype(np.float16), q)
    with pytest.raises(ValueError, match="enable_gqa"):
        scaled_dot_product_attention(q, q[:, :1], q[:, :1])
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, q, q, np.ones((2, 3), bool))


@on_device_only()
def test_realistic_shapes_on_device():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(6)
    q, k, v = (rand(rng, (2, 8, 256, 64), np.float16) for _ in range(3))
    got = scaled_dot_product_attention(cp.asarray(q), cp.asarray(k), cp.asarray(v),
                                       is_causal=True)
    ref = F.scaled_dot_product_attention(*(torch.tensor(f32(a)) for a in (q, k, v)),
                                         is_causal=True).numpy()
    np.testing.assert_allclose(f32(cp.asnumpy(got)), ref, rtol=4e-3, atol=4e-3)

