"""Sorting ops: ``sort`` and ``argsort`` (NumPy's, along one axis or flattened), and
``argsort_topk``, the first ``k`` indices of a stable ``argsort`` along the last axis.

``argsort_topk`` is what ``np.argsort(x, axis=-1)[..., :k]`` (k nearest neighbours) is
lowered to by the CPU backend (``lower/topk.py``): a full sort of every row costs
``n log n``, the ``k`` smallest in order one pass over the row (kernel:
``kernels_cpu/topk.py``). Ties come out in index order (a stable sort's order), which
is one of the orders NumPy's unstable default sort may produce; NumPy's own order of
ties differs between its SIMD and scalar sorts.
"""
from __future__ import annotations

import numpy as np

from ..backends import register_kernel
from ..ir import AVal
from ..trace.symbolic import prod
from .table import OpDef, register_op


def _flat_shape(aval, axis):
    return (prod(aval.shape),) if axis is None else tuple(aval.shape)


def sort_ref(x, axis=-1, kind=None):
    return np.sort(x, axis=axis, kind=kind)


def argsort_ref(x, axis=-1, kind=None):
    return np.argsort(x, axis=axis, kind=kind)


def argsort_topk_ref(x, k):
    return np.argsort(x, axis=-1, kind="stable")[..., :k]


register_op(OpDef("sort", "opaque", sort_ref,
                  lambda avals, axis=-1, kind=None: AVal(_flat_shape(avals[0], axis),
                                                         avals[0].dtype),
                  doc="np.sort(x, axis, kind)"), replace=True)
register_op(OpDef("argsort", "opaque", argsort_ref,
                  lambda avals, axis=-1, kind=None: AVal(_flat_shape(avals[0], axis),
                                                         np.dtype(np.intp)),
                  doc="np.argsort(x, axis, kind)"), replace=True)
register_op(OpDef("argsort_topk", "opaque", argsort_topk_ref,
                  lambda avals, k: AVal(tuple(avals[0].shape[:-1]) + (k,),
                                        np.dtype(np.intp)),
                  doc="np.argsort(x, axis=-1, kind='stable')[..., :k], k <= x.shape[-1]"),
             replace=True)

TOPK_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _cpu_supports(x, k) -> bool:
    return isinstance(x, np.ndarray) and x.dtype in TOPK_DTYPES and x.ndim >= 1 and \
        0 <= k <= x.shape[-1]


def _cpu_topk(x, k):
    from ..kernels_cpu.topk import argsort_topk   # Numba loads on first use
    return argsort_topk(x, k)


register_kernel("argsort_topk", "cpu", _cpu_topk, supports=_cpu_supports,
                name="argsort_topk_cpu")
