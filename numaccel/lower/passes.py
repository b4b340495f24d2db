"""Graph passes before codegen: decompose, simplify (CSE + DCE) and fuse (plan kernels).

Decompose: var/std become the two passes NumPy's own ``_var`` makes (mean, then the mean
of squared deviations), so that both fuse into reduction kernels (the deviations are
never stored) and the caller's standardisation ``(x - mu) / sd`` reuses the mean.

Fusion plan: elementwise nodes the renderer supports are grouped into loop kernels.
A node gets its own buffer (is *materialized*) when it is an output, is used by
something that is not a same-shape elementwise op or reduction, or is used more than
once (so expensive subexpressions are not recomputed) by more than one kernel (uses that
all end in one kernel share the value it computes once). Each materialized elementwise node
is the root of a kernel that computes its non-materialized producers inline; each
fusible reduction is a kernel that computes its producers inline while accumulating.
Movement ops that NumPy does as views (basic slicing, transpose, broadcast_to, reshape,
flip) cost nothing: the wrapper applies them to buffers and the kernel indexes the views.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import Graph, Node, freeze
from ..ir import AVal
from .render import supported

VIEW_OPS = {"getitem", "transpose", "broadcast_to", "reshape", "flip", "real"}
LEAF_OPS = {"input", "const", "scalar"}
REDUCE_UFUNCS = {"add", "multiply", "maximum", "minimum", "logical_or", "logical_and"}


def _decomposable_var(n: Node, graph: Graph) -> bool:
    if n.op not in ("var", "std") or {k for k, v in n.attrs.items() if v is not None} - {
            "axis", "ddof", "keepdims"}:
        return False        # dtype=, out=, where=, mean=, correction= stay NumPy's
    src = graph.nodes[n.inputs[0]].aval
    if src.dtype not in (np.dtype(np.float32), np.dtype(np.float64)) or src.ndim == 0:
        return False        # ints/f16 (other accumulation dtypes), complex (|d|^2)
    ddof = n.attrs.get("ddof", 0)
    if not isinstance(ddof, int):
        return False
    if ddof == 0:
        return True
    axis = n.attrs.get("axis")
    red = [src.shape[a] for a in (range(src.ndim) if axis is None else axis)]
    return all(isinstance(d, int) for d in red)   # count - ddof as a literal


def rewrite_nodes(graph: Graph, expand) -> Graph:
    """A copy of ``graph`` in which ``expand(g, n, inputs)`` may replace node ``n``: it
    adds the replacement to the new graph ``g`` (``inputs``: n's inputs there) and
    returns its id, or returns None to copy ``n`` (and its constant) as it is."""
    g = Graph()
    remap = {}
    for n in graph.nodes:
        inputs = tuple(remap[i] for i in n.inputs)
        new = expand(g, n, inputs)
        if new is None:
            new = g.add(n.op, inputs, n.attrs, n.aval, n.scalar).id
            if n.id in graph.consts:
                g.consts[new] = graph.consts[n.id]
        remap[n.id] = new
    g.outputs = [remap[i] for i in graph.outputs]
    return g


def decompose(graph: Graph) -> Graph:
    """var/std -> mean, subtract, multiply, mean (ddof 0) or add-reduce / (count - ddof),
    and sqrt: NumPy's two-pass ``_var`` step by step, so results agree to rounding."""
    if not any(_decomposable_var(n, graph) for n in graph.nodes):
        return graph
    return rewrite_nodes(graph, lambda g, n, inputs: _var_steps(graph, g, n, inputs)
                         if _decomposable_var(n, graph) else None)


def _var_steps(graph, g, n, inputs):
    """The nodes of one var/std in ``g``; returns the result's id."""
    x = inputs[0]
    src = graph.nodes[n.inputs[0]].aval
    axis = n.attrs.get("axis")
    axes = range(src.ndim) if axis is None else axis
    kshape = tuple(1 if i in axes else d for i, d in enumerate(src.shape))
    # attrs as the tracer writes a caller's x.mean(axis), so that CSE can merge them
    ax = {"axis": None if axis is None else tuple(axis), "dtype": None}
    rax = {} if axis is None else {"axis": tuple(axis)}     # x.sum() has no axis attr
    keep = bool(n.attrs.get("keepdims", False))
    vshape = n.aval.shape
    # the mean as the caller writes it (keepdims=False), so that CSE merges it with
    # the caller's own x.mean(axis) of a standardisation; a reshape (a view) keeps dims
    mshape = tuple(d for i, d in enumerate(src.shape) if i not in axes)
    m0 = g.add("mean", [x], {**ax, "keepdims": False}, AVal(mshape, src.dtype),
               not mshape)      # NumPy returns a scalar there, and so did the tracer
    mu = g.add("reshape", [m0.id], {"shape": kshape}, AVal(kshape, src.dtype))
    d = g.add("subtract", [x, mu.id], {}, src)
    sq = g.add("multiply", [d.id, d.id], {}, src)
    ddof = n.attrs.get("ddof", 0)
    if ddof == 0:
        v = g.add("mean", [sq.id], {**ax, "keepdims": keep},
                  AVal(vshape, src.dtype), n.scalar)
    else:
        count = 1
        for a in axes:
            count *= src.shape[a]
        s_ = g.add("ufunc_reduce", [sq.id], {**rax, "keepdims": keep, "ufunc": "add"},
                   AVal(vshape, src.dtype))
        c = g.add("scalar", [], {"value": max(count - ddof, 0), "dtype": None,
                                 "weak": "int"}, AVal((), np.int64, weak="int"))
        v = g.add("divide", [s_.id, c.id], {}, AVal(vshape, src.dtype), n.scalar)
    if n.op == "std":
        v = g.add("sqrt", [v.id], {}, AVal(vshape, src.dtype), n.scalar)
    return v.id


def simplify(graph: Graph) -> Graph:
    """Common-subexpression elimination and dead-code elimination."""
    g = Graph()
    seen, remap = {}, {}
    for n in graph.nodes:
        inputs = tuple(remap[i] for i in n.inputs)
        if n.op in ("input", "const"):
            key = None
        else:
            key = (n.op, inputs, freeze(n.attrs), str(n.aval), n.scalar)
        if key is not None and key in seen:
            remap[n.id] = seen[key]
            continue
        new = g.add(n.op, inputs, n.attrs, n.aval, n.scalar)
        if n.id in graph.consts:
            g.consts[new.id] = graph.consts[n.id]
        remap[n.id] = new.id
        if key is not None:
            seen[key] = new.id
    g.outputs = [remap[i] for i in graph.outputs]
    return g.prune()


@dataclass
class Kernel:
    kind: str                 # "map" | "reduce"
    root: int                 # node id whose value the kernel produces
    nodes: list               # node ids computed inside, topological order
    operands: list            # node ids read from buffers/scalars
    extra: dict = field(default_factory=dict)


def is_reduce_fusible(n: Node, graph: Graph) -> bool:
    if n.op == "ufunc_reduce":
        if n.attrs.get("dtype") is not None or n.attrs["ufunc"] not in REDUCE_UFUNCS:
            return False
    elif n.op == "mean":
        if n.attrs.get("dtype") is not None:
            return False
    else:
        return False
    src = graph.nodes[n.inputs[0]].aval
    dts = {np.dtype(src.dtype).kind, n.aval.dtype.kind}
    return not (dts & set("cOSUVmM")) and src.ndim >= 1


def classify(graph: Graph) -> dict:
    kinds = {}
    for n in graph.nodes:
        if n.op in LEAF_OPS:
            kinds[n.id] = "leaf"
        elif n.op in VIEW_OPS:
            kinds[n.id] = "view"
        elif n.aval.ndim >= 1 and not n.aval.weak and _is_ew(n, graph) and \
                supported(n, [graph.nodes[i].aval.dtype for i in n.inputs]) and \
                _literals_fit(n, graph):
            kinds[n.id] = "ew"
        elif is_reduce_fusible(n, graph):
            kinds[n.id] = "red"
        else:
            kinds[n.id] = "np"
    return kinds


def _is_ew(n, graph):
    from ..ops import get_op
    return get_op(n.op).kind == "elementwise" and n.op != "pyop"


def _literals_fit(n, graph):
    """NumPy raises for a Python int that does not fit the array's dtype: keep those in
    NumPy (the compiled cast would wrap silently)."""
    for i in n.inputs:
        m = graph.nodes[i]
        if m.op == "scalar" and m.attrs.get("weak") == "int":
            dt = n.aval.dtype if n.aval.dtype.kind in "iu" else None
            if dt is not None and not (np.iinfo(dt).min <= m.attrs["value"] <= np.iinfo(dt).max):
                return False
    return True


def fuse(graph: Graph, force=()):
    """Plan: (kinds, materialized set, kernels by root id). ``force``: elementwise nodes
    that get a buffer whatever their consumers (read outside a row group)."""
    kinds = classify(graph)
    consumers = {n.id: [] for n in graph.nodes}
    for n in graph.nodes:
        for i in dict.fromkeys(n.inputs):
            consumers[i].append(n.id)
    outputs = set(graph.outputs)
    mat = {i for i in force if kinds[i] == "ew"}
    for n in graph.nodes:
        if kinds[n.id] != "ew":
            continue
        cs = consumers[n.id]
        shape = str(n.aval.shape)
        ok = n.id not in outputs and len(cs) == 1
        for c in cs:
            kc = kinds[c]
            if kc == "ew" and str(graph.nodes[c].aval.shape) == shape:
                continue
            if kc == "red" and graph.nodes[c].inputs[0] == n.id:
                continue
            ok = False
        if not ok:
            mat.add(n.id)
    _inline_shared(graph, kinds, consumers, outputs, mat, set(force))
    kernels = {}
    for n in graph.nodes:
        k = kinds[n.id]
        if (k == "ew" and n.id in mat) or k == "red":
            body, operands = [], []
            _collect(graph, kinds, mat, n.id, body, operands, set(), top=True)
            kernels[n.id] = Kernel("map" if k == "ew" else "reduce", n.id, body, operands)
    return kinds, mat, kernels


def _inline_shared(graph, kinds, consumers, outputs, mat, force):
    """Un-materialize an elementwise node whose consumers all end up in one kernel
    (``nb`` in ``(nb == 3) | (nb == 2)``): that kernel computes it once (its body holds
    each node once), so a buffer would only add a store and a load per element.

    One sweep in reverse topological order: ``root[i]`` is the kernel that computes
    ``i`` (itself when materialized or a reduction, else the one root all its consumers
    share, or None), so chains of shared nodes resolve from the consumers up."""
    root = {}
    for n in reversed(graph.nodes):
        nid, k = n.id, kinds[n.id]
        if k == "red" or (nid in mat and k != "ew"):
            root[nid] = nid
            continue
        if k != "ew":
            root[nid] = None
            continue
        shape = str(n.aval.shape)
        rs = set()
        for c in consumers[nid]:
            if kinds[c] == "ew" and str(graph.nodes[c].aval.shape) == shape:
                rs.add(root[c])
            elif kinds[c] == "red" and graph.nodes[c].inputs[0] == nid:
                rs.add(c)
            else:
                rs.add(None)
        shared = rs.pop() if len(rs) == 1 else None
        if nid in mat:
            if shared is not None and nid not in force and nid not in outputs and \
                    len(consumers[nid]) > 1 and all(kinds[c] == "ew" for c in consumers[nid]):
                mat.discard(nid)
                root[nid] = shared
            else:
                root[nid] = nid
        else:
            root[nid] = shared


def _collect(graph, kinds, mat, nid, body, operands, seen, top=False):
    if nid in seen:
        return
    seen.add(nid)
    n = graph.nodes[nid]
    inline = top or (kinds[nid] == "ew" and nid not in mat)
    if not inline:
        operands.append(nid)
        return
    srcs = n.inputs
    for i in srcs:
        _collect(graph, kinds, mat, i, body, operands, seen)
    if kinds[nid] == "ew":
        body.append(nid)
