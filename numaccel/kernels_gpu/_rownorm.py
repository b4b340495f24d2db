"""Row-wise persistent kernels: softmax and layer norm over the last axis (see ``reduce``)."""
from __future__ import annotations

import math
from typing import Iterator, Optional

import numpy as np
from numba import cuda

from . import _runtime as rt
from ._runtime import nt
from .elementwise import copy as _copy

__all__ = ["softmax", "layer_norm"]

_BLOCK = rt.SIM_BLOCK if rt.SIM else 256
_KERNELS: dict = {}


@rt.devfn
def _max(a, b):
    return a if (a > b or a != a) else b


def _make_softmax(kin: str, kout: str, block: int):
    # the shared-memory trees are written out in each kernel: a device function that
    # calls syncthreads would diverge from the simulator's per-thread model
    ld, st, acc = rt.LOAD[kin], rt.STORE[kout], rt.ACC[kin]
    neg_inf = -math.inf

    @cuda.jit
    def k_softmax(x, out):
        sm = cuda.shared.array(block, acc)
        t = cuda.threadIdx.x
        rows, n = x.shape
        for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            m = acc(neg_inf)
            for c in range(t, n, block):
                m = _max(m, acc(ld(x[row, c])))
            sm[t] = m
            cuda.syncthreads()
            s = block // 2
            while s > 0:
                if t < s:
                    sm[t] = _max(sm[t], sm[t + s])
                cuda.syncthreads()
                s //= 2
            m = sm[0]
            cuda.syncthreads()
            a = acc(0)
            for c in range(t, n, block):
                a += math.exp(acc(ld(x[row, c])) - m)
            sm[t] = a
            cuda.syncthreads()
            s = block // 2
            while s > 0:
                if t < s:
                    sm[t] = sm[t] + sm[t + s]
                cuda.syncthreads()
                s //= 2
            inv = acc(1) / sm[0]
            cuda.syncthreads()
            for c in range(t, n, block):
                out[row, c] = st(math.exp(acc(ld(x[row, c])) - m) * inv)
    return k_softmax


def _make_layernorm(kin: str, kw: str, kb: str, kout: str, has_w: bool, has_b: bool,
                    block: int):
    ld, st, acc = rt.LOAD[kin], rt.STORE[kout], rt.ACC[kin]
    ldw, ldb = rt.LOAD[kw], rt.LOAD[kb]

    @cuda.jit
    def k_layernorm(x, w, b, eps, out):
        sm = cuda.shared.array(block, acc)
        t = cuda.threadIdx.x
        rows, n = x.shape
        for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            a = acc(0)
            for c in range(t, n, block):
                a += acc(ld(x[row, c]))
            sm[t] = a
            cuda.syncthreads()
            s = block // 2
            while s > 0:
                if t < s:
                    sm[t] = sm[t] + sm[t + s]
                cuda.syncthreads()
                s //= 2
            mean = sm[0] / acc(n)
            cuda.syncthreads()
            # second pass over centred values: no cancellation as in E[x^2] - E[x]^2
            a = acc(0)
            for c in range(t, n, block):
                d = acc(ld(x[row, c])) - mean
                a += d * d
            sm[t] = a
            cuda.syncthreads()
            s = block // 2
            while s > 0:
                if t < s:
                    sm[t] = sm[t] + sm[t + s]
                cuda.syncthreads()
                s //= 2
            rstd = acc(1) / math.sqrt(sm[0] / acc(n) + acc(eps))
            cuda.syncthreads()
            for c in range(t, n, block):
                y = (acc(ld(x[row, c])) - mean) * rstd
                if has_w:
                    y = y * acc(ldw(w[c]))
                if has_b:
                    y = y + acc(ldb(b[c]))
                out[row, c] = st(y)
    return k_layernorm


def _cached(key, make, *args):
    if key not in _KERNELS:
        _KERNELS[key] = make(*args)
    return _KERNELS[key]


def _rows_view(dev, axis: int):
    """``dev`` with ``axis`` moved last, as a contiguous (rows, n) array, and how to undo."""
    shape = tuple(dev.shape)
    nd = len(shape)
    if nd == 0:
        raise ValueError("softmax/layer_norm need at least one dimension, got a 0-d array")
    if not -nd <= axis < nd:
        raise ValueError(f"axis {axis} is out of bounds for shape {shape}")
    ax = axis % nd
    perm = [k for k in range(nd) if k != ax] + [ax]
    if ax != nd - 1:
        moved = rt.strided_view(dev, [shape[k] for k in perm], [dev.strides[k] for k in perm])
        dev = rt._as_numba(_copy(moved))
    elif not rt.is_c_contig(dev):
        dev = rt._as_numba(_copy(dev))
    mshape = tuple(shape[k] for k in perm)
    return rt.reshape(dev, (math.prod(mshape[:-1]), mshape[-1])), mshape, perm


def _unmove(out2d, mshape, perm):
    res = rt.reshape(out2d, mshape)
    if perm == sorted(perm):
        return res
    inv = np.argsort(perm)
    back = rt.strided_view(res, [mshape[k] for k in inv], [res.strides[k] for k in inv])
    return rt._as_numba(_copy(back))


def softmax(x, axis: int = -1, block: Optional[int] = None):
    """``torch.softmax(x, axis)`` in the input's dtype, computed in float32.

    Rows that are all ``-inf`` give NaN, as in NumPy and PyTorch.

    Example::

        softmax(np.array([[0.0, np.log(3.0)]], np.float32))     # [[0.25, 0.75]]
    """
    intake = rt.Intake()
    dev, kind = intake.arr(x, "x")
    if kind not in rt.FLOAT_KINDS:
        raise TypeError(f"softmax: supports float32/float16/bfloat16/float64, got {kind}")
    x2, mshape, perm = _rows_view(dev, axis)
    out = rt.empty(x2.shape, kind)
    rows, n = x2.shape
    if rows * n:
        b = block or _BLOCK
        k = _cached(("softmax", kind, b), _make_softmax, kind, kind, b)
        k[rt.grid_1d(rows, 1, 65535), b](x2, out)
    return intake.out(_unmove(out, mshape, perm), kind)


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5, block: Optional[int] = None):
    """``torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)``.

    Normalizes the last axis with the biased variance; ``weight``/``bias`` have shape
    ``(x.shape[-1],)`` in any float dtype; the result has ``x``'s dtype.

    Example::

        layer_norm(np.array([[1.0, 2.0, 3.0]], np.float32))   # ~[[-1.22, 0, 1.22]]
    """
    intake = rt.Intake()
    dev, kind = intake.arr(x, "x")
    if kind not in rt.FLOAT_KINDS:
        raise TypeError(f"layer_norm: supports float32/float16/bfloat16/float64, got {kind}")
    x2, mshape, perm = _rows_view(dev, -1)
    n = x2.shape[1]
    parts = []
    for name, p in (("weight", weight), ("bias", bias)):
        if p is None:
            parts.append((rt.empty((1,), kind), kind, False))
            continue
        d, kp = intake.arr(p, name)
        if tuple(d.shape) != (n,):
            raise ValueError(f"layer_norm: {name} must have shape ({n},) for x of shape "
                             f"{tuple(dev.shape)}, got {tuple(d.shape)}")
        if kp not in rt.FLOAT_KINDS:
            raise TypeError(f"layer_norm: {name} must be a float array, got {kp}")
        parts.append((d, kp, True))
    (w, kw, hw), (bb, kb, hb) = parts
    out = rt.empty(x2.shape, kind)
    rows = x2.shape[0]
    if rows * n:
        b = block or _BLOCK
        k = _cached(("ln", kind, kw, kb, hw, hb, b), _make_layernorm, kind, kw, kb, kind,
                    hw, hb, b)
        k[rt.grid_1d(rows, 1, 65535), b](x2, w, bb, rt.ACC_NP[kind](eps), out)
    return intake.out(_unmove(out, mshape, perm), kind)


def _build_specs() -> Iterator[tuple]:
    for kind in rt.FLOAT_KINDS:
        arr2 = nt.Array(rt.NUMBA_STORAGE[kind], 2, "A")
        arr1 = nt.Array(rt.NUMBA_STORAGE[kind], 1, "A")
        yield (f"softmax[rows] {kind}", _cached(("softmax", kind, 256), _make_softmax,
                                                kind, kind, 256), (arr2, arr2))
        k = _cached(("ln", kind, kind, kind, True, True, 256), _make_layernorm, kind, kind,
                    kind, kind, True, True, 256)
        yield (f"layer_norm[rows] {kind}", k, (arr2, arr1, arr1, rt.ACC[kind], arr2))
