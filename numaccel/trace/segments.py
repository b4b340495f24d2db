"""Keys and records for caching traced work.

* ``freeze_attrs`` / ``aval_key``: the structural key of one traced node, computed once
  when the node is added (``TraceState._add``), so that the key of a graph-break segment,
  looked up on every re-traced call, is a tuple of ready parts.
* ``infer_cached``: shape rules memoized for static shapes.
* ``Segment`` / ``Policy``: what ``Accelerated`` keeps per segment (how to run it, how often
  it was seen) and per segmented entry (re-trace or plain NumPy, by measured time).
"""
from __future__ import annotations

from ..config import config
from ..ops import get_op
from . import symbolic
from .symbolic import Sym, hint

_INFER_CACHE: dict = {}


def infer_cached(name, avals, attrs):
    """``(infer(...), frozen attrs)``, memoized for static shapes (a symbolic rule must
    run: it records guards). The frozen attrs are reused for the node's structural key."""
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


def _fz(v, flag):
    t = type(v)
    if t is int or t is str:
        return v            # every other kind below is tagged, so these cannot collide
    if t is tuple or t is list:
        return ("t",) + tuple([_fz(x, flag) for x in v])
    if t is slice:
        return ("sl", _fz(v.start, flag), _fz(v.stop, flag), _fz(v.step, flag))
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
_PROBE_EVERY = 32


class Segment:
    """A cached segment: its pruned graph, how to run it, how often it was seen."""

    __slots__ = ("graph", "run", "work", "seen", "compiled", "call", "in_call", "seen_run")

    def __init__(self, graph, run, work):
        self.graph = graph
        self.run = run
        self.work = work
        self.seen = 0           # times run, over all calls
        self.compiled = False
        self.call = -1          # the last call of the function that ran it ...
        self.in_call = 0        # ... and how often it ran in that call
        self.seen_run = 0       # 1 once its compiled version ran


class Policy:
    """How a segmented entry runs for one set of argument shapes: re-traced (compiled
    segments) or plain NumPy, whichever is faster. Plain NumPy is first estimated from the
    first call (its time in NumPy and segments, without tracing and compiling) and timed
    on the third call of the entry where re-tracing wins; traced calls are timed without
    their compile time. The losing way runs once more every ``_PROBE_EVERY`` calls: the
    data (iteration counts, branches) or the machine's load may change the balance."""

    __slots__ = ("traced", "eager", "estimate", "calls")

    def __init__(self, estimate=None):
        self.traced = []        # seconds of the last two traced calls (less compiling)
        self.eager = []         # seconds of the last two plain NumPy calls
        self.estimate = estimate
        self.calls = 0

    def eager_next(self) -> bool:
        mode = config.segmented_mode
        if mode not in ("auto", "trace", "eager"):
            raise ValueError(f"numaccel.config.segmented_mode must be 'auto', 'trace' or "
                             f"'eager', got {mode!r}")
        if mode != "auto":
            return mode == "eager"
        self.calls += 1
        if not self.traced:
            return False
        eager = min(self.eager) if self.eager else self.estimate
        if eager is None:
            return True
        eager_wins = eager < min(self.traced)
        loser = self.traced if eager_wins else self.eager
        if not loser and self.calls >= 3 or self.calls % _PROBE_EVERY == 0:
            return not eager_wins
        return eager_wins

    def record(self, eager: bool, seconds: float) -> None:
        samples = self.eager if eager else self.traced
        samples.append(seconds)
        del samples[:-2]


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
