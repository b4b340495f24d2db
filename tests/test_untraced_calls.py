"""Code the tracer cannot see, called from an accelerated function: compiled extensions
(np.random.Generator methods) that call NumPy's creation functions themselves, and the
arrays they return, which are new on every call."""
import numpy as np
import pytest

import numaccel

from conftest import assert_same

GLOBAL_W = np.linspace(0.0, 1.0, 6)


@pytest.mark.parametrize("draw", [
    lambda rng, n: rng.standard_normal(n),
    lambda rng, n: rng.random(n),
    lambda rng, n: rng.integers(0, 10, n).astype(np.float64),
    lambda rng, n: rng.permutation(n).astype(np.float64),
    lambda rng, n: rng.normal(0.0, 2.0, size=(n,)),
], ids=["standard_normal", "random", "integers", "permutation", "normal"])
def test_generator_inside_accelerated_matches_numpy(draw):
    # a Generator method allocates with np.empty from Cython: it must get a real array
    # (a traced one crashed the interpreter), and each call must draw new numbers
    def make(rng):
        def f(x):
            return x * 2.0 + draw(rng, x.shape[0])
        return f

    f = make(np.random.default_rng(7))
    acc = numaccel.accelerate(make(np.random.default_rng(7)), backend="cpu")
    x = np.arange(6.0)
    for _ in range(3):
        assert_same(acc(x), f(x))


def test_fresh_untraced_array_is_not_replayed():
    rng = np.random.default_rng(0)

    def f(x):
        out = np.zeros(4)
        out[:] = x + rng.random(4)
        return out

    acc = numaccel.accelerate(f, backend="cpu")
    x = np.ones(4)
    got = [acc(x) for _ in range(3)]
    assert not np.array_equal(got[0], got[1]) and not np.array_equal(got[1], got[2])
    assert acc.entries[0].kind == "segmented"
    assert "re-traced each call" in acc.entries[0].reason
    ex = numaccel.explain(acc, x)
    assert any("rng.random(4)" in where for _, where in ex.graph_breaks)


def test_global_array_and_its_slices_stay_one_graph():
    # arrays someone else holds are captured by reference, as before: no re-tracing
    def f(x):
        return x * GLOBAL_W + GLOBAL_W[1:4].sum() + np.zeros(6)

    acc = numaccel.accelerate(f, backend="cpu")
    x = np.arange(6.0)
    assert_same(acc(x), f(x))
    assert_same(acc(x), f(x))
    assert acc.entries[0].kind == "graph"
    assert acc.cache_info().graph_breaks == 0


def test_creation_in_user_code_is_still_traced():
    def f(x):
        a = np.zeros(x.shape)
        a[1:] = x[:-1]
        return a + np.ones(x.shape[0]) + np.arange(x.shape[0])

    acc = numaccel.accelerate(f, backend="cpu")
    x = np.arange(5.0)
    assert_same(acc(x), f(x))
    assert acc.entries[0].kind == "graph"
    ops = {n.op for n in acc.entries[0].graph.nodes}
    assert "const" not in ops, ops


@pytest.mark.parametrize("draw", [
    lambda x: np.random.rand(3) + np.random.rand(),
    lambda x: np.random.randn(*x.shape),
    lambda x: np.random.normal(x, 1.0),                  # a traced argument
    lambda x: np.random.uniform(size=x.shape) * x.sum(),
    lambda x: np.random.choice(5, size=3).astype(np.float64),
], ids=["rand", "randn", "normal_traced_loc", "uniform", "choice"])
def test_np_random_module_functions_draw_on_every_call(draw):
    def f(x):
        return x * 2.0 + draw(x)

    acc = numaccel.accelerate(f, backend="cpu")
    x = np.arange(3.0)
    np.random.seed(3)
    got = [acc(x) for _ in range(3)]
    np.random.seed(3)
    ref = [f(x) for _ in range(3)]
    for g, r in zip(got, ref):
        assert_same(g, r)
    assert acc.entries[0].kind == "segmented" and "random" in acc.entries[0].reason


def test_np_random_outside_a_trace_is_numpys_own():
    before = np.random.rand
    acc = numaccel.accelerate(lambda x: x + 1.0, backend="cpu")
    acc(np.ones(2))
    assert np.random.rand is before
    assert not hasattr(np.random.rand, "__wrapped__")
    assert not hasattr(np.zeros, "__wrapped__")


def test_np_random_in_a_while_loop_is_not_replayed():
    def f(x):
        while x.sum() < 20:
            x = x + np.random.rand(3)
        return x

    numaccel.config.segmented_mode, saved = "trace", numaccel.config.segmented_mode
    try:
        acc = numaccel.accelerate(f, backend="cpu")
        for seed in (1, 2):
            np.random.seed(seed)
            got = acc(np.zeros(3))
            np.random.seed(seed)
            assert_same(got, f(np.zeros(3)))
        assert acc.loop_sites[0].captured == 0
    finally:
        numaccel.config.segmented_mode = saved


def test_first_trace_in_a_process_that_never_imported_numpy_random():
    # numpy imports np.random on first use; the first trace hooks its functions, and
    # that import must not run under the creation hooks (it built traced arrays)
    import subprocess
    import sys
    script = ("import sys, numpy as np, numaccel\n"
              "assert 'numpy.random' not in sys.modules\n"
              "f = numaccel.accelerate(lambda x: np.exp(x) * 2.0)\n"
              "print(f(np.ones(3))[0], f.entries[0].kind)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    value, kind = out.stdout.split()
    assert float(value) == pytest.approx(np.exp(1.0) * 2.0, rel=1e-12) and kind == "graph"
