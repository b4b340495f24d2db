"""2:4 sparse linear vs dense NumPy matmul, side by side; and the dispatch calibration.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python scripts/bench_sparse24.py
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python scripts/bench_sparse24.py --calibrate

The table: for each layer (out x in), dtype and batch, the median time of the dense
float32 product ``x @ W.T`` (NumPy -> BLAS, on the same pruned weight, upcast to float32
for bf16 rows) and of ``numaccel.sparse.linear(x, S)`` with the measured dispatch (auto),
plus each sparse kernel alone. Runs are interleaved (dense, sparse, dense, ...) so that
load from other processes hits all columns alike; medians of ``--repeats`` runs.

``--calibrate`` measures (best of ``--repeats`` interleaved runs, batches 1, 2, 4, ..., 512)
the crossover table that ``numaccel.sparse.dispatch`` uses and rewrites
``numaccel/sparse/_dispatch_table.py`` (or ``--out table.json``, to be used through
``NUMACCEL_SPARSE24_TABLE``). Re-run it on a new machine, on a quiet one with the default
``--clock wall``; on a loaded (shared) one ``--clock cpu`` runs everything on one thread
(Numba and BLAS) and times the process's CPU time instead, which other processes' load
inflates far less than wall time (it still counts cache and frequency effects).
"""
from __future__ import annotations

import argparse
import json
import os
import pprint
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ml_dtypes

from numaccel.kernels_cpu import sparse24 as kern
from numaccel.sparse import dispatch, linear, prune_2_4, to_sparse_semi_structured

TABLE_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "numaccel",
                        "sparse", "_dispatch_table.py")


def blas_info() -> str:
    from threadpoolctl import threadpool_info
    return ", ".join(f"{i['internal_api']} {i.get('version')} arch={i.get('architecture')} "
                     f"threads={i.get('num_threads')}"
                     for i in threadpool_info() if i["user_api"] == "blas")


def medians(fns: dict, repeats: int, clock: str) -> dict:
    return {k: v * 1e3 for k, v in dispatch.median_times(fns, repeats, clock).items()}


def side_by_side(shapes, dtypes, batches, repeats, clock):
    rng = np.random.default_rng(0)
    rows = []
    threads = 1 if clock == "cpu" else __import__("numba").get_num_threads()
    print(f"BLAS: {blas_info()}; threads: {threads}; clock: {clock}; "
          f"AVX-512 permute kernel: {kern.HAVE_AVX512}; dispatch table clock: "
          f"{dispatch.load_table().get('clock', '-')}")
    hdr = (f"{'layer':>12} {'dtype':>8} {'batch':>5} | {'dense f32 ms':>12} "
           f"{'sparse ms':>10} {'speedup':>7} {'path':>6} | "
           + " ".join(f"{kn:>8}" for kn in kern.KERNELS))
    print(hdr)
    print("-" * len(hdr))
    for (m, k) in shapes:
        w32 = prune_2_4(rng.standard_normal((m, k), np.float32))
        for dt_name in dtypes:
            dt = np.dtype(ml_dtypes.bfloat16) if dt_name == "bfloat16" else np.dtype(dt_name)
            w = w32.astype(dt)
            wd = w.astype(np.float32)       # the dense product runs in float32 (BLAS)
            s = to_sparse_semi_structured(w)
            for n in batches:
                x = rng.standard_normal((n, k), np.float32).astype(dt)
                xd = x.astype(np.float32)
                fns = {"dense": lambda xd=xd, wd=wd: xd @ wd.T,
                       "auto": lambda x=x, s=s: linear(x, s)}
                x32 = np.ascontiguousarray(xd)
                for kname in kern.KERNELS:
                    if kname == "permute" and (not kern.HAVE_AVX512 or n > 64):
                        continue          # the permute kernel is for few rows only
                    fns[kname] = (lambda kname=kname, x32=x32, s=s:
                                  kern.linear(x32, s.values, s.meta, s.shape, kname))
                t = medians(fns, repeats if n <= 64 else max(3, repeats // 2), clock)
                path = dispatch.choose(n, m, k, dt)
                row = {"layer": f"{m}x{k}", "dtype": dt_name, "batch": n,
                       "dense_ms": t["dense"], "sparse_ms": t["auto"],
                       "speedup": t["dense"] / t["auto"], "path": path,
                       **{f"{kn}_ms": t.get(kn) for kn in kern.KERNELS}}
                rows.append(row)
                ks = " ".join(f"{t[kn]:8.3f}" if kn in t else f"{'-':>8}"
                              for kn in kern.KERNELS)
                print(f"{row['layer']:>12} {dt_name:>8} {n:>5} | {t['dense']:12.3f} "
                      f"{t['auto']:10.3f} {row['speedup']:6.2f}x {path:>6} | {ks}",
                      flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibrate", action="store_true",
                    help="measure the dispatch table and write it")
    ap.add_argument("--out", help="with --calibrate: write JSON here instead of the "
                    "shipped numaccel/sparse/_dispatch_table.py")
    ap.add_argument("--shapes", default="4096x4096,4096x11008")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--batches", default="1,8,64,512")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--json", help="also write the side-by-side rows as JSON here")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: perf_counter, all threads (quiet machine); cpu: one thread, "
                    "thread CPU time (robust to other processes' load)")
    a = ap.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    dtypes = a.dtypes.split(",")
    batches = [int(b) for b in a.batches.split(",")]
    if a.calibrate:
        if a.batches == "1,8,64,512":
            batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
        table = dispatch.calibrate(shapes, dtypes, batches, repeats=a.repeats,
                                   verbose=True, clock=a.clock, stat="min")
        table["how"] = ("scripts/bench_sparse24.py --calibrate (best of interleaved "
                        f"runs, clock={a.clock}, "
                        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
        if a.out:
            dispatch.save_table(table, a.out)
        else:
            with open(TABLE_PY, "w") as f:
                f.write('"""Measured 2:4 dispatch table, written by\n'
                        '``scripts/bench_sparse24.py --calibrate``: do not edit by hand.\n\n'
                        'How it was measured: ``TABLE["how"]``; how to re-measure: '
                        'numaccel/sparse/dispatch.py.\n"""\n')
                f.write("TABLE = " + pprint.pformat(table, width=96, sort_dicts=False) + "\n")
        print("wrote", a.out or TABLE_PY)
        return
    rows = side_by_side(shapes, dtypes, batches, a.repeats, a.clock)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"blas": blas_info(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
