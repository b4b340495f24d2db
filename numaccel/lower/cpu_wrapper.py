"""The compiled wrapper: a whole small graph as ONE Numba function.

For graphs on small arrays the cost is per step, not per element: a Python loop over
kernels pays a Numba dispatch (argument unboxing) and a NumPy call on 0-d arrays for
every scalar op. Here every node becomes code in one ``@njit`` function: 0-d values are
registers, fused groups are loop nests over N-d indices, views are Numba views, a few
NumPy calls Numba implements (concatenate, dot) stay calls. Graphs with ops outside
that set, symbolic shapes or large arrays (where the per-element vectorized kernels of
``cpu_codegen`` matter and a Python step loop costs nothing noticeable) keep the step
wrapper. ``numaccel.config.compiled_wrapper = False`` turns this off (debugging).
Views, creation, matmul and scatters are rendered by ``wrapper_ops.WrapperOps``.
"""
from __future__ import annotations

import numpy as np

from ..config import config
from ..trace.indexing import static_index
from ..trace.symbolic import has_sym
from .cpu_codegen import (_PRELUDE, _acc_dtype, _load, _small_power, _store, acc_cast,
                          acc_comb, acc_init, acc_result, body_lines, load_source, red_ufunc)
from .render import NARROW, cast, literal, render, supported
from .reroll import reroll
from .view_index import base_index, pitched
from .wrapper_ops import TINY_MAX, Unsupported, WrapperOps, _np_dt  # noqa: F401

# TINY_MAX (wrapper_ops.py): the largest node (elements) a compiled-wrapper graph may
# have, except mid-size ones (below). The wrapper's loops
# are serial, on the calling thread: it is for graphs whose cost is per step (~13 us a
# call for a tiny graph, where a step loop pays a dispatch per kernel). Its nodes also
# stay below ``config.parallel_min``, so every graph with a kernel large enough for
# threads keeps the step wrapper, whose kernels ``cpu_threads`` splits between threads,
# rather than the wrapper calling kernels over their full range on one core.
# Mid-size graphs (some node above TINY_MAX, all below parallel_min: the step path would
# run their kernels on one thread too) run here as well, where that stays cheap: a step
# costs ~20-40 us of Python (views, launches), which on 40k-element stencil steps is
# more than the kernels (heat2d at 192x192: 1.3x NumPy as steps, 4.8x as the wrapper).
# Not where the wrapper's plain loops lose: a float reduction over more than TINY_MAX
# elements in rows shorter than _LANES_MIN (serial adds, latency-bound without
# reassociation; longer rows add in _LANES partial sums), a matmul of more than
# TINY_MAX multiply-adds (loops, not BLAS), and wrappers longer than MID_MAX_LINES after
# rerolling (Numba's compile time grows faster than the function: 550 lines took 32 s).
MID_MAX_LINES = 160
_LANES, _LANES_MIN = 16, 32     # accumulators of a max/min (see reduce_kernel)
_PYOPS = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "eq": "==", "ne": "!="}


class _Gen(WrapperOps):
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
        live = self.g.live([value])
        idx, ind = self.loops(shape, ind)
        exprs = {i: self.elem(i, shape, idx) for i in k.operands}
        body, names = body_lines(self.g, [i for i in k.nodes if i in live], exprs, ind,
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
