"""The compiled wrapper: a whole small graph as ONE Numba function.

For graphs on small arrays the cost is per step, not per element: a Python loop over
kernels pays a Numba dispatch (argument unboxing) and a NumPy call on 0-d arrays for
every scalar op. Here every node becomes code in one ``@njit`` function: 0-d values are
registers, fused groups are loop nests over N-d indices, views are Numba views, a few
NumPy calls Numba implements (concatenate, dot) stay calls. Graphs with ops outside
that set, symbolic shapes or large arrays (where the per-element vectorized kernels of
``cpu_codegen`` matter and a Python step loop costs nothing noticeable) keep the step
wrapper. ``numaccel.config.compiled_wrapper = False`` turns this off (debugging).
"""
from __future__ import annotations

import numpy as np

from ..config import config
from ..trace.indexing import static_index
from ..trace.symbolic import has_sym
from .cpu_codegen import (_PRELUDE, _acc_dtype, _load, _small_power, _store, acc_cast,
                          acc_comb, acc_init, acc_result, body_lines, load_source, red_ufunc)
from .render import NARROW, cast, literal, reg_dtype, render, supported
from .reroll import reroll
from .view_index import base_index, pitched

# the largest node (elements) a compiled-wrapper graph may have. The wrapper's loops
# are serial, on the calling thread: it is for graphs whose cost is per step (~13 us a
# call for a tiny graph, where a step loop pays a dispatch per kernel). Its nodes also
# stay below ``config.parallel_min``, so every graph with a kernel large enough for
# threads keeps the step wrapper, whose kernels ``cpu_threads`` splits between threads,
# rather than the wrapper calling kernels over their full range on one core.
TINY_MAX = 1 << 14
# Mid-size graphs (some node above TINY_MAX, all below parallel_min: the step path would
# run their kernels on one thread too) run here as well, where that stays cheap: a step
# costs ~20-40 us of Python (views, launches), which on 40k-element stencil steps is
# more than the kernels (heat2d at 192x192: 1.3x NumPy as steps, 4.8x as the wrapper).
# Not where the wrapper's plain loops lose: a float reduction over more than TINY_MAX
# elements (serial adds, latency-bound without reassociation), a matmul of more than
# TINY_MAX multiply-adds (loops, not BLAS), and wrappers longer than MID_MAX_LINES after
# rerolling (Numba's compile time grows faster than the function: 550 lines took 32 s).
MID_MAX_LINES = 160
_LANES, _LANES_MIN = 16, 32     # accumulators of a max/min (see reduce_kernel)
_PYOPS = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "eq": "==", "ne": "!="}


class Unsupported(Exception):
    """This graph keeps the Python step wrapper (the message says why)."""


def _np_dt(dt) -> str:
    """The dtype arrays of ``dt`` have inside the wrapper (narrow ones as uint16 bits)."""
    name = np.dtype(dt).name
    return "uint16" if name in NARROW else ("bool_" if name == "bool" else name)


class _Gen:
    def __init__(self, graph, kinds, mat, kernels):
        self.g, self.kinds, self.mat, self.kernels = graph, kinds, mat, kernels
        self.lines = []
        self.names = {}          # node id -> local name or literal (0-d: register value)
        self.params = []         # (param name, node id)
        self.nk = 0
        self.mid = False         # some node above TINY_MAX elements (set by run)
        self.deferred = {}       # map kernel root -> kernel, emitted by its scatter_view
        self.pitched = {}        # input node id -> name of its pitched parameter
        # 0-d -> (1,) reshapes read only by concatenates of such reshapes (np.stack of
        # scalars): the concatenate builds the array from the scalars directly
        consumers = {}
        for n in graph.nodes:
            for i in n.inputs:
                consumers.setdefault(i, set()).add(n.id)

        def scalar1(i):
            m = graph.nodes[i]
            return m.op == "reshape" and m.aval.ndim == 1 and graph.nodes[m.inputs[0]].aval \
                .ndim == 0 and i not in graph.outputs
        stacks = [n for n in graph.nodes if n.op == "concatenate" and
                  all(scalar1(i) for i in n.inputs)]
        cand = {i for n in stacks for i in n.inputs}
        self.consumers = consumers
        self.stacked = {i for i in cand if all(
            graph.nodes[c].op == "concatenate" and all(j in cand for j in graph.nodes[c].inputs)
            for c in consumers.get(i, ()))}

    # ------------------------------------------------------------------ helpers
    def emit(self, line, ind="    "):
        self.lines.append(ind + line)

    def shape(self, nid):
        return tuple(int(d) for d in self.g.nodes[nid].aval.shape)

    def dt(self, nid):
        return self.g.nodes[nid].aval.dtype

    def scalar(self, nid) -> str:
        """Register value of a 0-d node."""
        return self.names[nid]

    def elem(self, nid, shape, idx) -> str:
        """Operand ``nid`` read at loop index ``idx`` (names of the loop vars of ``shape``),
        with NumPy broadcasting (right-aligned, size-1 dims read at 0)."""
        n = self.g.nodes[nid]
        if n.aval.ndim == 0:
            return self.names[nid]
        s = self.shape(nid)
        off = len(shape) - len(s)
        ix = ["0" if (s[d] == 1 and shape[off + d] != 1) else idx[off + d]
              for d in range(len(s))]
        name, ix = self._fold(nid, ix)
        return _load(name, n.aval.dtype, f"[{', '.join(ix)}]")

    def _fold(self, nid, ix):
        """(array name, index expressions) reading element ``ix`` of node ``nid``
        through its chain of slices and transposes: the base array indexed directly. A
        Numba view of a slice has run-time strides in every dim, and a loop over it does
        not vectorize (a 5-point stencil ran 3-6x slower than the same loop on the base);
        an argument is read through its pitched form (see ``CompiledWrapper``)."""
        g = self.g
        while True:
            n = g.nodes[nid]
            if n.op == "input" and nid in self.pitched:
                return self.pitched[nid], ix
            if self.kinds.get(nid) != "view" or len(n.inputs) != 1 or \
                    g.nodes[n.inputs[0]].aval.ndim == 0:
                return self.names[nid], ix
            src = self.shape(n.inputs[0])
            if n.op == "transpose" or n.op == "getitem" and static_index(n.attrs["index"]):
                nid, ix = n.inputs[0], base_index(n.op, n.attrs, src, ix)
            else:
                return self.names[nid], ix

    def loops(self, shape, ind="    "):
        idx = [f"i{d}" for d in range(len(shape))]
        for d, n in enumerate(shape):
            self.emit(f"for i{d} in range({n}):", ind)
            ind += "    "
        return idx, ind

    # ------------------------------------------------------------------ nodes
    def run(self):
        g = self.g
        limit = config.parallel_min - 1
        for n in g.nodes:
            if has_sym(n.attrs) or any(not isinstance(d, (int, np.integer))
                                       for d in n.aval.shape):
                raise Unsupported("symbolic shapes")
            size = int(np.prod(n.aval.shape))
            if n.op in ("input", "const") and all(
                    self.kinds[c] == "view" for c in self.consumers.get(n.id, ())):
                continue    # only passed through or viewed: its size costs nothing here
            if size > limit:
                raise Unsupported(f"node %{n.id} has {size} elements (> {limit})")
            self.mid = self.mid or size > TINY_MAX
        from ..ops import get_op
        for n in g.nodes:
            k = self.kinds[n.id]
            if k == "ew" and n.id not in self.mat and n.id not in self.kernels:
                continue   # computed inside the kernel that consumes it
            if n.id in self.kernels:
                kern = self.kernels[n.id]
                (self.map_kernel if kern.kind == "map" else self.reduce_kernel)(kern)
            elif n.aval.ndim == 0 and k not in ("leaf", "view") and \
                    get_op(n.op).kind == "elementwise":
                self.elementwise0(n)
            else:
                fn = getattr(self, "op_" + n.op, None)
                if fn is None:
                    raise Unsupported(f"op {n.op}")
                fn(n)
        outs = []
        for i in g.outputs:
            if _passed_through(g.nodes[i]):
                continue    # by CompiledWrapper: the same object, no copy
            name = self.names[i]
            # a view output is a copy: Numba would box it as a new array over the
            # argument's memory that a later segment could be handed to overwrite
            outs.append(f"{name}.copy()" if self.kinds[i] in ("view", "leaf") and
                        g.nodes[i].aval.ndim else name)
        self.emit(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")

    def new(self, n, expr):
        name = f"n{n.id}"
        self.emit(f"{name} = {expr}")
        self.names[n.id] = name

    def op_input(self, n):
        name = f"x{n.attrs['index']}"
        if not self.consumers.get(n.id) and (n.id not in self.g.outputs or
                                             _passed_through(n)):
            return      # unread (a captured loop's variable the body assigns first)
        if n.aval.ndim >= 2:
            # the argument comes pitched (CompiledWrapper): kernels index it as is; other
            # uses see it cut to its shape
            self.params.append((name + "p", n.id))
            self.pitched[n.id] = name + "p"
            cut = ", ".join([":"] + [f":{d}" for d in self.shape(n.id)[1:]])
            self.emit(f"{name} = {name}p[{cut}]")
        else:
            self.params.append((name, n.id))
        self.names[n.id] = name

    def op_const(self, n):
        name = f"c{n.id}"
        self.params.append((name, n.id))
        self.names[n.id] = name

    def op_scalar(self, n):
        self.names[n.id] = literal(n.attrs["value"], n.aval.dtype)

    def elementwise0(self, n):
        """A 0-d elementwise node: one register expression."""
        dts = [self.dt(i) for i in n.inputs]
        if n.op == "pyop":
            return self.op_pyop(n)
        if not supported(n, dts):
            raise Unsupported(f"0-d {n.op} on {[str(d) for d in dts]}")
        args = [self.scalar(i) for i in n.inputs]
        expr = _small_power(self.g, n, args, dts) or render(n, args, dts)
        if n.aval.dtype.name in NARROW:
            rt = "f16" if n.aval.dtype.name == "float16" else "bf16"
            expr = f"{rt}_to_f32(f32_to_{rt}(np.float32({expr})))"
        self.new(n, expr)

    def op_pyop(self, n):
        op = n.attrs["op"]
        args = [self.scalar(i) for i in n.inputs]
        kinds = {self.g.nodes[i].aval.weak for i in n.inputs}
        if op in _PYOPS and len(args) == 2:
            expr = f"({args[0]} {_PYOPS[op]} {args[1]})"
        elif op == "truediv" and "int" not in kinds and "bool" not in kinds:
            expr = f"({args[0]} / {args[1]})"   # float / float: as Python (no int division)
        elif op == "neg":
            expr = f"(-{args[0]})"
        else:
            raise Unsupported(f"Python operator {op}")
        self.new(n, expr)

    def map_kernel(self, k, here=False):
        n = self.g.nodes[k.root]
        shape = self.shape(k.root)
        if not shape:
            return self.elementwise0(n)
        cons = self.consumers.get(k.root, ())
        if not here and len(cons) == 1 and k.root not in self.g.outputs and \
                n.aval.dtype.name not in NARROW:
            c = self.g.nodes[next(iter(cons))]
            if c.op == "scatter_view" and c.inputs[1] == k.root != c.inputs[0]:
                # computed in the scatter's own loop (no temporary, one pass less)
                self.deferred[k.root] = k
                return
        self.nk += 1
        self.emit(f"n{n.id} = np.empty({shape}, np.{_np_dt(n.aval.dtype)})")
        cond = n.inputs[0] if n.op == "where" else None
        if cond is not None and self.g.nodes[cond].aval.ndim == 0 and cond not in k.nodes:
            # np.where on one truth value (an if on array values, both branches traced:
            # trace/loop_capture.run_if): a loop for each branch, only one of them runs
            self.emit(f"if {self.names[cond]}:")
            self._map_loop(k, n, shape, n.inputs[1], "        ")
            self.emit("else:")
            self._map_loop(k, n, shape, n.inputs[2], "        ")
        else:
            self._map_loop(k, n, shape, n.id, "    ")
        self.names[n.id] = f"n{n.id}"

    def _map_loop(self, k, n, shape, value, ind):
        """The loop nest storing node ``value`` (``k``'s root or one of its inputs, cast to
        the root's dtype) into the root's buffer."""
        nodes = set()
        stack = [value]
        while stack:
            i = stack.pop()
            if i in k.nodes and i not in nodes:
                nodes.add(i)
                stack.extend(self.g.nodes[i].inputs)
        idx, ind = self.loops(shape, ind)
        exprs = {i: self.elem(i, shape, idx) for i in k.operands}
        body, names = body_lines(self.g, [i for i in k.nodes if i in nodes], exprs, ind,
                                 prefix=f"k{self.nk}_")
        self.lines += body
        v = names.get(value) or self.elem(value, shape, idx)
        v = cast(v, self.g.nodes[value].aval.dtype, n.aval.dtype)
        self.emit(f"n{n.id}[{', '.join(idx)}] = {_store(v, n.aval.dtype)}", ind)

    def reduce_kernel(self, k):
        red = self.g.nodes[k.root]
        src = self.g.nodes[red.inputs[0]]
        shape = self.shape(src.id)
        nd = len(shape)
        axis = red.attrs.get("axis")
        axes = tuple(range(nd)) if axis is None else tuple(a % nd for a in axis)
        kept = [d for d in range(nd) if d not in axes]
        uf = red_ufunc(red)
        count = int(np.prod([shape[d] for d in axes])) if axes else 1
        if count == 0 and uf in ("maximum", "minimum"):
            raise Unsupported("empty max/min reduction (raises in the step path)")
        acc_dt = _acc_dtype(red, src.aval.dtype)
        # a reduction over a row of at least _LANES_MIN: _LANES accumulators, one per
        # lane of the innermost reduced dim (LLVM vectorizes that; one accumulator is a
        # chain of selects at ~2 ns an element for max/min, 4x slower, and of dependent
        # adds for a sum). max/min are exact in any order, NaN still wins; a float sum
        # so adds in _LANES partial sums, as the step kernels do (cpu_codegen's
        # _blocked_reduction), not in one serial chain
        last = axes[-1] if axes else None
        lanes = (uf in ("maximum", "minimum") and acc_dt.kind in "fiu" or
                 uf in ("add", "multiply") and acc_dt.kind == "f") and \
            last is not None and shape[last] >= _LANES_MIN
        if acc_dt.kind in "fc" and int(np.prod(shape)) > TINY_MAX and not lanes:
            raise Unsupported(f"a float reduction of {int(np.prod(shape))} elements "
                              f"(> {TINY_MAX}: the kernels' vectorized partial sums)")
        self.nk += 1
        acc = f"acc{self.nk}"
        kshape = tuple(shape[d] for d in kept)
        if kept:
            self.emit(f"r{red.id} = np.empty({kshape}, np.{_np_dt(red.aval.dtype)})")
        ind = "    "
        for d in kept:
            self.emit(f"for i{d} in range({shape[d]}):", ind)
            ind += "    "
        outer = ind
        idx = [f"i{d}" for d in range(nd)]
        exprs = {i: self.elem(i, shape, idx) for i in k.operands}
        xr = f"xr{self.nk}"

        def element(target, ind):   # the reduced element at index idx, into ``target``
            body, names = body_lines(self.g, k.nodes, exprs, ind, prefix=f"k{self.nk}_")
            self.lines += body
            self.emit(f"{xr} = {acc_cast(names.get(src.id, exprs.get(src.id)), acc_dt)}",
                      ind)
            self.emit(f"{target} = {acc_comb(uf, target, xr)}", ind)

        if not lanes:
            self.emit(f"{acc} = {acc_init(uf, acc_dt)}", ind)
            for d in axes:
                self.emit(f"for i{d} in range({shape[d]}):", ind)
                ind += "    "
            element(acc, ind)
        else:
            ln = f"ln{self.nk}"
            self.lines.insert(0, f"    {ln} = np.empty({_LANES}, np.{_np_dt(acc_dt)})")
            self.emit(f"for l in range({_LANES}):", ind)
            self.emit(f"{ln}[l] = {acc_init(uf, acc_dt)}", ind + "    ")
            for d in axes[:-1]:
                self.emit(f"for i{d} in range({shape[d]}):", ind)
                ind += "    "
            n_last = shape[last]
            main = n_last - n_last % _LANES
            self.emit(f"for t{self.nk} in range(0, {main}, {_LANES}):", ind)
            self.emit(f"for l in range({_LANES}):", ind + "    ")
            self.emit(f"i{last} = t{self.nk} + l", ind + "        ")
            element(f"{ln}[l]", ind + "        ")
            if main < n_last:
                self.emit(f"for i{last} in range({main}, {n_last}):", ind)
                element(f"{ln}[0]", ind + "    ")
            self.emit(f"{acc} = {ln}[0]", outer)
            self.emit(f"for l in range(1, {_LANES}):", outer)
            self.emit(f"{xr} = {ln}[l]", outer + "    ")
            self.emit(f"{acc} = {acc_comb(uf, acc, xr)}", outer + "    ")
        res = acc_result(red, acc, acc_dt, float(count))
        if kept:
            kidx = ", ".join(f"i{d}" for d in kept)
            self.emit(f"r{red.id}[{kidx}] = {_store(res, red.aval.dtype)}", outer)
            out = f"r{red.id}"
            if red.attrs.get("keepdims"):
                out = f"r{red.id}.reshape({self.shape(red.id)})"
            self.new(red, out)
        elif red.aval.ndim:   # keepdims of a full reduction: an array of ones
            self.emit(f"r{red.id} = {res}")
            self.new(red, f"np.full({self.shape(red.id)}, {_store(f'r{red.id}', red.aval.dtype)}"
                          f", np.{_np_dt(red.aval.dtype)})")
        else:
            self.new(red, res)

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


def _passed_through(n) -> bool:
    # an array argument or constant output as is (0-d ones come back as registers and
    # are made 0-d arrays again, as every other 0-d output)
    return n.op in ("input", "const") and n.aval.ndim > 0


class CompiledWrapper:
    """Calls the generated entry; converts arguments (narrow dtypes to bits, 0-d to
    scalars) and results (bits back to the dtype, registers to 0-d arrays)."""

    def __init__(self, graph, kinds, mat, kernels):
        gen = _Gen(graph, kinds, mat, kernels)
        gen.run()
        params = [p for p, _ in gen.params]
        lines = reroll(gen.lines)
        if gen.mid and len(lines) > MID_MAX_LINES:
            raise Unsupported(f"a mid-size graph of {len(lines)} wrapper lines (> "
                              f"{MID_MAX_LINES}: compile time)")
        src = _PRELUDE + "\n@numba.njit(cache=True, error_model='numpy')\n" \
            f"def entry({', '.join(params)}):\n" + "\n".join(lines) + "\n"
        self.source = src
        self.mod = load_source(src)
        self.entry = self.mod.entry
        # per argument: (input index or None, const value, conversion); conversions are
        # decided here because dtype inspection costs microseconds per call
        self.args = []
        for _, nid in gen.params:
            n = graph.nodes[nid]
            conv = ("narrow0" if n.aval.dtype.name in NARROW else "0d") if n.aval.ndim == 0 \
                else ("bits" if n.aval.dtype.name in NARROW else None)
            if n.aval.ndim >= 2 and n.op == "input":
                conv = "bits_pitch" if conv == "bits" else "pitch"
            if n.op == "input":
                self.args.append((n.attrs["index"], None, conv))
            else:
                self.args.append((None, graph.consts[nid], conv))
        self.outs = []
        for i in graph.outputs:
            a = graph.nodes[i].aval
            n = graph.nodes[i]
            if _passed_through(n):      # not returned by entry
                self.outs.append((n.attrs["index"], "input") if n.op == "input" else
                                 (graph.consts[i], "const"))
                continue
            narrow = a.dtype.name in NARROW
            if a.weak:      # a Python scalar of the program stays one
                self.outs.append(({"bool": bool, "int": int, "float": float,
                                   "complex": complex}[a.weak], "py"))
                continue
            self.outs.append((a.dtype, ("narrow0" if narrow else "0d") if a.ndim == 0 else
                              ("bits" if narrow else None)))

    def __call__(self, values):
        args = []
        for k, const, conv in self.args:
            v = values[k] if k is not None else const
            if conv is not None:
                if conv == "pitch":
                    v = v if v.flags.c_contiguous else pitched(v)
                elif conv == "bits_pitch":
                    v = pitched(v.view(np.uint16))
                elif conv == "bits":
                    v = v.view(np.uint16)
                elif conv == "0d":
                    v = v[()] if isinstance(v, np.ndarray) else v
                else:
                    v = np.float32(v)
            args.append(v)
        res = iter(self.entry(*args))
        out = []
        for dt, conv in self.outs:
            if conv == "input":
                out.append(values[dt])
                continue
            if conv == "const":
                out.append(dt)
                continue
            v = next(res)
            if conv is None:
                out.append(v)
            elif conv == "bits":
                out.append(v.view(dt))
            elif conv == "0d":
                out.append(np.asarray(v, dt))
            elif conv == "py":
                out.append(dt(v))
            else:
                out.append(np.asarray(np.float32(v)).astype(dt))
        return out
