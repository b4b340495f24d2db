"""asv benchmarks of the flash CPU SDPA (numaccel.nn.functional) against PyTorch and NumPy.

``impl`` is ``numaccel``, ``torch`` (its CPU SDPA; skipped when torch is missing) or ``numpy``
(the naive softmax(q k^T) v, float32 math for bf16 inputs); the first call happens in
``setup`` so the timings are the steady state (Numba's compile is cached on disk).

Run from asv_bench/ (see README.md)::

    asv machine --yes && asv run --python=same --bench bench_sdpa
"""
import sys
from pathlib import Path

import numpy as np

try:  # asv imports this file on its own; fall back to the checkout next to asv_bench/
    import numaccel
except ImportError:  # pragma: no cover - depends on how numaccel was installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import numaccel  # noqa: F401

import ml_dtypes

from numaccel.nn import functional as F

BF16 = ml_dtypes.bfloat16
SHAPES = {"B4H8L1024D64": (4, 8, 1024, 64), "B1H4L4096D64": (1, 4, 4096, 64)}


def _inputs(shape, dtype):
    rng = np.random.default_rng(0)
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    return [rng.standard_normal(shape).astype(np.float32).astype(dt) for _ in range(3)]


def _naive(q, k, v, causal):
    dt = q.dtype
    if dt == BF16:
        q, k, v = (x.astype(np.float32) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * np.float32(q.shape[-1] ** -0.5)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, np.float32(-np.inf))
    s = np.exp(s - s.max(-1, keepdims=True))
    out = (s / s.sum(-1, keepdims=True)) @ v
    return out.astype(dt)


class TimeSDPAForward:
    params = (list(SHAPES), ["float32", "bfloat16"], [False, True],
              ["numaccel", "torch", "numpy"])
    param_names = ("shape", "dtype", "causal", "impl")
    timeout = 300

    def setup(self, shape, dtype, causal, impl):
        q, k, v = _inputs(SHAPES[shape], dtype)
        if impl == "numaccel":
            self.fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        elif impl == "torch":
            try:
                import torch
            except ImportError as exc:
                raise NotImplementedError("torch is not installed") from exc
            if dtype == "bfloat16":
                t = [torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) for x in (q, k, v)]
            else:
                t = [torch.from_numpy(x) for x in (q, k, v)]
            self.fn = lambda: torch.nn.functional.scaled_dot_product_attention(
                *t, is_causal=causal)
        else:
            self.fn = lambda: _naive(q, k, v, causal)
        self.fn()

    def time_forward(self, shape, dtype, causal, impl):
        self.fn()


class TimeSDPABackward:
    params = (["float32", "bfloat16"], [False, True])
    param_names = ("dtype", "causal")
    timeout = 300

    def setup(self, dtype, causal):
        self.q, self.k, self.v = _inputs((2, 8, 1024, 64), dtype)
        self.causal = causal
        self.out, self.lse = F.scaled_dot_product_attention_with_lse(
            self.q, self.k, self.v, is_causal=causal)
        self.g = np.ones_like(self.out)
        self.time_backward(dtype, causal)

    def time_backward(self, dtype, causal):
        F.scaled_dot_product_attention_backward(self.g, self.q, self.k, self.v, self.out,
                                                self.lse, is_causal=self.causal)


class PeakMemSDPALong:
    """Memory stays linear in the sequence length: 16384^2 float32 scores would be 1 GiB."""
    timeout = 300

    def setup(self):
        self.q, self.k, self.v = _inputs((1, 1, 16384, 64), "float32")
        F.scaled_dot_product_attention(self.q[:, :, :64], self.k, self.v)

    def peakmem_forward_16384(self):
        F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)
