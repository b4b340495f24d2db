"""NumPy-API layer: movement (reshape, transpose, concatenate, pad, ...), elementwise
helpers (where, clip, select, round) and contractions (dot, einsum, tensordot, ...)."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from ..ops.prims import normalize_axis
from .npapi import (Unhandled, _assign_out, _axes, _ndim, _shape, _st_of, call_concrete,
                    handles, _has_traced)
from .symbolic import Sym, prod
from .tracer import TracedArray


# ------------------------------------------------------------------------------ movement

def _resolve_shape(shape, size):
    if isinstance(shape, (int, Sym, np.integer)) or (isinstance(shape, TracedArray)
                                                    and shape._aval.weak):
        shape = (shape,)
    shape = [s if isinstance(s, Sym) else operator.index(s) for s in shape]
    neg = [i for i, s in enumerate(shape) if isinstance(s, int) and s == -1]
    if len(neg) > 1:
        raise ValueError("can only specify one unknown dimension")
    if neg:
        known = prod(s for i, s in enumerate(shape) if i != neg[0])
        if known == 0:
            raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
        shape[neg[0]] = size // known
    if not (prod(shape) == size):
        raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
    return tuple(shape)


@handles(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise Unhandled("order= other than 'C'")
    shape = newshape if shape is None else shape
    st = _st_of(a)
    a = st.lift(a)
    return a._view("reshape", {"shape": _resolve_shape(shape, a.size)})


@handles(np.ravel)
def ravel(a, order="C"):
    return reshape(a, (-1,), order)


@handles(np.transpose)
def transpose(a, axes=None):
    st = _st_of(a)
    a = st.lift(a)
    nd = a.ndim
    if axes is None:
        axes = tuple(range(nd))[::-1]
    axes = tuple(normalize_axis(operator.index(x), nd) for x in axes)
    if sorted(axes) != list(range(nd)):
        raise ValueError("axes don't match array")
    return a._view("transpose", {"axes": axes})


@handles(np.swapaxes)
def swapaxes(a, axis1, axis2):
    nd = _ndim(a)
    axes = list(range(nd))
    i, j = normalize_axis(axis1, nd), normalize_axis(axis2, nd)
    axes[i], axes[j] = axes[j], axes[i]
    return transpose(a, axes)


@handles(np.moveaxis)
def moveaxis(a, source, destination):
    nd = _ndim(a)
    src = _axes(source, nd)
    dst = _axes(destination, nd)
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


@handles(np.expand_dims)
def expand_dims(a, axis):
    shape = list(_shape(a))
    nd = len(shape) + (len(axis) if isinstance(axis, (tuple, list)) else 1)
    axes = sorted(_axes(axis, nd))
    for ax in axes:
        shape.insert(ax, 1)
    return reshape(a, tuple(shape))


@handles(np.squeeze)
def squeeze(a, axis=None):
    shape = _shape(a)
    if axis is None:
        keep = [d for d in shape if not (isinstance(d, int) and d == 1)]
    else:
        axes = _axes(axis, len(shape))
        for ax in axes:
            if not (shape[ax] == 1):
                raise ValueError("cannot select an axis to squeeze out which has size not "
                                 "equal to one")
        keep = [d for i, d in enumerate(shape) if i not in axes]
    return reshape(a, tuple(keep))


@handles(np.broadcast_to)
def broadcast_to(a, shape, subok=False):
    st = _st_of(a)
    a = st.lift(a)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    return st.op("broadcast_to", [a], shape=shape)


@handles(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    from ..ops.prims import broadcast_shapes
    shape = broadcast_shapes(*(_shape(a) for a in args))
    return tuple(broadcast_to(a, shape) for a in args)


@handles(np.atleast_1d, np.atleast_2d, np.atleast_3d)
def _atleast(*arys):
    raise Unhandled()


@handles(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    if out is not None or dtype is not None:
        raise Unhandled("out=/dtype=")
    st = _st_of(*arrays)
    ts = [st.lift(a) for a in arrays]
    if axis is None:
        ts = [ravel(t) for t in ts]
        axis = 0
    return st.op("concatenate", ts, axis=normalize_axis(axis, ts[0].ndim))


@handles(np.stack)
def stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    if out is not None or dtype is not None:
        raise Unhandled("out=/dtype=")
    arrays = list(arrays)
    nd = _ndim(arrays[0]) + 1
    ax = normalize_axis(axis, nd)
    return concatenate([expand_dims(a, ax) for a in arrays], axis=ax)


@handles(np.hstack)
def hstack(tup, dtype=None, casting="same_kind"):
    tup = [a if _ndim(a) >= 1 else reshape(a, (1,)) for a in tup]
    return concatenate(tup, axis=0 if _ndim(tup[0]) == 1 else 1, dtype=dtype)


@handles(np.vstack)
def vstack(tup, dtype=None, casting="same_kind"):
    tup = [a if _ndim(a) >= 2 else reshape(a, (1, -1)) for a in tup]
    return concatenate(tup, axis=0, dtype=dtype)


@handles(np.column_stack)
def column_stack(tup):
    tup = [a if _ndim(a) >= 2 else reshape(a, (-1, 1)) for a in tup]
    return concatenate(tup, axis=1)


@handles(np.split, np.array_split)
def split(ary, indices_or_sections, axis=0):
    st = _st_of(ary)
    a = st.lift(ary)
    ax = normalize_axis(axis, a.ndim)
    n = a.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        q, r = divmod(int(n), k)
        if r:
            raise ValueError("array split does not result in an equal division")
        bounds = [i * q for i in range(k + 1)]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    pre = (slice(None),) * ax
    return [a[pre + (slice(lo, hi),)] for lo, hi in zip(bounds[:-1], bounds[1:])]


@handles(np.flip)
def flip(m, axis=None):
    st = _st_of(m)
    m = st.lift(m)
    axes = tuple(range(m.ndim)) if axis is None else _axes(axis, m.ndim)
    return m._view("flip", {"axis": axes})


@handles(np.fliplr)
def fliplr(m):
    return flip(m, 1)


@handles(np.flipud)
def flipud(m):
    return flip(m, 0)


@handles(np.roll)
def roll(a, shift, axis=None):
    st = _st_of(a)
    a = st.lift(a)
    if isinstance(shift, (tuple, list)) or isinstance(axis, (tuple, list)):
        axes = _axes(axis, a.ndim)
        shift = tuple(shift) if isinstance(shift, (tuple, list)) else (shift,) * len(axes)
        return st.op("roll", [a], shift=tuple(int(s) for s in shift), axis=axes)
    return st.op("roll", [a], shift=int(shift),
                 axis=None if axis is None else normalize_axis(axis, a.ndim))


@handles(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    if mode != "constant" or set(kwargs) - {"constant_values"}:
        raise Unhandled(f"mode={mode!r}")
    st = _st_of(array)
    a = st.lift(array)
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (a.ndim, 2))
    cv = kwargs.get("constant_values", 0)
    if np.ndim(cv) != 0:
        raise Unhandled("per-axis constant_values")
    return st.op("pad", [a, cv], pad_width=tuple((int(lo), int(hi)) for lo, hi in pw))


@handles(np.tile)
def tile(A, reps):
    st = _st_of(A)
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    return st.op("tile", [A], reps=tuple(int(r) for r in reps))


@handles(np.repeat)
def repeat(a, repeats, axis=None):
    if not isinstance(repeats, (int, np.integer)):
        raise Unhandled("array repeats")
    st = _st_of(a)
    a = st.lift(a)
    return st.op("repeat", [a], repeats=int(repeats),
                 axis=None if axis is None else normalize_axis(axis, a.ndim))


@handles(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    if prepend is not np._NoValue or append is not np._NoValue:
        raise Unhandled("prepend=/append=")
    st = _st_of(a)
    a = st.lift(a)
    ax = normalize_axis(axis, a.ndim)
    pre = (slice(None),) * ax
    for _ in range(n):
        hi, lo = a[pre + (slice(1, None),)], a[pre + (slice(None, -1),)]
        a = np.not_equal(hi, lo) if a.dtype == np.bool_ else hi - lo
    return a


# ------------------------------------------------------------------------------ elementwise

@handles(np.where)
def where(condition, x=None, y=None):
    if x is None and y is None:
        raise Unhandled("np.where with one argument (data-dependent size)")
    st = _st_of(condition, x, y)
    return st.op("where", [condition, x, y])    # a 0-d array even from scalars, as NumPy


@handles(np.clip)
def clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue,
         max=np._NoValue, **kwargs):
    if kwargs:
        raise Unhandled(f"arguments {sorted(kwargs)}")
    lo = a_min if a_min is not np._NoValue else (None if min is np._NoValue else min)
    hi = a_max if a_max is not np._NoValue else (None if max is np._NoValue else max)
    st = _st_of(a, lo, hi)
    bounds = [b for b in (lo, hi) if b is not None]
    res = st.op("clip", [a] + bounds, scalar=True, has_lo=lo is not None,
                has_hi=hi is not None)
    return _assign_out(st, out, res, None) if out is not None else res


@handles(np.select)
def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    st = _st_of(*condlist, *choicelist, default)
    res = st.lift(default)
    # nested where: the first true condition wins, as in np.select
    for c, v in reversed(list(zip(condlist, choicelist))):
        res = st.op("where", [c, v, res])
    return res


@handles(np.round, np.around)
def round_(a, decimals=0, out=None):
    st = _st_of(a)
    res = st.op("round", [a], scalar=True, decimals=int(decimals))
    return _assign_out(st, out, res, None) if out is not None else res


@handles(np.real)
def real(val):
    st = _st_of(val)
    t = st.lift(val)
    return t._view("real", {}) if t.dtype.kind == "c" else t


@handles(np.imag)
def imag(val):
    st = _st_of(val)
    return st.op("imag", [val])


@handles(np.astype)
def astype(x, dtype, /, *, copy=True, device=None):
    st = _st_of(x)
    return st.op("astype", [x], dtype=np.dtype(dtype))


@handles(np.copy)
def copy(a, order="K", subok=False):
    st = _st_of(a)
    return st.op("copy", [a])


@handles(np.ndim)
def ndim(a):
    return _ndim(a)


@handles(np.shape)
def shape(a):
    return _shape(a)


@handles(np.size)
def size(a, axis=None):
    return prod(_shape(a)) if axis is None else _shape(a)[axis]


# ------------------------------------------------------------------------------ contraction

@handles(np.matmul)
def matmul(a, b, out=None, **kw):
    if out is not None or kw:
        raise Unhandled("out=/extra arguments")
    st = _st_of(a, b)
    return st.op("matmul", [a, b], scalar=True)


@handles(np.einsum)
def einsum(subscripts, *operands, out=None, optimize=False, **kw):
    if out is not None or kw or not isinstance(subscripts, str):
        raise Unhandled("out=/dtype=/interleaved operands")
    st = _st_of(*operands)
    return st.op("einsum", list(operands), scalar=True, subscripts=subscripts.replace(" ", ""))


@handles(np.dot)
def dot(a, b, out=None):
    if out is not None:
        raise Unhandled("out=")
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return np.multiply(a, b)
    if nb == 1 or na <= 2 and nb <= 2:
        return matmul(a, b)
    la = "abcdefghij"[:na - 1]
    lb = "klmnopqrst"[:nb - 2]
    return einsum(f"{la}z,{lb}zy->{la}{lb}y", a, b)


@handles(np.vdot)
def vdot(a, b):
    a = ravel(a)
    return dot(np.conjugate(a) if a.dtype.kind == "c" else a, ravel(b))


@handles(np.inner)
def inner(a, b):
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return np.multiply(a, b)
    la, lb = "abcdefghij"[:na - 1], "klmnopqrst"[:nb - 1]
    return einsum(f"{la}z,{lb}z->{la}{lb}", a, b)


@handles(np.outer)
def outer(a, b, out=None):
    if out is not None:
        raise Unhandled("out=")
    return np.multiply(reshape(ravel(a), (-1, 1)), reshape(ravel(b), (1, -1)))


@handles(np.tensordot)
def tensordot(a, b, axes=2):
    na, nb = _ndim(a), _ndim(b)
    if isinstance(axes, (int, np.integer)):
        ax_a = list(range(na - axes, na))
        ax_b = list(range(0, axes))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
        ax_a = [normalize_axis(x, na) for x in ax_a]
        ax_b = [normalize_axis(x, nb) for x in ax_b]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sa = [next(letters) for _ in range(na)]
    sb = [next(letters) for _ in range(nb)]
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = [c for i, c in enumerate(sa) if i not in ax_a] + \
        [c for j, c in enumerate(sb) if j not in ax_b]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b)


@handles(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if offset or (axis1, axis2) != (0, 1) or dtype is not None or out is not None or \
            _ndim(a) != 2:
        raise Unhandled("offset/axes/dtype")
    return einsum("ii->", a)


