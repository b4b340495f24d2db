"""The ``sdpa`` composite op: scaled-dot-product attention, declared once.

- ``ref``: plain NumPy, computed in float64 and cast back (the spec the kernels are tested
  against); it also applies dropout, with the kernels' hash of ``dropout_seed``.
- ``infer``: output ``AVal`` = broadcast batch dims + (L, Ev), the query's dtype.
- ``decompose``: the same computation with NumPy calls only (matmul, swapaxes, max, exp, sum,
  where, tril, repeat), in the inputs' dtype, so that a tracer can lower it to primitives on
  backends without a hand-written kernel (dropout_p must then be 0).
- The CPU kernel (``numaccel.kernels_cpu.sdpa`` through ``numaccel.nn.functional``) is
  registered for backend ``"cpu"`` with a ``supports`` predicate.

Inputs: ``(q, k, v)`` or ``(q, k, v, attn_mask)``; attrs: ``dropout_p``, ``is_causal``,
``scale``, ``enable_gqa``, ``dropout_seed`` (all JSON-able).

Example::

    from numaccel.ops import get_op
    import numaccel.ops.attention  # registers "sdpa"
    out = get_op("sdpa").ref(q, k, v, is_causal=True)
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..backends import register_kernel
from ..ir import AVal
from .table import OpDef, register_op

_BF16 = np.dtype(ml_dtypes.bfloat16)
_SUPPORTED = (np.dtype(np.float32), np.dtype(np.float64), _BF16)


def _expand_gqa(q, k, v, enable_gqa):
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
    if enable_gqa and q.ndim >= 3 and v.shape[-3] != q.shape[-3]:
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    return k, v


def sdpa_decompose(q, k, v, attn_mask=None, *, dropout_p: float = 0.0,
                   is_causal: bool = False, scale: float | None = None,
                   enable_gqa: bool = False, dropout_seed: int = 0):
    """SDPA with NumPy calls only, in the inputs' dtype (no dropout).

    Example::

        out = sdpa_decompose(q, k, v, is_causal=True)
    """
    if dropout_p:
        raise NotImplementedError("sdpa decomposition has no dropout; use the reference or "
                                  "a backend kernel for dropout_p > 0")
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = 1.0 / math.sqrt(E) if scale is None else scale
    k, v = _expand_gqa(q, k, v, enable_gqa)
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.asarray(sc, q.dtype)
    ninf = np.asarray(-np.inf, s.dtype)
    if is_causal:
        s = np.where(np.tril(np.ones((L, S), dtype=bool)), s, ninf)
    if attn_mask is not None:
        if attn_mask.dtype == np.bool_:
            s = np.where(attn_mask, s, ninf)
        else:
            s = s + attn_mask
    mx = np.max(s, axis=-1, keepdims=True) if S else np.zeros(s.shape[:-1] + (1,), s.dtype)
    mx = np.where(mx == ninf, np.zeros_like(mx), mx)       # fully masked rows -> zeros
    e = np.exp(s - mx)
    den = np.sum(e, axis=-1, keepdims=True)
    p = e / np.where(den == 0, np.ones_like(den), den)
    return np.matmul(p, v)


def sdpa_reference(q, k, v, attn_mask=None, *, dropout_p: float = 0.0, is_causal: bool = False,
                   scale: float | None = None, enable_gqa: bool = False,
                   dropout_seed: int = 0) -> np.ndarray:
    """Plain NumPy SDPA in float64 (cast back to q's dtype); dropout by the kernels' hash.

    Example::

        ref = sdpa_reference(q, k, v, attn_mask=mask, dropout_p=0.1, dropout_seed=7)
    """
    from ..kernels_cpu.sdpa import dropout_keep
    dt = q.dtype
    q64, k64, v64 = (np.asarray(x, np.float64) for x in (q, k, v))
    m = None
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        m = m if m.dtype == np.bool_ else m.astype(np.float64)
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = 1.0 / math.sqrt(E) if scale is None else scale
    k64, v64 = _expand_gqa(q64, k64, v64, enable_gqa)
    with np.errstate(invalid="ignore"):
        s = np.matmul(q64, np.swapaxes(k64, -1, -2)) * sc
        if is_causal:
            s = np.where(np.tril(np.ones((L, S), dtype=bool)), s, -np.inf)
        if m is not None:
            s = np.where(m, s, -np.inf) if m.dtype == np.bool_ else s + m
        mx = s.max(axis=-1, keepdims=True) if S else np.zeros(s.shape[:-1] + (1,))
        mx = np.where(np.isneginf(mx), 0.0, mx)
        e = np.exp(s - mx)
        den = e.sum(axis=-1, keepdims=True)
        p = e / np.where(den == 0, 1.0, den)
    if dropout_p:
        batch = p.shape[:-2]
        n = np.arange(math.prod(batch), dtype=np.uint64).reshape(batch + (1, 1))
        i = np.arange(L, dtype=np.uint64)[:, None]
        j = np.arange(S, dtype=np.uint64)
        keep = dropout_keep(dropout_seed, n, i, j, L, S, round(dropout_p * (1 << 24)))
        p = np.where(keep, p / (1.0 - dropout_p) if dropout_p < 1 else 0.0, 0.0)
    out = np.matmul(p, v64)
    return out.astype(dt)


def _bcast(*shapes):
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        ds = [s[len(s) - nd + i] for s in shapes if len(s) - nd + i >= 0]
        res = 1
        for d in ds:
            if isinstance(d, int) and d == 1:
                continue
            if isinstance(res, int) and res == 1:
                res = d
            elif not (res == d):  # noqa: SIM201 - symbolic dims define ==, not !=
                raise ValueError(f"sdpa: batch dims {shapes} do not broadcast")
        out.append(res)
    return tuple(out)


def sdpa_infer(avals, *, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
               dropout_seed=0) -> AVal:
    """Shape/dtype rule: broadcast(batch dims) + (L, Ev), the query's dtype.

    Example::

        sdpa_infer([AVal((2, 8, 16, 64), np.float32)] * 3)   # float32[2, 8, 16, 64]
    """
    q, k, v = avals[:3]
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"sdpa: dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    kb, vb = tuple(k.shape[:-2]), tuple(v.shape[:-2])
    if enable_gqa and q.ndim >= 3:
        kb, vb = kb[:-1] + (q.shape[-3],), vb[:-1] + (q.shape[-3],)
    batch = _bcast(tuple(q.shape[:-2]), kb, vb)
    return AVal(batch + (q.shape[-2], v.shape[-1]), q.dtype)


def _cpu_supports(q, k, v, attn_mask=None, **attrs) -> bool:
    dts = {np.asarray(x).dtype for x in (q, k, v)}
    if len(dts) != 1 or next(iter(dts)) not in _SUPPORTED:
        return False
    if not (np.ndim(q) == np.ndim(k) == np.ndim(v) >= 2):
        return False
    return attn_mask is None or np.asarray(attn_mask).dtype in (np.dtype(bool), *dts)


def sdpa_cpu(q, k, v, attn_mask=None, *, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False, dropout_seed=0):
    """The flash CPU kernel behind the op (``numaccel.nn.functional``)."""
    from ..nn.functional import scaled_dot_product_attention_with_lse
    return scaled_dot_product_attention_with_lse(
        q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa,
        dropout_seed=dropout_seed)[0]


SDPA = register_op(OpDef(
    "sdpa", "composite", sdpa_reference, sdpa_infer, decompose=sdpa_decompose,
    doc="scaled-dot-product attention (torch semantics); inputs q, k, v[, attn_mask]"),
    replace=True)
register_kernel("sdpa", "cpu", sdpa_cpu, supports=_cpu_supports, name="flash_sdpa_cpu")
