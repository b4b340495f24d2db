"""asv benchmarks of numaccel.lower.mathlib: a parallel Numba loop calling one function vs
NumPy's ufunc, both writing into a preallocated output (4M elements, float32 and float64).

Kernels are compiled (and called once) in ``setup``; ``time_*`` measure the steady state.
The side-by-side table for 16M elements is ``scripts/bench_mathlib.py``.

Run from asv_bench/::

    asv run --python=same --bench bench_mathlib
"""
import sys
from pathlib import Path

import numpy as np

try:
    import numba

    from numaccel.lower import mathlib
except ImportError:  # pragma: no cover - asv may import this file outside the install
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import numba

    from numaccel.lower import mathlib

N = 4 * 2 ** 20
FUNCS = ["exp", "log", "sin", "tanh", "power"]
DOMAIN = {"exp": (-80, 80), "log": (1e-3, 1e3), "sin": (-100, 100), "tanh": (-10, 10),
          "power": (0, 10)}
_KERNELS = {}


def _kernel(name, dt):
    key = (name, dt)
    if key not in _KERNELS:
        fn = mathlib.MATH_FUNCS[name][dt]
        if name == "power":
            @numba.njit(parallel=True)
            def k(a, b, out):
                for i in numba.prange(out.size):
                    out[i] = fn(a[i], b[i])
        else:
            @numba.njit(parallel=True)
            def k(a, out):
                for i in numba.prange(out.size):
                    out[i] = fn(a[i])
        _KERNELS[key] = k
    return _KERNELS[key]


class MathFunc:
    params = [FUNCS, ["float32", "float64"], ["mathlib", "numpy"]]  # noqa: RUF012
    param_names = ["func", "dtype", "impl"]  # noqa: RUF012
    timeout = 300

    def setup(self, func, dtype, impl):
        rng = np.random.default_rng(0)
        lo, hi = DOMAIN[func]
        self.args = [rng.uniform(lo, hi, N).astype(dtype)]
        if func == "power":
            self.args.append(rng.uniform(-3, 3, N).astype(dtype))
        self.out = np.empty(N, dtype)
        if impl == "mathlib":
            k = _kernel(func, dtype)
            self.call = lambda: k(*self.args, self.out)
        else:
            uf = getattr(np, func)
            self.call = lambda: uf(*self.args, out=self.out)
        self.call()

    def time_call(self, func, dtype, impl):
        self.call()
