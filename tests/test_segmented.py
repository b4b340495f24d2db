"""Functions with graph breaks ("segmented" entries): the segment cache, its hotness
threshold, loop-variant segments, the eager/trace policy, and results on corpus-like
programs (data-dependent loops and branches, unsupported NumPy functions)."""
import numpy as np
import pytest

import numaccel
from numaccel.config import config

from conftest import assert_same, check_np


@pytest.fixture
def knobs():
    """Set config knobs for one test; restores them afterwards."""
    names = ("segment_compile_after", "segment_min_elements", "segment_churn_limit",
             "segmented_mode", "capture_loops")
    saved = {n: getattr(config, n) for n in names}

    def set_(**kw):
        for k, v in kw.items():
            setattr(config, k, v)
    yield set_
    for n, v in saved.items():
        setattr(config, n, v)


def one_break(x):
    y = x * 2.0
    if y.sum() > 0:
        return np.sin(y) + 1.0
    return y - 1.0


def jacobi(f, h, tol, max_iter):
    u = np.zeros_like(f)
    err = np.inf
    it = 0
    while err > tol and it < max_iter:
        u_new = u.copy()
        u_new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                    + u[1:-1, 2:] - h * h * f[1:-1, 1:-1])
        err = np.abs(u_new - u).max()
        u = u_new
        it += 1
    return u, it, err


def chunked(signal, block, threshold, gain):
    out = np.empty_like(signal)
    n_loud = 0
    for start in range(0, signal.shape[1], block):
        seg = signal[:, start:start + block]
        energy = np.mean(seg * seg)
        if energy > threshold:
            y = np.tanh(seg / np.sqrt(energy)) * np.sqrt(threshold)
            n_loud += 1
        else:
            y = seg * gain
        dc = y.mean(axis=1, keepdims=True)
        if dc.sum() > 0:
            y = y - dc
        out[:, start:start + block] = y
    return out, n_loud


def backtracking(x0, iters, step0, shrink, c1):
    def rosen(x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    def grad(x):
        t = x[1:] - x[:-1] ** 2
        g = np.zeros_like(x)
        g[:-1] = -400.0 * x[:-1] * t - 2.0 * (1.0 - x[:-1])
        g[1:] += 200.0 * t
        return g
    x = x0.copy()
    fx = rosen(x)
    n_evals = 1
    for _ in range(iters):
        g = grad(x)
        gg = g @ g
        step = step0
        x_try = x - step * g
        f_try = rosen(x_try)
        while f_try > fx - c1 * step * gg and step > 1e-10:
            step *= shrink
            x_try = x - step * g
            f_try = rosen(x_try)
            n_evals += 1
        x, fx = x_try, f_try
    return x, fx, n_evals


def ridge(X, y, lambdas):
    d = X.shape[1]
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    yc = y - y.mean()
    G = Xs.T @ Xs
    rhs = Xs.T @ yc
    evals = np.linalg.svd(G, compute_uv=False)   # not traced: a graph break
    coefs = np.empty((len(lambdas), d))
    for i, lam in enumerate(lambdas):
        coefs[i] = np.linalg.solve(G + lam * np.eye(d), rhs)
    dof = (evals[None, :] / (evals[None, :] + np.asarray(lambdas)[:, None])).sum(axis=1)
    return coefs, dof


def compact(values, threshold):
    keep = values > threshold
    slots = np.cumsum(keep) - 1
    packed = np.zeros(np.count_nonzero(keep), dtype=values.dtype)
    packed[slots[keep]] = values[keep]
    return packed, np.bincount(slots[keep] % 3, minlength=3)


def corpus_like(rng):
    n = 24
    f = rng.uniform(-1, 1, (n, n))
    sig = rng.standard_normal((3, 700)) * np.repeat([0.3, 2.0, 0.3, 2.0, 0.3], 140)
    return [
        (jacobi, (f, 1.0 / (n - 1), 1e-4, 500), 1e-9),
        (chunked, (sig, 64, 1.0, 1.8), 1e-9),     # 700 = 10 blocks of 64 + a tail of 60
        (backtracking, (1.0 + 0.3 * rng.standard_normal(200), 6, 0.01, 0.5, 1e-4), 1e-6),
        (ridge, (rng.standard_normal((50, 6)), rng.standard_normal(50), [0.1, 1.0, 10.0]),
         1e-9),
        (compact, (rng.standard_normal(300), 0.5), 1e-12),
    ]


# ------------------------------------------------------------------------------ the cache

def test_segments_of_a_call_compile_at_its_end_and_are_ready_for_the_next(knobs):
    knobs(segmented_mode="trace")
    f = numaccel.accelerate(one_break)
    x = np.arange(1.0, 5.0)
    assert_same(f(x), one_break(x))
    info = f.cache_info()
    # both pieces ran on the interpreter, then compiled (and ran once) as the call ended
    assert info.compiles == 2 and info.graph_breaks == 1
    assert f.segments.compile_s > 0
    assert_same(f(x), one_break(x))
    assert f.cache_info().compiles == 2
    assert f.segments.compile_s == 0        # nothing left to JIT or load in call 2
    for _ in range(3):
        assert_same(f(x), one_break(x))
    assert f.cache_info().compiles == 2                     # ... once
    assert_same(f(-x), one_break(-x))                       # the other branch: new piece,
    assert f.cache_info().compiles == 3                     # compiled as that call ends
    assert_same(f(-x), one_break(-x))


def test_a_higher_threshold_compiles_in_a_later_call(knobs):
    knobs(segmented_mode="trace", segment_compile_after=3)
    f = numaccel.accelerate(one_break)
    x = np.arange(1.0, 5.0)
    assert_same(f(x), one_break(x))
    assert f.cache_info().compiles == 0     # seen once, plus the call's end: 2 < 3
    assert_same(f(x), one_break(x))
    assert f.cache_info().compiles == 2
    assert_same(f(x), one_break(x))


def test_a_failed_call_compiles_nothing_at_its_end(knobs):
    knobs(segmented_mode="trace")

    def g(x):
        y = x * 2.0
        if y.sum() > 0:
            raise ValueError("positive")
        return y

    f = numaccel.accelerate(g)
    with pytest.raises(ValueError, match="positive"):
        f(np.ones(3))
    assert f.cache_info().compiles == 0


def test_compile_after_one_is_the_old_behaviour(knobs):
    knobs(segmented_mode="trace", segment_compile_after=1)
    f = numaccel.accelerate(one_break)
    assert_same(f(np.ones(4)), one_break(np.ones(4)))
    assert f.cache_info().compiles == 2


def test_new_shapes_are_new_segments(knobs):
    knobs(segmented_mode="trace")
    f = numaccel.accelerate(one_break)
    for n in (3, 5, 3, 5, 3):
        x = np.linspace(-1.0, 2.0, n)
        assert_same(f(x), one_break(x))
    assert f.cache_info().compiles == 4


def test_loop_with_a_break_per_iteration_compiles_each_segment_once(knobs, rng):
    # (the while loop re-traced: test_loop_capture.py runs it as a compiled step)
    knobs(segmented_mode="trace", capture_loops=False)
    f = numaccel.accelerate(jacobi)
    args = (rng.uniform(-1, 1, (12, 12)), 0.1, 1e-6, 200)
    ref = jacobi(*args)
    assert ref[1] > 10
    assert_same(f(*args), ref, rtol=1e-9, atol=1e-12)
    info = f.cache_info()
    # the first segment, the loop body (seen again in the 2nd iteration), the last one
    assert info.compiles <= 3 and info.graph_breaks >= ref[1]
    assert_same(f(*args), ref, rtol=1e-9, atol=1e-12)
    assert f.cache_info().compiles <= 4


def test_loop_variant_slices_are_not_compiled_per_iteration(knobs, rng):
    # each block's slice bounds would make a segment of its own: views of segment
    # inputs are inputs themselves and writes into the trace's own buffer are done
    # after the segment (trace/concrete.py), so the pieces repeat and compile once.
    # (the for loop re-traced: test_loop_for.py runs it as a compiled step)
    knobs(segmented_mode="trace", capture_loops=False)
    compiles = []
    for blocks in (40, 80):
        f = numaccel.accelerate(chunked)
        sig = rng.standard_normal((2, blocks * 16)) * np.repeat([0.2, 3.0] * (blocks // 2),
                                                               16)
        for _ in range(3):
            assert_same(f(sig, 16, 1.0, 1.5), chunked(sig, 16, 1.0, 1.5), rtol=1e-12)
        compiles.append(f.cache_info().compiles)
    assert compiles[0] == compiles[1] <= 16, compiles


def scale_blocks(x, block):
    # writes into the caller's array: a segment per block (its bounds in the segment)
    for s in range(0, x.shape[1], block):
        seg = x[:, s:s + block]
        if seg.sum() > 0:
            x[:, s:s + block] = seg * 2.0
    return x


def test_churn_limit_off_compiles_every_segment_as_the_first_call_ends(knobs, rng):
    knobs(segmented_mode="trace", segment_churn_limit=10 ** 9, capture_loops=False)
    f = numaccel.accelerate(scale_blocks)
    x = np.abs(rng.standard_normal((2, 12 * 16)))
    got = f(x.copy(), 16)
    first = f.cache_info().compiles
    assert first >= 12      # one segment per block at least, each seen once
    assert_same(got, scale_blocks(x.copy(), 16))
    y = x.copy()
    assert_same(f(y, 16), scale_blocks(x.copy(), 16))
    assert_same(y, scale_blocks(x.copy(), 16))
    assert f.cache_info().compiles == first


def test_small_segments_stay_on_the_interpreter(knobs):
    knobs(segmented_mode="trace", segment_min_elements=10 ** 6)
    f = numaccel.accelerate(one_break)
    for _ in range(3):
        assert_same(f(np.ones(5)), one_break(np.ones(5)))
    assert f.cache_info().compiles == 0


def test_list_literals_are_keyed_by_value(knobs):
    knobs(segmented_mode="trace")

    def g(x, flag):
        y = x + ([1.0, 2.0, 3.0] if flag else [3.0, 2.0, 1.0])
        if y.sum() > 0:
            return y * 2
        return y
    f = numaccel.accelerate(g)
    x = np.ones(3)
    for flag in (True, True, False, True, False):
        assert_same(f(x, flag), g(x, flag))
    compiles = f.cache_info().compiles
    for flag in (True, False, True):
        assert_same(f(x, flag), g(x, flag))
    assert f.cache_info().compiles == compiles   # a fresh list array each call: same key


def test_negative_zero_literal_is_not_zero(knobs):
    knobs(segmented_mode="trace")

    def g(x, neg):
        y = x * (-0.0 if neg else 0.0)
        if x.sum() > 0:
            return np.copysign(np.ones(3), y)
        return y
    f = numaccel.accelerate(g)
    x = np.ones(3)
    for neg in (False, False, True, True, False):
        assert_same(f(x, neg), g(x, neg))


def test_segments_of_a_mutating_function(knobs, rng):
    knobs(segmented_mode="trace")

    def g(a, b):
        a[1:] += b[:-1]
        if a.sum() > 0:
            a *= 0.5
        b[0] = a.max()
        return a.mean()
    for _ in range(2):
        for mode in ("trace", "eager", "auto"):
            knobs(segmented_mode=mode)
            f = numaccel.accelerate(g)
            for _ in range(4):
                a, b = rng.standard_normal(6), rng.standard_normal(6)
                a2, b2 = a.copy(), b.copy()
                assert_same(f(a, b), g(a2, b2))
                assert_same(a, a2)
                assert_same(b, b2)


# ------------------------------------------------------------------------------ the policy

def test_eager_mode_runs_plain_numpy_after_the_first_call(knobs):
    knobs(segmented_mode="eager")
    f = numaccel.accelerate(one_break)
    x = np.arange(4.0)
    assert_same(f(x), one_break(x))
    breaks = f.cache_info().graph_breaks
    for _ in range(3):
        assert_same(f(x), one_break(x))
    info = f.cache_info()
    assert info.graph_breaks == breaks and info.hits == 3 and info.compiles == 0


def test_auto_mode_times_both_ways_and_stays_correct(knobs, rng):
    knobs(segmented_mode="auto")
    f = numaccel.accelerate(one_break)
    xs = [rng.standard_normal(64) + 0.5 for _ in range(4)]
    for i in range(100):    # past two re-probes of the losing way (calls 32 and 96)
        x = xs[i % 4]
        assert_same(f(x), one_break(x))
    info = f.cache_info()
    # the first calls trace (and compile), then plain NumPy is timed at least twice
    assert info.hits == 99 and info.graph_breaks >= 3


def test_policy_goes_eager_at_once_when_tracing_alone_costs_more_than_numpy():
    from numaccel.trace.segments import Policy
    # first call: 1 s, of which 10 ms in NumPy and segments: tracing overhead ~ 0.99 s
    hopeless = Policy(estimate=0.01, first=1.0)
    assert [hopeless.eager_next() for _ in range(3)] == [True] * 3
    hopeless.calls = 31
    assert hopeless.eager_next() is False      # the periodic probe re-traces once
    # tracing alone (0.5 s) over NumPy's 0.4 s: traced >= 0.5 s whatever segments cost
    assert Policy(estimate=0.4, first=0.9).eager_next() is True
    assert Policy(estimate=0.4, first=0.7).eager_next() is False
    # tracing costs less than NumPy's time: the next call re-traces, then both are timed
    promising = Policy(estimate=0.5, first=0.6)
    assert promising.eager_next() is False
    promising.record(False, 0.2)
    assert promising.eager_next() is False     # traced 0.2 s beats the 0.5 s estimate


def test_probes_of_the_losing_way_back_off_while_it_keeps_losing():
    from numaccel.trace.segments import Policy
    # re-tracing costs 8x NumPy (a while loop of small steps): probed after 32 calls,
    # then after twice as many each time it loses again
    pol = Policy(estimate=0.1, first=0.9)
    probes = []
    for call in range(1, 1001):
        eager = pol.eager_next()
        if not eager:
            probes.append(call)
        pol.record(eager, 0.1 if eager else 0.8)
    assert probes == [32, 96, 224, 480, 992]
    # the balance changes (larger arrays, fewer iterations): a probe that wins switches
    # over and the wait starts again at 32 calls
    pol.calls = pol.next_probe - 1
    assert pol.eager_next() is False
    pol.record(False, 0.05)
    assert pol.interval == 32
    assert [pol.eager_next() for _ in range(5)] == [False] * 5


def test_bad_mode_is_a_clear_error(knobs):
    f = numaccel.accelerate(one_break)
    f(np.ones(3))
    knobs(segmented_mode="fast")
    with pytest.raises(ValueError, match="segmented_mode must be 'auto', 'trace' or"):
        f(np.ones(3))


# ------------------------------------------------------------------------------ results

@pytest.mark.parametrize("mode", ["trace", "auto"])
@pytest.mark.parametrize("case", range(5), ids=["jacobi", "chunked", "backtracking",
                                                "ridge", "compact"])
def test_corpus_like_programs_equal_numpy(knobs, rng, mode, case):
    knobs(segmented_mode=mode)
    fn, args, tol = corpus_like(rng)[case]
    ref = fn(*args)
    f = numaccel.accelerate(fn)
    for _ in range(5):
        assert_same(f(*args), ref, rtol=tol, atol=tol)
    assert f.cache_info().graph_breaks > 0


def test_chunked_tail_block_and_other_data(knobs, rng):
    knobs(segmented_mode="trace")
    f = numaccel.accelerate(chunked)
    for n in (700, 640, 700, 130):
        sig = rng.standard_normal((3, n)) * 1.3
        assert_same(f(sig, 64, 1.0, 1.8), chunked(sig, 64, 1.0, 1.8), rtol=1e-9,
                    atol=1e-12)


def test_new_segment_bookkeeping_is_not_counted_as_numpy_time(knobs):
    """The eager estimate of a first call leaves out the time spent keying and recording
    new segments (a loop making one per iteration spends more there than in NumPy)."""
    knobs(segmented_mode="trace")
    f = numaccel.accelerate(one_break)
    x = np.arange(1.0, 5.0)
    f(x)
    assert f.segments.overhead_s > 0
    pol = next(iter(f.entries[0].policies.values()))
    assert pol.estimate <= f.last_trace.suspended_s - f.segments.overhead_s + 1e-9
    f(x)
    assert f.segments.overhead_s == 0            # every segment found in the cache


@pytest.mark.parametrize("order", ["xs", "sx", "xsx", "yxs"])
def test_returned_argument_does_not_shift_later_outputs(order):
    # a returned argument is passed through, not an output of the graph: the outputs
    # after it were once taken one place too early (returned x for s)
    def f(x):
        s = x.sum()
        y = x * 2.0
        if s > 1e6:
            y = y + 1.0
        got = {"x": x, "s": s, "y": y}
        return tuple(got[c] for c in order)

    for x in (np.full(4, 1e7), np.ones(4)):
        check_np(f, x, backend="cpu", calls=3)


def test_returned_argument_and_in_place_update_after_a_break():
    def f(x, out):
        s = x.sum()
        if s > 0:
            out[:] = x * 2.0
        return x, s, out

    check_np(f, np.ones(3), np.zeros(3), backend="cpu", calls=3)


def test_time_lost_beside_a_segment_is_left_out_of_the_first_call_estimate(knobs,
                                                                            monkeypatch):
    # the first call's NumPy estimate is its time in segments and NumPy; a run slower
    # than the same segment's fastest (a compile holding the GIL) counts at its fastest
    import time as _time

    from numaccel.backends import get_backend
    knobs(segmented_mode="trace", segment_compile_after=10 ** 6)
    numpy_backend = get_backend("numpy")
    plain = numpy_backend.compile
    runs = [0]

    def compile_slowly(graph, **kw):
        run = plain(graph, **kw)

        def slowed(values, env, *donate):
            runs[0] += 1
            if runs[0] % 2 == 0:
                _time.sleep(0.03)
            return run(values, env, *donate)
        return slowed
    monkeypatch.setattr(numpy_backend, "compile", compile_slowly)
    g = numaccel.accelerate(loop_with_breaks)
    x = np.ones(64)
    assert_same(g(x), loop_with_breaks(x))
    pol = next(iter(g.entries[0].policies.values()))
    assert runs[0] >= 6 and pol.estimate < g.last_trace.suspended_s - 0.06, \
        (runs, pol.estimate, g.last_trace.suspended_s)


def loop_with_breaks(x):
    for _ in range(6):
        if x.sum() > 0:
            x = x * 0.5
    return x
