"""The ``cpu`` backend: fused Numba kernels entered from a generated wrapper.

The wrapper runs the fusion plan (passes.fuse) as steps: kernels rendered by
``cpu_codegen``, NumPy calls for ops without a kernel (BLAS matmul, scans, advanced
indexing) and in-place scatters. Kernels are serial over a range of their outermost
loop; ``cpu_threads.launch`` runs large ones as one chunk per thread.
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..backends import Backend, find_kernel, kernels_of, register_backend
from ..config import config, log
from ..graph import Graph
from ..interp import _scalar_value
from ..ops import get_op
from ..trace.symbolic import has_sym, resolve
from .cpu_codegen import (_acc_dtype, _operand_exprs, _pattern, block_count, buffer_args,
                          colreduce_source, flat_or_copy, flat_view, load_kernels, map_source,
                          red_ufunc, reduce_source)
from .cpu_gemv import MatvecPairStep, pair_matvecs
from .pingpong import PingPongScatterStep
from .cpu_wrapper import CompiledWrapper, Unsupported
from .cpu_rows import RowStep
from .cpu_threads import launch
from .passes import decompose, fuse, simplify
from .rows import boundary, row_groups
from .unmask import unmask
from .topk import rewrite_topk
from .unroll import unroll_small_reductions
from . import pool

# ------------------------------------------------------------------------------ the wrapper

_U16 = np.dtype(np.uint16)


def _bits(a):
    """Kernels see bfloat16/float16 arrays as their uint16 bits."""
    dt = a.dtype
    if dt.itemsize == 2 and dt.kind in "fV":   # float16 or ml_dtypes' bfloat16
        return a.view(_U16)
    return a


# NumPy's own allocator (the trace-time creation hooks are for user code only)
_empty = getattr(np.empty, "__wrapped__", np.empty)
pooled = pool.empty       # outputs: large ones reuse dropped results' memory


def _scalar_arg(v, dt):
    if dt.itemsize == 2 and dt.kind in "fV":
        return np.float32(v)
    return v[()] if isinstance(v, np.ndarray) else v


def _common_shape(arrs):
    """The broadcast shape of the operands (the common case, one shape, without NumPy's
    ~3 us call)."""
    if not arrs:
        return ()
    s0 = arrs[0].shape
    if all(a.shape == s0 for a in arrs):
        return s0
    return np.broadcast_shapes(*[a.shape for a in arrs])


def _resolve(attrs, env):
    return resolve(attrs, env) if has_sym(attrs) else attrs


class MapStep:
    def __init__(self, graph, k):
        self.k = k
        self.outs = k.extra.get("outs", [k.root])
        self.node = graph.nodes[k.root]
        self.rank = self.node.aval.ndim
        self.graph = graph
        self.mods = {}
        _, self.arrays, self.scalars = _operand_exprs(graph, k, "")
        self.dest = None     # (buffer node, view chain): write there instead of a new array

    @property
    def out(self):
        return self.k.root

    def _mod(self, rank, patterns):
        key = (rank, patterns)
        m = self.mods.get(key)
        if m is None:
            src, _, _ = map_source(self.graph, self.k, rank, patterns)
            m = self.mods[key] = load_kernels(src)
        return m

    def __call__(self, vals, env):
        arrs = [vals[i] for i in self.arrays]
        shape = _common_shape(arrs)
        if len(shape) != self.rank:
            shape = tuple(_resolve(tuple(self.node.aval.shape), env))
        if self.dest is not None:
            outs = [_chain_view(vals[self.dest[0]], self.dest[1], env)]
        else:
            outs = [pooled(shape, self.graph.nodes[r].aval.dtype) for r in self.outs]
        size = outs[0].size
        if size and outs[0].flags.c_contiguous and all(
                a.shape == shape and a.flags.c_contiguous for a in arrs):
            # same-shape contiguous operands: one flat loop (vectorizes best)
            ops = [(_bits(a).reshape(-1), [1]) for a in arrs + outs]
            self._run(ops, [size], size, vals)
        elif size:
            ops = []
            for a in arrs:
                ops.append(flat_or_copy(_bits(a if a.shape == shape else
                                              np.broadcast_to(a, shape))))
            fo = flat_view(_bits(outs[0])) if self.dest is not None else None
            if self.dest is not None and fo is None:
                # a destination view with negative strides: through a temporary
                tmp = _empty(shape, self.node.aval.dtype)
                self._run(ops + [flat_view(_bits(tmp))], list(shape), size, vals)
                outs[0][...] = tmp
            else:
                ops += [fo] if fo is not None else [flat_view(_bits(o)) for o in outs]
                self._run(ops, list(shape), size, vals)
        for r, o in zip(self.outs, outs):
            vals[r] = o

    def _run(self, ops, dims, size, vals):
        patterns = tuple(_pattern(st) for _, st in ops)
        n_in = len(self.arrays)
        args = buffer_args(ops[:n_in])
        args += [_scalar_arg(vals[i], self.graph.nodes[i].aval.dtype) for i in self.scalars]
        args += buffer_args(ops[n_in:])
        m = self._mod(len(dims), patterns)
        fixup = getattr(m, "fixup", None)
        if fixup is None:
            launch(m.kernel, args + dims, dims[0], size)
            return
        # float32 sin/cos/tan (cpu_codegen.map_source): the launch runs over blocks of
        # rows, each flagging arguments beyond the fast path; flagged blocks run again
        flags = _empty(block_count(dims), np.int32)
        launch(m.kernel, args + dims + [flags], flags.size, size)
        if flags.any():
            launch(fixup, args + dims + [flags], flags.size, size)


class ReduceStep:
    def __init__(self, graph, k):
        self.k, self.out, self.graph = k, k.root, graph
        self.node = graph.nodes[k.root]
        self.src = graph.nodes[self.node.inputs[0]]
        _, self.arrays, self.scalars = _operand_exprs(graph, k, "")
        self.mods = {}
        self.sources = []       # generated sources, in compile order (for inspection)

    def _mod(self, rank, n_kept, patterns):
        key = (rank, n_kept, patterns)
        m = self.mods.get(key)
        if m is None:
            src, _, _, acc = reduce_source(self.graph, self.k, rank, n_kept, patterns)
            self.sources.append(src)
            m = self.mods[key] = (load_kernels(src), acc)
        return m

    def _call(self, kind, views, sargs, out, count, size):
        """Run the (rank, kept) kernel on operand views (all of one shape); ``size``: the
        elements of the whole reduction (whether to use threads)."""
        ops = [flat_or_copy(v) for v in views]
        shape = views[0].shape if views else out.shape
        patterns = tuple(_pattern(st) for _, st in ops)
        mod, _ = self._mod(len(shape), kind, patterns)
        launch(mod.kernel, [*buffer_args(ops), *sargs, out, count, *shape], shape[0], size)

    def __call__(self, vals, env):
        node = self.node
        shape = tuple(_resolve(tuple(self.src.aval.shape), env))
        arrs = [vals[i] for i in self.arrays]
        if arrs:
            shape = _common_shape(arrs)
        nd = len(shape)
        axis = node.attrs.get("axis")
        axes = tuple(range(nd)) if axis is None else tuple(a % nd for a in axis)
        kept = [d for d in range(nd) if d not in axes]
        red_size = prod(shape[d] for d in axes)
        uf = red_ufunc(node)
        if red_size == 0 and uf in ("maximum", "minimum"):
            raise ValueError(f"zero-size array to reduction operation {uf} which has no "
                             "identity")
        perm = kept + list(axes)
        # no view where it would be the operand itself (~2 us a call on small graphs)
        same = perm == list(range(nd))
        args = [_bits(a if a.shape == shape and same else
                      np.broadcast_to(a, shape).transpose(perm)) for a in arrs]
        sargs = [_scalar_arg(vals[i], self.graph.nodes[i].aval.dtype) for i in self.scalars]
        dt = node.aval.dtype
        kshape = tuple(shape[d] for d in kept)
        count = float(red_size)
        total = prod(shape)
        # (a reduced dim 0 of one row is a copy: the row kernel splits its kept dims)
        if kept and axes and kept[-1] == nd - 1 and max(axes) < kept[0] and total and \
                shape[0] > 1:
            out = self._columns(arrs, shape, len(axes), sargs, count, uf, dt)
        elif kept:
            out = pooled(kshape, dt)
            if out.size:
                self._call(len(kept), args, sargs, _bits(out), count, total)
        else:
            out = self._full(args, sargs, shape, count, uf, dt)
        if node.attrs.get("keepdims"):
            out = out.reshape(tuple(1 if d in axes else shape[d] for d in range(nd)))
        vals[self.out] = out[()] if out.ndim == 0 else out

    def _columns(self, arrs, shape, n_red, sargs, count, uf, dt):
        """Leading dims reduced, the last kept: see ``colreduce_source``."""
        views = [flat_or_copy(_bits(np.broadcast_to(a, shape))) for a in arrs]
        patterns = tuple(_pattern(st) for _, st in views)
        key = (len(shape), "col", n_red, patterns)
        m = self.mods.get(key)
        if m is None:
            src, _, _, acc = colreduce_source(self.graph, self.k, len(shape), n_red, patterns)
            m = self.mods[key] = (load_kernels(src), acc)
        mod, acc = m
        total = prod(shape)
        kshape = shape[n_red:]
        # chunks of dim 0 by size only (not by thread count): the same shape always sums
        # in the same order
        pmin = config.parallel_min
        nchunks = max(1, min(8, shape[0], total // pmin)) if total >= pmin else 1
        part = _empty((nchunks, prod(kshape)), acc)   # the kernel initialises it
        launch(mod.kernel, [*buffer_args(views), *sargs, part, nchunks, *shape], nchunks,
               total)
        comb = getattr(np, uf)
        r = comb.reduce(part, axis=0) if nchunks > 1 else part[0]
        if self.node.op == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                r = r / count
        return np.asarray(r).astype(dt, copy=False).reshape(kshape)

    def _full(self, args, sargs, shape, count, uf, dt):
        nd = len(shape)
        total = prod(shape)
        if nd == 1 and total >= 2 * 4096:
            # a long 1-D reduction: a (rows, 4096) view plus the tail, as partials
            q = total // 4096
            head = [a[:q * 4096].reshape(q, 4096) if a.strides[0] != 0 else
                    np.broadcast_to(a[:1], (q, 4096)) for a in args]
            tail = [a[q * 4096:] for a in args]
            acc = _acc_dtype(self.node, self.src.aval.dtype)
            p1 = _empty(q, acc)
            self._call(0, head, sargs, p1, count, total)
            p2 = _empty(total - q * 4096, acc)
            if p2.size:
                self._call(0, tail, sargs, p2, count, 0)
            partial = np.concatenate([p1, p2])
        else:
            acc = _acc_dtype(self.node, self.src.aval.dtype)
            partial = _empty(shape[0], acc)
            if partial.size:
                self._call(0, args, sargs, partial, count, total)
        comb = getattr(np, uf)        # one of passes.REDUCE_UFUNCS, as in _columns
        r = comb.reduce(partial) if partial.size else comb.reduce(np.empty(0, partial.dtype))
        if self.node.op == "mean":
            r = r / count if count else np.float64(np.nan)
        return np.asarray(r).astype(dt)


class NumpyStep:
    """An op without a kernel (BLAS matmul, scans, advanced indexing, views, ...): its
    NumPy reference, on the wrapper's buffers."""

    def __init__(self, graph, n):
        self.n = n
        self.ref = get_op(n.op).ref
        self.inputs = n.inputs
        self.sym = has_sym(n.attrs)
        self.kernels = bool(kernels_of(n.op))
        if n.op == "einsum" and len(n.inputs) == 2 and n.aval.dtype.kind == "f" and \
                n.aval.dtype.name not in ("float16", "bfloat16"):
            plan = matmul_plan(n.attrs["subscripts"])
            if plan is not None:
                # NumPy's einsum runs batched contractions in its own C loops: as a
                # (batched) matmul they go to BLAS (attention's q @ k.T is 3-10x faster)
                self.ref = lambda a, b, subscripts: einsum_matmul(plan, a, b)

    def __call__(self, vals, env):
        n = self.n
        attrs = _resolve(n.attrs, env) if self.sym else n.attrs
        args = [vals[i] for i in self.inputs]
        fn = self.ref
        if self.kernels:
            # a hand-written kernel registered for this op (register_kernel), when it
            # supports these inputs; the op's reference otherwise
            k = find_kernel(n.op, "cpu", *args, **attrs)
            fn = k.fn if k is not None else fn
        vals[n.id] = fn(*args, **attrs)




def matmul_plan(subscripts):
    """How to compute a two-operand einsum as transposes + one np.matmul, or None."""
    if "." in subscripts or "->" not in subscripts:
        return None
    ins, out = subscripts.replace(" ", "").split("->")
    parts = ins.split(",")
    if len(parts) != 2:
        return None
    ia, ib = parts
    if any(len(set(t)) != len(t) for t in (ia, ib, out)) or not set(out) <= set(ia + ib):
        return None
    batch = [c for c in out if c in ia and c in ib]
    red = [c for c in ia if c in ib and c not in out]
    fa = [c for c in ia if c not in ib]
    fb = [c for c in ib if c not in ia]
    if not red or not set(fa + fb) <= set(out):
        return None
    pa = [ia.index(c) for c in batch + fa + red]
    pb = [ib.index(c) for c in batch + red + fb]
    order = batch + fa + fb
    return pa, pb, len(batch), len(fa), len(fb), [order.index(c) for c in out]


def einsum_matmul(plan, a, b):
    pa, pb, nb, nfa, nfb, perm = plan
    at, bt = np.transpose(a, pa), np.transpose(b, pb)
    bs = at.shape[:nb]
    nred = len(pa) - nb - nfa
    fa, fb = at.shape[nb:nb + nfa], bt.shape[nb + nred:]
    k = int(np.prod(at.shape[nb + nfa:]))
    m, n = int(np.prod(fa)), int(np.prod(fb))
    c = np.matmul(at.reshape(bs + (m, k)), bt.reshape(bs + (k, n)))
    return np.transpose(c.reshape(bs + fa + fb), perm)


def _chain_view(buf, chain, env):
    from ..ops.prims import VIEW_REFS
    for name, attrs in chain:
        buf = VIEW_REFS[name](buf, **_resolve(attrs, env))
    return buf


def _chain_aval(g, n):
    """The aval of the destination view of a scatter_view node."""
    from ..ops import get_op
    aval = g.nodes[n.inputs[0]].aval
    for name, attrs in n.attrs["chain"]:
        aval = get_op(name).infer([aval], **attrs)
    return aval


class InplaceScatterStep:
    """``scatter_view`` into a buffer nothing reads afterwards: no copy of the root."""

    def __init__(self, n, direct):
        self.n, self.root, self.value = n, n.inputs[0], n.inputs[1]
        self.chain = n.attrs["chain"]
        self.direct = direct  # the value's kernel already wrote into the destination

    def __call__(self, vals, env):
        buf = vals[self.root]
        if not self.direct:
            *head, (name, attrs) = self.chain
            view = _chain_view(buf, head, env)
            if name == "getitem":
                view[_resolve(attrs, env)["index"]] = vals[self.value]
            else:
                _chain_view(view, [(name, attrs)], env)[...] = vals[self.value]
        vals[self.n.id] = buf


class CompiledGraph:
    """The compiled callable: runs the steps in order, freeing dead buffers and writing
    in place into buffers that are dead after a step (scatter of a time-loop step)."""

    def __init__(self, graph: Graph):
        self.graph = g = simplify(unmask(rewrite_topk(unroll_small_reductions(
            decompose(graph)))))
        kinds, mat, kernels = fuse(g)
        groups = row_groups(g, kinds, kernels)
        for _ in range(3):
            extra = boundary(g, kinds, mat, kernels, groups)
            if not extra:
                break
            kinds, mat, kernels = fuse(g, mat | extra)
            groups = row_groups(g, kinds, kernels)
        else:
            groups = []     # no stable plan (never seen): plain kernels
        self.kinds, self.kernels, self.groups = kinds, kernels, groups
        member = {i: grp for grp in groups for i in grp.roles}
        rows = {grp.anchor: grp for grp in groups}
        base = {}
        for n in g.nodes:
            base[n.id] = base[n.inputs[0]] if kinds[n.id] == "view" else n.id
        plan = [n.id for n in g.nodes if kinds[n.id] != "leaf" and not (
            kinds[n.id] == "ew" and n.id not in mat and n.id not in kernels) and (
            n.id not in member or n.id in rows)]
        plan = _toposort(g, plan, kernels, rows)
        all_kernels = kernels
        kernels = {i: k for i, k in kernels.items() if i not in member}
        last = self._last_uses(g, plan, kernels, base, rows)
        outs = set(g.outputs)
        consumers = {}
        for n in g.nodes:
            for i in n.inputs:
                consumers.setdefault(i, []).append(n.id)
        steps, direct = [], {}
        for pos, nid in enumerate(plan):
            n = g.nodes[nid]
            if n.op == "scatter_view" and self._donatable(g, n, pos, base, last, outs):
                val = n.inputs[1]
                kern = kernels.get(val)
                # the kernel may write straight into the destination only if it reads
                # nothing of that buffer (a stencil reads its neighbours: not in place)
                can_direct = (kern is not None and kern.kind == "map" and val not in outs
                              and consumers.get(val) == [nid]
                              and str(g.nodes[val].aval) == str(_chain_aval(g, n))
                              and all(base[i] != n.inputs[0] for i in kern.operands))
                if can_direct:
                    direct[val] = (n.inputs[0], n.attrs["chain"])
                elif steps and isinstance(steps[-1], MapStep) and steps[-1].out == val \
                        and steps[-1].k is kern and val not in outs \
                        and consumers.get(val) == [nid] and PingPongScatterStep.applies(n) \
                        and str(g.nodes[val].aval) == str(_chain_aval(g, n)):
                    # a stencil update: its kernel (the step just before) writes into a
                    # new buffer instead of a temporary copied back (see pingpong)
                    steps[-1] = PingPongScatterStep(n, steps[-1], _resolve)
                    continue
                steps.append(InplaceScatterStep(n, can_direct))
            elif nid in rows:
                steps.append(RowStep(g, rows[nid]))
            elif nid in kernels:
                kern = kernels[nid]
                steps.append(MapStep(g, kern) if kern.kind == "map" else ReduceStep(g, kern))
            else:
                steps.append(NumpyStep(g, n))
        for st in steps:
            if isinstance(st, MapStep) and st.out in direct:
                st.dest = direct[st.out]
        steps = pair_matvecs(g, steps, outs, consumers, base, NumpyStep, MapStep)
        steps = self._merge(g, steps, outs, consumers)
        self.free = [[] for _ in steps]
        last = {}
        for j, st in enumerate(steps):
            for i in self._reads(st):
                last[base[i]] = j
                last[i] = j
        for i, j in last.items():
            if i not in outs and g.nodes[i].op not in ("input", "const"):
                self.free[j].append(i)
        self.steps = steps
        self.numpy_steps = any(isinstance(st, NumpyStep) for st in steps)
        self.leaves = [n for n in g.nodes if n.op in ("input", "const", "scalar")]
        self.wrapper, self.why_steps = None, "numaccel.config.compiled_wrapper is False"
        if config.compiled_wrapper:
            try:
                self.wrapper = CompiledWrapper(g, kinds, mat, all_kernels)
            except Unsupported as exc:
                self.why_steps = str(exc)

    @staticmethod
    def _reads(st):
        if isinstance(st, RowStep):
            return st.operands
        if isinstance(st, (MapStep, ReduceStep)):
            return st.k.operands
        if isinstance(st, InplaceScatterStep):
            return st.n.inputs
        if isinstance(st, (MatvecPairStep, PingPongScatterStep)):
            return st.reads
        return st.inputs

    @staticmethod
    def _last_uses(g, plan, kernels, base, rows):
        last = {}
        for pos, nid in enumerate(plan):
            reads = [p for p, _ in rows[nid].operands] if nid in rows else \
                kernels[nid].operands if nid in kernels else g.nodes[nid].inputs
            for i in reads:
                last[base[i]] = last[i] = pos
        return last

    @staticmethod
    def _merge(g, steps, outs, consumers):
        """Merge consecutive same-shape map kernels into one multi-output kernel: one
        compilation and one pass over memory instead of several."""
        from .passes import Kernel
        merged = []
        for st in steps:
            prev = merged[-1] if merged else None
            if (isinstance(st, MapStep) and isinstance(prev, MapStep) and st.dest is None
                    and prev.dest is None
                    and str(prev.node.aval.shape) == str(st.node.aval.shape)):
                a, b = prev.k, st.k
                nodes = a.nodes + [x for x in b.nodes if x not in set(a.nodes)]
                inside = set(nodes)
                operands = a.operands + [x for x in b.operands
                                         if x not in set(a.operands) and x not in inside]
                roots = prev.outs + st.outs
                keep = [r for r in roots if r in outs or
                        any(c not in inside for c in consumers.get(r, ()))]
                k = Kernel("map", keep[0] if keep else roots[-1], nodes, operands,
                           {"outs": keep or roots[-1:]})
                merged[-1] = MapStep(g, k)
            else:
                merged.append(st)
        return merged

    @staticmethod
    def _donatable(g, n, pos, base, last, outs):
        root = n.inputs[0]
        return (base[root] == root and g.nodes[root].op not in ("input", "const")
                and root not in outs and last.get(root) == pos)

    def __call__(self, values, env=None):
        if self.wrapper is not None:
            try:
                return self.wrapper(values)
            except Exception as exc:  # noqa: BLE001
                # Numba could not type it, or the program raises: the step path decides
                # (it raises NumPy's own error where there is one)
                log("graph_breaks", f"compiled wrapper failed ({type(exc).__name__}: "
                                    f"{exc}); using the step wrapper")
                self.wrapper, self.why_steps = None, f"{type(exc).__name__}: {exc}"
        env = env or {}
        vals = [None] * len(self.graph.nodes)
        for n in self.leaves:
            if n.op == "input":
                vals[n.id] = values[n.attrs["index"]]
            elif n.op == "const":
                vals[n.id] = self.graph.consts[n.id]
            else:
                vals[n.id] = _scalar_value(n.attrs)
        if self.numpy_steps:
            with np.errstate(all="ignore"):   # as in compiled kernels: no FP warnings
                self._run(vals, env)
        else:
            self._run(vals, env)
        return [vals[i] for i in self.graph.outputs]

    def _run(self, vals, env):
        for step, free in zip(self.steps, self.free):
            step(vals, env)
            for i in free:
                vals[i] = None

    def describe(self) -> str:
        lines = ["compiled wrapper: one Numba function" if self.wrapper is not None else
                 f"step wrapper ({self.why_steps})"]
        for s in self.steps:
            if isinstance(s, RowStep):
                grp = s.grp
                lines.append(f"kernel[row] %{grp.anchor}: {len(grp.reds)} reductions in "
                             f"{max(grp.level.values())} passes, "
                             f"{' '.join(self.graph.nodes[i].op for i in grp.order)}")
            elif isinstance(s, (MapStep, ReduceStep)):
                ops = [self.graph.nodes[i].op for i in s.k.nodes]
                if isinstance(s, ReduceStep):
                    ops.append(s.node.op)
                dest = " -> in place" if getattr(s, "dest", None) else ""
                lines.append(f"kernel[{s.k.kind}] %{s.k.root}: {' '.join(ops)}{dest}")
            elif isinstance(s, (MatvecPairStep, PingPongScatterStep)):
                lines.append(s.describe())
            elif isinstance(s, InplaceScatterStep):
                lines.append(f"inplace %{s.n.id}: scatter_view{' (direct)' if s.direct else ''}")
            else:
                lines.append(f"numpy %{s.n.id}: {s.n.op}")
        return "\n".join(lines)


def _toposort(g, plan, kernels, rows):
    """Plan entries in dependency order, else in graph order: a row group runs at its
    last member, so an entry that reads one of its values but came earlier moves after."""
    import heapq
    pos = {nid: k for k, nid in enumerate(plan)}
    producer = {}
    for nid in plan:
        for i in (rows[nid].roles if nid in rows else (nid,)):
            producer[i] = nid
    deps = {}
    for nid in plan:
        reads = [p for p, _ in rows[nid].operands] if nid in rows else \
            kernels[nid].operands if nid in kernels else g.nodes[nid].inputs
        deps[nid] = {producer[i] for i in reads if i in producer and producer[i] != nid}
    users = {nid: [] for nid in plan}
    for nid, ds in deps.items():
        for d in ds:
            users[d].append(nid)
    count = {nid: len(ds) for nid, ds in deps.items()}
    ready = [pos[nid] for nid in plan if not count[nid]]
    heapq.heapify(ready)
    out = []
    while ready:
        nid = plan[heapq.heappop(ready)]
        out.append(nid)
        for u in users[nid]:
            count[u] -= 1
            if not count[u]:
                heapq.heappush(ready, pos[u])
    if len(out) != len(plan):
        raise RuntimeError("numaccel internal error: cyclic kernel plan")
    return out


class CpuBackend(Backend):
    """Fused Numba kernels on the CPU (large ones on several threads)."""

    name = "cpu"
    capabilities = frozenset({"host", "numba"})
    # compile() is cheap and the first run compiles the kernels (Numba's lazy dispatch):
    # both can run on the background compile worker (trace/background.py)
    compiles_in_background = True

    def compile(self, graph, **options):
        return CompiledGraph(graph)


register_backend("cpu", CpuBackend, replace=True)
