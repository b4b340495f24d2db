"""Views and writes of segment inputs taken on the concrete arrays (trace/concrete.py):
after a graph break, a slice of an input is an input of the segment and a write into
the trace's own buffer happens after the segment, so block loops make repeating
segments. Results must stay NumPy's in every index form and aliasing case."""
import numpy as np
import pytest

import numaccel
from numaccel.config import config
from numaccel.trace import concrete

from conftest import assert_same


@pytest.fixture
def trace_mode():
    # (block loops re-traced, segment by segment: test_loop_for.py captures them)
    saved = config.segmented_mode, config.segment_churn_limit, config.capture_loops
    config.segmented_mode = "trace"
    config.capture_loops = False
    yield
    config.segmented_mode, config.segment_churn_limit, config.capture_loops = saved


def _run(fn, *args, calls=3, rtol=1e-12):
    f = numaccel.accelerate(fn)
    for _ in range(calls):
        assert_same(f(*args), fn(*args), rtol=rtol, atol=1e-12)
    return f


def _graphs(f):
    return [s.graph for s in f.segments.by_graph.values()]


def blocks(x, b):
    out = np.empty_like(x)
    n = 0
    for s in range(0, x.shape[1], b):
        seg = x[:, s:s + b]
        if seg.sum() > 0:            # a break per block
            seg = seg * 2.0
            n += 1
        out[:, s:s + b] = seg - seg.mean()
    return out, n


@pytest.mark.parametrize("shape,b", [((3, 50), 8), ((1, 7), 3), ((2, 0), 4), ((4, 16), 16),
                                     ((2, 9), 1)])
def test_block_loop_equals_numpy(trace_mode, rng, shape, b):
    _run(blocks, rng.standard_normal(shape), b)


def test_block_loop_on_a_strided_view(trace_mode, rng):
    x = rng.standard_normal((6, 80))[::2, ::3]
    _run(blocks, x, 5)


def test_segments_repeat_from_the_first_call(trace_mode, rng):
    x = rng.standard_normal((2, 64)) * np.repeat([1.0, -1.0] * 4, 8)
    f = _run(blocks, x, 8, calls=1)
    n = len(f.segments.by_graph)
    for _ in range(2):
        f(x, 8)
    assert len(f.segments.by_graph) == n
    # no view op on an input, no write into the trace's buffer, once past the first break
    later = _graphs(f)[1:]
    for g in later:
        for node in g.nodes:
            assert node.op != "scatter_view", g
            if node.op == "getitem":
                assert g.nodes[node.inputs[0]].op != "input", g
    assert n <= 8


def index_forms(x):
    out = np.zeros((x.shape[1], x.shape[0]))
    acc = 0.0
    for i in range(x.shape[0]):
        if x[i].sum() > 0:               # break
            acc += float(x[i, ::-1][0])                  # int on a reversed view
        row = x[i]
        out[:, i] = row[..., None][:, 0] * 2.0           # Ellipsis, newaxis
        out[::-2, i] += x.T[::-2, i]                     # transpose, negative step
        out[0, i] = x[i, -1]                             # ints, negative index
    return out, acc


def test_index_forms(trace_mode, rng):
    _run(index_forms, rng.standard_normal((5, 7)))


def write_forms(x):
    buf = np.zeros((4, 6), np.int32)
    t = np.zeros((3, 4))
    for k in range(x.shape[0]):
        if x[k] > 0:                     # break
            buf[k % 4] = x[k] * 10       # float into int32: cast as NumPy casts
        buf[:, k % 6] = 7                # scalar broadcast
        buf[1:3, ::2] += 1
        t.T[k % 4] = x[k]                # through a transpose
        t[::-1, k % 4] -= 1.5            # reversed
    return buf, t


def test_write_forms(trace_mode, rng):
    _run(write_forms, rng.standard_normal(9) * 3)


def read_back(x):
    out = np.zeros_like(x)
    total = 0.0
    for s in range(0, x.size, 4):
        if x[s] > 0:
            out[s:s + 4] = x[s:s + 4]
            total += float(out[s:s + 4].sum())    # read in the segment of the write
        v = out[s:s + 2]
        out[s:s + 2] = -1.0
        if v.sum() < 0:                  # the view sees the write
            total += 1.0
    return out, total


def test_reads_after_writes_see_them(trace_mode, rng):
    _run(read_back, rng.standard_normal(22))


def into_caller(x, b):
    for s in range(0, x.shape[0], b):
        if x[s:s + b].sum() > 0:
            x[s:s + b] *= 0.5
    return x.sum()


def test_write_into_the_callers_array_stays_visible(trace_mode, rng):
    x = np.abs(rng.standard_normal(40))
    f = numaccel.accelerate(into_caller)
    for _ in range(3):
        a, b = x.copy(), x.copy()
        assert_same(f(a, 8), into_caller(b, 8))
        assert_same(a, b)


def test_returned_buffer_is_the_written_one(trace_mode, rng):
    def fn(x):
        out = np.zeros(x.shape)
        keep = out
        for i in range(x.shape[0]):
            if x[i] > 0:
                out[i] = x[i]
        return out, keep
    f = _run(fn, rng.standard_normal(6))
    out, keep = f(np.ones(6))
    assert out is keep


def test_deferred_write_goes_into_a_copy_when_another_result_shares_memory():
    class St:
        made = {}
    target = np.zeros(6)
    alias = target[2:]                       # some other result viewing the target
    plan = ([(10, target, [((("getitem", {"index": (slice(0, 3),)}),), 11)])],
            frozenset({12}))
    valmap = concrete.apply_writes(St(), plan, [11, 12], [np.ones(3), alias])
    assert_same(valmap[10], np.array([1.0, 1, 1, 0, 0, 0]))
    assert valmap[10] is not target and not target.any()     # the alias keeps its value
    assert St.made[id(valmap[10])] is valmap[10]
    plan = ([(10, target, [((("getitem", {"index": (slice(0, 3),)}),), 11)])],
            frozenset())
    valmap = concrete.apply_writes(St(), plan, [11], [np.ones(3)])
    assert valmap[10] is target and target[:3].all()         # nothing else: in place
