"""Flash-attention SDPA forward and backward (numba-cuda), torch's semantics.

``scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)``
matches ``torch.nn.functional.scaled_dot_product_attention`` (and the CPU
``numaccel.nn.functional`` version): q (..., Hq, L, E), k (..., Hk, S, E), v (..., Hk, S, Ev);
bool masks keep True, float masks add, both broadcast to (..., L, S); ``is_causal`` is the
top-left aligned ``tril(ones(L, S))``; with ``enable_gqa`` each key/value head serves
``Hq // Hk`` consecutive query heads; fully masked rows give 0 (and lse -inf), as torch does.
float32, float16, bfloat16 (float32 accumulation) and float64. ``dropout_p`` must be 0 here.

Forward: one thread per query row, ``BQ`` rows per block; the block streams ``BK``-key tiles
of K and V through shared memory (widened to the accumulation type once per tile) and each
thread keeps its scaled query row, running max, running sum and output row in registers/local
memory (online softmax: the running output is rescaled only when the max grows). Memory is
linear in L and S; the log-sum-exp of every row is returned for the backward.

Backward (flash-attention 2 recomputation): ``D_i = dO_i . O_i`` per row, then one kernel
with a thread per query row for dQ (K/V tiles in shared memory) and one with a thread per key
row for dK/dV (Q/dO tiles in shared memory; a key head sums over its GQA group), recomputing
``P = exp(s - lse)`` tile by tile.

Example::

    out = scaled_dot_product_attention(q, k, v, is_causal=True)
    out, lse = scaled_dot_product_attention_with_lse(q, k, v)
    dq, dk, dv = scaled_dot_product_attention_backward(g, q, k, v, out, lse)
"""
from __future__ import annotations

import math
from typing import Iterator, Optional

import numpy as np
from numba import cuda

from . import _runtime as rt
from ._runtime import nt
from .elementwise import copy as _copy

__all__ = ["scaled_dot_product_attention", "scaled_dot_product_attention_with_lse",
           "scaled_dot_product_attention_backward"]

_KERNELS: dict = {}
NEG_INF = -math.inf


def _tiles(D: int, DV: int):
    """(threads per block, tile length): tiles of K and V (or Q and dO) fit 32 KB of shared."""
    if rt.SIM:
        return 4, 4
    return 64, _tiles_device(D, DV)


def _make_fwd(kind, mkind, mmode, causal, D, DV, NT, TK):
    ld, st, acc = rt.LOAD[kind], rt.STORE[kind], rt.ACC[kind]
    ldm = rt.LOAD.get(mkind, rt.LOAD["f32"])
    has_mask, bool_mask = mmode != 0, mmode == 1

    @cuda.jit
    def k_sdpa_fwd(q, k, v, mask, scale, out, lse):
        Ks = cuda.shared.array((TK, D), acc)
        Vs = cuda.shared.array((TK, DV), acc)
        qr = cuda.local.array(D, acc)
        o = cuda.local.array(DV, acc)
        t = cuda.threadIdx.x
        B, H, L = q.shape[0], q.shape[1], q.shape[2]
        S = k.shape[2]
        group = H // k.shape[1]
        for bh in range(cuda.blockIdx.y, B * H, cuda.gridDim.y):
            b = bh // H
            h = bh % H
            hk = h // group
            for qt in range(cuda.blockIdx.x, (L + NT - 1) // NT, cuda.gridDim.x):
                row = qt * NT + t
                active = row < L
                m = acc(NEG_INF)
                lsum = acc(0)
                for d in range(DV):
                    o[d] = 0
                if active:
                    for d in range(D):
                        qr[d] = acc(ld(q[b, h, row, d])) * scale
                s_end = min(S, qt * NT + NT) if causal else S
                for j0 in range(0, s_end, TK):
                    for e in range(t, TK * D, NT):
                        jj = e // D
                        dd = e % D
                        Ks[jj, dd] = acc(ld(k[b, hk, j0 + jj, dd])) if j0 + jj < S else acc(0)
                    for e in range(t, TK * DV, NT):
                        jj = e // DV
                        dd = e % DV
                        Vs[jj, dd] = acc(ld(v[b, hk, j0 + jj, dd])) if j0 + jj < S else acc(0)
                    cuda.syncthreads()
                    if active:
                        for jj in range(TK):
                            j = j0 + jj
                            if j >= S or (causal and j > row):
                                continue
                            s = acc(0)
                            for d in range(D):
                                s += qr[d] * Ks[jj, d]
                            if has_mask:
                                mv = mask[b, h, row, j]
                                if bool_mask:
                                    if mv == 0:
                                        continue
                                else:
                                    s += acc(ldm(mv))
                            if s == NEG_INF:
                                continue
                            if s > m:
                                # new running max: rescale what was accumulated (exp(-inf) = 0)
                                corr = math.exp(m - s)
                                lsum = lsum * corr + acc(1)
                                for d in range(DV):
                                    o[d] = o[d] * corr + Vs[jj, d]
                                m = s
                            else:
                                p = math.exp(s - m)
                                lsum += p
                                for d in range(DV):
                                    o[d] += p * Vs[jj, d]
                    cuda.syncthreads()
                if active:
                    if lsum != 0:       # NaN scores make lsum NaN: they must show up
                        inv = acc(1) / lsum
                        for d in range(DV):
                            out[b, h, row, d] = st(o[d] * inv)
                        lse[b, h, row] = m + math.log(lsum)
                    else:
                        for d in range(DV):
                            out[b, h, row, d] = st(acc(0))
                        lse[b, h, row] = NEG_INF
    return k_sdpa_fwd


def _make_bwd_pre(kind, DV):
    ld, acc = rt.LOAD[kind], rt.ACC[kind]

    @cuda.jit
    def k_sdpa_bwd_pre(do, o, dsum):
        B, H, L = o.shape[0], o.shape[1], o.shape[2]
        for p in range(cuda.grid(1), B * H * L, cuda.gridsize(1)):
            b = p // (H * L)
            h = (p // L) % H
            i = p % L
            a = acc(0)
            for d in range(DV):
                a += acc(ld(do[b, h, i, d])) * acc(ld(o[b, h, i, d]))
            dsum[b, h, i] = a
    return k_sdpa_bwd_pre


def _make_bwd_dq(kind, mkind, mmode, causal, D, DV, NT, TK):
    ld, st, acc = rt.LOAD[kind], rt.STORE[kind], rt.ACC[kind]
    ldm = rt.LOAD.get(mkind, rt.LOAD["f32"])
    has_mask, bool_mask = mmode != 0, mmode == 1

    @cuda.jit
    def k_sdpa_bwd_dq(q, k, v, mask, scale, do, lse, dsum, dq):
        Ks = cuda.shared.array((TK, D), acc)
        Vs = cuda.shared.array((TK, DV), acc)
        qr = cuda.local.array(D, acc)
        gr = cuda.local.array(DV, acc)
        dqr = cuda.local.array(D, acc)
        t = cuda.threadIdx.x
        B, H, L = q.shape[0], q.shape[1], q.shape[2]
        S = k.shape[2]
        group = H // k.shape[1]
        for bh in range(cuda.blockIdx.y, B * H, cuda.gridDim.y):
            b = bh // H
            h = bh % H
            hk = h // group
            for qt in range(cuda.blockIdx.x, (L + NT - 1) // NT, cuda.gridDim.x):
                row = qt * NT + t
                active = row < L
                li = acc(NEG_INF)
                di = acc(0)
                for d in range(D):
                    dqr[d] = 0
                if active:
                    li = acc(lse[b, h, row])
                    di = acc(dsum[b, h, row])
                    for d in range(D):
                        qr[d] = acc(ld(q[b, h, row, d])) * scale
                    for d in range(DV):
                        gr[d] = acc(ld(do[b, h, row, d]))
                s_end = min(S, qt * NT + NT) if causal else S
                for j0 in range(0, s_end, TK):
                    for e in range(t, TK * D, NT):
                        jj = e // D
                        dd = e % D
                        Ks[jj, dd] = acc(ld(k[b, hk, j0 + jj, dd])) if j0 + jj < S else acc(0)
                    for e in range(t, TK * DV, NT):
                        jj = e // DV
                        dd = e % DV
                        Vs[jj, dd] = acc(ld(v[b, hk, j0 + jj, dd])) if j0 + jj < S else acc(0)
                    cuda.syncthreads()
                    if active and li != NEG_INF:
                        for jj in range(TK):
                            j = j0 + jj
                            if j >= S or (causal and j > row):
                                continue
                            s = acc(0)
                            for d in range(D):
                                s += qr[d] * Ks[jj, d]
                            if has_mask:
                                mv = mask[b, h, row, j]
                                if bool_mask:
                                    if mv == 0:
                                        continue
                                else:
                                    s += acc(ldm(mv))
                            if s == NEG_INF:
                                continue
                            p = math.exp(s - li)
                            dp = acc(0)
                            for d in range(DV):
                                dp += gr[d] * Vs[jj, d]
                            ds = p * (dp - di)
                            for d in range(D):
                                dqr[d] += ds * Ks[jj, d]
                    cuda.syncthreads()
                if active:
                    for d in range(D):
                        dq[b, h, row, d] = st(dqr[d] * scale)
    return k_sdpa_bwd_dq


def _make_bwd_dkv(kind, mkind, mmode, causal, D, DV, NT, TQ):
    ld, st, acc = rt.LOAD[kind], rt.STORE[kind], rt.ACC[kind]
    ldm = rt.LOAD.get(mkind, rt.LOAD["f32"])
    has_mask, bool_mask = mmode != 0, mmode == 1

    @cuda.jit
    def k_sdpa_bwd_dkv(q, k, v, mask, scale, do, lse, dsum, dk, dv):
        Qs = cuda.shared.array((TQ, D), acc)
        Gs = cuda.shared.array((TQ, DV), acc)
        Ls = cuda.shared.array(TQ, acc)
        Ds = cuda.shared.array(TQ, acc)
        kr = cuda.local.array(D, acc)
        vr = cuda.local.array(DV, acc)
        dkr = cuda.local.array(D, acc)
        dvr = cuda.local.array(DV, acc)
        t = cuda.threadIdx.x
        B, H, L = q.shape[0], q.shape[1], q.shape[2]
        HK, S = k.shape[1], k.shape[2]
        group = H // HK
        for bh in range(cuda.blockIdx.y, B * HK, cuda.gridDim.y):
            b = bh // HK
            hk = bh % HK
            for kt in range(cuda.blockIdx.x, (S + NT - 1) // NT, cuda.gridDim.x):
                j = kt * NT + t
                active = j < S
                for d in range(D):
                    dkr[d] = 0
                    kr[d] = 0
                for d in range(DV):
                    dvr[d] = 0
                    vr[d] = 0
                if active:
                    for d in range(D):
                        kr[d] = acc(ld(k[b, hk, j, d]))
                    for d in range(DV):
                        vr[d] = acc(ld(v[b, hk, j, d]))
                # causal: queries before this block's first key see none of its keys
                i_start = ((kt * NT) // TQ) * TQ if causal else 0
                for h in range(hk * group, hk * group + group):
                    for i0 in range(i_start, L, TQ):
                        for e in range(t, TQ * D, NT):
                            ii = e // D
                            dd = e % D
                            Qs[ii, dd] = acc(ld(q[b, h, i0 + ii, dd])) * scale \
                                if i0 + ii < L else acc(0)
                        for e in range(t, TQ * DV, NT):
                            ii = e // DV
                            dd = e % DV
                            Gs[ii, dd] = acc(ld(do[b, h, i0 + ii, dd])) if i0 + ii < L else acc(0)
                        for e in range(t, TQ, NT):
                            Ls[e] = acc(lse[b, h, i0 + e]) if i0 + e < L else acc(NEG_INF)
                            Ds[e] = acc(dsum[b, h, i0 + e]) if i0 + e < L else acc(0)
                        cuda.syncthreads()
                        if active:
                            for ii in range(TQ):
                                i = i0 + ii
                                li = Ls[ii]
                                if i >= L or li == NEG_INF or (causal and j > i):
                                    continue
                                s = acc(0)
                                for d in range(D):
                                    s += Qs[ii, d] * kr[d]
                                if has_mask:
                                    mv = mask[b, h, i, j]
                                    if bool_mask:
                                        if mv == 0:
                                            continue
                                    else:
                                        s += acc(ldm(mv))
                                if s == NEG_INF:
                                    continue
                                p = math.exp(s - li)
                                dp = acc(0)
                                for d in range(DV):
                                    dvr[d] += p * Gs[ii, d]
                                    dp += Gs[ii, d] * vr[d]
                                ds = p * (dp - Ds[ii])
                                for d in range(D):
                                    dkr[d] += ds * Qs[ii, d]   # Qs holds q*scale already
                        cuda.syncthreads()
                if active:
                    for d in range(D):
                        dk[b, hk, j, d] = st(dkr[d])
                    for d in range(DV):
                        dv[b, hk, j, d] = st(dvr[d])
    return k_sdpa_bwd_dkv


def _cached(key, make, *args):
    if key not in _KERNELS:
        _KERNELS[key] = make(*args)
    return _KERNELS[key]


# ---------------------------------------------------------------- host side
def _contig4(dev, shape4):
    if not rt.is_c_contig(dev):
        dev = rt._as_numba(_copy(dev))
    return rt.reshape(dev, shape4)


def _broadcast_view(dev, shape):
    """``dev`` broadcast to ``shape`` as a zero-stride view (no copy); ValueError if it can't."""
    src = tuple(dev.shape)
    nd = len(shape)
    if len(src) > nd:
        raise ValueError
    pad = nd - len(src)
    strides = []
    for k, n in enumerate(shape):
        if k < pad:
            strides.append(0)
            continue
        s, st = src[k - pad], dev.strides[k - pad]
        if s == n:
            strides.append(st)
        elif s == 1:
            strides.append(0)
        else:
            raise ValueError
    return rt.strided_view(dev, shape, strides)


class _Canon:
    pass


def _canon(intake, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    name = "scaled_dot_product_attention"
    if dropout_p:
        raise NotImplementedError(f"{name}: dropout_p={dropout_p} is not supported by the GPU "
                                  "kernels; use dropout_p=0 or the CPU numaccel.nn.functional")
    if attn_mask is not None and is_causal:
        raise ValueError(f"{name}: pass either attn_mask or is_causal=True, not both "
                         "(as torch)")
    c = _Canon()
    dq, kq = intake.arr(query, "query")
    dk, kk = intake.arr(key, "key")
    dv, kv = intake.arr(value, "value")
    qs, ks, vs = tuple(dq.shape), tuple(dk.shape), tuple(dv.shape)
    shapes = f"query {qs}, key {ks}, value {vs}"
    if not (kq == kk == kv) or kq not in rt.FLOAT_KINDS:
        raise TypeError(f"{name}: query, key and value must share one dtype of float32, "
                        f"float16, bfloat16, float64; got {kq}, {kk}, {kv}")
    if len(qs) < 2 or not len(qs) == len(ks) == len(vs):
        raise ValueError(f"{name}: query, key and value need the same rank >= 2; got {shapes}")
    L, E = qs[-2:]
    S, Ek = ks[-2:]
    Sv, Ev = vs[-2:]
    if Ek != E or Sv != S or E == 0 or Ev == 0:
        raise ValueError(f"{name}: need key (..., S, E) and value (..., S, Ev) for query "
                         f"(..., L, E) with E, Ev > 0; got {shapes}")
    batch = qs[:-3]
    if ks[:-3] != batch or vs[:-3] != batch:
        raise ValueError(f"{name}: the GPU kernels need equal batch dims (no broadcasting); "
                         f"got {shapes}. Broadcast the inputs explicitly first")
    H = qs[-3] if len(qs) >= 3 else 1
    Hk = ks[-3] if len(ks) >= 3 else 1
    Hv = vs[-3] if len(vs) >= 3 else 1
    if Hk != Hv or (Hk != H and not (enable_gqa and Hk > 0 and H % Hk == 0)):
        hint = ("key/value heads must divide the query heads" if enable_gqa
                else "pass enable_gqa=True for grouped heads")
        raise ValueError(f"{name}: head counts {H} (query), {Hk} (key), {Hv} (value) do not "
                         f"match ({hint}); got {shapes}")
    B = math.prod(batch)
    c.kind, c.L, c.S, c.E, c.Ev, c.B, c.H, c.Hk = kq, L, S, E, Ev, B, H, Hk
    c.out_shape = qs[:-1] + (Ev,)
    c.q_shape, c.k_shape, c.v_shape = qs, ks, vs
    c.q = _contig4(dq, (B, H, L, E))
    c.k = _contig4(dk, (B, Hk, S, E))
    c.v = _contig4(dv, (B, Hk, S, Ev))
    c.scale = float(scale) if scale is not None else 1.0 / math.sqrt(E)
    c.causal = bool(is_causal)
    if attn_mask is None:
        c.mmode, c.mkind = 0, "f32"
        c.mask = rt.empty((1, 1, 1, 1), np.float32)
    else:
        dm, km = intake.arr(attn_mask, "attn_mask")
        if km == np.dtype(np.bool_):
            c.mmode, c.mkind = 1, "f32"
        elif km in rt.FLOAT_KINDS:
            c.mmode, c.mkind = 2, km
        else:
            raise TypeError(f"{name}: attn_mask must be bool or float, got {km}")
        full = batch + (H, L, S)
        try:
            mv = _broadcast_view(dm, full)
        except ValueError:
            raise ValueError(f"{name}: attn_mask of shape {tuple(dm.shape)} does not broadcast "
                             f"to {full[len(full) - max(len(qs), 2):]}") from None
        st = mv.strides
        ok = all(st[i] == st[i + 1] * full[i + 1] for i in range(len(batch) - 1))
        if not ok:
            mv = rt._as_numba(_copy(mv))
            st = mv.strides
        bstride = st[len(batch) - 1] if batch else 0
        c.mask = rt.strided_view(mv, (B, H, L, S), (bstride,) + tuple(st[len(batch):]))
    return c


def _launch_fwd(c):
    kind = c.kind
    out = rt.empty((c.B, c.H, c.L, c.Ev), kind)
    lse = rt.empty((c.B, c.H, c.L), rt.ACC_NP[kind])
    if c.B * c.H * c.L == 0:
        return out, lse
    NT, TK = _tiles(c.E, c.Ev)
    k = _cached(("fwd", kind, c.mkind, c.mmode, c.causal, c.E, c.Ev, NT, TK), _make_fwd,
                kind, c.mkind, c.mmode, c.causal, c.E, c.Ev, NT, TK)
    gx, gy = _grid((c.L + NT - 1) // NT, c.B * c.H)
    k[(gx, gy), NT](c.q, c.k, c.v, c.mask, rt.ACC_NP[kind](c.scale), out, lse)
    return out, lse


def _grid(gx, gy):
    if rt.SIM:
        return min(gx, 2), min(gy, 2)
    return max(1, min(gx, 65535)), max(1, min(gy, 65535))


def scaled_dot_product_attention_with_lse(query, key, value, attn_mask=None,
                                          dropout_p: float = 0.0, is_causal: bool = False,
                                          scale: Optional[float] = None,
                                          enable_gqa: bool = False):
    """Attention output and the log-sum-exp of each query row (float32; float64 for f64).

    ``lse`` has shape ``batch + (Hq, L)`` (the query's shape without E) and is -inf on fully
    masked rows. Example: ``out, lse = scaled_dot_product_attention_with_lse(q, k, v)``.
    """
    intake = rt.Intake()
    c = _canon(intake, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    out, lse = _launch_fwd(c)
    lse_kind = "f64" if c.kind == "f64" else "f32"
    return (intake.out(rt.reshape(out, c.out_shape), c.kind),
            intake.out(rt.reshape(lse, c.out_shape[:-1]), lse_kind))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False):
    """``torch.nn.functional.scaled_dot_product_attention`` on the GPU (dropout_p = 0).

    Example::

        q = np.ones((1, 2, 3, 4), np.float32)
        scaled_dot_product_attention(q, q, q, is_causal=True).shape     # (1, 2, 3, 4)
    """
    return scaled_dot_product_attention_with_lse(query, key, value, attn_mask, dropout_p,
                                                 is_causal, scale, enable_gqa)[0]


def scaled_dot_product_attention_backward(grad_out, query, key, value, out, lse,
                                          attn_mask=None, dropout_p: float = 0.0,
                                          is_causal: bool = False,
                                          scale: Optional[float] = None,
                                          enable_gqa: bool = False):
    """Gradients ``(dq, dk, dv)`` of SDPA for ``grad_out``, from the forward's ``out``/``lse``.

    Shapes and dtypes of q, k, v (with GQA, a key/value head's gradient sums its group).

    Example::

        out, lse = scaled_dot_product_attention_with_lse(q, k, v, is_causal=True)
        dq, dk, dv = scaled_dot_product_attention_backward(np.ones_like(out), q, k, v, out,
                                                           lse, is_causal=True)
    """
    intake = rt.Intake()
    c = _canon(intake, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    dgo, kg = intake.arr(grad_out, "grad_out")
    dout, ko = intake.arr(out, "out")
    dlse, kl = intake.arr(lse, "lse")
    if tuple(dgo.shape) != c.out_shape or tuple(dout.shape) != c.out_shape:
        raise ValueError(f"scaled_dot_product_attention_backward: grad_out "
                         f"{tuple(dgo.shape)} and out {tuple(dout.shape)} must have the output "
                         f"shape {c.out_shape}")
    if kg != c.kind or ko != c.kind:
        raise TypeError(f"scaled_dot_product_attention_backward: grad_out and out must have "
                        f"the query's dtype {c.kind}, got {kg}, {ko}")
    acc_np = rt.ACC_NP[c.kind]
    if kl != rt.KINDS[np.dtype(acc_np)]:
        raise TypeError(f"scaled_dot_product_attention_backward: lse must be "
                        f"{np.dtype(acc_np)}, got {kl}")
    B, H, L, S, E, Ev, Hk = c.B, c.H, c.L, c.S, c.E, c.Ev, c.Hk
    go4 = _contig4(dgo, (B, H, L, Ev))
    o4 = _contig4(dout, (B, H, L, Ev))
    lse3 = _contig4(dlse, (B, H, L))
    dq = rt.empty((B, H, L, E), c.kind)
    dk = rt.empty((B, Hk, S, E), c.kind)
    dv = rt.empty((B, Hk, S, Ev), c.kind)
    kind = c.kind
    sc = acc_np(c.scale)
    if B * H * L:
        dsum = rt.empty((B, H, L), acc_np)
        pre = _cached(("pre", kind, Ev), _make_bwd_pre, kind, Ev)
        blk = rt.SIM_BLOCK if rt.SIM else 256
        pre[rt.grid_1d(B * H * L, blk), blk](go4, o4, dsum)
        NT, TK = _tiles(E, Ev)
        kq = _cached(("dq", kind, c.mkind, c.mmode, c.causal, E, Ev, NT, TK), _make_bwd_dq,
                     kind, c.mkind, c.mmode, c.causal, E, Ev, NT, TK)
        gx, gy = _grid((L + NT - 1) // NT, B * H)
        kq[(gx, gy), NT](c.q, c.k, c.v, c.mask, sc, go4, lse3, dsum, dq)
        if B * Hk * S:
            kkv = _cached(("dkv", kind, c.mkind, c.mmode, c.causal, E, Ev, NT, TK),
                          _make_bwd_dkv, kind, c.mkind, c.mmode, c.causal, E, Ev, NT, TK)
            gx, gy = _grid((S + NT - 1) // NT, B * Hk)
            kkv[(gx, gy), NT](c.q, c.k, c.v, c.mask, sc, go4, lse3, dsum, dk, dv)
    else:
        from .elementwise import elementwise
        zero = elementwise("def zero(x):\n    return x * 0", name="zero")
        for a in (dk, dv):
            if a.size:
                zero(a, out=a)
    return (intake.out(rt.reshape(dq, c.q_shape), kind),
            intake.out(rt.reshape(dk, c.k_shape), kind),
            intake.out(rt.reshape(dv, c.v_shape), kind))


def _build_specs() -> Iterator[tuple]:
    f32 = nt.float32
    # every mask mode for float32; 16-bit types with no mask and a mask of their own dtype
    # (the mask code does not depend on the dtype; the loads do)
    combos = [("f32", m, c) for m, c in ((0, False), (0, True), (1, False), (2, False))]
    combos += [(k, m, False) for k in ("f16", "bf16") for m in (0, 2)]
    for kind, mmode, causal in combos:
        T = rt.NUMBA_STORAGE[kind]
        a4, a3 = nt.Array(T, 4, "A"), nt.Array(f32, 3, "A")
        mk = kind if mmode == 2 else "f32"
        mt = nt.Array(nt.uint8 if mmode == 1 else rt.NUMBA_STORAGE[mk], 4, "A")
        for D in (64, 128):
            if D == 128 and mmode != 0:
                continue
            NT, TK = 64, _tiles_device(D, D)
            tag = f"{kind} D={D} mask={('none', 'bool', 'float')[mmode]}" \
                  f"{' causal' if causal else ''}"
            yield (f"sdpa_fwd {tag}", _cached(("fwd", kind, mk, mmode, causal, D, D, NT, TK),
                   _make_fwd, kind, mk, mmode, causal, D, D, NT, TK),
                   (a4, a4, a4, mt, f32, a4, a3))
            if D != 64:
                continue
            yield (f"sdpa_bwd_dq {tag}", _cached(("dq", kind, mk, mmode, causal, D, D, NT, TK),
                   _make_bwd_dq, kind, mk, mmode, causal, D, D, NT, TK),
                   (a4, a4, a4, mt, f32, a4, a3, a3, a4))
            yield (f"sdpa_bwd_dkv {tag}", _cached(("dkv", kind, mk, mmode, causal, D, D, NT,
                                                   TK), _make_bwd_dkv, kind, mk, mmode, causal,
                                                  D, D, NT, TK),
                   (a4, a4, a4, mt, f32, a4, a3, a3, a4, a4))
    for kind in ("f32", "f16", "bf16"):
        a4, a3 = nt.Array(rt.NUMBA_STORAGE[kind], 4, "A"), nt.Array(f32, 3, "A")
        yield (f"sdpa_bwd_pre {kind}", _cached(("pre", kind, 64), _make_bwd_pre, kind, 64),
               (a4, a4, a3))


def _tiles_device(D, DV):
    tile = 64
    while tile > 8 and tile * (D + DV + 2) * 4 > 32 * 1024:
        tile //= 2
    return tile
