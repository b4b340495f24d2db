"""Register-blocked GEMM tiles for Numba kernels: float32, float64 and bfloat16.

LLVM does not turn a Numba triple loop into a register-blocked GEMM (it cannot keep the
accumulators in registers across the reduction loop because it cannot prove the arrays do not
alias), and it never emits AVX512-BF16 instructions from scalar code. This module therefore
builds small GEMM micro-kernels directly in LLVM IR (through ``numba.extending.intrinsic``):
``MR`` rows times ``NV`` vectors of 16 float32 (or 8 float64) accumulators live in registers for
the whole reduction loop. Kernels elsewhere in numaccel (flash SDPA, 2:4 sparse, matmul) call
the Numba-level wrappers below from their own ``@njit`` code.

Numba-level API (call from ``@njit`` code; no bounds checks, buffers are flat C-contiguous
1-D arrays addressed by element offset and leading dimension, as in BLAS)::

    gemm_f32(a, a_off, lda, b, b_off, ldb, c, c_off, ldc, m, n, k, accumulate)
    gemm_f64(...same...)
        C[m, n] (+)= A[m, k] @ B[k, n]; with accumulate=False C is overwritten.
    gemm_bf16_native(a, a_off, lda, bp, bp_off, ldbp, c, c_off, ldc, m, n, k2, accumulate)
    gemm_bf16_portable(...same...)
        A: bf16 bits (uint16), row i at a_off + i*lda, 2*k2 values per row (pairs).
        Bp: B "pair-packed" as uint32 (see pack_pairs_rows / pack_pairs_cols): element
        [p, j] holds B[2p, j] in its low half and B[2p+1, j] in its high half.
        C: float32. The native kernel uses vdpbf16ps (AVX512-BF16); the portable one widens
        both halves to float32 and does two FMAs in the same order (odd element first, as
        vdpbf16ps does), so for normal numbers both give identical bits.

Python-level API: ``has_avx512_bf16()``, ``native_bf16_enabled()``, ``force_portable()``,
``pack_pairs_rows``, ``pack_pairs_cols`` and ``matmul_bf16(a, b)``.

The native kernel must never be compiled or run on a CPU without AVX512-BF16 (LLVM cannot
select the instruction; running it raises SIGILL): dispatch in Python on
``native_bf16_enabled()``. Setting the environment variable ``NUMACCEL_NO_AVX512BF16=1``
(read at import) or using ``with force_portable():`` selects the portable path everywhere.

Example::

    import numpy as np, ml_dtypes
    from numaccel.kernels_cpu.bf16_dot import matmul_bf16
    a = np.ones((3, 4), ml_dtypes.bfloat16); b = np.ones((4, 5), ml_dtypes.bfloat16)
    matmul_bf16(a, b)          # float32 array of 4.0, through vdpbf16ps when available
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import ml_dtypes
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .bf16 import u32_as_f32

MR = 6          # rows of a micro-tile
NV = 4          # 16-float vectors per row of a micro-tile (64 columns)
LANES = 16      # float32 lanes of one 512-bit vector (float64 kernels use 8)

_BF16 = np.dtype(ml_dtypes.bfloat16)


# --------------------------------------------------------------------------- feature check
def _detect_avx512_bf16() -> bool:
    try:
        import llvmlite.binding as llvm
        feats = llvm.get_host_cpu_features()
        return bool(feats.get("avx512bf16", False)) and bool(feats.get("avx512f", False))
    except Exception:  # noqa: BLE001  # pragma: no cover - very old llvmlite: fall back to /proc/cpuinfo
        try:
            with open("/proc/cpuinfo") as f:
                return "avx512_bf16" in f.read()
        except OSError:
            return False


_HAS_BF16 = _detect_avx512_bf16()
_FORCED_PORTABLE = os.environ.get("NUMACCEL_NO_AVX512BF16", "") not in ("", "0")


def has_avx512_bf16() -> bool:
    """Whether this CPU has the AVX512-BF16 dot-product instructions (vdpbf16ps).

    Example::

        >>> isinstance(has_avx512_bf16(), bool)
        True
    """
    return _HAS_BF16


def native_bf16_enabled() -> bool:
    """Whether kernels should take the vdpbf16ps path now (feature present and not forced off).

    Example::

        >>> with force_portable():
        ...     native_bf16_enabled()
        False
    """
    return _HAS_BF16 and not _FORCED_PORTABLE


@contextlib.contextmanager
def force_portable(on: bool = True) -> Iterator[None]:
    """Context manager selecting the portable bf16 path (for tests and comparisons).

    Example::

        with force_portable():
            y = matmul_bf16(a, b)      # widening FMA kernel, no vdpbf16ps
    """
    global _FORCED_PORTABLE
    old = _FORCED_PORTABLE
    _FORCED_PORTABLE = bool(on) or old
    try:
        yield
    finally:
        _FORCED_PORTABLE = old


# --------------------------------------------------------------------------- IR micro-kernels
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


class _BFloatType(ir.Type):
    """LLVM's ``bfloat`` IR type, which llvmlite's IR builder does not provide."""

    def _to_string(self):
        return "bfloat"

    def __eq__(self, other):
        return isinstance(other, _BFloatType)

    def __hash__(self):
        return hash("bfloat")


def _splat(builder, scalar, vty):
    undef = ir.Constant(vty, ir.Undefined)
    v = builder.insert_element(undef, scalar, ir.Constant(_I32, 0))
    mask = ir.Constant(ir.VectorType(_I32, vty.count), [0] * vty.count)
    return builder.shuffle_vector(v, undef, mask)


def _vload(builder, base, idx, vty, align):
    ptr = builder.bitcast(builder.gep(base, [idx]), vty.as_pointer())
    return builder.load(ptr, align=align)


def _vstore(builder, val, base, idx, align):
    ptr = builder.bitcast(builder.gep(base, [idx]), val.type.as_pointer())
    builder.store(val, ptr, align=align)


def _make_tile(kind: str, mr: int, nv: int):
    """An intrinsic computing one mr x (nv*lanes) tile of C (+)= A @ B.

    kind: "f32" / "f64" (A, B, C of that type), "bf16" (vdpbf16ps) or "bf16w" (widening FMA):
    A uint16 bits, B pair-packed uint32, C float32; the loop count is then in pairs.
    """
    lanes = 8 if kind == "f64" else LANES

    @intrinsic
    def tile(typingctx, a, a_off, lda, b, b_off, ldb, c, c_off, ldc, k, accumulate):
        want = {"f32": (types.float32,) * 3, "f64": (types.float64,) * 3,
                "bf16": (types.uint16, types.uint32, types.float32),
                "bf16w": (types.uint16, types.int32, types.float32)}[kind]
        got = tuple(getattr(x, "dtype", None) for x in (a, b, c))
        if kind == "bf16w":   # the portable kernel takes either signedness of the pairs
            got = (got[0], types.int32 if got[1] == types.uint32 else got[1], got[2])
        if got != want or not all(isinstance(x, types.Array) and x.layout == "C"
                                  for x in (a, b, c)):
            return None
        ip = types.intp
        sig = types.void(a, ip, ip, b, ip, ip, c, ip, ip, ip, types.boolean)

        def codegen(context, builder, sig, args):
            a_, a_off_, lda_, b_, b_off_, ldb_, c_, c_off_, ldc_, k_, acc_ = args
            ap = context.make_array(sig.args[0])(context, builder, a_).data
            bp = context.make_array(sig.args[3])(context, builder, b_).data
            cp = context.make_array(sig.args[6])(context, builder, c_).data
            fty = ir.DoubleType() if kind == "f64" else ir.FloatType()
            vty = ir.VectorType(fty, lanes)
            esz = 8 if kind == "f64" else 4
            mod = builder.module
            if kind == "bf16":
                bvt = ir.VectorType(_BFloatType(), 32)
                dp = ir.Function(mod, ir.FunctionType(vty, [vty, bvt, bvt]),
                                 name="llvm.x86.avx512bf16.dpbf16ps.512") \
                    if "llvm.x86.avx512bf16.dpbf16ps.512" not in mod.globals \
                    else mod.globals["llvm.x86.avx512bf16.dpbf16ps.512"]
            else:
                fname = f"llvm.fmuladd.v{lanes}f{'64' if kind == 'f64' else '32'}"
                fma = mod.globals.get(fname) or ir.Function(
                    mod, ir.FunctionType(vty, [vty, vty, vty]), name=fname)
            # initial accumulators: C or zero (select: C may hold NaN garbage when overwriting)
            zero = ir.Constant(vty, [0.0] * lanes)
            init = []
            for r in range(mr):
                row = builder.add(c_off_, builder.mul(ldc_, ir.Constant(_I64, r)))
                for v in range(nv):
                    idx = builder.add(row, ir.Constant(_I64, v * lanes))
                    cv = _vload(builder, cp, idx, vty, esz)
                    init.append(builder.select(acc_, cv, zero))
            pre = builder.block
            loop = builder.append_basic_block("tile.loop")
            body = builder.append_basic_block("tile.body")
            done = builder.append_basic_block("tile.done")
            builder.branch(loop)
            builder.position_at_end(loop)
            kk = builder.phi(_I64)
            kk.add_incoming(ir.Constant(_I64, 0), pre)
            accs = []
            for x in init:
                p = builder.phi(vty)
                p.add_incoming(x, pre)
                accs.append(p)
            builder.cbranch(builder.icmp_signed("<", kk, k_), body, done)
            builder.position_at_end(body)
            brow = builder.add(b_off_, builder.mul(kk, ldb_))
            bvecs = []
            for v in range(nv):
                idx = builder.add(brow, ir.Constant(_I64, v * lanes))
                if kind in ("f32", "f64"):
                    bvecs.append(_vload(builder, bp, idx, vty, esz))
                else:
                    bvecs.append(_vload(builder, bp, idx, ir.VectorType(_I32, lanes), 4))
            new = []
            for r in range(mr):
                arow = builder.add(a_off_, builder.mul(lda_, ir.Constant(_I64, r)))
                if kind in ("f32", "f64"):
                    a_s = builder.load(builder.gep(ap, [builder.add(arow, kk)]), align=esz)
                    a_v = _splat(builder, a_s, vty)
                else:
                    aidx = builder.add(arow, builder.shl(kk, ir.Constant(_I64, 1)))
                    a32 = builder.load(builder.bitcast(builder.gep(ap, [aidx]),
                                                       _I32.as_pointer()), align=2)
                    a_v = _splat(builder, a32, ir.VectorType(_I32, lanes))
                    if kind == "bf16w":
                        hi_mask = ir.Constant(ir.VectorType(_I32, lanes), [-65536] * lanes)
                        a_hi = builder.bitcast(builder.and_(a_v, hi_mask), vty)
                        a_lo = builder.bitcast(builder.shl(
                            a_v, ir.Constant(ir.VectorType(_I32, lanes), [16] * lanes)), vty)
                for v in range(nv):
                    acc = accs[r * nv + v]
                    if kind in ("f32", "f64"):
                        new.append(builder.call(fma, [a_v, bvecs[v], acc]))
                    elif kind == "bf16":
                        new.append(builder.call(dp, [acc, builder.bitcast(a_v, bvt),
                                                     builder.bitcast(bvecs[v], bvt)]))
                    else:
                        bv = bvecs[v]
                        b_hi = builder.bitcast(builder.and_(bv, hi_mask), vty)
                        b_lo = builder.bitcast(builder.shl(
                            bv, ir.Constant(ir.VectorType(_I32, lanes), [16] * lanes)), vty)
                        # odd (high) element first, then even: the order vdpbf16ps uses;
                        # the products of two bf16 are exact in float32, so each step
                        # rounds once, exactly like the instruction
                        t = builder.call(fma, [a_hi, b_hi, acc])
                        new.append(builder.call(fma, [a_lo, b_lo, t]))
            nxt = builder.add(kk, ir.Constant(_I64, 1))
            kk.add_incoming(nxt, builder.block)
            for p, x in zip(accs, new):
                p.add_incoming(x, builder.block)
            builder.branch(loop)
            builder.position_at_end(done)
            for r in range(mr):
                row = builder.add(c_off_, builder.mul(ldc_, ir.Constant(_I64, r)))
                for v in range(nv):
                    idx = builder.add(row, ir.Constant(_I64, v * lanes))
                    _vstore(builder, accs[r * nv + v], cp, idx, esz)
            return context.get_dummy_value()

        return sig, codegen

    return tile


_f32_big, _f32_row, _f32_col, _f32_one = (_make_tile("f32", MR, NV), _make_tile("f32", 1, NV),
                                          _make_tile("f32", MR, 1), _make_tile("f32", 1, 1))
_f64_big, _f64_row, _f64_col, _f64_one = (_make_tile("f64", MR, NV), _make_tile("f64", 1, NV),
                                          _make_tile("f64", MR, 1), _make_tile("f64", 1, 1))
_bn_big, _bn_row, _bn_col, _bn_one = (_make_tile("bf16", MR, NV), _make_tile("bf16", 1, NV),
                                      _make_tile("bf16", MR, 1), _make_tile("bf16", 1, 1))
_bw_big, _bw_row, _bw_col, _bw_one = (_make_tile("bf16w", MR, NV), _make_tile("bf16w", 1, NV),
                                      _make_tile("bf16w", MR, 1), _make_tile("bf16w", 1, 1))


@numba.njit(inline="always")
def _bf16_pair(bits32):
    lo = np.uint32(bits32 << np.uint32(16))
    hi = np.uint32(bits32 & np.uint32(0xFFFF0000))
    return lo, hi


_bits_to_f32 = u32_as_f32


# One generic driver per kind: full tiles through the intrinsics, column leftovers (< one
# vector) through scalar loops. `big`, `row`, `col`, `one` are the four intrinsic shapes.
def _make_driver(big, row, col, one, lanes, scalar_tail):
    wide = NV * lanes

    # not cache=True: the four drivers are closures of one source line, which Numba's cache
    # index cannot tell apart; the (cached) kernels that call them carry their code anyway
    @numba.njit
    def drive(a, a_off, lda, b, b_off, ldb, c, c_off, ldc, m, n, k, accumulate):
        n_vec = n - n % lanes
        i = 0
        while i < m:
            rows = MR if i + MR <= m else 1
            ao = a_off + i * lda
            co = c_off + i * ldc
            j = 0
            while j + wide <= n_vec:
                if rows == MR:
                    big(a, ao, lda, b, b_off + j, ldb, c, co + j, ldc, k, accumulate)
                else:
                    row(a, ao, lda, b, b_off + j, ldb, c, co + j, ldc, k, accumulate)
                j += wide
            while j < n_vec:
                if rows == MR:
                    col(a, ao, lda, b, b_off + j, ldb, c, co + j, ldc, k, accumulate)
                else:
                    one(a, ao, lda, b, b_off + j, ldb, c, co + j, ldc, k, accumulate)
                j += lanes
            if n_vec < n:
                scalar_tail(a, ao, lda, b, b_off, ldb, c, co, ldc, rows, n_vec, n, k,
                            accumulate)
            i += rows

    return drive


@numba.njit(cache=True)
def _tail_float(a, ao, lda, b, bo, ldb, c, co, ldc, rows, j0, n, k, accumulate):
    for r in range(rows):
        for j in range(j0, n):
            s = c[co + r * ldc + j] if accumulate else c.dtype.type(0)
            for p in range(k):
                s += a[ao + r * lda + p] * b[bo + p * ldb + j]
            c[co + r * ldc + j] = s


@numba.njit(cache=True)
def _tail_bf16(a, ao, lda, bp, bo, ldb, c, co, ldc, rows, j0, n, k2, accumulate):
    for r in range(rows):
        for j in range(j0, n):
            s = c[co + r * ldc + j] if accumulate else np.float32(0)
            for p in range(k2):
                ab = np.uint32(a[ao + r * lda + 2 * p]) | (
                    np.uint32(a[ao + r * lda + 2 * p + 1]) << np.uint32(16))
                a_lo, a_hi = _bf16_pair(np.uint32(ab))
                b_lo, b_hi = _bf16_pair(np.uint32(bp[bo + p * ldb + j]))
                s += _bits_to_f32(a_hi) * _bits_to_f32(b_hi)
                s += _bits_to_f32(a_lo) * _bits_to_f32(b_lo)
            c[co + r * ldc + j] = s


gemm_f32 = _make_driver(_f32_big, _f32_row, _f32_col, _f32_one, LANES, _tail_float)
gemm_f64 = _make_driver(_f64_big, _f64_row, _f64_col, _f64_one, 8, _tail_float)
gemm_bf16_native = _make_driver(_bn_big, _bn_row, _bn_col, _bn_one, LANES, _tail_bf16)
gemm_bf16_portable = _make_driver(_bw_big, _bw_row, _bw_col, _bw_one, LANES, _tail_bf16)


# --------------------------------------------------------------------------- packing
@numba.njit(cache=True)
def pack_pairs_rows_into(b, out):
    """Numba: pair-pack B (K x N uint16 bf16 bits) into out (ceil(K/2) x >=N uint32).

    out[p, j] = B[2p, j] | B[2p+1, j] << 16 (a missing odd row packs as zero bits).
    """
    kk, n = b.shape
    for p in range(out.shape[0]):
        for j in range(n):
            lo = np.uint32(b[2 * p, j]) if 2 * p < kk else np.uint32(0)
            hi = np.uint32(b[2 * p + 1, j]) if 2 * p + 1 < kk else np.uint32(0)
            out[p, j] = lo | (hi << np.uint32(16))
        for j in range(n, out.shape[1]):
            out[p, j] = 0


@numba.njit(cache=True)
def pack_pairs_cols_into(x, out):
    """Numba: pair-pack B = X.T where X is N x K uint16 bits (e.g. the keys of attention).

    out[p, j] = X[j, 2p] | X[j, 2p+1] << 16; out is ceil(K/2) x >=N uint32.
    """
    n, kk = x.shape
    for j in range(n):
        for p in range(out.shape[0]):
            lo = np.uint32(x[j, 2 * p]) if 2 * p < kk else np.uint32(0)
            hi = np.uint32(x[j, 2 * p + 1]) if 2 * p + 1 < kk else np.uint32(0)
            out[p, j] = lo | (hi << np.uint32(16))
    for p in range(out.shape[0]):
        for j in range(n, out.shape[1]):
            out[p, j] = 0


def _bits(a: np.ndarray) -> np.ndarray:
    if a.dtype == _BF16:
        return a.view(np.uint16)
    if a.dtype == np.uint16:
        return a
    raise TypeError(f"expected a bfloat16 (or uint16 bits) array, got dtype {a.dtype}")


def pack_pairs_rows(b: np.ndarray) -> np.ndarray:
    """Pair-pack a K x N bfloat16 matrix for the bf16 GEMM (ceil(K/2) x N uint32).

    Example::

        bp = pack_pairs_rows(np.ones((4, 3), ml_dtypes.bfloat16))   # shape (2, 3)
    """
    bb = _bits(np.asarray(b))
    if bb.ndim != 2:
        raise ValueError(f"pack_pairs_rows expects a 2-D matrix, got shape {bb.shape}")
    out = np.empty(((bb.shape[0] + 1) // 2, bb.shape[1]), np.uint32)
    pack_pairs_rows_into(bb, out)
    return out


def pack_pairs_cols(x: np.ndarray) -> np.ndarray:
    """Pair-pack B = x.T for an N x K bfloat16 matrix x (ceil(K/2) x N uint32).

    Example::

        kp = pack_pairs_cols(keys)       # keys (S, D) -> packed (D/2, S) for Q @ K.T
    """
    xb = _bits(np.asarray(x))
    if xb.ndim != 2:
        raise ValueError(f"pack_pairs_cols expects a 2-D matrix, got shape {xb.shape}")
    out = np.empty(((xb.shape[1] + 1) // 2, xb.shape[0]), np.uint32)
    pack_pairs_cols_into(np.ascontiguousarray(xb), out)
    return out


@numba.njit(cache=True)
def _matmul_bf16_portable(a, bp, c, m, n, k2):
    gemm_bf16_portable(a, 0, 2 * k2, bp, 0, n, c, 0, n, m, n, k2, False)


@numba.njit(cache=True)
def _matmul_bf16_native(a, bp, c, m, n, k2):
    gemm_bf16_native(a, 0, 2 * k2, bp, 0, n, c, 0, n, m, n, k2, False)


def matmul_bf16(a: np.ndarray, b: np.ndarray, *, native: bool | None = None) -> np.ndarray:
    """2-D bfloat16 matrix product with float32 accumulation; returns float32.

    ``native=None`` uses vdpbf16ps when ``native_bf16_enabled()``; ``False`` forces the
    portable kernel; ``True`` on a CPU without AVX512-BF16 raises NotImplementedError.

    Example::

        >>> import ml_dtypes
        >>> a = np.ones((3, 4), ml_dtypes.bfloat16)
        >>> float(matmul_bf16(a, a.T.copy())[0, 0])
        4.0
    """
    ab, bb = _bits(np.asarray(a)), _bits(np.asarray(b))
    if ab.ndim != 2 or bb.ndim != 2 or ab.shape[1] != bb.shape[0]:
        raise ValueError(f"matmul_bf16: shapes {ab.shape} and {bb.shape} are not (m, k) @ "
                         "(k, n)")
    if native is None:
        native = native_bf16_enabled()
    elif native and not _HAS_BF16:
        raise NotImplementedError("this CPU has no AVX512-BF16; call with native=False")
    m, kk = ab.shape
    k2 = (kk + 1) // 2
    a2 = np.zeros((m, 2 * k2), np.uint16)   # even row length: the kernel reads pairs
    a2[:, :kk] = ab
    bp = pack_pairs_rows(bb)
    c = np.empty((m, bb.shape[1]), np.float32)
    if m and bb.shape[1]:
        fn = _matmul_bf16_native if native else _matmul_bf16_portable
        fn(a2.reshape(-1), bp.reshape(-1), c.reshape(-1), m, bb.shape[1], k2)
    return c
