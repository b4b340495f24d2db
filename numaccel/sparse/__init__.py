"""2:4 semi-structured sparsity for NumPy weights (the analog of PyTorch's
``to_sparse_semi_structured``), with CPU kernels and the layout the GPU path uses.

Example::

    import numpy as np
    from numaccel import sparse

    w = sparse.prune_2_4(np.random.default_rng(0).standard_normal((64, 128), np.float32))
    s = sparse.to_sparse_semi_structured(w)     # half the values + 2-bit metadata
    x = np.ones((3, 128), np.float32)
    y = x @ s.T                                 # == x @ w.T, computed compressed
    y2 = sparse.linear(x, s, bias=np.zeros(64, np.float32))

Layout: docs/sparse24_layout.md. Dispatch between the sparse kernels and dense BLAS:
``numaccel.sparse.dispatch``.
"""
from __future__ import annotations

from . import dispatch  # noqa: F401
from .products import linear
from .semi_structured import (
    SparseSemiStructuredArray,
    SparsityPatternError,
    prune_2_4,
    to_sparse_semi_structured,
)

__all__ = [
    "SparseSemiStructuredArray",
    "SparsityPatternError",
    "linear",
    "prune_2_4",
    "to_sparse_semi_structured",
]

