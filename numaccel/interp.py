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


def interpret(graph, values, env):
    """Run ``graph`` on input ``values``; ``env`` binds symbolic dims to sizes.

    Floating-point warnings are not raised, as in compiled code (documented)."""
    with np.errstate(all="ignore"):
        return _interpret(graph, values, env)


def _interpret(graph, values, env):
    nodes = graph.nodes
    last_use = {}
    for n in nodes:
        for i in n.inputs:
            last_use[i] = n.id
    outs = set(graph.outputs)
    vals = {}
    for n in nodes:
        op = n.op
        if op == "input":
            v = values[n.attrs["index"]]
        elif op == "const":
            v = graph.consts[n.id]
        elif op == "scalar":
            v = _scalar_value(n.attrs)
        else:
            attrs = n.attrs
            if has_sym(attrs):
                attrs = resolve(attrs, env)
            v = get_op(op).ref(*[vals[i] for i in n.inputs], **attrs)
        vals[n.id] = v
        for i in set(n.inputs):
            if last_use.get(i) == n.id and i not in outs:
                del vals[i]
    return [vals[i] for i in graph.outputs]


class NumpyBackend(Backend):
    """Reference interpreter: exactly NumPy's results, no speed-up."""

    name = "numpy"
    capabilities = frozenset({"host"})

    def compile(self, graph, **options):
        def run(values, env=None):
            return interpret(graph, values, env or {})
        run.graph = graph
        return run


register_backend("numpy", NumpyBackend, replace=True)


def _cpu_factory():
    from .lower.cpu import CpuBackend
    return CpuBackend()


register_backend("cpu", _cpu_factory, replace=True)
