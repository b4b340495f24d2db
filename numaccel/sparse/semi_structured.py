"""2:4 semi-structured sparse weights: compression, pruning and the compressed array.

The layout is documented byte by byte in ``docs/sparse24_layout.md``; in short, for a
``(M, K)`` weight (``K`` padded with zero columns to ``Kp``, a multiple of 16):

- ``values``: ``(M, Kp // 2)`` C-contiguous, in the weight's dtype: the two kept elements
  of every group of 4 columns, in increasing column order.
- ``meta``: ``(M, Kp // 16)`` C-contiguous ``uint16``: one 2-bit in-group position per kept
  value, packed least-significant bits first, 8 per word, so kept value ``j`` of a row
  has position ``(meta[r, j // 8] >> (2 * (j % 8))) & 3`` and column ``4 * (j // 2)`` plus
  that. Per group of 4 this is the 4-bit CUTLASS nibble (low 2 bits: first kept index,
  high 2 bits: second), with CUTLASS' choice of filler positions for groups with fewer
  than two non-zeros, so ``values`` of a float16/bfloat16 weight are byte-identical to
  CUTLASS' compressed operand and ``meta`` is CUTLASS' metadata before its row/column
  interleaving (``to_cutlass()`` applies it).

Example::

    import numpy as np
    from numaccel.sparse import prune_2_4, to_sparse_semi_structured

    w = prune_2_4(np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32))
    s = to_sparse_semi_structured(w)
    assert (s.to_dense() == w).all() and s.values.shape == (8, 16)
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

bfloat16 = np.dtype(ml_dtypes.bfloat16)
SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), bfloat16)
GROUP = 4          # 2 kept of every 4 consecutive elements along a row
COLS_PER_WORD = 16  # one uint16 metadata word covers 16 dense columns (8 kept values)


class SparsityPatternError(ValueError):
    """The weight does not have at most 2 non-zeros in every group of 4 along a row."""


# CUTLASS / cuSPARSELt nibble for each non-zero mask (bit i set = element i of the group is
# non-zero) with at most two bits set. Low 2 bits: first kept position, high 2 bits: second.
# Groups with fewer than two non-zeros keep zero "filler" positions; the fillers are the ones
# CUTLASS' own converter picks (both all-zero and single-non-zero cases), so that our bytes
# equal CUTLASS' bytes bit for bit, and the all-zero choice (2, 3) is also valid 1:2 (tf32).
_NIBBLE_OF_MASK = {
    0b0000: (2, 3), 0b0001: (0, 2), 0b0010: (1, 2), 0b0100: (2, 3), 0b1000: (2, 3),
    0b0011: (0, 1), 0b0101: (0, 2), 0b0110: (1, 2), 0b1001: (0, 3), 0b1010: (1, 3),
    0b1100: (2, 3),
}
_FIRST = np.full(16, -1, np.int8)
_SECOND = np.full(16, -1, np.int8)
for _m, (_a, _b) in _NIBBLE_OF_MASK.items():
    _FIRST[_m], _SECOND[_m] = _a, _b
del _m, _a, _b


def _check_weight(w: Any, what: str) -> np.ndarray:
    w = np.asarray(w)
    if w.ndim != 2:
        raise ValueError(f"{what} needs a 2-D weight (out_features, in_features), got shape "
                         f"{w.shape}; reshape it first")
    if w.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{what} supports float32, float16 and bfloat16 weights, got "
                        f"{w.dtype}; cast with w.astype(np.float32) first")
    return w


def _padded_cols(k: int) -> int:
    return -(-k // COLS_PER_WORD) * COLS_PER_WORD


def _pad_cols(w: np.ndarray) -> np.ndarray:
    m, k = w.shape
    kp = _padded_cols(k)
    if kp == k:
        return np.ascontiguousarray(w)
    out = np.zeros((m, kp), w.dtype)
    out[:, :k] = w
    return out


def pack_meta(positions: np.ndarray) -> np.ndarray:
    """Pack 2-bit in-group positions ``(M, Kp // 2)`` into ``(M, Kp // 16)`` uint16 words.

    Kept value ``j`` goes to bits ``2 * (j % 8)`` .. ``2 * (j % 8) + 1`` of word ``j // 8``.

    Example::

        >>> pack_meta(np.array([[0, 1, 2, 3, 0, 2, 1, 3]])).tolist()
        [[55524]]
    """
    p = np.asarray(positions).astype(np.uint16)
    m, n = p.shape
    if n % 8:
        raise ValueError(f"pack_meta needs a multiple of 8 positions per row, got {n}")
    shifts = (2 * np.arange(8, dtype=np.uint16))
    words = (p.reshape(m, n // 8, 8) << shifts).sum(axis=-1, dtype=np.uint32)
    return words.astype(np.uint16)


def unpack_meta(meta: np.ndarray) -> np.ndarray:
    """Inverse of ``pack_meta``: ``(M, W)`` uint16 words -> ``(M, 8 * W)`` positions 0..3.

    Example::

        >>> unpack_meta(np.array([[55524]], np.uint16)).tolist()
        [[0, 1, 2, 3, 0, 2, 1, 3]]
    """
    meta = np.asarray(meta, np.uint16)
    m, w = meta.shape
    shifts = (2 * np.arange(8, dtype=np.uint16))
    return ((meta[:, :, None] >> shifts) & np.uint16(3)).astype(np.uint8).reshape(m, 8 * w)


def _describe_first_bad_group(w: np.ndarray, counts: np.ndarray) -> str:
    r, g = np.argwhere(counts > 2)[0]
    c0 = 4 * int(g)
    vals = w[r, c0:c0 + 4]
    return (f"row {int(r)}, columns {c0}..{c0 + len(vals) - 1} hold {int(counts[r, g])} "
            f"non-zeros {vals.tolist()}")


def to_sparse_semi_structured(w: Any) -> SparseSemiStructuredArray:
    """Compress a 2-D weight with at most 2 non-zeros in every 4 consecutive row elements.

    ``w`` is ``(out_features, in_features)`` float32, float16 or bfloat16 (any strides).
    A trailing partial group (``in_features % 4 != 0``) is checked as if zero-padded.
    Raises ``SparsityPatternError`` (a ``ValueError``) naming the first offending group;
    use ``prune_2_4(w)`` to make a weight that qualifies. NaN and inf count as non-zero.

    Example::

        >>> w = np.array([[1, 0, 0, 2, 0, 3, 4, 0]], np.float32)
        >>> s = to_sparse_semi_structured(w)
        >>> s.values[0, :4].tolist(), s.shape
        ([1.0, 2.0, 3.0, 4.0], (1, 8))
    """
    w = _check_weight(w, "to_sparse_semi_structured")
    m, k = w.shape
    wp = _pad_cols(w)
    kp = wp.shape[1]
    g4 = wp.reshape(m, kp // GROUP, GROUP)
    nz = g4 != 0
    counts = nz.sum(axis=-1)
    if m and kp and counts.max() > 2:
        raise SparsityPatternError(
            f"to_sparse_semi_structured: weight of shape {w.shape} ({w.dtype}) is not 2:4 "
            f"sparse: {_describe_first_bad_group(w, counts)}; at most 2 of every 4 "
            "consecutive elements along a row may be non-zero. Use "
            "numaccel.sparse.prune_2_4(w) to keep the 2 largest of every 4.")
    mask = (nz * np.array([1, 2, 4, 8], np.uint8)).sum(axis=-1, dtype=np.uint8)
    first = _FIRST[mask].astype(np.intp)
    second = _SECOND[mask].astype(np.intp)
    pos = np.stack([first, second], axis=-1)               # (m, groups, 2)
    values = np.take_along_axis(g4, pos, axis=-1).reshape(m, kp // 2)
    meta = pack_meta(pos.reshape(m, kp // 2))
    return SparseSemiStructuredArray(np.ascontiguousarray(values), meta, (m, k))


def prune_2_4(w: Any) -> np.ndarray:
    """Zero the two smallest-magnitude elements of every group of 4 along each row.

    Returns a new array of ``w``'s dtype and shape that ``to_sparse_semi_structured``
    accepts. Ties keep the earlier element; NaN counts as the largest magnitude (so a
    NaN is never silently dropped). A trailing partial group is pruned as if zero-padded.

    Example::

        >>> prune_2_4(np.array([[1, -5, 3, 2]], np.float32)).tolist()
        [[0.0, -5.0, 3.0, 0.0]]
    """
    w = _check_weight(w, "prune_2_4")
    m, k = w.shape
    wp = _pad_cols(w)
    g4 = wp.reshape(m, wp.shape[1] // GROUP, GROUP)
    mag = np.abs(g4.astype(np.float32))
    mag = np.where(np.isnan(mag), np.inf, mag)
    # stable descending sort on -mag keeps the earlier of equal magnitudes
    order = np.argsort(-mag, axis=-1, kind="stable")
    keep = np.zeros(g4.shape, bool)
    np.put_along_axis(keep, order[..., :2], True, axis=-1)
    out = np.where(keep, g4, np.zeros((), w.dtype)).reshape(wp.shape)[:, :k]
    return np.ascontiguousarray(out)


def _reorder_offsets(m: int, words: int) -> np.ndarray:
    """Flat destination of each logical uint16 metadata word in CUTLASS' layout.

    CUTLASS' sparse tensor-core GEMM reads 16-bit metadata as ColumnMajorInterleaved<2>
    after permuting rows within blocks of 32 (so that the words one warp's mma.sp needs
    are adjacent) and swapping the off-diagonal words of every 2x2 block.
    """
    r = np.arange(m)[:, None]
    c = np.arange(words)[None, :]
    # rows: inside each block of 32, row 8*a + b moves to 4*b + a (a < 4, b < 8)
    dr = np.broadcast_to((r // 32) * 32 + (r % 8) * 4 + (r % 32) // 8, (m, words))
    dc = np.broadcast_to(c, (m, words))
    # swap the top-right and bottom-left words of each 2x2 block
    swap = ((dr % 2 == 0) & (dc % 2 == 1)).astype(np.intp) - \
        ((dr % 2 == 1) & (dc % 2 == 0)).astype(np.intp)
    dr = dr + swap
    dc = dc - swap
    # ColumnMajorInterleaved<2>: pairs of columns stored row after row, column pair by pair
    return ((dc // 2) * (m * 2) + dr * 2 + dc % 2).reshape(-1)


class SparseSemiStructuredArray:
    """A 2-D weight in 2:4 compressed form (values + 2-bit metadata); see module docs.

    Attributes: ``values``, ``meta``, ``shape`` (the dense shape), ``dtype``, ``nbytes``
    (values + metadata bytes). ``x @ s.T`` and ``numaccel.sparse.linear(x, s, bias)``
    compute with the compressed form.

    Example::

        >>> s = to_sparse_semi_structured(np.eye(4, 16, dtype=np.float32))
        >>> s.shape, s.dtype, s.nbytes
        ((4, 16), dtype('float32'), 136)
    """

    # ndarray.__matmul__ then returns NotImplemented, so `x @ s.T` reaches __rmatmul__
    __array_ufunc__ = None

    def __init__(self, values: np.ndarray, meta: np.ndarray, shape: tuple):
        m, k = (int(d) for d in shape)
        kp = _padded_cols(k)
        values = np.asarray(values)
        meta = np.asarray(meta)
        if values.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"values must be float32, float16 or bfloat16, got {values.dtype}")
        if values.shape != (m, kp // 2) or meta.shape != (m, kp // COLS_PER_WORD):
            raise ValueError(f"dense shape {(m, k)} needs values of shape {(m, kp // 2)} and "
                             f"meta of shape {(m, kp // COLS_PER_WORD)}, got {values.shape} "
                             f"and {meta.shape}")
        if meta.dtype != np.uint16:
            raise TypeError(f"meta must be uint16, got {meta.dtype}")
        self.values = np.ascontiguousarray(values)
        self.meta = np.ascontiguousarray(meta)
        self.shape = (m, k)
        self._dense_cache: np.ndarray | None = None

    # -- honest array attributes -------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return 2

    @property
    def nbytes(self) -> int:
        """Bytes of the compressed form: values plus metadata (not any dense cache)."""
        return int(self.values.nbytes + self.meta.nbytes)

    @property
    def dense_cache_nbytes(self) -> int:
        """Bytes of the float32 dense copy kept for the BLAS path (0 until first used)."""
        return 0 if self._dense_cache is None else int(self._dense_cache.nbytes)

    def release_dense_cache(self) -> None:
        """Drop the float32 dense copy that the dense-BLAS dispatch path materializes."""
        self._dense_cache = None

    @property
    def T(self) -> _TransposedSparse:
        return _TransposedSparse(self)

    def __repr__(self) -> str:
        return (f"SparseSemiStructuredArray(shape={self.shape}, dtype={self.dtype}, "
                f"nbytes={self.nbytes})")

    # -- conversions ---------------------------------------------------------------------
    def positions(self) -> np.ndarray:
        """In-group position (0..3) of every kept value, shape ``values.shape``, uint8."""
        return unpack_meta(self.meta)

    def columns(self) -> np.ndarray:
        """Dense column of every kept value, shape ``values.shape`` (may be >= K: padding)."""
        j = np.arange(self.values.shape[1])
        return (4 * (j // 2))[None, :] + self.positions().astype(np.intp)

    def to_dense(self) -> np.ndarray:
        """The dense ``(M, K)`` weight, exactly (pruned positions are +0.0).

        Example::

            >>> w = np.array([[0, 7, 0, 0]], np.float16)
            >>> to_sparse_semi_structured(w).to_dense().tolist()
            [[0.0, 7.0, 0.0, 0.0]]
        """
        from numaccel.kernels_cpu import sparse24 as _k
        return _k.decompress(self.values, self.meta, self.shape)

    def _dense_f32(self) -> np.ndarray:
        if self._dense_cache is None:
            from numaccel.kernels_cpu import sparse24 as _k
            self._dense_cache = _k.decompress(self.values, self.meta, self.shape,
                                              out_dtype=np.float32)
        return self._dense_cache

    def to_cutlass(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, metadata) exactly as CUTLASS' sparse tensor-core GEMM reads them.

        Rows are zero-padded to a multiple of 32 (CUTLASS' tile of metadata rows) and, for
        16-bit types, columns to a multiple of 32 (an even number of metadata words); the
        padding is all-zero groups, so the caller pads x with zero columns (or not: the
        values are zero) and slices the extra output rows off. float16/bfloat16: ``values`` are our
        values (same bytes) and the metadata is ``meta`` permuted (see the layout doc).
        float32 runs as tf32, whose tensor cores need 1:2 sparsity (at most one non-zero
        in every pair): a 2:4 float32 weight that is not 1:2 raises ``SparsityPatternError``;
        cast it to float16/bfloat16 for the GPU instead.

        Example::

            >>> s = to_sparse_semi_structured(prune_2_4(np.ones((32, 64), np.float16)))
            >>> [a.shape for a in s.to_cutlass()]
            [(32, 32), (32, 4)]
        """
        m, k = self.shape
        mp = -(-m // 32) * 32
        vals = self.values
        if self.dtype == np.float32:
            kp = _padded_cols(k)
            pairs = np.zeros((m, kp), np.float32)
            pairs[:, :k] = self.to_dense()
            pairs = pairs.reshape(m, kp // 2, 2)
            full = (pairs != 0).all(axis=-1)
            if full.any():
                r, p = np.argwhere(full)[0]
                raise SparsityPatternError(
                    f"to_cutlass: float32 runs as tf32 on sparse tensor cores, which need 1:2 "
                    f"sparsity (at most 1 non-zero in every pair of columns); row {int(r)}, "
                    f"columns {2 * int(p)}..{2 * int(p) + 1} of the {self.shape} weight are "
                    "both non-zero. Prune pairs instead, or cast to float16/bfloat16.")
            # tf32: one value per pair of columns and one nibble per pair, as CUTLASS'
            # converter writes them: 0b0100 (first element) when it is non-zero, else
            # 0b1110 (second element, which may be zero too).
            first_zero = pairs[..., 0] == 0
            vals = np.where(first_zero, pairs[..., 1], pairs[..., 0]).astype(np.float32)
            nib = np.where(first_zero, 0b1110, 0b0100).astype(np.uint16)
            shifts = 4 * np.arange(4, dtype=np.uint16)
            meta = (nib.reshape(m, kp // 8, 4) << shifts).sum(axis=-1, dtype=np.uint32)
            meta = meta.astype(np.uint16)
        else:
            meta = self.meta
            if meta.shape[1] % 2:
                # the 2x2 word swizzle needs an even number of words per row: add one
                # all-zero 16-column block (values 0, nibbles 0b1110)
                meta = np.concatenate([meta, np.full((m, 1), 0xEEEE, np.uint16)], axis=1)
                vals = np.concatenate([vals, np.zeros((m, 8), vals.dtype)], axis=1)
        if mp != m:
            vals = np.concatenate([vals, np.zeros((mp - m, vals.shape[1]), vals.dtype)])
            # all-zero groups in the padding rows: nibble 0b1110 = positions (2, 3)
            fill = np.full((mp - m, meta.shape[1]), 0xEEEE, np.uint16)
            meta = np.concatenate([meta, fill])
        out = np.empty(meta.size, np.uint16)
        out[_reorder_offsets(mp, meta.shape[1])] = meta.reshape(-1)
        return np.ascontiguousarray(vals), out.reshape(mp, meta.shape[1])

    # -- products ------------------------------------------------------------------------
    def __matmul__(self, other):
        raise TypeError("SparseSemiStructuredArray @ x is not supported; the compressed "
                        "weight is used as in nn.Linear: write x @ w.T (or "
                        "numaccel.sparse.linear(x, w, bias)), or densify with w.to_dense()")

    def __rmatmul__(self, other):
        raise TypeError(f"x @ w with a compressed (out, in) = {self.shape} weight contracts "
                        "over its out dim; write x @ w.T (the nn.Linear convention) or use "
                        "w.to_dense()")


class _TransposedSparse:
    """``s.T``: only good for ``x @ s.T`` (and ``.T`` back, ``to_dense()``)."""

    __array_ufunc__ = None

    def __init__(self, base: SparseSemiStructuredArray):
        self.base = base

    @property
    def T(self) -> SparseSemiStructuredArray:
        return self.base

    @property
    def shape(self) -> tuple:
        return self.base.shape[::-1]

    @property
    def dtype(self) -> np.dtype:
        return self.base.dtype

    ndim = 2

    def to_dense(self) -> np.ndarray:
        return self.base.to_dense().T

    def __rmatmul__(self, x):
        from .products import linear
        return linear(x, self.base)

    def __matmul__(self, other):
        raise TypeError("w.T @ x with a compressed weight is not supported; write "
                        "x @ w.T (or numaccel.sparse.linear), or use w.to_dense().T @ x")

    def __repr__(self) -> str:
        return f"{self.base!r}.T"
