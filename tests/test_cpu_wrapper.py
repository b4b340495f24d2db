"""The compiled wrapper: small static graphs run as one generated Numba function.

Every case checks NumPy's results (values, dtypes, shapes, scalars) AND that the graph
really ran through the compiled wrapper (a silent fallback to the step wrapper would
otherwise pass unnoticed)."""
import ml_dtypes
import numpy as np
import pytest

import numaccel
from numaccel.config import config
from numaccel.lower.cpu import CompiledGraph

from conftest import assert_same

BF16 = ml_dtypes.bfloat16


def run(fn, *args, wrapper=True):
    ref = fn(*args)
    f = numaccel.accelerate(fn, backend="cpu")
    for _ in range(2):
        got = f(*args)
        assert_same(got, ref)
    e = f.entries[0]
    assert e.kind == "graph" and isinstance(e.run, CompiledGraph), e.reason
    assert (e.run.wrapper is not None) == wrapper, e.run.describe()
    return f


def lorenz(s, sigma, rho, beta):
    x, y, z = s[0], s[1], s[2]
    return np.stack([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])


def rk4(state, params, dt, n_steps):
    sigma, rho, beta = params[0], params[1], params[2]
    s = state
    traj = np.empty((n_steps + 1, 3))
    traj[0] = s
    for i in range(n_steps):
        k1 = lorenz(s, sigma, rho, beta)
        k2 = lorenz(s + 0.5 * dt * k1, sigma, rho, beta)
        s = s + (dt / 2.0) * (k1 + k2)
        traj[i + 1] = s
    return s, traj


def test_time_stepping_with_scalars_stack_and_row_writes():
    run(rk4, np.array([1.0, 1.0, 20.0]), np.array([10.0, 28.0, 8.0 / 3.0]), 0.005, 6)


def test_views_indexing_and_reductions(rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    run(lambda a: (a[1:, ::2] * 2, a[::-1, 1], a[..., None][:, 2], a[2, 3] + 1,
                   a.T[1:3], np.flip(a, 1)[0], a.reshape(6, 4)[5],
                   np.broadcast_to(a[0], (3, 6)) + 0, a.sum(), a.max(axis=0),
                   a.mean(axis=1, keepdims=True), a.min(keepdims=True), (a > 0).any(axis=1),
                   a.astype(np.int32).sum(axis=0)), x)


def test_scalar_math_and_python_scalars(rng):
    q = rng.standard_normal(4)
    run(lambda q, dt: (np.arccos(np.clip(q[0], -1.0, 1.0)) * 2.0, np.sqrt(q @ q),
                       q[1] * dt + 3, q / np.sqrt(np.sum(q * q)), dt * 0.5 + dt / 4.0,
                       q[0].astype(np.float32) * 2), q, 0.01)


def test_concatenate_matmul_cross_and_creation(rng):
    a = rng.standard_normal(3)
    b = rng.standard_normal((5, 3))
    m = rng.standard_normal((3, 3)).astype(np.float32)
    run(lambda a, b, m: (np.concatenate((np.zeros(1), a)), np.cross(a, b),
                         a @ a, b @ a, m @ m, a @ b.T, np.ones((2, 2), np.int8) * 3,
                         np.atleast_1d(a[0]), np.concatenate((a, a.astype(np.float32)))),
        a, b, m)


def test_integer_matmul_and_bool_logic():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    run(lambda a: (a @ a.T, (a > 2) & (a < 5), np.where(a > 3, a, -a), a * 3 - 1), a)


def test_in_place_updates_are_visible():
    def f(u, v):
        u[1:-1] += 0.5 * (u[2:] - 2 * u[1:-1] + u[:-2])
        u[0] = v[0, 0]
        v[:, 1] = 7
        return u.sum()
    u, v = np.linspace(0, 1, 9), np.zeros((3, 2), np.float32)
    ref_u, ref_v = u.copy(), v.copy()
    ref = f(ref_u, ref_v)
    g = numaccel.accelerate(f)
    got = g(u, v)
    np.testing.assert_allclose(got, ref)
    np.testing.assert_allclose(u, ref_u)
    np.testing.assert_array_equal(v, ref_v)
    assert g.entries[0].run.wrapper is not None


def test_narrow_dtypes_empty_and_nan(rng):
    xb = rng.standard_normal(8).astype(BF16)
    xh = rng.standard_normal((2, 3)).astype(np.float16)
    run(lambda a, h: (a * 2 + 1, a[3], h.max(axis=1), h[0, 0] * np.float16(3),
                      np.exp(a.astype(np.float32))), xb, xh)
    run(lambda a: (a * 2, a.sum(), a.reshape(0, 3)), np.zeros(0))
    run(lambda a: (np.maximum(a, 0), a.max(), np.nanmax(a) if False else a.min()),
        np.array([1.0, np.nan, np.inf, -np.inf]))


def test_returned_views_do_not_alias_the_argument():
    x = np.arange(6.0)
    f = numaccel.accelerate(lambda a: (a[1:4], a.reshape(2, 3)))
    r1, r2 = f(x)
    r1[0] = 99
    assert x[1] == 1 and r2[0, 1] == 1


def test_large_symbolic_and_unsupported_graphs_use_the_step_wrapper(rng):
    big = rng.standard_normal(config.parallel_min)      # threads: the step wrapper's
    f = run(lambda a: np.sin(a) * 2, big, wrapper=False)
    assert "elements" in f.entries[0].run.describe()
    run(lambda a: np.cumsum(a) + 1, rng.standard_normal(8), wrapper=False)
    f = numaccel.accelerate(lambda a: a * 2, dynamic=True)
    np.testing.assert_array_equal(f(np.arange(5.0)), np.arange(5.0) * 2)
    assert f.entries[0].run.wrapper is None
    assert "symbolic" in f.entries[0].run.describe()


def test_a_large_input_only_sliced_keeps_the_wrapper(rng):
    # (a segment gets every live array as an input; a big one it only views or passes
    # through makes no large kernel)
    big = rng.standard_normal((4, config.parallel_min))
    run(lambda a: np.tanh(a[:, 5:9]) * 2.0 + a[1:3, -4:].sum(), big)
    f = run(lambda a: a[:, 1:] * 2.0, rng.standard_normal((2, config.parallel_min)),
            wrapper=False)           # the slice itself is large
    assert "elements" in f.entries[0].run.describe()


def test_config_switch_keeps_the_step_wrapper(rng):
    config.compiled_wrapper = False
    try:
        run(lambda a: a * 2 + 1, rng.standard_normal(4), wrapper=False)
    finally:
        config.compiled_wrapper = True


def test_errors_are_numpys():
    f = numaccel.accelerate(lambda a: a.max())
    with pytest.raises(ValueError):
        f(np.zeros(0))
    g = numaccel.accelerate(lambda a, b: a + b)
    with pytest.raises(ValueError):
        g(np.zeros(3), np.zeros(4))


def test_hypothesis_programs_through_the_wrapper():
    from test_trace_hypothesis import check_random_programs
    check_random_programs(25)


def test_explain_shows_the_plan(capsys):
    x = np.arange(4.0)
    ex = numaccel.explain(lambda a: a * 2 + 1, x)
    assert "compiled wrapper: one Numba function" in ex.plan
    assert "kernel[map]" in str(ex)
    config.compiled_wrapper = False
    try:
        ex = numaccel.explain(lambda a: a * 3 + 1, x)
    finally:
        config.compiled_wrapper = True
    assert "step wrapper (numaccel.config.compiled_wrapper is False)" in ex.plan


def test_many_inputs_and_reductions_keep_their_names(rng):
    # kernel temporaries once shadowed argument names (x3 = ... overwrote input 3)
    xs = [rng.standard_normal((3, 4)) for _ in range(6)]
    run(lambda a, b, c, d, e, f: ((a - b).max(), (c * d).sum(axis=0), e.min(axis=1),
                                  (f + a).mean(), d.max() + e.sum(), a + b + c + d + e + f),
        *xs)


def test_negative_zero_literals_stay_distinct():
    x = np.ones(3)
    run(lambda a: (a * 0.0, np.copysign(np.ones(3), a * -0.0)), x)


def _heat(u, kappa, steps):
    for _ in range(steps):
        u[1:-1, 1:-1] += kappa * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                  - 4.0 * u[1:-1, 1:-1])
    return u


def _life(b, gens):
    pop = []          # a per-step scalar collected after the loop: still one rolled body
    for _ in range(gens):
        nb = (b[:-2, :-2] + b[:-2, 1:-1] + b[:-2, 2:] + b[1:-1, :-2] + b[1:-1, 2:]
              + b[2:, :-2] + b[2:, 1:-1] + b[2:, 2:])
        alive = b[1:-1, 1:-1] == 1
        b[1:-1, 1:-1] = ((nb == 3) | (alive & (nb == 2))).astype(np.uint8)
        pop.append(b.sum())
    return np.array(pop), b


def test_mid_size_graphs_run_as_the_wrapper_where_its_loops_do_not_lose(rng):
    # nodes above TINY_MAX but below parallel_min (one thread either way): a stencil time
    # loop, an int reduction and a short matmul run as one function (no Python per step)
    u = rng.random((150, 150))
    f = numaccel.accelerate(_heat)
    for _ in range(2):
        got, ref = f(u.copy(), 0.2, 12), _heat(u.copy(), 0.2, 12)
        np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert f.entries[0].run.wrapper is not None, f.entries[0].run.describe()
    board = (rng.random((130, 130)) < 0.3).astype(np.uint8)
    g = numaccel.accelerate(_life)
    for _ in range(2):
        got, ref = g(board.copy(), 9), _life(board.copy(), 9)
        assert_same(got, ref)
    assert g.entries[0].run.wrapper is not None, g.entries[0].run.describe()
    counts = rng.integers(0, 9, (300, 100)).astype(np.uint8)
    run(lambda c: (c.sum(), (c > 4).sum(axis=0)), counts)
    run(lambda a, b: np.tanh(a @ b) + a[:, :1], rng.standard_normal((40, 30)),
        rng.standard_normal((30, 8)))


@pytest.mark.parametrize("case", ["float_reduction", "matmul", "long"])
def test_mid_size_graphs_keep_the_steps_where_the_wrapper_would_lose(rng, case,
                                                                       monkeypatch):
    import numaccel.lower.cpu_wrapper as cw
    x = rng.standard_normal((200, 100))
    if case == "float_reduction":        # serial adds (rows too short for lanes)
        f = run(lambda a: (a * a).sum(axis=1), x.reshape(2000, 10), wrapper=False)
        why = "float reduction"
    elif case == "matmul":               # loops, not BLAS
        f = run(lambda a, b: a @ b + 1, x, rng.standard_normal((100, 50)), wrapper=False)
        why = "matmul"
    else:                                # compile time grows faster than the function
        monkeypatch.setattr(cw, "MID_MAX_LINES", 5)
        f = run(lambda a: np.sqrt(np.abs(a)) * 2 + a, x, wrapper=False)
        why = "wrapper lines"
    assert why in f.entries[0].run.describe()
    tiny = x[:10, :10]                   # a tiny graph keeps the wrapper in every case
    run(lambda a: (a * a).sum(axis=1) + a[:, 0], tiny)


def _graph_passing_its_input_through():
    from numaccel.graph import Graph
    from numaccel.ir import AVal
    g = Graph()
    a = g.add("input", [], {"index": 0}, AVal((8,), np.dtype(np.float64)))
    two = g.add("scalar", [], {"value": 2.0, "weak": "float"}, AVal((), np.float64, "float"))
    m = g.add("multiply", [a.id, two.id], {}, AVal((8,), np.dtype(np.float64)))
    g.outputs = [a.id, m.id, a.id]
    return g


def test_inputs_a_graph_passes_through_come_back_as_the_same_object():
    # (a graph-break segment returns every live array, the untouched inputs too: copying
    # them cost a pass over each per segment run)
    run = numaccel.backends.get_backend("cpu").compile(_graph_passing_its_input_through())
    assert run.wrapper is not None, run.why_steps
    x = np.arange(8.0)
    a, m, a2 = run([x])
    assert a is x and a2 is x
    assert_same(m, x * 2.0)


def test_a_write_into_a_buffer_nothing_reads_again_goes_in_place(rng):
    def jacobi_step(u, f):
        u_new = u.copy()
        u_new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                    + u[1:-1, 2:] - f[1:-1, 1:-1])
        return u_new, np.abs(u_new - u).max()
    u, f = rng.standard_normal((12, 9)), rng.standard_normal((12, 9))
    g = run(jacobi_step, u, f)
    # one copy (u.copy()), not a second one for the write
    assert g.entries[0].run.wrapper.source.count(".copy()") == 0, \
        g.entries[0].run.wrapper.source


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, BF16])
def test_the_value_of_a_write_is_computed_in_the_writing_loop(rng, dtype):
    # a map kernel read only by a scatter: its elements go straight into the view
    def step(u, f):
        u_new = u.copy()
        u_new[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1]) * 3 - f[1:-1, 1:-1]
        return u_new

    def broadcast(u, f):
        u_new = u * 2
        u_new[1:-1, 1:-1] = f[:1, 1:-1] * 3        # (1, m) into (n, m): not inlined
        return u_new

    u = (rng.standard_normal((9, 7)) * 4).astype(dtype)
    f = (rng.standard_normal((9, 7)) * 4).astype(dtype)
    g = run(step, u, f)
    src = g.entries[0].run.wrapper.source
    if dtype != BF16:
        assert "np.empty((7, 5)" not in src, src        # no temporary for the value
    run(broadcast, u, f)


@pytest.mark.parametrize("prog", [
    # the written buffer is read by the value (a stencil of itself): NumPy reads first
    lambda u: _scatter(u * 1.0, lambda v: v[:-2] + v[2:]),
    # read after the write through an earlier view
    lambda u: (lambda v: (_scatter(v, lambda w: w[1:-1] * 3), v[1:-1]))(u * 1.0),
    # two writes in a row into one fresh buffer
    lambda u: _scatter(_scatter(u + 0.0, lambda v: v[2:] * 2), lambda v: -v[:-2]),
])
def test_writes_into_fresh_buffers_keep_numpy_semantics(prog, rng):
    run(prog, rng.standard_normal(10))


def _scatter(v, value):
    v[1:-1] = value(v)
    return v


def test_where_of_scalars_is_a_0d_array():
    # np.where returns an ndarray even when every operand is a NumPy scalar
    x, s = np.zeros(2, np.float32), np.array(0.5, np.float32)
    f = numaccel.accelerate(lambda x, s: np.where(-np.sum(-x), np.sum(x), s))
    for _ in range(2):
        assert_same(f(x, s), np.where(-np.sum(-x), np.sum(x), s))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int16, np.uint8])
@pytest.mark.parametrize("cols", [32, 45, 128])
def test_max_min_in_lanes_match_numpy(rng, dtype, cols):
    # rows of >= 32 reduce in 16 accumulators (one per vector lane): any order is exact
    # for max/min, and a NaN anywhere (a lane, the tail, the last element) still wins
    x = (rng.standard_normal((6, cols)) * 50).astype(dtype)

    def prog(a):
        d = a - a[:, ::-1]
        return (a.max(), a.min(axis=1), np.abs(d).max(axis=1, keepdims=True),
                a.T.max(axis=0), a.min(axis=0), np.maximum(a, 3).min())

    f = run(prog, x)
    assert "ln" in f.entries[0].run.wrapper.source   # the lane form ran
    if np.dtype(dtype).kind == "f":
        for where in [(0, 0), (2, 17), (5, cols - 1), (3, cols - cols % 16 - 1)]:
            y = x.copy()
            y[where] = np.nan
            run(prog, y)
        z = x.copy()
        z[1] = -np.inf
        z[4, 5] = np.inf
        run(prog, z)


def test_max_of_a_mid_size_float_graph_runs_in_the_wrapper(rng):
    # a float max over more than TINY_MAX elements no longer needs the step kernels
    # (one accumulator was a chain of selects; 16 lanes vectorize)
    u = rng.random((150, 150))
    run(lambda a, b: (np.abs(a - b).max(), (a * b).min(axis=0)), u, u[::-1].copy())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_sums_of_a_mid_size_graph_add_in_lanes(rng, dtype):
    # rows of >= 32: 16 partial sums (as the step kernels' blocked reductions), so a
    # float sum over more than TINY_MAX elements runs in the wrapper too; float32 adds
    # in float64. Means, keepdims, a product, NaN and inf still as NumPy's
    x = (rng.standard_normal((150, 150)) * 3).astype(dtype)

    def prog(a):
        return (a * a).sum(), a.mean(axis=1, keepdims=True), np.abs(a[:, :40]).sum(axis=1), \
            (1.0 + a[:3] * 1e-3).prod(axis=1)

    f = run(prog, x)
    assert "ln" in f.entries[0].run.wrapper.source
    y = x.copy()
    y[7, 149] = np.nan
    y[9, 0] = np.inf
    run(prog, y)


def laplacian(a):
    return a[1:-1, 2:] + a[1:-1, :-2] + a[2:, 1:-1] + a[:-2, 1:-1] - 4.0 * a[1:-1, 1:-1]


def test_slices_are_read_through_the_base_array(rng):
    # no Numba view inside the loop: a view's run-time strides stop vectorization
    f = run(laplacian, rng.standard_normal((40, 50)))
    src = f.entries[0].run.wrapper.source
    loop = src[src.index("for i0"):]
    assert "x0p[1 + i0, 2 + i1]" in loop and "x0p[i0, 1 + i1]" in loop, src
    assert not any(f"n{k}[" in loop for k in range(1, 10)), src


_BASE = np.arange(7 * 9 * 11, dtype=np.float64).reshape(7, 9, 11) / 97.0


@pytest.mark.parametrize("name,x", [
    ("row_slice", _BASE[1:5, 2:7, 3:9]),
    ("inner_step", _BASE[:, ::2, ::3]),
    ("transposed", _BASE.transpose(2, 0, 1)),
    ("reversed", _BASE[::-1, :, ::-1]),
    ("size_one", _BASE[2:3, 1:2, 4:10]),
    ("empty", _BASE[:, 3:3, :]),
    ("plane", _BASE[3, 1:8, 2:]),
    ("readonly", np.lib.stride_tricks.as_strided(_BASE[1:, 1:, 1:], writeable=False)),
])
def test_strided_arguments_give_numpys_results(name, x):
    def fn(a):
        return np.tanh(a) * 2.0 + a[..., ::-1] - a.sum(axis=-1, keepdims=True)
    run(fn, x)


def test_folded_index_forms(rng):
    def fn(a, b):
        return a[::-2, 1][None, :] + a.T[2:0:-1, ::3].sum() + b[..., 1:, None][0] * a[1, -1]
    run(fn, rng.standard_normal((6, 7)), rng.standard_normal((3, 4, 5))[:, ::2, 1:])
    # views of views: each level's index is an expression of the next
    run(lambda a: a[::-1][1:][::-2, 2:][:, ::-1].T * 2.0, rng.standard_normal((9, 8)))


def test_bf16_strided_argument():
    x = (np.arange(60, dtype=np.float32).reshape(6, 10) / 7).astype(BF16)[1:5, 2:9]
    run(lambda a: a * a + a[:, ::-1], x)


def test_writes_into_slices_store_through_index_arithmetic(rng):
    def fn(a, b):
        u = a.copy()
        u[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1]) - b[1:-1, ::-1][:, 1:-1]
        t = np.zeros((5, 4))
        t.T[::-1, 2] = b[:4, 0]                # through a transpose, reversed
        t[1:4][::-2, 1:] = 7.0                 # views of views, a scalar broadcast
        return u, t
    f = run(fn, rng.standard_normal((9, 8)), rng.standard_normal((9, 8)))
    src = f.entries[0].run.wrapper.source
    assert "w" not in "".join(line.split("=")[0] for line in src.splitlines()
                              if "for " not in line), src     # no view to store through
