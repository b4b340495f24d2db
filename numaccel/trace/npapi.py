"""The NumPy-API layer: public NumPy functions, ufunc methods, ndarray methods and
indexing mapped onto primitives, with NumPy's keyword semantics.

A function or case not handled here is not an error: it raises ``Unhandled`` and the
call runs concretely in NumPy behind a graph break (see ``tracer.TraceState.concrete``).
"""
from __future__ import annotations

import builtins
import operator
import sys

import numpy as np

from ..ops.prims import UFUNCS, normalize_axis
from .symbolic import Sym, prod
from .tracer import PY_KIND, TracedArray, current


class Unhandled(Exception):
    """This call (or these arguments) is not traced: run it concretely."""


HANDLERS: dict = {}


def handles(*funcs):
    def deco(h):
        for f in funcs:
            HANDLERS[f] = h
        return h
    return deco


def _st_of(*xs):
    for x in xs:
        if isinstance(x, TracedArray):
            return x._st
    return current()


def _axes(axis, ndim):
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        return tuple(normalize_axis(operator.index(a), ndim) for a in axis)
    return (normalize_axis(operator.index(axis), ndim),)


def _ndim(x):
    return x.ndim if isinstance(x, (TracedArray, np.ndarray)) else np.ndim(x)


def _shape(x):
    return x.shape if isinstance(x, (TracedArray, np.ndarray)) else np.shape(x)


# ------------------------------------------------------------------------------ dispatch

def _has_traced(x):
    if isinstance(x, TracedArray):
        return True
    if isinstance(x, (list, tuple)):
        return builtins.any(_has_traced(v) for v in x)
    if isinstance(x, dict):
        return builtins.any(_has_traced(v) for v in x.values())
    return False


def _collect(x, acc):
    if isinstance(x, TracedArray):
        acc.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _collect(v, acc)
    elif isinstance(x, dict):
        for v in x.values():
            _collect(v, acc)
    return acc


def _substitute(x, values):
    if isinstance(x, TracedArray):
        return values[id(x)]
    if isinstance(x, (list, tuple)):
        return type(x)(_substitute(v, values) for v in x)
    if isinstance(x, dict):
        return {k: _substitute(v, values) for k, v in x.items()}
    return x


def _wrap_result(st, x):
    if isinstance(x, np.ndarray):
        return st.input(x, _aval(x))
    if isinstance(x, np.generic):
        t = st.input(x, _aval(x))
        t._scalar = True
        return t
    if isinstance(x, tuple):
        return type(x)(_wrap_result(st, v) for v in x) if not hasattr(x, "_fields") \
            else type(x)(*(_wrap_result(st, v) for v in x))
    if isinstance(x, list):
        return [_wrap_result(st, v) for v in x]
    return x


def _aval(x):
    from .tracer import aval_of
    return aval_of(x)


def call_concrete(st, func, args, kwargs, why):
    """Run ``func`` in NumPy on concrete values behind a graph break."""
    traced = _collect((args, kwargs), [])
    values = st.concrete(traced, why) if traced else []
    vmap = {id(t): v for t, v in zip(traced, values)}
    cargs, ckwargs = _substitute(args, vmap), _substitute(kwargs, vmap)
    with st.suspended():
        res = func(*cargs, **ckwargs)
    # an `out=` array given as a traced value receives the result in place
    out = kwargs.get("out") if isinstance(kwargs, dict) else None
    outs = out if isinstance(out, tuple) else (out,)
    for o, co in zip(outs, ckwargs.get("out") if isinstance(ckwargs.get("out"), tuple)
                     else (ckwargs.get("out"),)):
        if isinstance(o, TracedArray):
            o._assign(st.input(co, _aval(co)))
    return _wrap_result(st, res)


def _fname(func):
    mod = getattr(func, "__module__", None) or ""
    return f"{mod.replace('numpy._core.', 'numpy.')}.{getattr(func, '__name__', func)}" \
        if mod else str(func)


def trace_function(st, func, args, kwargs):
    h = HANDLERS.get(func)
    if h is not None:
        try:
            return h(*args, **kwargs)
        except Unhandled as e:
            why = f"{_fname(func)}: {e}" if str(e) else f"{_fname(func)} with these arguments"
            return call_concrete(st, func, args, kwargs, f"{why} is not traced")
    return call_concrete(st, func, args, kwargs, f"{_fname(func)} is not supported by the tracer")


# ------------------------------------------------------------------------------ ufuncs

def _out_tuple(out):
    if out is None:
        return None
    return out if isinstance(out, tuple) else (out,)


def _assign_out(st, out, res, ufunc):
    if not isinstance(out, TracedArray):
        raise Unhandled("out= is not a traced array")
    if res.dtype != out.dtype:
        # (ufuncs checked NumPy's same_kind rule on dummies before: _check_out_dtype)
        res = st.op("astype", [res], dtype=out.dtype)
    if tuple(map(str, res.shape)) != tuple(map(str, out.shape)):
        res = st.op("broadcast_to", [res], shape=out.shape)
    out._assign(res)
    return out


def trace_ufunc(st, ufunc, method, inputs, kwargs):
    try:
        return _trace_ufunc(st, ufunc, method, inputs, dict(kwargs))
    except Unhandled as e:
        f = getattr(ufunc, method) if method != "__call__" else ufunc
        return call_concrete(st, f, inputs, kwargs,
                             f"numpy.{ufunc.__name__}.{method} ({e}) is not traced")


def _check_out_dtype(ufunc, inputs, out, kw):
    from ..ops.prims import dummy
    dums = [dummy(st_lift_aval(x), 0) for x in inputs]
    ufunc(*dums, out=tuple(np.empty((), o.dtype) for o in out), **kw)


def st_lift_aval(x):
    if isinstance(x, TracedArray):
        return x._aval
    return _aval(x if not isinstance(x, (list, tuple)) else np.asarray(x))


def _trace_ufunc(st, ufunc, method, inputs, kw):
    if UFUNCS.get(ufunc.__name__) is not ufunc and ufunc is not np.matmul:
        raise Unhandled("not a NumPy ufunc")
    out = _out_tuple(kw.pop("out", None))
    where = kw.pop("where", True)
    for k in ("subok", "order", "signature", "axes", "axis"):
        if k in kw and method == "__call__":
            raise Unhandled(f"{k}= argument")
    if method == "__call__":
        if where is not True:
            raise Unhandled("where= argument")
        if ufunc is np.matmul:
            res = (matmul(*inputs),)
        else:
            dtype = kw.pop("dtype", None)
            casting = kw.pop("casting", None)
            if kw:
                raise Unhandled(f"arguments {sorted(kw)}")
            if out is not None:
                _check_out_dtype(ufunc, inputs, out, {"dtype": dtype} if dtype else {})
            attrs = {"dtype": np.dtype(dtype) if dtype is not None else None}
            if casting is not None:
                attrs["casting"] = casting
            res = tuple(st.op(ufunc.__name__, inputs, scalar=True, out_index=k, **attrs)
                        if ufunc.nout > 1 else
                        st.op(ufunc.__name__, inputs, scalar=True, **attrs)
                        for k in range(ufunc.nout))
        if out is not None:
            res = tuple(_assign_out(st, o, r, ufunc) if o is not None else r
                        for o, r in zip(out, res))
        return res[0] if len(res) == 1 else res
    if method == "reduce":
        a = inputs[0]
        axis = kw.pop("axis", 0)
        keepdims = kw.pop("keepdims", False)
        dtype = kw.pop("dtype", None)
        if kw or where is not True:
            raise Unhandled(f"arguments {sorted(kw) or ['where']}")
        res = ufunc_reduce(a, ufunc.__name__, axis, keepdims, dtype)
        return _assign_out(st, out[0], res, ufunc) if out else res
    if method == "accumulate":
        a = st.lift(inputs[0])
        axis = kw.pop("axis", 0)
        dtype = kw.pop("dtype", None)
        if kw:
            raise Unhandled(f"arguments {sorted(kw)}")
        res = st.op("scan", [a], ufunc=ufunc.__name__, axis=normalize_axis(axis, a.ndim),
                    dtype=dtype and np.dtype(dtype))
        return _assign_out(st, out[0], res, ufunc) if out else res
    if method == "at":
        a, idx = inputs[0], inputs[1]
        b = inputs[2] if len(inputs) > 2 else None
        if not isinstance(a, TracedArray) or b is None:
            raise Unhandled("target is not traced or unary ufunc.at")
        spec, arrays = index_spec(st, a, idx)
        b = st.lift(b)
        new = st.op("ufunc_at", [a, b] + arrays, ufunc=ufunc.__name__, index=spec)
        a._assign(new)
        return None
    if method == "outer":
        a, b = st.lift(inputs[0]), st.lift(inputs[1])
        a2 = reshape(a, tuple(a.shape) + (1,) * b.ndim)
        return _trace_ufunc(st, ufunc, "__call__", (a2, b), dict(kw, **(
            {"out": out} if out else {})))
    raise Unhandled(f"method {method}")


# ------------------------------------------------------------------------------ reductions

_REDUCE_UFUNC = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum",
                 "amax": "maximum", "amin": "minimum", "any": "logical_or",
                 "all": "logical_and"}


def ufunc_reduce(a, ufunc, axis, keepdims=False, dtype=None):
    st = _st_of(a)
    a = st.lift(a)
    axes = _axes(axis, a.ndim) if axis is not None else None
    return st.op("ufunc_reduce", [a], scalar=True, ufunc=ufunc, axis=axes,
                 keepdims=bool(keepdims), dtype=dtype and np.dtype(dtype))


def _reduction(name):
    uf = _REDUCE_UFUNC.get(name)

    def h(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
          where=np._NoValue, ddof=0, **extra):
        if initial is not np._NoValue or where is not np._NoValue or extra:
            raise Unhandled("initial=/where= arguments")
        st = _st_of(a)
        a = st.lift(a)
        if uf is not None:
            if name in ("any", "all"):
                dtype = None
            res = ufunc_reduce(a, uf, axis, keepdims, dtype)
        else:
            attrs = {"axis": _axes(axis, a.ndim), "keepdims": bool(keepdims)}
            if name in ("mean", "std", "var", "nansum", "nanmean"):
                attrs["dtype"] = dtype and np.dtype(dtype)
            if name in ("std", "var"):
                attrs["ddof"] = ddof
            res = st.op(name, [a], scalar=True, **attrs)
        return _assign_out(st, out, res, None) if out is not None else res
    return h


for _n in ("sum", "prod", "max", "min", "amax", "amin", "any", "all", "mean", "std", "var",
           "nansum", "nanmax", "nanmin", "nanmean", "ptp"):
    if hasattr(np, _n):
        handles(getattr(np, _n))(_reduction(_n))


def _argreduce(name):
    def h(a, axis=None, out=None, keepdims=False):
        if out is not None:
            raise Unhandled("out=")
        st = _st_of(a)
        a = st.lift(a)
        ax = None if axis is None else normalize_axis(axis, a.ndim)
        return st.op(name, [a], scalar=True, axis=ax, keepdims=bool(keepdims))
    return h


handles(np.argmax)(_argreduce("argmax"))
handles(np.argmin)(_argreduce("argmin"))


def _cum(ufunc):
    def h(a, axis=None, dtype=None, out=None):
        st = _st_of(a)
        a = st.lift(a)
        ax = None if axis is None else normalize_axis(axis, a.ndim)
        res = st.op("scan", [a], ufunc=ufunc, axis=ax, dtype=dtype and np.dtype(dtype))
        return _assign_out(st, out, res, None) if out is not None else res
    return h


handles(np.cumsum)(_cum("add"))
handles(np.cumprod)(_cum("multiply"))


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
    return st.op("where", [condition, x, y], scalar=True)


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


# ------------------------------------------------------------------------------ creation

def _shape_arg(shape):
    if isinstance(shape, (int, np.integer, Sym)) or (isinstance(shape, TracedArray)):
        shape = (shape,)
    return tuple(s if isinstance(s, Sym) else operator.index(s) for s in shape)


def _full(st, fill_value, shape, dt):
    return st.op("full", [fill_value], shape=shape, dtype=dt)


def _like_factory(kind, fill):
    def h(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        st = _st_of(a)
        a = st.lift(a)
        dt = np.dtype(dtype) if dtype is not None else a.dtype
        return _full(st, fill, a.shape if shape is None else _shape_arg(shape), dt)
    return h


handles(np.zeros_like)(_like_factory("zeros", 0))
handles(np.ones_like)(_like_factory("ones", 1))
handles(np.empty_like)(_like_factory("empty", 0))


@handles(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    st = _st_of(a, fill_value)
    a = st.lift(a)
    dt = np.dtype(dtype) if dtype is not None else a.dtype
    return _full(st, fill_value, a.shape if shape is None else _shape_arg(shape), dt)


def stack_nested(st, x):
    """np.array([...]) of nested lists containing traced values."""
    items = [stack_nested(st, v) if isinstance(v, (list, tuple)) else st.lift(v) for v in x]
    if not items:
        raise Unhandled("empty list")
    dt = np.result_type(*[t.dtype if not t._aval.weak else np.asarray(0, t.dtype).item()
                          for t in items])
    items = [st.op("astype", [t], dtype=dt) if t.dtype != dt or t._aval.weak else t
             for t in items]
    return concatenate([expand_dims(t, 0) for t in items], axis=0)


# Array creation does not pass through __array_function__ when no argument is traced, so
# while a trace is active the NumPy module functions below are replaced by hooks that
# build creation nodes (programs that allocate an output and fill it in place then trace
# fully). Calls from inside NumPy or other libraries go to the original function.

_ORIG = {}
_LIB_PREFIXES = ("numpy", "scipy", "numba", "ml_dtypes", "torch", "pandas", "numaccel.",
                 "llvmlite", "onnx", "cupy")


def _from_user_code():
    f = sys._getframe(2)
    name = f.f_globals.get("__name__", "") or ""
    return not name.startswith(_LIB_PREFIXES) or name.startswith("numaccel.demo")


def _hook(name, builder):
    orig = getattr(np, name)
    _ORIG[name] = orig

    def hook(*args, **kwargs):
        st = current()
        if st is None or not _from_user_code():
            return orig(*args, **kwargs)
        try:
            return builder(st, *args, **kwargs)
        except Unhandled as e:
            return call_concrete(st, orig, args, kwargs, f"numpy.{name} ({e}) is not traced")
    hook.__name__ = name
    hook.__doc__ = orig.__doc__
    hook.__wrapped__ = orig
    return hook


def _b_full(fill):
    def b(st, shape, dtype=float, order="C", *, like=None, device=None):
        return _full(st, fill, _shape_arg(shape), np.dtype(dtype))
    return b


def _b_fullfn(st, shape, fill_value, dtype=None, order="C", *, like=None, device=None):
    dt = np.dtype(dtype) if dtype is not None else (
        fill_value.dtype if isinstance(fill_value, TracedArray) else np.asarray(fill_value).dtype)
    return _full(st, fill_value, _shape_arg(shape), dt)


def _b_arange(st, *args, dtype=None, like=None, device=None, **kw):
    if "start" in kw or "stop" in kw or "step" in kw:
        args = (kw.pop("start", 0), kw.pop("stop")) + ((kw.pop("step"),) if "step" in kw
                                                        else ())
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (
        args[0], args[1], args[2] if len(args) > 2 else 1)
    vals = []
    for v in (start, stop, step):
        if isinstance(v, TracedArray):
            if not v._aval.weak:
                raise Unhandled("array-valued bounds")
            v = v._st.specialize(v)
        vals.append(v)
    start, stop, step = vals
    if any(isinstance(v, Sym) for v in (start, stop)) and not all(
            isinstance(v, (int, Sym)) for v in (start, stop, step)):
        start, stop = int(start), int(stop)
    return st.op("arange", [], start=start, stop=stop, step=step,
                 dtype=np.dtype(dtype) if dtype is not None else None)


def _b_linspace(st, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0,
                *, device=None):
    if retstep or axis != 0 or any(isinstance(v, TracedArray) for v in (start, stop)):
        raise Unhandled("retstep/axis/array bounds")
    return st.op("linspace", [], start=start, stop=stop, num=operator.index(num)
                 if not isinstance(num, Sym) else num, endpoint=bool(endpoint),
                 dtype=np.dtype(dtype) if dtype is not None else None)


def _b_eye(st, N, M=None, k=0, dtype=float, order="C", *, device=None, like=None):
    return st.op("eye", [], N=N, M=M, k=int(k), dtype=np.dtype(dtype))


def _b_identity(st, n, dtype=None, *, like=None):
    return _b_eye(st, n, dtype=float if dtype is None else dtype)


def _b_array(st, obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    if ndmin or not _has_traced(obj):
        raise Unhandled("no traced values" if not ndmin else "ndmin=")
    t = st.lift(obj) if not isinstance(obj, TracedArray) else obj
    if isinstance(obj, TracedArray) and copy is not False:
        t = st.op("copy", [t])
    if dtype is not None and np.dtype(dtype) != t.dtype:
        t = st.op("astype", [t], dtype=np.dtype(dtype))
    return t


def _b_asarray(st, a, dtype=None, order=None, *, copy=None, device=None, like=None):
    if not _has_traced(a):
        raise Unhandled("no traced values")
    t = st.lift(a)
    if t._aval.weak:
        t = st.op("astype", [t], dtype=t.dtype)
    if dtype is not None and np.dtype(dtype) != t.dtype:
        t = st.op("astype", [t], dtype=np.dtype(dtype))
    return t


_HOOKS = {
    "zeros": _b_full(0), "ones": _b_full(1), "empty": _b_full(0), "full": _b_fullfn,
    "arange": _b_arange, "linspace": _b_linspace, "eye": _b_eye, "identity": _b_identity,
    "array": _b_array, "asarray": _b_asarray, "asanyarray": _b_asarray,
    "ascontiguousarray": _b_asarray,
}
_installed = [False]


def install_creation_hooks():
    """Replace NumPy's creation functions by trace-aware hooks (once per process).

    Outside a trace (or when called from library code) a hook forwards to the original
    function, so the only cost for other code is one Python call.
    """
    if _installed[0]:
        return
    _installed[0] = True
    for name, builder in _HOOKS.items():
        setattr(np, name, _hook(name, builder))


# ------------------------------------------------------------------------------ indexing

def index_spec(st, a, index):
    """(spec, index arrays) for ``a[index]``; see numaccel.trace.indexing."""
    if not isinstance(index, tuple):
        index = (index,)
    spec, arrays = [], []
    for it in index:
        if isinstance(it, TracedArray) and it._aval.weak:
            it = st.specialize(it)
        if it is None or it is Ellipsis or isinstance(it, (int, Sym)) and \
                not isinstance(it, bool):
            spec.append(it)
        elif isinstance(it, np.integer):
            spec.append(int(it))
        elif isinstance(it, slice):
            spec.append(slice(*(st.specialize(v) if isinstance(v, TracedArray) else
                                (int(v) if isinstance(v, np.integer) else v)
                                for v in (it.start, it.stop, it.step))))
        else:
            t = st.lift(np.asarray(it) if isinstance(it, (list, bool)) else it)
            if t.dtype == np.bool_:
                count = st.mask_count(t)
                spec.append(("arr", len(arrays), count))
            elif t.dtype.kind in "iu":
                spec.append(("arr", len(arrays)))
            else:
                raise IndexError("only integers, slices (`:`), ellipsis (`...`), "
                                 "numpy.newaxis (`None`) and integer or boolean arrays are "
                                 "valid indices")
            arrays.append(t)
    return tuple(spec), arrays


def getitem(a, index):
    st = a._st
    spec, arrays = index_spec(st, a, index)
    if not arrays:
        nints = builtins.sum(1 for it in spec if isinstance(it, (int, Sym)))
        scalar = nints == a.ndim and not builtins.any(it is None for it in spec)
        return a._view("getitem", {"index": spec}, scalar=scalar)
    return st.op("getitem", [a] + arrays, index=spec)


def setitem(a, index, value):
    st = a._st
    spec, arrays = index_spec(st, a, index)
    if isinstance(value, TracedArray) and value._base is (a._base or a) and not arrays and \
            value._chain == a._chain + (("getitem", {"index": spec}),) and \
            value._ver == (a._base or a)._version:
        return  # `a[i] += b` already wrote through the view a[i]
    v = st.lift(value)
    if v.dtype != a.dtype or v._aval.weak:
        v = st.op("astype", [v], dtype=a.dtype)
    if not arrays:
        view = a._view("getitem", {"index": spec})
        if tuple(map(str, v.shape)) != tuple(map(str, view.shape)):
            v = st.op("broadcast_to", [v], shape=view.shape)
        view._assign(v)
    else:
        a._assign(st.op("setitem", [a, v] + arrays, index=spec))


# ------------------------------------------------------------------------------ methods

def _method_astype(a, dtype, order="K", casting="unsafe", subok=True, copy=True):
    return a._st.op("astype", [a], dtype=np.dtype(dtype))


def _method_reshape(a, *shape, order="C", copy=None):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return reshape(a, shape, order)


def _method_transpose(a, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = axes[0]
    return transpose(a, axes or None)


def _method_fill(a, value):
    a[...] = value


METHODS = {
    "astype": _method_astype, "reshape": _method_reshape, "transpose": _method_transpose,
    "ravel": lambda a, order="C": ravel(a, order), "flatten": lambda a, order="C":
    copy(ravel(a, order)), "copy": lambda a, order="C": copy(a),
    "swapaxes": swapaxes, "squeeze": squeeze, "repeat": repeat, "clip": clip,
    "round": round_, "dot": dot, "fill": _method_fill, "conj": np.conjugate,
    "conjugate": np.conjugate, "cumsum": _cum("add"), "cumprod": _cum("multiply"),
    "argmax": _argreduce("argmax"), "argmin": _argreduce("argmin"),
    "take": lambda a, indices, axis=None: getitem(ravel(a), indices) if axis is None else
    getitem(a, (slice(None),) * normalize_axis(axis, a.ndim) + (indices,)),
}
for _n in ("sum", "prod", "max", "min", "any", "all", "mean", "std", "var", "ptp"):
    METHODS[_n] = HANDLERS[getattr(np, _n)]
