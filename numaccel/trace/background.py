"""Background compilation: a graph's first call does not wait for the compiler.

Compiling a traced graph into Numba kernels costs ~0.4-2 s per kernel (Numba's import,
typing and LLVM), most of a program's first call. With ``numaccel.config.
background_compile`` (the default; ``NUMACCEL_BACKGROUND_COMPILE=0`` turns it off) the
first call of a graph runs it on the reference interpreter (NumPy, op by op: the same
results the compiled code gives) and hands the compile to ONE worker thread, which
compiles the graph and runs it once on replicas of the call's inputs (same dtypes,
shapes, strides and flags, so Numba specializes its kernels for exactly the types later
calls bring). The entry's second call waits for the worker, then runs the compiled code
(graph-break pieces, inside a traced call, run on the interpreter until theirs is
ready). The first call of a program thus never waits for a compiler; a loop pays the
compile once, as it would on the first call. (Running NumPy calls beside the compile
instead was measured on 2 cores: the two slowed each other ~1.5x through the GIL and
the cores, and a loop of large calls lost ~15% over its first seconds.)

``numaccel.wait_for_compiles()`` blocks until every queued compile is done (for
benchmarks: time the compiled code). At interpreter exit the
compile in progress finishes (its disk-cache entries are whole; the next process starts
warm) and queued ones are dropped. A forked child re-queues the compiles its parent had
not finished (the child has no worker thread).

Example::

    p = submit(lambda: backend.compile(graph))   # a callable returning the run function
    p.done(), p.result()                         # result(): the run, or raises its error
"""
from __future__ import annotations

import atexit
import collections
import os
import threading
import time

import numpy as np

REPLICA_MAX = 1 << 30    # input bytes up to which a graph compiles here (the copies)
_cv = threading.Condition()
_queue: collections.deque = collections.deque()
_worker: threading.Thread | None = None
_busy: list = []           # the Pending the worker is running (0 or 1 item)
_closing = False


class Pending:
    """A queued or running compile: ``done()``, ``result()`` (blocks)."""

    __slots__ = ("job", "event", "value", "error")

    def __init__(self, job):
        self.job = job
        self.event = threading.Event()
        self.value = self.error = None

    def done(self) -> bool:
        return self.event.is_set()

    def result(self, timeout: float | None = None):
        """The job's return value (waits for it); raises the job's exception."""
        if not self.event.wait(timeout):
            raise TimeoutError("numaccel: background compile still running")
        if self.error is not None:
            raise self.error
        return self.value

    def _run(self):
        try:
            self.value = self.job()
        except BaseException as exc:  # noqa: BLE001  (delivered to whoever asks)
            self.error = exc
        self.job = None            # drop the input replicas now
        self.event.set()


def submit(job) -> Pending:
    """Queue ``job`` (no arguments; returns what ``result()`` gives) on the worker."""
    global _worker
    p = Pending(job)
    with _cv:
        if _closing:               # interpreter exit: nothing would run it
            p._run()
            return p
        _queue.append(p)
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_loop, name="numaccel-compile", daemon=True)
            _worker.start()
        _cv.notify_all()
    return p


def _loop():
    while True:
        with _cv:
            while not _queue and not _closing:
                _cv.wait()
            if not _queue:
                return
            p = _queue.popleft()
            _busy.append(p)
        try:
            p._run()
        finally:
            with _cv:
                _busy.clear()
                _cv.notify_all()


def pending() -> int:
    """Compiles queued or running."""
    with _cv:
        return len(_queue) + len(_busy)


def wait_for_compiles(timeout: float | None = None) -> bool:
    """Block until every background compile queued so far is done; False on timeout.

    >>> y = f(x); numaccel.wait_for_compiles()   # later calls of f run compiled code
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    with _cv:
        while _queue or _busy:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            _cv.wait(left)
    return True


def compile_later(compile_graph, graph, values, env=None) -> Pending:
    """Queue ``compile_graph(graph)`` and one run of the result on replicas of ``values``
    (the backend's lazy part: Numba compiles a kernel on its first call); ``values``
    None: compile only (the first real run finishes it). The Pending's result is the run."""
    if values is not None:
        read = _read_inputs(graph)
        reps = [replica(v, k in read) for k, v in enumerate(values)]
    else:
        reps = None
    env = dict(env or {})

    def job():
        run = compile_graph(graph)
        if reps is not None:
            run(reps, env)
        return run
    return submit(job)


def _read_inputs(graph) -> set:
    """Indices of the inputs some node of ``graph`` reads (not those it only returns: a
    segment passes every live array through, and copying a large one that no kernel
    reads cost ~50 ms per compile)."""
    index = {n.id: n.attrs["index"] for n in graph.nodes if n.op == "input"}
    return {index[i] for n in graph.nodes for i in n.inputs if i in index}


def eligible(backend_name: str, values) -> bool:
    """Whether a graph of backend ``backend_name`` on inputs ``values`` compiles on the
    worker: background compiles on, a backend that allows them, inputs small enough to
    copy (``REPLICA_MAX`` bytes in all)."""
    from ..backends import get_backend
    from ..config import config
    return config.background_compile and getattr(
        get_backend(backend_name), "compiles_in_background", False) and sum(
        v.nbytes for v in values if isinstance(v, np.ndarray)) <= REPLICA_MAX


def replica(x, copy=True):
    """A copy of ``x`` that Numba types as it types ``x``: same dtype, shape, strides,
    writeable and aligned flags (``x.copy()`` would make a non-contiguous view
    contiguous, and a kernel compiled for it would not serve ``x``). Not arrays: as is.
    ``copy=False``: the same array but its values left unset (for an input nothing
    reads: its pages are never touched)."""
    # (strides are kept exactly, also where a size-1 dim makes them irrelevant)
    if not isinstance(x, np.ndarray):
        return x
    if x.size == 0:             # (a copy would have strides 0)
        r = np.ndarray(x.shape, x.dtype, np.empty(x.itemsize, np.uint8), 0, x.strides)
    else:
        # the bytes the view spans, from its lowest to its highest element
        lo = sum((n - 1) * s for n, s in zip(x.shape, x.strides) if s < 0)
        hi = sum((n - 1) * s for n, s in zip(x.shape, x.strides) if s > 0) + x.itemsize
        buf = np.empty(hi - lo + x.itemsize, np.uint8)
        # keep the data pointer's alignment to the item size (Numba's "aligned" flag)
        shift = (x.__array_interface__["data"][0] - buf.__array_interface__["data"][0]
                 + lo) % x.itemsize
        r = np.ndarray(x.shape, x.dtype, buf, shift - lo, x.strides)
        if copy:
            np.copyto(r, x)
    if not x.flags.writeable:
        r.flags.writeable = False
    return r


def _at_exit():
    # queued compiles are dropped (their entries never run again); the one in progress
    # finishes so that its disk-cache files are complete
    global _closing
    with _cv:
        _closing = True
        dropped = list(_queue)
        _queue.clear()
        _cv.notify_all()
        worker = _worker
    for p in dropped:
        p.error = RuntimeError("numaccel: the interpreter exited before this compile ran")
        p.job = None
        p.event.set()
    if worker is not None and worker is not threading.current_thread():
        worker.join()


def _after_fork_in_child():
    # the parent's worker thread does not exist here: compiles it had queued or was
    # running start again in this process's own worker, on the next submit
    global _cv, _worker
    _cv = threading.Condition()
    _worker = None
    redo = [p for p in _busy + list(_queue) if p.job is not None]
    _busy.clear()
    _queue.clear()
    _queue.extend(redo)
    if _queue:
        _worker = threading.Thread(target=_loop, name="numaccel-compile", daemon=True)
        _worker.start()


atexit.register(_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["Pending", "compile_later", "eligible", "pending", "replica", "submit", "wait_for_compiles"]
