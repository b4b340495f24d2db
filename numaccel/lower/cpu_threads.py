"""Threads for the ``cpu`` backend's generated kernels.

Kernels are serial Numba functions (``nogil=True``) over a range ``[lo, hi)`` of their
outermost loop. Large launches split that range into one chunk per thread and run the
chunks on a persistent thread pool, one of them on the calling thread; small ones run
the whole range directly. Numba's ``parallel=True`` would do the same split inside the
kernel, but its parfor passes cost seconds of compile time per kernel (4-6 s for a row
kernel), which is most of a program's first call.

Every output element (a map element, a kept-dims reduction result, a row, a partial of
a full reduction) is computed by exactly one chunk with the same code as a serial run,
so results do not depend on the number of threads or on their timing.

Threshold: ``numaccel.config.parallel_min`` (``NUMACCEL_PARALLEL_MIN``). Threads:
``numaccel.config.num_threads``, else ``NUMBA_NUM_THREADS`` (default: the CPU count).
Example::

    from numaccel.lower.cpu_threads import launch
    launch(mod.kernel, args, n0, size)       # mod.kernel(*args, lo, hi) over [0, n0)
"""
from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait

from ..config import config

_pool: ThreadPoolExecutor | None = None
_pool_workers = 0
_pool_lock = threading.Lock()


def num_threads() -> int:
    """Threads a large kernel launch uses (the calling thread included)."""
    return max(1, config.num_threads or _numba_threads())


def _numba_threads() -> int:
    # Numba's NUMBA_NUM_THREADS, without importing Numba (kernels from the native cache
    # run in processes that never import it): the variable, else the CPUs we may use
    numba = sys.modules.get("numba")
    if numba is not None:
        return numba.config.NUMBA_NUM_THREADS
    env = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if env:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _get_pool(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_workers
    with _pool_lock:
        if _pool_workers < workers:
            old, _pool = _pool, ThreadPoolExecutor(workers, thread_name_prefix="numaccel")
            _pool_workers = workers
            if old is not None:
                old.shutdown(wait=False)     # its queued chunks still run
        return _pool


def _forget_pool() -> None:
    # a forked child has none of the parent's threads: a pool copied from the parent
    # would queue work that no thread ever runs
    global _pool, _pool_workers, _pool_lock
    _pool, _pool_workers, _pool_lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def chunks(n0: int, k: int) -> list[int]:
    """Bounds of ``k`` near-equal chunks of ``[0, n0)`` (``k + 1`` increasing ints)."""
    return [n0 * c // k for c in range(k + 1)]


def launch(fn, args, n0: int, size: int) -> None:
    """``fn(*args, lo, hi)`` over ``[0, n0)``: in one chunk per thread when ``size``
    (the elements the launch touches) reaches ``config.parallel_min``.

    The first call of a kernel may compile it while the pool's threads call it too:
    Numba compiles under its global compiler lock and the waiting threads then find
    the compiled version, so that is safe (and costs no more than compiling once).
    """
    k = min(n0, num_threads()) if size >= config.parallel_min else 1
    if k <= 1:
        fn(*args, 0, n0)
        return
    bounds = chunks(n0, k)
    pool = _get_pool(k - 1)
    futures = []
    try:
        for c in range(1, k):
            futures.append(pool.submit(fn, *args, bounds[c], bounds[c + 1]))
    except RuntimeError:
        # interpreter exit (a background compile's run on replicas, finishing so that
        # its cache entries are complete): the pool takes no new work; the rest runs here
        for c in range(1 + len(futures), k):
            fn(*args, bounds[c], bounds[c + 1])
    try:
        fn(*args, 0, bounds[1])
    finally:
        # the other chunks write into the caller's buffers: never return before them
        wait(futures)
    for f in futures:
        f.result()
