"""Keys and records for caching traced work.

* ``freeze_attrs`` / ``aval_key``: the structural key of one traced node, computed once
  when the node is added (``TraceState._add``), so that the key of a graph-break segment,
  looked up on every re-traced call, is a tuple of ready parts.
* ``infer_cached``: shape rules memoized for static shapes.
* ``Segment`` / ``Policy``: what ``Accelerated`` keeps per segment (how to run it, how often
  it was seen) and per segmented entry (re-trace or plain NumPy, by measured time).
* ``SegmentRunner``: the segment cache of one accelerated function and when its segments
  compile.
"""
from __future__ import annotations

import time

import numpy as np

from ..backends import get_backend
from ..config import config
from ..ops import get_op
from . import background, symbolic
from .symbolic import Sym, hint

_INFER_CACHE: dict = {}


def infer_cached(name, avals, attrs, frozen_attrs=None):
    """``(infer(...), frozen attrs)``, memoized for static shapes (a symbolic rule must
    run: it records guards). The frozen attrs are reused for the node's structural key;
    ``frozen_attrs``: already frozen by the caller (attrs without a Sym)."""
    if frozen_attrs is not None:
        frozen, symbolic_attrs = frozen_attrs, False
    else:
        frozen, symbolic_attrs = freeze_attrs(attrs)
    if frozen is None or symbolic_attrs or not _static_avals(avals):
        return get_op(name).infer(avals, **attrs), frozen
    key = (name, tuple(avals), frozen)
    aval = _INFER_CACHE.get(key)
    if aval is None:
        aval = get_op(name).infer(avals, **attrs)
        if len(_INFER_CACHE) > 50000:
            _INFER_CACHE.clear()
        _INFER_CACHE[key] = aval
    return aval, frozen


def _static_avals(avals) -> bool:
    for a in avals:
        for d in a.shape:
            if type(d) is not int:
                return not any(isinstance(d, Sym) for a in avals for d in a.shape)
    return True


def freeze_attrs(attrs):
    """``(frozen, has a Sym)`` for an attrs dict: a hashable form that compares exactly
    (like ``graph.freeze``, in one walk; floats by their bits, so -0.0 is not 0.0), or
    ``(None, has a Sym)`` when some value is not hashable. Runs once per traced op."""
    if not attrs:
        return (), False
    flag = []
    try:
        f = tuple([(k, _fz(v, flag)) for k, v in attrs.items()])
        hash(f)
    except TypeError:
        return None, bool(flag) or symbolic.has_sym(attrs)
    return f, bool(flag)


_NONE = ("b", None)


def _fz(v, flag):
    t = type(v)
    if t is int or t is str:
        return v            # every other kind below is tagged, so these cannot collide
    if t is tuple or t is list:
        return ("t",) + tuple([_fz(x, flag) for x in v])
    if t is slice:
        a, b, c = v.start, v.stop, v.step      # (ints and None inline: the common case)
        return ("sl", a if type(a) is int else _NONE if a is None else _fz(a, flag),
                b if type(b) is int else _NONE if b is None else _fz(b, flag),
                c if type(c) is int else _NONE if c is None else _fz(c, flag))
    if t is float:
        return ("f", v.hex())
    if v is None or t is bool:
        return ("b", v)
    if t is Sym:
        flag.append(True)
        return ("sym", v.expr)
    if t is dict:
        return ("d",) + tuple((k, _fz(x, flag)) for k, x in sorted(v.items()))
    if symbolic.has_sym(v):
        flag.append(True)
    from ..graph import freeze
    return freeze(v)


def aval_key(aval):
    shape = aval.shape
    if symbolic.is_static(shape):
        return (shape, aval.dtype, aval.weak)
    return str(aval)   # Sym.__eq__ records guards: compare symbolic shapes as text


# ------------------------------------------------------------------------------ segments

SEGMENT_CACHE_MAX = 4096
_PROBE_EVERY = 32       # calls between probes of the losing way, at first ...
_PROBE_MAX = 4096       # ... doubling each time a probe loses again, up to this
_SAMPLES = 2            # timed calls kept per way (the policy compares their best)


class Segment:
    """A cached segment: its pruned graph, how to run it, how often it was seen."""

    __slots__ = ("graph", "run", "work", "seen", "compiled", "call", "in_call", "seen_run",
                 "pending")

    def __init__(self, graph, run, work):
        self.graph = graph
        self.run = run
        self.work = work
        self.seen = 0           # times run, over all calls
        self.compiled = False
        self.call = -1          # the last call of the function that ran it ...
        self.in_call = 0        # ... and how often it ran in that call
        self.seen_run = 0       # 1 once its compiled version ran
        self.pending = None     # its background compile (background.Pending); run: interp


class Policy:
    """How a segmented entry runs for one set of argument shapes: re-traced (compiled
    segments) or plain NumPy, whichever is faster. Plain NumPy is first estimated from the
    first call (its time in NumPy and segments, without tracing and compiling) and timed
    on the third call of the entry where re-tracing wins; traced calls are timed without
    their compile time; re-tracing that loses on its first sample is timed once more.
    The losing way runs once more after ``_PROBE_EVERY`` calls: the
    data (iteration counts, branches) or the machine's load may change the balance. Each
    probe that loses again doubles the wait for the next (up to ``_PROBE_MAX``): a probe
    of re-tracing where it is 8x slower (jacobi's while loop) cost 22% over NumPy on
    average at one probe per 32 calls."""

    __slots__ = ("traced", "eager", "estimate", "first", "calls", "interval", "next_probe")

    def __init__(self, estimate=None, first=None):
        self.traced = []        # seconds of the last _SAMPLES traced calls (less compiling)
        self.eager = []         # seconds of the last _SAMPLES plain NumPy calls
        self.estimate = estimate
        self.first = first      # seconds of the first (tracing) call, less compiling
        self.calls = 0
        self.interval = _PROBE_EVERY
        self.next_probe = _PROBE_EVERY     # the call number of the next probe

    def eager_next(self) -> bool:
        mode = config.segmented_mode
        if mode not in ("auto", "trace", "eager"):
            raise ValueError(f"numaccel.config.segmented_mode must be 'auto', 'trace' or "
                             f"'eager', got {mode!r}")
        if mode != "auto":
            return mode == "eager"
        self.calls += 1
        eager = min(self.eager) if self.eager else self.estimate
        if not self.traced:
            # only the first call was traced. Its time outside NumPy and segments is
            # tracing overhead: where that alone is over what NumPy needs, re-tracing
            # cannot win (a while loop of small steps), however fast the segments run
            if eager is None or self.first is None or self.estimate is None:
                return False
            hopeless = self.first - self.estimate > eager
            return hopeless and self.calls < self.next_probe
        if eager is None:
            return True
        eager_wins = eager < min(self.traced)
        loser = self.traced if eager_wins else self.eager
        # re-tracing that lost on one sample runs once more before plain NumPy is chosen:
        # its first sample is the call right after the compiles, which can lose to page
        # faults or cold caches by 3-8x (a fresh 128 MB array costs 0.34 s to touch here,
        # a reused one 0.02 s)
        if self.calls >= 3 and (not loser or loser is self.traced and len(loser) < _SAMPLES and
                                self.calls < _PROBE_EVERY) \
                or self.calls >= self.next_probe:
            return not eager_wins
        return eager_wins

    def record(self, eager: bool, seconds: float) -> None:
        samples, other = (self.eager, self.traced) if eager else (self.traced, self.eager)
        if self.calls >= self.next_probe:
            # this call was the probe: the wait doubles while the probed way keeps losing
            other_best = min(other) if other else \
                (self.estimate if not eager else None)
            lost = other_best is not None and seconds > other_best
            self.interval = min(2 * self.interval, _PROBE_MAX) if lost else _PROBE_EVERY
            self.next_probe = self.calls + self.interval
        samples.append(seconds)
        del samples[:-_SAMPLES]


class SegmentRunner:
    """The segments of one accelerated function: cached by structure, run by the reference
    interpreter until they prove to repeat, then by the backend.

    A segment compiles the ``config.segment_compile_after``-th time its key (structure plus
    input shapes and dtypes) is seen, and only when its ops touch at least
    ``config.segment_min_elements`` elements. A call that met at most
    ``config.segment_churn_limit`` new segments counts, at its end, as one more sighting of
    each segment it ran once (the next call will most likely meet them again): those that
    reach the threshold compile then, and run once on the inputs they had, so that the
    next call finds them ready (lazy JIT and cache loads included) instead of paying for
    that in its own time. Loop-variant segments (a slice bound that changes every
    iteration) so cost no compilation each, and tiny ones no kernel launches."""

    def __init__(self, backend_name, compile_fn, counts):
        self.backend_name = backend_name
        self._compile_graph = compile_fn      # graph -> run (the backend, with fallback)
        self._counts = counts
        self.cache: dict = {}           # tracer's segment key -> Segment
        self.by_graph: dict = {}        # pruned graph's key -> Segment
        self.call_no = 0
        self.new_segments = 0           # segments first seen in the current call
        self.compile_s = 0.0            # seconds spent compiling in the current call
        self.overhead_s = 0.0           # ... and keying and recording new segments
        self.interpreted = 0            # ... runs of segments still compiling
        self._queued: list = []         # slots queued on the background compile worker
        self.churning = False           # some call made more than segment_churn_limit
        self._once = {}                 # id(slot) -> (slot, inputs): ran once this call
        self._donated: set = set()      # ids of inputs handed to a segment this call
        self._times: dict = {}          # id(slot) -> [runs, seconds, fastest] this call

    def clear(self):
        self.cache.clear()
        self.by_graph.clear()
        self._queued = []
        self.churning = False

    def begin_call(self):
        self.call_no += 1
        self.new_segments = 0
        self.compile_s = 0.0
        self.overhead_s = 0.0
        self.interpreted = 0
        self._once.clear()
        self._donated.clear()
        self._times.clear()

    def end_call(self, completed: bool):
        """Book-keeping after a call; ``completed``: it ran to its end."""
        once, self._once = self._once, {}
        churned = self.new_segments > config.segment_churn_limit
        if churned:
            self.churning = True
        if not completed or churned or self.churning or self.backend_name == "numpy" \
                or config.segmented_mode == "eager":    # its segments will not run again
            return
        for slot, values in once.values():
            if slot.compiled or slot.in_call != 1 or slot.call != self.call_no:
                continue
            slot.seen += 1
            if slot.seen < config.segment_compile_after or \
                    slot.work < config.segment_min_elements:
                continue
            # inputs a later segment may have overwritten (donated) are not run on
            warm = not any(id(v) in self._donated for v in values)
            if background.eligible(self.backend_name, values):
                self._compile_later(slot, values if warm else None)
                continue
            t0 = time.perf_counter()
            self._compile(slot)
            if warm:
                try:
                    slot.run(values, {})
                    slot.seen_run = 1
                except Exception:  # noqa: BLE001  (the next real run decides)
                    pass
            self.compile_s += time.perf_counter() - t0

    def _compile(self, slot):
        self._counts["compiles"] += 1
        slot.run = self._compile_graph(slot.graph)
        slot.compiled = True

    def _compile_later(self, slot, values):
        # the slot keeps running the interpreter until the worker has compiled it and run
        # it once on replicas of ``values`` (None: compile only, the first run finishes)
        self._counts["compiles"] += 1
        slot.compiled, slot.seen_run = True, 1
        slot.pending = background.compile_later(self._compile_graph, slot.graph, values)
        self._queued.append(slot)

    def settle_queued(self):
        """Between calls: wait for the compiles queued so far, so that the next call,
        plain NumPy or traced, does not run beside them (NumPy's small calls waited on the
        GIL there: jacobi at S ran 10x slower than NumPy)."""
        queued, self._queued = self._queued, []
        for slot in queued:
            if slot.pending is not None:
                self._settle(slot)

    def _settle(self, slot):
        p, slot.pending = slot.pending, None
        try:
            slot.run = p.result()
        except Exception:  # noqa: BLE001  (the interpreter it has keeps running it)
            pass

    def run(self, graph, values, key, donate=frozenset()):
        """Run one segment of a broken graph (``key``: its structure, from the tracer;
        ``donate``: inputs it may overwrite, used where the run accepts them)."""
        key = _slot_key(key, values)
        slot = self.cache.get(key)
        if slot is None:
            t0 = time.perf_counter()
            if len(self.cache) >= SEGMENT_CACHE_MAX:
                self._drop_cold()
            # the tracer's key is cheap but can tell apart graphs that prune to the same
            # one (dead nodes shift ids): those share one slot, found by the pruned key
            g = graph.prune()
            gkey = (graph_key(g), key[1])
            slot = self.by_graph.get(gkey)
            if slot is None:
                self.new_segments += 1
                slot = self.by_graph[gkey] = Segment(
                    g, get_backend("numpy").compile(g), work(g))
            self.cache[key] = slot
            self.overhead_s += time.perf_counter() - t0
        if slot.pending is not None:
            if slot.pending.done() or slot.call != self.call_no:
                # a later call waits for it, as a graph entry's second call does (tracing
                # around interpreted pieces cost up to 20x NumPy's time meanwhile); the
                # wait counts as compile time, which the policy leaves out
                t0 = time.perf_counter()
                self._settle(slot)
                self.compile_s += time.perf_counter() - t0
            else:                # the call that queued it goes on without waiting
                self.interpreted += 1
        if not slot.compiled:
            slot.seen += 1
            if slot.call != self.call_no:
                slot.call, slot.in_call = self.call_no, 0
            slot.in_call += 1
            # a function that makes many new segments per call (a loop-variant constant
            # in each) compiles only the ones that repeat within a call
            if self.backend_name == "numpy" or slot.seen >= config.segment_compile_after \
                    and slot.work >= config.segment_min_elements \
                    and (slot.in_call >= 2 or not self.churning):
                if background.eligible(self.backend_name, values):
                    self._compile_later(slot, values)
                    self.interpreted += 1
                else:
                    t0 = time.perf_counter()
                    self._compile(slot)
                    self.compile_s += time.perf_counter() - t0
            elif slot.in_call == 1 and len(self._once) < config.segment_churn_limit:
                self._once[id(slot)] = (slot, values)
        if donate:
            self._donated.update(id(values[i]) for i in donate)
        try:
            if slot.compiled and slot.seen_run == 0:
                # a backend may finish compiling on the first run (Numba's lazy dispatch):
                # that run counts as compile time, not as time the segment takes
                t0 = time.perf_counter()
                out = slot.run(values, {})
                slot.seen_run = 1
                self.compile_s += time.perf_counter() - t0
                return out
            t0 = time.perf_counter()
            if donate and getattr(slot.run, "donates", False):
                out = slot.run(values, {}, donate)
            else:
                out = slot.run(values, {})
            dt = time.perf_counter() - t0
            rec = self._times.get(id(slot))
            if rec is None:
                self._times[id(slot)] = [1, dt, dt]
            else:
                rec[0] += 1
                rec[1] += dt
                if dt < rec[2]:
                    rec[2] = dt
            return out
        except Exception:  # noqa: BLE001
            if self.backend_name == "numpy" or not slot.compiled:
                raise
            slot.run = get_backend("numpy").compile(slot.graph)
            return slot.run(values, {})

    def excess_s(self) -> float:
        """Seconds the current call's segment runs took beyond the fastest run of the
        same segment: time the call lost to something else (a background compile
        holding the GIL or a core, another process), which plain NumPy would not lose
        the same way (the policy's first-call estimate leaves it out)."""
        return sum(total - runs * best for runs, total, best in self._times.values())

    def ready(self, key, values):
        """The compiled run of the segment ``run(graph, values, key)`` last ran, once it
        is compiled, settled and has run: a loop that runs one segment per iteration
        (loop_capture.py) calls it directly, without the per-run bookkeeping. None
        before that."""
        slot = self.cache.get(_slot_key(key, values))
        if slot is None or not slot.compiled or slot.pending is not None or \
                not slot.seen_run:
            return None
        return slot.run

    def _drop_cold(self):
        # a function whose segments never repeat (a loop-variant constant in each) must
        # not grow its cache without bound: forget the ones never compiled
        for cache in (self.cache, self.by_graph):
            for k in [k for k, v in cache.items() if not v.compiled]:
                del cache[k]


def _slot_key(key, values) -> tuple:
    """A segment's cache key: the tracer's structural key and its inputs' shapes and
    dtypes (types for Python values)."""
    return (key, tuple((v.shape, v.dtype) if isinstance(v, (np.ndarray, np.generic))
                       else type(v) for v in values))


def graph_key(g) -> tuple:
    """``Graph.key`` with attrs frozen as the tracer freezes them (floats by their bits:
    ``graph.freeze`` takes -0.0 for 0.0)."""
    parts = []
    for n in g.nodes:
        frozen = freeze_attrs(n.attrs)[0]
        parts.append((n.op, n.inputs, frozen if frozen is not None else object(),
                      aval_key(n.aval), n.scalar, id(g.consts[n.id]) if n.id in g.consts
                      else 0))
    return tuple(parts) + (tuple(g.outputs),)


def work(g) -> int:
    """Elements the ops of ``g`` produce (symbolic dims by their hint): a cost estimate."""
    total = 0
    for n in g.nodes:
        if n.op not in ("input", "const", "scalar"):
            size = 1
            for d in n.aval.shape:
                size *= hint(d)
            total += size
    return total
