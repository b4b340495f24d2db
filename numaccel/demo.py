"""The main demo: corpus programs run plain and accelerated, checked against NumPy, timed.

    python -m numaccel demo                   # a few representative programs at size S
    python -m numaccel demo --size M --all    # every program at size M
    python -m numaccel demo --only heat2d_inplace,black_scholes --corpus /path/to/corpus

The corpus (``/work/shared/corpus`` in this project: one ``<name>.py`` per program defining
``kernel``, ``init(size, seed)`` and ``META``) is looked up in ``--corpus DIR``, then in the
``NUMACCEL_CORPUS`` environment variable, then in ``../shared/corpus`` next to the checkout.
It is not part of the package and is only read at run time.

Semantics follow the corpus' ``run_corpus.py``: each program runs in its own subprocess with a
timeout; the reference is ``kernel(*deepcopy(args))``; in-place programs get a fresh deep copy
of their arguments per call (made before the clock starts) and their mutated arguments are
checked too; other programs must leave their arguments unchanged; results are compared with
``META``'s ``rtol``/``atol`` (and ``max_mismatch_frac``); one timed run is ``META["calls"]``
back-to-back calls. Reported times are medians over ``--repeat`` runs, after the first call
and ``--warmup`` more untimed calls of each side (steady state: a function with graph
breaks compiles a segment when it sees it again, and times re-tracing against plain NumPy
on its third call).

The exit status is 1 when any program mismatches or fails, 2 when the corpus or the compiler
cannot be found.
"""
from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULT_MARK = "@@NUMACCEL_DEMO@@ "
# one per kind of program: elementwise, stencil, broadcast+reduction, image slicing,
# softmax/layernorm, and tiny arrays (per-call overhead)
DEFAULT_PROGRAMS = ("black_scholes", "heat2d_inplace", "nbody_leapfrog", "sobel_edges",
                    "softmax_layernorm_f32", "lorenz_rk4_tiny")
REPO_ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("program", "status", "numpy_ms", "numaccel_ms", "speedup", "first_call_ms")


class CorpusNotFoundError(FileNotFoundError):
    """The program corpus directory could not be located."""


# --------------------------------------------------------------------------------------------
# locating things
# --------------------------------------------------------------------------------------------

def find_corpus(explicit: str | os.PathLike | None = None) -> Path:
    """Return the corpus directory: ``explicit``, else $NUMACCEL_CORPUS, else ../shared/corpus.

    Example::

        corpus = find_corpus()            # e.g. /work/shared/corpus
    """
    tried = []
    for cand, why in ((explicit, "--corpus"), (os.environ.get("NUMACCEL_CORPUS"),
                                               "NUMACCEL_CORPUS"),
                      (REPO_ROOT.parent / "shared" / "corpus", "default")):
        if not cand:
            continue
        p = Path(cand).expanduser().resolve()
        if p.is_dir() and list_programs(p):
            return p
        tried.append(f"{p} ({why})")
        if why != "default":  # an explicit choice that is wrong should not silently fall back
            break
    raise CorpusNotFoundError(
        "no NumPy program corpus found; tried " + ", ".join(tried) + ". Pass --corpus DIR or "
        "set NUMACCEL_CORPUS to a folder of <name>.py programs defining kernel/init/META.")


def list_programs(corpus: Path) -> list[str]:
    """Names of the programs in a corpus folder (``run_corpus.py`` and ``_*.py`` excluded)."""
    return sorted(p.stem for p in Path(corpus).glob("*.py")
                  if p.name != "run_corpus.py" and not p.name.startswith("_"))


def load_program(corpus: Path, name: str):
    """Import one corpus program from its file (not as part of any package)."""
    path = Path(corpus) / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"corpus_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def wait_for_compiles() -> None:
    """Wait for numaccel's background compiles (where numaccel is loaded): the first call
    returns while its kernels compile, and the steady state is what is timed."""
    trace_bg = sys.modules.get("numaccel.trace.background")
    if trace_bg is not None:
        trace_bg.wait_for_compiles()


def resolve_compiler(spec: str = "numaccel", backend: str | None = None
                     ) -> Callable[[Callable], Callable]:
    """Turn a compiler name into ``fn -> accelerated fn``.

    ``numaccel`` is ``numaccel.accelerate`` (with ``backend=`` when given), ``plain`` returns
    the function unchanged (a stand-in that tests the harness), and ``pkg.mod:attr`` names
    any other callable with the same contract.

    Example::

        compile_ = resolve_compiler("numaccel", backend="numpy")
        f = compile_(kernel)
    """
    if spec == "plain":
        return lambda fn: fn
    if spec == "numaccel":
        import numaccel
        accelerate = numaccel.accelerate  # AttributeError/ImportError while it does not exist
        if backend:
            return lambda fn: accelerate(fn, backend=backend)
        return accelerate
    if ":" in spec:
        mod, _, attr = spec.partition(":")
        return getattr(importlib.import_module(mod), attr)
    raise ValueError(f"unknown compiler {spec!r}: use 'numaccel', 'plain' or 'package.module:"
                     f"callable'")


def child_env() -> dict[str, str]:
    """Environment for worker subprocesses: this checkout of numaccel first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    return env


# --------------------------------------------------------------------------------------------
# checking (mirrors run_corpus.py)
# --------------------------------------------------------------------------------------------

def materialize(x: Any) -> Any:
    """Turn a result into plain NumPy objects (forces lazy results)."""
    import numpy as np
    if x is None or isinstance(x, (bool, int, float, complex, str, np.generic)):
        return x
    if isinstance(x, (tuple, list)):
        return type(x)(materialize(v) for v in x)
    if isinstance(x, dict):
        return {k: materialize(v) for k, v in x.items()}
    if type(x) is np.ndarray:
        return x
    return np.asarray(x)


def compare(ref: Any, got: Any, rtol: float, atol: float, max_frac: float = 0.0,
            path: str = "result") -> str | None:
    """None when ``got`` matches ``ref`` under the corpus rules, else a one-line reason.

    Example::

        compare(np.ones(3), np.ones(3) + 1e-9, 1e-6, 0.0)   # -> None
    """
    import numpy as np
    if ref is None:
        return None if got is None else f"{path}: expected None, got {type(got).__name__}"
    if isinstance(ref, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(ref):
            return f"{path}: expected a {type(ref).__name__} of {len(ref)} items"
        for i, (r, g) in enumerate(zip(ref, got)):
            msg = compare(r, g, rtol, atol, max_frac, f"{path}[{i}]")
            if msg:
                return msg
        return None
    if isinstance(ref, dict):
        if not isinstance(got, dict) or set(got) != set(ref):
            return f"{path}: expected a dict with keys {sorted(ref)}"
        for k in ref:
            msg = compare(ref[k], got[k], rtol, atol, max_frac, f"{path}[{k!r}]")
            if msg:
                return msg
        return None
    try:
        g = np.asarray(got)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is a mismatch
        return f"{path}: cannot convert {type(got).__name__} to an array ({exc})"
    r = np.asarray(ref)
    if g.dtype != r.dtype:
        return f"{path}: dtype {g.dtype}, expected {r.dtype}"
    if g.shape != r.shape:
        return f"{path}: shape {g.shape}, expected {r.shape}"
    if r.size == 0:
        return None
    if r.dtype.kind in "fc":
        bad = ~np.isclose(g, r, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = g != r
    n_bad = int(np.count_nonzero(bad))
    if n_bad > int(max_frac * r.size):
        i = np.unravel_index(int(np.argmax(bad)), bad.shape) if r.ndim else ()
        return (f"{path}: {n_bad}/{r.size} elements differ at {tuple(int(v) for v in i)}: "
                f"got {g[i]!r}, expected {r[i]!r}")
    return None


def _calls_per_run(meta: dict, size: str) -> int:
    c = meta.get("calls", 1)
    if isinstance(c, dict):
        c = c.get(size, 1)
    return max(1, int(c))


def settle() -> None:
    """Busy-wait ``NUMACCEL_SETTLE_S`` seconds (default 0: off) before a timed run.

    OpenBLAS's worker threads spin for ~0.1 s after a BLAS call (measured here: a full
    core for 0.1 s after logreg_gd's NumPy run): a multi-threaded run right after a NumPy
    run with BLAS shares a core with them (logreg_gd M: 92 ms against 67 ms back to back).
    A wait lets them go to sleep; waiting busy, not in ``time.sleep``, kept the cores out
    of their idle states. It was on (0.15 s) until the machine changed: a pause of 20 ms
    or more, busy or asleep, then made the timed runs after it 2-3x slower for every
    contender, threaded ones most (demo at S: geomean 4.67x without it, 1.26x with it;
    NumPy's black_scholes 12.5 ms against 37.5 ms), far more than the spinning threads
    cost. Set it where those threads dominate."""
    wait = float(os.environ.get("NUMACCEL_SETTLE_S", "0"))
    end = time.perf_counter() + wait
    while time.perf_counter() < end:
        pass


def _timed_run(fn, pristine, fresh_copies: bool, k_calls: int):
    arg_sets = ([copy.deepcopy(pristine) for _ in range(k_calls)] if fresh_copies
                else [pristine] * k_calls)
    out = None
    settle()
    t0 = time.perf_counter()
    for a in arg_sets:
        out = materialize(fn(*a))
    return out, (time.perf_counter() - t0) * 1e3, arg_sets[-1]


# --------------------------------------------------------------------------------------------
# one program (runs inside the worker subprocess)
# --------------------------------------------------------------------------------------------

def run_program(corpus: Path, name: str, size: str = "S", compiler: str = "numaccel",
                backend: str | None = None, repeat: int = 3, seed: int = 0,
                warmup: int = 2) -> dict:
    """Run one program plain and compiled in this process; return its record.

    Example::

        rec = run_program(find_corpus(), "black_scholes", "S", compiler="plain")
        rec["status"]      # 'ok'
    """
    rec: dict[str, Any] = {"name": name, "size": size, "status": "ERROR", "detail": "",
                           "numpy_ms": None, "numaccel_ms": None, "first_call_ms": None}
    stage = "plain-NumPy reference"
    try:
        mod = load_program(corpus, name)
        meta = mod.META
        rtol, atol = float(meta["rtol"]), float(meta["atol"])
        inplace = bool(meta["inplace"])
        max_frac = float(meta.get("max_mismatch_frac", 0.0))
        k = _calls_per_run(meta, size)
        pristine = mod.init(size, seed)
        ref_args = copy.deepcopy(pristine)
        ref = copy.deepcopy(materialize(mod.kernel(*ref_args)))
        np_args = copy.deepcopy(pristine)
        np_times = [_timed_run(mod.kernel, np_args, inplace, k)[1]]
        rec["numpy_ms"] = np_times[0]  # kept should the compiled side fail

        stage = "compiled program"
        fn = resolve_compiler(compiler, backend)(mod.kernel)

        def check(out, used):
            msg = compare(ref, out, rtol, atol, max_frac)
            if msg is None and inplace:
                msg = compare(ref_args, used, rtol, atol, max_frac, path="args")
            return msg

        shared = copy.deepcopy(pristine)
        a = copy.deepcopy(pristine) if inplace else shared
        t0 = time.perf_counter()
        out = materialize(fn(*a))
        rec["first_call_ms"] = (time.perf_counter() - t0) * 1e3
        wait_for_compiles()
        mismatch = check(out, a)
        for _ in range(warmup):
            _timed_run(mod.kernel, np_args, inplace, k)
            out, _, used = _timed_run(fn, pristine if inplace else shared, inplace, k)
            mismatch = mismatch or check(out, used)
        times = []
        for _ in range(repeat):
            # interleaved with the NumPy runs so both sides see the same machine load
            # and allocator state
            np_times.append(_timed_run(mod.kernel, np_args, inplace, k)[1])
            out, ms, used = _timed_run(fn, pristine if inplace else shared, inplace, k)
            times.append(ms)
            mismatch = mismatch or check(out, used)
        if not inplace and not mismatch:
            msg = compare(pristine, shared, 0.0, 0.0, 0.0, path="input")
            mismatch = msg and "a non-inplace program modified its input: " + msg
        rec["numaccel_ms"] = statistics.median(times)
        rec["numpy_ms"] = statistics.median(np_times[1:])
        rec["status"] = "MISMATCH" if mismatch else "ok"
        rec["detail"] = mismatch or ""
    except Exception as exc:  # noqa: BLE001 - report and let the demo continue
        first = (str(exc).strip().splitlines() or [""])[0][:160]
        rec["detail"] = f"in the {stage}: {type(exc).__name__}: {first}"
        rec["traceback"] = traceback.format_exc()
    return rec


def run_program_subprocess(corpus: Path, name: str, size: str = "S", compiler: str = "numaccel",
                           backend: str | None = None, repeat: int = 3, seed: int = 0,
                           timeout: float = 300.0, warmup: int = 2) -> dict:
    """``run_program`` in a fresh subprocess with a timeout, so a crash or hang fails one program.

    Example::

        rec = run_program_subprocess(find_corpus(), "heat2d_inplace", compiler="plain")
    """
    cmd = [sys.executable, "-m", "numaccel.demo", "--worker", name, "--corpus", str(corpus),
           "--size", size, "--compiler", compiler, "--repeat", str(repeat), "--seed", str(seed),
           "--warmup", str(warmup)]
    if backend:
        cmd += ["--backend", backend]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:  # the whole group: compilers may have started helper processes
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return {"name": name, "size": size, "status": "ERROR", "numpy_ms": None,
                "numaccel_ms": None, "first_call_ms": None,
                "detail": f"Timeout: no result after {timeout:g} s"}
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    tail = (err.strip().splitlines() or [""])[-1][:200]
    return {"name": name, "size": size, "status": "ERROR", "numpy_ms": None,
            "numaccel_ms": None, "first_call_ms": None,
            "detail": f"Crash: worker exited with code {proc.returncode}: {tail}"}


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------

def speedup(rec: dict) -> float | None:
    """numpy_ms / numaccel_ms for an ok record, else None."""
    a, b = rec.get("numpy_ms"), rec.get("numaccel_ms")
    return a / b if rec.get("status") == "ok" and a and b else None


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive numbers (None for an empty sequence)."""
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def format_row(rec: dict, width: int) -> str:
    """One table line; the columns are COLUMNS, separated by blanks."""
    s = speedup(rec)
    return (f"{rec['name']:<{width}}  {rec['status']:<8}  {_fmt(rec.get('numpy_ms')):>10}  "
            f"{_fmt(rec.get('numaccel_ms')):>11}  {'-' if s is None else f'{s:.2f}x':>8}  "
            f"{_fmt(rec.get('first_call_ms')):>13}")


def format_header(width: int) -> str:
    c = COLUMNS
    return (f"{c[0]:<{width}}  {c[1]:<8}  {c[2]:>10}  {c[3]:>11}  {c[4]:>8}  {c[5]:>13}")


def summary_line(records: Sequence[dict]) -> str:
    """The closing line: geometric-mean speedup over the programs that passed."""
    ok = [speedup(r) for r in records if speedup(r)]
    g = geomean(ok)
    n_fail = sum(r["status"] != "ok" for r in records)
    return (f"geomean speedup: {'-' if g is None else f'{g:.2f}x'} over {len(ok)} ok "
            f"program(s); {n_fail} failed")


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m numaccel demo",
                                 description="Run corpus programs plain and accelerated.")
    ap.add_argument("--corpus", default=None, help="corpus folder (default: $NUMACCEL_CORPUS "
                    "or ../shared/corpus next to the checkout)")
    ap.add_argument("--size", choices=["S", "M"], default="S")
    ap.add_argument("--only", action="append", default=[], help="program(s), comma separated")
    ap.add_argument("--all", action="store_true", help="every program in the corpus")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per side (median)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed calls per side after the first call (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per program")
    ap.add_argument("--compiler", default="numaccel",
                    help="numaccel (default), plain, or package.module:callable")
    ap.add_argument("--backend", default=None, help="numaccel backend, e.g. numpy")
    ap.add_argument("--json", default=None, help="write the records to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print full tracebacks")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m numaccel demo``; returns the exit status."""
    opts = build_parser().parse_args(argv)
    opts.repeat = max(1, opts.repeat)
    if opts.worker:
        rec = run_program(Path(opts.corpus), opts.worker, opts.size, opts.compiler,
                          opts.backend, opts.repeat, opts.seed, max(0, opts.warmup))
        sys.stdout.write("\n" + RESULT_MARK + json.dumps(rec) + "\n")
        return 0
    try:
        corpus = find_corpus(opts.corpus)
    except CorpusNotFoundError as exc:
        print(f"numaccel demo: {exc}", file=sys.stderr)
        return 2
    try:  # fail once, clearly, rather than once per program
        resolve_compiler(opts.compiler, opts.backend)
    except Exception as exc:  # noqa: BLE001
        print(f"numaccel demo: compiler {opts.compiler!r} is not available "
              f"({type(exc).__name__}: {exc}); try --compiler plain to check the harness",
              file=sys.stderr)
        return 2
    names = list_programs(corpus)
    if opts.only:
        wanted = [n.strip() for item in opts.only for n in item.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            print(f"numaccel demo: unknown program(s) {', '.join(unknown)}; the corpus in "
                  f"{corpus} has: {', '.join(names)}", file=sys.stderr)
            return 2
        names = wanted
    elif not opts.all:
        names = [n for n in DEFAULT_PROGRAMS if n in names] or names[:5]

    width = max(len(n) for n in names + ["program"])
    label = opts.compiler + (f"[{opts.backend}]" if opts.backend else "")
    print(f"# numaccel demo: corpus {corpus}, size {opts.size}, compiler {label}, "
          f"median of {opts.repeat} runs after {max(0, opts.warmup)} warm-up calls, times in ms")
    print(format_header(width), flush=True)
    records = []
    for name in names:
        rec = run_program_subprocess(corpus, name, opts.size, opts.compiler, opts.backend,
                                     opts.repeat, opts.seed, opts.timeout, max(0, opts.warmup))
        records.append(rec)
        print(format_row(rec, width), flush=True)
        if rec["status"] != "ok" and rec.get("detail"):
            print(f"    {name}: {rec['detail']}", flush=True)
        if opts.verbose and rec.get("traceback"):
            print(rec["traceback"], file=sys.stderr)
    print(summary_line(records), flush=True)
    if opts.json:
        Path(opts.json).write_text(json.dumps(records, indent=1))
    return 0 if all(r["status"] == "ok" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
