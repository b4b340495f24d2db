"""Flash SDPA on the CPU (numaccel.nn.functional) against PyTorch and the NumPy reference."""
import math
import tracemalloc

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numaccel.nn.functional as F
from numaccel.backends import find_kernel
from numaccel.ir import AVal
from numaccel.kernels_cpu import bf16_dot
from numaccel.kernels_cpu.sdpa import dropout_keep
from numaccel.ops import get_op
from numaccel.ops.attention import sdpa_decompose, sdpa_infer, sdpa_reference

BF16 = ml_dtypes.bfloat16
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def rand(rng, shape, dtype=np.float32):
    x = rng.standard_normal(shape)
    return x.astype(np.float32).astype(dtype) if dtype == BF16 else x.astype(dtype)


def torch_sdpa(q, k, v, **kw):
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("torch.nn.functional")
    m = kw.pop("attn_mask", None)
    t = [torch.from_numpy(np.ascontiguousarray(x)) for x in (q, k, v)]
    tm = None if m is None else torch.from_numpy(np.ascontiguousarray(m))
    return tf.scaled_dot_product_attention(*t, attn_mask=tm, **kw).numpy()


def to_torch_bf16(x):
    torch = pytest.importorskip("torch")
    return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)


# ----------------------------------------------------------------------------- forward
SHAPES = [  # q, k, v
    ((5, 33, 16), (5, 47, 16), (5, 47, 16)),                   # rank 3, L != S
    ((2, 3, 70, 40), (2, 3, 300, 40), (2, 3, 300, 24)),        # rank 4, E, Ev not x16
    ((2, 2, 2, 17, 8), (2, 2, 2, 9, 8), (2, 2, 2, 9, 8)),      # rank 5, L > S
    ((1, 1, 1, 8), (1, 1, 1, 8), (1, 1, 1, 8)),                # length 1
    ((1, 1, 1, 64), (1, 1, 513, 64), (1, 1, 513, 64)),         # one query, many keys
    ((3, 1, 130, 64), (1, 4, 130, 64), (3, 4, 130, 64)),       # broadcast batch dims
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: "x".join(map(str, s[0])))
def test_forward_matches_torch_and_reference(shapes, causal):
    rng = np.random.default_rng(len(shapes[0]) + shapes[1][-2])
    q, k, v = (rand(rng, s) for s in shapes)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    ref = sdpa_reference(q, k, v, is_causal=causal)
    assert out.dtype == np.float32 and out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=TOL[np.float32], atol=TOL[np.float32])
    np.testing.assert_allclose(out, torch_sdpa(q, k, v, is_causal=causal), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("mask_shape", [(70, 300), (2, 1, 70, 300), (1, 300), (70, 1),
                                        (2, 3, 70, 300)])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masks_broadcast_like_torch(mask_shape, kind):
    rng = np.random.default_rng(11)
    q, k, v = rand(rng, (2, 3, 70, 40)), rand(rng, (2, 3, 300, 40)), rand(rng, (2, 3, 300, 40))
    if kind == "bool":
        mask = rng.random(mask_shape) > 0.3
    else:
        mask = rng.standard_normal(mask_shape).astype(np.float32)
        mask[rng.random(mask_shape) < 0.2] = -np.inf
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    np.testing.assert_allclose(out, torch_sdpa(q, k, v, attn_mask=mask), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(out, sdpa_reference(q, k, v, mask), rtol=2e-5, atol=2e-5)


def test_fully_masked_rows_give_zeros_like_torch():
    rng = np.random.default_rng(2)
    q, k, v = rand(rng, (1, 2, 20, 16)), rand(rng, (1, 2, 300, 16)), rand(rng, (1, 2, 300, 16))
    mask = np.ones((20, 300), bool)
    mask[3] = False
    fmask = np.where(mask, np.float32(0), np.float32(-np.inf))
    for m in (mask, fmask):
        out, lse = F.scaled_dot_product_attention_with_lse(q, k, v, attn_mask=m)
        np.testing.assert_array_equal(out[:, :, 3], 0)
        assert np.isneginf(lse[:, :, 3]).all() and np.isfinite(lse[:, :, 4]).all()
        np.testing.assert_allclose(out, torch_sdpa(q, k, v, attn_mask=m), atol=2e-5)


def test_nan_propagates_like_torch_math_backend():
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rng = np.random.default_rng(3)
    q, k, v = rand(rng, (1, 1, 6, 8)), rand(rng, (1, 1, 5, 8)), rand(rng, (1, 1, 5, 8))
    q[0, 0, 2, 1] = np.nan
    out = F.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel(SDPBackend.MATH):
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(torch.from_numpy(x) for x in (q, k, v))).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    assert np.isnan(out[0, 0, 2]).all()
    np.testing.assert_allclose(out[~np.isnan(out)], ref[~np.isnan(ref)], atol=2e-5)


def test_infinite_score_is_nan_like_reference():
    q = np.ones((1, 2, 4), np.float32)
    k = np.ones((1, 3, 4), np.float32)
    k[0, 1] = np.inf
    out = F.scaled_dot_product_attention(q, k, np.ones((1, 3, 4), np.float32))
    assert np.isnan(out).all() and np.isnan(sdpa_reference(q, k, k)).all()


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention(causal):
    rng = np.random.default_rng(5)
    q, k, v = rand(rng, (2, 8, 50, 32)), rand(rng, (2, 2, 60, 32)), rand(rng, (2, 2, 60, 32))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    ref = torch_sdpa(q, k, v, is_causal=causal, enable_gqa=True)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(out, sdpa_reference(q, k, v, is_causal=causal, enable_gqa=True),
                               rtol=2e-5, atol=2e-5)


def test_non_contiguous_and_fortran_views():
    rng = np.random.default_rng(6)
    base = rand(rng, (2, 90, 4, 32))                          # (B, L, H, E): the usual layout
    q = base.transpose(0, 2, 1, 3)
    k = np.asfortranarray(rand(rng, (2, 4, 90, 32)))
    v = rand(rng, (2, 4, 180, 32))[:, :, ::2]
    out = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    np.testing.assert_allclose(out, torch_sdpa(q, k, v, scale=0.3), rtol=2e-5, atol=2e-5)


def test_empty_inputs():
    z = np.zeros((0, 2, 5, 8), np.float32)
    assert F.scaled_dot_product_attention(z, z, z).shape == (0, 2, 5, 8)
    q = np.ones((2, 0, 8), np.float32)
    kv = np.ones((2, 3, 8), np.float32)
    assert F.scaled_dot_product_attention(q, kv, kv).shape == (2, 0, 8)
    rng = np.random.default_rng(0)
    q = rand(rng, (1, 2, 3, 4))
    k, v = np.zeros((1, 2, 0, 4), np.float32), np.zeros((1, 2, 0, 5), np.float32)
    out = F.scaled_dot_product_attention(q, k, v)
    np.testing.assert_array_equal(out, torch_sdpa(q, k, v))
    np.testing.assert_array_equal(out, 0)


def test_float64_matches_torch_tightly():
    rng = np.random.default_rng(8)
    q, k, v = (rand(rng, (2, 2, 37, 24), np.float64) for _ in range(3))
    mask = rng.random((37, 37)) > 0.2
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, torch_sdpa(q, k, v, attn_mask=mask), rtol=1e-12,
                               atol=1e-12)


def _bf16_case(seed, shape_q=(2, 4, 100, 64), s=300):
    rng = np.random.default_rng(seed)
    q = rand(rng, shape_q, BF16)
    k = rand(rng, shape_q[:-2] + (s, shape_q[-1]), BF16)
    v = rand(rng, shape_q[:-2] + (s, shape_q[-1]), BF16)
    return q, k, v


@pytest.mark.parametrize("causal", [False, True])
def test_bfloat16_matches_torch_and_float64_reference(causal):
    torch = pytest.importorskip("torch")
    q, k, v = _bf16_case(9)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert out.dtype == BF16
    ref64 = sdpa_reference(*(x.astype(np.float64) for x in (q, k, v)), is_causal=causal)
    got = out.astype(np.float64)
    # bf16 output rounding (2^-9 relative) plus bf16 probabilities in P @ V
    np.testing.assert_allclose(got, ref64, rtol=2e-2, atol=2e-2)
    tq, tk, tv = (to_torch_bf16(x) for x in (q, k, v))
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    np.testing.assert_allclose(got, tout.float().numpy(), rtol=2e-2, atol=2e-2)
    assert np.abs(got - ref64).mean() < 2e-3


def test_bfloat16_portable_path_equals_native():
    q, k, v = _bf16_case(10, (1, 3, 70, 40), 150)
    with bf16_dot.force_portable():
        por = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref64 = sdpa_reference(*(x.astype(np.float64) for x in (q, k, v)), is_causal=True)
    np.testing.assert_allclose(por.astype(np.float64), ref64, rtol=2e-2, atol=2e-2)
    if bf16_dot.has_avx512_bf16():
        nat = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # the two GEMM tiles are bit-identical on normal numbers, so the whole result is
        np.testing.assert_array_equal(nat.view(np.uint16), por.view(np.uint16))


def test_bfloat16_mask_odd_head_dim():
    q, k, v = _bf16_case(12, (2, 1, 9, 7), 13)
    mask = np.random.default_rng(1).standard_normal((9, 13)).astype(BF16)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ref = sdpa_reference(*(x.astype(np.float64) for x in (q, k, v)), mask.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


def test_lse_is_logsumexp_of_scaled_masked_scores():
    rng = np.random.default_rng(13)
    q, k, v = rand(rng, (2, 40, 16)), rand(rng, (2, 300, 16)), rand(rng, (2, 300, 16))
    out, lse = F.scaled_dot_product_attention_with_lse(q, k, v, is_causal=True, scale=0.5)
    np.testing.assert_allclose(out, sdpa_reference(q, k, v, is_causal=True, scale=0.5),
                               rtol=2e-5, atol=2e-5)
    s = (q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2)) * 0.5
    s = np.where(np.tril(np.ones((40, 300), bool)), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    ref = (mx + np.log(np.exp(s - mx).sum(-1, keepdims=True)))[..., 0]
    assert lse.shape == (2, 40) and lse.dtype == np.float32
    np.testing.assert_allclose(lse, ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(L=st.integers(1, 80), S=st.integers(1, 300), E=st.integers(1, 40),
       causal=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_random_shapes_against_reference(L, S, E, causal, seed):
    rng = np.random.default_rng(seed)
    q, k, v = rand(rng, (1, 2, L, E)), rand(rng, (1, 2, S, E)), rand(rng, (1, 2, S, E))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    np.testing.assert_allclose(out, sdpa_reference(q, k, v, is_causal=causal), rtol=3e-5,
                               atol=3e-5)


def test_long_sequence_stays_linear_in_memory():
    rng = np.random.default_rng(14)
    q, k, v = (rand(rng, (1, 1, 16384, 64)) for _ in range(3))
    tracemalloc.start()
    try:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2 ** 20, f"peak {peak / 2**20:.0f} MiB; an L x L float32 is 1 GiB"
    for i in (0, 1, 5000, 16383):                  # causal row i sees keys 0..i
        ri = sdpa_reference(q[:, :, i:i + 1], k[:, :, :i + 1], v[:, :, :i + 1])
        np.testing.assert_allclose(out[:, :, i:i + 1], ri, rtol=2e-5, atol=2e-5)


@pytest.fixture
def small_tiles(monkeypatch):
    """Shrink the kernels' tiles so small inputs cross many query and key tiles."""
    from numaccel.kernels_cpu import sdpa
    monkeypatch.setattr(sdpa, "BQ", 7)
    monkeypatch.setattr(sdpa, "BK", 32)
    monkeypatch.setattr(sdpa, "BQ_BWD", 5)
    monkeypatch.setattr(sdpa, "BK_BWD", 16)


@pytest.mark.parametrize("case", ["mask", "causal_long_q", "causal_long_k", "gqa", "dropout",
                                  "bf16", "bf16_portable", "float64"])
def test_many_tiles_forward_and_backward(small_tiles, case):
    rng = np.random.default_rng(20)
    L, S, kw, dt = 45, 100, {}, np.float32
    if case == "causal_long_q":
        L, S, kw = 100, 45, {"is_causal": True}
    if case == "causal_long_k":
        kw = {"is_causal": True}
    if case == "bf16" or case == "bf16_portable":
        dt = BF16
    if case == "float64":
        dt = np.float64
    hk = 1 if case == "gqa" else 3
    q, k, v = rand(rng, (2, 3, L, 20), dt), rand(rng, (2, hk, S, 20), dt), \
        rand(rng, (2, hk, S, 12), dt)
    if case == "gqa":
        kw["enable_gqa"] = True
    if case in ("mask", "bf16", "float64"):
        m = rng.random((2, 1, L, S)) > 0.4
        m[1, 0, 9] = False
        kw["attn_mask"] = m
    if case == "dropout":
        kw.update(dropout_p=0.25, dropout_seed=5)
    with bf16_dot.force_portable(case == "bf16_portable"):
        out, lse = F.scaled_dot_product_attention_with_lse(q, k, v, **kw)
    ref = sdpa_reference(*(x.astype(np.float64) for x in (q, k, v)), **kw)
    tol = {np.float32: 2e-5, np.float64: 1e-12}.get(dt, 2e-2)
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=tol, atol=tol)
    g = rand(rng, out.shape, np.float64)
    grads = F.scaled_dot_product_attention_backward(g.astype(dt), q, k, v, out, lse, **kw)
    if dt != BF16 and case != "dropout":
        ref_g = _torch_grads(*(x.astype(np.float64) for x in (q, k, v)), g,
                             **{a: b for a, b in kw.items() if a != "dropout_seed"})
        for a, b in zip(grads, ref_g):
            np.testing.assert_allclose(a, b, rtol=1e-4 if dt == np.float32 else 1e-10,
                                       atol=1e-4 if dt == np.float32 else 1e-10)
    if case == "dropout":
        _finite_diff_check(*(x.astype(np.float64) for x in (q, k, v)), g, **kw)


# ----------------------------------------------------------------------------- dropout
def test_dropout_is_reproducible_and_matches_reference():
    rng = np.random.default_rng(15)
    q, k, v = rand(rng, (2, 2, 30, 16)), rand(rng, (2, 2, 70, 16)), rand(rng, (2, 2, 70, 16))
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, rng=np.random.default_rng(1))
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, rng=np.random.default_rng(1))
    c = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, rng=np.random.default_rng(2))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    seed = F.draw_dropout_seed(np.random.default_rng(1))
    ref = sdpa_reference(q, k, v, dropout_p=0.3, dropout_seed=seed)
    np.testing.assert_allclose(a, ref, rtol=2e-5, atol=2e-5)
    full = F.scaled_dot_product_attention(q, k, v, dropout_p=1.0, rng=rng)
    np.testing.assert_array_equal(full, 0)


def test_dropout_keep_rate():
    keep = dropout_keep(123, np.arange(4)[:, None, None], np.arange(50)[:, None],
                        np.arange(500), 50, 500, round(0.25 * 2 ** 24))
    assert abs(keep.mean() - 0.75) < 0.01


# ----------------------------------------------------------------------------- backward
def _torch_grads(q, k, v, g, **kw):
    torch = pytest.importorskip("torch")
    m = kw.pop("attn_mask", None)
    t = [torch.from_numpy(np.ascontiguousarray(x)).requires_grad_() for x in (q, k, v)]
    tm = None if m is None else torch.from_numpy(m)
    torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=tm, **kw).backward(
        torch.from_numpy(g))
    return [x.grad.numpy() for x in t]


@pytest.mark.parametrize("case", ["plain", "causal", "mask", "gqa", "broadcast"])
def test_backward_matches_torch(case):
    rng = np.random.default_rng(16)
    qs, ks = (2, 4, 70, 40), (2, 4, 130, 40)
    kw = {}
    if case == "causal":
        kw["is_causal"] = True
    if case == "gqa":
        ks = (2, 2, 130, 40)
        kw["enable_gqa"] = True
    if case == "broadcast":
        ks = (1, 4, 130, 40)
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, ks[:-1] + (24,))
    if case == "mask":
        m = rng.random((2, 1, 70, 130)) > 0.3
        m[0, 0, 5] = False                                  # one fully masked row
        kw["attn_mask"] = m
    out, lse = F.scaled_dot_product_attention_with_lse(q, k, v, **kw)
    g = rand(rng, out.shape)
    got = F.scaled_dot_product_attention_backward(g, q, k, v, out, lse, **kw)
    ref = _torch_grads(q, k, v, g, **kw)
    for a, b, x in zip(got, ref, (q, k, v)):
        assert a.shape == x.shape and a.dtype == x.dtype
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def _finite_diff_check(q, k, v, g, **kw):
    out, lse = F.scaled_dot_product_attention_with_lse(q, k, v, **kw)
    grads = F.scaled_dot_product_attention_backward(g, q, k, v, out, lse, **kw)
    kw_fwd = {x: y for x, y in kw.items() if x != "dropout_seed"}
    rng = np.random.default_rng(0)
    for which, grad in enumerate(grads):
        args = [q, k, v]
        for _ in range(6):
            idx = tuple(rng.integers(0, d) for d in args[which].shape)
            h = 1e-6
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[which][idx] += h
            minus[which][idx] -= h
            fp = (F.scaled_dot_product_attention_with_lse(*plus, **kw_fwd,
                  dropout_seed=kw.get("dropout_seed"))[0] * g).sum()
            fm = (F.scaled_dot_product_attention_with_lse(*minus, **kw_fwd,
                  dropout_seed=kw.get("dropout_seed"))[0] * g).sum()
            assert math.isclose(grad[idx], (fp - fm) / (2 * h), rel_tol=1e-5, abs_tol=1e-7)


@pytest.mark.parametrize("kw", [{}, {"is_causal": True},
                                {"dropout_p": 0.2, "dropout_seed": 99}], ids=str)
def test_backward_finite_differences_float64(kw):
    rng = np.random.default_rng(17)
    q, k, v = (rand(rng, (1, 2, n, 12), np.float64) for n in (9, 21, 21))
    g = rand(rng, (1, 2, 9, 12), np.float64)
    _finite_diff_check(q, k, v, g, **kw)


def test_backward_bfloat16_close_to_float32():
    q, k, v = _bf16_case(18, (1, 2, 40, 32), 70)
    out, lse = F.scaled_dot_product_attention_with_lse(q, k, v)
    g = rand(np.random.default_rng(1), out.shape, BF16)
    got = F.scaled_dot_product_attention_backward(g, q, k, v, out, lse)
    ref = _torch_grads(*(x.astype(np.float32) for x in (q, k, v)), g.astype(np.float32))
    for a, b in zip(got, ref):
        assert a.dtype == BF16
        np.testing.assert_allclose(a.astype(np.float32), b, rtol=5e-2, atol=5e-2)


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("args,kw,err,msg", [
    (((2, 3, 4, 8), (2, 3, 5, 6), (2, 3, 5, 8)), {}, ValueError, r"head dims.*\(2, 3, 5, 6\)"),
    (((2, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8)), {}, ValueError, r"same rank.*\(2, 4, 8\)"),
    (((8,), (8,), (8,)), {}, ValueError, "rank"),
    (((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 6, 8)), {}, ValueError, "sequence lengths"),
    (((2, 3, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8)), {}, ValueError, "enable_gqa"),
    (((2, 3, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8)), {"enable_gqa": True}, ValueError, "multiple"),
    (((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8)), {"attn_mask": np.ones((4, 6), bool)},
     ValueError, r"\(4, 6\).*\(2, 3, 4, 5\)"),
    (((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8)), {"attn_mask": np.ones((4, 5), np.int32)},
     TypeError, "bool"),
    (((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8)),
     {"attn_mask": np.ones((4, 5), bool), "is_causal": True}, ValueError, "not both"),
    (((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8)), {"dropout_p": 1.5}, ValueError, "dropout_p"),
])
def test_bad_input_raises_clear_errors(args, kw, err, msg):
    q, k, v = (np.ones(s, np.float32) for s in args)
    with pytest.raises(err, match=msg):
        F.scaled_dot_product_attention(q, k, v, **kw)


def test_dtype_mixes_are_rejected():
    a = np.ones((1, 2, 4), np.float32)
    with pytest.raises(TypeError, match="float32, float64"):
        F.scaled_dot_product_attention(a, a.astype(np.float64), a)
    with pytest.raises(TypeError, match="not supported"):
        F.scaled_dot_product_attention(*(a.astype(np.float16),) * 3)
    with pytest.raises(ValueError, match="dropout_seed"):
        F.scaled_dot_product_attention_backward(a, a, a, a, a, a[..., 0], dropout_p=0.1)


# ----------------------------------------------------------------------------- the op
def test_sdpa_op_reference_decomposition_and_kernel_agree():
    op = get_op("sdpa")
    assert op.kind == "composite" and op.decompose is sdpa_decompose
    rng = np.random.default_rng(19)
    q, k, v = rand(rng, (2, 4, 20, 16)), rand(rng, (2, 2, 30, 16)), rand(rng, (2, 2, 30, 8))
    mask = rng.random((20, 30)) > 0.5
    mask[7] = False
    attrs = {"enable_gqa": True, "scale": 0.7}
    ref = op.ref(q, k, v, mask, **attrs)
    dec = op.decompose(q, k, v, mask, **attrs)
    assert dec.dtype == np.float32
    np.testing.assert_allclose(dec, ref, rtol=1e-5, atol=1e-5)
    kern = find_kernel("sdpa", "cpu", q, k, v, mask, **attrs)
    assert kern is not None
    np.testing.assert_allclose(kern.fn(q, k, v, mask, **attrs), ref, rtol=2e-5, atol=2e-5)
    aval = op.infer([AVal(x.shape, x.dtype) for x in (q, k, v, mask)], **attrs)
    assert aval == AVal((2, 4, 20, 8), np.float32)
    assert find_kernel("sdpa", "cpu", q.astype(np.float16), k, v) is None
    np.testing.assert_allclose(op.decompose(q, k, v, is_causal=True, enable_gqa=True),
                               op.ref(q, k, v, is_causal=True, enable_gqa=True), atol=1e-5)


def test_infer_broadcasts_batch_dims():
    a = sdpa_infer([AVal((3, 1, 5, 8), np.float64), AVal((1, 4, 6, 8), np.float64),
                    AVal((3, 4, 6, 2), np.float64)])
    assert a == AVal((3, 4, 5, 2), np.float64)
    with pytest.raises(TypeError):
        sdpa_infer([AVal((5, 8), np.float32), AVal((5, 8), np.float64), AVal((5, 8),
                                                                              np.float32)])
