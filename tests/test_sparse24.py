"""2:4 semi-structured sparsity: layout, conversions, products, dispatch, the linear_24 op."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaccel.sparse import (SparseSemiStructuredArray, SparsityPatternError, prune_2_4,
                             to_sparse_semi_structured)
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
