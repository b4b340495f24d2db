"""``numaccel.sparse.linear``: ``x @ W.T + bias`` with a 2:4 compressed weight.

Example::

    import numpy as np
    from numaccel.sparse import linear, prune_2_4, to_sparse_semi_structured

    s = to_sparse_semi_structured(prune_2_4(np.ones((8, 32), np.float32)))
    y = linear(np.ones((2, 3, 32), np.float32), s, np.zeros(8, np.float32))  # (2, 3, 8)
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from . import dispatch
from .semi_structured import SUPPORTED_DTYPES, SparseSemiStructuredArray

bfloat16 = np.dtype(ml_dtypes.bfloat16)


def result_dtype(x_dtype, w_dtype) -> np.dtype:
    """Output dtype of ``linear``: NumPy/ml_dtypes promotion of x and W (f16+bf16 -> f32)."""
    return np.result_type(np.dtype(x_dtype), np.dtype(w_dtype))


def linear(x: Any, w: SparseSemiStructuredArray, bias: Any | None = None, *,
           kernel: str = "auto") -> np.ndarray:
    """``x @ w.T + bias`` for ``x`` of shape ``(..., in_features)`` and a compressed ``w``.

    Products accumulate in float32 (also for float16/bfloat16 inputs) and are rounded
    once to the result dtype (``np.result_type(x.dtype, w.dtype)``). ``kernel``:
    ``"auto"`` (measured dispatch, see ``numaccel.sparse.dispatch``), ``"permute"``,
    ``"tiled"`` (the sparse kernels) or ``"dense"`` (BLAS on a cached float32 dense copy
    of ``w``, see ``w.release_dense_cache()``).

    Example::

        >>> s = to_sparse_semi_structured(np.eye(4, 8, dtype=np.float32))
        >>> linear(np.arange(8, dtype=np.float32), s).tolist()
        [0.0, 1.0, 2.0, 3.0]
    """
    if not isinstance(w, SparseSemiStructuredArray):
        raise TypeError(f"linear needs a SparseSemiStructuredArray weight, got "
                        f"{type(w).__name__}; compress it with to_sparse_semi_structured(w)")
    x = np.asarray(x)
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"2:4 linear supports float32, float16 and bfloat16 inputs, got "
                        f"x of dtype {x.dtype}; cast with x.astype(np.float32)")
    m, k = w.shape
    if x.ndim == 0 or x.shape[-1] != k:
        raise ValueError(f"x of shape {x.shape} does not match the weight of shape {w.shape}:"
                         f" x's last dim must be in_features = {k}")
    lead = x.shape[:-1]
    n = int(np.prod(lead, dtype=np.int64))
    out_dtype = result_dtype(x.dtype, w.dtype)
    b = None
    if bias is not None:
        b = np.asarray(bias)
        if b.shape != (m,):
            raise ValueError(f"bias must have shape ({m},) (out_features), got {b.shape}")
        if b.dtype not in SUPPORTED_DTYPES + (np.dtype(np.float64),):
            raise TypeError(f"bias must be a float array, got {b.dtype}")
        b = b.astype(np.float32)
    x2 = np.ascontiguousarray(x.reshape(n, k), dtype=np.float32)
    path = dispatch.choose(n, m, k, w.dtype) if kernel == "auto" else kernel
    if path == "dense":
        y = x2 @ w._dense_f32().T
    elif path in ("permute", "tiled"):
        from numaccel.kernels_cpu import sparse24 as kern
        y = kern.linear(x2, w.values, w.meta, w.shape, path)
    else:
        raise ValueError(f"unknown kernel {kernel!r}; choose 'auto', 'permute', 'tiled' "
                         "or 'dense'")
    if b is not None:
        y += b
    return y.astype(out_dtype, copy=False).reshape(lead + (m,))
