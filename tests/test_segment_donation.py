"""Segments write into the trace's own buffers in place (``TraceState.donatable``,
``interp._in_place``): a loop that fills a buffer block by block behind a graph break per
block must not copy the whole buffer per block, and must never write into an array that
the caller, a constant or user code can see, or that another value still views."""
import dataclasses

import numpy as np
import pytest

import numaccel
import numaccel.interp as interp
from numaccel.config import config
from numaccel.ops import prims

from conftest import assert_same


@pytest.fixture(autouse=True)
def trace_mode():
    saved = config.segmented_mode, config.segment_compile_after
    # re-traced calls, segments on the reference interpreter (which donates)
    config.segmented_mode, config.segment_compile_after = "trace", 10 ** 9
    yield
    config.segmented_mode, config.segment_compile_after = saved


@pytest.fixture
def copies(monkeypatch):
    """Counts scatter_view's copying reference (in-place scatters do not call it)."""
    n = [0]
    get_op = interp.get_op

    def counting(root, value, chain):
        n[0] += 1
        return prims._scatter_view_ref(root, value, chain)
    counted = dataclasses.replace(get_op("scatter_view"), ref=counting)
    monkeypatch.setattr(interp, "get_op", lambda name: counted if name == "scatter_view"
                        else get_op(name))
    return n


def blocks(signal, block):
    out = np.empty_like(signal)
    for start in range(0, signal.shape[1], block):
        seg = signal[:, start:start + block]
        if seg.sum() > 0:                       # a graph break per block
            y = seg * 2.0
        else:
            y = -seg
        out[:, start:start + block] = y
    return out


def test_block_writes_go_in_place(rng, copies):
    x = rng.standard_normal((3, 1000))
    f = numaccel.accelerate(blocks)
    for _ in range(3):
        assert_same(f(x, 64), blocks(x, 64))
    # 16 blocks per call; only the first write of each call copies (its buffer is the
    # np.empty_like made in the first segment, an input of the second: donated; the
    # first scatter of a call may share a segment with its creation, then nothing copies)
    assert copies[0] <= 3, copies[0]


def test_caller_arrays_are_never_written(rng, copies):
    def fill(a, block):
        for start in range(0, a.shape[0], block):
            if a[start:start + block].sum() > 0:
                a[start:start + block] = 0.0       # a mutation NumPy makes too
        return a.sum()
    x = rng.standard_normal(200)
    x2 = x.copy()
    f = numaccel.accelerate(fill)
    assert_same(f(x, 20), fill(x2, 20))
    assert_same(x, x2)


def test_views_and_copies_taken_before_a_write_keep_numpy_semantics(rng):
    def g(x):
        out = x * 1.0
        v = out[:, 1:3]                          # a view: sees the later write
        c = out.copy()                           # a copy: does not
        r = out.reshape(-1)                      # a view in NumPy
        if out.sum() > -1e9:                     # break: out is now a segment input
            out[:, 2:4] = 7.0
        return v.copy(), c, r.copy(), out
    x = rng.standard_normal((4, 6))
    f = numaccel.accelerate(g)
    for _ in range(3):
        assert_same(f(x), g(x))


def test_same_segment_reads_before_the_write(rng):
    def g(x):
        out = x + 0.0
        if out.sum() > -1e9:
            pass
        before = out * 3.0                       # reads out, then out is written
        t = out.T                                # a view used after the write
        out[0] = -1.0
        return before, t.sum(axis=0), out
    x = rng.standard_normal((5, 3))
    f = numaccel.accelerate(g)
    for _ in range(3):
        assert_same(f(x), g(x))


def test_arrays_given_to_user_code_are_not_written(rng):
    seen = []

    def g(x):
        out = x * 2.0
        if out.sum() > -1e9:
            pass
        seen.append(out.__array__())             # user code holds the concrete value
        out[1:3] = 0.0
        return out
    x = rng.standard_normal(8)
    f = numaccel.accelerate(g)
    got = f(x)
    assert type(seen[0]) is np.ndarray
    assert_same(got, g(x))
    # the array handed out keeps the values it had when handed out (numaccel's snapshot
    # semantics for concrete values; it is never overwritten behind the caller's back)
    np.testing.assert_array_equal(seen[0], x * 2.0)


def test_interpreter_rule_directly(rng):
    # a graph: scatter into input 0 after a reshape (a view) of it: never in place
    from numaccel.graph import Graph
    from numaccel.ir import AVal
    g = Graph()
    a = g.add("input", [], {"index": 0}, AVal((2, 3), np.dtype("float64")))
    v = g.add("input", [], {"index": 1}, AVal((), np.dtype("float64")))
    r = g.add("reshape", [a.id], {"shape": (6,)}, AVal((6,), np.dtype("float64")))
    s = g.add("scatter_view", [a.id, v.id],
              {"chain": (("getitem", {"index": (0,)}),)}, AVal((2, 3), np.dtype("float64")))
    g.outputs = [r.id, s.id]
    buf = rng.standard_normal((2, 3))
    keep = buf.copy()
    rr, ss = interp.interpret(g, [buf, np.float64(5.0)], {}, donate=frozenset({0}))
    np.testing.assert_array_equal(rr, keep.reshape(-1))
    np.testing.assert_array_equal(buf, keep)
    # without the reshape the scatter writes into the donated buffer itself
    g.outputs = [s.id]
    g2 = g.prune()
    (ss,) = interp.interpret(g2, [buf, np.float64(5.0)], {}, donate=frozenset({0}))
    assert ss is buf and (buf[0] == 5.0).all()
    # and not without donation
    buf2 = keep.copy()
    (ss,) = interp.interpret(g2, [buf2, np.float64(5.0)], {})
    assert ss is not buf2 and (buf2 == keep).all()
