"""Numba kernels for 2:4 semi-structured sparse weights (layout: docs/sparse24_layout.md).

Values travel as float32 arrays, or as their 16-bit patterns (Numba has no float16 or
bfloat16 arrays): bfloat16 as ``uint16`` and float16 as ``int16``, so that the element
type alone selects the widening (``widen``) at compile time.

- ``decompress``: compressed -> dense (the weight's dtype, or float32 for BLAS).
- ``linear(x, values, meta, shape, kernel)``: y = x @ W.T with one of
  ``"permute"`` (few rows of x, decoding: the 16 kept values of two metadata words FMA with
  the x columns they sit at, picked by one vpermi2ps from two 16-column windows of x; the
  weight streams once, no gathers, AVX-512) or
  ``"tiled"`` (many rows: x transposed, every kept value broadcast against a contiguous
  run of the batch, accumulators in registers; the zeros cost nothing).
  Both are parallel over blocks of output rows.

Example::

    import numpy as np
    from numaccel.kernels_cpu import sparse24
    from numaccel.sparse import to_sparse_semi_structured, prune_2_4

    s = to_sparse_semi_structured(prune_2_4(np.ones((4, 16), np.float32)))
    y = sparse24.linear(np.ones((2, 16), np.float32), s.values, s.meta, s.shape)
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .bf16 import bf16_to_f32, bfloat16


@intrinsic
def _f16_bits_to_f32(typingctx, x):
    """int16 holding IEEE half bits -> float32 (exact; vectorizes to vcvtph2ps)."""
    if x != types.int16:
        return None

    def codegen(context, builder, sig, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.int16), codegen


def widen(v):  # pragma: no cover - replaced inside Numba by the overload below
    """float32 / bf16 bits (uint16) / f16 bits (int16) -> float32."""
    raise NotImplementedError


@overload(widen, inline="always")
def _widen_impl(v):
    if v == types.float32:
        return lambda v: v
    if v == types.uint16:
        return lambda v: bf16_to_f32(v)
    if v == types.int16:
        return lambda v: _f16_bits_to_f32(v)
    return None


def kernel_view(values: np.ndarray) -> np.ndarray:
    """The array the kernels take for ``values``: float32 as is, 16-bit types as bits."""
    if values.dtype == np.float32:
        return values
    if values.dtype == bfloat16:
        return values.view(np.uint16)
    if values.dtype == np.float16:
        return values.view(np.int16)
    raise TypeError(f"2:4 kernels support float32, float16 and bfloat16 values, "
                    f"got {values.dtype}")


# --------------------------------------------------------------------------------------
# decompression


@numba.njit(parallel=True, cache=True)
def _scatter(values, meta, out):
    # out is zero-filled (by NumPy, which gets huge pages); write the kept values only
    m, k = out.shape
    nv = values.shape[1]
    for r in prange(m):
        for j in range(nv):
            c = 4 * (j >> 1) + ((meta[r, j >> 3] >> (2 * (j & 7))) & 3)
            if c < k:
                out[r, c] = values[r, j]


@numba.njit(parallel=True, cache=True)
def _scatter_widen(values, meta, out):
    m, k = out.shape
    nv = values.shape[1]
    for r in prange(m):
        for j in range(nv):
            c = 4 * (j >> 1) + ((meta[r, j >> 3] >> (2 * (j & 7))) & 3)
            if c < k:
                out[r, c] = widen(values[r, j])


def decompress(values: np.ndarray, meta: np.ndarray, shape: tuple,
               out_dtype=None) -> np.ndarray:
    """Dense ``shape`` array from compressed ``values``/``meta`` (weight dtype by default).

    Example::

        d = decompress(s.values, s.meta, s.shape)                      # exact
        d32 = decompress(s.values, s.meta, s.shape, out_dtype=np.float32)
    """
    dt = values.dtype if out_dtype is None else np.dtype(out_dtype)
    out = np.zeros(shape, dt)
    if out.size == 0:
        return out
    kv = kernel_view(values)
    if dt == values.dtype:
        _scatter(kv, meta, out.view(kv.dtype))
    elif dt == np.float32:
        _scatter_widen(kv, meta, out)
    else:
        raise TypeError(f"decompress to {dt} from {values.dtype} is not supported; "
                        "use the weight dtype or float32")
    return out


# --------------------------------------------------------------------------------------
# few rows of x: per pair of metadata words, the 16 kept values multiply the 16 x columns
# they sit at, picked out of two 16-column windows of x by one two-source permute
# (vpermi2ps, indices computed from the 32 metadata bits with vector shifts). The weight
# streams once and contiguously; the zeros are never multiplied. This replaced an
# earlier vexpandps version (values expanded to dense lanes): the permute costs one shuffle-port
# uop per 16 values instead of four per 8, 1.6x faster with the data in cache.
# Numba has no vector types, so the row loop is written in LLVM IR.

_I1, _I16, _I32, _I64 = ir.IntType(1), ir.IntType(16), ir.IntType(32), ir.IntType(64)
_F32 = ir.FloatType()
_FAST = ("contract", "reassoc")
# lane j of a word pair holds kept value j: group j // 2, column 4 (j // 2) + its position
_SHIFTS = list(range(0, 32, 2))
_GROUP_COL = [4 * (j // 2) for j in range(16)]


def _vec(t, n):
    return ir.VectorType(t, n)


def _declare(mod, name, ret, args):
    if name in mod.globals:
        return mod.globals[name]
    return ir.Function(mod, ir.FunctionType(ret, args), name)


def _make_rowdot(nx: int, unroll: int, nr: int = 1):
    """Intrinsic ``rowdot(vals, meta, x, out, r, n0, w0, w1)``: for i < nx, q < nr,
    ``out[n0 + i, r + q] += sum_j vals[r + q, j] * x[n0 + i, col(r + q, j)]`` over the kept
    values of metadata words ``w0 <= w < w1`` (``w0`` even; x padded to Kp columns).
    ``unroll`` word pairs per loop trip keep nr * nx * unroll independent accumulators,
    enough to hide the FMA latency. ``nr`` weight rows at once share each x window load
    and keep nr weight streams in flight (more memory parallelism for one x row)."""

    @intrinsic
    def rowdot(typingctx, vals, meta, x, out, r, n0, w0, w1):
        kind = vals.dtype
        sig = types.void(vals, meta, x, out, r, n0, w0, w1)

        def codegen(context, builder, sig, args):
            va, ma, xa, oa = [context.make_array(t)(context, builder, a)
                              for t, a in zip(sig.args[:4], args[:4])]
            rr, nn0, ww0, ww1 = args[4:8]
            vcols = cgutils.unpack_tuple(builder, va.shape, 2)[1]
            nwords = cgutils.unpack_tuple(builder, ma.shape, 2)[1]
            xcols = cgutils.unpack_tuple(builder, xa.shape, 2)[1]
            ocols = cgutils.unpack_tuple(builder, oa.shape, 2)[1]
            c64 = lambda v: ir.Constant(_I64, v)
            v16f, v16i = _vec(_F32, 16), _vec(_I32, 16)
            vrows = [builder.gep(va.data, [builder.mul(builder.add(rr, c64(q)), vcols)])
                     for q in range(nr)]
            mrows = [builder.gep(ma.data, [builder.mul(builder.add(rr, c64(q)), nwords)])
                     for q in range(nr)]
            xrows = [builder.gep(xa.data, [builder.mul(builder.add(nn0, c64(i)), xcols)])
                     for i in range(nx)]
            mod = builder.module
            perm2 = _declare(mod, "llvm.x86.avx512.vpermi2var.ps.512", v16f,
                             [v16f, v16i, v16f])
            i8p = ir.PointerType(ir.IntType(8))
            pf = _declare(mod, "llvm.prefetch.p0", ir.VoidType(), [i8p, _I32, _I32, _I32])
            zero = ir.Constant(v16f, [0.0] * 16)

            def load_vals(p, n):
                # n (16, or 8 for a last odd word) kept values at p -> 16 float32 lanes
                if kind == types.float32:
                    v = builder.load(builder.bitcast(p, ir.PointerType(_vec(_F32, n))),
                                     align=4)
                else:
                    b = builder.load(builder.bitcast(p, ir.PointerType(_vec(_I16, n))),
                                     align=2)
                    if kind == types.uint16:   # bf16: the high half of a float32
                        v = builder.bitcast(builder.shl(builder.zext(b, _vec(_I32, n)),
                                                        ir.Constant(_vec(_I32, n), [16] * n)),
                                            _vec(_F32, n))
                    else:                      # f16
                        v = builder.fpext(builder.bitcast(b, _vec(ir.HalfType(), n)),
                                          _vec(_F32, n))
                if n == 16:
                    return v
                return builder.shuffle_vector(v, ir.Constant(_vec(_F32, 8), [0.0] * 8),
                                              ir.Constant(v16i, list(range(16))))

            def pair(i, accs, tail=False):
                # words i, i + 1 (tail: word i alone, the row's last); accs[q * nx + k]
                xw = []
                for k in range(nx):
                    xp = builder.gep(xrows[k], [builder.mul(i, c64(16))])
                    xlo = builder.load(builder.bitcast(xp, ir.PointerType(v16f)), align=4)
                    # a last odd word has no second window (it may lie past the row)
                    xhi = xlo if tail else builder.load(
                        builder.bitcast(builder.gep(xp, [c64(16)]), ir.PointerType(v16f)),
                        align=4)
                    xw.append((xlo, xhi))
                new = []
                for q in range(nr):
                    mp = builder.gep(mrows[q], [i])
                    if tail:
                        m32 = builder.zext(builder.load(mp), _I32)
                    else:
                        m32 = builder.load(builder.bitcast(mp, ir.PointerType(_I32)), align=2)
                    spl = builder.insert_element(ir.Constant(v16i, None), m32,
                                                 ir.Constant(_I32, 0))
                    spl = builder.shuffle_vector(spl, spl, ir.Constant(v16i, [0] * 16))
                    pos = builder.and_(builder.lshr(spl, ir.Constant(v16i, _SHIFTS)),
                                       ir.Constant(v16i, [3] * 16))
                    idx = builder.add(pos, ir.Constant(v16i, _GROUP_COL))
                    vp = builder.gep(vrows[q], [builder.mul(i, c64(8))])
                    # the next rows' values at the same K offset: with K blocked, rows are
                    # short segments the hardware prefetcher would start late on
                    builder.call(pf, [builder.bitcast(builder.gep(vp, [builder.mul(
                                          vcols, c64(nr))]), i8p),
                                      ir.Constant(_I32, 0), ir.Constant(_I32, 3),
                                      ir.Constant(_I32, 1)])
                    v = load_vals(vp, 8 if tail else 16)
                    for k in range(nx):
                        prod = builder.fmul(v, builder.call(perm2, [xw[k][0], idx, xw[k][1]]),
                                            flags=_FAST)
                        if tail:   # lanes 8..15 hold no value: 0 * inf must not reach the sum
                            prod = builder.select(
                                ir.Constant(_vec(_I1, 16), [1] * 8 + [0] * 8), prod, zero)
                        new.append(builder.fadd(accs[q * nx + k], prod, flags=_FAST))
                return new

            def loop(start, stop, step, init, body):
                # for (i = start; i + step <= stop; i += step) accs = body(i, accs)
                pre = builder.block
                head = builder.append_basic_block("rd_head")
                blk = builder.append_basic_block("rd_body")
                end = builder.append_basic_block("rd_end")
                builder.branch(head)
                builder.position_at_end(head)
                i = builder.phi(_I64)
                i.add_incoming(start, pre)
                phis = [builder.phi(v16f) for _ in init]
                for p, v in zip(phis, init):
                    p.add_incoming(v, pre)
                builder.cbranch(builder.icmp_signed("<=", builder.add(i, c64(step)), stop),
                                blk, end)
                builder.position_at_end(blk)
                new = body(i, phis)
                i.add_incoming(builder.add(i, c64(step)), builder.block)
                for p, v in zip(phis, new):
                    p.add_incoming(v, builder.block)
                builder.branch(head)
                builder.position_at_end(end)
                return i, phis

            na = nr * nx                 # accumulators per unrolled copy

            def unrolled(i, accs):
                accs = list(accs)
                for u in range(unroll):
                    accs[u * na:(u + 1) * na] = pair(builder.add(i, c64(2 * u)),
                                                     accs[u * na:(u + 1) * na])
                return accs

            i, accs = loop(ww0, ww1, 2 * unroll, [zero] * (na * unroll), unrolled)
            comb = []
            for k in range(na):
                a = accs[k]
                for u in range(1, unroll):
                    a = builder.fadd(a, accs[u * na + k], flags=_FAST)
                comb.append(a)
            i, accs = loop(i, ww1, 2, comb, pair)
            pre = builder.block
            with builder.if_then(builder.icmp_signed("<", i, ww1)):
                tail = pair(i, accs, tail=True)
                tblk = builder.block
            fin = [builder.phi(v16f) for _ in range(na)]
            for v, a, t in zip(fin, accs, tail):
                v.add_incoming(a, pre)
                v.add_incoming(t, tblk)
            for qk, v in enumerate(fin):
                q, k = divmod(qk, nx)
                n = 16
                while n > 1:   # tree reduction of the 16 lanes
                    n //= 2
                    a = builder.shuffle_vector(v, v, ir.Constant(_vec(_I32, n), list(range(n))))
                    b = builder.shuffle_vector(
                        v, v, ir.Constant(_vec(_I32, n), list(range(n, 2 * n))))
                    v = builder.fadd(a, b)
                s = builder.extract_element(v, ir.Constant(_I32, 0))
                op = builder.gep(oa.data, [builder.add(builder.mul(builder.add(nn0, c64(k)),
                                                                   ocols),
                                                       builder.add(rr, c64(q)))])
                builder.store(builder.fadd(builder.load(op), s), op)
            return context.get_dummy_value()

        return sig, codegen

    return rowdot


# one weight row at a time (the last rows of a block), and 4 rows at a time (8 accumulators
# for one or two x rows, 16 for four). More x rows go in chunks of four: eight would keep
# 16 x windows and 32 accumulators live, more than the 32 zmm registers (measured, 4096 x
# 11008, batch 8: 26 ms with one weight row of 8 x rows, 17 ms with two 4 x 4 chunks).
_rowdot1 = _make_rowdot(1, 4)
_rowdot2 = _make_rowdot(2, 2)
_rowdot4 = _make_rowdot(4, 1)
_rowdot1r4 = _make_rowdot(1, 2, 4)
_rowdot2r4 = _make_rowdot(2, 1, 4)
_rowdot4r4 = _make_rowdot(4, 1, 4)
ROW_GROUP = 4

# Bytes of x per K block (nx rows x block columns float32): within L2, so that x is read
# from cache while every weight row streams from memory once, in segments long enough for
# the hardware prefetcher (measured, 4096x11008 batch 1: K blocks of 16 KiB of x cost 20%
# against whole rows).
_X_BLOCK_BYTES = 256 * 1024


def _permute_wb(n: int, nw: int, x_bytes: int = _X_BLOCK_BYTES) -> int:
    """Metadata words per K block of the permute kernel (even: words go in pairs; one
    word covers 16 columns, 64 bytes of each of the n x rows)."""
    return max(2, x_bytes // (max(n, 1) * 128) * 2)


@numba.njit(parallel=True, cache=True)
def _linear_permute(vals, meta, x, out, row_block, wb):
    # out (N, M) float32, zero-filled; x (N, Kp) float32. Parallel over blocks of output
    # rows (row_block a multiple of ROW_GROUP); inside, K blocks, and ROW_GROUP weight rows
    # at once: they share each x load and keep several weight streams in flight, which a
    # single x row (memory-bound decoding) needs to approach the memory bandwidth.
    m = vals.shape[0]
    n = x.shape[0]
    nw = meta.shape[1]
    nrb = (m + row_block - 1) // row_block
    for rb in prange(nrb):
        r0 = rb * row_block
        r1 = min(m, r0 + row_block)
        for w0 in range(0, nw, wb):
            w1 = min(nw, w0 + wb)
            r = r0
            while r + ROW_GROUP <= r1:
                n0 = 0
                while n0 + 4 <= n:
                    _rowdot4r4(vals, meta, x, out, r, n0, w0, w1)
                    n0 += 4
                if n0 + 2 <= n:
                    _rowdot2r4(vals, meta, x, out, r, n0, w0, w1)
                    n0 += 2
                if n0 < n:
                    _rowdot1r4(vals, meta, x, out, r, n0, w0, w1)
                r += ROW_GROUP
            for r in range(r, r1):
                n0 = 0
                while n0 + 4 <= n:
                    _rowdot4(vals, meta, x, out, r, n0, w0, w1)
                    n0 += 4
                if n0 + 2 <= n:
                    _rowdot2(vals, meta, x, out, r, n0, w0, w1)
                    n0 += 2
                if n0 < n:
                    _rowdot1(vals, meta, x, out, r, n0, w0, w1)

# --------------------------------------------------------------------------------------
# many rows of x: every kept value multiplies a contiguous run of x^T (vectorized over the
# batch), so the zeros cost nothing. In LLVM IR: T zmm accumulators (16 T batch columns)
# stay in registers across a K block; each kept value is broadcast and multiplies T
# contiguous vectors of x^T. Plain vector IR: runs on any x86 (AVX2 splits the vectors).
TILE_T = 4          # 64 batch columns per tile
TILE_WB = 4         # 4 metadata words = 64 K columns: x^T block 64 x 64 float32 = 16 KiB
TILE_ROW_BLOCK = 64


def _make_tilerow(nt: int):
    """Intrinsic ``tilerow(vals, meta, xt, outt, r, n0, w0, w1)``:
    ``outt[r, n0:n0 + 16 nt] += sum_j vals[r, j] * xt[col(r, j), n0:n0 + 16 nt]`` over the
    kept values of metadata words ``w0 <= w < w1``."""

    @intrinsic
    def tilerow(typingctx, vals, meta, xt, outt, r, n0, w0, w1):
        kind = vals.dtype
        sig = types.void(vals, meta, xt, outt, r, n0, w0, w1)

        def codegen(context, builder, sig, args):
            va, ma, xa, oa = [context.make_array(t)(context, builder, a)
                              for t, a in zip(sig.args[:4], args[:4])]
            rr, nn0, ww0, ww1 = args[4:8]
            c64 = lambda v: ir.Constant(_I64, v)
            vcols = cgutils.unpack_tuple(builder, va.shape, 2)[1]
            mcols = cgutils.unpack_tuple(builder, ma.shape, 2)[1]
            xcols = cgutils.unpack_tuple(builder, xa.shape, 2)[1]
            ocols = cgutils.unpack_tuple(builder, oa.shape, 2)[1]
            vrow = builder.gep(va.data, [builder.mul(rr, vcols)])
            mrow = builder.gep(ma.data, [builder.mul(rr, mcols)])
            xbase = builder.gep(xa.data, [nn0])
            v16 = _vec(_F32, 16)
            zero = ir.Constant(v16, [0.0] * 16)
            pv16 = ir.PointerType(v16)

            def scalar(j):
                p = builder.gep(vrow, [j])
                if kind == types.float32:
                    return builder.load(p)
                b = builder.load(p)
                if kind == types.uint16:
                    return builder.bitcast(builder.shl(builder.zext(b, _I32),
                                                       ir.Constant(_I32, 16)), _F32)
                return builder.fpext(builder.bitcast(b, ir.HalfType()), _F32)

            pre = builder.block
            head = builder.append_basic_block("tr_head")
            body = builder.append_basic_block("tr_body")
            end = builder.append_basic_block("tr_end")
            builder.branch(head)
            builder.position_at_end(head)
            w = builder.phi(_I64)
            w.add_incoming(ww0, pre)
            accs = [builder.phi(v16) for _ in range(nt)]
            for a in accs:
                a.add_incoming(zero, pre)
            builder.cbranch(builder.icmp_signed("<", w, ww1), body, end)
            builder.position_at_end(body)
            mw = builder.zext(builder.load(builder.gep(mrow, [w])), _I64)
            new = list(accs)
            for i in range(8):
                j = builder.add(builder.mul(w, c64(8)), c64(i))
                v = scalar(j)
                vs = builder.insert_element(ir.Constant(v16, None), v, ir.Constant(_I32, 0))
                vs = builder.shuffle_vector(vs, vs, ir.Constant(_vec(_I32, 16), [0] * 16))
                pos = builder.and_(builder.lshr(mw, c64(2 * i)), c64(3))
                col = builder.add(builder.add(builder.mul(w, c64(16)), c64(4 * (i // 2))), pos)
                xrow = builder.gep(xbase, [builder.mul(col, xcols)])
                for t in range(nt):
                    xv = builder.load(builder.bitcast(builder.gep(xrow, [c64(16 * t)]), pv16),
                                      align=4)
                    # contract only: one FMA per product (reassociation would add adds)
                    new[t] = builder.fadd(new[t], builder.fmul(vs, xv, flags=("contract",)),
                                          flags=("contract",))
            w.add_incoming(builder.add(w, c64(1)), builder.block)
            for a, v in zip(accs, new):
                a.add_incoming(v, builder.block)
            builder.branch(head)
            builder.position_at_end(end)
            orow = builder.gep(oa.data, [builder.add(builder.mul(rr, ocols), nn0)])
            for t in range(nt):
                op = builder.bitcast(builder.gep(orow, [c64(16 * t)]), pv16)
                builder.store(builder.fadd(builder.load(op, align=4), accs[t]), op, align=4)
            return context.get_dummy_value()

        return sig, codegen

    return tilerow


_tilerow = _make_tilerow(TILE_T)


@numba.njit(parallel=True, cache=True)
def _linear_tile(vals, meta, xt, outt, row_block, wb):
    # xt (Kp, Np) float32 = x^T zero-padded to Np = multiple of 16 * TILE_T columns;
    # outt (M, Np) float32 zero-filled. Per K block and batch tile, the x^T block stays in
    # L1 while all rows of the row block use it.
    m = vals.shape[0]
    nw = meta.shape[1]
    npad = xt.shape[1]
    step = 16 * TILE_T
    nrb = (m + row_block - 1) // row_block
    for rb in prange(nrb):
        r0 = rb * row_block
        r1 = min(m, r0 + row_block)
        for w0 in range(0, nw, wb):
            w1 = min(nw, w0 + wb)
            for n0 in range(0, npad, step):
                for r in range(r0, r1):
                    _tilerow(vals, meta, xt, outt, r, n0, w0, w1)


# --------------------------------------------------------------------------------------
# entry point


def _avx512_target() -> bool:
    """Whether Numba compiles for a CPU with AVX-512F (the permute kernel needs it)."""
    import os

    import llvmlite.binding as llvm
    feats = os.environ.get("NUMBA_CPU_FEATURES", "")
    if feats:
        return "+avx512f" in feats.split(",")
    name = os.environ.get("NUMBA_CPU_NAME", "")
    if name and name not in ("host", "native"):
        return False   # a named generic/older target: do not assume AVX-512
    return bool(llvm.get_host_cpu_features().get("avx512f", False))


HAVE_AVX512 = _avx512_target()
KERNELS = ("permute", "tiled")


def linear(x: np.ndarray, values: np.ndarray, meta: np.ndarray, shape: tuple,
           kernel: str = "auto") -> np.ndarray:
    """``x @ W.T`` for 2-D float32 ``x`` ``(N, K)`` and a compressed ``(M, K)`` weight.

    ``kernel``: ``"permute"`` (few rows of x; AVX-512; falls back to tiled without it),
    ``"tiled"`` (any CPU; for many rows) or ``"auto"`` (permute for N <= 8 where available).
    Returns float32 (N, M).

    Example::

        y = linear(np.ones((1, 16), np.float32), s.values, s.meta, s.shape)
    """
    n, k = x.shape
    m = shape[0]
    kp = values.shape[1] * 2
    if kernel == "auto":
        kernel = "permute" if (HAVE_AVX512 and n <= 8) else "tiled"
    if kernel not in KERNELS:
        raise ValueError(f"unknown 2:4 kernel {kernel!r}; choose one of {KERNELS} or 'auto'")
    if kernel == "permute" and not HAVE_AVX512:
        kernel = "tiled"
    kv = kernel_view(values)
    if n == 0 or m == 0 or kp == 0:
        return np.zeros((n, m), np.float32)
    if kernel == "permute":
        xp = np.zeros((n, kp), np.float32)   # 16-wide loads run to Kp: pad with zeros
        xp[:, :k] = x
        out = np.zeros((n, m), np.float32)
        _linear_permute(kv, meta, xp, out, 64, _permute_wb(n, meta.shape[1]))
        return out
    step = 16 * TILE_T
    npad = -(-n // step) * step
    xt = np.zeros((kp, npad), np.float32)
    xt[:k, :n] = x.T
    outt = np.zeros((m, npad), np.float32)
    _linear_tile(kv, meta, xt, outt, TILE_ROW_BLOCK, TILE_WB)
    return np.ascontiguousarray(outt[:, :n].T)
