"""The compiled wrapper's views, creation, matmul and scatter ops (``WrapperOps``, a
part of ``cpu_wrapper._Gen``): Numba views where Numba has them, loops where it does not
(a matmul of a few multiply-adds), and stores into the root buffer at index arithmetic.
"""
from __future__ import annotations

import numpy as np

from ..trace.indexing import static_index
from .cpu_codegen import _load, _store, body_lines
from .render import NARROW, cast, reg_dtype
from .view_index import base_index

# the largest node (elements) a compiled-wrapper graph may have; see cpu_wrapper.py
TINY_MAX = 1 << 14


class Unsupported(Exception):
    """This graph keeps the Python step wrapper (the message says why)."""


def _np_dt(dt) -> str:
    """The dtype arrays of ``dt`` have inside the wrapper (narrow ones as uint16 bits)."""
    name = np.dtype(dt).name
    return "uint16" if name in NARROW else ("bool_" if name == "bool" else name)


class WrapperOps:
    """Methods of ``cpu_wrapper._Gen`` for the ops that are not elementwise or
    reductions."""

    # views: Numba views (a reshape of a non-contiguous array copies: tiny arrays)
    def op_getitem(self, n):
        if len(n.inputs) > 1:
            raise Unsupported("advanced indexing")
        x = self.names[n.inputs[0]]
        if self.g.nodes[n.inputs[0]].aval.ndim == 0:
            raise Unsupported("indexing a 0-d value")
        index = n.attrs["index"]
        has_none = any(it is None for it in index)
        parts = _index_parts(index, self.g.nodes[n.inputs[0]].aval.ndim)
        expr = f"{x}[{', '.join(parts)}]" if any(p != ":" for p in parts) else x
        if n.aval.ndim == 0:
            return self.new(n, _load(x, n.aval.dtype, f"[{', '.join(parts)}]"))
        if has_none:
            expr = f"np.ascontiguousarray({expr}).reshape({self.shape(n.id)})"
        self.new(n, expr)

    def op_reshape(self, n):
        src = self.g.nodes[n.inputs[0]]
        x = self.names[src.id]
        if n.aval.ndim == 0:
            if src.aval.ndim == 0:
                return self.new(n, x)
            return self.new(n, _load(f"np.ascontiguousarray({x}).reshape(-1)", n.aval.dtype,
                                     "[0]"))
        if src.aval.ndim == 0:
            if n.id in self.stacked:    # np.stack of scalars: one np.array call instead
                self.names[n.id] = x
                return
            return self.new(n, f"np.full({self.shape(n.id)}, {_store(x, n.aval.dtype)}, "
                               f"np.{_np_dt(n.aval.dtype)})")
        self.new(n, f"np.ascontiguousarray({x}).reshape({self.shape(n.id)})")

    def op_transpose(self, n):
        axes = n.attrs.get("axes")
        axes = tuple(reversed(range(n.aval.ndim))) if axes is None else tuple(axes)
        self.new(n, f"np.transpose({self.names[n.inputs[0]]}, {axes})")

    def op_broadcast_to(self, n):
        src = self.g.nodes[n.inputs[0]]
        x = self.names[src.id]
        if src.aval.ndim == 0:
            return self.new(n, f"np.full({self.shape(n.id)}, {_store(x, n.aval.dtype)}, "
                               f"np.{_np_dt(n.aval.dtype)})")
        self.new(n, f"np.broadcast_to({x}, {self.shape(n.id)})")

    def op_pad(self, n):
        # mode "edge" only (a constant pad's fill value would need NumPy's casting here)
        if n.attrs.get("mode") != "edge" or self.g.nodes[n.inputs[0]].aval.ndim == 0:
            raise Unsupported("pad other than mode='edge'")
        x, shape, src = self.names[n.inputs[0]], self.shape(n.id), self.shape(n.inputs[0])
        self.emit(f"n{n.id} = np.empty({shape}, np.{_np_dt(n.aval.dtype)})")
        idx, ind = self.loops(shape)
        clamped = ", ".join(f"min(max({i} - {lo}, 0), {m - 1})"
                            for i, (lo, _), m in zip(idx, n.attrs["pad_width"], src))
        self.emit(f"n{n.id}[{', '.join(idx)}] = {x}[{clamped}]", ind)
        self.names[n.id] = f"n{n.id}"

    def op_flip(self, n):
        axes = n.attrs["axis"]
        nd = n.aval.ndim
        axes = range(nd) if axes is None else [a % nd for a in np.atleast_1d(axes)]
        parts = ["::-1" if d in axes else ":" for d in range(nd)]
        self.new(n, f"{self.names[n.inputs[0]]}[{', '.join(parts)}]")

    def op_concatenate(self, n):
        dt = n.aval.dtype
        if all(i in self.stacked for i in n.inputs):
            xs = [_store(cast(self.names[i], self.dt(i), dt), dt) for i in n.inputs]
            return self.new(n, f"np.array(({', '.join(xs)},), np.{_np_dt(dt)})")
        xs = []
        for i in n.inputs:
            if self.g.nodes[i].aval.ndim == 0:
                raise Unsupported("concatenate of 0-d")
            idt = self.dt(i)
            if idt == dt:
                xs.append(self.names[i])
            elif dt.name in NARROW or idt.name in NARROW:
                raise Unsupported("concatenate mixing float16/bfloat16")
            else:
                xs.append(f"{self.names[i]}.astype(np.{_np_dt(dt)})")
        self.new(n, f"np.concatenate(({', '.join(xs)},), axis={int(n.attrs['axis'])})")

    def op_full(self, n):
        fill = self.scalar(n.inputs[0])
        v = cast(fill, self.dt(n.inputs[0]), n.aval.dtype)
        if n.aval.ndim == 0:
            return self.new(n, v)
        self.new(n, f"np.full({self.shape(n.id)}, {_store(v, n.aval.dtype)}, "
                    f"np.{_np_dt(n.aval.dtype)})")

    def op_matmul(self, n):
        """Loops, not np.dot: Numba's BLAS binding needs SciPy, and these are tiny."""
        a, b = n.inputs
        na, nb = self.g.nodes[a].aval.ndim, self.g.nodes[b].aval.ndim
        dt = n.aval.dtype
        if dt.name in NARROW or dt.kind not in "fiu" or not (1 <= na <= 2 and 1 <= nb <= 2):
            raise Unsupported("matmul other than 1-D/2-D float/int")
        sa, sb = self.shape(a), self.shape(b)
        kdim = sa[-1]
        macs = int(np.prod(sa)) * (sb[-1] if nb == 2 else 1)
        if macs > TINY_MAX:
            raise Unsupported(f"a matmul of {macs} multiply-adds (> {TINY_MAX}: BLAS)")
        self.nk += 1
        acc = f"acc{self.nk}"
        rows = ["i0"] if na == 2 else []
        cols = ["i1"] if nb == 2 else []
        ind = "    "
        if n.aval.ndim:
            self.emit(f"n{n.id} = np.empty({self.shape(n.id)}, np.{_np_dt(dt)})")
        if na == 2:
            self.emit(f"for i0 in range({sa[0]}):", ind)
            ind += "    "
        if nb == 2:
            self.emit(f"for i1 in range({sb[1]}):", ind)
            ind += "    "
        self.emit(f"{acc} = np.{reg_dtype(dt)}(0)", ind)
        self.emit(f"for i2 in range({kdim}):", ind)
        xa = cast(_load(self.names[a], self.dt(a), f"[{', '.join(rows + ['i2'])}]"),
                  self.dt(a), dt)
        xb = cast(_load(self.names[b], self.dt(b), f"[{', '.join(['i2'] + cols)}]"),
                  self.dt(b), dt)
        self.emit(f"{acc} = np.{reg_dtype(dt)}({acc} + np.{reg_dtype(dt)}({xa} * {xb}))",
                  ind + "    ")
        if n.aval.ndim:
            self.emit(f"n{n.id}[{', '.join(rows + cols)}] = {acc}", ind)
            self.names[n.id] = f"n{n.id}"
        else:
            self.names[n.id] = acc

    def op_scatter_view(self, n):
        root, value = n.inputs
        chain = n.attrs["chain"]
        if any(name not in ("getitem", "transpose") for name, _ in chain) or any(
                None in a.get("index", ()) for _, a in chain):
            raise Unsupported("scatter through a view Numba cannot write through")
        if self._dead_after(root, n.id):
            self.names[n.id] = self.names[root]     # a buffer nothing reads again: in place
        else:
            self.new(n, f"{self.names[root]}.copy()")
        view, aval = self.names[n.id], self.g.nodes[root].aval
        from ..ops import get_op
        shapes = [tuple(int(d) for d in aval.shape)]    # of each level of the chain
        for name, attrs in chain[:-1]:
            view = self._view_expr(view, name, attrs, aval.ndim)
            aval = get_op(name).infer([aval], **attrs)
            shapes.append(tuple(int(d) for d in aval.shape))
        name, attrs = chain[-1]
        target = get_op(name).infer([aval], **attrs)
        vdt, tdt = self.dt(value), target.dtype
        if target.ndim == 0:
            if self.g.nodes[value].aval.ndim:
                raise Unsupported("an array stored into one element")
            val = cast(self.scalar(value), vdt, tdt)
            self.emit(f"{self._view_expr(view, name, attrs, aval.ndim)} = {_store(val, tdt)}")
            return
        shape = tuple(int(d) for d in target.shape)
        k = self.deferred.pop(value, None)
        if k is not None and (shape != self.shape(value) or tdt.name in NARROW):
            self.map_kernel(k, here=True)
            k = None
        # stores into the root buffer at index arithmetic (as _fold reads): stores
        # through a Numba view of it have run-time strides and do not vectorize
        folded = all(nm == "transpose" or static_index(a["index"]) for nm, a in chain)
        if not folded:
            self.emit(f"w{n.id} = {self._view_expr(view, name, attrs, aval.ndim)}")
        idx, ind = self.loops(shape)
        if k is not None:
            # the value's kernel, inlined: each element goes straight into the view
            self.nk += 1
            exprs = {i: self.elem(i, shape, idx) for i in k.operands}
            body, names = body_lines(self.g, k.nodes, exprs, ind, prefix=f"k{self.nk}_")
            self.lines += body
            val = cast(names[k.root], vdt, tdt)
        else:
            val = cast(self.elem(value, shape, idx), vdt, tdt)
        if not folded:
            self.emit(f"w{n.id}[{', '.join(idx)}] = {_store(val, tdt)}", ind)
            return
        ix = list(idx)
        for (nm, a), pshape in zip(reversed(chain), reversed(shapes)):
            ix = base_index(nm, a, pshape, ix)
        self.emit(f"{self.names[n.id]}[{', '.join(ix)}] = {_store(val, tdt)}", ind)

    def _dead_after(self, root, nid) -> bool:
        """``root`` is an intermediate this graph made, read only by node ``nid``: its
        buffer can take ``nid``'s writes (the value written cannot read it either)."""
        g = self.g
        return ((root in self.kernels or g.nodes[root].op in ("full", "scatter_view"))
                and g.nodes[root].aval.ndim > 0 and root not in g.outputs
                and self.consumers.get(root) == {nid})

    def _view_expr(self, x, name, attrs, ndim):
        if name == "transpose":
            return f"np.transpose({x}, {tuple(attrs['axes'])})"
        return f"{x}[{', '.join(_index_parts(attrs['index'], ndim))}]"


def _index_parts(index, ndim):
    """A basic index as Numba subscripts (Numba has no ``...``: spelled as ``:``s)."""
    used = sum(1 for it in index if it is not None and it is not Ellipsis)
    parts = []
    for it in index:
        if it is None:
            continue
        if it is Ellipsis:
            parts += [":"] * (ndim - used)
        elif isinstance(it, slice):
            parts.append(":".join("" if v is None else str(int(v))
                                  for v in (it.start, it.stop, it.step)))
        elif isinstance(it, (int, np.integer)):
            parts.append(str(int(it)))
        else:
            raise Unsupported(f"index item {it!r}")
    return parts or [":"] * ndim


