"""Data-driven choice between the 2:4 kernels and dense BLAS for ``y = x @ W.T``.

The sparse kernels win where the product is memory-bound (few rows of x: half the weight
bytes to stream) and lose to BLAS where it is compute-bound (many rows). Where the
crossover lies depends on the machine, the dtype and the layer size, so it is *measured*:

- ``calibrate()`` times, for each (dtype, layer shape, batch), the dense product
  ``x @ W.T`` (NumPy/BLAS, float32, on the same pruned weight) and each sparse kernel
  (``permute``, ``tiled``), interleaving the runs and taking the best of ``repeats`` (or the
  median), and records the fastest path per batch size.
- ``scripts/bench_sparse24.py --calibrate`` runs it and writes the result to
  ``numaccel/sparse/_dispatch_table.py`` (a plain dict literal, so it ships as code).
  ``NUMACCEL_SPARSE24_TABLE=/path/table.json`` points at a table of one's own
  (``save_table``/``calibrate(path=...)``), e.g. for a different CPU.
- ``choose(n, m, k, dtype)`` looks up the calibrated layer nearest in size (log of
  ``m * k``, same dtype when measured) and returns the path measured fastest at the
  largest measured batch not above ``n``; above the largest batch at which a sparse path
  won, it is always dense.

Example::

    >>> from numaccel.sparse import dispatch
    >>> dispatch.choose(1, 4096, 4096, "float32") in ("permute", "tiled", "dense")
    True
"""
from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable

import numpy as np

PATHS = ("permute", "tiled", "dense")
_TABLE: dict | None = None


def _dtype_name(dtype) -> str:
    return str(np.dtype(dtype))


def load_table() -> dict:
    """The dispatch table in use (env ``NUMACCEL_SPARSE24_TABLE``, else the shipped one)."""
    global _TABLE
    if _TABLE is None:
        path = os.environ.get("NUMACCEL_SPARSE24_TABLE")
        if path:
            with open(path) as f:
                _TABLE = json.load(f)
        else:
            from ._dispatch_table import TABLE
            _TABLE = TABLE
    return _TABLE


def set_table(table: dict | None) -> None:
    """Use ``table`` from now on (``None``: reload the default on next use)."""
    global _TABLE
    _TABLE = table
    _CHOICES.clear()


# (n, m, k, dtype) -> path for the table in use: a decode step takes ~1 ms, so a 20 us
# lookup per call would show
_CHOICES: dict = {}


def save_table(table: dict, path: str) -> None:
    """Write ``table`` as JSON (for ``NUMACCEL_SPARSE24_TABLE``)."""
    with open(path, "w") as f:
        json.dump(table, f, indent=1)


def choose(n: int, m: int, k: int, dtype, table: dict | None = None) -> str:
    """``"permute"``, ``"tiled"`` or ``"dense"`` for ``x (n, k) @ W.T`` with W ``(m, k)``.

    Example::

        >>> choose(512, 4096, 4096, "float32", table={"entries": []})   # no data: dense
        'dense'
    """
    if table is None:
        key = (n, m, k, _dtype_name(dtype))
        hit = _CHOICES.get(key)
        if hit is None:
            hit = _CHOICES[key] = _choose(n, m, k, dtype, load_table())
        return hit
    return _choose(n, m, k, dtype, table)


def _choose(n: int, m: int, k: int, dtype, table: dict) -> str:
    entries = table.get("entries", [])
    name = _dtype_name(dtype)
    same = [e for e in entries if e["dtype"] == name] or \
        [e for e in entries if e["dtype"] == "float32"]
    if not same or m * k == 0:
        # never measured: the permute kernel for a single row is memory-bound everywhere
        return "permute" if n <= 1 else "dense"
    size = math.log(max(m * k, 1))
    e = min(same, key=lambda e: abs(math.log(e["m"] * e["k"]) - size))
    best = e["best"]                         # {batch (str): path}
    batches = sorted(int(b) for b in best)
    sparse_batches = [b for b in batches if best[str(b)] != "dense"]
    if not sparse_batches or n > max(sparse_batches):
        return "dense"
    below = [b for b in batches if b <= n]
    b = below[-1] if below else batches[0]
    return best[str(b)]


def median_times(fns: dict, repeats: int, clock: str = "wall", stat: str = "median") -> dict:
    """Median (or, ``stat="min"``, best) seconds of each zero-argument callable, runs
    interleaved.

    ``clock="wall"``: ``perf_counter`` with all threads (what a user sees, on a quiet
    machine). ``clock="cpu"``: one Numba thread and one BLAS thread, timed with this
    process's CPU time (all its threads: a Numba parallel region runs on a worker thread
    even with one thread, so the calling thread's own CPU time would miss the work), so
    that other processes' load (which preempts threads) does not enter the measurement;
    the crossover it finds is the single-core one.
    """
    import contextlib

    timer = time.perf_counter
    ctx = contextlib.nullcontext()
    old_threads = None
    if clock == "cpu":
        import numba
        from threadpoolctl import threadpool_limits
        timer = time.process_time
        ctx = threadpool_limits(1)
        old_threads = numba.get_num_threads()
        numba.set_num_threads(1)
    elif clock != "wall":
        raise ValueError(f"clock must be 'wall' or 'cpu', got {clock!r}")
    try:
        with ctx:
            for f in fns.values():   # warm up (compile, fill caches and the dense cache)
                f()
            times = {key: [] for key in fns}
            for _ in range(repeats):      # interleaved, so load changes hit all paths alike
                for key, f in fns.items():
                    t = timer()
                    f()
                    times[key].append(timer() - t)
    finally:
        if old_threads is not None:
            import numba
            numba.set_num_threads(old_threads)
    reduce = {"median": np.median, "min": np.min}[stat]
    return {key: float(reduce(v)) for key, v in times.items()}


def calibrate(shapes: Iterable[tuple] = ((4096, 4096), (4096, 11008)),
              dtypes: Iterable = ("float32", "bfloat16"),
              batches: Iterable[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
              repeats: int = 7, path: str | None = None, verbose: bool = False,
              clock: str = "wall", stat: str = "min") -> dict:
    """Measure the fastest path per (dtype, shape, batch); return (and optionally save)
    the table. Takes minutes for the default shapes; run it on a quiet machine with
    ``clock="wall"``, or with ``clock="cpu"`` (see ``median_times``) on a loaded one.
    ``stat="min"`` (default) compares best-of-``repeats`` times, the estimate least
    disturbed by other processes; ``"median"`` is available too.

    Example::

        table = calibrate(shapes=[(1024, 1024)], batches=[1, 64], repeats=3)
    """
    import ml_dtypes

    from numaccel.kernels_cpu import sparse24 as kern
    from numaccel.kernels_cpu.bf16 import bf16_to_float32  # noqa: F401 (warm import)

    from .semi_structured import prune_2_4, to_sparse_semi_structured

    rng = np.random.default_rng(0)
    entries = []
    for dt_name in dtypes:
        dt = np.dtype(ml_dtypes.bfloat16) if dt_name == "bfloat16" else np.dtype(dt_name)
        for (m, k) in shapes:
            w = prune_2_4(rng.standard_normal((m, k), np.float32).astype(dt))
            s = to_sparse_semi_structured(w)
            wd = w.astype(np.float32)
            best, timings = {}, {}
            losing = set()   # kernels that lost by > 2x twice: not timed at larger batches
            strikes = {}
            for n in batches:
                x = rng.standard_normal((n, k), np.float32)
                fns = {"dense": lambda x=x, wd=wd: x @ wd.T}
                for kname in kern.KERNELS:
                    if (kname == "permute" and not kern.HAVE_AVX512) or kname in losing:
                        continue
                    fns[kname] = (lambda kname=kname, x=x, s=s:
                                  kern.linear(x, s.values, s.meta, s.shape, kname))
                t = median_times(fns, repeats, clock, stat)
                for kname in t:
                    if kname != "dense" and t[kname] > 2 * t["dense"]:
                        strikes[kname] = strikes.get(kname, 0) + 1
                        if strikes[kname] >= 2:
                            losing.add(kname)
                best[str(n)] = min(t, key=t.get)
                timings[str(n)] = {key: round(v * 1e3, 4) for key, v in t.items()}
                if verbose:
                    print(dt_name, (m, k), n, timings[str(n)], "->", best[str(n)], flush=True)
            entries.append({"dtype": dt_name, "m": m, "k": k, "best": best,
                            "ms": timings})
    table = {"machine": _machine(), "repeats": repeats, "clock": clock, "stat": stat,
             "entries": entries}
    if path:
        save_table(table, path)
    return table


def _machine() -> dict:
    import platform

    import llvmlite.binding as llvm
    try:
        from threadpoolctl import threadpool_info
        blas = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads"))
                for i in threadpool_info() if i.get("user_api") == "blas"]
    except ImportError:   # threadpoolctl is in the test/bench extras only
        blas = []
    import numba
    return {"cpu": llvm.get_host_cpu_name(), "cores": os.cpu_count(),
            "numba_threads": numba.get_num_threads(), "machine": platform.machine(),
            "blas": blas}
