"""Generated CPU kernels run over a range of their outermost loop, split between threads
(``numaccel.lower.cpu_threads``) from ``config.parallel_min`` elements.

The threshold is lowered here so that small arrays take the threaded path; results must
be those of NumPy, and bit-identical to a run on one thread, for sizes below, at and
above the threshold, odd sizes (uneven chunks, fewer rows than threads) and empty
arrays. Three threads on a two-core machine also exercise uneven, oversubscribed splits.
"""
import threading

import numpy as np
import pytest

import numaccel
from numaccel.config import config
from numaccel.lower import cpu_threads

from conftest import assert_same

T = 1000          # the lowered threshold (elements)


pytestmark = pytest.mark.usefixtures("step_wrapper")


@pytest.fixture
def pools(monkeypatch):
    """Counts the launches that went to the thread pool."""
    seen = []
    real = cpu_threads._get_pool

    def spy(workers):
        seen.append(workers)
        return real(workers)
    monkeypatch.setattr(cpu_threads, "_get_pool", spy)
    return seen


def run(fn, args, threads, pmin=T):
    """``fn`` accelerated, called twice with ``threads`` threads from ``pmin`` elements."""
    old = config.parallel_min, config.num_threads
    config.parallel_min, config.num_threads = pmin, threads
    try:
        f = numaccel.accelerate(fn)
        out = f(*args)
        again = f(*args)
    finally:
        config.parallel_min, config.num_threads = old
    assert_bits(out, again)
    return f, out


def assert_bits(a, b):
    """Same dtype, shape and bits (NaNs included)."""
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_bits(x, y)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


# ------------------------------------------------------------------------ launch itself

@pytest.mark.parametrize("n0", [0, 1, 2, 3, 5, 7, 1001])
def test_launch_covers_the_range_once_in_one_chunk_per_thread(n0, monkeypatch):
    monkeypatch.setattr(config, "parallel_min", 10)
    monkeypatch.setattr(config, "num_threads", 3)
    calls, lock = [], threading.Lock()

    def fn(tag, lo, hi):
        with lock:
            calls.append((lo, hi, threading.current_thread()))
    cpu_threads.launch(fn, ["x"], n0, 10)
    spans = sorted((lo, hi) for lo, hi, _ in calls)
    assert len(spans) == max(1, min(n0, 3))
    assert spans[0][0] == 0 and spans[-1][1] == n0
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(spans, spans[1:]))
    # the first chunk runs on the calling thread, the others on the pool
    assert [c[2] for c in calls if c[0] == 0] == [threading.current_thread()]
    cpu_threads.launch(fn, ["x"], n0, 9)         # below the threshold: one call, here
    assert calls[-1] == (0, n0, threading.current_thread())


def test_launch_waits_for_every_chunk_and_raises_a_chunks_error(monkeypatch):
    monkeypatch.setattr(config, "parallel_min", 0)
    monkeypatch.setattr(config, "num_threads", 3)
    done = []

    def fn(lo, hi):
        if lo:
            raise ValueError(f"chunk {lo}")
        threading.Event().wait(0.05)     # the failing chunks finish first
        done.append(lo)
    with pytest.raises(ValueError, match="chunk"):
        cpu_threads.launch(fn, [], 9, 9)
    assert done == [0]


@pytest.mark.parametrize("accepted", [0, 1])
def test_launch_runs_the_chunks_itself_when_the_pool_takes_no_more(accepted, monkeypatch):
    # at interpreter exit a background compile's run on replicas finishes: the pool
    # refuses new work then, and the chunks it did not take run on the calling thread
    monkeypatch.setattr(config, "parallel_min", 0)
    monkeypatch.setattr(config, "num_threads", 3)
    real = cpu_threads._get_pool(2)

    class Closing:
        taken = 0

        def submit(self, *a):
            if self.taken >= accepted:
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")
            self.taken += 1
            return real.submit(*a)
    monkeypatch.setattr(cpu_threads, "_get_pool", lambda workers: Closing())
    calls, lock = [], threading.Lock()

    def fn(lo, hi):
        with lock:
            calls.append((lo, hi))
    cpu_threads.launch(fn, [], 9, 9)
    assert sorted(calls) == [(0, 3), (3, 6), (6, 9)]


# ------------------------------------------------------------------------ map kernels

def affine(x, y):
    # exactly rounded ops only: bit-identical to NumPy in any order of elements
    return x * y + np.float32(1.5) - x / (y + np.float32(2.0)), np.sqrt(np.abs(x))


MAP_SHAPES = [(0,), (1,), (7,), (T - 1,), (T,), (T + 1,), (4099,), (3, 333), (1, 1001),
              (0, 5), (5, 0)]


@pytest.mark.parametrize("shape", MAP_SHAPES)
def test_map_kernels_equal_numpy_below_at_and_above_the_threshold(shape, rng, pools):
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(shape).astype(np.float32)
    ref = affine(x, y)
    _, got = run(affine, (x, y), 3)
    assert_same(got, ref)
    assert_bits(got, ref)
    # same-shape contiguous operands run as one flat loop: split over all elements
    assert bool(pools) == (x.size >= T), pools


@pytest.mark.parametrize("layout", ["transposed", "broadcast", "strided"])
def test_map_kernels_on_views_split_their_outer_dim(layout, rng, pools):
    base = rng.standard_normal((37, 41)).astype(np.float64)
    if layout == "transposed":
        args = (base.T, base.T[::-1])
    elif layout == "broadcast":
        args = (base[:, :1], base[:1, :])          # (37, 1) with (1, 41)
    else:
        args = (base[:-1:2, 1::3], base[1::2, ::3])
    fn = lambda a, b: a * b - a / (b + 3.0)       # noqa: E731
    ref = fn(*args)
    _, got = run(fn, args, 3, pmin=0)
    assert_bits(got, ref)
    assert pools


# ------------------------------------------------------------------------ reductions

def reductions(x):
    return (x.sum(), x.mean(), x.max(), x.min(), x.sum(axis=0), x.mean(axis=-1),
            (x * x).sum(axis=-1))


@pytest.mark.parametrize("shape", [(T - 1,), (T,), (8192 * 3 + 17,), (9, 111), (2, 7001),
                                   (1, 3000), (1001, 3)])
def test_reductions_are_deterministic_and_independent_of_the_threads(shape, rng, pools):
    x = rng.standard_normal(shape).astype(np.float32)
    fn = reductions if len(shape) == 2 else (lambda x: (x.sum(), x.mean(), x.max(),
                                                        x.min(), (x * x).sum()))
    _, serial = run(fn, (x,), 1, pmin=1 << 60)
    f, threaded = run(fn, (x,), 3)
    assert_bits(threaded, serial)
    assert_same(threaded, fn(x), rtol=1e-5, atol=1e-5)
    # the same bits on every call: partials are combined in a fixed order
    for _ in range(3):
        assert_bits(f(x), serial)
    assert bool(pools) == (x.size >= T)


def test_integer_and_empty_reductions_equal_numpy(rng):
    i = rng.integers(-1000, 1000, (1003, 7)).astype(np.int32)
    fn = lambda a: (a.sum(), a.sum(axis=0), a.max(axis=1), (a % 3).prod(axis=1))  # noqa
    _, got = run(fn, (i,), 3, pmin=0)
    assert_bits(got, fn(i))
    for shape in [(0,), (0, 4), (4, 0)]:
        z = np.zeros(shape, np.float32)
        fz = lambda a: (a.sum(), a.sum(axis=-1), a + 1)                     # noqa: E731
        _, got = run(fz, (z,), 3, pmin=0)
        assert_same(got, fz(z))


# ------------------------------------------------------------------------ row kernels

def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(1, 5), (2, 600), (7, 333), (1001, 5), (0, 5)])
def test_row_kernels_split_rows_between_threads(shape, rng, pools):
    x = rng.standard_normal(shape).astype(np.float32)
    _, serial = run(softmax, (x,), 1, pmin=1 << 60)
    f, threaded = run(softmax, (x,), 3)
    assert any(line.startswith("kernel[row]")
               for line in f.entries[0].run.describe().splitlines())
    assert_bits(threaded, serial)
    assert_same(threaded, softmax(x))
    assert bool(pools) == (x.size >= T and shape[0] > 1)


# ------------------------------------------------------------------------ defaults

def test_large_arrays_use_the_pool_deterministically(rng, pools, monkeypatch):
    monkeypatch.setattr(config, "parallel_min", 1 << 18)     # the default
    monkeypatch.setattr(config, "num_threads", 2)
    x = rng.standard_normal((1 << 18) + 3).astype(np.float32)
    fn = lambda a: ((a * np.float32(2.0)).sum(), a + np.float32(1.0))       # noqa: E731
    f = numaccel.accelerate(fn)
    first = f(x)
    assert pools, "a 2^18-element launch ran on one thread"
    for _ in range(3):
        assert_bits(f(x), first)
    _, serial = run(fn, (x,), 1)
    assert_bits(first, serial)
    assert_same(first, fn(x), rtol=1e-5, atol=1e-3)


def test_compiled_wrapper_only_for_graphs_below_the_threshold(rng, monkeypatch):
    monkeypatch.setattr(config, "compiled_wrapper", True)
    x = rng.standard_normal(500).astype(np.float32)
    fn = lambda a: np.sqrt(a * a + np.float32(1.0)).sum()                 # noqa: E731
    f = numaccel.accelerate(fn)
    assert_same(f(x), fn(x))
    assert f.entries[0].run.describe().startswith("compiled wrapper")
    # nodes at the threshold: the step kernels (threads) rather than one serial function
    monkeypatch.setattr(config, "parallel_min", 500)
    g = numaccel.accelerate(fn)
    assert_same(g(x), fn(x))
    assert "500 elements" in g.entries[0].run.describe().splitlines()[0]


def test_generated_kernels_are_serial_and_release_the_gil(rng):
    x = rng.standard_normal((9, 10)).astype(np.float32)
    f = numaccel.accelerate(lambda a: (a + 1, a.sum(axis=1), softmax(a)))
    f(x)
    kernels = []
    for st in f.entries[0].run.steps:
        for m in getattr(st, "mods", {}).values():
            kernels.append(m[0].kernel if isinstance(m, tuple) else m.kernel)
    assert len(kernels) >= 2
    for k in kernels:
        # parallel=True costs seconds of compile time per kernel (parfor passes)
        assert k.targetoptions.get("nogil") and not k.targetoptions.get("parallel")
