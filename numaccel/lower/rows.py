"""Row fusion: softmax, layernorm, logsumexp, normalize... as one kernel per row block.

A *row group* is a convex set of nodes over one domain FULL = (R..., C) whose reductions
reduce the last axis: elementwise nodes of shape FULL ("full" values, computed per
element), reductions over the last axis of a full value and elementwise nodes of shape
(R..., 1) or (R...) ("row" values, one per row). The kernel walks rows; for each row it
runs one pass over C per level of dependent reductions (max, then sum of exp(x - max),
...), computing full values inline, then one pass storing the full outputs. Everything a
row needs stays in cache, instead of one pass over memory per op.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..graph import Graph

ROW_VIEWS = {"reshape", "getitem"}


@dataclass
class RowGroup:
    full: tuple                  # the FULL shape (may hold Syms)
    roles: dict                  # node id -> "full" | "row"
    order: list                  # member ids, topological
    reds: list                   # reduction ids (members)
    level: dict                  # row member id -> pass that computes it (0: before any)
    full_outs: list              # full members stored (outputs / read outside)
    row_outs: list               # row members stored
    operands: list = field(default_factory=list)   # (node id, "full" | "row") read in
    anchor: int = -1             # the last member: where the group runs in the plan


def _sh(aval):
    return str(tuple(aval.shape))


def _is_trailing_none(n, row_nd):
    """getitem [:, ..., :, None] / [..., None]: (R...) -> (R..., 1)."""
    idx = n.attrs.get("index", ())
    if len(n.inputs) != 1 or not idx or idx[-1] is not None:
        return False
    head = idx[:-1]
    full = all(isinstance(it, slice) and it == slice(None) for it in head)
    return (full and len(head) in (0, row_nd)) or (len(head) == 1 and head[0] is Ellipsis)


def _row_red(g, kinds, n):
    if kinds[n.id] != "red":
        return None
    src = g.nodes[n.inputs[0]].aval
    nd = src.ndim
    axis = n.attrs.get("axis")
    if nd < 2 or axis is None or tuple(a % nd for a in axis) != (nd - 1,):
        return None
    return tuple(src.shape)


def row_groups(g: Graph, kinds: dict, kernels: dict) -> list:
    consumers = {n.id: [] for n in g.nodes}
    for n in g.nodes:
        for i in dict.fromkeys(n.inputs):
            consumers[i].append(n.id)
    outputs = set(g.outputs)
    taken, groups = set(), []
    for seed in g.nodes:
        full = _row_red(g, kinds, seed)
        if full is None or seed.id in taken:
            continue
        grp = _grow(g, kinds, kernels, consumers, outputs, seed, full, taken)
        if grp is not None:
            taken.update(grp.roles)
            groups.append(grp)
    return groups


def _grow(g, kinds, kernels, consumers, outputs, seed, full, taken):
    FULL = str(tuple(full))
    ROW, ROWK = str(tuple(full[:-1])), str(tuple(full[:-1]) + (1,))
    row_nd = len(full) - 1
    roles = {}
    for i in kernels[seed.id].nodes:            # the reduction's inline producers
        roles[i] = "full"
    roles[seed.id] = "row"
    tainted = set()

    def role_of(c):
        """The role ``c`` would have in the group, or None (it cannot join)."""
        k, sh = kinds[c.id], _sh(c.aval)
        ins = c.inputs
        if k == "red":
            if _row_red(g, kinds, c) is None or str(tuple(g.nodes[ins[0]].aval.shape)) != FULL:
                return None
            return "row" if roles.get(ins[0], "full") == "full" else None
        if k == "view":
            if c.op not in ROW_VIEWS or roles.get(ins[0]) != "row":
                return None
            src = _sh(g.nodes[ins[0]].aval)
            if c.op == "getitem" and not (src == ROW and sh == ROWK and
                                          _is_trailing_none(c, row_nd)):
                return None
            if c.op == "reshape" and {src, sh} != {ROW, ROWK}:
                return None
            return "row"
        if k != "ew":
            return None
        if sh == FULL:
            for i in ins:
                if roles.get(i) == "row" and _sh(g.nodes[i].aval) != ROWK:
                    return None   # (R...) against (R..., C) broadcasts along C: not per row
            return "full"
        if sh in (ROW, ROWK):
            for i in ins:
                if i in roles and (roles[i] != "row" or _sh(g.nodes[i].aval) != sh):
                    return None
                if i not in roles and g.nodes[i].aval.ndim > len(full) - (sh == ROW):
                    return None
            return "row"
        return None

    for c in g.nodes[seed.id + 1:]:
        if c.id in roles:
            continue
        if any(i in tainted for i in c.inputs):
            tainted.add(c.id)
            continue
        if not any(i in roles for i in c.inputs):
            continue
        r = role_of(c) if c.id not in taken else None
        if r is None:
            tainted.add(c.id)
        else:
            roles[c.id] = r
    # absorb full-shape producers that were materialized only for the group's passes
    changed = True
    while changed:
        changed = False
        for i in list(roles):
            for p in g.nodes[i].inputs:
                n = g.nodes[p]
                if (p in roles or p in taken or p in tainted or kinds[p] != "ew"
                        or p in outputs or _sh(n.aval) != FULL
                        or not all(c in roles for c in consumers[p])):
                    continue
                roles[p] = "full"
                changed = True
    return _finish(g, kinds, consumers, outputs, roles, full, ROWK)


def _finish(g, kinds, consumers, outputs, roles, full, ROWK):
    order = sorted(roles)
    reds = [i for i in order if kinds[i] == "red"]
    level = {}
    for i in order:
        if roles[i] != "row":
            continue
        lv = 0
        for j in _row_deps(g, roles, i):
            lv = max(lv, level[j])
        level[i] = lv + (1 if kinds[i] == "red" else 0)
    outs = [i for i in order if i in outputs or any(c not in roles for c in consumers[i])]
    operands = []
    for i in order:
        n = g.nodes[i]
        for p in n.inputs:
            if p in roles:
                continue
            ctx = "row" if roles[i] == "row" and kinds[i] != "red" and \
                _sh(n.aval) != ROWK else "full"
            if (p, ctx) not in operands:
                operands.append((p, ctx))
    return RowGroup(tuple(full), roles, order, reds, level,
                    [i for i in outs if roles[i] == "full"],
                    [i for i in outs if roles[i] == "row"], operands, anchor=order[-1])


def _row_deps(g, roles, i):
    """Row members that row member ``i`` depends on directly or through full members."""
    seen, stack, out = set(), list(g.nodes[i].inputs), []
    while stack:
        p = stack.pop()
        if p in seen or p not in roles:
            continue
        seen.add(p)
        if roles[p] == "row":
            out.append(p)
        else:
            stack.extend(g.nodes[p].inputs)
    return out


def boundary(g: Graph, kinds: dict, mat: set, kernels: dict, groups: list) -> set:
    """Elementwise nodes that need a buffer once these groups exist: a member computed
    inline by a kernel outside its group, and a group's operand that some other kernel
    computes inline (a row kernel reads buffers)."""
    member = {i: k for k, grp in enumerate(groups) for i in grp.roles}
    extra = set()
    for root, kern in kernels.items():
        for i in kern.nodes:
            if i != root and member.get(i, -1) != member.get(root, -1):
                extra.add(i)
    for grp in groups:
        for p, _ in grp.operands:
            if kinds[p] == "ew" and p not in mat:
                extra.add(p)
    return extra
