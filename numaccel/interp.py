"""The ``numpy`` backend: a reference interpreter that walks the graph calling each op's
NumPy reference. It is the oracle in tests and the always-correct fallback."""
from __future__ import annotations

import numpy as np

from .backends import Backend, register_backend
from .ops import get_op
from .ops import prims as _prims  # noqa: F401  (registers the primitives)
from .trace.symbolic import has_sym, resolve


def _scalar_value(attrs):
    if attrs["weak"]:
        return attrs["value"]
    return np.array(attrs["value"], dtype=attrs["dtype"])[()]


def interpret(graph, values, env, donate=()):
    """Run ``graph`` on input ``values``; ``env`` binds symbolic dims to sizes.

    ``donate``: indices of input values the caller hands over (it never reads them again
    and nothing else views them): a ``scatter_view`` may then write into such an input in
    place instead of into a copy, where the graph reads it nowhere after the scatter and
    nothing computed from it aliases it (see ``_in_place``). Floating-point warnings are
    not raised, as in compiled code (documented)."""
    with np.errstate(all="ignore"):
        return _interpret(graph, values, env, donate)


# ops whose references always return a new array (never a view of an operand), so that
# writing into an operand afterwards cannot change their results; real/imag return views
_FRESH_KINDS = frozenset({"elementwise", "reduce", "contraction", "scan"})
_VIEWING = frozenset({"real", "imag"})


def _in_place(graph, donate, last_use, outs):
    """Scatter nodes that may write into their (donated input) root in place: the scatter
    is the root's last use, the root is no output, and every other use of it made a new
    array. (A loop writing block after block into a buffer would copy the whole buffer
    per block: O(n^2).)"""
    if not donate:
        return frozenset()
    users = {}
    for n in graph.nodes:
        for i in n.inputs:
            users.setdefault(i, []).append(n)
    ok = set()
    for n in graph.nodes:
        if n.op != "scatter_view":
            continue
        r = n.inputs[0]
        root = graph.nodes[r]
        if root.op != "input" or root.attrs["index"] not in donate or r in outs or \
                last_use.get(r) != n.id or n.inputs.count(r) != 1:
            continue
        if all(u is n or (get_op(u.op).kind in _FRESH_KINDS and u.op not in _VIEWING)
               for u in users[r]):
            ok.add(n.id)
    return frozenset(ok)


def _interpret(graph, values, env, donate=()):
    nodes = graph.nodes
    last_use = {}
    for n in nodes:
        for i in n.inputs:
            last_use[i] = n.id
    outs = set(graph.outputs)
    in_place = _in_place(graph, donate, last_use, outs)
    vals = {}
    for n in nodes:
        vals[n.id] = _value(graph, n, vals, values, env, n.id in in_place)
        for i in set(n.inputs):
            if last_use.get(i) == n.id and i not in outs:
                del vals[i]
    return [vals[i] for i in graph.outputs]


def _value(graph, n, vals, values, env, in_place=False):
    """The value of node ``n``; ``vals`` holds those of its inputs."""
    op = n.op
    if op == "input":
        return values[n.attrs["index"]]
    if op == "const":
        return graph.consts[n.id]
    if op == "scalar":
        return _scalar_value(n.attrs)
    attrs = n.attrs
    if has_sym(attrs):
        attrs = resolve(attrs, env)
    if in_place:
        return _prims.scatter_into(*[vals[i] for i in n.inputs], **attrs)
    return get_op(op).ref(*[vals[i] for i in n.inputs], **attrs)


def evaluate(graph, nid, values, env, known):
    """Value of node ``nid`` of ``graph`` (not pruned, outputs ignored), reusing and
    extending ``known`` (node id -> value): the nodes it needs that ``known`` lacks are
    run in id order (a node's inputs come before it)."""
    need, stack = set(), [nid]
    while stack:
        i = stack.pop()
        if i not in need and i not in known:
            need.add(i)
            stack.extend(graph.nodes[i].inputs)
    with np.errstate(all="ignore"):
        for i in sorted(need):
            known[i] = _value(graph, graph.nodes[i], known, values, env)
    return known[nid]


class NumpyBackend(Backend):
    """Reference interpreter: exactly NumPy's results, no speed-up."""

    name = "numpy"
    capabilities = frozenset({"host"})

    def compile(self, graph, **options):
        def run(values, env=None, donate=()):
            return interpret(graph, values, env or {}, donate)
        run.graph = graph
        run.donates = True      # accepts ``donate`` (see interpret)
        return run


register_backend("numpy", NumpyBackend, replace=True)


def _cpu_factory():
    from .lower.cpu import CpuBackend
    return CpuBackend()


register_backend("cpu", _cpu_factory, replace=True)
