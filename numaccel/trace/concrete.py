"""Slices of a re-traced segment's inputs, read and written on the concrete arrays.

A segmented function is traced again on every call, and each segment is cached under
its structure. A loop that walks an array in blocks (``x[:, s:s + block]``) puts a new
slice bound into every segment, so no segment is ever seen twice and none compiles.
Once a trace has broken (``TraceState.breaks``), every later segment runs once, on the
values the trace has, and two rewrites keep the bounds out of the segments:

* ``view_input``: a view (basic index, transpose, flip) of a segment *input* is taken of
  the input's concrete array and becomes an input itself; the segment sees only its
  shape and dtype.
* ``defer_writes`` / ``apply_writes``: a write ``a[idx] = v`` into an input ``a`` that the
  trace made and nobody else can see (as ``TraceState.donatable`` decides) leaves the
  segment: the segment computes ``v``, and ``v`` is written into ``a``'s array in place
  after it ran (into a copy where some other result of the segment shares memory with
  ``a``). Writes that other nodes of the segment read back stay in the segment.

Before the first break the trace may become a graph that is replayed with new arguments
(an entry without breaks; a captured loop body is a trace of its own): there the slices
stay ops, the inputs being other values on the next call.
"""
from __future__ import annotations

import numpy as np

from ..ops.prims import VIEW_REFS, scatter_into
from .indexing import static_index
from .tracer import aval_of

# view ops whose NumPy reference always returns a view (reshape may copy)
_VIEWS = frozenset({"getitem", "transpose", "flip"})


def _plain_view(name, attrs) -> bool:
    if name not in _VIEWS:
        return False
    if name == "getitem":
        return static_index(attrs["index"])
    axes = attrs.get("axes", attrs.get("axis"))
    return axes is None or type(axes) is int or \
        (type(axes) is tuple and all(type(a) is int for a in axes))


def view_input(st, nid: int, name: str, attrs: dict, scalar: bool):
    """The node id of a new input holding view ``name(attrs)`` of input node ``nid``'s
    concrete array, or None where that is not a plain view of an array."""
    node = st.graph.nodes[nid]
    if node.op != "input" or not _plain_view(name, attrs):
        return None
    value = st.input_values[node.attrs["index"]]
    if type(value) is not np.ndarray:
        return None
    try:
        view = VIEW_REFS[name](value, **attrs)
    except (IndexError, ValueError, TypeError):
        return None               # the traced op raises NumPy's error
    k = len(st.input_values)
    aval = aval_of(view)
    st.input_values.append(view)
    return st._add("input", [], {"index": k}, aval, scalar and not aval.shape).id


def defer_writes(st, g, outputs: list):
    """Take the writes into eligible inputs out of the pending graph ``g``: returns the
    new output list (each write's value in place of the written array) and the plan for
    ``apply_writes``, or ``(outputs, None)``."""
    nodes = g.nodes
    live = g.live(outputs)
    uses = [0] * len(nodes)
    for n in nodes:
        if n.id in live:
            for j in n.inputs:
                uses[j] += 1
    plan, out_set, targets = [], set(outputs), set()
    for o in outputs:
        # a chain of writes, each read only by the next, the last one by nobody (as
        # an output only), into an input nothing else returns. (A write read back in
        # the segment would still be computed there, as a copy: it stays in the graph)
        steps, cur = [], nodes[o]
        while cur.op == "scatter_view" and uses[cur.id] == (0 if cur.id == o else 1) \
                and all(_plain_view(name, attrs) for name, attrs in cur.attrs["chain"]):
            steps.append((cur.attrs["chain"], cur.inputs[1]))
            cur = nodes[cur.inputs[0]]
        if not steps or cur.op != "input" or cur.id in out_set or cur.id in targets or \
                any(cur.id == v for _, v in steps):
            continue
        # the trace's own array (TraceState.own_array; unlike donation, other inputs
        # sharing its memory die with the segment, and results that share it are
        # checked after the run)
        value = st.input_values[cur.attrs["index"]]
        if not st.own_array(value):
            continue
        targets.add(cur.id)
        steps.reverse()
        plan.append((o, value, steps))
    if not plan:
        return outputs, None
    written = {o for o, _, _ in plan}
    new = [o for o in outputs if o not in written]
    seen = set(new)
    for _, _, steps in plan:
        for _, v in steps:
            if v not in seen:
                seen.add(v)
                new.append(v)
    return new, (plan, frozenset(outputs) - written)


def apply_writes(st, plan, outputs, values) -> dict:
    """Run the deferred writes of ``plan`` (``defer_writes``) after the segment gave
    ``values`` for ``outputs``: returns node id -> value, the written arrays included."""
    plan, others = plan
    valmap = dict(zip(outputs, values))
    for o, target, steps in plan:
        # a result that shares memory with the target (a root bound to a view of it)
        # must keep its value: write into a copy then
        if any(isinstance(valmap[n], np.ndarray) and
               np.may_share_memory(valmap[n], target) for n in others):
            target = target.copy()
            st.made[id(target)] = target
        for chain, v in steps:
            scatter_into(target, valmap[v], chain)
        valmap[o] = target
    return valmap
