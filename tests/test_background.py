"""Background compilation (numaccel.config.background_compile, trace/background.py): the
first calls of a graph run on the reference interpreter while one worker thread compiles
it; results equal NumPy's throughout, and the compiled code takes over once ready."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numaccel
from numaccel.backends import Backend, register_backend
from numaccel.interp import interpret
from numaccel.lower.cpu import CompiledGraph
from numaccel.trace import api, background
from conftest import assert_same


@pytest.fixture
def bg(monkeypatch):
    monkeypatch.setattr(numaccel.config, "background_compile", True)
    yield
    assert numaccel.wait_for_compiles(timeout=120)


@pytest.fixture
def held(bg):
    """The worker busy with a job that waits for ``held.set()`` (set at the end too)."""
    gate = threading.Event()
    background.submit(gate.wait)
    yield gate
    gate.set()


def chain(x, y):
    return np.sin(x) * y + np.exp(-x) * np.float32(0.5)


def rows(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True), x.sum()


@pytest.mark.parametrize("n", [7, 300_000])     # compiled wrapper / step wrapper + threads
def test_interpreter_until_compiled_then_compiled(held, n):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    f = numaccel.accelerate(chain)
    assert_same(f(x, y), chain(x, y))   # the worker is held: the call was interpreted
    e = f.entries[0]
    assert e.pending is not None and not e.pending.done()
    assert not isinstance(e.run, CompiledGraph)
    assert f.cache_info().compiles == 1 and f.cache_info().misses == 1
    assert not numaccel.wait_for_compiles(timeout=0.05)
    # the second call waits for the compile (released while it waits), then runs it
    threading.Timer(0.3, held.set).start()
    assert_same(f(x, y), chain(x, y))
    assert e.pending is None and isinstance(e.run, CompiledGraph)
    assert background.pending() == 0


def test_in_place_updates_while_and_after_compiling(held):
    def step(u, v):
        u[1:-1] += np.float64(0.25) * (u[2:] - 2 * u[1:-1] + u[:-2])
        v *= 2
        return u.sum()

    rng = np.random.default_rng(1)
    u0, v0 = rng.standard_normal(50), np.arange(6)
    f = numaccel.accelerate(step)
    u1, v1, u2, v2 = u0.copy(), v0.copy(), u0.copy(), v0.copy()
    for k in range(5):
        if k == 1:
            held.set()          # the first call ran interpreted; the rest compiled
        assert_same(f(u1, v1), step(u2, v2))
        np.testing.assert_allclose(u1, u2, rtol=1e-13)
        np.testing.assert_array_equal(v1, v2)
    assert isinstance(f.entries[0].run, CompiledGraph)


def _views():
    base = np.arange(24 * 6, dtype=np.float32).reshape(24, 6)
    ro = base.copy()
    ro.flags.writeable = False
    return {"c": base, "f": np.asfortranarray(base), "step": base[::3, 1::2],
            "neg": base[::-2, ::-1], "t": base.T, "readonly": ro, "empty": base[:0],
            "col": base[:, 2:3]}


@pytest.mark.parametrize("name", list(_views()))
def test_replica_keeps_what_numba_types(name):
    x = _views()[name]
    r = background.replica(x)
    assert r is not x and not np.shares_memory(r, x)
    assert (r.dtype, r.shape, r.strides) == (x.dtype, x.shape, x.strides)
    for flag in ("c_contiguous", "f_contiguous", "writeable", "aligned"):
        assert getattr(r.flags, flag) == getattr(x.flags, flag), flag
    np.testing.assert_array_equal(r, x)
    assert background.replica(3.5) == 3.5


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(-3, 3).filter(bool),
       st.integers(-3, 3).filter(bool), st.sampled_from(["f8", "i2", "c8", "u1"]))
def test_replica_of_strided_views(n0, n1, s0, s1, dt):
    base = (np.arange(20 * 20) % 251).astype(dt).reshape(20, 20)
    x = base[::s0, ::s1][:n0, :n1]
    r = background.replica(x)
    assert (r.strides, r.shape, r.flags.aligned) == (x.strides, x.shape, x.flags.aligned)
    np.testing.assert_array_equal(r, x)


def test_compiled_for_the_callers_layouts(held):
    # the worker compiles on replicas: a later call with the real (non-contiguous,
    # read-only) arrays finds its kernel specializations made, compiling nothing more
    views = _views()
    f = numaccel.accelerate(lambda a, b, c: (a * 2 + np.float32(1), b - c))
    args = (views["neg"], views["step"], views["readonly"][::3, ::2])
    assert_same(f(*args), (args[0] * 2 + np.float32(1), args[1] - args[2]))
    held.set()
    numaccel.wait_for_compiles(timeout=120)
    from numba.core import event
    with event.install_recorder("numba:compile") as rec:
        assert_same(f(*args), (args[0] * 2 + np.float32(1), args[1] - args[2]))
    assert isinstance(f.entries[0].run, CompiledGraph)
    assert rec.buffer == [], "the compiled run compiled again for the caller's arrays"


def test_dynamic_shapes_and_recompiles(bg):
    f = numaccel.accelerate(rows)
    rng = np.random.default_rng(2)
    for n in (5, 9, 13, 21):
        x = rng.standard_normal((n, 40))
        assert_same(f(x), rows(x))
        numaccel.wait_for_compiles(timeout=120)
        assert_same(f(x), rows(x))
    info = f.cache_info()
    assert info.entries == 2 and info.recompiles == 1
    assert all(e.pending is None or e.pending.done() for e in f.entries)


def test_program_error_raised_as_numpy_raises(bg):
    f = numaccel.accelerate(lambda x, i: x[i] + 1)
    with pytest.raises(IndexError):
        f(np.arange(4.0), np.array([1, 9]))
    assert numaccel.wait_for_compiles(timeout=120)


class _BrokenRun(Backend):
    name = "broken_bg"
    compiles_in_background = True

    def compile(self, graph, **options):
        def run(values, env):
            raise RuntimeError("kernel launch failed")
        return run


def test_failed_background_compile_keeps_the_interpreter(bg):
    register_backend("broken_bg", _BrokenRun, replace=True)
    f = numaccel.accelerate(chain, backend="broken_bg")
    x = np.linspace(-1, 1, 33, dtype=np.float32)
    for _ in range(3):
        assert_same(f(x, x), chain(x, x))
        numaccel.wait_for_compiles(timeout=60)
    e = f.entries[0]
    assert e.pending is None and "kernel launch failed" in e.reason
    assert_same(e.run([x, x], {})[0], chain(x, x))


def test_large_inputs_compile_on_the_callers_thread(bg, monkeypatch):
    monkeypatch.setattr(background, "REPLICA_MAX", 10)
    f = numaccel.accelerate(chain)
    x = np.ones(64, np.float32)
    assert_same(f(x, x), chain(x, x))
    assert f.entries[0].pending is None and isinstance(f.entries[0].run, CompiledGraph)
    assert background.pending() == 0


def test_explain_reports_the_compiled_plan(bg, capsys):
    x = np.linspace(0, 1, 300_000, dtype=np.float32)
    ex = numaccel.explain(chain, x, x)
    assert ex.entry_kind == "one full graph" and "kernel" in ex.plan


def test_off_compiles_in_the_first_call(monkeypatch):
    monkeypatch.setattr(numaccel.config, "background_compile", False)
    f = numaccel.accelerate(chain)
    x = np.ones(10, np.float32)
    f(x, x)
    assert f.entries[0].pending is None and isinstance(f.entries[0].run, CompiledGraph)


def test_interpreted_calls_equal_compiled_ones_on_special_values(held):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e-30, 3.0], np.float32)
    y = x[::-1].copy()
    f = numaccel.accelerate(chain)
    a = f(x, y)
    held.set()
    numaccel.wait_for_compiles(timeout=120)
    b = f(x, y)
    with np.errstate(all="ignore"):
        assert_same(a, chain(x, y))
    assert_same(b, a)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_compiles_what_the_parent_had_queued(held):
    f = numaccel.accelerate(chain)
    x = np.linspace(0, 1, 17, dtype=np.float32)
    f(x, x)                                   # queued behind the held job
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:                               # child: its copy of the gate is not set
        code = 1
        try:
            held.set()                         # the re-queued gate job returns
            ok = numaccel.wait_for_compiles(timeout=120)
            np.testing.assert_allclose(f(x, x), chain(x, x), rtol=1e-6)
            code = 0 if ok and isinstance(f.entries[0].run, CompiledGraph) else 2
        finally:
            os._exit(code)
    held.set()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_exit_while_compiling_is_clean_and_leaves_a_warm_cache(tmp_path):
    prog = textwrap.dedent("""
        import sys
        import numpy as np
        import numaccel
        def f(x):
            m = x.max(axis=-1, keepdims=True)
            return np.exp(x - m).sum(axis=-1)
        # (large enough for the step kernels, which store native entries: a mid-size
        # graph would run as the compiled wrapper, a Numba function)
        x = np.random.default_rng(0).standard_normal((640, 500)).astype(np.float32)
        g = numaccel.accelerate(f)
        np.testing.assert_allclose(g(x), f(x), rtol=1e-5)
        # exit once the worker has taken the compile up (a queued one is dropped at
        # exit; on a busy machine the worker may not have run yet)
        import time
        from numaccel.trace import background
        t0 = time.time()
        while not background._busy and background.pending() and time.time() - t0 < 60:
            time.sleep(0.001)
        print(g.entries[0].pending is not None)
    """)
    env = dict(os.environ, NUMACCEL_CACHE_DIR=str(tmp_path / "cache"),
               NUMACCEL_BACKGROUND_COMPILE="1")
    cmd = [sys.executable, "-c", prog]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert first.stdout.strip() == "True"      # it exited with the compile running
    native = list((tmp_path / "cache").rglob("*.json"))
    assert native, "the compile in progress at exit did not finish its cache entries"
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0 and second.stderr == "", second.stderr


def test_interpreter_oracle_matches_entry_run_during_compile(held):
    f = numaccel.accelerate(rows)
    x = np.random.default_rng(3).standard_normal((4, 8))
    f(x)
    e = f.entries[0]
    assert_same(tuple(e.run([x], {})), tuple(interpret(e.graph, [x], {})))


def _relax(u, tol):
    # a data-dependent loop: graph breaks, the pieces between them are segments
    err, it = 1.0, 0
    while err > tol and it < 50:
        v = u.copy()
        v[1:-1] = 0.5 * (u[2:] + u[:-2])
        err = float(np.abs(v - u).max())
        u, it = v, it + 1
    return u, it


def test_graph_break_segments_compile_in_the_background(held, monkeypatch):
    u = np.sin(np.linspace(0, 3, 4000)) + np.linspace(0, 1, 4000) ** 2
    f = numaccel.accelerate(_relax)
    ref = _relax(u, 1e-4)
    assert_same(f(u, 1e-4), ref)        # the worker is held: pieces ran interpreted
    assert f.entries[0].kind == "segmented"
    assert any(s.pending is not None for s in f.segments.by_graph.values())
    # the next call first waits for the pieces queued so far (released while it
    # waits); the policy's sample leaves the wait out
    monkeypatch.setattr(numaccel.config, "segmented_mode", "trace")
    threading.Timer(0.3, held.set).start()
    t0 = time.perf_counter()
    assert_same(f(u, 1e-4), ref)
    wall = time.perf_counter() - t0
    assert held.is_set() and f.segments.interpreted == 0
    (pol,) = f.entries[0].policies.values()
    assert pol.traced and pol.traced[-1] <= wall - 0.2
    slots = [s for s in f.segments.by_graph.values() if s.compiled]
    assert slots and all(s.pending is None for s in slots)
    assert any(isinstance(s.run, CompiledGraph) for s in slots)


def test_plain_numpy_calls_of_a_segmented_function_wait_for_its_compiles(held,
                                                                         monkeypatch):
    # (NumPy's small calls beside a compile thread waited on the GIL: ~10x slower)
    u = np.linspace(0, 1, 3000) ** 2
    f = numaccel.accelerate(_relax)
    ref = _relax(u, 1e-4)
    assert_same(f(u, 1e-4), ref)
    assert any(s.pending is not None for s in f.segments.by_graph.values())
    monkeypatch.setattr(numaccel.config, "segmented_mode", "eager")
    threading.Timer(0.3, held.set).start()
    assert_same(f(u, 1e-4), ref)
    assert held.is_set() and background.pending() == 0
    assert all(s.pending is None for s in f.segments.by_graph.values())


def test_benchmarks_time_the_compiled_code(held):
    # bench.first_call (and the demo) wait for the background compile after the first
    # call, so that their timed samples are the compiled code's, not the interpreter's
    from numaccel import bench, demo
    from numaccel.bench_workloads import WORKLOADS
    w = WORKLOADS["overhead_tiny"]
    args = w.make_args(True)
    f = numaccel.accelerate(w.numpy_fn)
    threading.Timer(0.2, held.set).start()
    rec = bench.first_call(f, args, w.numpy_fn(*args), w)
    assert rec["status"] == "ok" and background.pending() == 0
    f(*args)
    assert isinstance(f.entries[0].run, CompiledGraph)
    gate = threading.Event()
    background.submit(gate.wait)
    threading.Timer(0.2, gate.set).start()
    demo.wait_for_compiles()
    assert gate.is_set() and background.pending() == 0


def test_the_second_call_waits_for_the_compile(bg):
    # (running NumPy beside the compile slowed both on 2 cores); the Python body runs
    # once, for the trace, and never again once compiled
    ran = []

    def g(x):
        ran.append(1)
        return x * 2 + 1

    gate = threading.Event()
    background.submit(gate.wait)
    f = numaccel.accelerate(g)
    x = np.arange(5.0)
    assert_same(f(x), x * 2 + 1)
    assert f.entries[0].pending is not None
    threading.Timer(0.3, gate.set).start()
    for _ in range(3):
        assert_same(f(x), x * 2 + 1)
    assert gate.is_set() and f.entries[0].pending is None
    assert len(ran) == 1


def test_replica_without_copy_keeps_the_layout():
    x = np.arange(60.0).reshape(6, 10)[::2, 1:]
    r = background.replica(x, copy=False)
    assert (r.dtype, r.shape, r.strides, r.flags.aligned) == \
        (x.dtype, x.shape, x.strides, x.flags.aligned)
    assert not np.shares_memory(r, x)


def test_only_inputs_the_graph_reads_are_copied_for_the_warm_run():
    from numaccel.graph import Graph
    from numaccel.ir import AVal
    g = Graph()
    a = g.add("input", [], {"index": 0}, AVal((4,), np.dtype("f8")))
    g.add("input", [], {"index": 1}, AVal((4,), np.dtype("f8")))       # passed through
    g.add("negative", [a.id], {}, AVal((4,), np.dtype("f8")))
    assert background._read_inputs(g) == {0}
