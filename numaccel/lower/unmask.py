"""Masked updates as ``where``: ``y[m] = f(x1[m], x2[m], ...)`` becomes
``y = where(m, f(x1, x2, ...), y)``.

The pattern (mandelbrot-style escape loops, clipping of selected elements): a boolean
mask ``m`` of the full shape of ``y`` gathers same-shape arrays, elementwise ops combine
the gathered values (and scalars), and the result is scattered back under the same
mask. NumPy runs that as a gather per operand, the arithmetic on the compacted values,
and a scatter; after the rewrite it is one elementwise pass that the fuser can merge with
its neighbours (and with the next loop iteration's), and no mask count is needed.

Sound because every op on the path is elementwise: the value at a True position of the
mask is the same op on the same operand values either way. At False positions ``f``
runs too but its result is discarded (floating-point warnings are off in compiled code,
and integer division by zero gives 0 there, as NumPy's would with warnings off).
"""
from __future__ import annotations

from ..graph import Graph
from ..ir import AVal
from ..ops import get_op


def _shape_key(aval):
    # symbolic dims compare by text: Sym.__eq__ would record a guard
    return tuple(str(d) for d in aval.shape)


def _mask_of(graph, n):
    """(data node, mask node) when ``n`` is ``x[m]`` with one full-shape boolean mask."""
    if n.op not in ("getitem", "setitem"):
        return None
    spec = n.attrs.get("index")
    arrays = n.inputs[1:] if n.op == "getitem" else n.inputs[2:]
    if not (isinstance(spec, tuple) and len(spec) == 1 and isinstance(spec[0], tuple)
            and spec[0][0] == "arr" and len(arrays) == 1):
        return None
    x, m = graph.nodes[n.inputs[0]], graph.nodes[arrays[0]]
    if m.aval.dtype.kind != "b" or _shape_key(m.aval) != _shape_key(x.aval) or \
            not x.aval.ndim:
        return None
    return x.id, m.id


def _lanewise(graph, vid, mid, count_key, memo):
    """Whether value node ``vid`` is computed lane by lane from ``x[m]`` gathers (mask
    ``mid``) and scalars; memo: node id -> bool."""
    if vid in memo:
        return memo[vid]
    n = graph.nodes[vid]
    ok = False
    if n.aval.ndim == 0:
        ok = True
    elif _shape_key(n.aval) == count_key:
        g = _mask_of(graph, n)
        if n.op == "getitem" and g is not None:
            ok = g[1] == mid
        elif n.op not in ("input", "const", "scalar"):
            op = get_op(n.op)
            ok = op.kind == "elementwise" and op.nout == 1 and n.op != "pyop" and all(
                _lanewise(graph, i, mid, count_key, memo) for i in n.inputs)
    memo[vid] = ok
    return ok


def unmask(graph: Graph) -> Graph:
    """Rewrite every matching masked update of ``graph`` (see the module docstring)."""
    plans = {}
    for n in graph.nodes:
        g = _mask_of(graph, n) if n.op == "setitem" else None
        if g is None:
            continue
        base, mid = g
        val = graph.nodes[n.inputs[1]]
        if val.aval.dtype != graph.nodes[base].aval.dtype:
            continue        # the tracer casts the value to y's dtype first: not seen here
        if val.aval.ndim == 0:
            plans[n.id] = (mid, None)
            continue
        # the count of m: the gathered shape, as the tracer wrote it
        count = n.attrs["index"][0][2] if len(n.attrs["index"][0]) > 2 else None
        if count is None or val.aval.ndim != 1 or str(val.aval.shape[0]) != str(count):
            continue
        if _lanewise(graph, val.id, mid, _shape_key(val.aval), {}):
            plans[n.id] = (mid, _shape_key(val.aval))
    if not plans:
        return graph
    out = Graph()
    remap = {}
    full = {}           # (old node id, mask id) -> new node id of its full-shape version

    def widen(vid, mid, shape):
        key = (vid, mid)
        if key in full:
            return full[key]
        n = graph.nodes[vid]
        if n.aval.ndim == 0:
            r = remap[vid]
        elif n.op == "getitem":
            r = remap[n.inputs[0]]
        else:
            args = [widen(i, mid, shape) for i in n.inputs]
            r = out.add(n.op, args, n.attrs, AVal(shape, n.aval.dtype)).id
        full[key] = r
        return r

    for n in graph.nodes:
        if n.id in plans:
            mid, _ = plans[n.id]
            base = graph.nodes[n.inputs[0]]
            v = widen(n.inputs[1], mid, base.aval.shape)
            new = out.add("where", [remap[mid], v, remap[base.id]], {}, base.aval)
        else:
            new = out.add(n.op, [remap[i] for i in n.inputs], n.attrs, n.aval, n.scalar)
            if n.id in graph.consts:
                out.consts[new.id] = graph.consts[n.id]
        remap[n.id] = new.id
    out.outputs = [remap[i] for i in graph.outputs]
    return out
