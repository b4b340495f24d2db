"""Guards, the compile cache, automatic dynamic shapes, graph breaks, explain, API errors."""
import warnings

import numpy as np
import pytest

import numaccel
from numaccel.config import config

from conftest import assert_same, check_np


def chain(x, y):
    return np.sin(x) * y + np.exp(-x) * 0.5


def test_decorator_forms_keep_metadata():
    @numaccel.accelerate
    def f(x):
        """doc"""
        return x + 1

    @numaccel.accelerate(backend="numpy", dynamic=False)
    def g(x):
        return x * 2
    assert f.__name__ == "f" and f.__doc__ == "doc"
    assert g.__name__ == "g"
    assert_same(f(np.ones(3)), np.ones(3) + 1)
    assert_same(g(np.ones(3)), np.ones(3) * 2)


def test_batch_sizes_3_to_100_cost_two_compilations(rng):
    f = numaccel.accelerate(chain)
    for n in range(3, 101):
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        assert_same(f(x, y), chain(x, y))
    info = f.cache_info()
    assert info.compiles == 2, info
    assert info.hits == 96 and info.misses == 2


def test_sizes_zero_and_one_specialize_once_each(rng):
    f = numaccel.accelerate(chain)
    sizes = [5, 6, 7, 0, 1, 8, 0, 1, 9, 1, 0]
    for n in sizes:
        x, y = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
        assert_same(f(x, y), chain(x, y))
    assert f.cache_info().compiles == 4  # 5 (static), dynamic, 0, 1


def test_dynamic_true_false_and_global_switch(rng):
    f = numaccel.accelerate(chain, dynamic=True)
    for n in (4, 5, 6):
        f(rng.standard_normal(n), rng.standard_normal(n))
    assert f.cache_info().compiles == 1
    g = numaccel.accelerate(chain, dynamic=False)
    for n in (4, 5, 6):
        g(rng.standard_normal(n), rng.standard_normal(n))
    assert g.cache_info().compiles == 3
    config.automatic_dynamic_shapes = False
    try:
        h = numaccel.accelerate(chain)
        for n in (4, 5, 6):
            h(rng.standard_normal(n), rng.standard_normal(n))
        assert h.cache_info().compiles == 3
    finally:
        config.automatic_dynamic_shapes = True


def test_mark_dynamic(rng):
    f = numaccel.accelerate(lambda x: x.sum(axis=1))
    x = numaccel.mark_dynamic(rng.standard_normal((4, 3)), 0)
    f(x)
    for n in (5, 6, 7):
        y = rng.standard_normal((n, 3))
        assert_same(f(y), y.sum(axis=1))
    assert f.cache_info().compiles == 1
    with pytest.raises(ValueError, match="out of range"):
        numaccel.mark_dynamic(x, 5)
    with pytest.raises(TypeError):
        numaccel.mark_dynamic([1, 2], 0)


def test_symbolic_shapes_flow_into_reshape_slices_and_creation(rng):
    def f(x):
        n = x.shape[0]
        y = x.reshape(n // 2, 2, -1)
        z = np.zeros((n, 2))
        z[1:-1] = x[1:-1, :2]
        return y.sum(axis=1), z, x[: n - 1], np.arange(n) * 2, x[-1]
    acc = numaccel.accelerate(f)
    for n in (4, 6, 8, 10, 12):
        x = rng.standard_normal((n, 3))
        assert_same(acc(x), f(x))
    assert acc.cache_info().compiles == 2


def test_dtype_rank_and_structure_changes_recompile(rng, capsys):
    f = numaccel.accelerate(lambda x: x * 2)
    f(np.ones(3))
    f(np.ones(3, np.float32))
    f(np.ones((3, 1)))
    f(np.ones(3))
    assert f.cache_info().compiles == 3 and f.cache_info().hits == 1


def test_python_int_used_as_loop_count_is_specialized(rng):
    def f(x, steps):
        for _ in range(steps):
            x = x * 0.5 + 1
        return x
    acc = check_np(f, rng.standard_normal(4), 3)
    acc(np.ones(4), 3)
    assert_same(acc(np.ones(4), 5), f(np.ones(4), 5))
    assert acc.cache_info().compiles == 2


def test_cache_size_limit_warns_once_and_stays_correct(rng):
    old = config.cache_size_limit
    config.cache_size_limit = 2
    try:
        f = numaccel.accelerate(lambda x, k: x[:k] * 2)  # k is a size: specialized
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for k in range(1, 6):
                assert_same(f(np.arange(6.0), k), np.arange(6.0)[:k] * 2)
        assert sum("cache_size_limit" in str(x.message) for x in w) == 1
        assert f.cache_info().entries == 2
    finally:
        config.cache_size_limit = old


def test_data_dependent_control_flow_breaks_and_stays_correct(rng):
    def f(x, tol):
        err = 1.0
        it = 0
        while err > tol:
            y = 0.5 * (x + 2.0 / x)
            err = float(np.abs(y - x).max())
            x = y
            it += 1
        if x.sum() > 0:
            return x, it
        return -x, it
    acc = check_np(f, np.array([1.0, 4.0, 9.0]), 1e-10)
    info = acc.cache_info()
    assert info.graph_breaks > 0
    x2 = np.array([2.0, 3.0, 100.0])
    assert_same(acc(x2, 1e-12), f(x2, 1e-12))


def test_unsupported_functions_break_and_compile_pieces(rng):
    def f(a, b):
        m = a @ a.T + np.eye(a.shape[0])
        s = np.linalg.pinv(m) @ b     # pinv: not traced (a graph break)
        srt = np.sort(s)
        return srt * 2 + 1, np.linalg.svd(m, compute_uv=False).sum()   # svd: a break
    a, b = rng.standard_normal((4, 4)), rng.standard_normal(4)
    acc = check_np(f, a, b, calls=3)
    info = acc.cache_info()
    assert info.graph_breaks >= 2
    # pieces are cached: later calls add no compilations
    before = acc.cache_info().compiles
    acc(a, b)
    assert acc.cache_info().compiles == before


def test_fullgraph_error_names_source_line_and_reason():
    @numaccel.accelerate(fullgraph=True)
    def f(x):
        if x.sum() > 0:  # the line the error must name
            return x
        return -x
    with pytest.raises(numaccel.GraphBreakError) as e:
        f(np.ones(3))
    msg = str(e.value)
    assert "if x.sum() > 0:  # the line the error must name" in msg
    assert "bool()" in msg and "test_trace_cache.py" in msg

    @numaccel.accelerate(fullgraph=True)
    def g(x):
        return np.linalg.pinv(x)
    with pytest.raises(numaccel.GraphBreakError, match="linalg.pinv"):
        g(np.eye(2))


def test_explain_reports_graphs_breaks_guards(capsys):
    def f(x):
        y = x * 2
        if y.sum() > 0:
            return y + 1
        return y
    ex = numaccel.explain(f, np.ones(3))
    out = capsys.readouterr().out
    assert len(ex.graph_breaks) == 1 and "if y.sum() > 0" in ex.graph_breaks[0][1]
    assert len(ex.graphs) == 2 and ex.op_count >= 3
    assert "graph breaks: 1" in out and "multiply" in out
    ex2 = numaccel.explain(chain, np.ones(3), np.ones(3))
    assert ex2.graph_breaks == [] and len(ex2.graphs) == 1
    assert "float64[3]" in ex2.guards and "sin" in str(ex2)


def test_logs_env(monkeypatch, capsys):
    monkeypatch.setattr(config, "logs", frozenset({"recompiles", "graph_breaks"}))
    f = numaccel.accelerate(chain)
    f(np.ones(3), np.ones(3))
    f(np.ones(4), np.ones(4))
    g = numaccel.accelerate(lambda x: x if x.sum() > 0 else -x)
    g(np.ones(2))
    err = capsys.readouterr().err
    assert "[numaccel:recompiles]" in err and "changed 3 -> 4" in err
    assert "[numaccel:graph_breaks]" in err


def test_globals_and_closures_are_constants_by_reference():
    w = np.arange(3.0)

    def f(x):
        return x * w
    acc = numaccel.accelerate(f)
    assert_same(acc(np.ones(3)), np.arange(3.0))
    w[:] = 10.0                      # in-place change: seen
    assert_same(acc(np.ones(3)), np.full(3, 10.0))
    w = np.zeros(3)                  # rebinding: not seen until reset()
    assert_same(acc(np.ones(3)), np.full(3, 10.0))
    acc.reset()
    assert_same(acc(np.ones(3)), np.zeros(3))


def test_inplace_on_global_array_is_written_back():
    buf = np.zeros(3)

    def f(x):
        buf[:] += x
        return buf.sum()
    acc = numaccel.accelerate(f)
    acc(np.ones(3))
    acc(np.ones(3))
    assert_same(buf, np.full(3, 2.0))


def test_returning_an_input_returns_the_same_object():
    def f(u):
        u[0] = 1.0
        return u
    acc = numaccel.accelerate(f)
    a = np.zeros(3)
    assert acc(a) is a and a[0] == 1.0
    b = np.zeros(3)
    assert acc(b) is b and b[0] == 1.0


def test_aliasing_inputs_with_mutation_stay_correct():
    def f(a, b):
        a += 1
        return b * 2
    base = np.zeros(4)
    ref_base = np.zeros(4)
    ref = f(ref_base, ref_base)
    got = numaccel.accelerate(f)(base, base)
    assert_same(got, ref)
    assert_same(base, ref_base)


def test_pytree_arguments_and_results(rng):
    def f(params, x, mode="scale"):
        w, b = params["w"], params["b"]
        out = x @ w + b
        return {"out": out * 2 if mode == "scale" else out, "norms": [out.sum(), None]}
    p = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    check_np(f, p, rng.standard_normal((4, 3)))
    check_np(f, p, rng.standard_normal((4, 3)), mode="plain")


def test_bad_input_errors():
    with pytest.raises(TypeError, match="expects a function"):
        numaccel.accelerate(42)
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        numaccel.accelerate(chain, backend="tpu")
    with pytest.raises(TypeError, match="dynamic must be"):
        numaccel.accelerate(chain, dynamic="yes")

    class Opaque:
        pass
    f = numaccel.accelerate(lambda x, o: x)
    with pytest.raises(TypeError, match="unsupported argument of type .*Opaque"):
        f(np.ones(2), Opaque())


def test_user_errors_are_numpys_errors():
    f = numaccel.accelerate(lambda x, y: x + y)
    with pytest.raises(ValueError, match="broadcast"):
        f(np.ones(3), np.ones(4))
    g = numaccel.accelerate(lambda x: x[5])
    with pytest.raises(IndexError):
        g(np.ones(3))


def test_third_party_backend_registry():
    from numaccel.interp import NumpyBackend

    calls = []

    class Counting(NumpyBackend):
        name = "counting"

        def compile(self, graph, **options):
            calls.append(graph.op_count())
            return super().compile(graph, **options)
    numaccel.register_backend("counting", Counting, replace=True)
    f = numaccel.accelerate(chain, backend="counting")
    assert_same(f(np.ones(3), np.ones(3)), chain(np.ones(3), np.ones(3)))
    assert calls == [6]
    assert "counting" in numaccel.list_backends()


def test_user_numba_code_still_sees_numpys_creation_functions():
    import numba
    f = numaccel.accelerate(lambda x: np.zeros(3) + x, backend="numpy")
    f(np.ones(3))
    assert np.zeros is getattr(np.zeros, "__wrapped__", np.zeros)  # no hook left behind

    @numba.njit
    def g(n):
        return np.zeros(n) + np.arange(n)
    np.testing.assert_array_equal(g(3), np.arange(3.0))


def test_prefrozen_attrs_equal_what_freeze_attrs_makes():
    # the tracer's fast paths (a plain ufunc call, a Python scalar operand) hand over attrs
    # frozen by hand: they must be the keys freeze_attrs would make, or a segment traced
    # through a fast path and one traced the long way would not share a cache entry
    from numaccel.trace.npapi import _NO_DTYPE, _NO_DTYPE_FROZEN
    from numaccel.trace.segments import freeze_attrs
    from numaccel.trace.tracer import TraceState
    assert freeze_attrs(_NO_DTYPE) == (_NO_DTYPE_FROZEN, False)
    st = TraceState(fullgraph=False, run_segment=None)
    for x in [0, -3, 1 << 62, 2.5, -0.0, 0.0, float("nan"), float("inf"), True, False, 1j]:
        t = st.lift(x)
        n = st.graph.nodes[t._nid]
        assert st.sigs[n.id][2] == freeze_attrs(n.attrs)[0], x
        assert n.aval == numaccel.trace.tracer.AVal((), np.asarray(x).dtype, n.aval.weak)


def test_live_arrays_are_tracked_and_swept():
    from numaccel.trace.tracer import TraceState, TracedArray, AVal
    st = TraceState(fullgraph=False, run_segment=None)
    keep = [TracedArray(st, 0, AVal((2,), np.float64)) for _ in range(10)]
    for _ in range(5000):      # dead ones: dropped from the list as it grows
        TracedArray(st, 0, AVal((2,), np.float64))
    assert {id(t) for t in st.live} == {id(t) for t in keep}
    assert len(st.live.refs) < 1000
