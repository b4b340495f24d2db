"""Side-by-side throughput: numaccel.ckpt save/load on 1, 2, 4 MPI ranks vs plain np.save/np.load.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python scripts/bench_ckpt.py \
        [--gib 1] [--trials 5] [--ranks 1 2 4] [--dir /tmp] [--fsync] [--in-place]

The same total bytes (float32, row-sharded over the ranks) are written by every variant. Trials
are interleaved (np.save, then 1, 2, 4 ranks, then again), so that a machine whose load changes
over time affects all variants alike; a first round is a discarded warm-up. Before each timed
save the page cache is flushed (os.sync) so that earlier trials' dirty pages do not throttle the
next one; loads read from the page cache in every variant, into arrays that already exist.
Printed: median GB/s (1e9 bytes per second) with min/max, and the median over rounds of the
per-round ratio to np.save / np.load. With --in-place each variant instead runs all its trials
in one process, saving to the same path each time (np.save then overwrites its file, and
numaccel.ckpt recycles its spare generation), as a training loop would.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rank_main(args) -> None:
    """One MPI rank: time collective saves and loads of its row block."""
    sys.path.insert(0, REPO)
    from mpi4py import MPI

    from numaccel import ckpt

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    if args.numpy:
        print("RESULT " + json.dumps(_numpy_times(args.rows, args.trials, args.dir, args.fsync)))
        return
    rows, cols = args.rows, 1024
    split = np.array_split(np.arange(rows), n)[rank]
    lo, cnt = int(split[0]), len(split)
    local = np.full((cnt, cols), rank + 0.5, np.float32)
    dest = np.zeros_like(local)
    path = os.path.join(args.dir, "ck")
    saves, loads = [], []
    for _ in range(args.trials):
        if rank == 0:
            os.sync()
        comm.Barrier()
        t = time.perf_counter()
        ckpt.save({"w": ckpt.Shard(local, (lo, 0), (rows, cols))}, path, comm,
                  fsync=args.fsync)
        comm.Barrier()
        saves.append(time.perf_counter() - t)
        comm.Barrier()
        t = time.perf_counter()
        ckpt.load({"w": ckpt.Shard(dest, (lo, 0), (rows, cols))}, path, comm)
        comm.Barrier()
        loads.append(time.perf_counter() - t)
    assert np.array_equal(dest, local)
    if rank == 0:
        print("RESULT " + json.dumps({"save": saves, "load": loads}))


def _numpy_times(rows: int, trials: int, d: str, fsync: bool) -> dict:
    a = np.full((rows, 1024), 0.5, np.float32)
    fn = os.path.join(d, "plain.npy")
    saves, loads = [], []
    for _ in range(trials):
        os.sync()
        t = time.perf_counter()
        with open(fn, "wb") as f:
            np.save(f, a)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        saves.append(time.perf_counter() - t)
        dest = np.zeros_like(a)  # loads fill existing memory in both variants
        t = time.perf_counter()
        with open(fn, "rb") as f:
            np.lib.format.read_magic(f)
            np.lib.format.read_array_header_1_0(f)
            f.readinto(memoryview(dest.reshape(-1).view(np.uint8)))
        loads.append(time.perf_counter() - t)
        t = time.perf_counter()
        np.load(fn)
        loads[-1] = min(loads[-1], time.perf_counter() - t)  # the faster of the two ways
    os.remove(fn)
    return {"save": saves, "load": loads}


def _fmt(nbytes: int, times: list) -> tuple[float, str]:
    rates = [nbytes / t / 1e9 for t in times]
    return statistics.median(rates), (f"{statistics.median(rates):5.2f} GB/s "
                                      f"(min {min(rates):.2f}, max {max(rates):.2f})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gib", type=float, default=1.0)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--dir", default=tempfile.gettempdir())
    p.add_argument("--fsync", action="store_true", help="fsync data in both variants")
    p.add_argument("--in-place", action="store_true",
                   help="repeat saves to the same path within one process per variant (as a "
                        "training loop does) instead of one fresh process per trial")
    p.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rows", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--numpy", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank_worker:
        _rank_main(args)
        return
    rows = int(args.gib * (1 << 30)) // (4 * 1024)
    nbytes = rows * 1024 * 4
    work = tempfile.mkdtemp(prefix="bench_ckpt_", dir=args.dir)
    try:
        from threadpoolctl import threadpool_info
        blas = [(i.get("internal_api"), i.get("architecture")) for i in threadpool_info()]
    except ImportError:
        blas = "threadpoolctl not installed"
    print(f"{nbytes / 2**30:.2f} GiB float32, {args.trials} trials, dir {args.dir}, "
          f"fsync={args.fsync}, BLAS {blas}")
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or "mpiexec"
    res: dict = {"np": {"save": [], "load": []}}
    res.update({n: {"save": [], "load": []} for n in args.ranks})
    try:
        rounds, per_launch = (1, args.trials + 1) if args.in_place else (args.trials + 1, 1)
        for rnd in range(rounds):
            got = {}
            for n in ["np", *args.ranks]:
                # np.save runs in a fresh process launched the same way as the ranks: on these
                # VMs a new process writes much slower than a long-lived one, for both.
                cmd = [mpiexec, "-n", "1" if n == "np" else str(n), sys.executable, "-m",
                       "mpi4py", __file__, "--rank-worker", "--rows", str(rows), "--trials",
                       str(per_launch), "--dir", work] + (["--fsync"] if args.fsync else []) + \
                      (["--numpy"] if n == "np" else [])
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                                     env={**os.environ, "PYTHONPATH": REPO}, check=False)
                if out.returncode:
                    print(out.stdout, out.stderr)
                    raise SystemExit(f"{n} ranks failed")
                got[n] = json.loads(out.stdout.split("RESULT ", 1)[1])
                shutil.rmtree(os.path.join(work, "ck"), ignore_errors=True)
            for k, v in got.items():  # the first trial (of a launch, or round 0) warms up
                first = 1 if args.in_place else (0 if rnd else None)
                if first is not None:
                    res[k]["save"] += v["save"][first:]
                    res[k]["load"] += v["load"][first:]
        _, btxt = _fmt(nbytes, res["np"]["save"])
        _, ltxt = _fmt(nbytes, res["np"]["load"])
        print(f"{'np.save / plain read, 1 process':32s} save {btxt}   load {ltxt}")
        for n in args.ranks:
            _, stxt = _fmt(nbytes, res[n]["save"])
            _, ltxt = _fmt(nbytes, res[n]["load"])
            rs = statistics.median(b / t for b, t in zip(res["np"]["save"], res[n]["save"]))
            rl = statistics.median(b / t for b, t in zip(res["np"]["load"], res[n]["load"]))
            print(f"{f'numaccel.ckpt, {n} rank(s)':32s} save {stxt} = {rs:4.0%} of np.save"
                  f"   load {ltxt} = {rl:4.0%} of plain read")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
