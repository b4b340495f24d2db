"""A matvec pair in one pass over the matrix: ``z = X @ v``, an elementwise
``e = f(z, ...)`` and ``g = X.T @ e``.

That is the gradient of every generalised linear model (logistic, linear, Poisson
regression: ``X.T @ (sigmoid(X @ w) - y)``). NumPy runs it as two BLAS matvecs, each
streaming all of ``X`` from memory, with ``e`` in between; here one kernel takes each
row of ``X`` once, while it is in cache, for its dot product with ``v``, the elementwise
``e`` and its share of ``g``, so ``X`` is read once instead of twice (logreg_gd at M:
two matvecs 0.93 ms, the fused pass 0.41 ms per iteration on a 2-core Xeon).

The plan (``pair_matvecs``) finds the pattern among the cpu steps: a NumPy step
``matmul(X, v)`` (2-D X, 1-D v), a map kernel reading it, with 1-D operands of X's row
count and 0-d ones, and a NumPy step ``matmul(transpose(X), e)``; all of X, v and e of
one dtype, float32 or float64. The pair runs where the map kernel ran; nothing between
the three may write into a buffer they read.

Only where ``X`` does not fit in half the last-level cache: there the second BLAS
matvec reads ``X`` from DRAM again, which the pair saves. A cached ``X`` is read twice
from cache, and the two BLAS calls win (logreg_gd at M, X 16 MB, a 32 MB L3 on an AMD
EPYC: pair 0.90x NumPy, two matvecs 1.18x; on the Xeon above, a smaller L3, the pair won).

Sums: the row dot products are reassociated (fastmath ``reassoc``, ``contract`` only in
the dot helper, so it vectorizes: the elementwise code keeps NumPy's NaN/inf semantics
and exact operation order), and ``g`` is summed per fixed chunk of rows, then over the
chunks. Chunks depend on the shape only, so results do not depend on the thread count.
BLAS reorders its sums too; both stay within a few ulp times the row length.
"""
from __future__ import annotations

import numpy as np

from ..config import config
from ..trace.symbolic import hint
from .cpu_codegen import (KERNEL_DECORATOR, _PRELUDE, _load, _operand_exprs, _store,
                          body_lines, flat_or_copy, load_kernels)
from .cpu_threads import launch

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# most chunks of rows the transposed product is summed in (each a partial of g): a
# multiple of common thread counts, and few enough that summing them costs nothing
_CHUNKS = 16
# rows per block inside a chunk: 64 rows of a few hundred columns stay in L1/L2
_ROWS = 64


def pair_source(graph, ks, m1, z_dtype, g_dtype):
    """Kernel source for the map kernels ``ks`` (in order; the first reads the matvec
    ``m1``) fused between the two matvecs: ``kernel(x, xs0, v, <arrays: a, as0>,
    <scalars>, z, <outs>, part, n, d, nchunks, lo, hi)`` over chunks ``[lo, hi)`` of
    rows; the last kernel's value is ``e``."""
    roots = [k.root for k in ks]
    nodes, operands = [], []
    for k in ks:
        nodes += [i for i in k.nodes if i not in nodes]
        operands += [i for i in k.operands if i not in operands and i not in roots]
    from .passes import Kernel
    exprs, arrays, scalars = _operand_exprs(graph, Kernel("map", roots[-1], nodes,
                                                          operands), "")
    exprs[m1] = "zi"
    names = []
    for j, nid in enumerate(arrays):
        if nid != m1:
            exprs[nid] = _load(f"a{j}", graph.nodes[nid].aval.dtype, f"[j * a{j}s0]")
            names += [f"a{j}", f"a{j}s0"]
    t, tg = f"np.{z_dtype.name}", f"np.{g_dtype.name}"
    outs = [f"o{j}" for j in range(len(roots))]
    params = ["x", "xs0", "v"] + names + [f"s{j}" for j in range(len(scalars))] + \
        ["z"] + outs + ["part", "n", "d", "nchunks", "lo", "hi"]
    body, out = body_lines(graph, nodes, exprs, " " * 16)
    src = [_PRELUDE,
           # the dot product alone may reassociate (vectorized sums, as BLAS's)
           "@numba.njit(nogil=True, cache=True, fastmath={'reassoc', 'contract'})",
           "def rowdot(x, b, v, d):",
           f"    s = {t}(0)",
           "    for j in range(d):",
           "        s += x[b + j] * v[j]",
           "    return s",
           "",
           KERNEL_DECORATOR,
           f"def kernel({', '.join(params)}):",
           "    du = np.uint64(d)",
           "    for c in range(lo, hi):",
           "        r0 = n * c // nchunks",
           "        r1 = n * (c + 1) // nchunks",
           "        pb = np.uint64(c) * du",
           "        for q in range(du):",
           f"            part[pb + q] = {tg}(0)",
           # blocks of rows: their dot products, then the elementwise code over the
           # block (a loop of its own, so it vectorizes), then their share of g, the
           # block's rows still in cache
           f"        for r in range(r0, r1, {_ROWS}):",
           f"            re = min(r1, r + {_ROWS})",
           # (indices unsigned: no negative-index wraparound, so the loops vectorize)
           "            for i in range(r, re):",
           "                j = np.uint64(i)",
           "                z[j] = rowdot(x, j * xs0, v, du)",
           "            for i in range(r, re):",
           "                j = np.uint64(i)",
           "                zi = z[j]"]
    src += body
    src += [f"                {o}[j] = {_store(out[r], graph.nodes[r].aval.dtype)}"
            for o, r in zip(outs, roots)]
    src += ["            for i in range(r, re):",
            "                j = np.uint64(i)",
            "                b = j * xs0",
            f"                ei = {outs[-1]}[j]",
            "                for q in range(du):",
            "                    part[pb + q] += x[b + q] * ei",
            ""]
    return "\n".join(src), arrays, scalars


class MatvecPairStep:
    """``z = X @ v; e = ks(z, ...); g = X.T @ e`` as one kernel (see the module doc);
    the steps it replaces where a call's X has rows that are not contiguous."""

    def __init__(self, graph, mv, ksteps, x, v, m2):
        self.graph, self.ks = graph, [st.k for st in ksteps]
        self.x, self.v, self.m1, self.m2 = x, v, mv.n.id, m2
        self.roots = [k.root for k in self.ks]
        self.e = self.roots[-1]
        self.mv, self.ksteps = mv, ksteps
        self.z_dtype, self.g_dtype = graph.nodes[self.m1].aval.dtype, graph.nodes[m2].aval.dtype
        src, self.arrays, self.scalars = pair_source(graph, self.ks, self.m1, self.z_dtype,
                                                     self.g_dtype)
        self.mod = load_kernels(src)
        self.src = src

    @property
    def reads(self):
        """What the step reads (its own outputs too: freed right after it when nothing
        else reads them)."""
        return [self.x, self.v, self.m1] + self.roots + [
            i for i in self.arrays + self.scalars if i != self.m1]

    def __call__(self, vals, env):
        X, v = vals[self.x], vals[self.v]
        n, d = X.shape
        isz = X.itemsize
        arrs = [vals[i] for i in self.arrays if i != self.m1]
        if not (n and d and X.strides[1] == isz and X.strides[0] >= 0 and
                X.strides[0] % isz == 0 and all(a.shape in ((n,), (1,)) for a in arrs)):
            return self._steps(vals, env)
        buf = X.reshape(-1) if X.flags.c_contiguous else np.lib.stride_tricks.as_strided(
            X, ((n - 1) * (X.strides[0] // isz) + d,), (isz,))
        args = [buf, np.uint64(X.strides[0] // isz), np.ascontiguousarray(v)]
        for a in arrs:
            b, st = flat_or_copy(np.broadcast_to(a, (n,)))
            args += [b, np.uint64(st[0])]
        args += [vals[i][()] if isinstance(vals[i], np.ndarray) else vals[i]
                 for i in self.scalars]
        z = np.empty(n, self.z_dtype)
        outs = [np.empty(n, self.graph.nodes[r].aval.dtype) for r in self.roots]
        total = n * d
        chunks = 1 if total < config.parallel_min else min(n, _CHUNKS)
        part = np.empty(chunks * d, self.g_dtype)
        launch(self.mod.kernel, args + [z, *outs, part, n, d, chunks], chunks, total)
        vals[self.m1] = z
        for r, o in zip(self.roots, outs):
            vals[r] = o
        vals[self.m2] = part.reshape(chunks, d).sum(axis=0) if chunks > 1 else part

    def _steps(self, vals, env):
        self.mv(vals, env)
        for st in self.ksteps:
            st(vals, env)
        vals[self.m2] = np.matmul(vals[self.x].T, vals[self.e])

    def describe(self):
        ops = " ".join(self.graph.nodes[i].op for k in self.ks for i in k.nodes)
        return f"kernel[matvec pair] %{self.m2}: X @ v, {ops}, X.T @ e (one pass over X)"


_LLC = []


def pair_min_bytes() -> int:
    """The size of ``X`` from which a pair is fused: half the last-level cache, as
    Linux reports it (0, always fused, where it does not)."""
    if not _LLC:
        size = 0
        for index in ("index3", "index2"):
            try:
                with open(f"/sys/devices/system/cpu/cpu0/cache/{index}/size") as fh:
                    txt = fh.read().strip().upper()
                mult = {"K": 1 << 10, "M": 1 << 20}.get(txt[-1:], 1)
                size = int(txt.rstrip("KM")) * mult
                break
            except (OSError, ValueError):
                continue
        _LLC.append(size // 2)
    return _LLC[0]


def pair_matvecs(g, steps, outs, consumers, base, numpy_step, map_step):
    """``steps`` with each matvec pair (module doc) as one ``MatvecPairStep``.

    ``numpy_step``/``map_step``: the step classes (cpu.py) to recognise."""
    pos = {}
    for j, st in enumerate(steps):
        if isinstance(st, numpy_step):
            pos[st.n.id] = j
        elif isinstance(st, map_step):
            pos[st.out] = j
    drop, replace = set(), {}
    for j2, st in enumerate(steps):
        if not (isinstance(st, numpy_step) and st.n.op == "matmul"):
            continue
        t, e = st.n.inputs
        tn, en = g.nodes[t], g.nodes[e]
        if tn.op != "transpose" or tn.aval.ndim != 2 or en.aval.ndim != 1:
            continue
        x = tn.inputs[0]
        xa = g.nodes[x].aval
        if int(np.prod([hint(d) for d in xa.shape])) * xa.dtype.itemsize <= pair_min_bytes():
            continue        # X stays in cache between two BLAS matvecs (module doc)
        found = _chain(g, e, x, pos, steps, numpy_step, map_step)
        if found is None:
            continue
        m1, kjs = found
        j1, kj = pos[m1], kjs[-1]
        v = g.nodes[m1].inputs[1]
        if kj > j2 or set(kjs) & (drop | set(replace)) or \
                not _fusible(g, [steps[j].k for j in kjs], x, v, e, st.n.id, m1):
            continue
        touched = {base[x], base[v], m1} | {steps[j].out for j in kjs}
        if any(_writes(steps[j], base) & touched for j in range(j1, j2 + 1)):
            continue
        # the values move to the last kernel's place: nothing may read them before
        moved = [(j1, m1)] + [(j, steps[j].out) for j in kjs[:-1]]
        if any(r in _step_reads(steps[j]) for p, r in moved for j in range(p + 1, kj)
               if j not in kjs):
            continue
        replace[kj] = MatvecPairStep(g, steps[j1], [steps[j] for j in kjs], x, v, st.n.id)
        drop.update([j1, j2] + kjs[:-1])
        tj = pos.get(t)
        if tj is not None and consumers.get(t) == [st.n.id] and t not in outs:
            drop.add(tj)
    return [replace.get(j, s) for j, s in enumerate(steps) if j not in drop]


def _chain(g, e, x, pos, steps, numpy_step, map_step):
    """(the matvec ``matmul(x, v)`` that ``e`` is computed from through 1-D map kernels
    only, the positions of those kernels in order), or None."""
    def map_of(i):
        st = steps[pos[i]] if i in pos else None
        ok = isinstance(st, map_step) and st.dest is None and st.outs == [i] and \
            g.nodes[i].aval.ndim == 1
        return st if ok else None

    def matvec(i):
        n = g.nodes[i]
        return (n.op == "matmul" and n.inputs[0] == x and i in pos and
                isinstance(steps[pos[i]], numpy_step) and
                g.nodes[n.inputs[1]].aval.ndim == 1)

    m1, deps, memo = None, {}, {}

    def reaches(i):
        """Whether kernel output ``i`` is computed from the matvec (collects deps)."""
        nonlocal m1
        if i in memo:
            return memo[i]
        memo[i] = False
        st = map_of(i)
        if st is None:
            return False
        hit = False
        for o in st.k.operands:
            if matvec(o) and m1 in (None, o):
                m1, hit = o, True
            elif reaches(o):
                hit = True
        memo[i] = hit
        if hit:
            deps[i] = pos[i]
        return hit

    if not reaches(e):
        return None
    return m1, sorted(deps.values())


def _fusible(g, ks, x, v, e, m2, m1):
    """Dtypes and shapes the kernel handles: X, v, e float32/64 (z and g of NumPy's
    result dtypes); every other array operand 1-D of X's row count (or 1), of a
    bool/int/float32/64 dtype."""
    dt = {i: g.nodes[i].aval.dtype for i in (x, v, e, m2, m1)}
    if any(dt[i] not in _FLOATS for i in (x, v, e)) or g.nodes[x].aval.ndim != 2 or \
            dt[m1] != np.result_type(dt[x], dt[v]) or dt[m2] != np.result_type(dt[x], dt[e]):
        return False
    rows = str(g.nodes[x].aval.shape[0])
    for k in ks:
        for i in k.operands + [k.root]:
            av = g.nodes[i].aval
            if i != m1 and av.ndim and (av.ndim != 1 or str(av.shape[0]) not in (rows, "1")):
                return False
            if av.dtype.kind not in "biuf" or av.dtype.itemsize == 2 and av.dtype.kind == "f":
                return False
    return True


def _step_reads(st):
    from .cpu import CompiledGraph
    return set(CompiledGraph._reads(st))


def _writes(st, base):
    """Buffers a step writes in place (a scatter's destination, a kernel's dest)."""
    from .cpu import InplaceScatterStep
    if isinstance(st, InplaceScatterStep):
        return {base[st.n.inputs[0]]}
    dest = getattr(st, "dest", None)
    return {base[dest[0]]} if dest else set()
