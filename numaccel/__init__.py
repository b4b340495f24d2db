"""numaccel: make existing NumPy code fast on CPUs and NVIDIA GPUs without rewriting it.

    import numpy as np, numaccel

    @numaccel.accelerate
    def step(u, dt):
        u[1:-1] += dt * (u[2:] - 2 * u[1:-1] + u[:-2])
        return u.sum()
"""
from __future__ import annotations

from . import cpu_features as _cpu_features

# before Numba is imported anywhere: it reads the instruction set once
_cpu_features.init_from_env()
# Numba's OpenMP layer spin-waits: on a loaded machine a parallel region then waits on
# descheduled threads (measured 18-68 ms vs 8-10 ms with workqueue for the same kernel).
# A user's explicit NUMBA_THREADING_LAYER wins.
import os as _os  # noqa: E402
_os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
cpu_capability = _cpu_features.cpu_capability

from .config import config  # noqa: E402  (the object; binds over the submodule name)
from .backends import register_backend, register_kernel, get_backend, list_backends  # noqa
from . import interp as _interp  # noqa: F401  (registers the built-in backends)

__version__ = "0.1.0"

# Heavy subsystems load on first use so `import numaccel` stays cheap and so that,
# e.g., numaccel.ckpt works without importing the compiler. ml_dtypes too: its import
# registers its dtypes' ufunc loops with NumPy (1.2-2.4 s measured with NumPy 2.4.6 and
# ml_dtypes 0.7.0, nearly all in PyUFunc_AddLoop), and a program without bfloat16 arrays
# never needs it (a program with them has imported it already).
_LAZY = {
    "bfloat16": ("ml_dtypes", "bfloat16"),
    "accelerate": ("numaccel.trace.api", "accelerate"),
    "explain": ("numaccel.trace.explain", "explain"),
    "GraphBreakError": ("numaccel.trace.tracer", "GraphBreakError"),
    "Accelerated": ("numaccel.trace.api", "Accelerated"),
    "mark_dynamic": ("numaccel.trace.api", "mark_dynamic"),
    "wait_for_compiles": ("numaccel.trace.background", "wait_for_compiles"),
    "ckpt": ("numaccel.ckpt", None),
    "nn": ("numaccel.nn", None),
    "sparse": ("numaccel.sparse", None),
    "kernels_cpu": ("numaccel.kernels_cpu", None),
    "kernels_gpu": ("numaccel.kernels_gpu", None),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        mod_name, attr = _LAZY[name]
        mod = importlib.import_module(mod_name)
        value = mod if attr is None else getattr(mod, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'numaccel' has no attribute {name!r}")
