"""``np.argsort(x, axis=-1)[..., :k]`` -> ``argsort_topk(x, k)`` (see ops/sorting.py).

Only where the full order is not used elsewhere, ``k`` is static and small against the
row (a full sort is then the better plan anyway), and ``x`` is floating point: integer
data has many ties, whose order NumPy leaves open but users compare.
"""
from __future__ import annotations

from ..graph import Graph
from .passes import rewrite_nodes
from ..ops.sorting import TOPK_DTYPES

_MAX_FRACTION = 4       # k at most a quarter of the row


def _topk_of(n, graph, consumers):
    """``(x id, k)`` when node ``n`` is a top-k slice of a last-axis argsort, else None."""
    if n.op != "getitem" or not n.inputs:
        return None
    s = graph.nodes[n.inputs[0]]
    if s.op != "argsort" or consumers[s.id] != 1:
        return None
    x = graph.nodes[s.inputs[0]].aval
    nd = x.ndim
    if s.attrs.get("axis") != nd - 1 or x.dtype not in TOPK_DTYPES:
        return None
    index = n.attrs.get("index")
    if not isinstance(index, tuple) or len(index) != nd or \
            any(it != slice(None) for it in index[:-1]):
        return None
    last = index[-1]
    if not isinstance(last, slice) or last.start not in (None, 0) or \
            last.step not in (None, 1) or type(last.stop) is not int or last.stop < 0:
        return None
    n_row, k = x.shape[-1], n.aval.shape[-1]
    if type(n_row) is not int or type(k) is not int or k * _MAX_FRACTION > n_row:
        return None
    return s.inputs[0], k


def rewrite_topk(graph: Graph) -> Graph:
    consumers = {n.id: 0 for n in graph.nodes}
    for n in graph.nodes:
        for i in n.inputs:
            consumers[i] += 1
    for o in graph.outputs:
        consumers[o] += 1
    if not any(_topk_of(n, graph, consumers) for n in graph.nodes if n.op == "getitem"):
        return graph
    def expand(g, n, inputs):
        hit = _topk_of(n, graph, consumers)
        if hit is None:
            return None
        # the argsort (inputs[0], dead after this) reads x: its own input
        return g.add("argsort_topk", (g.nodes[inputs[0]].inputs[0],), {"k": hit[1]},
                     n.aval).id

    return rewrite_nodes(graph, expand).prune()
