"""Tiled matmul with a fused bias/activation epilogue; cuBLAS (through CuPy) for large dense.

``matmul(a, b, bias, activation)`` computes ``act(a @ b + bias)`` (``b`` given as (K, N), or
as (N, K) with ``trans_b=True``, the layout of a Linear weight). The numba-cuda kernel stages
``BM x BK`` and ``BK x BN`` tiles of both operands in shared memory as float32 (float16 and
bfloat16 are widened on load), each thread accumulates a ``TM x TN`` register micro-tile in
float32 (rows ``ty + i*NTY``, columns ``tx + j*NTX``: coalesced stores, no bank conflicts
on the shared reads), and the epilogue adds the bias, applies the activation and narrows
once. CUDA cores only (numba-cuda exposes no tensor-core MMA), so it is the portable path.

Dispatch: with ``backend="auto"`` and CuPy on a real device, float32/float16/float64 problems
of at least ``CUBLAS_MIN_FLOPS`` go to ``cupy.matmul`` (cuBLAS, tensor cores) and the epilogue
runs as one elementwise kernel; ``last_dispatch()`` says which path the last call took.
bfloat16 always takes the numba-cuda kernel (CuPy has no bfloat16 dtype).

Example::

    from numaccel.kernels_gpu import matmul
    y = matmul(x, w, bias=b, activation="gelu", trans_b=True)   # a Linear layer + GELU
"""
from __future__ import annotations

import math
from typing import Iterator, Optional

import numpy as np
from numba import cuda

from . import _runtime as rt
from ._runtime import nt

__all__ = ["matmul", "ACTIVATIONS", "last_dispatch", "CUBLAS_MIN_FLOPS"]

CUBLAS_MIN_FLOPS = 2 * 256 ** 3
_KERNELS: dict = {}
_LAST = ["none"]
# (BM, BN, BK, TM, TN): 256 threads and 64x64 tiles on a device; 16 threads in the simulator
TILE_DEVICE = (64, 64, 16, 4, 4)
TILE_SIM = (8, 8, 4, 2, 2)


@rt.devfn
def _act_none(v):
    return v


@rt.devfn
def _act_relu(v):
    return v if v > 0 else v * 0


@rt.devfn
def _act_gelu(v):
    return 0.5 * v * (1.0 + math.erf(v * 0.7071067811865476))


@rt.devfn
def _act_gelu_tanh(v):
    return 0.5 * v * (1.0 + math.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))


@rt.devfn
def _act_silu(v):
    return v / (1.0 + math.exp(-v))


@rt.devfn
def _act_sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


@rt.devfn
def _act_tanh(v):
    return math.tanh(v)


ACTIVATIONS = {None: _act_none, "none": _act_none, "relu": _act_relu, "gelu": _act_gelu,
               "gelu_tanh": _act_gelu_tanh, "silu": _act_silu, "sigmoid": _act_sigmoid,
               "tanh": _act_tanh}
# the NumPy spelling of each activation, for the cuBLAS path's epilogue and for tests
ACT_SOURCE = {
    "none": "def act(v, b):\n    return v + b",
    "relu": "def act(v, b):\n    w = v + b\n    return w if w > 0 else w * 0",
    "gelu": "def act(v, b):\n    w = v + b\n    return 0.5 * w * (1.0 + math.erf(w * "
            "0.7071067811865476))",
    "gelu_tanh": "def act(v, b):\n    w = v + b\n    return 0.5 * w * (1.0 + math.tanh("
                 "0.7978845608028654 * (w + 0.044715 * w * w * w)))",
    "silu": "def act(v, b):\n    w = v + b\n    return w / (1.0 + math.exp(-w))",
    "sigmoid": "def act(v, b):\n    return 1.0 / (1.0 + math.exp(-(v + b)))",
    "tanh": "def act(v, b):\n    return math.tanh(v + b)",
}


def last_dispatch() -> str:
    """``"numba"`` or ``"cublas"``: the path the last ``matmul`` call took."""
    return _LAST[0]


def _make(ka, kb, kbias, kout, act, has_bias, trans_b, tile):
    BM, BN, BK, TM, TN = tile
    NTX, NTY = BN // TN, BM // TM
    NT = NTX * NTY
    lda, ldb, ldbias, st = rt.LOAD[ka], rt.LOAD[kb], rt.LOAD[kbias], rt.STORE[kout]
    acc = nt.float64 if "f64" in (ka, kb) else nt.float32
    actf = ACTIVATIONS[act]

    @cuda.jit
    def k_matmul(a, b, bias, out):
        As = cuda.shared.array((BK, BM), acc)
        Bs = cuda.shared.array((BK, BN), acc)
        accum = cuda.local.array((TM, TN), acc)
        ar = cuda.local.array(TM, acc)
        br = cuda.local.array(TN, acc)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * NTX + tx
        M = a.shape[0]
        K = a.shape[1]
        N = out.shape[1]
        for mt in range(cuda.blockIdx.y, (M + BM - 1) // BM, cuda.gridDim.y):
            for ntile in range(cuda.blockIdx.x, (N + BN - 1) // BN, cuda.gridDim.x):
                m0 = mt * BM
                n0 = ntile * BN
                for i in range(TM):
                    for j in range(TN):
                        accum[i, j] = 0
                for k0 in range(0, K, BK):
                    for e in range(tid, BM * BK, NT):
                        mm = e // BK
                        kk = e % BK
                        gm = m0 + mm
                        gk = k0 + kk
                        As[kk, mm] = acc(lda(a[gm, gk])) if gm < M and gk < K else acc(0)
                    for e in range(tid, BK * BN, NT):
                        if trans_b:     # b is (N, K): walk k fastest for coalesced reads
                            nn = e // BK
                            kk = e % BK
                            gn = n0 + nn
                            gk = k0 + kk
                            Bs[kk, nn] = acc(ldb(b[gn, gk])) if gn < N and gk < K else acc(0)
                        else:
                            kk = e // BN
                            nn = e % BN
                            gn = n0 + nn
                            gk = k0 + kk
                            Bs[kk, nn] = acc(ldb(b[gk, gn])) if gn < N and gk < K else acc(0)
                    cuda.syncthreads()
                    for kk in range(BK):
                        for i in range(TM):
                            ar[i] = As[kk, ty + i * NTY]
                        for j in range(TN):
                            br[j] = Bs[kk, tx + j * NTX]
                        for i in range(TM):
                            for j in range(TN):
                                accum[i, j] += ar[i] * br[j]
                    cuda.syncthreads()
                for i in range(TM):
                    gm = m0 + ty + i * NTY
                    if gm < M:
                        for j in range(TN):
                            gn = n0 + tx + j * NTX
                            if gn < N:
                                v = accum[i, j]
                                if has_bias:
                                    v += acc(ldbias(bias[gn]))
                                out[gm, gn] = st(actf(v))
    return k_matmul


def _kernel(ka, kb, kbias, kout, act, has_bias, trans_b, tile):
    key = (ka, kb, kbias, kout, act or "none", has_bias, trans_b, tile)
    if key not in _KERNELS:
        _KERNELS[key] = _make(ka, kb, kbias, kout, act or "none", has_bias, trans_b, tile)
    return _KERNELS[key]


def matmul(a, b, bias=None, activation: Optional[str] = None, *, trans_b: bool = False,
           out_dtype=None, backend: str = "auto", tile: Optional[tuple] = None):
    """``activation(a @ b + bias)`` with float32 accumulation, in ``a``'s dtype by default.

    ``a`` is (..., M, K) (leading dims are folded into M), ``b`` is (K, N) or, with
    ``trans_b=True``, (N, K); ``bias`` is (N,). ``activation`` is one of ``ACTIVATIONS``
    (None, "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"). ``backend`` is
    ``"auto"`` (cuBLAS for large dense problems when CuPy sees a device), ``"numba"`` or
    ``"cublas"``.

    Example::

        y = matmul(np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), activation="relu")
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"matmul: unknown activation {activation!r}; use one of "
                         f"{sorted(k for k in ACTIVATIONS if k)}")
    if backend not in ("auto", "numba", "cublas"):
        raise ValueError(f"matmul: backend must be 'auto', 'numba' or 'cublas', got {backend!r}")
    intake = rt.Intake()
    da, ka = intake.arr(a, "a")
    db, kb = intake.arr(b, "b")
    for name, k in (("a", ka), ("b", kb)):
        if k not in rt.FLOAT_KINDS:
            raise TypeError(f"matmul: {name} must be float32/float16/bfloat16/float64, got {k}")
    if len(da.shape) < 2 or len(db.shape) != 2:
        raise ValueError(f"matmul: a must be (..., M, K) and b 2-d, got {tuple(da.shape)} and "
                         f"{tuple(db.shape)}")
    lead = tuple(da.shape)[:-1]
    K = tuple(da.shape)[-1]
    M = math.prod(lead)
    N, Kb = (db.shape[0], db.shape[1]) if trans_b else (db.shape[1], db.shape[0])
    if Kb != K:
        raise ValueError(f"matmul: inner dims differ: a {tuple(da.shape)}, b {tuple(db.shape)}"
                         f"{' (trans_b: b is (N, K))' if trans_b else ''}")
    kout = rt.KINDS[np.dtype(out_dtype)] if out_dtype is not None else ka
    if bias is not None:
        dbias, kbias = intake.arr(bias, "bias")
        if tuple(dbias.shape) != (N,):
            raise ValueError(f"matmul: bias must have shape ({N},), got {tuple(dbias.shape)}")
    else:
        dbias, kbias = rt.empty((1,), kout), kout
    if not rt.is_c_contig(da):
        from .elementwise import copy
        da = rt._as_numba(copy(da))
    a2 = rt.reshape(da, (M, K))
    if backend == "cublas" and not (ka == kb and ka in ("f32", "f16", "f64")):
        raise TypeError(f"matmul: backend='cublas' needs a and b of one dtype among float32, "
                        f"float16, float64 (CuPy has no bfloat16), got {ka} and {kb}; use "
                        "backend='numba'")
    use_cublas = backend == "cublas" or (
        backend == "auto" and rt.have_cupy() and ka == kb and ka in ("f32", "f16", "f64")
        and 2 * M * N * K >= CUBLAS_MIN_FLOPS)
    if use_cublas:
        out = _cublas(a2, db, dbias if bias is not None else None, activation, trans_b, kout)
        _LAST[0] = "cublas"
    else:
        out = rt.empty((M, N), kout)
        if M * N:
            t = tile or (TILE_SIM if rt.SIM else TILE_DEVICE)
            BM, BN, _, TM, TN = t
            k = _kernel(ka, kb, kbias, kout, activation, bias is not None, trans_b, t)
            gx = min((N + BN - 1) // BN, 65535)
            gy = min((M + BM - 1) // BM, 65535)
            if rt.SIM:
                gx, gy = min(gx, 2), min(gy, 2)
            k[(gx, gy), (BN // TN, BM // TM)](a2, db, dbias, out)
        _LAST[0] = "numba"
    return intake.out(rt.reshape(out, lead + (N,)), kout)


def _cublas(a2, b, bias, activation, trans_b, kout):
    """cuBLAS through CuPy (tensor cores for f16 / TF32-capable f32), then one epilogue."""
    import cupy

    from .elementwise import elementwise
    ca, cb = cupy.asarray(a2), cupy.asarray(b)
    prod = cupy.matmul(ca, cb.T if trans_b else cb)
    act = activation or "none"
    if bias is None and act == "none" and np.dtype(prod.dtype) == rt.HOST_DTYPE[kout]:
        return cuda.as_cuda_array(prod)
    bias_arr = cupy.asarray(bias) if bias is not None else cupy.zeros((1,), prod.dtype)
    ew = _EPILOGUE.setdefault(act, elementwise(ACT_SOURCE[act], name=f"epilogue_{act}"))
    return cuda.as_cuda_array(ew(prod, bias_arr, out_dtype=rt.HOST_DTYPE[kout]))


_EPILOGUE: dict = {}


def _build_specs() -> Iterator[tuple]:
    for kind in ("f32", "f16", "bf16"):
        arr = nt.Array(rt.NUMBA_STORAGE[kind], 2, "A")
        vec = nt.Array(rt.NUMBA_STORAGE[kind], 1, "A")
        for act, tb in ((None, False), ("gelu", True), ("relu", False)):
            k = _kernel(kind, kind, kind, kind, act, True, tb, TILE_DEVICE)
            yield (f"matmul[{act or 'none'}{',trans_b' if tb else ''}] {kind}", k,
                   (arr, arr, vec, arr))
