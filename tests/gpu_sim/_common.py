"""Helpers shared by the GPU kernel tests in this folder.

These files are run in their own pytest process (``tests/test_kernels_gpu.py`` starts it with
``NUMBA_ENABLE_CUDASIM=1``; ``scripts/gpu_check.sh`` runs them on a real device). Shapes are
tiny under the simulator and larger on a device (``SIZE``).
"""
from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("numba_cuda")

from numaccel.kernels_gpu import _runtime as rt  # noqa: E402



def _patch_simulator_shared_arrays():
    """Make the simulator's ``cuda.shared.array`` thread-safe.

    numba-cuda's ``FakeCUDAShared.array`` looks an allocation up by the caller's source line
    and creates it when missing without a lock: two threads of one block that get there at
    the same time can each get a private "shared" array (wrong results, rarely; often with
    the short switch interval below). Same logic, under a lock.
    """
    import threading
    import traceback

    from numba.cuda.simulator import kernelapi

    lock = threading.Lock()
    orig = kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:
            return orig(self, shape, dtype, alignment)
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        caller = traceback.extract_stack(sys._getframe())[-2][0:2]
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    kernelapi.FakeCUDAShared.array = array


if rt.SIM:
    _patch_simulator_shared_arrays()
    # The simulator runs each CUDA thread as a Python thread and its scheduler polls them:
    # a short GIL switch interval makes syncthreads-heavy kernels ~5x faster there.
    sys.setswitchinterval(1e-5)

SIM = rt.SIM
SIZE = 1 if SIM else 8          # scale factor for shapes on a real device
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.float32, np.float16, BF16, np.float64]
# float32 accumulation everywhere; 16-bit results are rounded once at the end
TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 2e-3, BF16: 1.6e-2,
       np.dtype(np.float64): 1e-12}


def tol(dtype) -> float:
    return TOL[np.dtype(dtype)]


def rand(rng, shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)


def f32(a):
    """Any (bf16 included) array -> float64 for comparisons."""
    return np.asarray(a).astype(np.float64)


def assert_close(got, ref, dtype, rtol_scale=1.0, atol=None):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    t = tol(dtype) * rtol_scale
    np.testing.assert_allclose(f32(got), f32(ref), rtol=t, atol=t if atol is None else atol)


def on_device_only():
    return pytest.mark.skipif(SIM, reason="needs a real GPU (CuPy / device arrays)")
