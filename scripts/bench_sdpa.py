"""Side-by-side: numaccel's flash SDPA vs PyTorch's CPU SDPA vs a naive NumPy version.

Cases (B, H, L, D): ``main`` = 4, 8, 1024, 64 and ``long`` = 1, 8, 8192, 64, in float32 and
bfloat16, non-causal and causal. Implementations, timed in one process and interleaved (one
run of each per round, so load changes on a shared machine hit all of them alike):

- ``numaccel``: ``numaccel.nn.functional.scaled_dot_product_attention``
- ``torch``: ``torch.nn.functional.scaled_dot_product_attention`` (CPU, its own threads)
- ``numpy``: softmax(q @ k^T * scale) @ v with NumPy's BLAS, one (batch, head) at a time for
  the long case (8 GiB of scores otherwise); for bfloat16 inputs it computes in float32 and
  rounds the result (NumPy has no bf16 BLAS).

Prints median and minimum wall time in ms over R rounds and the speedups. Run with the BLAS
settings unset, as for every benchmark here::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python scripts/bench_sdpa.py
    ... --cases main --dtypes float32 --repeat 9 --no-causal --no-numpy
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from numaccel.kernels_cpu import bf16_dot
from numaccel.nn.functional import scaled_dot_product_attention

CASES = {"main": (4, 8, 1024, 64), "long": (1, 8, 8192, 64)}
BF16 = ml_dtypes.bfloat16


def naive_numpy(q, k, v, causal):
    dt = q.dtype
    q, k, v = (x.astype(np.float32) for x in (q, k, v)) if dt == BF16 else (q, k, v)
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    tri = np.tril(np.ones((L, S), bool)) if causal else None

    def one(qq, kk, vv):
        s = qq @ np.swapaxes(kk, -1, -2) * np.float32(1 / math.sqrt(E))
        if tri is not None:
            s = np.where(tri, s, np.float32(-np.inf))
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        return s @ vv

    if q.shape[0] * q.shape[1] * L * S > 2 ** 28:       # > 1 GiB of scores: per head
        out = np.empty(q.shape[:-1] + (v.shape[-1],), np.float32)
        for b in range(q.shape[0]):
            for h in range(q.shape[1]):
                out[b, h] = one(q[b, h], k[b, h], v[b, h])
    else:
        out = one(q, k, v)
    return out.astype(dt) if dt == BF16 else out


def make_impls(q, k, v, causal, with_numpy):
    impls = {"numaccel": lambda: scaled_dot_product_attention(q, k, v, is_causal=causal)}
    try:
        import torch
        import torch.nn.functional as tf
        if q.dtype == BF16:
            t = [torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) for x in (q, k, v)]
        else:
            t = [torch.from_numpy(x) for x in (q, k, v)]
        impls["torch"] = lambda: tf.scaled_dot_product_attention(*t, is_causal=causal)
    except ImportError:
        print("torch not installed: no PyTorch column")
    if with_numpy:
        impls["numpy"] = lambda: naive_numpy(q, k, v, causal)
    return impls


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
        return ", ".join(f"{d.get('internal_api')} {d.get('version')} "
                         f"arch={d.get('architecture')} threads={d.get('num_threads')}"
                         for d in threadpool_info() if d.get("user_api") == "blas")
    except ImportError:
        return "threadpoolctl not installed"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="main,long")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-causal", action="store_true", help="only non-causal")
    ap.add_argument("--no-numpy", action="store_true", help="skip the naive NumPy column")
    args = ap.parse_args(argv)
    import numba
    try:
        import torch
        tinfo = f"torch {torch.__version__} threads={torch.get_num_threads()}"
    except ImportError:
        tinfo = "no torch"
    print(f"numba threads={numba.get_num_threads()}; {tinfo}; BLAS: {blas_info()}; "
          f"AVX512-BF16 path: {bf16_dot.native_bf16_enabled()}")
    rng = np.random.default_rng(0)
    print(f"{'case':>24} {'dtype':>9} {'causal':>6} | {'impl':>8} {'median ms':>10} "
          f"{'min ms':>8} | vs torch  vs numpy")
    for case in args.cases.split(","):
        B, H, L, D = CASES[case]
        for dname in args.dtypes.split(","):
            dt = {"float32": np.float32, "bfloat16": BF16}[dname]
            q, k, v = (rng.standard_normal((B, H, L, D)).astype(np.float32).astype(dt)
                       for _ in range(3))
            for causal in ([False] if args.no_causal else [False, True]):
                impls = make_impls(q, k, v, causal, not args.no_numpy)
                times = {n: [] for n in impls}
                for fn in impls.values():
                    fn()                                  # compile / warm up
                reps = args.repeat if case == "main" else max(3, args.repeat // 2)
                for _ in range(reps):
                    for n, fn in impls.items():
                        t0 = time.perf_counter()
                        fn()
                        times[n].append(time.perf_counter() - t0)
                med = {n: statistics.median(t) * 1e3 for n, t in times.items()}
                for n in impls:
                    vs_t = f"{med['torch'] / med[n]:7.2f}x" if "torch" in med else "      -"
                    vs_n = f"{med['numpy'] / med[n]:7.2f}x" if "numpy" in med else "      -"
                    print(f"{f'B{B} H{H} L{L} D{D}':>24} {dname:>9} {causal!s:>6} | "
                          f"{n:>8} {med[n]:10.1f} {min(times[n]) * 1e3:8.1f} | {vs_t} {vs_n}")


if __name__ == "__main__":
    main()
