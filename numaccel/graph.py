"""The dataflow graph: SSA nodes in topological order.

``Node(id, op, inputs, attrs, aval)``: ``inputs`` are ids of earlier nodes, ``attrs`` a
dict of hashable, JSON-able values (ints, floats, strings, tuples, slices, ``Sym`` dims,
dtype names). Array constants live in ``Graph.consts`` (node id -> ndarray), not in attrs.
Leaves are ``input`` nodes (attr ``index``: position in the flattened arguments),
``const`` nodes and ``scalar`` nodes (a literal with its dtype and NEP 50 weakness).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .ir import AVal
from .trace.symbolic import Sym, render


class Node:
    """One SSA node. Treated as immutable (nothing assigns its fields after creation);
    a plain slots class, not a frozen dataclass: tracing makes one per NumPy call, and a
    frozen dataclass's ``__init__`` (``object.__setattr__`` per field) cost ~0.8 us."""

    __slots__ = ("id", "op", "inputs", "attrs", "aval", "scalar")

    def __init__(self, id: int, op: str, inputs: tuple, attrs: dict, aval: AVal,
                 scalar: bool = False):
        self.id = id
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.aval = aval
        #: NumPy returns an np.generic (not a 0-d array) for this value
        self.scalar = scalar

    def __repr__(self):
        return f"Node({self})"

    def __str__(self):
        args = ", ".join(f"%{i}" for i in self.inputs)
        attrs = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(self.attrs.items())
                          if v is not None)
        attrs = f" {{{attrs}}}" if attrs else ""
        return f"%{self.id} = {self.op}({args}){attrs} : {self.aval}"


def _fmt(v):
    if isinstance(v, Sym):
        return render(v.expr)
    if isinstance(v, slice):
        return f"{_fmt(v.start)}:{_fmt(v.stop)}:{_fmt(v.step)}"
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if v is None:
        return ""
    return repr(v)


@dataclass
class Graph:
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    consts: dict = field(default_factory=dict)

    def add(self, op, inputs, attrs, aval, scalar=False) -> Node:
        node = Node(len(self.nodes), op, tuple(inputs), dict(attrs), aval, scalar)
        self.nodes.append(node)
        return node

    @property
    def input_nodes(self):
        return [n for n in self.nodes if n.op == "input"]

    def op_count(self) -> int:
        return sum(1 for n in self.nodes if n.op not in ("input", "const", "scalar"))

    def __str__(self):
        lines = [str(n) for n in self.nodes]
        lines.append("return " + ", ".join(f"%{i}" for i in self.outputs))
        return "\n".join(lines)

    def live(self, outputs=None) -> set:
        """Ids of the nodes ``outputs`` (default: the graph's) depend on, themselves
        included."""
        live = set(self.outputs if outputs is None else outputs)
        for n in reversed(self.nodes):
            if n.id in live:
                live.update(n.inputs)
        return live

    def prune(self) -> "Graph":
        """A copy without nodes that no output depends on (ids renumbered)."""
        live = self.live()
        keep = [n for n in self.nodes if n.id in live or n.op == "input"]
        remap = {n.id: i for i, n in enumerate(keep)}
        g = Graph()
        for n in keep:
            g.nodes.append(Node(remap[n.id], n.op, tuple(remap[i] for i in n.inputs),
                                n.attrs, n.aval, n.scalar))
            if n.id in self.consts:
                g.consts[remap[n.id]] = self.consts[n.id]
        g.outputs = [remap[i] for i in self.outputs]
        return g

    def verify(self) -> None:
        """Re-run every op's shape/dtype rule and check the recorded avals."""
        from .ops import get_op
        from .trace.symbolic import set_guard_sink
        prev = set_guard_sink(None)
        try:
            for n in self.nodes:
                for i in n.inputs:
                    if i >= n.id:
                        raise ValueError(f"graph is not topologically ordered at {n}")
                if n.op in ("input", "const", "scalar"):
                    continue
                op = get_op(n.op)
                got = op.infer([self.nodes[i].aval for i in n.inputs], **n.attrs)
                if (tuple(map(str, got.shape)), got.dtype) != \
                        (tuple(map(str, n.aval.shape)), n.aval.dtype):
                    raise ValueError(f"shape rule of {n.op} gives {got}, graph has {n}")
        finally:
            set_guard_sink(prev)

    # -- serialization (JSON, never pickle) -----------------------------------
    def to_json(self) -> dict:
        return {
            "nodes": [{"id": n.id, "op": n.op, "inputs": list(n.inputs),
                       "attrs": {k: attr_to_json(v) for k, v in n.attrs.items()},
                       "shape": [attr_to_json(d) for d in n.aval.shape],
                       "dtype": dtype_name(n.aval.dtype), "scalar": n.scalar}
                      for n in self.nodes],
            "outputs": list(self.outputs),
            "consts": sorted(self.consts),
        }

    def key(self) -> tuple:
        """A hashable structural key: ops, inputs, attrs, avals; constants by identity."""
        return tuple((n.op, n.inputs, freeze(n.attrs), str(n.aval), n.scalar,
                      id(self.consts[n.id]) if n.id in self.consts else 0)
                     for n in self.nodes) + (tuple(self.outputs),)


def freeze(v):
    """A hashable, exactly comparable form of an attr value (Syms by expression)."""
    if isinstance(v, dict):
        return ("d",) + tuple((k, freeze(x)) for k, x in sorted(v.items()))
    if isinstance(v, (tuple, list)):
        return ("t",) + tuple(freeze(x) for x in v)
    if isinstance(v, Sym):
        return ("sym", v.expr)
    if isinstance(v, slice):
        return ("sl", freeze(v.start), freeze(v.stop), freeze(v.step))
    if isinstance(v, (float, np.floating)):
        # by bits: -0.0 == 0.0 but they differ (copysign, 1/x); every NaN is one NaN
        return ("nan",) if v != v else ("f", type(v).__name__, float(v).hex())
    return (type(v).__name__, v)


def dtype_name(dt) -> str:
    dt = np.dtype(dt)
    return "bfloat16" if dt.name == "bfloat16" else dt.str if dt.kind == "V" else dt.name


def attr_to_json(v):
    if isinstance(v, Sym):
        return {"sym": v.expr}
    if isinstance(v, slice):
        return {"slice": [attr_to_json(v.start), attr_to_json(v.stop), attr_to_json(v.step)]}
    if isinstance(v, (tuple, list)):
        return {"tuple": [attr_to_json(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": {k: attr_to_json(x) for k, x in v.items()}}
    if isinstance(v, type) and issubclass(v, np.generic):
        return {"dtype": dtype_name(v)}
    if isinstance(v, np.dtype):
        return {"dtype": dtype_name(v)}
    if v is Ellipsis:
        return {"ellipsis": True}
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, complex):
        return {"complex": [v.real, v.imag]}
    if isinstance(v, float) and not np.isfinite(v):
        return {"float": repr(v)}
    return v
