"""Side-by-side: numaccel.lower.mathlib in a Numba prange loop vs NumPy's ufunc.

For each function and dtype: time ``out[i] = f(x[i])`` in a parallel Numba loop (the way
fused kernels call mathlib) against ``np.<ufunc>(x, out=out)``, both writing into a
preallocated output, on N elements (default 16M) with T Numba threads (default 2). Prints the
median of R runs in ms and the speedup. Kernels are generated as files in a cache directory
so Numba's on-disk cache makes reruns start warm. Also times one fused expression,
``sin(x)*y + exp(-x)*0.5``, against the NumPy expression.

Run (BLAS settings unset, as for every benchmark here)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python scripts/bench_mathlib.py
    ... --funcs exp,sin --n 1000000 --repeat 5 --threads 2
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

DOMAINS = {
    "exp": (-80, 80), "exp2": (-120, 120), "expm1": (-5, 5), "log": (1e-3, 1e3),
    "log2": (1e-3, 1e3), "log10": (1e-3, 1e3), "log1p": (-0.9, 10), "sin": (-100, 100),
    "cos": (-100, 100), "tan": (-1.5, 1.5), "tanh": (-10, 10), "sinh": (-10, 10),
    "cosh": (-10, 10), "sigmoid": (-20, 20), "arctan": (-10, 10), "arcsin": (-1, 1),
    "arccos": (-1, 1), "erf": (-4, 4), "cbrt": (-1e3, 1e3), "arctan2": (-10, 10),
    "power": (0, 10), "arcsinh": (-100, 100), "arccosh": (1, 100), "arctanh": (-0.99, 0.99),
    "logaddexp": (-10, 10), "logaddexp2": (-10, 10), "hypot": (-10, 10),
}
BINARY = {"arctan2", "power", "logaddexp", "logaddexp2", "hypot"}


def _numpy_ref(name):
    if name == "sigmoid":
        def sig(x, out):
            np.negative(x, out=out)
            np.exp(out, out=out)
            out += 1
            return np.reciprocal(out, out=out)
        return sig
    if name == "erf":
        # NumPy has no erf ufunc; torch's (CPU, vectorized) stands in when installed
        try:
            import torch
        except ImportError:
            return None

        def erf(x, out):
            torch.special.erf(torch.from_numpy(x), out=torch.from_numpy(out))
        return erf
    return getattr(np, name)


_TEMPLATE = '''import numba
from numaccel.lower.mathlib import {fn} as f


@numba.njit(parallel=True, cache=True)
def kernel({args}, out):
    for i in numba.prange(out.size):
        out[i] = f({items})
'''

_FUSED = '''import numba
import numpy as np
from numaccel.lower.mathlib import exp_{s} as e, sin_{s} as s


@numba.njit(parallel=True, cache=True)
def kernel(x, y, out):
    half = np.{dt}(0.5)
    for i in numba.prange(out.size):
        out[i] = s(x[i]) * y[i] + e(-x[i]) * half
'''


def _load(cache: Path, modname: str, src: str):
    path = cache / f"{modname}.py"
    if not path.exists() or path.read_text() != src:
        path.write_text(src)
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel


def _median_ms(fn, repeat):
    fn()                         # warm-up (and compile)
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--funcs", default=",".join(DOMAINS))
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--n", type=int, default=16 * 2 ** 20)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/numaccel/bench_mathlib"))
    a = ap.parse_args(argv)

    import numba
    from threadpoolctl import threadpool_info

    numba.set_num_threads(a.threads)
    cache = Path(a.cache)
    cache.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(cache))
    blas = [(i.get("internal_api"), i.get("architecture")) for i in threadpool_info()]
    print(f"# N={a.n} threads={a.threads} repeat={a.repeat} (median ms) numpy {np.__version__}"
          f" numba {numba.__version__} BLAS {blas}")
    print(f"# OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE')}")
    print(f"| {'function':9s} | {'dtype':7s} | {'mathlib ms':>10s} | {'numpy ms':>9s} | "
          f"{'speedup':>7s} |")
    print(f"|{'-' * 11}|{'-' * 9}|{'-' * 12}|{'-' * 11}|{'-' * 9}|")
    rng = np.random.default_rng(0)
    for dt in a.dtypes.split(","):
        sfx = {"float32": "f32", "float64": "f64"}[dt]
        for name in a.funcs.split(","):
            lo, hi = DOMAINS[name]
            nargs = 2 if name in BINARY else 1
            xs = [rng.uniform(lo, hi, a.n).astype(dt) for _ in range(nargs)]
            if name == "power":
                xs[1] = rng.uniform(-3, 3, a.n).astype(dt)
            out = np.empty(a.n, dt)
            args = ", ".join("abcd"[:nargs])
            items = ", ".join(f"{c}[i]" for c in "abcd"[:nargs])
            k = _load(cache, f"k_{name}_{sfx}",
                      _TEMPLATE.format(fn=f"{name}_{sfx}", args=args, items=items))
            t_ml = _median_ms(lambda k=k, xs=xs, out=out: k(*xs, out), a.repeat)
            ref = _numpy_ref(name)
            t_np = (_median_ms(lambda ref=ref, xs=xs, out=out: ref(*xs, out=out), a.repeat)
                    if ref else math.nan)
            label = name + ("*" if name == "erf" else "")
            print(f"| {label:9s} | {dt:7s} | {t_ml:10.2f} | {t_np:9.2f} | "
                  f"{t_np / t_ml:6.2f}x |", flush=True)
        x = rng.uniform(-5, 5, a.n).astype(dt)
        y = rng.uniform(-5, 5, a.n).astype(dt)
        out = np.empty(a.n, dt)
        k = _load(cache, f"k_fused_{sfx}", _FUSED.format(s=sfx, dt=dt))
        t_ml = _median_ms(lambda k=k, x=x, y=y, out=out: k(x, y, out), a.repeat)
        h = np.dtype(dt).type(0.5)
        t_np = _median_ms(lambda x=x, y=y, h=h: np.sin(x) * y + np.exp(-x) * h, a.repeat)
        print(f"| {'fused':9s} | {dt:7s} | {t_ml:10.2f} | {t_np:9.2f} | "
              f"{t_np / t_ml:6.2f}x |", flush=True)
    print("# fused = sin(x)*y + exp(-x)*0.5 (NumPy allocates its temporaries); "
          "* erf: NumPy has none, torch.special.erf shown")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
