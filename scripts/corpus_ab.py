"""Interleaved A/B of one corpus program: plain NumPy and @accelerate in one process.

    python scripts/corpus_ab.py chunked_sign_branch M 15 [--corpus ../shared/corpus]

After 5 warm-up calls of the accelerated function, each round times one NumPy call and
then one accelerated call, so both meet the same machine state (page faults, another
process); prints the best and the median of each and their ratios. run_corpus.py and
``numaccel.bench`` time the two in separate processes, where a noisy machine can favour
either side. Unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for BLAS-bound programs.
"""
import argparse
import copy
import importlib.util
import os
import statistics
import time

import numpy as np  # noqa: F401  (the corpus programs import it too)

import numaccel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program")
    ap.add_argument("size", choices=["S", "M"])
    ap.add_argument("rounds", type=int)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--corpus", default=os.environ.get(
        "NUMACCEL_CORPUS", os.path.join(here, "..", "..", "shared", "corpus")))
    opts = ap.parse_args()
    spec = importlib.util.spec_from_file_location(
        opts.program, os.path.join(opts.corpus, opts.program + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = mod.init(opts.size)
    inplace = mod.META.get("inplace", False)

    def fresh():
        return copy.deepcopy(args) if inplace else args

    acc = numaccel.accelerate(mod.kernel)
    for _ in range(5):
        acc(*fresh())
    tn, ta = [], []
    for _ in range(opts.rounds):
        a1, a2 = fresh(), fresh()
        t0 = time.perf_counter()
        mod.kernel(*a1)
        t1 = time.perf_counter()
        acc(*a2)
        t2 = time.perf_counter()
        tn.append(t1 - t0)
        ta.append(t2 - t1)
    mn, ma = statistics.median(tn), statistics.median(ta)
    print(f"{opts.program} {opts.size}: numpy best {min(tn) * 1e3:.1f} ms, median "
          f"{mn * 1e3:.1f} ms; numaccel best {min(ta) * 1e3:.1f} ms, median {ma * 1e3:.1f} "
          f"ms; speedup best/best {min(tn) / min(ta):.2f}x, median/median {mn / ma:.2f}x")


if __name__ == "__main__":
    main()
