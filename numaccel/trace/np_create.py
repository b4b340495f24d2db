"""NumPy-API layer: array creation (also outside __array_function__), indexing and
ndarray methods."""
import linecache
import sys

import builtins
import operator

import numpy as np

from ..ops.prims import normalize_axis
from .npapi import (Unhandled, _assign_out, _axes, _ndim, _shape, _st_of, call_concrete,
                    handles, _has_traced)
from .symbolic import Sym, prod
from .tracer import TracedArray, current
from .npapi import HANDLERS, _argreduce, _cum
from .np_shape import (clip, concatenate, copy, dot, expand_dims, ravel, repeat, reshape,
                       round_, squeeze, swapaxes, transpose)


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


def _from_user_code(fname):
    f = sys._getframe(2)
    name = f.f_globals.get("__name__", "") or ""
    if name.startswith(_LIB_PREFIXES) and not name.startswith("numaccel.demo"):
        return False
    return _calls_name(f, fname)


_CALL_SITE: dict = {}       # (code, instruction offset, name) -> the call there names it


def _calls_name(f, fname):
    """Whether the call ``f`` is making names ``fname`` in its source. A compiled
    extension (a ``np.random.Generator`` method, SciPy's Cython) that calls
    ``np.empty`` runs no Python frame of its own: the innermost Python frame is then the
    user's line that called the extension (``rng.standard_normal(n)``), whose source
    does not name ``empty``. Such a caller must get a real ndarray: it writes into its
    memory (a traced array there crashed the interpreter). Python 3.10 has no columns:
    there the line must name the call. Without the source (a REPL) the call counts as
    the user's."""
    code, lasti = f.f_code, f.f_lasti
    key = (code, lasti, fname)
    hit = _CALL_SITE.get(key)
    if hit is None:
        hit = True
        pos = getattr(code, "co_positions", None)
        if pos is None:
            # Python 3.10: no columns; the line must name the call
            line = linecache.getline(code.co_filename, f.f_lineno)
            hit = not line or fname + "(" in line
        elif lasti >= 0:
            try:
                line0, line1, col0, col1 = list(pos())[lasti // 2]
            except (IndexError, ValueError):
                line0 = None
            lines = linecache.getlines(code.co_filename) if line0 else []
            if line0 and line1 and col0 is not None and col1 is not None \
                    and line1 <= len(lines):
                text = "".join(lines[line0 - 1:line1])
                # (columns are UTF-8 byte offsets; the name is ASCII, a loose cut is fine)
                text = text.encode()[col0:len(text.encode()) - len(lines[line1 - 1].encode())
                                     + col1].decode(errors="replace")
                hit = fname in text
        if len(_CALL_SITE) > 10000:
            _CALL_SITE.clear()
        _CALL_SITE[key] = hit
    return hit


def hook_for(name, builder, orig=None):
    """``orig`` (default: ``np.<name>``) as called while tracing: from the program itself,
    ``builder(state, *args, **kwargs)``; from anywhere else, ``orig``."""
    orig = orig if orig is not None else _ORIG.setdefault(name, getattr(np, name))

    def hook(*args, **kwargs):
        st = current()
        if st is None or not _from_user_code(name):
            return orig(*args, **kwargs)
        try:
            return builder(st, *args, **kwargs)
        except Exception as e:  # noqa: BLE001
            # never let a hook break NumPy: the concrete call raises NumPy's own error if
            # the arguments are wrong
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
_HOOKED = {}
_depth = [0]


def hooks(active: bool) -> None:
    """Enter (True) or leave (False) a region where NumPy's creation functions build
    traced nodes. The hooks are only in place while some trace is tracing, so Numba
    code compiled at other times (which resolves ``np.empty`` to the real function)
    and NumPy itself are untouched."""
    if not _HOOKED:
        for name, builder in _HOOKS.items():
            _HOOKED[name] = hook_for(name, builder)
    _depth[0] += 1 if active else -1
    if active and _depth[0] == 1:
        for name, hook in _HOOKED.items():
            setattr(np, name, hook)
    elif not active and _depth[0] == 0:
        for name in _HOOKED:
            setattr(np, name, _ORIG[name])


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
            b0, b1, b2 = it.start, it.stop, it.step
            if (b0 is None or type(b0) is int) and (b1 is None or type(b1) is int) and \
                    (b2 is None or type(b2) is int):
                spec.append(it)         # the common case, as is
                continue
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
    if st.dyn is not None:
        r = st.dyn.getitem(a, index)
        if r is not None:
            return r
    spec, arrays = index_spec(st, a, index)
    if not arrays:
        nints = builtins.sum(1 for it in spec if isinstance(it, (int, Sym)))
        scalar = nints == a.ndim and not builtins.any(it is None for it in spec)
        return a._view("getitem", {"index": spec}, scalar=scalar)
    return st.op("getitem", [a] + arrays, index=spec)


def setitem(a, index, value):
    st = a._st
    if st.dyn is not None and st.dyn.setitem(a, index, value):
        return
    spec, arrays = index_spec(st, a, index)
    root = a._base if a._base is not None else a     # (`or` would ask an array's truth)
    if isinstance(value, TracedArray) and value._base is root and not arrays and \
            value._chain == a._chain + (("getitem", {"index": spec}),) and \
            value._ver == root._version:
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
