"""2:4 semi-structured sparsity: layout, conversions, products, dispatch, the linear_24 op."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaccel.sparse import (
    SparseSemiStructuredArray,
    SparsityPatternError,
    prune_2_4,
    to_sparse_semi_structured,
)
from numaccel.sparse.semi_structured import pack_meta, unpack_meta

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16]
# products accumulate in float32; the result is rounded once to the output dtype
RTOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 2e-3, BF16: 1.6e-2}


def rand_24(rng, m, k, dtype, density=1.0):
    w = rng.standard_normal((m, k)).astype(np.float32)
    if density < 1.0:
        w[rng.random(w.shape) > density] = 0
    return prune_2_4(w.astype(dtype))


def is_24(w):
    m, k = w.shape
    kp = -(-k // 4) * 4
    p = np.zeros((m, kp), np.float32)
    p[:, :k] = w.astype(np.float32)
    return bool(((p.reshape(m, kp // 4, 4) != 0).sum(-1) <= 2).all())


# ---------------------------------------------------------------------------------------
# layout


def test_hand_worked_layout():
    # the example worked by hand in docs/sparse24_layout.md
    w = np.array([[1, 0, 0, 2, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0, 5, 0]], np.float32)
    s = to_sparse_semi_structured(w)
    assert s.values.tolist() == [[1, 2, 3, 4, 0, 0, 5, 0]]
    assert s.meta.dtype == np.uint16 and s.meta.tolist() == [[0xEE9C]]
    assert s.positions().tolist() == [[0, 3, 1, 2, 2, 3, 2, 3]]
    assert s.columns().tolist() == [[0, 3, 5, 6, 10, 11, 14, 15]]


def test_every_group_pattern_gets_cutlass_nibble():
    # each of the 11 admissible non-zero masks of one group, nibble from the layout table
    expect = {0b0000: 0b1110, 0b0001: 0b1000, 0b0010: 0b1001, 0b0100: 0b1110,
              0b1000: 0b1110, 0b0011: 0b0100, 0b0101: 0b1000, 0b0110: 0b1001,
              0b1001: 0b1100, 0b1010: 0b1101, 0b1100: 0b1110}
    rows = [[float(i + 1) if (mask >> i) & 1 else 0.0 for i in range(4)] + [0.0] * 12
            for mask in expect]
    s = to_sparse_semi_structured(np.array(rows, np.float32))
    assert (s.meta[:, 0] & 0xF).tolist() == list(expect.values())
    # kept values are in increasing position order; fillers are zeros
    for row, vals in zip(rows, s.values[:, :2].tolist()):
        assert [v for v in row[:4] if v] == [v for v in vals if v]


def test_pack_unpack_meta_inverse():
    rng = np.random.default_rng(1)
    p = rng.integers(0, 4, (5, 24))
    np.testing.assert_array_equal(unpack_meta(pack_meta(p)), p)
    with pytest.raises(ValueError, match="multiple of 8"):
        pack_meta(p[:, :7])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (1, 4), (3, 7), (5, 16), (17, 33), (8, 130),
                                   (0, 8), (4, 0), (0, 0)])
def test_round_trip_and_attributes(dtype, shape):
    rng = np.random.default_rng(sum(shape))
    w = rand_24(rng, *shape, dtype, density=0.8)
    s = to_sparse_semi_structured(w)
    d = s.to_dense()
    assert d.dtype == dtype and d.shape == w.shape
    np.testing.assert_array_equal(d.view(np.uint8), w.view(np.uint8))
    kp = -(-shape[1] // 16) * 16
    assert s.shape == shape and s.dtype == dtype and s.ndim == 2
    assert s.values.shape == (shape[0], kp // 2) and s.meta.shape == (shape[0], kp // 16)
    assert s.nbytes == shape[0] * kp // 2 * dtype.itemsize + shape[0] * kp // 16 * 2
    assert s.T.shape == shape[::-1] and s.T.T is s
    np.testing.assert_array_equal(s.T.to_dense(), w.T)
    assert "SparseSemiStructuredArray" in repr(s)


def test_input_views_nan_inf_and_negative_zero():
    rng = np.random.default_rng(2)
    base = rand_24(rng, 12, 40, np.float32)
    base[0, 0:4] = [np.nan, np.inf, 0, 0]
    base[1, 0:4] = [0, 0, 0.0, -np.inf]
    base[2, 0:4] = [-0.0, 0, 1, 0]
    for w in (base[::2, ::1], np.asfortranarray(base), base[:, 4:36]):
        s = to_sparse_semi_structured(w)
        np.testing.assert_array_equal(s.to_dense(), w)  # NaN == NaN here, -0.0 == 0.0
    assert np.isnan(to_sparse_semi_structured(base).to_dense()[0, 0])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_violation_names_first_offending_group(dtype):
    w = np.zeros((4, 12), dtype)
    w[2, 5:8] = 1  # row 2, group 1 (columns 4..7) holds 3 non-zeros
    w[3, 0:4] = 1
    with pytest.raises(SparsityPatternError, match=r"row 2, columns 4\.\.7 hold 3"):
        to_sparse_semi_structured(w)
    assert issubclass(SparsityPatternError, ValueError)
    # a partial trailing group is checked as if zero-padded
    t = np.zeros((1, 7), dtype)
    t[0, 4:7] = 1
    with pytest.raises(SparsityPatternError, match=r"row 0, columns 4\.\.6"):
        to_sparse_semi_structured(t)
    with pytest.raises(SparsityPatternError):
        to_sparse_semi_structured(np.full((1, 4), np.nan, dtype))


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(TypeError, match="float32, float16 and bfloat16"):
        to_sparse_semi_structured(np.zeros((2, 4), np.float64))
    with pytest.raises(TypeError, match="float32, float16 and bfloat16"):
        prune_2_4(np.zeros((2, 4), np.int32))
    with pytest.raises(ValueError, match="2-D"):
        to_sparse_semi_structured(np.zeros((2, 2, 4), np.float32))
    with pytest.raises(ValueError, match="values of shape"):
        SparseSemiStructuredArray(np.zeros((2, 4), np.float32), np.zeros((2, 1), np.uint16),
                                  (2, 16))
    s = to_sparse_semi_structured(np.zeros((2, 4), np.float32))
    with pytest.raises(TypeError, match=r"x @ w\.T"):
        np.ones((3, 2), np.float32) @ s
    with pytest.raises(TypeError, match=r"x @ w\.T"):
        s @ np.ones((4, 3), np.float32)


# ---------------------------------------------------------------------------------------
# pruning


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prune_keeps_two_largest_of_four(dtype):
    w = np.array([[1, -5, 3, 2, 0, 0, 0, 7, 4, 4, 4, 4, 1, 2]], np.float32).astype(dtype)
    p = prune_2_4(w)
    assert p.dtype == dtype and p.shape == w.shape
    # ties keep the earlier elements; the partial group [1, 2] keeps both
    assert p.astype(np.float32).tolist() == [[0, -5, 3, 0, 0, 0, 0, 7, 4, 4, 0, 0, 1, 2]]
    nan = prune_2_4(np.array([[np.nan, 5, 6, 1]], dtype)).astype(np.float32)
    assert np.isnan(nan[0, 0]) and nan[0, 1:].tolist() == [0, 6, 0]


@settings(max_examples=30, deadline=None)
@given(m=st.integers(0, 6), k=st.integers(0, 37), seed=st.integers(0, 2**16))
def test_prune_property(m, k, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((m, k)).astype(np.float32)
    p = prune_2_4(w)
    assert is_24(p)
    # kept elements are unchanged, the rest are zero, and each kept magnitude is >= every
    # dropped magnitude of its group
    kept = p != 0
    np.testing.assert_array_equal(p[kept], w[kept])
    kp = -(-k // 4) * 4
    a = np.zeros((m, kp), np.float32)
    a[:, :k] = np.abs(w)
    km = np.zeros((m, kp), bool)
    km[:, :k] = kept
    a, km = a.reshape(m, kp // 4, 4), km.reshape(m, kp // 4, 4)
    lo = np.where(km, a, np.inf).min(-1)
    hi = np.where(km, -np.inf, a).max(-1)
    assert (lo >= hi).all()
    np.testing.assert_array_equal(to_sparse_semi_structured(p).to_dense(), p)


# ---------------------------------------------------------------------------------------
# CUTLASS layout, against PyTorch's reimplementation of CUTLASS' converter


def _torch_cutlass(w):
    torch = pytest.importorskip("torch")
    conv = pytest.importorskip("torch.sparse._semi_structured_conversions")
    tdt = {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
           BF16: torch.bfloat16}[w.dtype]
    v, m = conv.sparse_semi_structured_from_dense_cutlass(
        torch.from_numpy(w.astype(np.float32)).to(tdt))
    return v.float().numpy(), m.numpy().view(np.uint16)


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=str)
@pytest.mark.parametrize("shape", [(32, 16), (64, 128), (96, 48)])
def test_to_cutlass_matches_pytorch_converter(dtype, shape):
    rng = np.random.default_rng(shape[0] + shape[1])
    w = rand_24(rng, *shape, dtype, density=0.6)
    s = to_sparse_semi_structured(w)
    v, m = s.to_cutlass()
    # CUTLASS wants rows and (16-bit) columns in multiples of 32: compare with the
    # converter on the zero-padded weight
    mp, kp = -(-shape[0] // 32) * 32, -(-shape[1] // 32) * 32
    wp = np.zeros((mp, kp), dtype)
    wp[:shape[0], :shape[1]] = w
    tv, tm = _torch_cutlass(wp)
    np.testing.assert_array_equal(v.astype(np.float32), tv)
    np.testing.assert_array_equal(m, tm)
    # the values are our own bytes: a GPU kernel can take s.values as they are
    np.testing.assert_array_equal(v[:shape[0], :s.values.shape[1]], s.values)


def test_to_cutlass_float32_is_1_2_and_pads_rows():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    pairs = w.reshape(64, 32, 2)
    first = np.abs(pairs[..., 0]) >= np.abs(pairs[..., 1])
    w = np.stack([np.where(first, pairs[..., 0], 0), np.where(first, 0, pairs[..., 1])],
                 -1).reshape(64, 64)
    w[rng.random(w.shape) < 0.3] = 0
    v, m = to_sparse_semi_structured(w).to_cutlass()
    tv, tm = _torch_cutlass(w)
    np.testing.assert_array_equal(v, tv)
    np.testing.assert_array_equal(m, tm)
    with pytest.raises(SparsityPatternError, match=r"1:2.*row 0, columns 0\.\.1"):
        to_sparse_semi_structured(np.array([[1, 1, 0, 0]], np.float32)).to_cutlass()
    # rows padded to 32 equal the converter's output on the zero-padded weight
    h = rand_24(rng, 40, 32, np.float16)
    v, m = to_sparse_semi_structured(h).to_cutlass()
    tv, tm = _torch_cutlass(np.concatenate([h, np.zeros((24, 32), np.float16)]))
    assert v.shape == (64, 16) and m.shape == (64, 2)
    np.testing.assert_array_equal(m, tm)
    np.testing.assert_array_equal(v.astype(np.float32), tv)


# ---------------------------------------------------------------------------------------
# products


def _ref_and_scale(x, w, bias=None):
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = x64 @ w64.T
    if bias is not None:
        ref = ref + bias.astype(np.float64)
    return ref, np.abs(x64) @ np.abs(w64).T


def check_close(y, ref, scale, out_dtype):
    assert y.dtype == out_dtype and y.shape == ref.shape
    # float32 accumulation (K terms) + one rounding to the output dtype
    tol = RTOL[np.dtype(out_dtype)] * np.abs(ref) + 1e-5 * scale + 1e-30
    err = np.abs(y.astype(np.float64) - ref)
    assert (err <= tol).all(), f"max err {err.max()} (tol {tol.flat[np.argmax(err - tol)]})"


KERNELS = ["permute", "tiled", "dense", "auto"]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lead", [(), (1,), (3,), (2, 5), (2, 1, 3), (9,), (0,), (3, 0)])
def test_linear_matches_dense_for_leading_dims(kernel, dtype, lead):
    from numaccel.sparse import linear
    rng = np.random.default_rng(len(lead) * 7 + sum(lead))
    m, k = 37, 70                     # odd sizes: K not a multiple of 4 or 16
    w = rand_24(rng, m, k, dtype)
    s = to_sparse_semi_structured(w)
    x = rng.standard_normal(lead + (k,)).astype(dtype)
    bias = rng.standard_normal(m).astype(dtype)
    ref, scale = _ref_and_scale(x, w, bias)
    check_close(linear(x, s, bias, kernel=kernel), ref, scale, dtype)
    ref0, scale0 = _ref_and_scale(x, w)
    check_close(linear(x, s, kernel=kernel), ref0, scale0, dtype)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(1, 1), (1, 16), (5, 7), (16, 33), (64, 130)])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 11, 130])
def test_linear_odd_sizes_float32(kernel, shape, n):
    from numaccel.sparse import linear
    rng = np.random.default_rng(n + shape[0])
    w = rand_24(rng, *shape, np.float32, density=0.7)
    x = rng.standard_normal((n, shape[1])).astype(np.float32)
    ref, scale = _ref_and_scale(x, w)
    check_close(linear(x, to_sparse_semi_structured(w), kernel=kernel), ref, scale,
                np.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_linear_many_k_blocks(dtype, n):
    # the permute kernel blocks K (metadata words per block by batch size), takes word
    # pairs and weight rows in groups of 4: an odd word count per row, several K blocks
    # (small blocks forced here), and rows in groups, a remainder and a second row block
    from numaccel.kernels_cpu import sparse24 as kern
    if not kern.HAVE_AVX512:
        pytest.skip("the permute kernel needs AVX-512")
    rng = np.random.default_rng(n)
    k = 16 * (2 * 5 + 3) - 5
    for m in (3, 9, 64 + 7):
        w = rand_24(rng, m, k, dtype)
        x = rng.standard_normal((n, k)).astype(dtype)
        ref, scale = _ref_and_scale(x, w)
        s = to_sparse_semi_structured(w)
        kv = kern.kernel_view(s.values)
        xp = np.zeros((n, kv.shape[1] * 2), np.float32)
        xp[:, :k] = x.astype(np.float32)
        for wb in (2, 4, 6, 1 << 20):
            out = np.zeros((n, m), np.float32)
            kern._linear_permute(kv, s.meta, xp, out, 64, wb)
            check_close(out, ref, scale, np.float32)
        check_close(kern.linear(xp[:, :k], s.values, s.meta, s.shape, "permute"), ref,
                    scale, np.float32)


@pytest.mark.parametrize("wdt,xdt,out", [(BF16, np.float32, np.float32),
                                         (np.float16, np.float32, np.float32),
                                         (BF16, np.float16, np.float32),
                                         (np.float32, BF16, np.float32)], ids=str)
def test_mixed_dtypes_promote(wdt, xdt, out):
    from numaccel.sparse import linear
    rng = np.random.default_rng(3)
    w = rand_24(rng, 12, 48, np.dtype(wdt))
    x = rng.standard_normal((4, 48)).astype(xdt)
    y = linear(x, to_sparse_semi_structured(w))
    ref, scale = _ref_and_scale(x, w)
    check_close(y, ref, scale, np.dtype(out))


def test_matmul_operator_and_views():
    rng = np.random.default_rng(4)
    w = rand_24(rng, 20, 64, np.float32)
    s = to_sparse_semi_structured(w)
    base = rng.standard_normal((6, 128)).astype(np.float32)
    for x in (base[:, ::2], np.asfortranarray(base[:, :64]), base[::2, 64:],
              base[:, :64].reshape(2, 3, 64)):
        ref, scale = _ref_and_scale(x, w)
        check_close(x @ s.T, ref, scale, np.float32)
    check_close(base[0, :64] @ s.T, *_ref_and_scale(base[0, :64], w), np.float32)


@pytest.mark.parametrize("kernel", KERNELS)
def test_nan_inf_in_weight_propagate(kernel):
    from numaccel.sparse import linear
    rng = np.random.default_rng(6)
    w = rand_24(rng, 6, 32, np.float32)
    w[1, 0:4] = [np.nan, 0, 0, 0]
    w[3, 4:8] = [0, 0, np.inf, 0]
    x = np.abs(rng.standard_normal((3, 32)).astype(np.float32)) + 0.5
    y = linear(x, to_sparse_semi_structured(w), kernel=kernel)
    assert np.isnan(y[:, 1]).all() and np.isposinf(y[:, 3]).all()
    ok = np.ones(6, bool)
    ok[[1, 3]] = False
    assert np.isfinite(y[:, ok]).all()


def test_linear_errors():
    from numaccel.sparse import linear
    s = to_sparse_semi_structured(np.zeros((4, 16), np.float32))
    with pytest.raises(ValueError, match=r"in_features = 16"):
        linear(np.ones((2, 15), np.float32), s)
    with pytest.raises(ValueError, match=r"bias must have shape \(4,\)"):
        linear(np.ones((2, 16), np.float32), s, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="float32, float16 and bfloat16 inputs"):
        linear(np.ones((2, 16), np.int64), s)
    with pytest.raises(TypeError, match="SparseSemiStructuredArray"):
        linear(np.ones((2, 16), np.float32), np.zeros((4, 16), np.float32))
    with pytest.raises(ValueError, match="unknown kernel"):
        linear(np.ones((2, 16), np.float32), s, kernel="magic")


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 80), n=st.integers(0, 20),
       kernel=st.sampled_from(KERNELS), seed=st.integers(0, 2**16))
def test_linear_property(m, k, n, kernel, seed):
    from numaccel.sparse import linear
    rng = np.random.default_rng(seed)
    w = rand_24(rng, m, k, np.float32, density=0.8)
    x = rng.standard_normal((n, k)).astype(np.float32)
    ref, scale = _ref_and_scale(x, w)
    check_close(linear(x, to_sparse_semi_structured(w), kernel=kernel), ref, scale,
                np.float32)


# ---------------------------------------------------------------------------------------
# dispatch


def _table(best):
    return {"entries": [{"dtype": "float32", "m": 4096, "k": 4096, "best": best}]}


def test_dispatch_follows_table():
    from numaccel.sparse import dispatch
    t = _table({"1": "permute", "4": "permute", "16": "tiled", "64": "dense"})
    assert [dispatch.choose(n, 4096, 4096, np.float32, table=t)
            for n in (1, 3, 4, 15, 16, 63, 64, 1000)] == \
        ["permute", "permute", "permute", "permute", "tiled", "dense", "dense", "dense"]
    # nearest layer by size; bf16 falls back to the float32 entry when not measured
    assert dispatch.choose(2, 1024, 1024, BF16, table=t) == "permute"
    # above the largest batch at which sparse was measured to win: dense (not measured)
    t2 = _table({"1": "permute", "8": "dense", "32": "tiled", "128": "dense"})
    assert [dispatch.choose(n, 4096, 4096, "float32", table=t2)
            for n in (8, 31, 32, 40, 200)] == ["dense", "dense", "tiled", "dense", "dense"]
    assert dispatch.choose(5, 64, 64, "float32", table={"entries": []}) == "dense"


def test_auto_uses_dispatch_and_dense_cache():
    from numaccel.sparse import dispatch, linear
    rng = np.random.default_rng(7)
    w = rand_24(rng, 16, 32, BF16)
    s = to_sparse_semi_structured(w)
    x = rng.standard_normal((3, 32)).astype(np.float32)
    try:
        dispatch.set_table({"entries": [{"dtype": "bfloat16", "m": 16, "k": 32,
                                         "best": {"1": "dense"}}]})
        y = linear(x, s)
        assert s.dense_cache_nbytes == 16 * 32 * 4    # the BLAS path ran
        dispatch.set_table({"entries": [{"dtype": "bfloat16", "m": 16, "k": 32,
                                         "best": {"1": "tiled", "8": "tiled"}}]})
        s.release_dense_cache()
        y2 = linear(x, s)
        assert s.dense_cache_nbytes == 0
    finally:
        dispatch.set_table(None)
    ref, scale = _ref_and_scale(x, w)
    check_close(y, ref, scale, np.float32)
    check_close(y2, ref, scale, np.float32)


# ---------------------------------------------------------------------------------------
# the linear_24 op


def test_linear_24_op_ref_infer_decompose_and_kernel():
    import numaccel.ops.sparse24  # noqa: F401  (registers the op)
    from numaccel.backends import find_kernel
    from numaccel.ir import AVal
    from numaccel.ops import get_op
    op = get_op("linear_24")
    rng = np.random.default_rng(8)
    for dtype in DTYPES:
        w = rand_24(rng, 9, 35, dtype)
        s = to_sparse_semi_structured(w)
        x = rng.standard_normal((2, 4, 35)).astype(dtype)
        b = rng.standard_normal(9).astype(dtype)
        ref, scale = _ref_and_scale(x, w, b)
        y = op.ref(x, s.values, s.meta, b, shape=s.shape)
        check_close(y, ref, scale, dtype)
        np.testing.assert_array_equal(op.decompose(x, s.values, s.meta, b, shape=s.shape), y)
        av = op.infer([AVal(a.shape, a.dtype) for a in (x, s.values, s.meta, b)],
                      shape=s.shape)
        assert av == AVal((2, 4, 9), dtype)
        k = find_kernel("linear_24", "cpu", x, s.values, s.meta, b, shape=s.shape)
        assert k is not None and k.name == "sparse24_cpu"
        check_close(k.fn(x, s.values, s.meta, b, shape=s.shape), ref, scale, dtype)
    assert find_kernel("linear_24", "cpu", np.ones((2, 35), np.float64), s.values, s.meta,
                       shape=s.shape) is None
    with pytest.raises(ValueError, match="in_features=35"):
        op.infer([AVal((2, 34), np.float32), AVal(s.values.shape, s.values.dtype),
                  AVal(s.meta.shape, np.uint16)], shape=s.shape)
    with pytest.raises(ValueError, match="needs values"):
        op.infer([AVal((2, 35), np.float32), AVal((9, 8), np.float32),
                  AVal(s.meta.shape, np.uint16)], shape=s.shape)


def test_cpu_clock_counts_numba_worker_threads():
    # the calibration's "cpu" clock must see work done on Numba's worker threads (a
    # parallel region runs there even with one thread): CPU time against CPU time, so
    # other processes' load does not matter
    import numba

    from numaccel.sparse import dispatch

    def work(a):
        s = 0.0
        for i in numba.prange(a.size):
            s += np.sin(a[i])
        return s

    par = numba.njit(parallel=True)(work)
    ser = numba.njit(work)
    a = np.linspace(0, 1, 1 << 21)
    t = dispatch.median_times({"par": lambda: par(a), "ser": lambda: ser(a)}, 3, "cpu")
    assert t["par"] > 0.3 * t["ser"], t
