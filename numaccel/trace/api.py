"""``@accelerate``: trace, guard, cache and replay NumPy functions."""
from __future__ import annotations

import functools
import inspect
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from ..backends import get_backend
from ..config import config, log
from ..ir import AVal
from . import background
from .pytree import flatten, flatten_args, unflatten
from .segments import Policy, SegmentRunner
from .symbolic import Sym, evaluate, render
from .tracer import PY_KIND, GraphBreakError, TraceState, TracedArray

__all__ = ["accelerate", "mark_dynamic", "CacheInfo", "GraphBreakError", "Accelerated"]

_MARKED: dict = {}   # id(array) -> (weakref, set of dims) from mark_dynamic


def mark_dynamic(a: np.ndarray, dim: int) -> np.ndarray:
    """Mark ``a.shape[dim]`` symbolic for the next compilation that sees ``a``.

    >>> x = np.ones((8, 3)); numaccel.mark_dynamic(x, 0)
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(f"mark_dynamic expects a numpy.ndarray, got {type(a).__name__}")
    if not -a.ndim <= dim < a.ndim:
        raise ValueError(f"mark_dynamic: dim {dim} is out of range for shape {a.shape}")
    entry = _MARKED.get(id(a))
    if entry is None or entry[0]() is not a:
        entry = _MARKED[id(a)] = (weakref.ref(a), set())
    entry[1].add(dim % a.ndim)
    return a


def _marked_dims(a):
    entry = _MARKED.get(id(a))
    return entry[1] if entry is not None and entry[0]() is a else ()


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    compiles: int
    graph_breaks: int
    recompiles: int
    entries: int


# ------------------------------------------------------------------------------ entries

@dataclass
class Entry:
    kind: str                       # "graph" | "segmented" | "eager"
    tree: Any
    specs: list                     # per leaf: ("array", dtype, dims) | ("scalar", dtype) | ("py", type)
    guards: list = field(default_factory=list)     # (expr, expected, why)
    values: dict = field(default_factory=dict)     # leaf index -> specialized value
    run: Optional[Callable] = None
    out_tree: Any = None
    out_leaves: list = field(default_factory=list)  # ("out", k, scalar) | ("leaf", k) | ("py", v)
    mutations: list = field(default_factory=list)   # (target, output position)
    graph: Any = None
    reason: str = ""
    check_alias: bool = False
    policies: dict = field(default_factory=dict)    # segmented: shapes -> _Policy
    # graph: the background compile (background.Pending) while ``run`` is the interpreter
    pending: Any = None
    # the generated guard check (guardgen) and the specs it was generated for
    _check: Any = field(default=None, repr=False, compare=False)

    def bind(self, leaves):
        """The symbol environment for these leaves, or a string saying which guard fails."""
        check = self._check
        if check is None or check[0] is not self.specs:
            from .guardgen import compile_check
            check = self._check = (self.specs, compile_check(self))
        env = check[1](leaves)
        if env is not None:
            return env
        return self._bind_slow(leaves)

    def _bind_slow(self, leaves):
        """The generic walk: says which guard fails (or accepts what the generated check
        does not cover, e.g. ndarray subclasses)."""
        if len(leaves) != len(self.specs):
            return "a different number of array/scalar arguments"
        env = {}
        for k, (x, spec) in enumerate(zip(leaves, self.specs)):
            kind = spec[0]
            if kind == "array":
                if not isinstance(x, np.ndarray):
                    return f"argument leaf {k} is {type(x).__name__}, was an ndarray"
                if x.dtype != spec[1]:
                    return f"dtype of argument leaf {k} changed: {spec[1]} -> {x.dtype}"
                dims = spec[2]
                if x.ndim != len(dims):
                    return f"rank of argument leaf {k} changed: {len(dims)} -> {x.ndim}"
                for d, (want, got) in enumerate(zip(dims, x.shape)):
                    if want == "*":
                        continue    # any size (segmented entries compile per shape)
                    if isinstance(want, str):
                        if got < 2:
                            return f"dim {d} of argument leaf {k} is {got} (sizes 0 and 1 " \
                                   "are specialized)"
                        if env.setdefault(want, got) != got:
                            return f"dim {d} of argument leaf {k} is {got}, but {want} = " \
                                   f"{env[want]} elsewhere"
                    elif want != got:
                        return f"dim {d} of argument leaf {k} changed: {want} -> {got}"
            elif kind == "scalar":
                if not isinstance(x, np.generic) or x.dtype != spec[1]:
                    return f"argument leaf {k} changed type to {type(x).__name__}"
            elif type(x) is not spec[1]:
                return f"argument leaf {k} changed type: {spec[1].__name__} -> " \
                       f"{type(x).__name__}"
        for k, v in self.values.items():
            if not _same_value(leaves[k], v):
                return f"argument leaf {k} changed value: {v!r} -> {leaves[k]!r} " \
                       "(it was specialized, e.g. used as a size or loop count)"
        for expr, expected, why in self.guards:
            if evaluate(expr, env) != expected:
                return f"guard {render(expr)} == {expected} failed"
        if self.check_alias and _aliased(leaves):
            return "arguments share memory"
        return env


def _shapes(leaves):
    return tuple(x.shape if isinstance(x, np.ndarray) else None for x in leaves)


def _same_value(a, b):
    return type(a) is type(b) and (a == b or (a != a and b != b))


def _aliased(leaves):
    arrays = [x for x in leaves if isinstance(x, np.ndarray)]
    return any(np.may_share_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])


def _spec_of(x, dims):
    if isinstance(x, np.ndarray):
        return ("array", x.dtype, tuple(dims))
    if isinstance(x, np.generic):
        return ("scalar", x.dtype)
    return ("py", type(x))


# ------------------------------------------------------------------------------ the wrapper

class Accelerated:
    """A NumPy function wrapped by ``numaccel.accelerate``. Call it like the function."""

    def __init__(self, fn, backend, dynamic, fullgraph):
        self.fn = fn
        self.backend_name = backend
        self.backend = get_backend(backend)
        self.dynamic = dynamic
        self.fullgraph = fullgraph
        self.entries: list = []
        self._counts = dict(hits=0, misses=0, compiles=0, graph_breaks=0, recompiles=0)
        self.segments = SegmentRunner(backend, self._compile, self._counts)
        self._dyn: set = set()
        self._first_shapes: dict = {}
        self._warned_limit = False
        self.last_trace: Optional[TraceState] = None
        self._explaining = None
        self._traced_fn = None
        self.loop_sites: list = []
        functools.update_wrapper(self, fn)

    @property
    def traced_fn(self):
        """The function traced: ``fn`` with its ``while`` loops rewritten so that they
        can run compiled (loop_rewrite.py), or ``fn`` itself."""
        if self._traced_fn is None:
            self._traced_fn = self.fn
            if config.capture_loops:
                from .loop_for import HELPERS
                from .loop_rewrite import rewrite
                try:
                    new, self.loop_sites, skipped = rewrite(self.fn, HELPERS)
                except Exception as exc:  # noqa: BLE001  (the function runs as written)
                    new, skipped = None, f"{type(exc).__name__}: {exc}"
                if new is not None:
                    self._traced_fn = new
                if skipped and isinstance(skipped, list):
                    for line, why in skipped:
                        log("graph_breaks", f"{self.fn.__qualname__}: loop at line "
                                            f"{line} is not rewritten: {why}")
        return self._traced_fn

    def __repr__(self):
        return f"<numaccel.accelerate({self.fn.__qualname__}) backend={self.backend_name!r}>"

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def cache_info(self) -> CacheInfo:
        """Counters: hits, misses, compiles, graph breaks, recompiles, cache entries."""
        return CacheInfo(entries=len(self.entries), **self._counts)

    def reset(self) -> None:
        """Drop every compiled entry (e.g. after rebinding a global array it reads)."""
        self.entries.clear()
        self.segments.clear()
        self._dyn.clear()
        self._first_shapes.clear()

    def __call__(self, *args, **kwargs):
        leaves = []
        tree = flatten_args(args, kwargs, leaves)
        reasons = []
        for e in self.entries:
            if e.tree != tree:
                reasons.append("the argument structure changed")
                continue
            env = e.bind(leaves)
            if isinstance(env, str):
                reasons.append(env)
                continue
            self._counts["hits"] += 1
            return self._run_entry(e, leaves, env, args, kwargs)
        self._counts["misses"] += 1
        return self._miss(tree, leaves, args, kwargs, reasons)

    # -- running a cached entry ------------------------------------------------
    def _run_entry(self, e, leaves, env, args, kwargs):
        if e.kind == "eager":
            return self.fn(*args, **kwargs)
        if e.kind == "segmented":
            return self._run_segmented(e, leaves, args, kwargs)
        if e.pending is not None:
            # the second call waits for the compile rather than running NumPy beside it:
            # on 2 cores the two slowed each other by ~1.5x (GIL and cores), so a loop of
            # large calls lost ~15% over its first seconds; the first call stays fast
            self._settle(e)
        outs = e.run(leaves, env)
        return self._finish(e, leaves, outs)

    def _settle(self, e):
        """Wait for the background compile: its run replaces the interpreter (a failed one
        leaves the interpreter, with the reason, as the synchronous path does)."""
        p, e.pending = e.pending, None
        try:
            e.run = p.result()
        except Exception as exc:  # noqa: BLE001
            e.reason = f"{self.backend_name} backend failed: {type(exc).__name__}: {exc}"
            log("graph_breaks", f"{self.fn.__qualname__}: backend {self.backend_name!r} "
                                f"failed in the background compile ({type(exc).__name__}: "
                                f"{exc}); using the reference interpreter for this graph")

    def _run_segmented(self, e, leaves, args, kwargs):
        # re-tracing costs Python work per NumPy call and per break; where the arrays are
        # small that is more than compiled segments save, and plain NumPy is faster
        shapes = _shapes(leaves)
        pol = e.policies.get(shapes)
        if pol is None:
            pol = e.policies[shapes] = Policy()
        self.segments.settle_queued()
        eager = pol.eager_next()
        t0 = time.perf_counter()
        if eager:
            res = self.fn(*args, **kwargs)
            pol.record(True, time.perf_counter() - t0)
            return res
        res = self._trace_and_run(e.tree, leaves, set(), segmented=True)[0]
        # a call that ran segments still compiling (on the interpreter) is no sample
        if not self.segments.interpreted:
            pol.record(False, time.perf_counter() - t0 - self.segments.compile_s)
        return res

    def _finish(self, e, leaves, outs):
        for target, pos in e.mutations:
            dst = leaves[target] if isinstance(target, int) else target
            np.copyto(dst, outs[pos], casting="unsafe")
        res = []
        for item in e.out_leaves:
            if item[0] == "out":
                v = outs[item[1]]
                if item[2]:
                    v = v[()] if isinstance(v, np.ndarray) else v
                elif isinstance(v, np.generic):
                    v = np.asarray(v)
                res.append(v)
            elif item[0] == "leaf":
                res.append(leaves[item[1]])
            elif item[0] == "const":
                res.append(item[1])
            else:
                res.append(item[1])
        return unflatten(e.out_tree, res)

    # -- compiling -----------------------------------------------------------------
    def _miss(self, tree, leaves, args, kwargs, reasons):
        if len(self.entries) >= config.cache_size_limit:
            if not self._warned_limit:
                self._warned_limit = True
                warnings.warn(f"numaccel: {self.fn.__qualname__} hit cache_size_limit="
                              f"{config.cache_size_limit}; running it uncompiled from now "
                              f"on. Last reason: {reasons[-1] if reasons else '?'}",
                              RuntimeWarning, stacklevel=3)
            return self.fn(*args, **kwargs)
        if self.entries:
            self._counts["recompiles"] += 1
            log("recompiles", f"{self.fn.__qualname__}: {reasons[-1] if reasons else ''}")
        self._update_dynamic(leaves)
        try:
            return self._trace_and_run(tree, leaves, self._dyn)[0]
        except GraphBreakError:
            raise
        except Exception as exc:  # noqa: BLE001
            # Plain NumPy decides: an error of the user's program is raised as NumPy raises
            # it; a limitation of the tracer falls back to running the function eagerly.
            result = self.fn(*args, **kwargs)
            log("graph_breaks", f"{self.fn.__qualname__}: tracing failed ({type(exc).__name__}:"
                                f" {exc}); running eagerly for these argument types")
            specs = [_spec_of(x, getattr(x, "shape", ())) for x in leaves]
            self.entries.append(Entry("eager", tree, specs, reason=f"{type(exc).__name__}: "
                                                                   f"{exc}"))
            return result

    def _update_dynamic(self, leaves):
        if self.dynamic is False:
            return
        for k, x in enumerate(leaves):
            if not isinstance(x, np.ndarray):
                continue
            for d in _marked_dims(x):
                self._dyn.add((k, d))
            if self.dynamic:
                self._dyn.update((k, d) for d in range(x.ndim))
                continue
            first = self._first_shapes.setdefault(k, x.shape)
            if config.automatic_dynamic_shapes and len(first) == x.ndim:
                for d, (a, b) in enumerate(zip(first, x.shape)):
                    if a != b and (k, d) not in self._dyn:
                        log("recompiles", f"{self.fn.__qualname__}: dim {d} of argument leaf "
                                          f"{k} changed {a} -> {b}; making it dynamic")
                        self._dyn.add((k, d))

    def _trace_and_run(self, tree, leaves, dyn, segmented=False):
        self.segments.begin_call()
        self._t_call = time.perf_counter()
        completed = False
        try:
            out = self._trace_and_run1(tree, leaves, dyn, segmented)
            completed = True
            return out
        finally:
            self.segments.end_call(completed)

    def _trace_and_run1(self, tree, leaves, dyn, segmented):
        st = TraceState(fullgraph=self.fullgraph, run_segment=self.segments.run,
                        fn_name=self.fn.__qualname__, segmented=segmented)
        st.runner = self.segments
        self.last_trace = st
        sym_of_size, dims_of = {}, []
        with st:
            tleaves = []
            for k, x in enumerate(leaves):
                if isinstance(x, np.ndarray):
                    dims, spec_dims = [], []
                    for d, n in enumerate(x.shape):
                        if (k, d) in dyn and n >= 2:
                            # duck sizing: equal sizes share a symbol (guarded equal)
                            name = sym_of_size.setdefault(n, f"s{len(sym_of_size)}")
                            dims.append(Sym.symbol(name, n))
                            spec_dims.append(name)
                        else:
                            dims.append(n)
                            spec_dims.append(n)
                    dims_of.append(spec_dims)
                    t = st.input(x, AVal(dims, x.dtype), src=("input", k))
                elif isinstance(x, np.generic):
                    dims_of.append(())
                    t = st.input(x, AVal((), x.dtype))
                    t._scalar = True
                else:
                    dims_of.append(())
                    t = st.input(x, AVal((), np.asarray(x).dtype, PY_KIND[type(x)]))
                tleaves.append(t)
            targs, tkwargs = unflatten(tree, tleaves)
            result = self.traced_fn(*targs, **tkwargs)
            out_flat = []
            out_tree = flatten(result, out_flat, where="return value")
            mutated = [t for t in list(st.live) if t._st is st and t._base is None
                       and t._mutated and t._src is not None]
            if not st.breaks and getattr(st, "impure", None):
                st.breaks.append(("np.random draws new numbers on every call: re-traced "
                                  "each call", st.impure))
            if not st.breaks and getattr(st, "_const_keep", None):
                for where in st.fresh_consts()[:1]:
                    st.breaks.append(("an array made in the call by code numaccel cannot "
                                      "trace (a np.random.Generator method, a compiled "
                                      "extension) is new on every call: re-traced each call",
                                      where))
            if st.breaks:
                self._counts["graph_breaks"] += len(st.breaks)
            if st.breaks or segmented:
                return self._finish_segmented(st, tree, leaves, dims_of, out_tree, out_flat,
                                              mutated, segmented), st
            # compile and run with NumPy's own functions in place (Numba, when it first
            # types NumPy calls, must see the real np.zeros, not a trace hook)
            with st.suspended():
                return self._finish_graph(st, tree, leaves, dims_of, out_tree, out_flat,
                                          mutated), st

    def _outputs(self, st, out_flat, mutated):
        g = st.graph
        outputs, out_leaves = [], []
        for v in out_flat:
            if isinstance(v, TracedArray) and not v._aval.weak:
                if v._base is None and v._src is not None and v._src[0] == "input" and \
                        v._mutated or (v._base is None and v._src is not None and
                                       g.nodes[v._nid].op == "input"):
                    if v._src[0] == "input":
                        out_leaves.append(("leaf", v._src[1]))
                        continue
                out_leaves.append(("out", len(outputs), v._scalar and not v.ndim))
                outputs.append(v._nid)
            elif isinstance(v, TracedArray):
                out_leaves.append(("out", len(outputs), True))
                outputs.append(v._nid)
            else:
                out_leaves.append(("py", v))
        mutations = []
        for t in mutated:
            target = t._src[1]
            mutations.append((target, len(outputs)))
            outputs.append(t._nid)
        return outputs, out_leaves, mutations

    def _finish_graph(self, st, tree, leaves, dims_of, out_tree, out_flat, mutated):
        outputs, out_leaves, mutations = self._outputs(st, out_flat, mutated)
        g = st.graph
        g.outputs = outputs
        graph = g.prune()
        values = {k: v for k, v, _ in st.specialized}
        specs = [_spec_of(x, dims) for x, dims in zip(leaves, dims_of)]
        guards = _dedupe(st.guards)
        later = background.eligible(self.backend_name, leaves)
        run = get_backend("numpy").compile(graph) if later else self._compile(graph)
        self._counts["compiles"] += 1
        e = Entry("graph", tree, specs, guards, values, run, out_tree, out_leaves, mutations,
                  graph, check_alias=bool(mutations))
        log("graphs", f"{self.fn.__qualname__}:\n{graph}")
        log("guards", f"{self.fn.__qualname__}: {describe_guards(e)}")
        env = e.bind(leaves)
        if isinstance(env, str):  # cannot happen unless a guard was recorded wrongly
            raise RuntimeError(f"numaccel internal error: fresh entry rejects its own call "
                               f"({env})")
        if e.check_alias and _aliased(leaves):
            raise NotImplementedError("arguments that share memory are mutated in place")
        if later:
            # the interpreter runs this call (it raises the program's own errors); the
            # compiled run takes over once the worker has built it (background.py)
            outs = run(leaves, env)
            e.pending = background.compile_later(self._compile, graph, leaves, env)
            self.entries.append(e)
            return self._finish(e, leaves, outs)
        try:
            outs = run(leaves, env)
        except Exception as exc:  # noqa: BLE001
            if self.backend_name == "numpy":
                raise
            # a backend limitation must never cost a wrong or failed call: the reference
            # interpreter runs this graph instead (and raises NumPy's error if it is the
            # program's own)
            log("graph_breaks", f"{self.fn.__qualname__}: backend {self.backend_name!r} "
                                f"failed ({type(exc).__name__}: {exc}); using the reference "
                                "interpreter for this graph")
            e.run = run = get_backend("numpy").compile(graph)
            e.reason = f"{self.backend_name} backend failed: {type(exc).__name__}: {exc}"
            outs = run(leaves, env)
        self.entries.append(e)
        return self._finish(e, leaves, outs)

    def _compile(self, graph):
        try:
            return self.backend.compile(graph)
        except Exception as exc:  # noqa: BLE001
            if self.backend_name == "numpy":
                raise
            log("graph_breaks", f"{self.fn.__qualname__}: backend {self.backend_name!r} "
                                f"cannot compile this graph ({type(exc).__name__}: {exc}); "
                                "using the reference interpreter")
            return get_backend("numpy").compile(graph)

    def _finish_segmented(self, st, tree, leaves, dims_of, out_tree, out_flat, mutated,
                          already):
        outputs, out_leaves, mutations = self._outputs(st, out_flat, mutated)
        wanted = [t for t in out_flat if isinstance(t, TracedArray)] + mutated
        values = st.materialize(wanted) if wanted else []
        vmap = {}
        for t, v in zip(wanted, values):
            vmap[id(t)] = v
        # by the positions _outputs gave: a returned argument passed through (a "leaf")
        # has none, and must not shift the outputs after it
        outs = [None] * (len(outputs))
        for v, item in zip(out_flat, out_leaves):
            if item[0] == "out":
                outs[item[1]] = vmap[id(v)]
        for (_, pos), t in zip(mutations, mutated):
            outs[pos] = vmap[id(t)]
        e = Entry("segmented", tree, [_spec_of(x, [n for n in getattr(x, "shape", ())])
                                      for x in leaves], out_tree=out_tree,
                  out_leaves=out_leaves, mutations=mutations, reason="; ".join(
                      r for r, _ in st.breaks[:3]))
        if not already:
            # a segmented entry re-runs the Python function each call, compiling the
            # pieces between breaks once each (shape-generic entry: no shape guards)
            e.specs = [("array", x.dtype, tuple("*" for _ in x.shape))
                       if isinstance(x, np.ndarray) else _spec_of(x, ()) for x in leaves]
            # plain NumPy would have spent about the time this call spent in NumPy and
            # in segments (less compiling); the tracing around it is what re-tracing adds
            # (less the segment cache's own work on new segments: a loop that makes a
            # new segment per iteration spends more there than in NumPy; and less the
            # time segment runs lost to the compiles this call queued, see excess_s)
            lost = self.segments.compile_s + self.segments.excess_s()
            e.policies[_shapes(leaves)] = Policy(
                max(st.suspended_s - lost - self.segments.overhead_s, 0.0),
                time.perf_counter() - self._t_call - lost)
            self.entries.append(e)
        with st.suspended():
            return self._finish(e, leaves, outs)


def _dedupe(guards):
    seen, out = set(), []
    for g in guards:
        key = (repr(g[0]), g[1])
        if key not in seen:
            seen.add(key)
            out.append(g)
    return out


def describe_guards(e: Entry) -> str:
    parts = []
    for k, spec in enumerate(e.specs):
        if spec[0] == "array":
            parts.append(f"leaf{k}: {spec[1]}[{', '.join(map(str, spec[2]))}]")
        elif spec[0] == "scalar":
            parts.append(f"leaf{k}: {spec[1]} scalar")
        else:
            parts.append(f"leaf{k}: {spec[1].__name__}")
    parts += [f"leaf{k} == {v!r}" for k, v in e.values.items()]
    parts += [f"{render(x)} == {v}" for x, v, _ in e.guards]
    return "; ".join(parts)


# ------------------------------------------------------------------------------ public API

def accelerate(fn=None, *, backend: Optional[str] = None, dynamic: Optional[bool] = None,
               fullgraph: bool = False):
    """Compile a NumPy function: trace it, cache the graph under guards, replay it.

    >>> @numaccel.accelerate
    ... def f(x, y):
    ...     return np.sin(x) * y + np.exp(-x) * 0.5

    ``backend``: "cpu" (default), "numpy" (reference interpreter) or a registered name.
    ``dynamic``: None (automatic dynamic shapes), True (all dims symbolic from the start),
    False (always static). ``fullgraph=True`` makes any graph break an error.
    """
    if fn is None:
        return functools.partial(accelerate, backend=backend, dynamic=dynamic,
                                 fullgraph=fullgraph)
    if isinstance(fn, Accelerated):
        fn = fn.fn
    if not callable(fn):
        raise TypeError(f"numaccel.accelerate expects a function, got {type(fn).__name__} "
                        f"{fn!r}")
    if inspect.isclass(fn):
        raise TypeError("numaccel.accelerate expects a function, not a class; decorate its "
                        "methods instead")
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, got {dynamic!r}")
    return Accelerated(fn, backend or config.default_backend, dynamic, bool(fullgraph))
