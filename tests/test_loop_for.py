"""``for`` loops whose body breaks the graph run as one compiled step per iteration
(trace/loop_for.py), their ``if``s on array values if-converted (loop_capture.run_if):
results, Python's loop semantics, slices at the counter, what refuses capture."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as hs

import numaccel

from conftest import assert_same, captured, check_np


pytestmark = pytest.mark.usefixtures("traced_loops")


def reasons(acc):
    return [s.reason for s in acc.loop_sites]


def chunked(signal, block, threshold, gain):
    # the corpus program (chunked_sign_branch): data-dependent ifs per block
    n_ch, n = signal.shape
    out = np.empty_like(signal)
    n_loud = 0
    n_dc = 0
    for start in range(0, n, block):
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
            n_dc += 1
        out[:, start:start + block] = y
    return out, n_loud, n_dc


def signal(n_ch, n, block, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    env = 0.2 + 1.5 * (np.sin(2 * np.pi * t / (7.3 * block)) > 0.3)
    return (env * rng.standard_normal((n_ch, n)) + 0.05).astype(dtype)


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
@pytest.mark.parametrize("n", [1000, 1024, 65])       # a short last block, none, 1 block
def test_block_loop_matches_numpy_and_is_captured(backend, n):
    x = signal(3, n, 64)
    acc = check_np(chunked, x, 64, 1.0, 1.8, backend=backend, calls=3, rtol=1e-12)
    out, n_loud, n_dc = acc(x, 64, 1.0, 1.8)
    assert type(n_loud) is int and type(n_dc) is int
    ref = chunked(x, 64, 1.0, 1.8)
    assert (n_loud, n_dc) == ref[1:]
    # a loop of 1 or 2 iterations runs as written; longer ones from the 2nd iteration
    assert captured(acc) == (4 if n > 128 else 0), reasons(acc)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_and_nan_inf_blocks(dtype):
    x = signal(2, 640, 64, seed=3, dtype=dtype)
    x[0, 70] = np.nan           # a NaN energy: neither branch's test is true
    x[1, 300] = np.inf
    with np.errstate(all="ignore"):     # (NumPy's own inf / inf)
        acc = check_np(chunked, x, 64, 1.0, 1.8, backend="cpu",
                       rtol=1e-5 if dtype == np.float32 else 1e-12)
    if dtype == np.float64:
        assert captured(acc) == 2
    else:   # `* np.sqrt(threshold)` (an np.float64) makes one branch's y float64 (NEP 50)
        assert captured(acc) == 0 and "float64[2, 64] or to float32[2, 64]" in \
            reasons(acc)[0]


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_the_branch_not_taken_warns_nothing(backend):
    x = signal(2, 640, 64, seed=3)
    x[:, 400:464] = 0.0         # a silent block: tanh's branch divides 0 by 0, not taken
    ref = chunked(x, 64, 1.0, 1.8)
    acc = numaccel.accelerate(chunked, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            assert_same(acc(x, 64, 1.0, 1.8), ref)
    assert captured(acc) == 2


@settings(max_examples=12, deadline=None)
@given(n=hs.integers(0, 700), block=hs.integers(1, 90), thr=hs.sampled_from([0.0, 1.0, 9.0]),
       seed=hs.integers(0, 5))
def test_block_loop_differential(n, block, thr, seed):
    x = signal(2, n, max(block, 2), seed)
    check_np(chunked, x, block, thr, 1.5, backend="cpu", rtol=1e-12)


def test_loop_variables_after_the_loop_are_pythons():
    def f(x, k):
        total = 0.0
        for i in range(0, x.shape[0], k):
            row = x[i]
            if row.sum() > 0:
                total = total + row.max()
            else:
                total = total - 1.0
            last = row * 2
        return total, i, last

    x = np.random.default_rng(1).standard_normal((40, 5))
    acc = check_np(f, x, 3, backend="cpu")      # x[i]: an integer index at the counter
    assert captured(acc) == 2
    total, i, _ = acc(x, 3)
    assert i == 39 and type(i) is int


def test_counter_in_arithmetic_and_reverse_ranges():
    def f(x, block):
        acc = np.zeros(x.shape[0])
        for s in range(x.shape[1] - block, -1, -block):      # backwards
            seg = x[:, s:s + block]
            w = seg * (s + 1) + 0.5 * s                       # the counter as a number
            if w.mean() > 0:
                acc = acc + w.sum(axis=1)
            else:
                acc = acc - seg[:, ::2].sum(axis=1)
        return acc

    x = np.random.default_rng(2).standard_normal((3, 96))
    acc = check_np(f, x, 8, backend="cpu")
    assert captured(acc) == 2


def test_index_forms_at_the_counter():
    def f(x, L):
        acc = np.zeros(x.shape[0])
        out = np.zeros_like(x)
        for s in range(L, x.shape[1] - 2 * L + 1, L):
            a = x[..., s:s + 2 * L:2]           # a step, an Ellipsis
            b = x[None, :, s - 1]               # an integer index, a new axis
            prev = x[:, s - L:s][:, ::-1]       # a view of a view at the counter
            if a.mean() > 0:
                acc = acc + a.sum(axis=1) - prev[:, 0]
            else:
                acc = acc - b[0]
            out[:, s:s + L] = a * 2
        return acc, out

    x = np.random.default_rng(13).standard_normal((3, 90))
    acc = check_np(f, x, 6, backend="cpu")
    assert captured(acc) == 2


def test_in_place_blocks_of_the_callers_array():
    def f(x, block):
        n = 0
        for s in range(0, x.shape[0], block):
            b = x[s:s + block]
            if b.max() > 0.5:
                n += 1
            x[s:s + block] = b * 2.0 - 1.0       # NumPy writes into the caller's array
        return n

    x = np.random.default_rng(4).random(100)
    acc = check_np(f, x, 8, backend="cpu")      # (compares x after the call too)
    assert captured(acc) == 2


def test_a_view_taken_before_the_loop_sees_the_writes():
    def f(x, block):
        out = x * 0.0
        head = out[:, :4]                       # a view of out, read after the loop
        for s in range(0, x.shape[1], block):
            seg = x[:, s:s + block]
            if seg.sum() > 0:
                y = seg + 1.0
            else:
                y = seg - 1.0
            out[:, s:s + block] = y
        return head.copy(), out

    x = np.random.default_rng(5).standard_normal((2, 64))
    acc = check_np(f, x, 8, backend="cpu")
    assert captured(acc) == 2


def _refused(fn, *args, why):
    acc = check_np(fn, *args, backend="cpu")
    assert captured(acc) == 0
    assert any(why in r for r in reasons(acc)), reasons(acc)


def test_a_decision_on_the_counter_is_refused():
    def f(x):
        t = 0.0
        for i in range(0, 40, 4):
            if i == 8:                      # a Python decision on the counter
                t = t + 100.0
            if x[i:i + 4].sum() > 0:
                t = t + 1.0
        return t

    _refused(f, np.random.default_rng(6).standard_normal(40), why="decision on the loop")


def test_a_read_after_a_write_at_the_counter_is_refused():
    def f(x):
        out = np.zeros_like(x)
        for i in range(0, 40, 4):
            if x[i:i + 4].sum() > 0:
                y = x[i:i + 4] * 2
            else:
                y = x[i:i + 4]
            out[i:i + 4] = y
            out = out * 1.0                 # reads out after the write
        return out

    _refused(f, np.random.default_rng(7).standard_normal(40), why="after writing")


def test_a_branch_writing_at_the_counter_is_refused():
    def f(a, block):                         # (a mutation NumPy makes too)
        for start in range(0, a.shape[0], block):
            if a[start:start + block].sum() > 0:
                a[start:start + block] = 0.0
        return a.sum()

    _refused(f, np.random.default_rng(8).standard_normal(200), 20,
             why="writes into an array")


def test_a_slice_of_a_computed_array_is_refused():
    def f(x):
        t = 0.0
        for i in range(0, 40, 4):
            y = x * 2.0 - t
            if y[i:i + 4].sum() > 0:        # a slice of an array the body computes
                t = t + 1.0
        return t

    _refused(f, np.random.default_rng(9).standard_normal(40), why="computes or changes")


def test_if_conversion_refuses_what_cannot_be_selected():
    def one_branch(x):
        for i in range(0, 40, 4):
            if x[i:i + 4].sum() > 0:
                y = x[i:i + 4]
            else:
                y = x[i:i + 2]              # another shape in the other branch
            t = y.sum()
        return t

    _refused(one_branch, np.random.default_rng(10).standard_normal(40),
             why="sets a variable to")


def test_loops_that_are_not_ranges_run_as_written():
    def f(xs, w):
        total = np.zeros(3)
        for x in xs:                        # a list of arrays: no capture, same results
            if x.sum() > 0:
                total = total + x * w
        for a, b in zip(xs, xs[1:]):        # a tuple target: not rewritten
            total = total - (a - b)
        return total

    rng = np.random.default_rng(11)
    acc = check_np(f, [rng.standard_normal(3) for _ in range(6)], 0.5, backend="cpu")
    assert captured(acc) == 0


def test_unbroken_loops_stay_in_one_graph():
    # a time-stepping loop without breaks is traced (unrolled) into one graph, as before
    def heat(u, steps):
        for _ in range(steps):
            u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
        return u

    acc = check_np(heat, np.random.default_rng(12).random(50), 10, backend="cpu")
    assert acc.entries[0].kind == "graph" and captured(acc) == 0


def test_explain_reports_the_loop(capsys):
    x = signal(2, 640, 64)
    ex = numaccel.explain(chunked, x, 64, 1.0, 1.8)
    assert any("for loop at" in ln and "captured" in ln for ln in ex.loops), ex.loops
