"""The primitives of the graph, each declared once.

Every op's ``ref`` is the NumPy call it stands for, so the reference interpreter is
exactly NumPy. ``infer`` gives output shapes with symbolic dims (decisions on them record
guards, see ``numaccel.trace.symbolic``) and output dtypes from NumPy itself, evaluated
on 0-d dummies of the input dtypes (so NEP 50 promotion is NumPy's by construction).
"""
from __future__ import annotations

import numpy as np

from ..ir import AVal
from ..trace.symbolic import Sym, hints, prod, sym_max
from .table import OpDef, register_op

# ----------------------------------------------------------------------------- helpers

_WEAK_DUMMY = {"bool": True, "int": 1, "float": 1.0, "complex": 1j}


def quiet(fn):
    """Run a dtype probe on dummies without NumPy's warnings (e.g. ddof >= size)."""
    import warnings

    def wrapped(*a, **k):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*a, **k)
    return wrapped


def dummy(aval: AVal, ndim: int | None = None):
    """A tiny value with ``aval``'s dtype (and weakness), for dtype inference."""
    if aval.weak:
        return _WEAK_DUMMY[aval.weak]
    nd = aval.ndim if ndim is None else ndim
    return np.ones((1,) * nd, aval.dtype)


def _is_one(d) -> bool:
    return d == 1


def broadcast_shapes(*shapes) -> tuple:
    """NumPy broadcasting on dims that may be symbolic (decisions record guards)."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        res = 1
        for s in shapes:
            j = len(s) - nd + i
            if j < 0:
                continue
            d = s[j]
            if _is_one(d):
                continue
            if isinstance(res, int) and res == 1:
                res = d
            elif isinstance(res, Sym) and isinstance(d, Sym) and res.expr == d.expr:
                continue
            elif not (res == d):
                raise ValueError("operands could not be broadcast together with shapes "
                                 + " ".join(str(hints(s)) for s in shapes))
        out.append(res)
    return tuple(out)


def normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim if ndim else 0


def _reg(name, kind, ref, infer, **kw):
    return register_op(OpDef(name, kind, ref, infer, **kw), replace=True)


# ----------------------------------------------------------------------------- elementwise

def _ufunc_infer(uf, k):
    def infer(avals, dtype=None, out_index=0, casting=None):
        shape = broadcast_shapes(*(a.shape for a in avals))
        kw = {"dtype": dtype} if dtype is not None else {}
        if casting is not None:
            kw["casting"] = casting
        with np.errstate(all="ignore"):
            res = uf(*(dummy(a, 0) for a in avals), **kw)
        res = res[k] if uf.nout > 1 else res
        return AVal(shape, np.asarray(res).dtype)
    return infer


def _ufunc_ref(uf):
    def ref(*xs, dtype=None, out_index=0, casting=None):
        kw = {"dtype": dtype} if dtype is not None else {}
        if casting is not None:
            kw["casting"] = casting
        res = uf(*xs, **kw)
        return res[out_index] if uf.nout > 1 else res
    return ref


UFUNCS = {}
# vars(), not dir() + getattr(): getattr on numpy's lazy submodule names (f2py, ma,
# testing, ...) would import them, ~0.2 s of every `import numaccel`
for _uf in list(vars(np).values()):
    if isinstance(_uf, np.ufunc) and _uf.signature is None:
        UFUNCS[_uf.__name__] = _uf
for _uf in UFUNCS.values():
    _reg(_uf.__name__, "elementwise", _ufunc_ref(_uf), _ufunc_infer(_uf, 0), expr=_uf.__name__,
         extra={"ufunc": _uf})


def _astype_infer(avals, dtype):
    return AVal(avals[0].shape, np.dtype(dtype))


_reg("astype", "elementwise", lambda x, dtype: np.asarray(x).astype(dtype), _astype_infer)
_reg("copy", "elementwise", lambda x: np.array(x, copy=True),
     lambda avals: AVal(avals[0].shape, avals[0].dtype))


def _where_infer(avals):
    shape = broadcast_shapes(*(a.shape for a in avals))
    return AVal(shape, np.asarray(np.where(True, dummy(avals[1], 0), dummy(avals[2], 0))).dtype)


_reg("where", "elementwise", np.where, _where_infer, expr="where")


def _clip_infer(avals, has_lo=True, has_hi=True):
    shape = broadcast_shapes(*(a.shape for a in avals))
    args = [dummy(a, 0) for a in avals]
    lo = args[1] if has_lo else None
    hi = args[1 + has_lo] if has_hi else None
    return AVal(shape, np.asarray(np.clip(args[0], lo, hi)).dtype)


def _clip_ref(x, *bounds, has_lo=True, has_hi=True):
    lo = bounds[0] if has_lo else None
    hi = bounds[int(has_lo)] if has_hi else None
    return np.clip(x, lo, hi)


_reg("clip", "elementwise", _clip_ref, _clip_infer, expr="clip")

# ----------------------------------------------------------------------------- reductions


def _reduced_shape(shape, axis, keepdims):
    nd = len(shape)
    axes = range(nd) if axis is None else [normalize_axis(a, nd) for a in axis]
    axes = set(axes)
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_op(name):
    fn = getattr(np, name)

    def ref(x, axis=None, keepdims=False, **kw):
        return fn(x, axis=axis, keepdims=keepdims, **kw)

    @quiet
    def infer(avals, axis=None, keepdims=False, **kw):
        a = avals[0]
        shape = _reduced_shape(a.shape, axis, keepdims)
        # a dummy of ones along reduced axes: sizes never change the result dtype
        dt = np.asarray(fn(dummy(a), axis=axis, keepdims=keepdims, **kw)).dtype
        return AVal(shape, dt)

    _reg(name, "reduce", ref, infer)


# sum/prod/max/min/any/all are `ufunc_reduce` (add, multiply, maximum, ...), as in NumPy
for _name in ("mean", "std", "var", "nansum", "nanmax", "nanmin", "nanmean", "ptp"):
    _reduce_op(_name)


def _argred(name):
    fn = getattr(np, name)

    def ref(x, axis=None, keepdims=False):
        return fn(x, axis=axis, keepdims=keepdims)

    def infer(avals, axis=None, keepdims=False):
        a = avals[0]
        if axis is None:
            shape = (1,) * a.ndim if keepdims else ()
        else:
            shape = _reduced_shape(a.shape, (axis,), keepdims)
        return AVal(shape, np.dtype(np.intp))

    _reg(name, "reduce", ref, infer)


_argred("argmax")
_argred("argmin")


def _ufunc_reduce_ref(x, ufunc, axis=0, keepdims=False, dtype=None):
    return UFUNCS[ufunc].reduce(x, axis=axis, keepdims=keepdims, dtype=dtype)


def _ufunc_reduce_infer(avals, ufunc, axis=0, keepdims=False, dtype=None):
    a = avals[0]
    shape = _reduced_shape(a.shape, axis, keepdims)
    dt = np.asarray(UFUNCS[ufunc].reduce(dummy(a), axis=axis, keepdims=keepdims,
                                         dtype=dtype)).dtype
    return AVal(shape, dt)


_reg("ufunc_reduce", "reduce", _ufunc_reduce_ref, _ufunc_reduce_infer)

# ----------------------------------------------------------------------------- scans


def _scan_infer(avals, ufunc, axis=None, dtype=None):
    a = avals[0]
    shape = a.shape if axis is not None else (prod(a.shape),)
    d = dummy(a)
    if axis is None:
        d = d.reshape(-1)
    dt = UFUNCS[ufunc].accumulate(d, axis=0 if axis is None else axis, dtype=dtype).dtype
    if ufunc in ("add", "multiply") and dtype is None and a.dtype.kind in "bui" and \
            a.dtype.itemsize < np.dtype(np.intp).itemsize:
        # np.cumsum/cumprod upcast small integers like np.sum does
        dt = np.cumsum(d, axis=0 if axis is None else axis).dtype
    return AVal(shape, dt)


def _scan_ref(x, ufunc, axis=None, dtype=None):
    if ufunc == "add":
        return np.cumsum(x, axis=axis, dtype=dtype)
    if ufunc == "multiply":
        return np.cumprod(x, axis=axis, dtype=dtype)
    if axis is None:
        x, axis = np.ravel(x), 0
    return UFUNCS[ufunc].accumulate(x, axis=axis, dtype=dtype)


_reg("scan", "scan", _scan_ref, _scan_infer)

# ----------------------------------------------------------------------------- movement


def _same_dtype(shape_fn):
    def infer(avals, **attrs):
        return AVal(shape_fn(avals[0].shape, **attrs), avals[0].dtype)
    return infer


_reg("reshape", "movement", lambda x, shape: np.reshape(x, shape),
     _same_dtype(lambda s, shape: tuple(shape)))
_reg("transpose", "movement", lambda x, axes: np.transpose(x, axes),
     _same_dtype(lambda s, axes: tuple(s[a] for a in axes)))
_reg("broadcast_to", "movement", lambda x, shape: np.broadcast_to(x, shape),
     _same_dtype(lambda s, shape: tuple(shape)))
_reg("flip", "movement", lambda x, axis: np.flip(x, axis),
     _same_dtype(lambda s, axis: tuple(s)))
_reg("roll", "movement", lambda x, shift, axis: np.roll(x, shift, axis),
     _same_dtype(lambda s, shift, axis: tuple(s) if axis is not None else tuple(s)))


def _concat_infer(avals, axis):
    nd = avals[0].ndim
    ax = normalize_axis(axis, nd)
    for a in avals[1:]:
        if a.ndim != nd:
            raise ValueError("all the input array dimensions except for the concatenation "
                             "axis must match exactly, but the arrays have ranks "
                             f"{[x.ndim for x in avals]}")
    shape = list(avals[0].shape)
    for a in avals[1:]:
        for i in range(nd):
            if i == ax:
                shape[i] = shape[i] + a.shape[i]
            elif not (shape[i] == a.shape[i]):
                raise ValueError("all the input array dimensions except for the concatenation "
                                 f"axis must match exactly, got shapes "
                                 f"{[hints(x.shape) for x in avals]}")
    dt = np.concatenate([dummy(a) for a in avals], axis=ax).dtype
    return AVal(tuple(shape), dt)


_reg("concatenate", "movement", lambda *xs, axis: np.concatenate(xs, axis=axis), _concat_infer)


def _pad_ref(x, cv, pad_width, mode="constant"):
    # mode "edge" (cv unused): NumPy's own, one pass (as concatenates of repeated edge
    # slices it was two passes and four small copies: sobel's pad took 16-48 ms, not 5)
    if mode == "edge":
        return np.pad(x, pad_width, mode="edge")
    return np.pad(x, pad_width, mode="constant", constant_values=cv)


def _pad_infer(avals, pad_width, mode="constant"):
    a = avals[0]
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(a.shape, pad_width))
    return AVal(shape, a.dtype)


_reg("pad", "movement", _pad_ref, _pad_infer)


def _tile_infer(avals, reps):
    a = avals[0]
    nd = max(a.ndim, len(reps))
    shape = (1,) * (nd - a.ndim) + tuple(a.shape)
    reps = (1,) * (nd - len(reps)) + tuple(reps)
    return AVal(tuple(d * r for d, r in zip(shape, reps)), a.dtype)


_reg("tile", "movement", lambda x, reps: np.tile(x, reps), _tile_infer)


def _repeat_infer(avals, repeats, axis):
    a = avals[0]
    if axis is None:
        return AVal((prod(a.shape) * repeats,), a.dtype)
    ax = normalize_axis(axis, a.ndim)
    return AVal(tuple(d * repeats if i == ax else d for i, d in enumerate(a.shape)), a.dtype)


_reg("repeat", "movement", lambda x, repeats, axis: np.repeat(x, repeats, axis), _repeat_infer)

# ----------------------------------------------------------------------------- indexing
# An index spec is a tuple whose items are ints/Syms, slices, None, Ellipsis, or
# ("arr", k): the k-th index array, passed as input k+1 (input 0 is the indexed array).


def build_index(spec, arrays):
    return tuple(arrays[it[1]] if isinstance(it, tuple) else it for it in spec)


def _getitem_ref(x, *arrays, index):
    return x[build_index(index, arrays)]


def _setitem_ref(x, value, *arrays, index):
    out = np.array(x, copy=True)
    out[build_index(index, arrays)] = value
    return out


def _getitem_infer(avals, index):
    from ..trace.indexing import index_shape
    return AVal(index_shape(avals[0].shape, index, avals[1:]), avals[0].dtype)


def _setitem_infer(avals, index):
    return AVal(avals[0].shape, avals[0].dtype)


_reg("getitem", "index", _getitem_ref, _getitem_infer)
_reg("setitem", "index", _setitem_ref, _setitem_infer)


def _ufunc_at_ref(x, values, *arrays, ufunc, index):
    out = np.array(x, copy=True)
    UFUNCS[ufunc].at(out, build_index(index, arrays), values)
    return out


_reg("ufunc_at", "index", _ufunc_at_ref,
     lambda avals, ufunc, index: AVal(avals[0].shape, avals[0].dtype))

# ----------------------------------------------------------------------------- contraction


def _matmul_infer(avals):
    a, b = avals
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    sa = a.shape if a.ndim > 1 else (1,) + tuple(a.shape)
    sb = b.shape if b.ndim > 1 else tuple(b.shape) + (1,)
    if not (sa[-1] == sb[-2]):
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
                         f"(size {hints(sb)[-2]} is different from {hints(sa)[-1]})")
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    shape = batch + ((sa[-2],) if a.ndim > 1 else ()) + ((sb[-1],) if b.ndim > 1 else ())
    dt = np.matmul(dummy(a, max(a.ndim, 1)), dummy(b, max(b.ndim, 1))).dtype
    return AVal(shape, dt)


_reg("matmul", "contraction", np.matmul, _matmul_infer)


def parse_einsum(subscripts, ndims):
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        ins, out = subscripts.split("->")
        implicit = False
    else:
        ins, out, implicit = subscripts, None, True
    ins = ins.split(",")
    if len(ins) != len(ndims):
        raise ValueError(f"einsum: {len(ins)} operands in subscripts, {len(ndims)} given")
    if implicit:
        letters = "".join(ins).replace(".", "")
        out = ("..." if any("..." in s for s in ins) else "") + \
            "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return ins, out


def _einsum_infer(avals, subscripts):
    ins, out = parse_einsum(subscripts, [a.ndim for a in avals])
    sizes = {}
    ell = []
    for term, a in zip(ins, avals):
        shape = list(a.shape)
        if "..." in term:
            left, right = term.split("...")
            n_ell = a.ndim - len(left) - len(right)
            ell.append(tuple(shape[len(left):len(left) + n_ell]))
            shape = shape[:len(left)] + shape[len(left) + n_ell:]
            term = left + right
        if len(term) != len(shape):
            raise ValueError(f"einsum: operand has {a.ndim} dims, subscripts {term!r}")
        for c, d in zip(term, shape):
            if c not in sizes or _is_one(sizes[c]):
                sizes[c] = d
            elif not _is_one(d) and not (sizes[c] == d):
                raise ValueError(f"einsum: size of label {c!r} differs between operands: "
                                 f"{hints([sizes[c]])[0]} vs {hints([d])[0]}")
    ell_shape = broadcast_shapes(*ell) if ell else ()
    left, _, right = out.partition("...")
    shape = [sizes[c] for c in left] + (list(ell_shape) if "..." in out else []) + \
        [sizes[c] for c in right]
    dt = np.einsum(subscripts, *(dummy(a) for a in avals)).dtype
    return AVal(tuple(shape), dt)


_reg("einsum", "contraction", lambda *xs, subscripts: np.einsum(subscripts, *xs),
     _einsum_infer)

# ----------------------------------------------------------------------------- creation


def _full_ref(fill, shape, dtype):
    f = np.asarray(fill)
    if f.ndim == 0 and f.dtype.kind in "biuf" and f == 0 and not np.signbit(f):
        # zeros (np.empty is traced as zeros too): calloc'd memory, zeroed by the OS
        # page by page on first touch, not written here in full (128 MB: ~100 ms)
        return np.zeros(shape, dtype=dtype)
    return np.full(shape, fill, dtype=dtype)


def _full_infer(avals, shape, dtype):
    return AVal(tuple(shape), np.dtype(dtype))


_reg("full", "creation", _full_ref, _full_infer)


def _arange_infer(avals, start, stop, step, dtype):
    dt = np.arange(hints([start])[0] if isinstance(start, Sym) else start,
                   hints([stop])[0] if isinstance(stop, Sym) else stop, step, dtype=dtype).dtype
    if isinstance(start, Sym) or isinstance(stop, Sym):
        n = sym_max((stop - start + step - (1 if step > 0 else -1)) // step, 0)
    else:
        n = len(np.arange(start, stop, step))
    return AVal((n,), dt)


_reg("arange", "creation", lambda start, stop, step, dtype: np.arange(start, stop, step, dtype),
     _arange_infer)
_reg("linspace", "creation",
     lambda start, stop, num, endpoint, dtype: np.linspace(start, stop, num, endpoint,
                                                           dtype=dtype),
     lambda avals, start, stop, num, endpoint, dtype: AVal(
         (num,), np.linspace(float(start), float(stop), 2, endpoint, dtype=dtype).dtype))
_reg("eye", "creation", lambda N, M, k, dtype: np.eye(N, M, k, dtype),
     lambda avals, N, M, k, dtype: AVal((N, N if M is None else M), np.dtype(dtype)))

# ----------------------------------------------------------------------------- Python scalars
# Arithmetic between Python scalars (weak, NEP 50) stays Python arithmetic: `dt * 0.5`
# is a Python float, not an np.float64, so later promotion matches plain NumPy code.
import operator as _operator  # noqa: E402

PYOPS = {name: getattr(_operator, name) for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
    "lt", "le", "gt", "ge", "eq", "ne", "and_", "or_", "xor", "invert", "lshift", "rshift")}


def _pyop_ref(*xs, op):
    return PYOPS[op](*xs)


def _pyop_infer(avals, op):
    res = PYOPS[op](*(_WEAK_DUMMY[a.weak] if a.weak else dummy(a, 0)[()] for a in avals))
    kind = {bool: "bool", int: "int", float: "float", complex: "complex"}.get(type(res))
    return AVal((), np.asarray(res).dtype, kind)


_reg("pyop", "elementwise", _pyop_ref, _pyop_infer)


_reg("round", "elementwise", lambda x, decimals: np.round(x, decimals),
     lambda avals, decimals: AVal(avals[0].shape, np.round(dummy(avals[0], 0),
                                                           decimals).dtype))


def _scatter_view_ref(root, value, chain):
    return scatter_into(np.array(root, copy=True), value, chain)


def scatter_into(out, value, chain):
    """``value`` written into the view ``chain`` of ``out``, in place; returns ``out``
    (``scatter_view``'s reference writes into a copy of its root)."""
    view = out
    for name, attrs in chain[:-1]:
        view = VIEW_REFS[name](view, **attrs)
    name, attrs = chain[-1]
    if name == "getitem":
        # assign through the parent: an all-integer index gives a scalar, not a view
        view[attrs["index"]] = value
    else:
        VIEW_REFS[name](view, **attrs)[...] = value
    return out


VIEW_REFS = {
    "getitem": lambda x, index: x[index],
    "transpose": lambda x, axes: np.transpose(x, axes),
    "reshape": lambda x, shape: np.reshape(x, shape),
    "flip": lambda x, axis: np.flip(x, axis),
    "real": lambda x: x.real,
    "imag": lambda x: x.imag,
}
_reg("scatter_view", "index", _scatter_view_ref,
     lambda avals, chain: AVal(avals[0].shape, avals[0].dtype))
_reg("real", "elementwise", np.real,
     lambda avals: AVal(avals[0].shape, np.real(dummy(avals[0], 0)).dtype))
_reg("imag", "elementwise", np.imag,
     lambda avals: AVal(avals[0].shape, np.imag(dummy(avals[0], 0)).dtype))

from . import search  # noqa: E402,F401  (registers searchsorted and its CPU kernel)
from . import sorting  # noqa: E402,F401  (registers sort, argsort, argsort_topk)
from . import linalg  # noqa: E402,F401  (registers linalg_solve, _inv, _det, _cholesky, _eigvalsh)
from . import fft  # noqa: E402,F401  (registers fft and its threaded CPU kernel)


# a parallel 1-D scan for large arrays (kernels_cpu/scan.py)
_SCAN_OPS = {"add": 0, "maximum": 1, "minimum": 2}
_SCAN_DTYPES = frozenset(np.dtype(t) for t in (np.bool_, np.int32, np.int64, np.float32,
                                                np.float64))


def _cpu_scan_supports(x, ufunc, axis=None, dtype=None):
    from ..config import config
    return (isinstance(x, np.ndarray) and ufunc in _SCAN_OPS and dtype is None
            and (axis is None or x.ndim == 1 or _last_axis_rows(x, axis))
            and x.dtype in _SCAN_DTYPES and x.size >= config.parallel_min)


def _last_axis_rows(x, axis):
    # rows of a C-contiguous array scanned along the last axis (kernels_cpu.scan_rows)
    return x.ndim >= 2 and axis % x.ndim == x.ndim - 1 and x.flags.c_contiguous


def _cpu_scan(x, ufunc, axis=None, dtype=None):
    from ..kernels_cpu.scan import scan, scan_last_axis
    dt = _scan_ref(x.reshape(-1)[:1], ufunc).dtype
    if axis is not None and x.ndim >= 2:
        return scan_last_axis(x, np.empty(x.shape, dt), _SCAN_OPS[ufunc])
    x = x.reshape(-1)                 # axis=None scans the flattened array, as NumPy
    return scan(x, np.empty(x.shape, dt), _SCAN_OPS[ufunc])


from ..backends import register_kernel  # noqa: E402
register_kernel("scan", "cpu", _cpu_scan, supports=_cpu_scan_supports, name="scan_threads_cpu")
