"""``while`` loops on traced values run as one compiled step per iteration
(trace/loop_rewrite.py, trace/loop_capture.py): results, Python's loop semantics, what
refuses capture, and the rewrite itself."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as hs

import numaccel
from numaccel.config import config
from numaccel.trace.tracer import GraphBreakError

from conftest import assert_same, captured, check_np
from test_segmented import jacobi  # the corpus solver: while err > tol and it < max_iter


pytestmark = pytest.mark.usefixtures("traced_loops")


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_jacobi_matches_numpy_and_is_captured(backend, dtype):
    rng = np.random.default_rng(0)
    f = rng.uniform(-1, 1, (24, 20)).astype(dtype)
    acc = check_np(jacobi, f, 1.0 / 23, 1e-4, 500, backend=backend, calls=3)
    assert captured(acc) == 3
    u, it, err = acc(f, 1.0 / 23, 1e-4, 500)
    assert type(it) is int and type(err) is np.dtype(dtype).type
    ref = jacobi(f, 1.0 / 23, 1e-4, 500)
    assert it == ref[1]          # the same number of sweeps, not just close values


def test_capped_by_the_python_counter():
    f = np.ones((16, 16))
    acc = check_np(jacobi, f, 0.1, 0.0, 7, backend="cpu")     # tol 0: only the cap stops
    assert acc(f, 0.1, 0.0, 7)[1] == 7 and captured(acc) == 3


@settings(max_examples=15, deadline=None)
@given(n=hs.integers(3, 12), m=hs.integers(3, 12), tol=hs.sampled_from([1e-1, 1e-3, 1e-6]),
       step=hs.integers(1, 2), cap=hs.integers(0, 60))
def test_jacobi_differential(n, m, tol, step, cap):
    # strided views, loops of 0, 1 (not captured: one iteration runs as written) and more
    rng = np.random.default_rng(n * 100 + m)
    f = rng.uniform(-1, 1, (n * step, m))[::step]
    check_np(jacobi, f, 0.3, tol, cap, backend="cpu")


def test_in_place_update_of_the_callers_array():
    def smooth(u, tol):
        err = np.inf
        sweeps = 0
        while err > tol:
            old = u.copy()
            u[1:-1] = 0.5 * (u[:-2] + u[2:])
            err = np.abs(u - old).max()
            sweeps += 1
        return err, sweeps

    u = np.sin(np.linspace(0, 6, 40)) + np.linspace(0, 1, 40) ** 2
    acc = check_np(smooth, u, 1e-5, backend="cpu")
    assert captured(acc) == 2


def test_in_place_update_of_a_variable_not_rebound():
    def f(x):
        acc = np.zeros(3)
        k = 0
        while acc.sum() < 50.0:
            acc[1:] += x[1:]
            k += 1
        return acc, k

    a = check_np(f, np.array([1.0, 2.0, 3.0]), backend="cpu")
    assert captured(a) == 2


def test_aliases_stay_one_object():
    def f(x):
        y = x
        while y.max() < 100:
            z = y * 2.0
            y = z
        return y, z

    acc = check_np(f, np.arange(1.0, 4.0), backend="cpu")
    y, z = acc(np.arange(1.0, 4.0))
    assert y is z and captured(acc) >= 1


def test_or_not_and_scalar_tests():
    def f(x, n):
        i = 0
        s = x.sum()
        while not (s > 1e6) and (i < n or s < 10):
            x = x * 1.5 + 1
            s = x.sum()
            i += 1
        return x, i, s

    acc = check_np(f, np.ones(4), 5, backend="cpu")
    assert captured(acc) == 2
    check_np(f, np.full(4, 1e7), 5, backend="cpu")      # test false at once


def test_zero_iterations_keep_names_unbound():
    def f(x):
        while x.sum() < 0:
            y = x + 1
            x = y
        return y

    with pytest.raises(UnboundLocalError):
        f(np.ones(3))
    acc = numaccel.accelerate(f, backend="cpu")
    with pytest.raises(UnboundLocalError):
        acc(np.ones(3))


def test_the_test_must_be_one_truth_value():
    def f(x):
        while x < 10:
            x = x + 1
        return x

    with pytest.raises(ValueError, match="truth value"):
        f(np.ones(3))
    with pytest.raises(ValueError, match="truth value"):
        numaccel.accelerate(f, backend="cpu")(np.ones(3))


def test_shape_change_is_refused_and_still_right():
    def grow(x):
        while x.sum() < 40:
            x = np.concatenate([x, x[-1:] + 1])
        return x

    acc = check_np(grow, np.array([1.0, 2.0]), backend="cpu")
    site = acc.loop_sites[0]
    assert site.captured == 0 and "changes from" in site.reason


def test_dtype_change_is_refused():
    def f(a, b):
        while a.sum() + b.sum() < 100:
            a, b = b, a * 2          # int and float swap places every iteration
        return a, b

    acc = check_np(f, np.array([1, 2]), np.array([0.5, 1.5]), backend="cpu")
    assert acc.loop_sites[0].captured == 0


def test_branch_in_body_takes_both_branches_when_captured():
    def f(x):
        while x.sum() < 100:
            if x.max() > 5:
                x = x + 10
            else:
                x = x * 2
        return x

    acc = check_np(f, np.array([1.0, 0.5]), backend="cpu")
    assert captured(acc) == 2


def test_branch_writing_into_an_array_is_refused_and_still_right():
    def f(x):
        acc = np.zeros(2)
        while x.sum() < 100:
            if x.max() > 5:
                acc[0] += 1.0        # both branches would run: no capture
            x = x * 2
        return x, acc

    acc = check_np(f, np.array([1.0, 0.5]), backend="cpu")
    assert captured(acc) == 0 and "writes into an array" in acc.loop_sites[0].reason


def test_random_body_is_refused_and_draws_each_iteration():
    def make(rng):
        def f(x):
            while x.sum() < 20:
                x = x + rng.random(3)
            return x
        return f

    ref = make(np.random.default_rng(5))
    acc = numaccel.accelerate(make(np.random.default_rng(5)), backend="cpu")
    for _ in range(3):          # the refused capture's traced iteration is a real one
        assert_same(acc(np.zeros(3)), ref(np.zeros(3)))
    assert acc.loop_sites[0].captured == 0
    assert "cannot trace" in acc.loop_sites[0].reason


def test_nested_loops_capture_the_inner_one():
    def f(x, outer):
        k = 0
        while k < outer:
            y = x
            while y.sum() < 100.0 * (k + 1):
                y = y * 1.1 + 0.5
            x = x + y.mean()
            k += 1
        return x

    acc = check_np(f, np.ones(5), 3, backend="cpu")
    assert acc.loop_sites[0].captured >= 2     # (loops of one iteration run as written)


def test_closure_cells_and_defaults_survive_the_rewrite():
    scale = 2.0

    def f(x, limit=50.0, *, step=1.0):
        while x.sum() < limit:
            x = x * scale + step
        return x

    acc = check_np(f, np.ones(3), backend="cpu")
    assert captured(acc) == 2
    assert_same(acc(np.ones(3), 500.0, step=0.5), f(np.ones(3), 500.0, step=0.5))


def test_loops_that_are_not_rewritten():
    def with_break(x):
        while True:
            x = x * 2
            if x.sum() > 100:
                break
        return x

    def with_print(x):
        while x.sum() < 10:
            x = x + 1
            print("step")
        return x

    for fn in (with_break, with_print):
        acc = check_np(fn, np.ones(3), backend="cpu")
        assert acc.loop_sites == [] and acc.traced_fn is fn


def test_fullgraph_still_names_the_while_line():
    acc = numaccel.accelerate(jacobi, backend="cpu", fullgraph=True)
    with pytest.raises(GraphBreakError, match="while err > tol"):
        acc(np.ones((8, 8)), 0.1, 1e-3, 10)


def test_switched_off():
    config.capture_loops = False
    acc = check_np(jacobi, np.ones((8, 8)), 0.1, 1e-3, 30, backend="cpu")
    assert acc.loop_sites == [] and acc.traced_fn is jacobi


def test_nan_ends_the_loop_as_in_numpy():
    def f(x):
        err = 1.0
        n = 0
        while err > 1e-3 and n < 50:
            x = x * 0.5
            err = np.abs(x).max() / np.abs(x).min()     # NaN once x is all zeros
            n += 1
        return x, err, n

    check_np(f, np.array([1.0, 0.0]), backend="cpu")
    check_np(f, np.array([1.0, 2.0]), backend="cpu")


def test_explain_shows_the_compiled_loop():
    ex = numaccel.explain(jacobi, np.ones((8, 8)), 0.1, 1e-3, 30)
    assert any("one compiled step per iteration" in why for why, _ in ex.graph_breaks)


def test_rewritten_code_keeps_the_users_lines():
    import traceback

    def f(x):
        while x.sum() < 10:
            x = x + 1
            y = x[5]        # IndexError, on this line
        return x, y

    line = f.__code__.co_firstlineno + 3
    acc = numaccel.accelerate(f, backend="cpu")
    assert acc.traced_fn is not f
    with pytest.raises(IndexError) as info:
        acc(np.ones(2))
    frames = [fr for fr in traceback.extract_tb(info.value.__traceback__)
              if fr.filename == __file__]
    assert frames[-1].lineno == line and "x[5]" in frames[-1].line


def test_mutable_objects_in_the_loop_are_not_captured():
    def f(x, tol):
        stats = {"sweeps": 0}
        err = np.inf
        while err > tol:
            y = x * 0.5
            err = np.abs(y - x).max()
            x = y
            stats["err"] = err          # the traced step must not leave its values here
        return x, stats["err"]

    acc = check_np(f, np.array([1.0, 4.0]), 1e-3, backend="cpu")
    assert acc.loop_sites[0].captured == 0 and "dict" in acc.loop_sites[0].reason


def test_attribute_and_outer_writes_keep_the_loop_as_written():
    class Box:
        pass

    box = Box()
    buf = np.zeros(2)

    def attr(x):
        while x.sum() < 10:
            x = x + 1
            box.last = x
        return x

    def outer(x):
        while x.sum() < 10:
            x = x + 1
            buf[:] = x
        return x

    for fn in (attr, outer):
        acc = check_np(fn, np.ones(2), backend="cpu")
        assert acc.loop_sites == []


def test_a_wrapped_function_is_not_rewritten_from_its_wrappers_source():
    import functools

    def inner(x):
        while x.sum() < 10:
            x = x + 1
        return x

    @functools.wraps(inner)
    def wrapper(x):
        return inner(x) * 2

    acc = check_np(wrapper, np.ones(2), backend="cpu")
    assert acc.traced_fn is wrapper
