"""Block reductions along one axis (sum/max/min/argmax/argmin) and row-wise softmax/layernorm.

The operand is viewed as ``(outer, R, inner)`` around the reduced axis (non-contiguous inputs
are first copied contiguously by the elementwise template). When ``inner == 1`` (reducing the
last axis) one thread block owns a row: each thread accumulates a strided slice in float32
(float64 for float64) and the block combines the partials in a shared-memory tree, which keeps
float32 sums within a few ulp of NumPy's pairwise sum. Otherwise each thread owns one
``(outer, inner)`` output and walks ``R`` (neighbouring threads read neighbouring columns).
NaN propagates like NumPy (``max`` gives NaN, ``argmax`` the first NaN's index).

``softmax`` and ``layer_norm`` are the "persistent" row kernels: one block per row, passes
over the row in registers/L1 (max, sum of exponentials, write; or mean, variance, write),
matching ``torch.nn.functional.softmax`` / ``layer_norm`` (biased variance, ``eps`` inside the
square root) on the last axis.

Example::

    from numaccel.kernels_gpu import reduce_sum, reduce_argmax, softmax
    s = reduce_sum(np.ones((4, 5), np.float32), axis=1)    # -> [5, 5, 5, 5]
    p = softmax(np.zeros((2, 3), np.float32))               # rows of 1/3
"""
from __future__ import annotations

import math
from typing import Iterator, Optional

import numpy as np
from numba import cuda

from . import _runtime as rt
from ._runtime import nt
from .elementwise import copy as _copy

__all__ = ["reduce_sum", "reduce_max", "reduce_min", "reduce_argmax", "reduce_argmin",
           "softmax", "layer_norm"]

_BLOCK = rt.SIM_BLOCK if rt.SIM else 256
_KERNELS: dict = {}


@rt.devfn
def _add(a, b):
    return a + b


@rt.devfn
def _max(a, b):
    return a if (a > b or a != a) else b


@rt.devfn
def _min(a, b):
    return a if (a < b or a != a) else b


@rt.devfn
def _better_max(va, ia, vb, ib):
    """True when (vb, ib) should replace (va, ia) for argmax (NaN first, then first max)."""
    if va != va:
        return vb != vb and ib < ia
    if vb != vb:
        return True
    return vb > va or (vb == va and ib < ia)


@rt.devfn
def _better_min(va, ia, vb, ib):
    if va != va:
        return vb != vb and ib < ia
    if vb != vb:
        return True
    return vb < va or (vb == va and ib < ia)


_COMBINE = {"sum": _add, "max": _max, "min": _min}
_BETTER = {"argmax": _better_max, "argmin": _better_min}


def _make_reduce(op: str, kin: str, kout, block: int, rows: bool):
    ld = rt.LOAD[kin]
    acc = rt.ACC[kin]
    if op in _BETTER:
        better = _BETTER[op]
        if rows:
            @cuda.jit
            def k_arg_rows(x, out):
                sv = cuda.shared.array(block, acc)
                si = cuda.shared.array(block, nt.int64)
                t = cuda.threadIdx.x
                n_out = x.shape[0] * x.shape[2]
                R = x.shape[1]
                for row in range(cuda.blockIdx.x, n_out, cuda.gridDim.x):
                    o = row // x.shape[2]
                    j = row % x.shape[2]
                    bv = acc(0)
                    bi = np.int64(R)          # R = "no candidate yet"
                    for r in range(t, R, block):
                        v = acc(ld(x[o, r, j]))
                        if bi == R or better(bv, bi, v, np.int64(r)):
                            bv = v
                            bi = np.int64(r)
                    sv[t] = bv
                    si[t] = bi
                    cuda.syncthreads()
                    s = block // 2
                    while s > 0:
                        if t < s and si[t + s] < R and (si[t] == R or better(
                                sv[t], si[t], sv[t + s], si[t + s])):
                            sv[t] = sv[t + s]
                            si[t] = si[t + s]
                        cuda.syncthreads()
                        s //= 2
                    if t == 0:
                        out[o, j] = si[0]
                    cuda.syncthreads()
            return k_arg_rows

        @cuda.jit
        def k_arg_cols(x, out):
            R = x.shape[1]
            n_out = x.shape[0] * x.shape[2]
            for p in range(cuda.grid(1), n_out, cuda.gridsize(1)):
                o = p // x.shape[2]
                j = p % x.shape[2]
                bv = acc(ld(x[o, 0, j]))
                bi = np.int64(0)
                for r in range(1, R):
                    v = acc(ld(x[o, r, j]))
                    if better(bv, bi, v, np.int64(r)):
                        bv = v
                        bi = np.int64(r)
                out[o, j] = bi
        return k_arg_cols

    comb = _COMBINE[op]
    st = rt.STORE[kout]
    is_sum = op == "sum"      # a frozen bool: numba prunes the other branch
    if rows:
        @cuda.jit
        def k_rows(x, out):
            sm = cuda.shared.array(block, acc)
            t = cuda.threadIdx.x
            n_out = x.shape[0] * x.shape[2]
            R = x.shape[1]
            for row in range(cuda.blockIdx.x, n_out, cuda.gridDim.x):
                o = row // x.shape[2]
                j = row % x.shape[2]
                if is_sum:
                    a = acc(0)
                else:
                    a = acc(ld(x[o, min(t, R - 1), j]))   # max/min: R >= 1 is checked
                for r in range(t, R, block):
                    a = comb(a, acc(ld(x[o, r, j])))
                sm[t] = a
                cuda.syncthreads()
                s = block // 2
                while s > 0:
                    if t < s:
                        sm[t] = comb(sm[t], sm[t + s])
                    cuda.syncthreads()
                    s //= 2
                if t == 0:
                    out[o, j] = st(sm[0])
                cuda.syncthreads()
        return k_rows

    @cuda.jit
    def k_cols(x, out):
        R = x.shape[1]
        n_out = x.shape[0] * x.shape[2]
        for p in range(cuda.grid(1), n_out, cuda.gridsize(1)):
            o = p // x.shape[2]
            j = p % x.shape[2]
            if is_sum:
                a = acc(0)
                # blocks of 64 partial sums keep float32 error near pairwise summation
                for r0 in range(0, R, 64):
                    b = acc(0)
                    for r in range(r0, min(r0 + 64, R)):
                        b += acc(ld(x[o, r, j]))
                    a += b
            else:
                a = acc(ld(x[o, 0, j]))
                for r in range(1, R):
                    a = comb(a, acc(ld(x[o, r, j])))
            out[o, j] = st(a)
    return k_cols


def _kernel(op, kin, kout, block, rows):
    key = ("red", op, kin, kout, block, rows)
    if key not in _KERNELS:
        _KERNELS[key] = _make_reduce(op, kin, kout, block, rows)
    return _KERNELS[key]


def _as3d(dev, axis: int):
    shape = tuple(dev.shape)
    if not rt.is_c_contig(dev):
        dev = rt._as_numba(_copy(dev))
    outer = math.prod(shape[:axis])
    inner = math.prod(shape[axis + 1:])
    return rt.reshape(dev, (outer, shape[axis], inner)), outer, inner


def _float_kind(kind, what):
    if kind not in rt.FLOAT_KINDS:
        raise TypeError(f"{what}: supports float32/float16/bfloat16/float64, got {kind}; "
                        "cast the input first")
    return kind


def _reduce(op: str, x, axis: Optional[int], keepdims: bool, block: Optional[int]):
    intake = rt.Intake()
    dev, kind = intake.arr(x, "x")
    _float_kind(kind, f"reduce_{op}")
    shape = tuple(dev.shape)
    if axis is None:
        if not rt.is_c_contig(dev):
            dev = rt._as_numba(_copy(dev))
        dev = rt.reshape(dev, (math.prod(shape),))
        ax, work_shape = 0, (math.prod(shape),)
    else:
        nd = max(len(shape), 1)
        if not -nd <= axis < nd or not shape:
            raise ValueError(f"reduce_{op}: axis {axis} is out of bounds for shape {shape}")
        ax, work_shape = axis % nd, shape
    R = work_shape[ax]
    out_shape = work_shape[:ax] + work_shape[ax + 1:]
    if R == 0 and op != "sum":
        raise ValueError(f"reduce_{op}: zero-size reduction along axis {axis} of shape {shape} "
                         "has no identity")
    kout = np.dtype(np.int64) if op in _BETTER else kind
    x3, outer, inner = _as3d(dev, ax)
    out = rt.empty((outer, inner), kout)
    if outer * inner > 0:
        b = block or _BLOCK
        if R == 0:
            _kernel("sum", kind, kout, b, False)[rt.grid_1d(outer * inner, b), b](x3, out)
        elif inner == 1:
            _kernel(op, kind, kout, b, True)[rt.grid_1d(outer, 1, 65535), b](x3, out)
        else:
            _kernel(op, kind, kout, b, False)[rt.grid_1d(outer * inner, b), b](x3, out)
    res = rt.reshape(out, out_shape)
    if keepdims:
        res = rt.reshape(out, shape[:ax] + (1,) + shape[ax + 1:] if axis is not None
                         else (1,) * len(shape))
    return intake.out(res, kout if kout in rt.FLOAT_KINDS else np.dtype(np.int64))


def reduce_sum(x, axis: Optional[int] = None, keepdims: bool = False, block=None):
    """``np.sum(x, axis)`` in the input's dtype, accumulated in float32 (float64 for f64).

    Example::

        reduce_sum(np.arange(6, dtype=np.float32).reshape(2, 3), axis=0)   # [3, 5, 7]
    """
    return _reduce("sum", x, axis, keepdims, block)


def reduce_max(x, axis: Optional[int] = None, keepdims: bool = False, block=None):
    """``np.max(x, axis)`` (NaN propagates). Example: ``reduce_max(x, axis=-1)``."""
    return _reduce("max", x, axis, keepdims, block)


def reduce_min(x, axis: Optional[int] = None, keepdims: bool = False, block=None):
    """``np.min(x, axis)`` (NaN propagates). Example: ``reduce_min(x, axis=0)``."""
    return _reduce("min", x, axis, keepdims, block)


def reduce_argmax(x, axis: Optional[int] = None, keepdims: bool = False, block=None):
    """``np.argmax(x, axis)`` as int64 (first maximum; first NaN wins).

    Example: ``reduce_argmax(np.array([1, 3, 3], np.float32))`` -> 1.
    """
    return _reduce("argmax", x, axis, keepdims, block)


def reduce_argmin(x, axis: Optional[int] = None, keepdims: bool = False, block=None):
    """``np.argmin(x, axis)`` as int64. Example: ``reduce_argmin(x, axis=1)``."""
    return _reduce("argmin", x, axis, keepdims, block)


from ._rownorm import layer_norm, softmax  # noqa: E402  (row kernels share this module's API)


def _build_specs() -> Iterator[tuple]:
    for op in ("sum", "max", "argmax"):
        for kind in rt.FLOAT_KINDS:
            kout = np.dtype(np.int64) if op in _BETTER else kind
            to = nt.int64 if op in _BETTER else rt.NUMBA_STORAGE[kind]
            args = (nt.Array(rt.NUMBA_STORAGE[kind], 3, "A"), nt.Array(to, 2, "A"))
            for rows in (True, False):
                yield (f"reduce_{op}[{'rows' if rows else 'cols'}] {kind}",
                       _kernel(op, kind, kout, 256, rows), args)
    from . import _rownorm
    yield from _rownorm._build_specs()
