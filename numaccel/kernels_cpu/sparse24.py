"""Numba kernels for 2:4 semi-structured sparse weights (layout: docs/sparse24_layout.md).

Values travel as float32 arrays, or as their 16-bit patterns (Numba has no float16 or
bfloat16 arrays): bfloat16 as ``uint16`` and float16 as ``int16``, so that the element
type alone selects the widening (``widen``) at compile time.

- ``decompress``: compressed -> dense (the weight's dtype, or float32 for BLAS).
- ``linear(x, values, meta, shape, kernel)``: y = x @ W.T with one of
  ``"expand"`` (few rows of x, decoding: each metadata word's 8 values expanded to 16 dense
  lanes with vexpandps, FMA with contiguous x; the weight streams once, no gathers) or
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
# few rows of x: expand each metadata word's 8 values to 16 dense lanes (vexpandps), FMA
# with 16 contiguous x columns. Memory traffic is the compressed weight, read once, and
# no gathers. Numba has no vector types, so the row loop is written in LLVM IR.

_I1, _I16, _I32, _I64 = ir.IntType(1), ir.IntType(16), ir.IntType(32), ir.IntType(64)
_F32 = ir.FloatType()
_FAST = ("contract", "reassoc")


def _vec(t, n):
    return ir.VectorType(t, n)


def _declare(mod, name, ret, args):
    if name in mod.globals:
        return mod.globals[name]
    return ir.Function(mod, ir.FunctionType(ret, args), name)


def _expand_lut() -> np.ndarray:
    """Metadata byte (2 groups) -> 8-bit mask of the dense lanes the 4 values expand to."""
    lut = np.zeros(256, np.uint16)
    for b in range(256):
        m = 0
        for g in range(2):
            nib = (b >> (4 * g)) & 15
            m |= ((1 << (nib & 3)) | (1 << (nib >> 2))) << (4 * g)
        lut[b] = m
    return lut


EXPAND_LUT = _expand_lut()


def _make_rowdot(nx: int, unroll: int, prefetch_next_row: bool = True):
    """Intrinsic ``rowdot(vals, meta, x, lut, out, r, n0, w0, w1)``: for i < nx,
    ``out[n0 + i, r] += sum_j vals[r, j] * x[n0 + i, col(r, j)]`` over the kept values of
    metadata words ``w0 <= w < w1`` (x padded to Kp columns).
    ``unroll`` words per loop trip keep nx * unroll independent accumulators, enough to
    hide the FMA latency."""

    @intrinsic
    def rowdot(typingctx, vals, meta, x, lut, out, r, n0, w0, w1):
        kind = vals.dtype
        sig = types.void(vals, meta, x, lut, out, r, n0, w0, w1)

        def codegen(context, builder, sig, args):
            arrs = [context.make_array(t)(context, builder, a)
                    for t, a in zip(sig.args[:5], args[:5])]
            va, ma, xa, la, oa = arrs
            rr, nn0, ww0, ww1 = args[5:9]
            vcols = cgutils.unpack_tuple(builder, va.shape, 2)[1]
            nwords = cgutils.unpack_tuple(builder, ma.shape, 2)[1]
            xcols = cgutils.unpack_tuple(builder, xa.shape, 2)[1]
            ocols = cgutils.unpack_tuple(builder, oa.shape, 2)[1]
            c64 = lambda v: ir.Constant(_I64, v)
            vrow = builder.gep(va.data, [builder.mul(rr, vcols)])
            mrow = builder.gep(ma.data, [builder.mul(rr, nwords)])
            xrows = [builder.gep(xa.data, [builder.mul(builder.add(nn0, c64(i)), xcols)])
                     for i in range(nx)]
            mod = builder.module
            expand = _declare(mod, "llvm.x86.avx512.mask.expand.v16f32", _vec(_F32, 16),
                              [_vec(_F32, 16), _vec(_F32, 16), _vec(_I1, 16)])
            zero = ir.Constant(_vec(_F32, 16), [0.0] * 16)
            dup = ir.Constant(_vec(_I32, 16), list(range(8)) * 2)
            pf = _declare(mod, "llvm.prefetch.p0", ir.VoidType(),
                          [ir.PointerType(ir.IntType(8)), _I32, _I32, _I32])

            def word(i, accs):
                # one metadata word: 8 values -> 16 lanes; accs[k] += lanes * x[k, 16i:16i+16]
                mw = builder.zext(builder.load(builder.gep(mrow, [i])), _I64)
                lo = builder.load(builder.gep(la.data, [builder.and_(mw, c64(255))]))
                hi = builder.load(builder.gep(la.data, [builder.lshr(mw, c64(8))]))
                mask = builder.bitcast(builder.or_(lo, builder.shl(hi, ir.Constant(_I16, 8))),
                                       _vec(_I1, 16))
                vp = builder.gep(vrow, [builder.mul(i, c64(8))])
                if prefetch_next_row:
                    # the next row's values at the same K offset: with K blocked, rows are
                    # short segments the hardware prefetcher would start late on
                    i8p = ir.PointerType(ir.IntType(8))
                    builder.call(pf, [builder.bitcast(builder.gep(vp, [vcols]), i8p),
                                      ir.Constant(_I32, 0), ir.Constant(_I32, 3),
                                      ir.Constant(_I32, 1)])
                if kind == types.float32:
                    v8 = builder.load(builder.bitcast(vp, ir.PointerType(_vec(_F32, 8))),
                                      align=4)
                else:
                    b8 = builder.load(builder.bitcast(vp, ir.PointerType(_vec(_I16, 8))),
                                      align=2)
                    if kind == types.uint16:   # bf16: the high half of a float32
                        w8 = builder.shl(builder.zext(b8, _vec(_I32, 8)),
                                         ir.Constant(_vec(_I32, 8), [16] * 8))
                        v8 = builder.bitcast(w8, _vec(_F32, 8))
                    else:                      # f16
                        v8 = builder.fpext(builder.bitcast(b8, _vec(ir.HalfType(), 8)),
                                           _vec(_F32, 8))
                lanes = builder.call(expand, [builder.shuffle_vector(v8, v8, dup), zero, mask])
                out_accs = []
                for k in range(nx):
                    xp = builder.gep(xrows[k], [builder.mul(i, c64(16))])
                    xv = builder.load(builder.bitcast(xp, ir.PointerType(_vec(_F32, 16))),
                                      align=4)
                    prod = builder.fmul(lanes, xv, flags=_FAST)
                    out_accs.append(builder.fadd(accs[k], prod, flags=_FAST))
                return out_accs

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
                phis = [builder.phi(_vec(_F32, 16)) for _ in init]
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

            def unrolled(i, accs):
                accs = list(accs)
                for u in range(unroll):
                    accs[u * nx:(u + 1) * nx] = word(builder.add(i, c64(u)),
                                                     accs[u * nx:(u + 1) * nx])
                return accs

            i, accs = loop(ww0, ww1, unroll, [zero] * (nx * unroll), unrolled)
            comb = []
            for k in range(nx):
                a = accs[k]
                for u in range(1, unroll):
                    a = builder.fadd(a, accs[u * nx + k], flags=_FAST)
                comb.append(a)
            _, accs = loop(i, ww1, 1, comb, word)
            for k in range(nx):
                v, n = accs[k], 16
                while n > 1:   # tree reduction of the 16 lanes
                    n //= 2
                    a = builder.shuffle_vector(v, v, ir.Constant(_vec(_I32, n), list(range(n))))
                    b = builder.shuffle_vector(
                        v, v, ir.Constant(_vec(_I32, n), list(range(n, 2 * n))))
                    v = builder.fadd(a, b)
                s = builder.extract_element(v, ir.Constant(_I32, 0))
                row = builder.add(nn0, c64(k))
                op = builder.gep(oa.data, [builder.add(builder.mul(row, ocols), rr)])
                builder.store(builder.fadd(builder.load(op), s), op)
            return context.get_dummy_value()

        return sig, codegen

    return rowdot


_rowdot1 = _make_rowdot(1, 4)
_rowdot2 = _make_rowdot(2, 2)
_rowdot4 = _make_rowdot(4, 1)
_rowdot8 = _make_rowdot(8, 1)


# Columns of x per K block: the x rows in flight (nx * block * 4 bytes) stay within half
# of the 32 KiB L1, while the weight streams through once.
_L1_X_BYTES = 16 * 1024


@numba.njit(parallel=True, cache=True)
def _linear_expand(vals, meta, x, lut, out, row_block):
    # out (N, M) float32, zero-filled; x (N, Kp) float32. Parallel over blocks of output
    # rows; inside, K blocks so that the x rows in flight stay in L1 while every weight
    # row is read from memory once.
    m = vals.shape[0]
    n = x.shape[0]
    nw = meta.shape[1]
    nx = 8 if n >= 8 else (4 if n >= 4 else (2 if n >= 2 else 1))
    wb = max(1, _L1_X_BYTES // (nx * 64))   # metadata words (16 columns) per K block
    nrb = (m + row_block - 1) // row_block
    for rb in prange(nrb):
        r0 = rb * row_block
        r1 = min(m, r0 + row_block)
        for w0 in range(0, nw, wb):
            w1 = min(nw, w0 + wb)
            for r in range(r0, r1):
                n0 = 0
                while n0 + 8 <= n:
                    _rowdot8(vals, meta, x, lut, out, r, n0, w0, w1)
                    n0 += 8
                if n0 + 4 <= n:
                    _rowdot4(vals, meta, x, lut, out, r, n0, w0, w1)
                    n0 += 4
                if n0 + 2 <= n:
                    _rowdot2(vals, meta, x, lut, out, r, n0, w0, w1)
                    n0 += 2
                if n0 < n:
                    _rowdot1(vals, meta, x, lut, out, r, n0, w0, w1)


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
    """Whether Numba compiles for a CPU with AVX-512F (the expand kernel needs it)."""
    import os

    import llvmlite.binding as llvm
    feats = os.environ.get("NUMBA_CPU_FEATURES", "")
    if feats:
        return "+avx512f" in feats.split(",")
    name = os.environ.get("NUMBA_CPU_NAME", "")
    if name and name not in ("host", "native"):
        return False   # a named generic/older target: do not assume AVX-512
    return bool(llvm.get_host_cpu_features().get("avx512f", False))


HAVE_EXPAND = _avx512_target()
KERNELS = ("expand", "tiled")


def linear(x: np.ndarray, values: np.ndarray, meta: np.ndarray, shape: tuple,
           kernel: str = "auto") -> np.ndarray:
    """``x @ W.T`` for 2-D float32 ``x`` ``(N, K)`` and a compressed ``(M, K)`` weight.

    ``kernel``: ``"expand"`` (few rows of x; AVX-512; falls back to tiled without it),
    ``"tiled"`` (any CPU; for many rows) or ``"auto"`` (expand for N <= 8 where available).
    Returns float32 (N, M).

    Example::

        y = linear(np.ones((1, 16), np.float32), s.values, s.meta, s.shape)
    """
    n, k = x.shape
    m = shape[0]
    kp = values.shape[1] * 2
    if kernel == "auto":
        kernel = "expand" if (HAVE_EXPAND and n <= 8) else "tiled"
    if kernel not in KERNELS:
        raise ValueError(f"unknown 2:4 kernel {kernel!r}; choose one of {KERNELS} or 'auto'")
    if kernel == "expand" and not HAVE_EXPAND:
        kernel = "tiled"
    kv = kernel_view(values)
    if n == 0 or m == 0 or kp == 0:
        return np.zeros((n, m), np.float32)
    if kernel == "expand":
        xp = np.zeros((n, kp), np.float32)   # 16-wide loads run to Kp: pad with zeros
        xp[:, :k] = x
        out = np.zeros((n, m), np.float32)
        _linear_expand(kv, meta, xp, EXPAND_LUT, out, 64)
        return out
    step = 16 * TILE_T
    npad = -(-n // step) * step
    xt = np.zeros((kp, npad), np.float32)
    xt[:k, :n] = x.T
    outt = np.zeros((m, npad), np.float32)
    _linear_tile(kv, meta, xt, outt, TILE_ROW_BLOCK, TILE_WB)
    return np.ascontiguousarray(outt[:, :n].T)
