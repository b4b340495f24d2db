"""Codegen proof without a GPU: compile every kernel and signature to PTX (sm_90, sm_80).

``python -m numaccel.kernels_gpu --build-check`` prints one line per kernel, signature and
compute capability, and a closing ``N passed, M failed`` line (exit status 1 if any failed).
When ``ptxas`` is on ``PATH`` each PTX is also assembled for its ``sm_XY`` target.

numba-cuda compiles *device* functions for the current device's compute capability, which
needs a driver; here that lookup is pointed at the requested target for the duration of the
check (``_target_cc``), so the whole kernel (device functions included) is built for it.
This cannot run inside a ``NUMBA_ENABLE_CUDASIM=1`` process.

Example::

    from numaccel.kernels_gpu.build import build_check
    passed, failed = build_check(ccs=((9, 0),))
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Iterable, Iterator, Optional

DEFAULT_CCS = ((9, 0), (8, 0))


class _FakeDevice:
    def __init__(self, cc):
        self.compute_capability = tuple(cc)


@contextlib.contextmanager
def _target_cc(cc):
    import numba.cuda.dispatcher as disp
    saved = disp.get_current_device
    disp.get_current_device = lambda: _FakeDevice(cc)
    try:
        yield
    finally:
        disp.get_current_device = saved


def all_specs() -> Iterator[tuple]:
    """Every ``(label, dispatcher, argtypes)`` the GPU kernels are checked with."""
    import importlib
    # submodules by full name: the package binds some of these names to functions
    for name in ("elementwise", "reduce", "matmul", "sdpa", "sparse24"):
        yield from importlib.import_module(f"numaccel.kernels_gpu.{name}")._build_specs()


def _ptxas(ptx: str, cc) -> Optional[str]:
    """Assemble with ``ptxas -v``; return its resource summary (registers, spills, smem)."""
    exe = shutil.which("ptxas")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([exe, "-v", f"-arch=sm_{cc[0]}{cc[1]}", src, "-o",
                            os.path.join(d, "k.o")], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"ptxas failed: {r.stderr.strip()[:400]}")
    regs = re.search(r"Used (\d+) registers", r.stderr)
    spill = re.search(r"(\d+) bytes spill stores", r.stderr)
    smem = re.search(r"(\d+) bytes smem", r.stderr)
    return (f"ptxas: {regs.group(1) if regs else '?'} regs, "
            f"{spill.group(1) if spill else '0'} B spill, {smem.group(1) if smem else '0'} B smem")


def quick_specs(specs) -> list:
    """One signature per kernel family (the label's first word): the fast CI subset."""
    seen, out = set(), []
    for s in specs:
        fam = s[0].split(" ", 1)[0]
        if fam not in seen:
            seen.add(fam)
            out.append(s)
    return out


def build_check(ccs: Iterable = DEFAULT_CCS, stream=None, use_ptxas: bool = True,
                only: Optional[str] = None, quick: bool = False, jobs: int = 1,
                shard: Optional[tuple] = None) -> tuple[int, int]:
    """Compile all kernels for each ``cc``; print one line each; return (passed, failed).

    ``quick`` compiles one signature per kernel family instead of all of them. ``jobs > 1``
    splits the work over that many worker processes (compilation is CPU-bound and
    single-threaded); ``shard=(i, n)`` is what one worker does: every n-th item from i.
    """
    ccs = [tuple(c) for c in ccs]
    if jobs > 1 and shard is None:
        return _build_parallel(ccs, stream or sys.stdout, use_ptxas, only, quick, jobs)
    from numba import cuda

    from ._runtime import SIM
    if SIM:
        raise RuntimeError("build_check cannot run with NUMBA_ENABLE_CUDASIM=1: run it in a "
                           "process without the simulator")
    out = stream or sys.stdout
    passed = failed = 0
    specs = [s for s in all_specs() if only is None or only in s[0]]
    if quick:
        specs = quick_specs(specs)
    work = [(cc, s) for cc in ccs for s in specs]
    if shard is not None:
        work = work[shard[0]::shard[1]]
    for cc, (label, disp, argtypes) in work:
        t0 = time.perf_counter()
        sig = "(" + ", ".join(str(a) for a in argtypes) + ")"
        try:
            with _target_cc(cc):
                ptx, _ = cuda.compile_ptx(disp.py_func, argtypes, cc=cc)
            if f".target sm_{cc[0]}{cc[1]}" not in ptx:
                raise RuntimeError("PTX does not name the requested target")
            tool = _ptxas(ptx, cc) if use_ptxas else None
            dt = time.perf_counter() - t0
            print(f"PASS sm_{cc[0]}{cc[1]} {label} {sig} [{len(ptx)} B PTX"
                  f"{', ' + tool if tool else ''}, {dt:.1f}s]", file=out, flush=True)
            passed += 1
        except Exception as e:      # noqa: BLE001 - every failure is reported, not raised
            print(f"FAIL sm_{cc[0]}{cc[1]} {label} {sig}: {type(e).__name__}: "
                  f"{str(e).splitlines()[0] if str(e) else ''}", file=out, flush=True)
            failed += 1
    print(f"{passed} passed, {failed} failed", file=out, flush=True)
    return passed, failed


def _build_parallel(ccs, out, use_ptxas, only, quick, jobs) -> tuple[int, int]:
    cmd = [sys.executable, "-m", "numaccel.kernels_gpu", "--build-check",
           "--cc", ",".join(f"{a}{b}" for a, b in ccs)]
    cmd += (["--quick"] if quick else []) + ([] if use_ptxas else ["--no-ptxas"])
    cmd += ["--only", only] if only else []
    procs = [subprocess.Popen(cmd + ["--shard", f"{i}/{jobs}"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(jobs)]
    passed = failed = 0
    for p in procs:
        text, _ = p.communicate()
        lines = text.strip().splitlines()
        tail = lines[-1] if lines else ""
        parts = tail.split()
        if len(parts) == 4 and parts[1] == "passed," and parts[3] == "failed":
            passed += int(parts[0])
            failed += int(parts[2])
            lines = lines[:-1]
        else:                       # a worker that crashed counts as one failure
            failed += 1
            lines.append(f"FAIL worker {procs.index(p)}: exit status {p.returncode}")
        for ln in lines:
            print(ln, file=out, flush=True)
    print(f"{passed} passed, {failed} failed", file=out, flush=True)
    return passed, failed
