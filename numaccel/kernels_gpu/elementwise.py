"""Grid-stride elementwise kernels over a fused scalar expression (the CUDA codegen template).

Interface (what the compiler's CUDA backend fills in):

* ``elementwise(fn, name=None)`` takes the *scalar* function of a fused group, as either

  - Python source of one ``def`` over scalar arguments (``"def f(x, y):\\n return x*y + 1"``;
    ``math``, ``cuda`` and the numba types ``f32``/``f64``/``i32`` are in scope), or
  - a ``@cuda.jit(device=True)`` function, or a plain Python function (it is wrapped as one),

  and returns an :class:`ElementwiseKernel`.
* ``kernel(*inputs, out=None, out_dtype=None)`` broadcasts the inputs NumPy-style (any rank,
  any strides, size-0 and size-1 dims; Python numbers are weak scalars, NEP 50) and runs one
  grid-stride launch: each thread loads one element of every input, widens float16/bfloat16 to
  float32 (float64 stays float64, integers stay integers), calls ``fn`` and stores the result
  narrowed to the output dtype (``out_dtype``, else ``numpy.result_type`` of the inputs).
  Adjacent dims that are contiguous in every operand are merged first, so same-shape
  contiguous inputs take the flat 1-D loop; broadcast dims become zero strides (no copies).
* ``render_source(ndim, nin, nscalar)`` gives the generated kernel text (one per rank); the
  kernel signature is ``kernel(out, in0, ..., in{nin-1}, s0, ..., s{nscalar-1})``.
* ``kernel.specs(ndim, kinds)`` yields ``(label, dispatcher, argtypes)`` for PTX build checks.

Example::

    from numaccel.kernels_gpu import elementwise
    axpb = elementwise("def f(x, a, b):\\n    return a * x + b")
    y = axpb(np.arange(6, dtype=np.float32).reshape(2, 3), 2.0, np.ones(3, np.float32))
"""
from __future__ import annotations

import math
import textwrap
from typing import Any, Iterator, Optional

import numpy as np
from numba import cuda

from . import _runtime as rt
from ._runtime import f32, f64, i32

__all__ = ["elementwise", "ElementwiseKernel", "render_source", "copy"]


def render_source(ndim: int, nin: int, nscalar: int) -> str:
    """Source of the grid-stride kernel for ``ndim``-d operands (see the module docstring)."""
    ins = [f"in{k}" for k in range(nin)]
    scal = [f"s{k}" for k in range(nscalar)]
    params = ", ".join(["out"] + ins + scal)
    if ndim == 1:
        idx, unravel = "i", []
    else:
        dims = [f"    d{k} = out.shape[{k}]" for k in range(1, ndim)]
        unravel = ["        r = i"]
        for k in range(ndim - 1, 0, -1):
            unravel += [f"        k{k} = r % d{k}", f"        r = r // d{k}"]
        unravel += ["        k0 = r"]
        idx = ", ".join(f"k{k}" for k in range(ndim))
        unravel = dims + unravel
    head = [ln for ln in unravel if ln.startswith("    d")]
    body = [ln for ln in unravel if not ln.startswith("    d")]
    args = ", ".join([f"ld{k}(in{k}[{idx}])" for k in range(nin)] + scal)
    lines = [f"def kernel({params}):",
             "    n = out.size",
             "    i = cuda.grid(1)",
             "    step = cuda.gridsize(1)",
             *head,
             "    while i < n:",
             *body,
             f"        out[{idx}] = st(fn({args}))",
             "        i += step"]
    return "\n".join(lines) + "\n"


def _device_fn(fn: Any) -> Any:
    if isinstance(fn, str):
        ns: dict = {"math": math, "cuda": cuda, "f32": f32, "f64": f64, "i32": i32, "np": np}
        exec(compile(textwrap.dedent(fn), "<numaccel elementwise>", "exec"), ns)
        defs = [v for v in ns.values() if getattr(v, "__code__", None) is not None
                and v.__code__.co_filename == "<numaccel elementwise>"]
        if len(defs) != 1:
            raise ValueError("elementwise source must define exactly one function, "
                             f"found {len(defs)}: {fn[:80]!r}")
        return cuda.jit(device=True)(defs[0]), defs[0]
    py = getattr(fn, "py_func", None)
    if py is not None:
        return fn, py
    if callable(fn):
        return cuda.jit(device=True)(fn), fn
    raise TypeError(f"elementwise expects Python source, a device function or a function, "
                    f"got {type(fn).__name__}")


def _ld_identity_factory():
    @rt.devfn
    def ld(x):
        return x
    return ld


_LD_ID = _ld_identity_factory()


def _loader(kind):
    return rt.LOAD[kind] if kind in rt.LOAD else _LD_ID


_STORE_CACHE: dict = {}


def _storer(kind):
    if kind in rt.STORE:
        return rt.STORE[kind]
    dt = np.dtype(kind)
    if dt not in _STORE_CACHE:
        nt = rt.nt
        ty = nt.boolean if dt == np.bool_ else getattr(nt, dt.name)
        if dt == np.bool_:
            ty = nt.uint8

        @rt.devfn
        def st(v):
            return ty(v)
        _STORE_CACHE[dt] = st
    return _STORE_CACHE[dt]


def _collapse(shape, strides_list):
    """Merge adjacent dims that are contiguous for every operand (strides in bytes)."""
    shape = list(shape)
    strides_list = [list(s) for s in strides_list]
    k = len(shape) - 2
    while k >= 0:
        if all(st[k] == st[k + 1] * shape[k + 1] for st in strides_list):
            shape[k] *= shape[k + 1]
            del shape[k + 1]
            for st in strides_list:
                st[k] = st[k + 1]
                del st[k + 1]
        k -= 1
    return tuple(shape), [tuple(s) for s in strides_list]


class ElementwiseKernel:
    """A fused scalar function turned into grid-stride kernels (one per rank and dtypes)."""

    def __init__(self, fn: Any, name: Optional[str] = None):
        self.device_fn, self.py_fn = _device_fn(fn)
        self.name = name or getattr(self.py_fn, "__name__", "elementwise")
        self._kernels: dict = {}

    def kernel_for(self, ndim: int, in_kinds: tuple, nscalar: int, out_kind) -> Any:
        """The (cached) dispatcher for ``ndim``-d operands of these kinds."""
        key = (ndim, in_kinds, nscalar, out_kind)
        if key not in self._kernels:
            ns = {"cuda": cuda, "fn": self.device_fn, "st": _storer(out_kind)}
            for k, kind in enumerate(in_kinds):
                ns[f"ld{k}"] = _loader(kind)
            src = render_source(ndim, len(in_kinds), nscalar)
            exec(compile(src, f"<numaccel elementwise {self.name}>", "exec"), ns)
            self._kernels[key] = cuda.jit(ns["kernel"])
        return self._kernels[key]

    def __call__(self, *inputs, out=None, out_dtype=None, block: Optional[int] = None):
        intake = rt.Intake()
        arrays, scalars, kinds, dtypes, weak = [], [], [], [], []
        for x in inputs:
            if isinstance(x, (bool, int, float)):
                weak.append(x)
                scalars.append(x)
                continue
            d, kind = intake.arr(x)
            arrays.append(d)
            kinds.append(kind)
            dtypes.append(rt.HOST_DTYPE.get(kind, kind))
        if not arrays:
            raise ValueError(f"{self.name}: at least one array input is needed")
        res_dt = np.dtype(out_dtype) if out_dtype is not None else _result_type(dtypes, weak)
        out_kind = rt.KINDS.get(res_dt, res_dt)
        comp = _compute_dtype(kinds)
        scal_vals = tuple(comp.type(s) for s in scalars)
        try:
            shape = np.broadcast_shapes(*[tuple(a.shape) for a in arrays])
        except ValueError:
            raise ValueError(f"{self.name}: inputs do not broadcast: shapes "
                             f"{[tuple(a.shape) for a in arrays]}") from None
        if out is None:
            dev_out = rt.empty(shape, out_kind)
            user_out = None
        else:
            user_out = out
            dev_out = rt._as_numba(out.bits if isinstance(out, rt.Bf16Device) else out)
            if tuple(dev_out.shape) != shape:
                raise ValueError(f"{self.name}: out has shape {tuple(dev_out.shape)}, "
                                 f"broadcast result is {shape}")
        n = math.prod(shape)
        if n > 0:
            self._launch(dev_out, arrays, tuple(kinds), scal_vals, shape, out_kind, block)
        if user_out is not None:
            return user_out
        res = intake.out(dev_out, out_kind)
        if shape == () and isinstance(res, np.ndarray):
            res = res.reshape(())       # device arrays of rank 0 come back as (1,)
        return res

    def _launch(self, dev_out, arrays, kinds, scal_vals, shape, out_kind, block):
        nd = max(len(shape), 1)
        full = tuple(shape) if shape else (1,)
        strides = [tuple(dev_out.strides) if shape else (dev_out.dtype.itemsize,)]
        for a in arrays:
            st = [0] * nd
            off = nd - len(a.shape)
            for k, (s, t) in enumerate(zip(a.shape, a.strides)):
                st[off + k] = 0 if (s == 1 and full[off + k] != 1) else t
            strides.append(tuple(st))
        cshape, cstrides = _collapse(full, strides)
        views = [rt.strided_view(dev_out, cshape, cstrides[0])]
        views += [rt.strided_view(a, cshape, st) for a, st in zip(arrays, cstrides[1:])]
        k = self.kernel_for(len(cshape), kinds, len(scal_vals), out_kind)
        block = block or (rt.SIM_BLOCK if rt.SIM else 256)
        n = math.prod(cshape)
        k[rt.grid_1d(n, block), block](*views, *scal_vals)

    def specs(self, ndim: int, kinds: tuple, out_kind="f32", nscalar: int = 0,
              layout: str = "A") -> Iterator[tuple]:
        """``(label, dispatcher, argtypes)`` for a PTX build check of this kernel."""
        nt = rt.nt
        k = self.kernel_for(ndim, tuple(kinds), nscalar, out_kind)

        def arr(kind):
            base = rt.NUMBA_STORAGE.get(kind) or getattr(nt, np.dtype(kind).name)
            return nt.Array(base, ndim, layout)
        comp = rt.ACC.get(kinds[0], nt.float32)
        argtypes = (arr(out_kind), *[arr(kd) for kd in kinds]) + (comp,) * nscalar
        label = f"elementwise[{self.name}] {ndim}d {','.join(map(str, kinds))}->{out_kind}"
        yield label, k, argtypes


def _result_type(dtypes, weak):
    # ml_dtypes registers bfloat16's promotions with NumPy, so NEP 50 applies to it too
    return np.result_type(*dtypes, *weak)


def _compute_dtype(kinds) -> np.dtype:
    if any(k == "f64" for k in kinds):
        return np.dtype(np.float64)
    if any(k in rt.FLOAT_KINDS for k in kinds):
        return np.dtype(np.float32)
    ints = [np.dtype(k) for k in kinds]
    return np.result_type(*ints) if ints else np.dtype(np.float32)


def elementwise(fn: Any, name: Optional[str] = None) -> ElementwiseKernel:
    """Build an :class:`ElementwiseKernel` from source, a device function or a function.

    Example::

        gelu = elementwise("def gelu(x):\\n"
                           "    return 0.5 * x * (1.0 + math.erf(x * 0.7071067811865476))")
        y = gelu(np.linspace(-3, 3, 7, dtype=np.float32))
    """
    return ElementwiseKernel(fn, name)


_IDENTITY: Optional[ElementwiseKernel] = None


def copy(x, out_dtype=None):
    """A C-contiguous device copy of ``x`` (any strides; optional dtype conversion).

    Example::

        xc = copy(x_device.T)     # transposed data laid out contiguously
    """
    global _IDENTITY
    if _IDENTITY is None:
        _IDENTITY = elementwise("def identity(x):\n    return x")
    return _IDENTITY(x, out_dtype=out_dtype)


def _build_specs() -> Iterator[tuple]:
    chain = elementwise("def chain(x, y):\n"
                        "    return math.exp(-x) * 0.5 + x * y", name="chain")
    for kinds, ok in [(("f32", "f32"), "f32"), (("f16", "f16"), "f16"),
                      (("bf16", "bf16"), "bf16"), (("f64", "f64"), "f64")]:
        yield from chain.specs(1, kinds, ok)
    yield from chain.specs(3, ("f32", "bf16"), "f32")
    axpb = elementwise("def axpb(x, a, b):\n    return a * x + b", name="axpb")
    yield from axpb.specs(2, ("f32",), "f32", nscalar=2)
    where = elementwise("def relu(x):\n    return x if x > 0 else 0", name="relu_i32")
    yield from where.specs(2, ("int32",), "int32")
