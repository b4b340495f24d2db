"""Side-by-side GPU benchmark: numaccel's numba-cuda kernels vs torch / CuPy / cuBLAS.

``python -m numaccel.kernels_gpu.bench [--quick]`` on a machine with a GPU prints one table:
each row is a case and an implementation with its median time (CUDA events, after warm-up),
achieved bandwidth (GB/s, bytes that must cross HBM at least once) as a share of the measured
device-to-device copy bandwidth, and TFLOP/s where it applies. Cases:

- ``copy``: CuPy device copy, the achievable-HBM-bandwidth reference;
- ``chain``: ``exp(-x) * 0.5 + x * y`` over float32: one fused elementwise kernel vs CuPy's
  unfused ufuncs;
- ``sdpa`` fwd (+bwd): flash SDPA vs ``torch.nn.functional.scaled_dot_product_attention``
  on CUDA (when torch sees the GPU), float16, causal and not;
- ``sparse24``: 2:4 sparse linear vs dense cuBLAS (``cupy.matmul``) on the same weight;
- ``matmul``: the tiled numba-cuda kernel vs cuBLAS; ``softmax``/``sum`` rows vs CuPy/torch.

Example::

    python -m numaccel.kernels_gpu.bench --quick
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def _timer(fn, reps: int, warmup: int = 2) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` runs, timed with CUDA events."""
    import cupy as cp
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return statistics.median(times)


class Table:
    def __init__(self, copy_gbs: float):
        self.rows = []
        self.copy_gbs = copy_gbs

    def add(self, case, impl, ms, nbytes=None, flops=None, ref_ms=None):
        gbs = nbytes / ms / 1e6 if nbytes else None
        self.rows.append((case, impl, ms, gbs, flops / ms / 1e9 if flops else None,
                          ref_ms / ms if ref_ms else None))
        print(self.format_row(self.rows[-1]), flush=True)

    def format_row(self, r):
        case, impl, ms, gbs, tf, rel = r
        pct = f"{100 * gbs / self.copy_gbs:5.1f}%" if gbs and self.copy_gbs else "     -"
        return (f"| {case:<34} | {impl:<22} | {ms:9.3f} | "
                f"{(f'{gbs:8.0f}' if gbs else '       -')} | {pct} | "
                f"{(f'{tf:7.1f}' if tf else '      -')} | "
                f"{(f'{rel:6.2f}x' if rel else '      -')} |")

    @staticmethod
    def header():
        return ("| case                               | impl                   |        ms |"
                "     GB/s | %copy  | TFLOP/s | vs ref  |\n|---|---|---:|---:|---:|---:|---:|")


def run(quick: bool = False) -> int:
    import cupy as cp
    import numpy as np

    from . import (
        elementwise,
        matmul,
        reduce_sum,
        scaled_dot_product_attention,
        scaled_dot_product_attention_backward,
        scaled_dot_product_attention_with_lse,
        softmax,
        sparse24_linear,
    )
    from ._runtime import device_info
    from .sparse24 import Sparse24Device
    reps = 5 if quick else 20
    t_start = time.time()
    print(f"device: {device_info()}; cupy {cp.__version__}")
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        torch, has_torch = None, False
    n = (1 << 24) if quick else (1 << 26)
    x = cp.random.standard_normal(n, dtype=cp.float32)
    y = cp.random.standard_normal(n, dtype=cp.float32)
    ms_copy = _timer(lambda: x.copy(), reps)
    copy_gbs = 2 * x.nbytes / ms_copy / 1e6
    tab = Table(copy_gbs)
    print(Table.header())
    tab.add(f"copy f32 n={n}", "cupy", ms_copy, 2 * x.nbytes)

    chain = elementwise("def chain(x, y):\n    return math.exp(-x) * 0.5 + x * y")
    t0 = time.time()
    chain(x, y)
    cp.cuda.Device().synchronize()
    print(f"  (chain first call incl. JIT: {time.time() - t0:.1f} s)")
    ms_cupy = _timer(lambda: cp.exp(-x) * 0.5 + x * y, reps)
    ms_ours = _timer(lambda: chain(x, y), reps)
    tab.add(f"chain exp(-x)*.5+x*y n={n}", "cupy (unfused ufuncs)", ms_cupy, 3 * x.nbytes)
    tab.add(f"chain exp(-x)*.5+x*y n={n}", "numaccel elementwise", ms_ours, 3 * x.nbytes,
            ref_ms=ms_cupy)

    rows, cols = (4096, 4096) if quick else (8192, 8192)
    xm = cp.random.standard_normal((rows, cols), dtype=cp.float32)
    ms_ref = _timer(lambda: xm.sum(axis=1), reps)
    ms_ours = _timer(lambda: reduce_sum(xm, axis=1), reps)
    tab.add(f"sum rows {rows}x{cols} f32", "cupy", ms_ref, xm.nbytes)
    tab.add(f"sum rows {rows}x{cols} f32", "numaccel reduce", ms_ours, xm.nbytes, ref_ms=ms_ref)
    if has_torch:
        tx = torch.as_tensor(xm, device="cuda")
        ms_ref = _timer(lambda: torch.softmax(tx, dim=-1), reps)
        tab.add(f"softmax rows {rows}x{cols} f32", "torch", ms_ref, 2 * xm.nbytes)
    else:
        ms_ref = None
    ms_ours = _timer(lambda: softmax(xm), reps)
    tab.add(f"softmax rows {rows}x{cols} f32", "numaccel softmax", ms_ours, 2 * xm.nbytes,
            ref_ms=ms_ref)

    B, H, L, D = (2, 16, 1024, 64) if quick else (4, 16, 2048, 64)
    q, k, v = (cp.random.standard_normal((B, H, L, D), dtype=cp.float32).astype(cp.float16)
               for _ in range(3))
    io_bytes = 4 * q.nbytes
    for causal in (False, True):
        flops = 4 * B * H * L * L * D // (2 if causal else 1)
        case = f"sdpa fwd f16 B{B} H{H} L{L} D{D}{' causal' if causal else ''}"
        ms_ref = None
        if has_torch:
            tq, tk, tv = (torch.as_tensor(a, device="cuda") for a in (q, k, v))
            ms_ref = _timer(lambda tq=tq, tk=tk, tv=tv, c=causal:
                            torch.nn.functional.scaled_dot_product_attention(
                                tq, tk, tv, is_causal=c), reps)
            tab.add(case, "torch cuda sdpa", ms_ref, io_bytes, flops)
        t0 = time.time()
        scaled_dot_product_attention(q, k, v, is_causal=causal)
        cp.cuda.Device().synchronize()
        print(f"  (sdpa first call incl. JIT: {time.time() - t0:.1f} s)")
        ms = _timer(lambda c=causal: scaled_dot_product_attention(q, k, v, is_causal=c), reps)
        tab.add(case, "numaccel flash sdpa", ms, io_bytes, flops, ref_ms=ms_ref)
    out, lse = scaled_dot_product_attention_with_lse(q, k, v, is_causal=True)
    g = cp.ones_like(q)
    case = f"sdpa bwd f16 B{B} H{H} L{L} D{D} causal"
    flops = 10 * B * H * L * L * D // 2
    ms_ref = None
    if has_torch:
        tq, tk, tv = (torch.as_tensor(a, device="cuda").requires_grad_() for a in (q, k, v))
        to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        tg = torch.as_tensor(g, device="cuda")
        ms_ref = _timer(lambda: torch.autograd.grad(to, (tq, tk, tv), tg, retain_graph=True),
                        reps)
        tab.add(case, "torch cuda sdpa", ms_ref, 8 * q.nbytes, flops)
    ms = _timer(lambda: scaled_dot_product_attention_backward(g, q, k, v, out, lse,
                                                              is_causal=True), max(3, reps // 4))
    tab.add(case, "numaccel flash sdpa", ms, 8 * q.nbytes, flops, ref_ms=ms_ref)

    from numaccel.sparse import prune_2_4, to_sparse_semi_structured
    M = K = 4096
    N = 2048 if quick else 8192
    rng = np.random.default_rng(0)
    w = prune_2_4(rng.standard_normal((M, K)).astype(np.float32)).astype(np.float16)
    wd = Sparse24Device.from_host(to_sparse_semi_structured(w))
    wdense = cp.asarray(w)
    xs = cp.random.standard_normal((N, K), dtype=cp.float32).astype(cp.float16)
    flops = 2 * N * M * K
    ms_ref = _timer(lambda: xs @ wdense.T, reps)
    tab.add(f"linear f16 {N}x{K} @ ({M}x{K}).T", "cublas dense (cupy)", ms_ref,
            xs.nbytes + wdense.nbytes + N * M * 2, flops)
    ms = _timer(lambda: sparse24_linear(xs, wd), reps)
    tab.add(f"linear f16 {N}x{K} @ ({M}x{K}).T", "numaccel 2:4 sparse", ms,
            xs.nbytes + wd.values.nbytes + wd.meta.nbytes + N * M * 2, flops, ref_ms=ms_ref)
    a32 = xs.astype(cp.float32)
    b32 = wdense.astype(cp.float32)
    ms_ref = _timer(lambda: cp.matmul(a32, b32.T), reps)
    tab.add(f"matmul f32 {N}x{K}x{M}", "cublas (cupy)", ms_ref, None, flops)
    ms = _timer(lambda: matmul(a32, b32, trans_b=True, backend="numba"), max(3, reps // 4))
    tab.add(f"matmul f32 {N}x{K}x{M}", "numaccel tiled matmul", ms, None, flops, ref_ms=ms_ref)
    print(f"total benchmark time {time.time() - t_start:.0f} s "
          f"(vs ref > 1 means numaccel is faster)")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m numaccel.kernels_gpu.bench")
    p.add_argument("--quick", action="store_true", help="smaller shapes and fewer repeats")
    a = p.parse_args(argv)
    from ._runtime import SIM, have_cupy
    if SIM or not have_cupy():
        print("no CUDA device with CuPy here: nothing to benchmark", file=sys.stderr)
        return 2
    return run(a.quick)


if __name__ == "__main__":
    sys.exit(main())
