"""Workloads for ``python -m numaccel.bench``: each one as NumPy, numexpr and hand-written Numba.

A workload is a NumPy function (what a user writes, and what numaccel and torch.compile get),
optionally the same computation written for numexpr and written for Numba the way an expert
would (parallel ``prange`` loops, one fused pass per row or element, outputs allocated by NumPy
outside the kernel because Numba's own large allocations miss transparent huge pages on these
machines), plus an input builder and the tolerances against the NumPy result.

Example::

    from numaccel.bench_workloads import WORKLOADS
    w = WORKLOADS["softmax_f32"]
    args = w.make_args(quick=True)
    ref = w.numpy_fn(*args)
    got = w.numba_fn(*args)          # hand-written Numba baseline
    assert w.matches(got, ref)
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numba
import numpy as np

from .kernels_cpu.bf16 import bf16_to_f32, f32_to_bf16

BF16 = np.dtype(ml_dtypes.bfloat16)
GELU_C = 0.7978845608028654  # sqrt(2 / pi), tanh approximation of GELU
GELU_K = 0.044715
LN_EPS = 1e-5

try:  # numexpr is an optional extra ("bench"); its columns read n/a without it
    import numexpr as ne
except ImportError:  # pragma: no cover - depends on the environment
    ne = None


@dataclass(frozen=True)
class Workload:
    """One benchmark computation in every flavour that applies to it.

    Example::

        w = WORKLOADS["chain_f32"]
        x, y = w.make_args(quick=True)
        w.matches(w.numexpr_fn(x, y), w.numpy_fn(x, y))
    """

    name: str
    description: str
    make_args: Callable[[bool], tuple]
    numpy_fn: Callable[..., Any]
    numexpr_fn: Callable[..., Any] | None = None
    numba_fn: Callable[..., Any] | None = None
    rtol: float = 1e-5
    atol: float = 1e-6
    tiny: bool = False  # per-call overhead workload: timed over many calls, shown in us

    def matches(self, got: Any, ref: Any) -> bool:
        """True when ``got`` has ``ref``'s dtype and shape and is close to it."""
        g, r = np.asarray(got), np.asarray(ref)
        if g.dtype != r.dtype or g.shape != r.shape:
            return False
        if r.dtype == BF16:
            g, r = g.astype(np.float32), r.astype(np.float32)
        return bool(np.allclose(g, r, rtol=self.rtol, atol=self.atol, equal_nan=True))


def _rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# --------------------------------------------------------------------------------------------
# elementwise chain: np.sin(x)*y + np.exp(-x)*0.5
# --------------------------------------------------------------------------------------------

def chain_numpy(x, y):
    return np.sin(x) * y + np.exp(-x) * 0.5


def chain_numexpr(x, y):
    # numexpr treats Python float constants as float64 and would upcast; a float32 scalar
    # keeps the result in the inputs' dtype, as NumPy's NEP 50 rules do
    half = x.dtype.type(0.5)
    return ne.evaluate("sin(x) * y + exp(-x) * half", local_dict={"x": x, "y": y, "half": half})


@numba.njit(parallel=True, fastmath=True)
def _chain_kernel(x, y, out):
    half = np.float32(0.5)
    for i in numba.prange(x.size):
        xi = x[i]
        out[i] = math.sin(xi) * y[i] + math.exp(-xi) * half


def chain_numba(x, y):
    out = np.empty_like(x)
    _chain_kernel(x.reshape(-1), y.reshape(-1), out.reshape(-1))
    return out


@numba.njit(parallel=True, fastmath=True)
def _chain_bf16_kernel(xb, yb, outb):
    half = np.float32(0.5)
    for i in numba.prange(xb.size):
        xi = bf16_to_f32(xb[i])
        outb[i] = f32_to_bf16(math.sin(xi) * bf16_to_f32(yb[i]) + math.exp(-xi) * half)


def chain_bf16_numba(x, y):
    # bf16 storage, float32 arithmetic, one rounding at the store (NumPy rounds after each op)
    out = np.empty(x.shape, np.uint16)
    _chain_bf16_kernel(x.view(np.uint16).reshape(-1), y.view(np.uint16).reshape(-1),
                       out.reshape(-1))
    return out.view(BF16)


def _chain_args(quick: bool, dtype=np.float32):
    n = 1 << 16 if quick else 1 << 24  # 16M elements
    rng = _rng()
    x = rng.uniform(-3.0, 3.0, n).astype(np.float32).astype(dtype)
    y = rng.standard_normal(n).astype(np.float32).astype(dtype)
    return x, y


# --------------------------------------------------------------------------------------------
# row softmax and layernorm
# --------------------------------------------------------------------------------------------

def softmax_numpy(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_numexpr(x):
    m = x.max(axis=-1, keepdims=True)
    e = ne.evaluate("exp(x - m)", local_dict={"x": x, "m": m})
    s = e.sum(axis=-1, keepdims=True)
    return ne.evaluate("e / s", local_dict={"e": e, "s": s})


@numba.njit(parallel=True, fastmath=True)
def _softmax_rows(x, out):
    n, m = x.shape
    for i in numba.prange(n):
        mx = x[i, 0]
        for j in range(1, m):
            mx = max(mx, x[i, j])
        s = np.float32(0.0)
        for j in range(m):
            e = math.exp(x[i, j] - mx)
            out[i, j] = e
            s += e
        inv = np.float32(1.0) / s
        for j in range(m):
            out[i, j] *= inv


def softmax_numba(x):
    x2 = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    out = np.empty_like(x2)
    _softmax_rows(x2, out)
    return out.reshape(x.shape)


def softmax_bf16_numpy(x):
    # the usual mixed-precision pattern: bf16 storage, float32 compute
    p = softmax_numpy(x.astype(np.float32))
    return p.astype(x.dtype)


@numba.njit(parallel=True, fastmath=True)
def _softmax_rows_bf16(xb, outb, scratch):
    n, m = xb.shape
    for i in numba.prange(n):
        row = scratch[numba.get_thread_id()]  # one float32 row per thread, no allocation
        mx = bf16_to_f32(xb[i, 0])
        for j in range(m):
            row[j] = bf16_to_f32(xb[i, j])
            mx = max(mx, row[j])
        s = np.float32(0.0)
        for j in range(m):
            row[j] = math.exp(row[j] - mx)
            s += row[j]
        inv = np.float32(1.0) / s
        for j in range(m):
            outb[i, j] = f32_to_bf16(row[j] * inv)


def softmax_bf16_numba(x):
    xb = np.ascontiguousarray(x).view(np.uint16).reshape(-1, x.shape[-1])
    out = np.empty_like(xb)
    # scratch comes from NumPy: np.empty inside the kernel would also do, but numaccel's
    # tracer replaces numpy.empty process-wide and Numba cannot type the replacement
    scratch = np.empty((numba.config.NUMBA_NUM_THREADS, xb.shape[1]), np.float32)
    _softmax_rows_bf16(xb, out, scratch)
    return out.view(BF16).reshape(x.shape)


def layernorm_numpy(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * gamma + beta


def layernorm_numexpr(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    d = ne.evaluate("x - mu", local_dict={"x": x, "mu": mu})
    var = ne.evaluate("d * d", local_dict={"d": d}).mean(axis=-1, keepdims=True)
    return ne.evaluate("d / sqrt(var + eps) * gamma + beta",
                       local_dict={"d": d, "var": var, "eps": x.dtype.type(LN_EPS),
                                   "gamma": gamma, "beta": beta})


@numba.njit(parallel=True, fastmath=True)
def _layernorm_rows(x, gamma, beta, out):
    n, m = x.shape
    inv_m = np.float32(1.0 / m)
    eps = np.float32(LN_EPS)
    for i in numba.prange(n):
        s = np.float32(0.0)
        for j in range(m):
            s += x[i, j]
        mu = s * inv_m
        v = np.float32(0.0)
        for j in range(m):
            d = x[i, j] - mu
            v += d * d
        r = np.float32(1.0) / math.sqrt(v * inv_m + eps)
        for j in range(m):
            out[i, j] = (x[i, j] - mu) * r * gamma[j] + beta[j]


def layernorm_numba(x, gamma, beta):
    x2 = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    out = np.empty_like(x2)
    _layernorm_rows(x2, gamma, beta, out)
    return out.reshape(x.shape)


def _rows_args(quick: bool, dtype=np.float32):
    n, m = (64, 128) if quick else (4096, 1024)
    x = (3.0 * _rng().standard_normal((n, m)) + 0.5).astype(np.float32).astype(dtype)
    return (x,)


def _layernorm_args(quick: bool):
    (x,) = _rows_args(quick)
    rng = np.random.default_rng(7)
    gamma = rng.uniform(0.5, 1.5, x.shape[-1]).astype(np.float32)
    beta = (0.1 * rng.standard_normal(x.shape[-1])).astype(np.float32)
    return x, gamma, beta


# --------------------------------------------------------------------------------------------
# 2-D heat stencil, explicit time loop
# --------------------------------------------------------------------------------------------

def heat2d_numpy(u, alpha, steps):
    u = u.copy()
    for _ in range(steps):
        c = u[1:-1, 1:-1]
        u[1:-1, 1:-1] += alpha * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                                  - 4.0 * c)
    return u


def heat2d_numexpr(u, alpha, steps):
    u = u.copy()
    for _ in range(steps):
        # the right side is a temporary: writing into u while numexpr reads its
        # neighbours block by block would race
        u[1:-1, 1:-1] = ne.evaluate(
            "c + alpha * (n + s + e + w - 4.0 * c)",
            local_dict={"c": u[1:-1, 1:-1], "n": u[2:, 1:-1], "s": u[:-2, 1:-1],
                        "e": u[1:-1, 2:], "w": u[1:-1, :-2], "alpha": alpha})
    return u


@numba.njit(parallel=True, fastmath=True)
def _heat_steps(u, v, alpha, steps):
    n, m = u.shape
    for _ in range(steps):
        for i in numba.prange(1, n - 1):
            for j in range(1, m - 1):
                c = u[i, j]
                v[i, j] = c + alpha * (u[i + 1, j] + u[i - 1, j] + u[i, j + 1] + u[i, j - 1]
                                       - 4.0 * c)
        u, v = v, u
    return u


def heat2d_numba(u, alpha, steps):
    a = u.copy()
    b = u.copy()  # boundary rows/columns stay fixed in both ping-pong buffers
    return _heat_steps(a, b, alpha, steps)


def _heat_args(quick: bool):
    n, steps = (64, 5) if quick else (1024, 40)
    u = _rng().random((n, n))
    u[0, :] = 1.0
    return u, 0.2, steps


# --------------------------------------------------------------------------------------------
# Jacobi sweeps until the update is small: a while loop on a computed value
# --------------------------------------------------------------------------------------------

def jacobi_numpy(f, h, tol, max_iter):
    u = np.zeros_like(f)
    err = np.inf
    it = 0
    while err > tol and it < max_iter:
        u_new = u.copy()
        u_new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                    - h * h * f[1:-1, 1:-1])
        err = np.abs(u_new - u).max()
        u = u_new
        it += 1
    return u


@numba.njit
def jacobi_numba(f, h, tol, max_iter):
    n, m = f.shape
    u = np.zeros_like(f)
    v = np.zeros_like(f)        # the boundary stays zero in both buffers
    err = np.inf
    it = 0
    while err > tol and it < max_iter:
        err = 0.0
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                x = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                            - h * h * f[i, j])
                err = max(err, abs(x - u[i, j]))
                v[i, j] = x
        u, v = v, u
        it += 1
    return u


def _jacobi_args(quick: bool):
    n, max_iter = (32, 20) if quick else (256, 300)
    f = _rng().uniform(-1.0, 1.0, (n, n))
    return f, 1.0 / (n - 1), 1e-12, max_iter


# --------------------------------------------------------------------------------------------
# matmul with a bias + GELU epilogue
# --------------------------------------------------------------------------------------------

def matmul_gelu_numpy(x, w, b):
    h = x @ w + b
    return 0.5 * h * (1.0 + np.tanh(0.7978845608028654 * (h + 0.044715 * h ** 3)))


def matmul_gelu_numexpr(x, w, b):
    h = x @ w
    t = x.dtype.type  # float32 constants keep numexpr from upcasting to float64
    return ne.evaluate("half * (h + b) * (one + tanh(c * ((h + b) + k * (h + b) ** 3)))",
                       local_dict={"h": h, "b": b, "c": t(GELU_C), "k": t(GELU_K),
                                   "half": t(0.5), "one": t(1.0)})


@numba.njit(parallel=True, fastmath=True)
def _bias_gelu_rows(h, b, out):
    n, m = h.shape
    c, k, half = np.float32(GELU_C), np.float32(GELU_K), np.float32(0.5)
    for i in numba.prange(n):
        for j in range(m):
            v = h[i, j] + b[j]
            out[i, j] = half * v * (np.float32(1.0) + math.tanh(c * (v + k * v * v * v)))


def matmul_gelu_numba(x, w, b):
    h = x @ w  # BLAS sgemm, as an expert would; the epilogue is one fused parallel pass
    _bias_gelu_rows(h, b, h)
    return h


def matmul_gelu_bf16_numpy(x, w, b):
    f = np.float32
    y = matmul_gelu_numpy(x.astype(f), w.astype(f), b.astype(f))
    return y.astype(x.dtype)


@numba.njit(parallel=True)
def _widen_bf16(src, dst):
    for i in numba.prange(src.size):
        dst[i] = bf16_to_f32(src[i])


def _to_f32(a):
    out = np.empty(a.shape, np.float32)
    _widen_bf16(np.ascontiguousarray(a).view(np.uint16).reshape(-1), out.reshape(-1))
    return out


@numba.njit(parallel=True, fastmath=True)
def _bias_gelu_rows_bf16(h, b, outb):
    n, m = h.shape
    c, k, half = np.float32(GELU_C), np.float32(GELU_K), np.float32(0.5)
    for i in numba.prange(n):
        for j in range(m):
            v = h[i, j] + b[j]
            g = half * v * (np.float32(1.0) + math.tanh(c * (v + k * v * v * v)))
            outb[i, j] = f32_to_bf16(g)


def matmul_gelu_bf16_numba(x, w, b):
    h = _to_f32(x) @ _to_f32(w)
    out = np.empty(h.shape, np.uint16)
    _bias_gelu_rows_bf16(h, _to_f32(b), out)
    return out.view(BF16)


def _matmul_args(quick: bool, dtype=np.float32):
    n, k, m = (64, 64, 64) if quick else (2048, 1024, 1024)
    rng = _rng()
    x = rng.standard_normal((n, k)).astype(np.float32)
    w = (rng.standard_normal((k, m)) / np.sqrt(k)).astype(np.float32)
    b = (0.1 * rng.standard_normal(m)).astype(np.float32)
    return x.astype(dtype), w.astype(dtype), b.astype(dtype)


# --------------------------------------------------------------------------------------------
# per-call overhead on 10-element inputs
# --------------------------------------------------------------------------------------------

def tiny_numpy(a, b, c):
    return a * b + c


def tiny_numexpr(a, b, c):
    return ne.evaluate("a * b + c", local_dict={"a": a, "b": b, "c": c})


@numba.njit
def tiny_numba(a, b, c):
    # an expert would not go parallel for ten elements; np.empty here is tiny, no page faults
    out = np.empty_like(a)
    for i in range(a.size):
        out[i] = a[i] * b[i] + c[i]
    return out


def _tiny_args(quick: bool):
    rng = _rng()
    return tuple(rng.standard_normal(10) for _ in range(3))


# --------------------------------------------------------------------------------------------

def _ne(fn):
    return fn if ne is not None else None


_BF16_TOL = {"rtol": 3e-2, "atol": 2e-2}
_LIST = [
    Workload("chain_f32", "np.sin(x)*y + np.exp(-x)*0.5, 16M float32",
             _chain_args, chain_numpy, _ne(chain_numexpr), chain_numba, 1e-5, 1e-6),
    Workload("softmax_f32", "row softmax, 4096x1024 float32",
             lambda q: _rows_args(q), softmax_numpy, _ne(softmax_numexpr), softmax_numba,
             1e-4, 1e-7),
    Workload("layernorm_f32", "row layernorm (gamma, beta), 4096x1024 float32",
             _layernorm_args, layernorm_numpy, _ne(layernorm_numexpr), layernorm_numba,
             1e-4, 1e-4),
    Workload("heat2d_f64", "2-D heat stencil, 40 steps of 1024x1024 float64",
             _heat_args, heat2d_numpy, _ne(heat2d_numexpr), heat2d_numba, 1e-9, 1e-12),
    Workload("matmul_gelu_f32", "(2048x1024 @ 1024x1024) + bias, tanh-GELU, float32",
             _matmul_args, matmul_gelu_numpy, _ne(matmul_gelu_numexpr), matmul_gelu_numba,
             1e-4, 1e-4),
    Workload("chain_bf16", "np.sin(x)*y + np.exp(-x)*0.5, 16M bfloat16 (NumPy rounds per op)",
             lambda q: _chain_args(q, BF16), chain_numpy, None, chain_bf16_numba, **_BF16_TOL),
    Workload("softmax_bf16", "row softmax, bf16 storage / float32 compute, 4096x1024",
             lambda q: _rows_args(q, BF16), softmax_bf16_numpy, None, softmax_bf16_numba,
             **_BF16_TOL),
    Workload("matmul_gelu_bf16", "bf16 matmul + bias + GELU, float32 compute, 2048x1024x1024",
             lambda q: _matmul_args(q, BF16), matmul_gelu_bf16_numpy, None,
             matmul_gelu_bf16_numba, **_BF16_TOL),
    Workload("jacobi_while", "Jacobi sweeps while err > tol, 256x256 float64 (300 sweeps)",
             _jacobi_args, jacobi_numpy, None, jacobi_numba, 1e-9, 1e-12),
    Workload("overhead_tiny", "a*b + c on 10-element float64 arrays (per-call overhead)",
             _tiny_args, tiny_numpy, _ne(tiny_numexpr), tiny_numba, 1e-12, 1e-12, tiny=True),
]
WORKLOADS: dict[str, Workload] = {w.name: w for w in _LIST}
