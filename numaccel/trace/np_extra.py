"""NumPy-API layer: functions written in terms of other traced functions."""
from __future__ import annotations

import numpy as np

from ..ops.prims import normalize_axis
from .npapi import Unhandled, _ndim, _shape, _st_of, handles
from .np_create import METHODS, getitem
from .np_shape import concatenate, expand_dims, reshape


def _tri_mask(st, n, m, k):
    """Boolean (n, m) mask of j <= i + k, built from aranges (works for symbolic sizes)."""
    rows = st.op("arange", [], start=0, stop=n, step=1, dtype=np.dtype(np.intp))
    cols = st.op("arange", [], start=0, stop=m, step=1, dtype=np.dtype(np.intp))
    return np.less_equal(reshape(cols, (1, -1)), reshape(rows, (-1, 1)) + k)


def _tri_select(m, k, lower):
    st = _st_of(m)
    m = st.lift(m)
    if m.ndim < 2:
        raise Unhandled("1-D input")
    n, c = m.shape[-2], m.shape[-1]
    mask = _tri_mask(st, n, c, k if lower else k - 1)
    zero = st.op("astype", [st.lift(0)], dtype=m.dtype)
    return st.op("where", [mask, m, zero]) if lower else st.op("where", [mask, zero, m])


@handles(np.tril)
def tril(m, k=0):
    return _tri_select(m, int(k), True)


@handles(np.triu)
def triu(m, k=0):
    return _tri_select(m, int(k), False)


def _atleast(nd):
    def h(*arys):
        outs = []
        for a in arys:
            shape = tuple(_shape(a))
            if len(shape) < nd:
                if nd == 3 and len(shape) == 2:
                    shape = shape + (1,)
                elif nd == 3 and len(shape) == 1:
                    shape = (1,) + shape + (1,)
                else:
                    shape = (1,) * (nd - len(shape)) + shape
                a = reshape(a, shape)
            outs.append(a)
        return outs[0] if len(outs) == 1 else tuple(outs)
    return h


handles(np.atleast_1d)(_atleast(1))
handles(np.atleast_2d)(_atleast(2))
handles(np.atleast_3d)(_atleast(3))


# NumPy < 2.3 returns a Python int for a count over all axes: a concrete value
_COUNT_IS_INT = type(np.count_nonzero(np.ones(1))) is int


@handles(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    if axis is None and not keepdims and _COUNT_IS_INT:
        raise Unhandled("a count over all axes is a Python int in this NumPy")
    st = _st_of(a)
    nz = np.not_equal(st.lift(a), 0)
    res = np.sum(nz, axis=axis, keepdims=keepdims, dtype=np.intp)
    return res


@handles(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    st = _st_of(arr, indices)
    arr, indices = st.lift(arr), st.lift(indices)
    if axis is None:
        return getitem(reshape(arr, (-1,)), indices)
    nd = arr.ndim
    ax = normalize_axis(axis, nd)
    index = []
    for d in range(nd):
        if d == ax:
            index.append(indices)
        else:
            shape = [1] * nd
            shape[d] = -1
            r = st.op("arange", [], start=0, stop=arr.shape[d], step=1,
                      dtype=np.dtype(np.intp))
            index.append(reshape(r, tuple(shape)))
    return getitem(arr, tuple(index))


@handles(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None or (axisa, axisb, axisc) != (-1, -1, -1):
        raise Unhandled("axis arguments")
    if not (_shape(a)[-1] == 3 and _shape(b)[-1] == 3):
        raise Unhandled("vectors that are not 3-D")
    a0, a1, a2 = (getitem(a, (Ellipsis, i)) for i in range(3))
    b0, b1, b2 = (getitem(b, (Ellipsis, i)) for i in range(3))
    comps = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0]
    return concatenate([expand_dims(c, -1) for c in comps], axis=-1)


@handles(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    if ord not in (None, 2, "fro") or (ord == 2 and (axis is None and _ndim(x) != 1)):
        raise Unhandled(f"ord={ord!r}")
    st = _st_of(x)
    x = st.lift(x)
    if x.dtype.kind not in "fc":
        x = st.op("astype", [x], dtype=np.dtype(np.float64))
    sq = np.real(x * np.conjugate(x)) if x.dtype.kind == "c" else x * x
    return np.sqrt(np.sum(sq, axis=axis, keepdims=keepdims))


@handles(np.pad)
def pad_modes(array, pad_width, mode="constant", **kwargs):
    from .np_shape import pad
    if mode == "constant":
        return pad(array, pad_width, mode, **kwargs)
    if mode != "edge" or kwargs:
        raise Unhandled(f"mode={mode!r}")
    st = _st_of(array)
    a = st.lift(array)
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (a.ndim, 2))
    if (pw >= 0).all() and all(type(n) is int and (n > 0 or not (lo or hi))
                               for n, (lo, hi) in zip(a.shape, pw)):
        # static sizes, none of them an empty axis to pad (NumPy raises for that)
        return st.op("pad", [a, 0], pad_width=tuple((int(lo), int(hi)) for lo, hi in pw),
                     mode="edge")
    if any(type(n) is int and n == 0 and (lo or hi) for n, (lo, hi) in zip(a.shape, pw)):
        raise Unhandled("NumPy raises the error")     # an empty axis cannot be extended
    for d, (lo, hi) in enumerate(pw):
        pre = (slice(None),) * d
        parts = []
        if lo:
            parts.append(np.repeat(getitem(a, pre + (slice(0, 1),)), int(lo), axis=d))
        parts.append(a)
        if hi:
            parts.append(np.repeat(getitem(a, pre + (slice(-1, None),)), int(hi), axis=d))
        if len(parts) > 1:
            a = concatenate(parts, axis=d)
    return a


@handles(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    if sorter is not None:
        raise Unhandled("sorter=")
    if side not in ("left", "right") or _ndim(a) != 1:
        raise Unhandled("NumPy raises the error")
    st = _st_of(a, v)
    a, v = st.lift(a), st.lift(v)
    return st.op("searchsorted", [a, v], scalar=v.ndim == 0, side=side)


METHODS["searchsorted"] = searchsorted      # a.searchsorted(v, side, sorter)


def _sort_args(a, axis, kind, order, stable):
    if order is not None:
        raise Unhandled("order= (structured arrays)")
    if stable is not None:
        if kind is not None:
            raise Unhandled("NumPy raises the error")
        kind = "stable" if stable else None
    st = _st_of(a)
    a = st.lift(a)
    if a.ndim == 0:
        raise Unhandled("a 0-d array")
    return st, a, None if axis is None else normalize_axis(axis, a.ndim), kind


@handles(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    st, a, axis, kind = _sort_args(a, axis, kind, order, stable)
    return st.op("sort", [a], axis=axis, kind=kind)


@handles(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    st, a, axis, kind = _sort_args(a, axis, kind, order, stable)
    return st.op("argsort", [a], axis=axis, kind=kind)


def _method_sort(a, axis=-1, kind=None, order=None, *, stable=None):
    if axis is None:
        raise Unhandled("NumPy raises the error")     # ndarray.sort has no axis=None
    a[...] = sort(a, axis, kind, order, stable=stable)


METHODS["argsort"] = argsort
METHODS["sort"] = _method_sort


# ------------------------------------------------------------------------------ linalg
# (ops/linalg.py): LAPACK through NumPy, traced so that they are no graph break

_LINALG_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64,
                                             np.complex128))


def _linalg_operand(st, a, what):
    a = st.lift(a)
    if a.dtype.kind in "biu":
        a = st.op("astype", [a], dtype=np.dtype(np.float64))   # as NumPy's linalg does
    elif a.dtype not in _LINALG_DTYPES:
        raise Unhandled(f"{what} of {a.dtype}")      # NumPy raises its TypeError
    return a


def _square(st, a, what):
    a = _linalg_operand(st, a, what)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise Unhandled("NumPy raises the error")    # not a stack of square matrices
    return a


@handles(np.linalg.solve)
def linalg_solve(a, b):
    st = _st_of(a, b)
    a, b = _linalg_operand(st, a, "solve"), _linalg_operand(st, b, "solve")
    if a.ndim != 2 or b.ndim not in (1, 2) or a.shape[0] != a.shape[1] \
            or b.shape[0] != a.shape[0]:
        raise Unhandled("stacked systems or shapes NumPy rejects")
    dt = np.result_type(a.dtype, b.dtype)
    a, b = (x if x.dtype == dt else st.op("astype", [x], dtype=dt) for x in (a, b))
    return st.op("linalg_solve", [a, b])


@handles(np.linalg.inv)
def linalg_inv(a):
    st = _st_of(a)
    return st.op("linalg_inv", [_square(st, a, "inv")])


@handles(np.linalg.det)
def linalg_det(a):
    st = _st_of(a)
    return st.op("linalg_det", [_square(st, a, "det")], scalar=True)   # 2-D: a scalar


@handles(np.linalg.cholesky)
def linalg_cholesky(a, /, *, upper=False):
    st = _st_of(a)
    return st.op("linalg_cholesky", [_square(st, a, "cholesky")], upper=bool(upper))


@handles(np.linalg.eigvalsh)
def linalg_eigvalsh(a, UPLO="L"):
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U"):
        raise Unhandled("NumPy raises the error")
    st = _st_of(a)
    return st.op("linalg_eigvalsh", [_square(st, a, "eigvalsh")], UPLO=UPLO.upper())
