"""asv benchmarks of numaccel.kernels_gpu on a CUDA device (skipped where there is none).

Each ``time_*`` launches on CuPy arrays already on the device and synchronizes, so it measures
the kernel (and its Python launch overhead), not transfers; the first call (JIT) is made in
``setup``. Parameter ``impl`` compares numaccel's numba-cuda kernel with the vendor/library
path on the same data (CuPy ufuncs, cuBLAS through CuPy, torch's CUDA SDPA). A combination
that cannot run here (no GPU, no CuPy, no CUDA torch) raises NotImplementedError in setup,
which asv reports as skipped. The side-by-side table with bandwidth and FLOP/s is
``python -m numaccel.kernels_gpu.bench``.

Run from asv_bench/ (see README.md)::

    asv run --python=same --bench bench_gpu
"""
import sys
from pathlib import Path

import numpy as np

try:
    import numaccel  # noqa: F401
except ImportError:  # pragma: no cover - depends on how numaccel was installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _need_gpu():
    try:
        from numaccel.kernels_gpu import _runtime
    except ImportError as exc:
        raise NotImplementedError(f"numba-cuda missing: {exc}") from None
    if _runtime.SIM or not _runtime.have_cupy():
        raise NotImplementedError("no CUDA device with CuPy")
    import cupy
    return cupy


def _torch_cuda():
    try:
        import torch
    except ImportError:
        raise NotImplementedError("torch missing") from None
    if not torch.cuda.is_available():
        raise NotImplementedError("torch has no CUDA device")
    return torch


class Elementwise:
    params = (["numaccel", "cupy"], [1 << 20, 1 << 24])
    param_names = ["impl", "n"]

    def setup(self, impl, n):
        cp = _need_gpu()
        from numaccel.kernels_gpu import elementwise
        self.cp = cp
        self.x = cp.random.standard_normal(n, dtype=cp.float32)
        self.y = cp.random.standard_normal(n, dtype=cp.float32)
        if impl == "numaccel":
            k = elementwise("def chain(x, y):\n    return math.exp(-x) * 0.5 + x * y")
            self.fn = lambda: k(self.x, self.y)
        else:
            self.fn = lambda: cp.exp(-self.x) * 0.5 + self.x * self.y
        self.fn()
        cp.cuda.Device().synchronize()

    def time_chain(self, impl, n):
        self.fn()
        self.cp.cuda.Device().synchronize()


class SDPA:
    params = (["numaccel", "torch"], [False, True])
    param_names = ["impl", "causal"]

    def setup(self, impl, causal):
        cp = _need_gpu()
        self.cp = cp
        q, k, v = (cp.random.standard_normal((2, 16, 1024, 64), dtype=cp.float32)
                   .astype(cp.float16) for _ in range(3))
        if impl == "numaccel":
            from numaccel.kernels_gpu import scaled_dot_product_attention as f
            self.fn = lambda: f(q, k, v, is_causal=causal)
        else:
            torch = _torch_cuda()
            tq, tk, tv = (torch.as_tensor(a, device="cuda") for a in (q, k, v))
            self.fn = lambda: torch.nn.functional.scaled_dot_product_attention(
                tq, tk, tv, is_causal=causal)
        self.fn()
        cp.cuda.Device().synchronize()

    def time_forward(self, impl, causal):
        self.fn()
        self.cp.cuda.Device().synchronize()


class Linear24:
    params = (["numaccel_2to4", "cublas_dense"],)
    param_names = ["impl"]

    def setup(self, impl):
        cp = _need_gpu()
        from numaccel.kernels_gpu import sparse24_linear
        from numaccel.kernels_gpu.sparse24 import Sparse24Device
        from numaccel.sparse import prune_2_4, to_sparse_semi_structured
        self.cp = cp
        rng = np.random.default_rng(0)
        w = prune_2_4(rng.standard_normal((4096, 4096)).astype(np.float32)).astype(np.float16)
        x = cp.random.standard_normal((2048, 4096), dtype=cp.float32).astype(cp.float16)
        if impl == "numaccel_2to4":
            wd = Sparse24Device.from_host(to_sparse_semi_structured(w))
            self.fn = lambda: sparse24_linear(x, wd)
        else:
            wt = cp.asarray(w).T
            self.fn = lambda: x @ wt
        self.fn()
        cp.cuda.Device().synchronize()

    def time_linear(self, impl):
        self.fn()
        self.cp.cuda.Device().synchronize()


class Matmul:
    params = (["numba", "cublas"],)
    param_names = ["backend"]

    def setup(self, backend):
        cp = _need_gpu()
        from numaccel.kernels_gpu import matmul
        self.cp = cp
        a = cp.random.standard_normal((2048, 2048), dtype=cp.float32)
        b = cp.random.standard_normal((2048, 2048), dtype=cp.float32)
        bias = cp.zeros(2048, cp.float32)
        self.fn = lambda: matmul(a, b, bias, "gelu", backend=backend)
        self.fn()
        cp.cuda.Device().synchronize()

    def time_matmul_gelu(self, backend):
        self.fn()
        self.cp.cuda.Device().synchronize()
