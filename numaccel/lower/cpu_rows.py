"""Row kernels (see ``rows.py``): source generation and the wrapper step.

Operands and outputs are flat buffers with unsigned element strides, as in
``cpu_codegen`` (every array operand is viewed at the group's FULL shape; row values are
read at their row's base offset). A kernel runs the rows ``[lo, hi)`` with scratch
tiles of its own (``cpu_threads.launch`` splits the rows between threads). Per row: for
each level of reductions one pass over the row in tiles of ``TILE`` (the tile's
values are computed by a vectorizable loop, then reduced by ``rowlib``), then one pass
storing the full outputs.
"""
from __future__ import annotations

import numpy as np

from .cpu_codegen import (_PRELUDE, KERNEL_DECORATOR, _acc_dtype, _load, _offset, _pattern,
                          _store, acc_cast, acc_comb, acc_init, acc_result, body_lines,
                          buffer_args, flat_or_copy, flat_view, load_kernels, red_ufunc)
from .cpu_threads import launch
from .render import literal, reg_dtype

# elements of a row reduced per tile (the scratch tile's length)
TILE = 1024


def tile_fn(uf: str, acc_dt) -> str:
    """The helper reducing a tile of ``acc_dt`` with ufunc ``uf``."""
    if np.dtype(acc_dt).kind == "b":
        return {"logical_or": "tile_any", "maximum": "tile_any",
                "logical_and": "tile_all", "minimum": "tile_all"}[uf]
    f = np.dtype(acc_dt).kind == "f"
    return {"add": "tile_sum", "multiply": "tile_prod", "maximum": "tile_max" if f else
            "tile_imax", "minimum": "tile_min" if f else "tile_imin"}[uf]


_ROWLIB = "from numaccel.lower.rowlib import (tile_sum, tile_prod, tile_max, tile_min, " \
          "tile_imax, tile_imin, tile_any, tile_all)\n"


# ops worth a row buffer rather than a recomputation in a later pass
_EXPENSIVE = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
              "tanh", "sinh", "cosh", "arctan", "arcsin", "arccos", "arctan2", "power",
              "erf", "logaddexp", "hypot", "cbrt"}


def _np(dt) -> str:
    return "bool_" if np.dtype(dt).kind == "b" else np.dtype(dt).name


def row_source(graph, grp, patterns):
    """Kernel source for row group ``grp``; ``patterns``: last-stride pattern per array
    operand then per full output ("1"/"0"/"s")."""
    g = graph
    rank = len(grp.full)
    k = rank - 1
    last = rank - 1
    arrays, scalars, exprs_row, exprs_full = [], [], {}, {}
    for p, ctx in grp.operands:
        n = g.nodes[p]
        key = (p, ctx)
        if n.op == "scalar":
            exprs_row[key] = exprs_full[key] = literal(n.attrs["value"], n.aval.dtype)
        elif n.aval.ndim == 0:
            exprs_row[key] = exprs_full[key] = f"s{len(scalars)}"
            scalars.append(p)
        else:
            j = len(arrays)
            nm = f"a{j}"
            exprs_row[key] = _load(nm, n.aval.dtype, f"[{nm}b{k - 1}]")
            exprs_full[key] = _load(nm, n.aval.dtype,
                                    f"[{_offset(nm, rank, patterns[j], last)}]")
            arrays.append(key)
    fouts = [f"o{j}" for j in range(len(grp.full_outs))]
    routs = [f"q{j}" for j in range(len(grp.row_outs))]
    params = []
    for j in range(len(arrays)):
        params += [f"a{j}"] + [f"a{j}s{d}" for d in range(rank)]
    params += [f"s{j}" for j in range(len(scalars))]
    for nm in fouts:
        params += [nm] + [f"{nm}s{d}" for d in range(rank)]
    for nm in routs:
        params += [nm] + [f"{nm}s{d}" for d in range(k)]
    params += [f"n{d}" for d in range(rank)] + ["lo", "hi"]
    bases = [f"a{j}" for j in range(len(arrays))] + fouts + routs

    roles = grp.roles
    # names are positional (not node ids), so identical groups (the steps of a time loop)
    # render to identical sources and share one compiled kernel
    P = {nid: pos for pos, nid in enumerate(grp.order)}
    row_names = {}          # row member -> register name
    rowk = str(tuple(grp.full[:-1]) + (1,))

    def names_row(i):
        """What row member ``i`` reads: operands at its row's base, row registers."""
        n = g.nodes[i]
        ctx = "row" if str(tuple(n.aval.shape)) != rowk else "full"
        out = {p: exprs_row[(p, ctx)] for p in n.inputs if (p, ctx) in exprs_row}
        out.update(row_names)
        return out

    def names_full():
        """What a pass over the row reads: operands at j, row registers."""
        out = {p: e for (p, ctx), e in exprs_full.items() if ctx == "full"}
        out.update(row_names)
        return out

    def needed(targets, avail=()):
        """Full members needed to compute ``targets`` (topological order), stopping at
        values already available (cached in a row buffer)."""
        seen, stack = set(), list(targets)
        while stack:
            i = stack.pop()
            if i in seen or roles.get(i) != "full" or i in avail:
                continue
            seen.add(i)
            stack.extend(g.nodes[i].inputs)
        return sorted(seen)

    src = [_PRELUDE + _ROWLIB]
    body = []
    ind = "        "
    # row-level nodes in passes, level by level
    nlev = max(grp.level.values()) if grp.level else 0
    tiles = {}
    for r in grp.reds:
        red = g.nodes[r]
        src_dt = np.dtype(reg_dtype(g.nodes[red.inputs[0]].aval.dtype))
        acc_dt = _acc_dtype(red, g.nodes[red.inputs[0]].aval.dtype)
        # a float32 tile is summed in float32 lanes (partials of <= TILE elements), the
        # partials in float64: as accurate as NumPy's pairwise sum, half the traffic
        tile_dt = src_dt if (acc_dt.name == "float64" and src_dt.name == "float32") \
            else acc_dt
        tiles[r] = (f"t{len(tiles)}", acc_dt, tile_dt)
    # expensive full values needed by several passes are kept in a row buffer by the
    # first pass instead of being recomputed (softmax: exp(x - max) for the sum and the
    # output)
    passes = [[g.nodes[r].inputs[0] for r in grp.reds if grp.level[r] == lv]
              for lv in range(1, nlev + 1)] + [list(grp.full_outs)]
    uses = {}
    for targets in passes:
        for i in needed(targets):
            uses[i] = uses.get(i, 0) + 1
    cache = [i for i, c in uses.items() if c > 1 and g.nodes[i].op in _EXPENSIVE]
    avail = {}

    def row_nodes(lv):
        for i in grp.order:
            if roles[i] == "row" and grp.level[i] == lv and i not in tiles:
                n = g.nodes[i]
                if n.op in ("reshape", "getitem"):       # (R...) <-> (R..., 1): the same
                    row_names[i] = row_names[n.inputs[0]]
                    continue
                lines, nm = body_lines(g, [i], names_row(i), ind, prefix=f"w{P[i]}_")
                body.extend(lines)
                row_names[i] = nm[i]

    cur = {}

    def pass_body(targets, inner, prefix):
        """Statements of one pass computing ``targets``; names land in ``cur``."""
        names = names_full()
        names.update(avail)
        lines, nm = body_lines(g, needed(targets, avail), names, inner, prefix=prefix)
        cur.clear()
        cur.update(nm)
        for i in cache:
            if i in nm and i not in avail:
                lines.append(f"{inner}h{P[i]}[j{last}] = {nm[i]}")
                avail[i] = f"h{P[i]}[j{last}]"
        return lines

    row_nodes(0)
    for lv in range(1, nlev + 1):
        reds = [r for r in grp.reds if grp.level[r] == lv]
        for r in reds:
            body.append(f"{ind}acc{P[r]} = {acc_init(red_ufunc(g.nodes[r]), tiles[r][1])}")
        body.append(f"{ind}for jt in range(0, n{last}, {TILE}):")
        body.append(f"{ind}    m = min({TILE}, n{last} - jt)")
        body.append(f"{ind}    for jj in range(m):")
        inner = ind + "        "
        body.append(f"{inner}j{last} = np.uint64(jt + jj)")
        srcs = [g.nodes[r].inputs[0] for r in reds]
        body.extend(pass_body(srcs, inner, f"p{lv}_"))
        for r, s in zip(reds, srcs):
            body.append(f"{inner}{tiles[r][0]}[jj] = {acc_cast(cur[s], tiles[r][2])}")
        for r in reds:
            uf = red_ufunc(g.nodes[r])
            t, acc_dt, tile_dt = tiles[r]
            body.append(f"{ind}    x{P[r]} = {acc_cast(f'{tile_fn(uf, tile_dt)}({t}, m)', acc_dt)}")
            body.append(f"{ind}    acc{P[r]} = {acc_comb(uf, f'acc{P[r]}', f'x{P[r]}')}")
        for r in reds:
            res = acc_result(g.nodes[r], f"acc{P[r]}", tiles[r][1], f"np.float64(n{last})")
            body.append(f"{ind}r{P[r]} = {res}")
            row_names[r] = f"r{P[r]}"
        row_nodes(lv)
    if grp.full_outs:
        body.append(f"{ind}for i{last} in range(n{last}):")
        inner = ind + "    "
        body.append(f"{inner}j{last} = np.uint64(i{last})")
        body.extend(pass_body(grp.full_outs, inner, "f_"))
        for j, o in enumerate(grp.full_outs):
            off = _offset(f"o{j}", rank, patterns[len(arrays) + j], last)
            body.append(f"{inner}o{j}[{off}] = {_store(cur[o], g.nodes[o].aval.dtype)}")
    for j, o in enumerate(grp.row_outs):
        body.append(f"{ind}q{j}[q{j}b{k - 1}] = {_store(row_names[o], g.nodes[o].aval.dtype)}")

    src.append(KERNEL_DECORATOR)
    src.append(f"def kernel({', '.join(params)}):")
    # the rows [lo, hi) (flat row index) with scratch tiles of their own: a launch runs
    # disjoint row ranges on several threads
    for r, (t, acc_dt, tile_dt) in tiles.items():
        src.append(f"    {t} = np.empty({TILE}, np.{_np(tile_dt)})")
    for i in cache:
        src.append(f"    h{P[i]} = np.empty(n{last}, np.{reg_dtype(g.nodes[i].aval.dtype)})")
    src.append("    for rr in range(lo, hi):")
    src.append("        rem = np.uint64(rr)")
    for d in range(k - 1, 0, -1):
        src.append(f"        j{d} = rem % np.uint64(n{d})")
        src.append(f"        rem = rem // np.uint64(n{d})")
    src.append("        j0 = rem")
    for nm in bases:
        terms = " + ".join(f"j{d} * {nm}s{d}" for d in range(k))
        src.append(f"        {nm}b{k - 1} = {terms}")
    src += body
    src.append("")
    return "\n".join(src), arrays, scalars


class RowStep:
    """Runs a row group: views operands at the FULL shape, allocates outputs, launches
    the kernel over the rows (in chunks on several threads when large)."""

    def __init__(self, graph, grp):
        self.g, self.grp = graph, grp
        self.mods = {}
        from . import cpu
        self._cpu = cpu     # the buffer helpers (cpu imports this module)
        self.operands = list(dict.fromkeys(p for p, _ in grp.operands))
        # reductions without an identity: an empty row raises, as in NumPy
        self.no_identity = [u for u in map(red_ufunc, (graph.nodes[r] for r in grp.reds))
                            if u in ("maximum", "minimum")]

    def _mod(self, patterns):
        m = self.mods.get(patterns)
        if m is None:
            src, arrays, scalars = row_source(self.g, self.grp, patterns)
            m = self.mods[patterns] = (load_kernels(src), arrays, scalars)
        return m

    def __call__(self, vals, env):
        c = self._cpu
        _bits, pooled, _resolve, _scalar_arg = c._bits, c.pooled, c._resolve, c._scalar_arg
        g, grp = self.g, self.grp
        full = tuple(_resolve(tuple(grp.full), env))
        row = full[:-1]
        if full[-1] == 0 and self.no_identity and int(np.prod(row)):
            raise ValueError(f"zero-size array to reduction operation {self.no_identity[0]} "
                             "which has no identity")
        views = []
        for p, ctx in grp.operands:
            n = g.nodes[p]
            if n.op == "scalar" or n.aval.ndim == 0:
                continue
            a = vals[p]
            if ctx == "full" and a.ndim and a.shape[-1] > 1 and a.strides[-1] != a.itemsize:
                # a row kernel reads each row several times: along a strided last axis
                # (e.g. einsum's transposed output) that is a cache line per element,
                # so one contiguous copy first is far cheaper
                a = np.ascontiguousarray(a)
            if ctx == "row":
                a = np.broadcast_to(a, row)[..., None]
            views.append(flat_or_copy(_bits(np.broadcast_to(a, full))))
        fouts = [pooled(full, g.nodes[o].aval.dtype) for o in grp.full_outs]
        routs = [pooled(tuple(_resolve(tuple(g.nodes[o].aval.shape), env)),
                        g.nodes[o].aval.dtype) for o in grp.row_outs]
        ops = views + [flat_view(_bits(o)) for o in fouts]
        patterns = tuple(_pattern(st) for _, st in ops)
        mod, arrays, scalars = self._mod(patterns)
        args = buffer_args(ops[:len(views)])
        args += [_scalar_arg(vals[s], g.nodes[s].aval.dtype) for s in scalars]
        args += buffer_args(ops[len(views):])
        for o in routs:
            r = _bits(o).reshape(row)
            args += buffer_args([(r.reshape(-1), [x // r.itemsize for x in r.strides])])
        nrows = int(np.prod(row))
        if nrows:
            launch(mod.kernel, args + list(full), nrows, nrows * full[-1])
        for o, v in zip(grp.full_outs, fouts):
            vals[o] = v
        for o, v in zip(grp.row_outs, routs):
            vals[o] = v
