"""Functional neural-network ops on NumPy arrays.

``scaled_dot_product_attention`` has the semantics of PyTorch's function of the same name and
runs the flash-style Numba kernels of ``numaccel.kernels_cpu.sdpa``;
``scaled_dot_product_attention_with_lse`` also returns the log-sum-exp of every query row and
``scaled_dot_product_attention_backward`` turns it into gradients for q, k and v.

Example::

    import numpy as np
    from numaccel.nn.functional import scaled_dot_product_attention
    q = k = v = np.random.default_rng(0).standard_normal((2, 4, 128, 64), np.float32)
    out = scaled_dot_product_attention(q, k, v, is_causal=True)      # (2, 4, 128, 64)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..kernels_cpu import sdpa as _k
from ..kernels_cpu.bf16 import as_bits, from_bits, to_bf16

__all__ = [
    "draw_dropout_seed",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
    "scaled_dot_product_attention_with_lse",
]

_BF16 = np.dtype(ml_dtypes.bfloat16)
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), _BF16)


def draw_dropout_seed(rng: np.random.Generator | None) -> int:
    """The one value SDPA dropout draws from ``rng``: ``rng.integers(0, 2**63)`` (int64).

    Every keep/drop decision is then a hash of (seed, batch entry, query, key), see
    ``numaccel.kernels_cpu.sdpa.dropout_keep``; ``rng=None`` uses a fresh
    ``numpy.random.default_rng()`` (not reproducible).

    Example::

        >>> draw_dropout_seed(np.random.default_rng(0)) == draw_dropout_seed(
        ...     np.random.default_rng(0))
        True
    """
    if rng is None:
        rng = np.random.default_rng()
    return int(rng.integers(0, 2 ** 63, dtype=np.int64))


@dataclass
class _Canon:
    """SDPA inputs in the kernels' canonical form (see kernels_cpu/sdpa.py)."""
    batch: tuple
    L: int
    S: int
    E: int
    Ev: int
    q3: np.ndarray
    k3: np.ndarray
    v3: np.ndarray
    qidx: np.ndarray
    kidx: np.ndarray
    vidx: np.ndarray
    mask3: np.ndarray
    midx: np.ndarray
    mkind: int
    scale: float
    dtype: np.dtype


def _index_map(xbatch: tuple, batch: tuple, groups: int = 1) -> np.ndarray:
    ids = np.arange(math.prod(xbatch), dtype=np.int64).reshape(xbatch)
    if groups > 1:
        ids = np.repeat(ids, groups, axis=-1)      # torch's repeat_interleave on heads
    return np.ascontiguousarray(np.broadcast_to(ids, batch)).reshape(-1)


def _canon(query, key, value, attn_mask, is_causal, scale, enable_gqa) -> _Canon:
    q, k, v = np.asarray(query), np.asarray(key), np.asarray(value)
    shapes = f"query {q.shape}, key {k.shape}, value {v.shape}"
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"scaled_dot_product_attention: query, key and value must have the "
                        f"same dtype, got {q.dtype}, {k.dtype}, {v.dtype}; cast them first")
    if q.dtype not in _DTYPES:
        raise TypeError(f"scaled_dot_product_attention: dtype {q.dtype} is not supported; "
                        "use float32, float64 or bfloat16")
    if q.ndim < 2 or q.ndim != k.ndim or q.ndim != v.ndim:
        raise ValueError(f"scaled_dot_product_attention: query, key and value must have the "
                         f"same rank >= 2 (..., seq, features); got {shapes}")
    L, E = q.shape[-2:]
    S, Ek = k.shape[-2:]
    Sv, Ev = v.shape[-2:]
    if Ek != E:
        raise ValueError(f"scaled_dot_product_attention: head dims differ, query has {E} and "
                         f"key has {Ek} features ({shapes})")
    if Sv != S:
        raise ValueError(f"scaled_dot_product_attention: key and value sequence lengths "
                         f"differ ({S} vs {Sv}; {shapes})")
    qb, kb, vb = q.shape[:-2], k.shape[:-2], v.shape[:-2]
    gk = gv = 1
    if enable_gqa and q.ndim >= 3:
        hq, hk, hv = qb[-1], kb[-1], vb[-1]
        if hk == 0 or hv == 0 or hq % hk or hq % hv:
            raise ValueError(f"scaled_dot_product_attention: with enable_gqa the number of "
                             f"query heads ({hq}) must be a multiple of the key ({hk}) and "
                             f"value ({hv}) heads (dim -3; {shapes})")
        gk, gv = hq // hk, hq // hv
    kb2 = kb[:-1] + (kb[-1] * gk,) if gk > 1 else kb
    vb2 = vb[:-1] + (vb[-1] * gv,) if gv > 1 else vb
    try:
        batch = np.broadcast_shapes(qb, kb2, vb2)
    except ValueError:
        hint = "" if enable_gqa else " (different head counts need enable_gqa=True)"
        raise ValueError(f"scaled_dot_product_attention: batch dims do not broadcast: "
                         f"{shapes}{hint}") from None
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    bits = q.dtype == _BF16
    q3 = (as_bits(q) if bits else q).reshape((math.prod(qb), L, E))
    k3 = (as_bits(k) if bits else k).reshape((math.prod(kb), S, E))
    v3 = (as_bits(v) if bits else v).reshape((math.prod(vb), S, Ev))
    qidx = _index_map(qb, batch)
    kidx = _index_map(kb, batch, gk)
    vidx = _index_map(vb, batch, gv)
    mkind = _k.MASK_NONE
    acc = np.float64 if q.dtype == np.float64 else np.float32
    # one mask type for the kernels keeps them to one compiled signature per dtype: a bool
    # mask becomes its additive twin (0 / -inf), which is also how PyTorch applies it
    mask3 = np.zeros((1, 1, 1), acc)
    midx = np.zeros(max(1, math.prod(batch)), np.int64)
    if attn_mask is not None:
        if is_causal:
            raise ValueError("scaled_dot_product_attention: pass either attn_mask or "
                             "is_causal=True, not both (as PyTorch)")
        m = np.asarray(attn_mask)
        mkind = _k.MASK_ADD
        if m.dtype == np.bool_:
            m = np.where(m, acc(0), acc(-np.inf))
        elif m.dtype == q.dtype:
            m = m.astype(acc, copy=False)
        else:
            raise TypeError(f"scaled_dot_product_attention: attn_mask must be bool or have the "
                            f"query's dtype {q.dtype}, got {m.dtype}")
        target = batch + (L, S)
        if m.ndim < 2:
            m = m.reshape((1,) * (2 - m.ndim) + m.shape)
        try:
            ok = np.broadcast_shapes(m.shape, target) == target
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"scaled_dot_product_attention: attn_mask of shape {m.shape} "
                             f"does not broadcast to the attention shape {target} ({shapes})")
        m = np.ascontiguousarray(m, acc)
        mask3 = m.reshape((math.prod(m.shape[:-2]),) + m.shape[-2:])   # the kernels broadcast
        if mask3.size == 0:
            mask3 = np.zeros((1, 1, 1), acc)
        midx = _index_map(m.shape[:-2], batch)
    return _Canon(batch, L, S, E, Ev, q3, k3, v3, qidx, kidx, vidx, mask3, midx, mkind,
                  scale, q.dtype)


def _seed(dropout_p, dropout_seed, rng) -> int:
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got "
                         f"{dropout_p}")
    if dropout_p == 0:
        return 0
    return int(dropout_seed) if dropout_seed is not None else draw_dropout_seed(rng)


def scaled_dot_product_attention_with_lse(
        query: np.ndarray, key: np.ndarray, value: np.ndarray,
        attn_mask: np.ndarray | None = None, dropout_p: float = 0.0, is_causal: bool = False,
        scale: float | None = None, enable_gqa: bool = False, *,
        rng: np.random.Generator | None = None, dropout_seed: int | None = None):
    """Attention output and the log-sum-exp of every query row's scaled, masked scores.

    Returns ``(out, lse)``: ``out`` has shape ``batch + (L, Ev)`` and the query's dtype,
    ``lse`` shape ``batch + (L,)`` in float32 (float64 for float64 inputs); a fully masked row
    has output 0 and lse -inf. With dropout, ``dropout_seed`` (else one draw from ``rng``, see
    ``draw_dropout_seed``) fixes the mask; pass the same seed to the backward.

    Example::

        out, lse = scaled_dot_product_attention_with_lse(q, k, v, is_causal=True)
        dq, dk, dv = scaled_dot_product_attention_backward(g, q, k, v, out, lse,
                                                           is_causal=True)
    """
    c = _canon(query, key, value, attn_mask, is_causal, scale, enable_gqa)
    seed = _seed(dropout_p, dropout_seed, rng)
    n_out = math.prod(c.batch)
    out, lse = _k.flash_forward(c.q3, c.qidx, c.k3, c.kidx, c.v3, c.vidx, c.mask3, c.midx,
                                c.mkind, is_causal, c.scale, seed, float(dropout_p), n_out)
    out = out.reshape(c.batch + (c.L, c.Ev))
    lse = lse.reshape(c.batch + (c.L,))
    if c.dtype == _BF16:
        out = to_bf16(out)
    return out, lse


def scaled_dot_product_attention(
        query: np.ndarray, key: np.ndarray, value: np.ndarray,
        attn_mask: np.ndarray | None = None, dropout_p: float = 0.0, is_causal: bool = False,
        scale: float | None = None, enable_gqa: bool = False, *,
        rng: np.random.Generator | None = None) -> np.ndarray:
    """softmax(q @ k^T * scale + mask) @ v, like ``torch.nn.functional.scaled_dot_product_attention``.

    query (..., L, E), key (..., S, E), value (..., S, Ev); leading dims broadcast, and with
    ``enable_gqa`` dim -3 of key/value may divide the query's head count (each key head serves
    consecutive query heads). ``attn_mask``: bool (True = attend) or additive, of the query's
    dtype, broadcastable to (..., L, S). ``is_causal``: top-left aligned lower triangle
    (``tril(ones(L, S))``). ``scale`` defaults to 1/sqrt(E). ``dropout_p`` drops attention
    weights with a mask fixed by one draw from ``rng`` (see ``draw_dropout_seed``).
    float32, float64 and bfloat16 (float32 accumulation). Fully masked rows give zeros.

    Example::

        >>> q = np.ones((1, 2, 3, 4), np.float32)
        >>> scaled_dot_product_attention(q, q, q).shape
        (1, 2, 3, 4)
    """
    return scaled_dot_product_attention_with_lse(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, rng=rng)[0]


def _unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum g (broadcast result) back to ``shape``."""
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, (a, b) in enumerate(zip(shape, g.shape)) if a == 1 and b != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def _ungroup(g: np.ndarray, heads: int) -> np.ndarray:
    """Sum the gradients of the query heads that share one key/value head (GQA)."""
    if g.ndim < 3 or g.shape[-3] == heads:
        return g
    gsz = g.shape[-3] // heads
    return g.reshape(g.shape[:-3] + (heads, gsz) + g.shape[-2:]).sum(axis=-3)


def scaled_dot_product_attention_backward(
        grad_out: np.ndarray, query: np.ndarray, key: np.ndarray, value: np.ndarray,
        out: np.ndarray, lse: np.ndarray, attn_mask: np.ndarray | None = None,
        dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
        enable_gqa: bool = False, *, dropout_seed: int | None = None):
    """Gradients (dq, dk, dv) of ``scaled_dot_product_attention`` for the upstream grad_out.

    ``out`` and ``lse`` come from ``scaled_dot_product_attention_with_lse`` with the same
    arguments (and ``dropout_seed`` when dropout_p > 0); the probabilities are recomputed
    tile by tile, so memory stays linear in the sequence lengths. Gradients have the shapes
    and dtypes of q, k, v (summed over broadcast batch dims and GQA groups).

    Example::

        out, lse = scaled_dot_product_attention_with_lse(q, k, v)
        dq, dk, dv = scaled_dot_product_attention_backward(np.ones_like(out), q, k, v, out, lse)
    """
    c = _canon(query, key, value, attn_mask, is_causal, scale, enable_gqa)
    if dropout_p > 0 and dropout_seed is None:
        raise ValueError("scaled_dot_product_attention_backward: dropout_p > 0 needs the "
                         "dropout_seed used by the forward")
    seed = _seed(dropout_p, dropout_seed, None)
    go, o = np.asarray(grad_out), np.asarray(out)
    want = c.batch + (c.L, c.Ev)
    if go.shape != want or o.shape != want:
        raise ValueError(f"scaled_dot_product_attention_backward: grad_out {go.shape} and out "
                         f"{o.shape} must have the output shape {want}")
    n_out = math.prod(c.batch)
    acc = np.float64 if c.dtype == np.float64 else np.float32

    def f(a):   # bf16 bits / any float -> the accumulation type
        return from_bits(a).astype(acc) if a.dtype == np.uint16 else np.asarray(a, acc)

    go3 = go.astype(acc).reshape(n_out, c.L, c.Ev)
    o3 = o.astype(acc).reshape(n_out, c.L, c.Ev)
    lse3 = np.asarray(lse, acc).reshape(n_out, c.L)
    dq, dk, dv = _k.flash_backward(go3, o3, lse3, f(c.q3), c.qidx, f(c.k3), c.kidx, f(c.v3),
                                   c.vidx, c.mask3, c.midx, c.mkind, is_causal, c.scale, seed,
                                   float(dropout_p))
    q, k, v = np.asarray(query), np.asarray(key), np.asarray(value)
    dq = _unbroadcast(dq.reshape(c.batch + (c.L, c.E)), q.shape)
    dk = _unbroadcast(_ungroup(dk.reshape(c.batch + (c.S, c.E)), k.shape[-3]
                               if k.ndim >= 3 else 1), k.shape)
    dv = _unbroadcast(_ungroup(dv.reshape(c.batch + (c.S, c.Ev)), v.shape[-3]
                               if v.ndim >= 3 else 1), v.shape)
    if c.dtype == _BF16:
        return to_bf16(dq), to_bf16(dk), to_bf16(dv)
    return dq.astype(c.dtype, copy=False), dk.astype(c.dtype, copy=False), \
        dv.astype(c.dtype, copy=False)
