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


_NO_DTYPE = {"dtype": None}
_NO_DTYPE_FROZEN = (("dtype", ("b", None)),)      # freeze_attrs(_NO_DTYPE)[0]


def trace_ufunc(st, ufunc, method, inputs, kwargs):
    try:
        if not kwargs and method == "__call__" and ufunc.nout == 1 and \
                UFUNCS.get(ufunc.__name__) is ufunc and ufunc is not np.matmul:
            # the common case (no out=, where=, dtype=): what _trace_ufunc does for it
            return st.op_attrs(ufunc.__name__, inputs, True, _NO_DTYPE, _NO_DTYPE_FROZEN)
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
        if where is not True and (out is None or ufunc.nout != 1):
            raise Unhandled("where= without out=")
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
        if where is not True:
            # out keeps its old values where the mask is False
            r = res[0]
            if r.dtype != out[0].dtype:
                r = st.op("astype", [r], dtype=out[0].dtype)
            res = (st.op("where", [where, r, out[0]]),)
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


# the rest of the API registers its handlers on import
from . import np_shape, np_create, np_extra, np_fft  # noqa: E402,F401
from .np_create import (getitem, hooks, index_spec, setitem,  # noqa: E402,F401
                        stack_nested, METHODS)
from .np_shape import matmul, reshape  # noqa: E402,F401
