"""Large outputs of the cpu backend reuse the memory of dropped results (lower.pool),
never of results (or views of them) the caller still holds."""
import threading

import numpy as np
import pytest

import numaccel
from numaccel.config import config
from numaccel.lower import pool

from conftest import assert_same

N = (1 << 22) // 4 + 3          # float32 elements just over pool.MIN_BYTES


@pytest.fixture
def fresh_pool():
    saved = config.buffer_pool_bytes
    pool.release()
    yield
    config.buffer_pool_bytes = saved
    pool.release()


def test_dropped_result_memory_is_reused(fresh_pool, rng):
    f = numaccel.accelerate(lambda x: np.exp(x) * 2, backend="cpu")
    x = rng.standard_normal(N).astype(np.float32)
    r = f(x)
    addr = r.ctypes.data
    assert_same(r, np.exp(x) * 2)
    del r
    r2 = f(x + 1)
    assert r2.ctypes.data == addr           # the dropped result's buffer, again
    assert_same(r2, np.exp(x + 1) * 2)
    assert r2.dtype == np.float32 and r2.shape == (N,) and r2.flags.c_contiguous


def test_held_results_and_views_are_never_overwritten(fresh_pool, rng):
    f = numaccel.accelerate(lambda x: x + 1, backend="cpu")
    x = rng.standard_normal((N // 8, 8)).astype(np.float32)
    kept = f(x)
    view = f(x * 2)[::3, 1]                 # only a view of the second result survives
    r3 = f(x * 3)
    assert len({kept.ctypes.data, view.base.ctypes.data, r3.ctypes.data}) == 3
    assert_same(kept, x + 1)
    assert_same(view, (x * 2 + 1)[::3, 1])
    assert_same(r3, x * 3 + 1)


def test_small_outputs_and_disabled_pool_are_plain_arrays(fresh_pool, rng):
    f = numaccel.accelerate(lambda x: x * 3, backend="cpu")
    f(np.ones(100))
    assert pool.held_bytes() == 0                     # small: never pooled
    config.buffer_pool_bytes = 0
    big = f(np.ones(N, np.float32))
    assert big.base is None and big.flags.owndata
    assert pool.held_bytes() == 0


def test_cap_and_release(fresh_pool, rng):
    config.buffer_pool_bytes = 3 * (N * 4)
    f = numaccel.accelerate(lambda x: x > 0, backend="cpu")     # bool outputs
    xs = [rng.standard_normal(N * 4 + k * 4096).astype(np.float32) for k in range(5)]
    outs = [f(x) for x in xs]                  # five sizes: only three fit
    for x, o in zip(xs, outs):
        assert_same(o, x > 0)
    assert pool.held_bytes() <= config.buffer_pool_bytes
    del outs, o
    f(xs[0] * -1)                             # a free buffer of a size makes room
    pool.release()
    assert pool.held_bytes() == 0


def test_concurrent_calls_get_distinct_buffers(fresh_pool, rng):
    f = numaccel.accelerate(lambda x, k: np.sin(x) * k, backend="cpu")
    x = rng.standard_normal(N).astype(np.float32)
    f(x, np.float32(1))
    results, errors = {}, []

    def work(k):
        try:
            for _ in range(5):
                r = f(x, np.float32(k))
                np.testing.assert_allclose(r, np.sin(x) * np.float32(k), rtol=1e-5,
                                           atol=1e-6)
            results[k] = r
        except Exception as e:      # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len({r.ctypes.data for r in results.values()}) == 4


def test_owns_counts_whole_pooled_buffers_only(fresh_pool):
    a = pool.empty((N,), np.float32)
    assert pool.owns(a) and not pool.owns(a[1:]) and not pool.owns(a.reshape(-1, 1)[::2])
    assert pool.owns(np.empty(3)) and not pool.owns(np.empty(4)[:2])
    assert not pool.owns(np.empty(N * 4, np.uint8).view(np.float32))   # not pooled


def test_results_are_freed_without_the_garbage_collector(rng):
    # no reference cycle holds a call's results (they would linger, and so would their
    # memory, until a gc pass)
    import gc
    import weakref
    f = numaccel.accelerate(lambda x: (x * 2, [x + 1, {"k": x - 1}]), backend="cpu")
    x = rng.standard_normal(1000)
    f(x)
    gc.disable()
    try:
        out = f(x)
        refs = [weakref.ref(out[0]), weakref.ref(out[1][0]), weakref.ref(out[1][1]["k"])]
        del out
        assert all(r() is None for r in refs)
    finally:
        gc.enable()


def test_arrays_compiled_code_allocated_own_their_memory():
    numba = pytest.importorskip("numba")

    @numba.njit
    def make(n):
        return np.ones(n)
    a = make(5)
    assert type(a.base).__name__ == "_MemInfo" and pool.owns(a)
    assert not pool.owns(a[1:])         # a view of it (base: the array) is no owner
