"""The ``linear_24`` op: ``x @ W.T (+ bias)`` with a 2:4 compressed weight.

Inputs: ``x (..., K)``, ``values (M, Kp // 2)``, ``meta (M, Kp // 16)`` uint16 and an
optional ``bias (M,)``; attribute ``shape = (M, K)``, the dense weight shape (layout:
docs/sparse24_layout.md). Traced programs keep ``values``/``meta`` as constants.

- ``ref``: the NumPy spec (densify, float32 matmul, round once to the result dtype).
- ``infer``: ``AVal(x.shape[:-1] + (M,), result dtype)``.
- ``decompose``: the same computation from elementwise ops, broadcasting, a reduction and
  a matmul only (no scatter), so that a backend without a kernel can trace it.
- CPU kernel: ``numaccel.sparse.linear`` (measured dispatch between the Numba 2:4
  kernels and BLAS).

Example::

    from numaccel.ops import get_op
    import numaccel.ops.sparse24  # registers linear_24
    y = get_op("linear_24").ref(x, s.values, s.meta, shape=s.shape)
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from numaccel.backends import register_kernel
from numaccel.ir import AVal
from numaccel.ops.table import OpDef, register_op

_FLOATS = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _result_dtype(x_dtype, w_dtype) -> np.dtype:
    return np.result_type(np.dtype(x_dtype), np.dtype(w_dtype))


def _dense_from_compressed(values, meta, shape):
    """Dense float32 (M, K) weight with NumPy array ops only (traceable: no scatter)."""
    m, k = shape
    kp = values.shape[1] * 2
    shifts = (2 * np.arange(8, dtype=np.uint16)).astype(np.uint16)
    pos = (meta[:, :, None] >> shifts) & np.uint16(3)             # (M, Kp/16, 8)
    pos = pos.reshape(m, kp // 4, 2)                               # 2 kept per group
    onehot = pos[..., None] == np.arange(4, dtype=np.uint16)       # (M, G, 2, 4)
    v = values.astype(np.float32).reshape(m, kp // 4, 2)
    dense = (v[..., None] * onehot).sum(axis=2)                   # (M, G, 4)
    return dense.reshape(m, kp)[:, :k]


def linear_24_ref(x, values, meta, bias=None, *, shape):
    """NumPy reference: ``x @ W.T + bias`` in float32, rounded once to the result dtype."""
    x = np.asarray(x)
    w = _dense_from_compressed(np.asarray(values), np.asarray(meta, np.uint16), shape)
    y = x.astype(np.float32) @ w.T
    if bias is not None:
        y = y + np.asarray(bias).astype(np.float32)
    return y.astype(_result_dtype(x.dtype, values.dtype))


def linear_24_decompose(x, values, meta, bias=None, *, shape):
    """Primitive NumPy calls only (on traced arrays too): densify, matmul, add."""
    w = _dense_from_compressed(values, meta, shape)
    y = x.astype(np.float32) @ w.T
    if bias is not None:
        y = y + bias.astype(np.float32)
    return y.astype(_result_dtype(x.dtype, values.dtype))


def linear_24_infer(avals, *, shape):
    """Shape/dtype rule: ``(..., K) -> (..., M)``; checks the compressed shapes."""
    x, values, meta = avals[0], avals[1], avals[2]
    m, k = shape
    kp = -(-k // 16) * 16
    if x.ndim < 1 or x.shape[-1] != k:
        raise ValueError(f"linear_24: x {x} does not end in in_features={k}")
    if tuple(values.shape) != (m, kp // 2) or tuple(meta.shape) != (m, kp // 16):
        raise ValueError(f"linear_24: dense shape {shape} needs values ({m}, {kp // 2}) and "
                         f"meta ({m}, {kp // 16}), got {values} and {meta}")
    if meta.dtype != np.uint16:
        raise TypeError(f"linear_24: meta must be uint16, got {meta.dtype}")
    if len(avals) > 3 and avals[3] is not None and tuple(avals[3].shape) != (m,):
        raise ValueError(f"linear_24: bias must be ({m},), got {avals[3]}")
    return AVal(tuple(x.shape[:-1]) + (m,), _result_dtype(x.dtype, values.dtype))


LINEAR_24 = register_op(OpDef(
    name="linear_24", kind="composite", ref=linear_24_ref, infer=linear_24_infer,
    decompose=linear_24_decompose,
    doc="y = x @ W.T + bias with W 2:4 compressed (values, 2-bit meta); attrs: shape=(M, K)",
))


def _cpu_linear_24(x, values, meta, bias=None, *, shape):
    from numaccel.sparse.products import linear
    from numaccel.sparse.semi_structured import SparseSemiStructuredArray
    return linear(x, SparseSemiStructuredArray(values, meta, shape), bias)


def _cpu_supports(x: Any, values: Any, meta: Any, bias: Any | None = None, *,
                  shape) -> bool:
    try:
        linear_24_infer([AVal(np.shape(a), a.dtype) for a in (x, values, meta)],
                        shape=shape)
    except (ValueError, TypeError, AttributeError):
        return False
    return (np.dtype(x.dtype) in _FLOATS and np.dtype(values.dtype) in _FLOATS
            and (bias is None or np.shape(bias) == (shape[0],)))


register_kernel("linear_24", "cpu", _cpu_linear_24, supports=_cpu_supports,
                name="sparse24_cpu")
