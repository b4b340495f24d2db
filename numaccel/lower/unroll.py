"""Unroll reductions over one short static axis into elementwise ops.

``(d ** 2).sum(axis=-1)`` over an ``(n, n, 3)`` array is a row reduction of 3 elements
per row: a row or reduce kernel pays its per-row set-up for 3 additions, and the
``(n, n, 3)`` producer is read through the reduction's own loop. Written as
``d[..., 0] ** 2 + d[..., 1] ** 2 + d[..., 2] ** 2`` it is an elementwise expression over
``(n, n)``: it fuses with its consumers into one vectorized map kernel and nothing of
shape ``(n, n, 3)`` is stored.

The slices are pushed through the elementwise producers (``getitem(a - b, i)`` becomes
``getitem(a, i) - getitem(b, i)``, broadcast dims of size 1 index 0), down to leaves and
other ops, so the short axis is gone from the whole fused expression; CSE merges what
the copies share. The order of the combination is NumPy's for such short reductions
(sequential, ``((x0 + x1) + x2) + x3``), and ``mean`` divides that sum by the count, as
NumPy's ``_mean`` does.
"""
from __future__ import annotations

import numpy as np

from ..graph import Graph
from ..ir import AVal
from ..ops import get_op
from .passes import rewrite_nodes

MAX_LEN = 4          # reduced axes up to this (static) length are unrolled
_MAX_PUSH = 32       # elementwise nodes a slice may be pushed through, per reduction
_FLOAT = ("float32", "float64")


def _unrollable(n, graph) -> bool:
    if n.op == "ufunc_reduce":
        uf = n.attrs.get("ufunc")
        if uf not in ("add", "multiply", "maximum", "minimum"):
            return False
    elif n.op != "mean":
        return False
    if n.attrs.get("dtype") is not None or set(n.attrs) - {"axis", "keepdims", "ufunc",
                                                           "dtype"}:
        return False
    src = graph.nodes[n.inputs[0]].aval
    axis = n.attrs.get("axis")
    if src.ndim < 2 or axis is None or len(axis) != 1:
        return False
    k = src.shape[axis[0]]
    if type(k) is not int or not 2 <= k <= MAX_LEN or n.aval.dtype != src.dtype:
        return False
    dt = np.dtype(src.dtype)
    if n.op == "mean" or n.attrs["ufunc"] in ("add", "multiply"):
        return dt.name in _FLOAT       # ints and bools accumulate in a wider type
    return dt.kind in "fiu"


def unroll_small_reductions(graph: Graph) -> Graph:
    if not any(_unrollable(n, graph) for n in graph.nodes):
        return graph
    return rewrite_nodes(graph, lambda g, n, inputs: _unrolled(g, n, inputs)
                         if _unrollable(n, graph) else None)


def _unrolled(g: Graph, n, inputs) -> int:
    """The elementwise combination of the slices of one short-axis reduction in ``g``."""
    src = g.nodes[inputs[0]]
    axis = n.attrs["axis"][0]
    k = src.aval.shape[axis]
    budget = [_MAX_PUSH]
    parts = [_slice(g, src.id, axis, i, budget) for i in range(k)]
    op = "add" if n.op == "mean" else n.attrs["ufunc"]
    rshape = tuple(d for j, d in enumerate(src.aval.shape) if j != axis)
    acc = parts[0]
    for p in parts[1:]:
        acc = g.add(op, (acc, p), {"dtype": None}, AVal(rshape, src.aval.dtype)).id
    if n.op == "mean":
        c = g.add("scalar", [], {"value": k, "dtype": None, "weak": "int"},
                  AVal((), np.int64, weak="int"))
        acc = g.add("divide", (acc, c.id), {"dtype": None},
                    AVal(rshape, src.aval.dtype)).id
    if tuple(map(str, n.aval.shape)) != tuple(map(str, rshape)):    # keepdims
        acc = g.add("reshape", (acc,), {"shape": tuple(n.aval.shape)}, n.aval).id
    return acc


def _slice(g: Graph, nid: int, axis: int, i: int, budget) -> int:
    """A node of ``g`` for ``node[..., i, ...]`` (``i`` at ``axis``), pushed through
    elementwise producers while ``budget`` lasts."""
    n = g.nodes[nid]
    shape = n.aval.shape
    rshape = tuple(d for j, d in enumerate(shape) if j != axis)
    if budget[0] > 0 and n.op not in ("input", "const", "scalar", "pyop") and \
            get_op(n.op).kind == "elementwise" and not n.scalar:
        budget[0] -= 1
        ins = []
        for j in n.inputs:
            a = g.nodes[j].aval
            lead = len(shape) - a.ndim
            if axis < lead:                 # broadcast from the left: not indexed
                ins.append(j)
            else:
                # a broadcast dim is 1 (sizes 0 and 1 are never symbolic: no Sym compare)
                d = a.shape[axis - lead]
                ins.append(_slice(g, j, axis - lead, 0 if type(d) is int and d == 1 else i,
                                  budget))
        return g.add(n.op, ins, n.attrs, AVal(rshape, n.aval.dtype, n.aval.weak)).id
    index = tuple(i if j == axis else slice(None) for j in range(len(shape)))
    return g.add("getitem", (nid,), {"index": index}, AVal(rshape, n.aval.dtype)).id
