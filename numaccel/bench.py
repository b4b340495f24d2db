"""Side-by-side benchmark: NumPy, numexpr, hand-written Numba, torch.compile and numaccel.

    python -m numaccel.bench                          # every workload, full sizes
    python -m numaccel.bench --quick --only chain_f32,softmax_f32 --json out.json
    python -m numaccel.bench --corpus                 # also the corpus at size M
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m numaccel.bench ...  # BLAS at speed

Every contender's result is checked against NumPy's (a wrong answer prints MISMATCH, not a
time). Steady-state times are medians over ``--repeat`` samples after one warm-up call (the
warm-up is the contender's first call, reported separately). Each contender runs in a
process of its own per workload (``--in-process``: numpy, numexpr, numba and numaccel in
this one, taking their samples round-robin so that load on a shared machine hits them
alike, at the cost of running beside each other's threads and memory). A sample is
back-to-back calls lasting ~30 ms (at least one call; 2 ms for the tiny workloads),
after ``NUMACCEL_SETTLE_S`` seconds of busy waiting (``demo.settle``, default 0: BLAS
threads the previous contender left spinning go to sleep). torch.compile runs in its own
subprocess per workload with a timeout, so a failing or hanging compile reads "n/a" with the
reason. The first-call section measures a new process: cold (empty cache directory) and warm
(the same ``NUMACCEL_CACHE_DIR`` / ``TORCHINDUCTOR_CACHE_DIR`` again). Ratios are
"contender time / numaccel time": above 1 means numaccel is faster.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import demo

CONTENDERS = ("numpy", "numexpr", "numba", "torch", "numaccel")
LABELS = {"torch": "torch.compile"}
MARK = "@@NUMACCEL_BENCH@@ "
FIRST_CALL = "first_call"
FIRST_CALL_WORKLOAD = "layernorm_f32"
FIRST_CALL_PROGRAM = "softmax_layernorm_f32"


class Unavailable(RuntimeError):
    """A contender does not apply to a workload (or is not installed); the text says why."""


# --------------------------------------------------------------------------------------------
# the machine
# --------------------------------------------------------------------------------------------

def machine_info() -> dict[str, Any]:
    """CPU model, cores, library versions and the BLAS kernel in use.

    Example::

        machine_info()["blas"]   # e.g. [{'internal_api': 'openblas', 'architecture': ...}]
    """
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                            "cores": os.cpu_count(), "cpu": platform.processor() or "?"}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import importlib.metadata as md
    for pkg in ("numpy", "numba", "llvmlite", "numexpr", "torch", "ml_dtypes", "numaccel"):
        try:
            info[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            info[pkg] = None
    try:  # what Numba compiles for (e.g. znver4), from LLVM's view of the host
        import llvmlite.binding as llvm
        info["llvm_host_cpu"] = llvm.get_host_cpu_name()
    except Exception:  # noqa: BLE001 - informational only
        info["llvm_host_cpu"] = None
    try:
        from threadpoolctl import threadpool_info
        info["blas"] = [{k: p.get(k) for k in ("internal_api", "architecture", "num_threads",
                                                "version")}
                        for p in threadpool_info() if p.get("user_api") == "blas"]
    except ImportError:
        info["blas"] = "threadpoolctl not installed"
    info["env"] = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                              "NUMBA_NUM_THREADS", "OMP_NUM_THREADS")
                   if k in os.environ}
    return info


def format_machine(info: dict[str, Any]) -> str:
    blas = info.get("blas")
    if isinstance(blas, list):
        blas = ", ".join(f"{b['internal_api']} {b.get('version')} ({b['architecture']}, "
                         f"{b['num_threads']} threads)" for b in blas) or "none found"
    libs = " ".join(f"{k} {info.get(k)}" for k in ("numpy", "numba", "llvmlite", "numexpr",
                                                   "torch", "ml_dtypes", "numaccel"))
    lines = [(f"# machine: {info['cpu']} ({info.get('llvm_host_cpu', '?')}), "
              f"{info['cores']} cores, Python {info['python']}, {info['platform']}"),
             f"# {libs}", f"# BLAS: {blas}"]
    if info.get("env"):
        lines.append(f"# environment: {info['env']} (OPENBLAS_* settings slow NumPy's BLAS)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# contenders
# --------------------------------------------------------------------------------------------

def default_compilers(numaccel_backend: str | None = None) -> dict[str, Callable]:
    """Contender name -> ``workload -> callable``; raises Unavailable where one does not apply.

    Example::

        fns = default_compilers()
        f = fns["numba"](WORKLOADS["chain_f32"])
    """
    def numexpr_(w):
        if w.numexpr_fn is None:
            from . import bench_workloads as bw
            raise Unavailable("numexpr is not installed" if bw.ne is None else
                              "no numexpr formulation (bf16 is not a numexpr type)"
                              if "bf16" in w.name else "no numexpr formulation (numexpr "
                              "evaluates one expression, not a loop on its result)")
        return w.numexpr_fn

    def numba_(w):
        if w.numba_fn is None:
            raise Unavailable("no hand-written Numba version")
        return w.numba_fn

    def numaccel_(w):
        try:
            import numaccel
            accelerate = numaccel.accelerate
        except (ImportError, AttributeError) as exc:
            raise Unavailable(f"numaccel.accelerate is not available yet ({exc})") from exc
        if numaccel_backend:
            return accelerate(w.numpy_fn, backend=numaccel_backend)
        return accelerate(w.numpy_fn)

    def torch_(w):
        try:
            import torch
        except ImportError as exc:
            raise Unavailable("torch is not installed") from exc
        return torch.compile(w.numpy_fn)

    return {"numpy": lambda w: w.numpy_fn, "numexpr": numexpr_, "numba": numba_,
            "torch": torch_, "numaccel": numaccel_}


def _short(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:150]}"


def first_call(fn: Callable, args: tuple, ref: Any, w) -> dict[str, Any]:
    """Time the first call alone, check it against NumPy, pick calls per sample.

    Tiny workloads time many calls per sample (at least ~2 ms) so that timer resolution and
    loop overhead do not matter; their times are per call.
    """
    t0 = time.perf_counter()
    out = demo.materialize(fn(*args))
    rec: dict[str, Any] = {"status": "ok", "first_call_ms": (time.perf_counter() - t0) * 1e3,
                           "calls_per_sample": 1, "samples_ms": []}
    demo.wait_for_compiles()     # steady state is timed: the compiled code, not the interpreter
    if not w.matches(out, ref):
        g = np.asarray(out)
        rec.update(status="MISMATCH", reason=f"result {g.dtype}{g.shape} differs from NumPy's "
                                             f"(rtol={w.rtol}, atol={w.atol})")
    elif w.tiny:
        t0 = time.perf_counter()
        for _ in range(100):
            fn(*args)
        per = (time.perf_counter() - t0) / 100
        rec["calls_per_sample"] = int(min(100_000, max(100, 2e-3 / max(per, 1e-9))))
    else:
        # steady state is back-to-back calls: a sample of one short call (softmax, 2 ms)
        # measured the cores waking up from the wait before it (3.8 ms); samples of
        # ~30 ms of calls measure the calls, for every contender alike
        t0 = time.perf_counter()
        demo.materialize(fn(*args))
        per = time.perf_counter() - t0
        rec["calls_per_sample"] = int(min(50, max(1, 30e-3 / max(per, 1e-9))))
    return rec


def take_sample(fn: Callable, args: tuple, rec: dict[str, Any]) -> None:
    """One timed sample (``calls_per_sample`` calls) appended to ``rec``; medians updated."""
    calls = rec["calls_per_sample"]
    demo.settle()        # no BLAS threads left spinning by the previous contender
    t0 = time.perf_counter()
    for _ in range(calls):
        demo.materialize(fn(*args))
    rec["samples_ms"].append((time.perf_counter() - t0) * 1e3 / calls)
    rec["median_ms"] = statistics.median(rec["samples_ms"])
    rec["min_ms"] = min(rec["samples_ms"])


def prepare(w, args: tuple, ref: Any, factory: Callable) -> tuple[Callable | None, dict]:
    """Build one contender and make its first call; failures become n/a records."""
    try:
        fn = factory(w)
    except Unavailable as exc:
        return None, {"status": "n/a", "reason": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a broken contender must not stop the bench
        return None, {"status": "n/a", "reason": f"could not build: {_short(exc)}"}
    try:
        rec = first_call(fn, args, ref, w)
    except Exception as exc:  # noqa: BLE001
        return None, {"status": "n/a", "reason": f"failed: {_short(exc)}"}
    return (fn if rec["status"] == "ok" else None), rec


def measure_interleaved(w, args: tuple, ref: Any, factories: dict[str, Callable],
                        repeat: int) -> dict[str, dict]:
    """Measure several contenders round-robin, one sample each per round.

    Interleaving matters on a shared machine: load that comes and goes then hits every
    contender alike instead of whichever happened to be running.
    """
    live, results = {}, {}
    for c, factory in factories.items():
        fn, results[c] = prepare(w, args, ref, factory)
        if fn is not None:
            live[c] = fn
    for _ in range(repeat):
        for c, fn in list(live.items()):
            try:
                take_sample(fn, args, results[c])
            except Exception as exc:  # noqa: BLE001
                results[c] = {"status": "n/a", "reason": f"failed: {_short(exc)}"}
                del live[c]
    return results


def _run_worker_subprocess(cmd: list[str], timeout: float, env: dict | None = None) -> dict:
    """Run a bench worker; return its marked JSON record or an n/a record with the reason."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or demo.child_env(), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:  # torch's inductor starts compile workers: end the whole group
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return {"status": "n/a", "reason": f"timeout after {timeout:g} s"}
    for line in reversed(out.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = [ln for ln in err.strip().splitlines() if ln.strip()][-1:] or [""]
    return {"status": "n/a", "reason": f"worker exited {proc.returncode}: {tail[0][:200]}"}


def run_isolated(contender: str, name: str, quick: bool, repeat: int, timeout: float,
                 numaccel_backend: str | None = None) -> dict[str, Any]:
    """Measure one contender on one workload in a fresh process (used for torch.compile)."""
    cmd = [sys.executable, "-m", "numaccel.bench", "--worker", contender, "--only", name,
           "--repeat", str(repeat)] + (["--quick"] if quick else [])
    if numaccel_backend:
        cmd += ["--numaccel-backend", numaccel_backend]
    return _run_worker_subprocess(cmd, timeout)


# --------------------------------------------------------------------------------------------
# first call and warm start, each in a new process
# --------------------------------------------------------------------------------------------

_FIRST_CALL_SNIPPET = r"""
import json, sys, time
import numpy as np
contender, name, quick, corpus, backend, mark = sys.argv[1:7]
t0 = time.perf_counter()
if contender == "numaccel":
    import numaccel
    accelerate = numaccel.accelerate
elif contender == "torch":
    import torch
elif contender == "numba":
    import numba
t1 = time.perf_counter()
if corpus:
    import importlib.util
    spec = importlib.util.spec_from_file_location("corpus_" + name, corpus + "/" + name + ".py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src, args = mod.kernel, mod.init("S", 0)
else:
    from numaccel.bench_workloads import WORKLOADS
    w = WORKLOADS[name]
    src, args = w.numpy_fn, w.make_args(quick == "1")
t2 = time.perf_counter()
if contender == "numaccel":
    fn = accelerate(src, backend=backend) if backend else accelerate(src)
elif contender == "torch":
    fn = torch.compile(src)
elif contender == "numba":
    fn = w.numba_fn
else:
    fn = src
out = fn(*args)
out = [np.asarray(o) for o in out] if isinstance(out, tuple) else np.asarray(out)
t3 = time.perf_counter()
if contender == "numaccel":
    numaccel.wait_for_compiles()    # the first call ran while the kernels compiled
t4 = time.perf_counter()
print(mark + json.dumps({"status": "ok", "import_ms": (t1 - t0) * 1e3,
                         "first_call_ms": (t3 - t2) * 1e3, "compiled_ms": (t4 - t2) * 1e3,
                         "new_process_ms": (t1 - t0 + t3 - t2) * 1e3}))
"""


def first_call_rows(contenders: Sequence[str], quick: bool, corpus: Path | None,
                    timeout: float, numaccel_backend: str | None = None) -> dict[str, dict]:
    """Cold first call and warm start in new processes, per contender.

    Rows: ``first_call[<workload>]`` (empty cache), ``warm_start[<workload>]`` (warm disk
    cache), ``compiled[<workload>]`` (empty cache, until the compiled code is ready:
    numaccel's first call returns while its kernels compile in the background, see
    ``numaccel.config.background_compile``) and ``import[<workload>]`` (the library's
    import, warm run), and the same for the corpus program ``softmax_layernorm_f32`` when
    a corpus is found. ``first_call_ms`` is accelerate/compile + the first call (the median
    of the first two rows: the targets are on the call itself); ``new_process_ms`` adds
    the import of the library.
    """
    rows: dict[str, dict] = {}
    targets = [(FIRST_CALL_WORKLOAD, "")]
    if corpus is not None and (corpus / f"{FIRST_CALL_PROGRAM}.py").exists():
        targets.append((FIRST_CALL_PROGRAM, str(corpus)))
    for name, corpus_dir in targets:
        label = f"corpus:{name}" if corpus_dir else name
        cold, warm = rows.setdefault(f"first_call[{label}]", {}), rows.setdefault(
            f"warm_start[{label}]", {})
        imp = rows.setdefault(f"import[{label}]", {})
        ready = rows.setdefault(f"compiled[{label}]", {})
        for c in contenders:
            if c == "numexpr" or (c == "numba" and corpus_dir):
                cold[c] = warm[c] = imp[c] = ready[c] = {
                    "status": "n/a", "reason": "nothing to compile" if c == "numexpr"
                    else "no Numba version of the program"}
                continue
            with tempfile.TemporaryDirectory(prefix="numaccel-bench-") as tmp:
                env = demo.child_env()
                env["NUMACCEL_CACHE_DIR"] = os.path.join(tmp, "numaccel")
                env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
                cmd = [sys.executable, "-c", _FIRST_CALL_SNIPPET, c, name,
                       "1" if quick else "0", corpus_dir, numaccel_backend or "", MARK]
                cold[c] = _run_worker_subprocess(cmd, timeout, env)
                if c in ("numaccel", "torch") and cold[c]["status"] == "ok":
                    warm[c] = _run_worker_subprocess(cmd, timeout, env)
                else:
                    warm[c] = {"status": "n/a", "reason": "no disk cache" if c in (
                        "numpy", "numba") else cold[c].get("reason", "cold run failed")}
            # cold and warm: accelerate/compile + the first call (what the targets are
            # on); the library's import (lazy, so most of the compiler loads in the first
            # call) is its own row, from the warm run
            if cold[c].get("status") == "ok":
                cold[c]["median_ms"] = cold[c]["first_call_ms"]
                ready[c] = dict(cold[c], median_ms=cold[c]["compiled_ms"])
            else:
                ready[c] = cold[c]
            ref = warm[c] if warm[c].get("status") == "ok" else cold[c]
            imp[c] = dict(ref, median_ms=ref["import_ms"]) if ref.get("status") == "ok" \
                else {"status": "n/a", "reason": ref.get("reason", "no run")}
            if warm[c].get("status") == "ok":
                warm[c]["median_ms"] = warm[c]["first_call_ms"]
    return rows


# --------------------------------------------------------------------------------------------
# the whole run
# --------------------------------------------------------------------------------------------

def ratios(results: dict[str, dict]) -> dict[str, float | None]:
    """contender median / numaccel median, for every contender with an ok time."""
    na = results.get("numaccel", {})
    base = na.get("median_ms") if na.get("status") == "ok" else None
    return {c: (r["median_ms"] / base if base and r.get("status") == "ok" else None)
            for c, r in results.items() if c != "numaccel"}


def run_bench(names: Sequence[str], contenders: Sequence[str] = CONTENDERS, quick: bool = False,
              repeat: int = 7, torch_timeout: float = 300.0,
              compilers: dict[str, Callable] | None = None,
              numaccel_backend: str | None = None, log: Callable[[str], None] = print,
              isolate: bool = False) -> dict[str, dict]:
    """Measure ``names`` (keys of WORKLOADS) with each contender; returns per-workload records.

    ``compilers`` overrides the contender factories (stand-ins in tests). torch runs isolated
    in a subprocess unless ``compilers`` supplies it; with ``isolate`` every contender not
    in ``compilers`` does (one process per contender and workload, one after the other:
    none runs beside another's threads, memory and allocator state. In one process taking
    samples round-robin, any neighbour made the 16M-element chain ~10% slower for the
    contender sampled after it, and torch, always isolated, had none).

    Example::

        res = run_bench(["chain_f32"], ["numpy", "numba"], quick=True, repeat=3)
        res["chain_f32"]["results"]["numba"]["median_ms"]
    """
    from .bench_workloads import WORKLOADS
    factories = dict(default_compilers(numaccel_backend))
    factories.update(compilers or {})
    out: dict[str, dict] = {}
    for name in names:
        w = WORKLOADS[name]
        args = w.make_args(quick)
        ref = demo.materialize(w.numpy_fn(*args))
        isolated = {c: None for c in contenders
                    if (c == "torch" or isolate) and not (compilers and c in compilers)}
        here = measure_interleaved(w, args, ref, {c: factories[c] for c in contenders
                                                  if c not in isolated}, repeat)
        for c in isolated:
            isolated[c] = run_isolated(c, name, quick, repeat, torch_timeout,
                                       numaccel_backend)
        results = {c: here[c] if c in here else isolated[c] for c in contenders}
        out[name] = {"description": w.description, "tiny": w.tiny, "results": results,
                     "ratios": ratios(results)}
        log(f"# {name}: " + ", ".join(
            f"{c} {_fmt_time(r.get('median_ms'), w.tiny) if r.get('status') == 'ok' else r['status']}"
            for c, r in results.items()))
    return out


def _fmt_time(ms: float | None, tiny: bool = False) -> str:
    if ms is None:
        return "-"
    if tiny or ms < 1.0:
        return f"{ms * 1e3:.1f} us"
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1e3:.2f} s"


def _fmt_ratio(r: float | None) -> str:
    if r is None:
        return "-"
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def format_table(rows: dict[str, dict], contenders: Sequence[str], title: str) -> str:
    """Medians per contender, then numaccel's ratio against each; n/a reasons as notes."""
    others = [c for c in contenders if c != "numaccel"]
    head = ([f"{'workload':<40}"] + [f"{LABELS.get(c, c):>14}" for c in contenders]
            + (["  numaccel vs: " + " ".join(f"{LABELS.get(c, c):>8}" for c in others)]
               if "numaccel" in contenders else []))
    lines, notes = [f"## {title}", "".join(head)], []
    for name, row in rows.items():
        res = row["results"]
        cells = []
        for c in contenders:
            r = res.get(c, {"status": "n/a", "reason": "not run"})
            if r.get("status") == "ok":
                cells.append(f"{_fmt_time(r.get('median_ms'), row.get('tiny', False)):>14}")
            else:
                cells.append(f"{r.get('status', 'n/a'):>14}")
                notes.append(f"  {name} / {LABELS.get(c, c)}: {r.get('status')}: "
                             f"{r.get('reason', '')}")
        line = f"{name:<40}" + "".join(cells)
        if "numaccel" in contenders:
            rat = row.get("ratios") or ratios(res)
            line += "  " + " " * 13 + " ".join(
                f"{_fmt_ratio(rat.get(c)):>8}" for c in others)
        lines.append(line)
    if notes:
        lines += ["notes:"] + sorted(set(notes), key=notes.index)
    return "\n".join(lines)


def _median(report: dict, section: str, row: str, contender: str) -> float | None:
    r = report.get(section, {}).get(row, {}).get("results", {}).get(contender, {})
    return r.get("median_ms") if r.get("status") == "ok" else None


def check_targets(report: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """The issue's CPU targets against this run: (target, measured, met or None if unknown).

    Example::

        for text, value, met in check_targets(report): print(text, value, met)
    """
    out: list[tuple[str, str, bool | None]] = []

    def ratio(row, other, need, section="workloads"):
        a, b = _median(report, section, row, other), _median(report, section, row, "numaccel")
        label = f"{row}: numaccel >= {need}x {LABELS.get(other, other)}"
        out.append((label, "-", None) if not (a and b) else
                   (label, f"{a / b:.2f}x", a / b >= need))

    def below(row, limit_ms, label, section):
        v = _median(report, section, row, "numaccel")
        out.append((label, "-" if v is None else _fmt_time(v), None if v is None
                    else v < limit_ms))

    ratio("chain_f32", "numpy", 4)
    ratio("chain_f32", "torch", 2)
    ratio("softmax_f32", "numpy", 3)
    ratio("layernorm_f32", "numpy", 3)
    below("overhead_tiny", 0.015, "per-call overhead on 10 elements < 15 us", "workloads")
    for name in (f"corpus:{FIRST_CALL_PROGRAM}", FIRST_CALL_WORKLOAD):
        if f"first_call[{name}]" in report.get("first_call", {}):
            below(f"first_call[{name}]", 2000, f"first call of {name} < 2 s", "first_call")
            below(f"warm_start[{name}]", 300,
                  f"first call in a new process, warm cache, {name} < 0.3 s", "first_call")
            break
    corpus = report.get("corpus")
    if corpus:
        g = corpus.get("geomean_speedup")
        out.append((f"corpus {corpus['size']}: geomean speedup >= 3x",
                    "-" if g is None else f"{g:.2f}x", None if g is None else g >= 3))
        n_bad = len(corpus["slower_than_numpy"]) + len(corpus["failed"])
        out.append((f"corpus {corpus['size']}: no program slower than NumPy (or failing)",
                    (f"{len(corpus['slower_than_numpy'])} slower, "
                     f"{len(corpus['failed'])} failed"), n_bad == 0))
    return out


def format_targets(rows: list[tuple[str, str, bool | None]], quick: bool = False) -> str:
    lines = ["## targets (issue 3, steady state on this machine)" + (
        ": QUICK SIZES, not the sizes the targets are about" if quick else "")]
    for text, value, met in rows:
        verdict = "unknown" if met is None else ("met" if met else "NOT met")
        lines.append(f"  {text:<64} {value:>20}  {verdict}")
    return "\n".join(lines)


def run_corpus(corpus: Path, size: str, repeat: int, timeout: float,
               numaccel_backend: str | None = None, log: Callable[[str], None] = print,
               compiler: str = "numaccel", warmup: int = 2) -> dict[str, Any]:
    """Every corpus program with numaccel vs NumPy (demo's runner); geomean of the speedups.

    Example::

        rep = run_corpus(demo.find_corpus(), "M", repeat=3, timeout=300)
        rep["geomean_speedup"], rep["slower_than_numpy"], rep["failed"]
    """
    records = []
    width = max(len(n) for n in demo.list_programs(corpus))
    log(f"## corpus at size {size} (NumPy vs numaccel, median of {repeat} runs after the "
        f"first call and {warmup} warm-up calls, ms)")
    log(demo.format_header(width))
    for name in demo.list_programs(corpus):
        rec = demo.run_program_subprocess(corpus, name, size, compiler, numaccel_backend,
                                          repeat, 0, timeout, warmup)
        records.append(rec)
        log(demo.format_row(rec, width) + (f"   {rec['detail']}" if rec["status"] != "ok"
                                           else ""))
    sp = {r["name"]: demo.speedup(r) for r in records}
    slower = sorted(n for n, s in sp.items() if s is not None and s < 1.0)
    g = demo.geomean([s for s in sp.values() if s])
    log(demo.summary_line(records) + f"; slower than NumPy: {', '.join(slower) or 'none'}")
    return {"size": size, "programs": records, "geomean_speedup": g, "slower_than_numpy": slower,
            "failed": [r["name"] for r in records if r["status"] != "ok"]}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m numaccel.bench", description=__doc__.split(
        "\n")[0])
    ap.add_argument("--only", action="append", default=[],
                    help=f"workloads, comma separated (also '{FIRST_CALL}')")
    ap.add_argument("--contenders", default=",".join(CONTENDERS),
                    help=f"comma separated subset of {','.join(CONTENDERS)}")
    ap.add_argument("--repeat", type=int, default=None, help="timed samples (default 7, 3 quick)")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--corpus", nargs="?", const="", default=None, metavar="DIR",
                    help="also run the corpus (default location as in the demo)")
    ap.add_argument("--corpus-size", choices=["S", "M"], default="M")
    ap.add_argument("--corpus-repeat", type=int, default=3,
                    help="timed runs per corpus program and side (median; default 3)")
    ap.add_argument("--corpus-warmup", type=int, default=2,
                    help="untimed calls per corpus program and side after the first "
                         "(default 2)")
    ap.add_argument("--timeout", type=float, default=180.0,
                    help="seconds per torch.compile workload / first-call process / corpus "
                         "program")
    ap.add_argument("--numaccel-backend", default=None, help="e.g. numpy (reference)")
    ap.add_argument("--json", default=None, help="write all results to this file")
    ap.add_argument("--in-process", action="store_true",
                    help="sample numpy, numexpr, numba and numaccel round-robin in this "
                         "process (default: each contender in a process of its own, as "
                         "torch.compile always is)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m numaccel.bench``; returns the exit status."""
    from .bench_workloads import WORKLOADS
    opts = build_parser().parse_args(argv)
    repeat = max(1, opts.repeat or (3 if opts.quick else 7))
    wanted = [n.strip() for item in opts.only for n in item.split(",") if n.strip()]
    names = wanted or list(WORKLOADS) + [FIRST_CALL]
    unknown = [n for n in names if n not in WORKLOADS and n != FIRST_CALL]
    contenders = [c.strip() for c in opts.contenders.split(",") if c.strip()]
    bad = [c for c in contenders if c not in CONTENDERS]
    if unknown or bad:
        print(f"unknown workload(s) {unknown} or contender(s) {bad}; workloads: "
              f"{', '.join(WORKLOADS)}, {FIRST_CALL}; contenders: {', '.join(CONTENDERS)}",
              file=sys.stderr)
        return 2
    if opts.worker:  # one contender, in-process, for the parent's subprocess
        name = names[0]
        w = WORKLOADS[name]
        args = w.make_args(opts.quick)
        ref = demo.materialize(w.numpy_fn(*args))
        rec = measure_interleaved(w, args, ref, {opts.worker: default_compilers(
            opts.numaccel_backend)[opts.worker]}, repeat)[opts.worker]
        rec["pid"] = os.getpid()
        print(MARK + json.dumps(rec))
        return 0

    info = machine_info()
    print(format_machine(info), flush=True)
    report: dict[str, Any] = {"machine": info, "options": {
        "quick": opts.quick, "repeat": repeat, "contenders": contenders,
        "isolated": not opts.in_process,
        "numaccel_backend": opts.numaccel_backend, "argv": list(argv or sys.argv[1:])}}
    log = lambda s: print(s, flush=True)
    steady = [n for n in names if n != FIRST_CALL]
    report["workloads"] = run_bench(steady, contenders, opts.quick, repeat, opts.timeout,
                                    numaccel_backend=opts.numaccel_backend,
                                    log=lambda s: print(s, file=sys.stderr, flush=True),
                                    isolate=not opts.in_process)
    title = (f"steady state, median of {repeat} samples after a warm-up call "
             f"({'quick sizes' if opts.quick else 'full sizes'})")
    if steady:
        log(format_table(report["workloads"], contenders, title))
    corpus = None
    if opts.corpus is not None or FIRST_CALL in names:
        try:
            corpus = demo.find_corpus(opts.corpus or None)
        except demo.CorpusNotFoundError as exc:
            log(f"# corpus: {exc}")
    if FIRST_CALL in names:
        rows = first_call_rows(contenders, opts.quick, corpus, opts.timeout,
                               opts.numaccel_backend)
        report["first_call"] = {k: {"results": v, "ratios": ratios(v)} for k, v in rows.items()}
        log(format_table(report["first_call"], contenders,
                         "first call in a new process: first_call = compile + first call "
                         "(empty cache); compiled = until the compiled code is ready (numaccel "
                         "compiles in the background); warm_start = first call, warm disk "
                         "cache; import = import of the library"))
    if opts.corpus is not None and corpus is not None:
        report["corpus"] = run_corpus(corpus, opts.corpus_size, max(1, opts.corpus_repeat),
                                      opts.timeout, opts.numaccel_backend, log,
                                      warmup=max(0, opts.corpus_warmup))
    report["targets"] = [{"target": t, "measured": v, "met": m}
                         for t, v, m in check_targets(report)]
    log(format_targets(check_targets(report), opts.quick))
    if opts.json:
        Path(opts.json).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
