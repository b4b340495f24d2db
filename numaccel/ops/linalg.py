"""Dense linear algebra ops that run LAPACK through NumPy: ``linalg_solve``,
``linalg_inv``, ``linalg_det``, ``linalg_cholesky``, ``linalg_eigvalsh``.

They are opaque to fusion (every backend calls the reference, NumPy's own function), but
tracing them keeps a program in one graph: before, each call was a graph break, so a
loop of solves (a regularization path) re-traced its program on every call and its
elementwise work around the solves ran unfused. The tracer (``trace/np_extra.py``) only
emits them for operands whose dtype NumPy's linalg keeps (float32/64, complex64/128;
integers are cast to float64 first, as NumPy does) and shapes it accepts; anything else
stays a graph break, so NumPy raises its own error.
"""
from __future__ import annotations

import numpy as np

from ..ir import AVal
from .table import OpDef, register_op

_REAL = {np.dtype(np.complex64): np.dtype(np.float32),
         np.dtype(np.complex128): np.dtype(np.float64)}


def _same(avals, **_):
    return AVal(avals[0].shape, avals[0].dtype)


register_op(OpDef("linalg_solve", "opaque", np.linalg.solve,
                  lambda avals: AVal(avals[1].shape, avals[0].dtype),
                  doc="np.linalg.solve(a, b): a (n, n), b (n,) or (n, k), one dtype"),
            replace=True)
register_op(OpDef("linalg_inv", "opaque", np.linalg.inv, _same,
                  doc="np.linalg.inv(a), a (..., n, n)"), replace=True)
register_op(OpDef("linalg_cholesky", "opaque",
                  lambda a, upper=False: np.linalg.cholesky(a, upper=upper),
                  _same, doc="np.linalg.cholesky(a, upper=upper), a (..., n, n)"),
            replace=True)
register_op(OpDef("linalg_det", "opaque", np.linalg.det,
                  lambda avals: AVal(avals[0].shape[:-2], avals[0].dtype),
                  doc="np.linalg.det(a), a (..., n, n)"), replace=True)
register_op(OpDef("linalg_eigvalsh", "opaque",
                  lambda a, UPLO="L": np.linalg.eigvalsh(a, UPLO=UPLO),
                  lambda avals, UPLO="L": AVal(avals[0].shape[:-1],
                                               _REAL.get(avals[0].dtype, avals[0].dtype)),
                  doc="np.linalg.eigvalsh(a, UPLO), a (..., n, n): ascending, real"),
            replace=True)
