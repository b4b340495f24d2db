"""The measurement harness: demo table, bench JSON, and the baselines' agreement with NumPy.

No timings are asserted: the tests check that the harness runs, reports what it should, and
that the numexpr / hand-written Numba baselines compute what NumPy computes.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import numaccel
from numaccel import bench, demo
from numaccel.bench_workloads import BF16, WORKLOADS

REPO = Path(__file__).resolve().parents[1]


def _env(extra_path=None):
    env = demo.child_env()
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env["PYTHONPATH"]])
    return env


def _has_accelerate():
    try:
        import numaccel
        numaccel.accelerate(lambda x: x + 1, backend="numpy")(np.ones(2))
        return True
    except Exception:  # noqa: BLE001 - the compiler is someone else's work in progress
        return False


def _corpus_or_skip():
    try:
        return demo.find_corpus()
    except demo.CorpusNotFoundError as exc:
        pytest.skip(str(exc))


def _parse_table(stdout):
    """Rows of the demo table as dicts keyed by demo.COLUMNS; the geomean line separately."""
    lines = stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["program", "status"])
    assert lines[start].split() == list(demo.COLUMNS)
    rows, summary = {}, None
    for ln in lines[start + 1:]:
        if ln.startswith("geomean speedup:"):
            summary = ln
            break
        if ln.startswith("    "):  # detail line under a failed program
            continue
        fields = ln.split()
        assert len(fields) == len(demo.COLUMNS), ln
        rows[fields[0]] = dict(zip(demo.COLUMNS, fields))
    return rows, summary


def _run_demo(args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "numaccel", "demo", *args], cwd=REPO, env=env
                          or _env(), capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------------------------- demo

@pytest.mark.parametrize("compiler", ["plain", "numaccel-numpy"])
def test_demo_table_on_corpus_programs(compiler):
    corpus = _corpus_or_skip()
    programs = {"black_scholes", "heat2d_inplace"} if compiler == "plain" else {"heat2d_inplace"}
    args = ["--corpus", str(corpus), "--size", "S", "--repeat", "1", "--only", ",".join(programs)]
    if compiler == "plain":
        args += ["--compiler", "plain"]
    else:
        if not _has_accelerate():
            pytest.skip("numaccel.accelerate is not available yet")
        args += ["--compiler", "numaccel", "--backend", "numpy"]
    proc = _run_demo(args)
    rows, summary = _parse_table(proc.stdout)
    assert set(rows) == programs, proc.stdout + proc.stderr
    for r in rows.values():
        if compiler == "plain":
            assert r["status"] == "ok", proc.stdout
        if r["status"] == "ok":
            assert float(r["numpy_ms"]) > 0 and float(r["numaccel_ms"]) > 0
            assert float(r["speedup"].rstrip("x")) > 0 and float(r["first_call_ms"]) > 0
    assert summary is not None and summary.startswith("geomean speedup: ")
    all_ok = all(r["status"] == "ok" for r in rows.values())
    assert proc.returncode == (0 if all_ok else 1), proc.stdout + proc.stderr


_PROGRAM = '''
import numpy as np

def kernel(a, b):
    {body}

def init(size, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random(50), rng.random(50)

META = {{"rtol": 1e-9, "atol": 0.0, "inplace": {inplace}, "features": [], "dtype": "float64",
        "description": "test program"}}
'''

_STANDIN = '''
import numpy as np

def compile(fn):
    """A stand-in compiler: right for 'good*', off by one for 'wrong', raising for 'boom'."""
    name = fn.__module__
    def run(*args):
        if name == "corpus_boom":
            raise NotImplementedError("stand-in cannot compile this")
        out = fn(*args)
        return out + 1.0 if name == "corpus_wrong" else out
    return run
'''


def _standin_corpus(tmp_path, programs=("boom", "good", "good_inplace", "wrong")):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, body, inplace in [("boom", "return a * b", False),
                                ("good", "return np.sin(a) * b", False),
                                ("good_inplace", "a[1:] += b[:-1]", True),
                                ("wrong", "return a + b", False)]:
        if name in programs:
            (corpus / f"{name}.py").write_text(_PROGRAM.format(body=body, inplace=inplace))
    (tmp_path / "standin_compiler.py").write_text(_STANDIN)
    return corpus


def test_demo_reports_mismatch_and_error_and_continues(tmp_path):
    corpus = _standin_corpus(tmp_path)
    proc = _run_demo(["--corpus", str(corpus), "--all", "--repeat", "2",
                      "--compiler", "standin_compiler:compile"], env=_env(tmp_path))
    rows, summary = _parse_table(proc.stdout)
    status = {k: v["status"] for k, v in rows.items()}
    assert status == {"boom": "ERROR", "good": "ok", "good_inplace": "ok", "wrong": "MISMATCH"}
    assert "NotImplementedError: stand-in cannot compile this" in proc.stdout
    assert summary.endswith("2 failed")
    assert proc.returncode == 1


def test_bench_corpus_summary(tmp_path, monkeypatch):
    corpus = _standin_corpus(tmp_path, ("good", "wrong"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), demo.child_env()[
        "PYTHONPATH"]]))
    rep = bench.run_corpus(corpus, "S", 1, 60, log=lambda s: None,
                           compiler="standin_compiler:compile")
    assert [r["name"] for r in rep["programs"]] == ["good", "wrong"]
    assert rep["failed"] == ["wrong"]
    assert rep["geomean_speedup"] == pytest.approx(demo.speedup(rep["programs"][0]))
    assert set(rep["slower_than_numpy"]) <= {"good"}
    targets = {t: m for t, _, m in bench.check_targets({"corpus": rep})}
    assert targets["corpus S: no program slower than NumPy (or failing)"] is False


def test_demo_without_corpus_says_so(tmp_path, capsys):
    assert demo.main(["--corpus", str(tmp_path / "missing"), "--compiler", "plain"]) == 2
    err = capsys.readouterr().err
    assert "no NumPy program corpus found" in err and "--corpus DIR" in err


def test_demo_unknown_program(tmp_path, capsys):
    corpus = _corpus_or_skip()
    assert demo.main(["--corpus", str(corpus), "--compiler", "plain",
                      "--only", "no_such_program"]) == 2
    assert "unknown program(s) no_such_program" in capsys.readouterr().err


def test_compare_follows_corpus_rules():
    a = np.array([1.0, np.nan, 3.0])
    assert demo.compare(a, a.copy(), 1e-9, 0.0) is None  # NaN == NaN
    assert "dtype" in demo.compare(a, a.astype(np.float32), 1e-3, 0.0)
    assert "shape" in demo.compare(a, a[:2], 1e-3, 0.0)
    assert "expected None" in demo.compare(None, 1.0, 0, 0)
    assert "2 items" in demo.compare((1, 2), (1,), 0, 0)
    b = a.copy()
    b[0] += 1e-3
    assert "1/3 elements differ" in demo.compare(a, b, 1e-9, 0.0)
    assert demo.compare(a, b, 1e-9, 0.0, max_frac=0.34) is None
    assert demo.compare(np.int64(3), 3, 0, 0) is None  # numpy and python scalars alike
    assert demo.compare(np.arange(3), np.arange(3) + (np.arange(3) == 2), 0, 0) is not None
    assert demo.geomean([2.0, 8.0]) == pytest.approx(4.0) and demo.geomean([]) is None


# ------------------------------------------------------------------------------------ bench

def test_bench_quick_json(tmp_path):
    out = tmp_path / "bench.json"
    contenders = "numpy,numba,numaccel" if _has_accelerate() else "numpy,numba"
    cmd = [sys.executable, "-m", "numaccel.bench", "--quick", "--only", "chain_f32,softmax_f32",
           "--contenders", contenders, "--repeat", "2", "--numaccel-backend", "numpy",
           "--json", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert {"machine", "options", "workloads"} <= set(rep)
    assert {"cpu", "cores", "numpy", "numba", "blas"} <= set(rep["machine"])
    assert set(rep["workloads"]) == {"chain_f32", "softmax_f32"}
    for row in rep["workloads"].values():
        assert set(row["results"]) == set(contenders.split(","))
        for c in ("numpy", "numba"):
            r = row["results"][c]
            assert r["status"] == "ok", r
            assert r["median_ms"] > 0 and len(r["samples_ms"]) == 2
        if "numaccel" in row["results"]:
            assert set(row["ratios"]) == {"numpy", "numba"}
    assert "chain_f32" in proc.stdout and "machine:" in proc.stdout


def test_run_bench_with_standins():
    good = lambda w: w.numpy_fn

    def wrong(w):
        return lambda *a: w.numpy_fn(*a) * 2

    def broken(w):
        raise NotImplementedError("stand-in: no such backend")

    res = bench.run_bench(["softmax_f32", "overhead_tiny"], ["numpy", "numaccel", "numexpr"],
                          quick=True, repeat=1, compilers={"numaccel": good},
                          log=lambda s: None)
    for row in res.values():
        assert row["results"]["numaccel"]["status"] == "ok"
        assert row["ratios"]["numpy"] > 0
    assert res["overhead_tiny"]["results"]["numaccel"]["calls_per_sample"] >= 100
    res = bench.run_bench(["chain_f32"], ["numpy", "numaccel"], quick=True, repeat=1,
                          compilers={"numaccel": wrong}, log=lambda s: None)
    assert res["chain_f32"]["results"]["numaccel"]["status"] == "MISMATCH"
    assert res["chain_f32"]["ratios"]["numpy"] is None
    res = bench.run_bench(["chain_f32"], ["numaccel"], quick=True, repeat=1,
                          compilers={"numaccel": broken}, log=lambda s: None)
    r = res["chain_f32"]["results"]["numaccel"]
    assert r["status"] == "n/a" and "no such backend" in r["reason"]
    table = bench.format_table(res, ["numpy", "numaccel"], "t")
    assert "n/a" in table and "no such backend" in table


def test_isolated_contenders_run_each_in_a_process_of_its_own():
    import os
    res = bench.run_bench(["chain_f32"], ["numpy", "numba", "numaccel"], quick=True,
                          repeat=2, numaccel_backend="numpy", log=lambda s: None,
                          isolate=True, compilers={"numba": lambda w: w.numpy_fn})
    r = res["chain_f32"]["results"]
    for c in ("numpy", "numaccel"):
        assert r[c]["status"] == "ok" and len(r[c]["samples_ms"]) == 2, r[c]
    assert len({r["numpy"]["pid"], r["numaccel"]["pid"], os.getpid()}) == 3
    assert "pid" not in r["numba"]             # given in-process: sampled here
    assert res["chain_f32"]["ratios"]["numpy"] > 0


# -------------------------------------------------------------- baselines agree with NumPy

_BASELINES = [(name, kind) for name, w in WORKLOADS.items()
              for kind in ("numexpr", "numba") if getattr(w, f"{kind}_fn") is not None]


@pytest.mark.parametrize("name,kind", _BASELINES)
def test_baseline_matches_numpy(name, kind):
    w = WORKLOADS[name]
    args = w.make_args(True)
    before = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    ref = w.numpy_fn(*args)
    got = getattr(w, f"{kind}_fn")(*args)
    assert np.asarray(got).dtype == np.asarray(ref).dtype
    assert w.matches(got, ref)
    for a, b in zip(args, before):  # the baselines must not write into their inputs
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    # the check itself must be able to fail
    if np.asarray(ref).dtype == BF16:
        bumped = (np.asarray(ref, np.float32) + 0.5).astype(BF16)
    else:
        bumped = np.asarray(ref) + np.asarray(ref).dtype.type(0.5)
    assert not w.matches(bumped, ref)


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 1031), (2, 3, 16)])
@pytest.mark.parametrize("name", ["softmax_f32", "layernorm_f32", "softmax_bf16"])
def test_row_baselines_other_shapes(name, shape):
    w = WORKLOADS[name]
    rng = np.random.default_rng(3)
    x = (4.0 * rng.standard_normal(shape)).astype(np.float32)
    if name == "softmax_bf16":
        x = x.astype(BF16)
    args = (x,)
    if name == "layernorm_f32":
        args = (x, rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32),
                rng.standard_normal(shape[-1]).astype(np.float32))
    ref = w.numpy_fn(*args)
    for fn in (w.numba_fn, w.numexpr_fn):
        if fn is not None:
            assert w.matches(fn(*args), ref)
    # a non-contiguous view goes through the same code
    if x.ndim == 2 and x.shape[0] > 1:
        v = (x[::2],) + args[1:]
        assert w.matches(w.numba_fn(*v), w.numpy_fn(*v))


@pytest.mark.parametrize("n,steps", [(3, 1), (17, 4), (40, 0)])
def test_heat_baselines_other_sizes(n, steps):
    w = WORKLOADS["heat2d_f64"]
    u = np.random.default_rng(5).random((n, n + 3))
    ref = w.numpy_fn(u, 0.2, steps)
    assert w.matches(w.numba_fn(u, 0.2, steps), ref)
    assert w.matches(w.numexpr_fn(u, 0.2, steps), ref)


@pytest.mark.parametrize("n,tol,cap", [(3, 1e-3, 10), (17, 1e-4, 2000), (9, 0.0, 0)])
def test_jacobi_baseline_other_sizes_and_stops(n, tol, cap):
    # the error test ends the loop (17: before the cap), or the cap does, or no sweep runs
    w = WORKLOADS["jacobi_while"]
    f = np.random.default_rng(2).uniform(-1, 1, (n, n + 2))
    ref = w.numpy_fn(f, 0.1, tol, cap)
    assert w.matches(w.numba_fn(f, 0.1, tol, cap), ref)
    acc = numaccel.accelerate(w.numpy_fn)
    assert w.matches(acc(f, 0.1, tol, cap), ref)


@pytest.mark.parametrize("n", [0, 1, 1023])
def test_chain_baselines_other_sizes(n):
    rng = np.random.default_rng(9)
    x, y = rng.uniform(-3, 3, n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    for name in ("chain_f32", "chain_bf16"):
        w = WORKLOADS[name]
        a, b = (x, y) if name == "chain_f32" else (x.astype(BF16), y.astype(BF16))
        ref = w.numpy_fn(a, b)
        for fn in (w.numba_fn, w.numexpr_fn):
            if fn is not None:
                assert w.matches(fn(a, b), ref)


def test_first_call_rows_numpy_only():
    rows = bench.first_call_rows(["numpy", "numexpr"], True, None, 60)
    cold = rows["first_call[layernorm_f32]"]
    assert cold["numpy"]["status"] == "ok" and cold["numpy"]["first_call_ms"] > 0
    assert cold["numexpr"]["status"] == "n/a"
    assert rows["warm_start[layernorm_f32]"]["numpy"]["status"] == "n/a"
    # the import row comes from the cold run where there is no warm one
    assert rows["import[layernorm_f32]"]["numpy"]["median_ms"] == cold["numpy"]["import_ms"]
    assert rows["import[layernorm_f32]"]["numexpr"]["status"] == "n/a"


def test_asv_suite_imports():
    sys.path.insert(0, str(REPO / "asv_bench"))
    try:
        from benchmarks import bench_core
    finally:
        sys.path.pop(0)
    names = {k for k in dir(bench_core) if not k.startswith("_")}
    assert {"ElementwiseChainF32", "Reductions", "SoftmaxF32", "LayernormF32", "StencilHeat2D",
            "MatmulGeluF32", "ChainBF16", "OverheadTiny", "FirstCall", "WarmStart"} <= names
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_allclose(bench_core.row_sumsq(x), (x.astype(np.float64) ** 2).sum(-1),
                               rtol=1e-5)
    code = textwrap.dedent(bench_core._STMT)
    assert "numaccel.accelerate" in code


_COUNTING = '''
CALLS = []

def compile(fn):
    """Counts calls; wrong on the second one only (a warm-up call)."""
    def run(*args):
        CALLS.append(1)
        out = fn(*args)
        return out + 1.0 if len(CALLS) == 2 else out
    return run
'''


def test_run_program_warms_up_and_checks_warm_up_calls(tmp_path, monkeypatch):
    corpus = _standin_corpus(tmp_path, ("good",))
    (tmp_path / "counting_compiler.py").write_text(_COUNTING)
    monkeypatch.syspath_prepend(str(tmp_path))
    import counting_compiler
    rec = demo.run_program(corpus, "good", "S", "counting_compiler:compile", repeat=3,
                           warmup=2)
    # the first call, two untimed warm-up calls, three timed ones
    assert len(counting_compiler.CALLS) == 6
    assert rec["status"] == "MISMATCH", rec
    counting_compiler.CALLS[:] = [1, 1]          # no wrong call this time
    rec = demo.run_program(corpus, "good", "S", "counting_compiler:compile", repeat=2,
                           warmup=0)
    assert len(counting_compiler.CALLS) == 5 and rec["status"] == "ok", rec


def test_timed_runs_settle_first_for_the_set_time(monkeypatch):
    # NUMACCEL_SETTLE_S busy-waits for BLAS threads to sleep before each timed run
    import time
    calls = []
    monkeypatch.setenv("NUMACCEL_SETTLE_S", "0.05")
    t0 = time.perf_counter()
    out, ms, _ = demo._timed_run(lambda x: calls.append(x) or x + 1, (1,), False, 2)
    assert time.perf_counter() - t0 >= 0.05 and ms < (time.perf_counter() - t0) * 1e3
    assert out == 2 and calls == [1, 1]
    monkeypatch.delenv("NUMACCEL_SETTLE_S")
    t0 = time.perf_counter()
    demo.settle()            # off by default (a pause slowed every contender's runs)
    assert time.perf_counter() - t0 < 0.05


def test_short_calls_are_timed_back_to_back_in_samples_of_about_30_ms():
    import time
    fast = lambda w: w.numpy_fn

    def slow(w):
        def f(*a):
            time.sleep(0.04)
            return w.numpy_fn(*a)
        return f

    res = bench.run_bench(["softmax_f32"], ["numpy", "numaccel"], quick=True, repeat=1,
                          compilers={"numaccel": slow, "numpy": fast}, log=lambda s: None)
    r = res["softmax_f32"]["results"]
    assert r["numaccel"]["calls_per_sample"] == 1       # one call is over 30 ms
    assert r["numpy"]["calls_per_sample"] == 50          # quick softmax: microseconds
    assert r["numaccel"]["median_ms"] >= 40
