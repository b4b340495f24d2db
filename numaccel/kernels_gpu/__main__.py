"""``python -m numaccel.kernels_gpu --build-check [--cc 90,80] [--quick] [--only NAME]
[--no-ptxas]``: PTX build check of every kernel (see ``numaccel.kernels_gpu.build``)."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m numaccel.kernels_gpu")
    p.add_argument("--build-check", action="store_true",
                   help="compile every kernel and signature to PTX; print one line each")
    p.add_argument("--cc", default="90,80", help="compute capabilities, e.g. 90,80")
    p.add_argument("--only", default=None, help="only kernels whose label contains this")
    p.add_argument("--quick", action="store_true",
                   help="one signature per kernel family (the CI subset)")
    p.add_argument("--jobs", type=int, default=1,
                   help="worker processes (default 1; 0 = one per CPU)")
    p.add_argument("--shard", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-ptxas", action="store_true", help="skip assembling with ptxas")
    a = p.parse_args(argv)
    if not a.build_check:
        p.print_help()
        return 2
    from .build import build_check
    ccs = [(int(c[:-1]), int(c[-1])) for c in a.cc.split(",") if c]
    import os
    shard = tuple(int(v) for v in a.shard.split("/")) if a.shard else None
    jobs = a.jobs if a.jobs > 0 else (os.cpu_count() or 1)
    _, failed = build_check(ccs, use_ptxas=not a.no_ptxas, only=a.only, quick=a.quick,
                            jobs=jobs, shard=shard)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
