"""CUDA kernels written with numba-cuda (the ``cuda`` extra), tested without a GPU.

Kernels (each module's docstring says how it works):

- ``scaled_dot_product_attention`` / ``..._with_lse`` / ``..._backward`` (``sdpa``): flash
  attention forward and backward with torch's semantics;
- ``sparse24_linear`` (``sparse24``): 2:4 sparse linear over ``numaccel.sparse``'s bytes;
- ``matmul`` (``matmul``): tiled matmul with fused bias/activation; cuBLAS through CuPy for
  large dense problems on a real device;
- templates for the compiler's CUDA backend: ``elementwise`` (grid-stride kernel over a fused
  scalar expression, n-d broadcast) and the block reductions ``reduce_sum/max/min/argmax/
  argmin``, ``softmax``, ``layer_norm`` (``reduce``).

Arrays: CuPy arrays and any ``__cuda_array_interface__`` object are used zero-copy (results
come back as CuPy / Numba device arrays; bfloat16 device data as ``Bf16Device``); NumPy
inputs are copied over and results copied back. ``NUMBA_ENABLE_CUDASIM=1`` runs everything on
the CPU simulator; ``python -m numaccel.kernels_gpu --build-check`` compiles all kernels to
PTX for sm_90 and sm_80 without a GPU.

Example::

    import numpy as np
    from numaccel import kernels_gpu as kg
    q = np.random.rand(1, 2, 16, 8).astype(np.float32)
    out = kg.scaled_dot_product_attention(q, q, q, is_causal=True)
"""
from __future__ import annotations

import importlib.util

__all__ = [
    "ACTIVATIONS", "Bf16Device", "ElementwiseKernel", "Sparse24Device", "build_check", "copy",
    "device_info", "elementwise", "is_available", "last_dispatch", "layer_norm", "matmul",
    "reduce_argmax", "reduce_argmin", "reduce_max", "reduce_min", "reduce_sum",
    "render_source", "scaled_dot_product_attention", "scaled_dot_product_attention_backward",
    "scaled_dot_product_attention_with_lse", "softmax", "sparse24_linear",
]


def is_available() -> bool:
    """True when numba-cuda is installed and a device (or the simulator) can run kernels.

    Example: ``if numaccel.kernels_gpu.is_available(): ...``
    """
    if importlib.util.find_spec("numba_cuda") is None:
        return False
    from numba import cuda

    from ._runtime import SIM
    return SIM or bool(cuda.is_available())


if importlib.util.find_spec("numba_cuda") is not None:
    # Eager: binding the functions after their modules are imported keeps
    # ``kernels_gpu.matmul`` the function even though a submodule has the same name.
    from ._runtime import Bf16Device, device_info  # noqa: E402
    from .build import build_check  # noqa: E402
    from .elementwise import ElementwiseKernel, copy, elementwise, render_source  # noqa: E402
    from .matmul import ACTIVATIONS, last_dispatch, matmul  # noqa: E402
    from .reduce import (  # noqa: E402
        layer_norm,
        reduce_argmax,
        reduce_argmin,
        reduce_max,
        reduce_min,
        reduce_sum,
        softmax,
    )
    from .sdpa import (  # noqa: E402
        scaled_dot_product_attention,
        scaled_dot_product_attention_backward,
        scaled_dot_product_attention_with_lse,
    )
    from .sparse24 import Sparse24Device, sparse24_linear  # noqa: E402
else:
    def __getattr__(name):
        if name in __all__:
            raise ImportError(f"numaccel.kernels_gpu.{name} needs numba-cuda: "
                              'pip install "numaccel[cuda]"')
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _sdpa_cuda(q, k, v, attn_mask=None, *, dropout_p=0.0, is_causal=False, scale=None,
               enable_gqa=False, dropout_seed=0):
    from .sdpa import scaled_dot_product_attention
    return scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale,
                                        enable_gqa)


def _sdpa_cuda_supports(q, k, v, attn_mask=None, *, dropout_p=0.0, **attrs) -> bool:
    shapes = [tuple(getattr(a, "shape", ())) for a in (q, k, v)]
    if dropout_p or any(len(s) < 2 for s in shapes) or not is_available():
        return False
    return len({s[:-3] for s in shapes}) == 1


def _register() -> None:
    from ..backends import register_kernel
    register_kernel("sdpa", "cuda", _sdpa_cuda, supports=_sdpa_cuda_supports,
                    name="flash_sdpa_cuda")


_register()
