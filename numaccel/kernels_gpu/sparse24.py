"""2:4 sparse linear on the GPU over ``numaccel.sparse``'s compressed layout (same bytes).

``sparse24_linear(x, w, bias, activation)`` computes ``act(x @ W.T + bias)`` where ``w`` is a
``numaccel.sparse.SparseSemiStructuredArray`` (or its :class:`Sparse24Device` copy) of a
``(M, K)`` weight: ``values`` ``(M, Kp // 2)`` and ``meta`` ``(M, Kp // 16)`` uint16, exactly
as ``docs/sparse24_layout.md`` lays them out. Kept value ``j`` of row ``r`` multiplies
``x[:, 4 * (j // 2) + ((meta[r, j // 8] >> (2 * (j % 8))) & 3)]``.

Kernel: a block owns ``BN`` rows of ``x`` and ``BM`` rows of ``W``; per K-tile of ``BKD`` dense
columns it stages the dense ``x`` tile (float32), the ``BKD // 2`` kept values of each weight
row and their decoded columns (one shift and mask each, done once per tile) in shared memory;
each thread then accumulates a ``TN x TM`` register tile with half the multiply-adds of the
dense product, and the epilogue adds the bias and applies the activation (as ``matmul``).
CUDA cores only: sparse tensor cores (``mma.sp``) are not reachable from numba-cuda, and
CuPy's wheel has no cuSPARSELt binding; ``SparseSemiStructuredArray.to_cutlass()`` gives the
operands a CUTLASS/cuSPARSELt path would take.

Example::

    from numaccel.sparse import prune_2_4, to_sparse_semi_structured
    w = to_sparse_semi_structured(prune_2_4(np.random.rand(64, 128).astype(np.float32)))
    y = sparse24_linear(np.ones((8, 128), np.float32), w)      # == x @ w.to_dense().T
"""
from __future__ import annotations

import math
from typing import Iterator, Optional

import numpy as np
from numba import cuda

from . import _runtime as rt
from ._runtime import nt
from .matmul import ACTIVATIONS

__all__ = ["sparse24_linear", "Sparse24Device", "to_device"]

TILE_DEVICE = (64, 64, 32, 4, 4)    # BM (weight rows), BN (x rows), BKD (dense cols), TM, TN
TILE_SIM = (8, 8, 16, 2, 2)
_KERNELS: dict = {}


class Sparse24Device:
    """The ``values``/``meta`` of a 2:4 weight copied to the device once (bytes unchanged).

    Example::

        wd = Sparse24Device.from_host(w)            # w: SparseSemiStructuredArray
        y = sparse24_linear(x_device, wd)
    """

    def __init__(self, values, meta, shape: tuple, kind: str):
        self.values, self.meta, self.shape, self.kind = values, meta, tuple(shape), kind

    @classmethod
    def from_host(cls, w) -> "Sparse24Device":
        vals = np.asarray(w.values)
        kind = rt.KINDS.get(vals.dtype)
        if kind not in ("f32", "f16", "bf16"):
            raise TypeError(f"sparse24: weight dtype {vals.dtype} is not float32/float16/"
                            "bfloat16")
        raw = vals.view(np.uint16) if kind == "bf16" else vals
        return cls(cuda.to_device(np.ascontiguousarray(raw)),
                   cuda.to_device(np.ascontiguousarray(w.meta)), w.shape, kind)


def to_device(w) -> Sparse24Device:
    """Copy a ``SparseSemiStructuredArray``'s bytes to the device (see :class:`Sparse24Device`)."""
    return w if isinstance(w, Sparse24Device) else Sparse24Device.from_host(w)


def _make(kx, kw, kbias, kout, act, has_bias, tile):
    BM, BN, BKD, TM, TN = tile
    BKV = BKD // 2                      # kept values per weight row per tile
    NTX, NTY = BM // TM, BN // TN       # x: weight rows (output columns), y: x rows
    NT = NTX * NTY
    ldx, ldw, ldb, st = rt.LOAD[kx], rt.LOAD[kw], rt.LOAD[kbias], rt.STORE[kout]
    acc = nt.float32
    actf = ACTIVATIONS[act]

    @cuda.jit
    def k_sparse24(x, values, meta, bias, K, out):
        Xs = cuda.shared.array((BN, BKD), acc)
        Vs = cuda.shared.array((BM, BKV), acc)
        Cs = cuda.shared.array((BM, BKV), nt.int32)
        accum = cuda.local.array((TN, TM), acc)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * NTX + tx
        N = x.shape[0]
        M = values.shape[0]
        KV = values.shape[1]            # Kp // 2
        for nt_ in range(cuda.blockIdx.y, (N + BN - 1) // BN, cuda.gridDim.y):
            for mt in range(cuda.blockIdx.x, (M + BM - 1) // BM, cuda.gridDim.x):
                n0 = nt_ * BN
                m0 = mt * BM
                for i in range(TN):
                    for j in range(TM):
                        accum[i, j] = 0
                for k0 in range(0, 2 * KV, BKD):
                    for e in range(tid, BN * BKD, NT):
                        nn = e // BKD
                        kk = e % BKD
                        gn = n0 + nn
                        gk = k0 + kk
                        Xs[nn, kk] = acc(ldx(x[gn, gk])) if gn < N and gk < K else acc(0)
                    j0 = k0 // 2
                    for e in range(tid, BM * BKV, NT):
                        mm = e // BKV
                        jj = e % BKV
                        gm = m0 + mm
                        gj = j0 + jj
                        if gm < M and gj < KV:
                            Vs[mm, jj] = acc(ldw(values[gm, gj]))
                            word = nt.int32(meta[gm, gj // 8])
                            pos = (word >> (2 * (gj % 8))) & 3
                            Cs[mm, jj] = 4 * (jj // 2) + pos     # column inside the tile
                        else:
                            Vs[mm, jj] = acc(0)
                            Cs[mm, jj] = 0
                    cuda.syncthreads()
                    for jj in range(BKV):
                        for j in range(TM):
                            mm = tx + j * NTX
                            wv = Vs[mm, jj]
                            c = Cs[mm, jj]
                            for i in range(TN):
                                accum[i, j] += wv * Xs[ty + i * NTY, c]
                    cuda.syncthreads()
                for i in range(TN):
                    gn = n0 + ty + i * NTY
                    if gn < N:
                        for j in range(TM):
                            gm = m0 + tx + j * NTX
                            if gm < M:
                                v = accum[i, j]
                                if has_bias:
                                    v += acc(ldb(bias[gm]))
                                out[gn, gm] = st(actf(v))
    return k_sparse24


def _kernel(kx, kw, kbias, kout, act, has_bias, tile):
    key = (kx, kw, kbias, kout, act or "none", has_bias, tile)
    if key not in _KERNELS:
        _KERNELS[key] = _make(kx, kw, kbias, kout, act or "none", has_bias, tile)
    return _KERNELS[key]


def sparse24_linear(x, weight, bias=None, activation: Optional[str] = None, *,
                    tile: Optional[tuple] = None):
    """``activation(x @ W.T + bias)`` for a 2:4 compressed ``W`` of shape (M, K).

    ``x`` is (..., K) in the weight's dtype (float32, float16, bfloat16); the result is
    (..., M) in that dtype, accumulated in float32. ``weight`` is a
    ``SparseSemiStructuredArray`` (its bytes are copied to the device on each call) or a
    :class:`Sparse24Device` (copied once).

    Example::

        y = sparse24_linear(x, to_device(w), bias=b, activation="relu")
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"sparse24_linear: unknown activation {activation!r}")
    intake = rt.Intake()
    dx, kx = intake.arr(x, "x")
    wd = to_device(weight)
    M, K = wd.shape
    xs = tuple(dx.shape)
    if len(xs) < 1 or xs[-1] != K:
        raise ValueError(f"sparse24_linear: x must be (..., {K}) for a weight of shape "
                         f"{(M, K)}, got {xs}")
    if kx != wd.kind:
        raise TypeError(f"sparse24_linear: x dtype {kx} differs from the weight's {wd.kind}; "
                        "cast x first")
    if bias is not None:
        db, kb = intake.arr(bias, "bias")
        if tuple(db.shape) != (M,):
            raise ValueError(f"sparse24_linear: bias must have shape ({M},), got "
                             f"{tuple(db.shape)}")
    else:
        db, kb = rt.empty((1,), kx), kx
    lead = xs[:-1]
    N = math.prod(lead)
    if not rt.is_c_contig(dx):
        from .elementwise import copy
        dx = rt._as_numba(copy(dx))
    x2 = rt.reshape(dx, (N, K))
    out = rt.empty((N, M), kx)
    if N * M:
        t = tile or (TILE_SIM if rt.SIM else TILE_DEVICE)
        BM, BN, BKD, TM, TN = t
        k = _kernel(kx, wd.kind, kb, kx, activation, bias is not None, t)
        gx = min((M + BM - 1) // BM, 65535)
        gy = min((N + BN - 1) // BN, 65535)
        if rt.SIM:
            gx, gy = min(gx, 2), min(gy, 2)
        k[(gx, gy), (BM // TM, BN // TN)](x2, wd.values, wd.meta, db, np.int64(K), out)
    return intake.out(rt.reshape(out, lead + (M,)), kx)


def _build_specs() -> Iterator[tuple]:
    for kind in ("f32", "f16", "bf16"):
        T = rt.NUMBA_STORAGE[kind]
        a2, v1 = nt.Array(T, 2, "A"), nt.Array(T, 1, "A")
        meta = nt.Array(nt.uint16, 2, "A")
        for act in (None, "relu"):
            yield (f"sparse24_linear[{act or 'none'}] {kind}",
                   _kernel(kind, kind, kind, kind, act, True, TILE_DEVICE),
                   (a2, a2, meta, v1, nt.int64, a2))
