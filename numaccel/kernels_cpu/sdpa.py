"""Flash-style scaled-dot-product attention on the CPU (Numba): forward, log-sum-exp, backward.

The kernels work on a canonical form prepared by ``numaccel.nn.functional``: every input is
flattened to ``(batch, rows, features)`` and an index array maps each output batch entry to
the batch entry of q, k, v and the mask that it reads (this is how broadcasting of batch dims
and grouped-query attention cost no copies of k and v).

Forward (``flash_forward``): parallel over (output batch, query tile). A query tile of ``BQ``
rows meets the keys ``BK`` at a time: ``S = Q K^T`` through a register-blocked GEMM tile
(``bf16_dot``), then an online softmax (running row max ``m`` and row sum ``l``; the output
accumulator is rescaled by ``exp(m_old - m_new)``), then ``O += P V``. Memory is linear in the
sequence lengths: no L x S matrix exists at any time. bfloat16 inputs stay bf16 for both
products (vdpbf16ps when the CPU has it), with float32 scores, softmax and accumulation; the
probabilities are rounded to bf16 before ``P V`` as PyTorch's CPU kernel does.

Backward (``flash_backward``): parallel over output batch entries; for every key tile and
every query tile it recomputes ``P = exp(S - lse)`` from the saved log-sum-exp and
accumulates dV, dK, dQ (with ``D_i = rowsum(dO * O)``), so nothing L x S is stored either.

Dropout is a counter-based hash of (seed, batch entry, query row, key column), identical in
forward, backward and in ``dropout_keep`` (the NumPy reference), so results do not depend on
tiling or threads.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import prange
from numba.core import types
from numba.extending import intrinsic, overload

from . import bf16_dot as _bd
from .bf16 import f32_to_bf16, u32_as_f32

# Tile sizes, read at call time (tests shrink them to exercise many tiles). 96 x 384 measured
# best of 48..120 x 256..512 on Zen 4/5 for float32 and bf16, causal or not (L2-resident).
BQ = 96          # query rows per tile (a multiple of the 6-row GEMM tile)
BK = 384         # keys per tile (a multiple of the 64-column GEMM tile)
BQ_BWD = 64
BK_BWD = 64

MASK_NONE, MASK_ADD = 0, 2      # bool masks arrive as their additive twin (0 / -inf)


# --------------------------------------------------------------------------- dropout hash
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(inline="always")
def _keep(seed, counter, thr):
    """splitmix64 of seed + (counter + 1) * golden; keep when the top 24 bits >= thr."""
    z = np.uint64(seed) + (np.uint64(counter) + np.uint64(1)) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)) >= np.uint64(thr)


def dropout_keep(seed: int, n: np.ndarray, i: np.ndarray, j: np.ndarray, L: int, S: int,
                 thr: int) -> np.ndarray:
    """NumPy twin of the kernels' dropout decision for batch entry n, query i, key j.

    ``thr = round(dropout_p * 2**24)``; an element is kept when the top 24 bits of
    splitmix64(seed + ((n*L + i)*S + j + 1) * 0x9E3779B97F4A7C15) are >= thr.

    Example::

        keep = dropout_keep(seed, n[:, None, None], i[:, None], j, L, S, thr)
    """
    with np.errstate(over="ignore"):
        c = (np.asarray(n, np.uint64) * np.uint64(L) + np.asarray(i, np.uint64)) \
            * np.uint64(S) + np.asarray(j, np.uint64)
        z = np.uint64(seed) + (c + np.uint64(1)) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)) >= np.uint64(thr)


# --------------------------------------------------------------------------- dtype dispatch
def _exp(x):  # pragma: no cover - replaced by the overload inside Numba
    return np.exp(x)


@overload(_exp, inline="always")
def _exp_ov(x):
    if x == types.float32:
        def impl(x):
            # exp(x) = 2^n * e^r, |r| <= ln2/2; degree-6 polynomial (rel. error ~2e-7). Numba
            # has no vectorized libm here (no SVML), so this is what keeps the loops in zmm.
            t = x * np.float32(1.4426950408889634)
            n = np.floor(t + np.float32(0.5))
            r = x - n * np.float32(0.693145751953125)
            r = r - n * np.float32(1.428606765330187e-06)
            p = np.float32(1.0 / 720.0)
            p = p * r + np.float32(1.0 / 120.0)
            p = p * r + np.float32(1.0 / 24.0)
            p = p * r + np.float32(1.0 / 6.0)
            p = p * r + np.float32(0.5)
            p = p * r + np.float32(1.0)
            p = p * r + np.float32(1.0)
            nc = min(max(n, np.float32(-126.0)), np.float32(127.0))
            two_n = u32_as_f32(np.uint32((np.int32(nc) + np.int32(127)) << np.int32(23)))
            y = p * two_n
            y = np.float32(0.0) if x < np.float32(-87.33) else y
            return np.float32(np.inf) if x > np.float32(88.72) else y
        return impl
    return lambda x: np.exp(x)


def _gemm_a(a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc):  # pragma: no cover
    raise NotImplementedError


@overload(_gemm_a, inline="always")
def _gemm_a_ov(a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc):
    """Pick the GEMM tile from the operand types: float32 / float64 arrays, or bf16 bits
    (uint16) times pair-packed B: uint32 for vdpbf16ps, int32 for the portable kernel."""
    if a.dtype == types.float32:
        return lambda a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc: _bd.gemm_f32(
            a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc)
    if a.dtype == types.float64:
        return lambda a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc: _bd.gemm_f64(
            a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc)
    if a.dtype == types.uint16 and b.dtype == types.uint32:
        return lambda a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc: _bd.gemm_bf16_native(
            a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc)
    if a.dtype == types.uint16 and b.dtype == types.int32:
        return lambda a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc: \
            _bd.gemm_bf16_portable(a, ao, lda, b, bo, ldb, c, co, ldc, m, n, k, acc)
    return None


def _to_operand(x, like):  # pragma: no cover
    raise NotImplementedError


@overload(_to_operand, inline="always")
def _to_operand_ov(x, like):
    if like.dtype == types.uint16:
        return lambda x, like: f32_to_bf16(x)
    return lambda x, like: x


@intrinsic
def _maxnum(typingctx, a, b):
    """llvm.maxnum (the max ignoring NaN): with nnan LLVM vectorizes this reduction, while
    Numba's max() / a select stay scalar (measured 30x slower)."""
    if a != b or a not in (types.float32, types.float64):
        return None
    name = "llvm.maxnum.f32" if a == types.float32 else "llvm.maxnum.f64"

    def codegen(context, builder, sig, args):
        fty = ir.FloatType() if a == types.float32 else ir.DoubleType()
        fn = builder.module.globals.get(name) or ir.Function(
            builder.module, ir.FunctionType(fty, [fty, fty]), name=name)
        return builder.call(fn, args)

    return a(a, b), codegen


# The row passes of the online softmax live in small functions of their own: inlined into
# the big kernel body, LLVM stopped vectorizing them (measured 3x slower per row).
@numba.njit(fastmath={"nnan", "nsz", "reassoc", "contract"})
def _scale_add_max(buf, o, n, scale, add):
    # nnan lets LLVM vectorize the max; a NaN score still reaches the output through
    # exp(s - max), and rows whose max is -inf are rescanned for NaN by the caller.
    # Slices, not buf[o + c]: an index of unknown sign gets Numba's wraparound, which turns
    # the loop into gathers and scatters.
    row = buf[o:o + n]
    mx = buf.dtype.type(-np.inf)
    for c in range(n):
        s = row[c] * scale + add
        row[c] = s
        mx = _maxnum(mx, s)
    return mx


@numba.njit(fastmath={"nnan", "nsz", "reassoc", "contract"})
def _scale_mask_max(buf, o, n, scale, mask, mo):
    row = buf[o:o + n]
    mrow = mask[mo:mo + n]
    mx = buf.dtype.type(-np.inf)
    for c in range(n):
        s = row[c] * scale + mrow[c]
        row[c] = s
        mx = _maxnum(mx, s)
    return mx


@numba.njit(fastmath={"nsz", "reassoc", "contract"})
def _exp_row(sbuf, pbuf, o, n, m):
    row = sbuf[o:o + n]
    prow = pbuf[o:o + n]
    rs = sbuf.dtype.type(0)
    for c in range(n):
        p = _exp(row[c] - m)
        rs += p
        prow[c] = _to_operand(p, pbuf)
    return rs


# --------------------------------------------------------------------------- packing
@numba.njit(parallel=True, cache=True)
def pack_kt(k3, out, bk):
    """out[b, t, e, c] = k3[b, t*bk + c, e] (zero past the end): K^T tiles for Q @ K^T."""
    nb, s, e = k3.shape
    nt = out.shape[1]
    for w in prange(nb * nt):
        b, t = w // nt, w % nt
        for c in range(bk):
            j = t * bk + c
            if j < s:
                for x in range(e):
                    out[b, t, x, c] = k3[b, j, x]
            else:
                for x in range(out.shape[2]):
                    out[b, t, x, c] = 0


@numba.njit(parallel=True, cache=True)
def pack_kt_pairs(k3, out, bk):
    """bf16: out[b, t, p, c] = k[b, t*bk+c, 2p] | k[b, t*bk+c, 2p+1] << 16 (uint32 pairs)."""
    nb, s, e = k3.shape
    nt, ep = out.shape[1], out.shape[2]
    for w in prange(nb * nt):
        b, t = w // nt, w % nt
        for c in range(bk):
            j = t * bk + c
            for p in range(ep):
                lo = np.uint32(0)
                hi = np.uint32(0)
                if j < s:
                    lo = np.uint32(k3[b, j, 2 * p])
                    if 2 * p + 1 < e:
                        hi = np.uint32(k3[b, j, 2 * p + 1])
                out[b, t, p, c] = lo | (hi << np.uint32(16))


@numba.njit(parallel=True, cache=True)
def pack_v_pairs(v3, out):
    """bf16: out[b, p, d] = v[b, 2p, d] | v[b, 2p+1, d] << 16, zero padded in p and d."""
    nb, s, ev = v3.shape
    sp, evp = out.shape[1], out.shape[2]
    for w in prange(nb * sp):
        b, p = w // sp, w % sp
        for d in range(evp):
            lo = np.uint32(0)
            hi = np.uint32(0)
            if d < ev:
                if 2 * p < s:
                    lo = np.uint32(v3[b, 2 * p, d])
                if 2 * p + 1 < s:
                    hi = np.uint32(v3[b, 2 * p + 1, d])
            out[b, p, d] = lo | (hi << np.uint32(16))


# --------------------------------------------------------------------------- forward
@numba.njit(parallel=True, cache=True, fastmath={"contract", "reassoc", "nsz"})
def _flash_fwd(q, q_ld, qidx, kp, kidx, vp, vidx, mask, ms0, ms1, ms2, midx, mkind,
               causal, scale,
               seed, thr, dscale, L, S, kq, pair, evp, out, lse, bq, bk):
    """q: flat (Nq*L*q_ld); kp: flat K^T tiles (Nk, nkt, kq, bk); vp: flat (Nv, Sp, evp);
    out: (N, L, Ev) float; lse: (N, L) float. pair = 2 for bf16 (k steps are pairs)."""
    n_out = out.shape[0]
    ev = out.shape[2]
    nqt = (L + bq - 1) // bq
    nkt = (S + bk - 1) // bk
    sp = (S + pair - 1) // pair
    acc_t = out.dtype
    for w in prange(n_out * nqt):
        n, qt = w // nqt, w % nqt
        i0 = qt * bq
        rows = min(bq, L - i0)
        qi, ki, vi, mi = qidx[n], kidx[n], vidx[n], midx[n]
        sbuf = np.empty(bq * bk, acc_t)
        pbuf = np.zeros(bq * bk, q.dtype)
        obuf = np.zeros(bq * evp, acc_t)
        m = np.full(bq, -np.inf, acc_t)
        lsum = np.zeros(bq, acc_t)
        kv_end = S
        if causal:
            kv_end = min(S, i0 + rows)      # top-left aligned: key j is seen by rows i >= j
        for t in range(nkt):
            j0 = t * bk
            if j0 >= kv_end:
                break
            cols = min(bk, S - j0)
            ncols = cols + (cols % pair)    # even for bf16: the pair tail must be zero
            _gemm_a(q, (qi * L + i0) * q_ld, q_ld, kp, ((ki * nkt + t) * kq) * bk, bk,
                    sbuf, 0, bk, rows, min(bk, (cols + 15) // 16 * 16), kq, False)
            for r in range(rows):
                i = i0 + r
                o = r * bk
                ce = cols
                if causal:
                    ce = min(cols, i - j0 + 1)
                if mkind == MASK_ADD:
                    mo = mi * ms0 + i * ms1 + j0 * ms2
                    if ms2 == 1:
                        mx = _scale_mask_max(sbuf, o, ce, scale, mask, mo)
                    else:
                        mx = _scale_add_max(sbuf, o, ce, scale, mask[mo])
                else:
                    mx = _scale_add_max(sbuf, o, ce, scale, sbuf.dtype.type(0))
                m_new = max(m[r], mx)
                if m_new == -np.inf:
                    # nothing seen in this row yet: P is zero; a NaN score still poisons
                    for c in range(ce):
                        if np.isnan(sbuf[o + c]):
                            lsum[r] = np.nan
                    for c in range(ncols):
                        pbuf[o + c] = 0
                    continue
                alpha = math.exp(m[r] - m_new)
                rs = acc_t.type(0)
                if thr == 0:
                    rs = _exp_row(sbuf, pbuf, o, ce, m_new)
                else:
                    base = (np.uint64(n) * np.uint64(L) + np.uint64(i)) * np.uint64(S) \
                        + np.uint64(j0)
                    for c in range(ce):
                        p = _exp(sbuf[o + c] - m_new)
                        rs += p
                        pd = p * dscale if _keep(seed, base + np.uint64(c), thr) else p * 0
                        pbuf[o + c] = _to_operand(pd, pbuf)
                pbuf[o + max(ce, 0):o + ncols] = 0
                lsum[r] = lsum[r] * alpha + rs
                m[r] = m_new
                if alpha != 1:
                    orow = obuf[r * evp:(r + 1) * evp]
                    for d in range(evp):
                        orow[d] *= alpha
            # O += P V (P rows beyond `rows` are never written, they only feed unused rows)
            _gemm_a(pbuf, 0, bk, vp, (vi * sp + j0 // pair) * evp, evp, obuf, 0, evp,
                    rows, evp, ncols // pair, True)
        for r in range(rows):
            i = i0 + r
            ll = lsum[r]
            if ll == 0:
                # fully masked row: zeros, as PyTorch gives (log-sum-exp -inf)
                for d in range(ev):
                    out[n, i, d] = 0
                lse[n, i] = -np.inf
            else:
                inv = 1 / ll
                for d in range(ev):
                    out[n, i, d] = obuf[r * evp + d] * inv
                lse[n, i] = m[r] + math.log(ll)


def _mask_args(mask3, acc):
    """(flat buffer, element strides) of a contiguous (Nm, Lm, Sm) mask, Lm in {1, L} and
    Sm in {1, S}: size-1 dims broadcast through a zero stride."""
    m = np.ascontiguousarray(mask3, acc)
    _, lm, sm = m.shape
    return m.reshape(-1), lm * sm, sm if lm > 1 else 0, 1 if sm > 1 else 0


def _pad16(x: int) -> int:
    return (x + 15) // 16 * 16


def flash_forward(q3, qidx, k3, kidx, v3, vidx, mask3, midx, mkind, causal, scale,
                  seed, dropout_p, n_out, native_bf16=None, bq=None, bk=None):
    """Run the forward kernel on canonical inputs; returns (out, lse) in the compute dtype.

    q3 (Nq, L, E), k3 (Nk, S, E), v3 (Nv, S, Ev): float32, float64, or uint16 bf16 bits;
    *idx: int64 arrays of length n_out naming the entry of each input for each output batch
    entry; mask3 (Nm, Lm, Sm) additive float mask, Lm in {1, L}, Sm in {1, S} (size 1 broadcasts),
    or a dummy with mkind == MASK_NONE. Output float32 for float32/bf16 inputs, float64 for float64.

    Example::

        out, lse = flash_forward(q3, ar, k3, ar, v3, ar, dummy, ar, 0, False, 0.125, 0, 0.0,
                                 len(ar))
    """
    bq = max(1, bq or BQ)
    bk = _pad16(max(1, bk or BK))      # whole vectors, and even for bf16 pairs
    bf16 = q3.dtype == np.uint16
    acc = np.float64 if q3.dtype == np.float64 else np.float32
    L, E = q3.shape[1], q3.shape[2]
    S, Ev = k3.shape[1], v3.shape[2]
    out = np.empty((n_out, L, Ev), acc)
    lse = np.empty((n_out, L), acc)
    if n_out == 0 or L == 0:
        return out, lse
    if S == 0:
        out[...] = 0
        lse[...] = -np.inf
        return out, lse
    nkt = (S + bk - 1) // bk
    evp = _pad16(Ev)
    if bf16:
        if native_bf16 is None:
            native_bf16 = _bd.native_bf16_enabled()
        elif native_bf16 and not _bd.has_avx512_bf16():
            raise NotImplementedError("this CPU has no AVX512-BF16 (vdpbf16ps); pass "
                                      "native_bf16=None or False for the portable kernel")
        e2 = E + (E % 2)
        if e2 != E:
            qq = np.zeros((q3.shape[0], L, e2), np.uint16)
            qq[:, :, :E] = q3
        else:
            qq = np.ascontiguousarray(q3)
        kq = e2 // 2
        kp = np.empty((k3.shape[0], nkt, kq, bk), np.uint32)
        pack_kt_pairs(np.ascontiguousarray(k3), kp, bk)
        vp = np.empty((v3.shape[0], (S + 1) // 2, evp), np.uint32)
        pack_v_pairs(np.ascontiguousarray(v3), vp)
        if not native_bf16:
            kp, vp = kp.view(np.int32), vp.view(np.int32)
        pair, q_ld = 2, e2
    else:
        qq = np.ascontiguousarray(q3)
        kq = E
        kp = np.empty((k3.shape[0], nkt, E, bk), q3.dtype)
        pack_kt(np.ascontiguousarray(k3), kp, bk)
        if evp == Ev and v3.flags.c_contiguous:
            vp = v3
        else:
            vp = np.zeros((v3.shape[0], S, evp), q3.dtype)
            vp[:, :, :Ev] = v3
        pair, q_ld = 1, E
    thr = round(dropout_p * (1 << 24))
    dscale = 1.0 / (1.0 - dropout_p) if dropout_p < 1 else 0.0
    _flash_fwd(qq.reshape(-1), q_ld, qidx, kp.reshape(-1), kidx, vp.reshape(-1), vidx,
               *_mask_args(mask3, acc), midx, mkind, bool(causal), acc(scale), np.uint64(seed),
               np.uint64(thr),
               acc(dscale), L, S, kq, pair, evp, out, lse, bq, bk)
    return out, lse


# --------------------------------------------------------------------------- backward
@numba.njit(parallel=True, cache=True, fastmath={"contract", "reassoc", "nsz"})
def _flash_bwd(q, qidx, kp, k3, kidx, vtp, vidx, do, dd, lse, mask, ms0, ms1, ms2, midx,
               mkind, causal, scale, seed, thr, dscale, L, S, E, Ev, ep, evp, dq, dk, dv, bq, bk):
    """Gradients for every output batch entry n (parallel over n, so no write races):
    dq (N, L, ep), dk (N, S, ep), dv (N, S, evp); q (Nq, L, ep), k3 (Nk, S, ep) padded rows,
    kp / vtp K^T / V^T tiles (N*, nkt, E|Ev, bk); do (N, L, evp); dd = rowsum(dO * O)."""
    n_out = dq.shape[0]
    nkt = (S + bk - 1) // bk
    nqt = (L + bq - 1) // bq
    acc_t = dq.dtype
    for n in prange(n_out):
        qi, ki, vi, mi = qidx[n], kidx[n], vidx[n], midx[n]
        sbuf = np.empty(bq * bk, acc_t)
        dpbuf = np.empty(bq * bk, acc_t)
        dsbuf = np.zeros(bq * bk, acc_t)
        pt = np.zeros(bk * bq, acc_t)
        dst = np.zeros(bk * bq, acc_t)
        dkt = np.empty(bk * ep, acc_t)
        dvt = np.empty(bk * evp, acc_t)
        qf = q.reshape(-1)
        kf = k3.reshape(-1)
        dof = do.reshape(-1)
        dqf = dq[n].reshape(-1)
        for t in range(nkt):
            j0 = t * bk
            cols = min(bk, S - j0)
            ncol16 = min(bk, (cols + 15) // 16 * 16)
            dkt[:] = 0
            dvt[:] = 0
            for qt in range(nqt):
                i0 = qt * bq
                rows = min(bq, L - i0)
                if causal and i0 + rows - 1 < j0:
                    continue
                _gemm_a(qf, (qi * L + i0) * ep, ep, kp, ((ki * nkt + t) * E) * bk, bk,
                        sbuf, 0, bk, rows, ncol16, E, False)
                _gemm_a(dof, (n * L + i0) * evp, evp, vtp, ((vi * nkt + t) * Ev) * bk, bk,
                        dpbuf, 0, bk, rows, ncol16, Ev, False)
                for r in range(rows):
                    i = i0 + r
                    o = r * bk
                    ce = cols
                    if causal:
                        ce = max(0, min(cols, i - j0 + 1))
                    mo = mi * ms0 + i * ms1 + j0 * ms2
                    li = lse[n, i]
                    di = dd[n, i]
                    if li == -np.inf:
                        ce = 0
                    base = (np.uint64(n) * np.uint64(L) + np.uint64(i)) * np.uint64(S) \
                        + np.uint64(j0)
                    for c in range(ce):
                        s = sbuf[o + c] * scale
                        if mkind == MASK_ADD:
                            s += mask[mo + c * ms2]
                        p = _exp(s - li)
                        zs = acc_t.type(1)
                        if thr != 0:
                            zs = dscale if _keep(seed, base + np.uint64(c), thr) else 0
                        ds = p * (dpbuf[o + c] * zs - di) * scale
                        pt[c * bq + r] = p * zs
                        dsbuf[o + c] = ds
                        dst[c * bq + r] = ds
                    for c in range(ce, cols):
                        pt[c * bq + r] = 0
                        dsbuf[o + c] = 0
                        dst[c * bq + r] = 0
                _gemm_a(pt, 0, bq, dof, (n * L + i0) * evp, evp, dvt, 0, evp,
                        cols, evp, rows, True)
                _gemm_a(dst, 0, bq, qf, (qi * L + i0) * ep, ep, dkt, 0, ep,
                        cols, ep, rows, True)
                _gemm_a(dsbuf, 0, bk, kf, (ki * S + j0) * ep, ep, dqf, i0 * ep, ep,
                        rows, ep, cols, True)
            for c in range(cols):
                for x in range(ep):
                    dk[n, j0 + c, x] = dkt[c * ep + x]
                for x in range(evp):
                    dv[n, j0 + c, x] = dvt[c * evp + x]


def _padded(a3, width, dtype):
    if a3.shape[2] == width and a3.dtype == dtype and a3.flags.c_contiguous:
        return a3
    out = np.zeros(a3.shape[:2] + (width,), dtype)
    out[:, :, :a3.shape[2]] = a3
    return out


def flash_backward(dout, out, lse, q3, qidx, k3, kidx, v3, vidx, mask3, midx, mkind, causal,
                   scale, seed, dropout_p, bq=None, bk=None):
    """Gradients of the canonical forward for every output batch entry (not yet reduced
    over broadcast batch dims or GQA groups): returns dq (N, L, E), dk (N, S, E),
    dv (N, S, Ev) in float32 (float64 for float64 inputs; bf16 inputs come as float32).

    Example::

        dq, dk, dv = flash_backward(do, o, lse, q3, ar, k3, ar, v3, ar, dummy, ar, 0, False,
                                    0.125, 0, 0.0)
    """
    bq = max(1, bq or BQ_BWD)
    bk = _pad16(max(1, bk or BK_BWD))
    acc = np.float64 if q3.dtype == np.float64 else np.float32
    n_out, L, Ev = dout.shape
    E, S = q3.shape[2], k3.shape[1]
    dq = np.zeros((n_out, L, _pad16(E)), acc)
    dk = np.zeros((n_out, S, _pad16(E)), acc)
    dv = np.zeros((n_out, S, _pad16(Ev)), acc)
    if n_out == 0 or L == 0 or S == 0:
        return dq[:, :, :E], dk[:, :, :E], dv[:, :, :Ev]
    ep, evp = _pad16(E), _pad16(Ev)
    qp = _padded(q3, ep, acc)
    kpad = _padded(k3, ep, acc)
    dop = _padded(np.asarray(dout, acc), evp, acc)
    nkt = (S + bk - 1) // bk
    kt = np.empty((k3.shape[0], nkt, E, bk), acc)
    pack_kt(np.ascontiguousarray(k3, acc), kt, bk)
    vt = np.empty((v3.shape[0], nkt, Ev, bk), acc)
    pack_kt(np.ascontiguousarray(v3, acc), vt, bk)
    dd = np.einsum("nld,nld->nl", np.asarray(dout, acc), np.asarray(out, acc))
    thr = round(dropout_p * (1 << 24))
    dscale = 1.0 / (1.0 - dropout_p) if dropout_p < 1 else 0.0
    _flash_bwd(qp, qidx, kt.reshape(-1), kpad, kidx, vt.reshape(-1), vidx, dop, dd,
               np.asarray(lse, acc), *_mask_args(mask3, acc), midx, mkind, bool(causal),
               acc(scale),
               np.uint64(seed), np.uint64(thr), acc(dscale), L, S, E, Ev, ep, evp,
               dq, dk, dv, bq, bk)
    return dq[:, :, :E], dk[:, :, :E], dv[:, :, :Ev]
