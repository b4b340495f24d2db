"""The ``searchsorted`` op (``np.searchsorted(a, v, side)``, 1-D sorted ``a``) and its CPU
kernel registration. NumPy's binary search branches on every step and runs on one
thread (about 70 ns per key measured on a 101-edge table); the kernel
(numaccel/kernels_cpu/search.py) is branchless and parallel over the keys."""
from __future__ import annotations

import numpy as np

from ..backends import register_kernel
from ..ir import AVal
from .table import OpDef, register_op


def searchsorted_ref(a, v, side="left"):
    return np.searchsorted(a, v, side=side)


def searchsorted_infer(avals, side="left"):
    a, v = avals
    if a.ndim != 1:
        raise ValueError(f"searchsorted needs a 1-D sorted array, got {a.ndim}-D")
    return AVal(v.shape, np.dtype(np.intp))


SEARCHSORTED = register_op(OpDef(
    "searchsorted", "opaque", searchsorted_ref, searchsorted_infer,
    doc="np.searchsorted(a, v, side): insertion indices of v into the sorted 1-D a"),
    replace=True)

# the kernel's dtypes: one dtype for both operands (NumPy would otherwise cast both to a
# common type first; those cases keep NumPy's implementation)
_KERNEL_DTYPES = tuple(np.dtype(t) for t in (np.float64, np.float32, np.int64, np.int32,
                                              np.uint64, np.uint32))


def _cpu_supports(a, v, side="left") -> bool:
    return (isinstance(a, np.ndarray) and isinstance(v, np.ndarray) and a.ndim == 1
            and a.dtype == v.dtype and a.dtype in _KERNEL_DTYPES
            and side in ("left", "right"))


def _cpu_searchsorted(a, v, side="left"):
    from ..kernels_cpu.search import searchsorted   # Numba loads on first use
    return searchsorted(a, v, side)


register_kernel("searchsorted", "cpu", _cpu_searchsorted, supports=_cpu_supports,
                name="searchsorted_cpu")
