"""The traced array and the trace state.

Calling a function under ``TraceState.run`` gives it ``TracedArray`` arguments; every
NumPy call on them appends nodes to ``state.graph`` instead of computing. In-place
writes are functional: a write to an array (or to a view of it) rebinds the *root*
array to a new node, and views re-derive their node from the root when they are next
read. Mutated roots that came from the caller (or from global arrays) are written back
after the call.

When a concrete value is demanded (``bool(x)``, ``float(x)``, an unsupported NumPy
function, a decision on a data-dependent size), the pending graph is a *segment*: it is
compiled and run, every live traced array becomes an input of a fresh segment, and
tracing continues (a graph break). With ``fullgraph=True`` a break is an error instead.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import weakref

import numpy as np

from ..graph import Graph
from ..ir import AVal
from ..lower.pool import owns
from . import symbolic
from .segments import aval_key, freeze_attrs, infer_cached
from .symbolic import Sym, hints, prod

_tls = threading.local()
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


def current():
    """The active trace state of this thread, or None (also None while evaluating)."""
    st = getattr(_tls, "state", None)
    return st if st is not None and st.active else None


class GraphBreakError(RuntimeError):
    """Raised under ``fullgraph=True`` (and by export) where a graph break would occur."""


class UnsupportedArgument(TypeError):
    pass


def user_frame_info() -> str:
    """'file:line: source' of the innermost frame outside numaccel and NumPy."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG_DIR) and not fn.startswith(_NUMPY_DIR) \
                and "<frozen" not in fn:
            import linecache
            src = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
            return f"{f.f_code.co_filename}:{f.f_lineno}: {src}"
        f = f.f_back
    return "<unknown>"


PY_KIND = {bool: "bool", int: "int", float: "float", complex: "complex"}


_PY_AVAL = {t: AVal((), np.asarray(t()).dtype, k) for t, k in PY_KIND.items()}
_I64 = 1 << 63


def aval_of(x) -> AVal:
    t = type(x)
    if t in PY_KIND:
        if t is not int or -_I64 <= x < _I64:
            return _PY_AVAL[t]
        return AVal((), np.asarray(x).dtype, "int")
    x = np.asarray(x) if not isinstance(x, np.ndarray) else x
    return AVal(x.shape, x.dtype)


_npapi = None


def _api():
    """The npapi module (imported on first use: it imports this one)."""
    global _npapi
    if _npapi is None:
        from . import npapi
        _npapi = npapi
    return _npapi


class _Live:
    """The traced arrays of a trace that are still alive: weak references in a list (a
    WeakSet's add and its removal callback cost ~1 us per traced op). Dead references are
    dropped when the list has doubled since the last sweep."""

    __slots__ = ("refs", "sweep_at")

    def __init__(self):
        self.refs = []
        self.sweep_at = 256

    def add(self, t):
        refs = self.refs
        refs.append(weakref.ref(t))
        if len(refs) >= self.sweep_at:
            self.refs = [r for r in refs if r() is not None]
            self.sweep_at = max(256, 2 * len(self.refs))

    def __iter__(self):
        alive = []
        for r in self.refs:
            t = r()
            if t is not None:
                alive.append(t)
        return iter(alive)


class TraceState:
    def __init__(self, *, fullgraph: bool, run_segment, fn_name: str = "?",
                 segmented: bool = False):
        self.graph = Graph()
        # a segmented trace re-runs each call: a boolean mask's count is then taken by
        # running the pending segment (compiled) rather than re-computing the mask in the
        # reference interpreter (see mask_count)
        self.segmented = segmented
        self.sigs = []                # per node of self.graph: its structural key (see _add)
        self.input_values = []        # concrete values of the current segment's inputs
        self.guards = []              # (expr, expected, why) recorded by Sym decisions
        self.breaks = []              # (reason, user source line)
        self.segments = []            # graphs already run (one per break)
        self.live = _Live()
        self.const_tas = {}           # id(ndarray) -> TracedArray (held with the array)
        self.mask_counts = {}         # node id of a mask -> data-dependent Sym of its count
        self.peeked = {}              # node id -> value, computed by peek (see there)
        self.n_unbacked = 0
        self.dyn = None               # slices at a captured for loop's counter (loop_for.py)
        self.fullgraph = fullgraph
        self.run_segment = run_segment
        self.fn_name = fn_name
        self.active = True
        self.specialized = []         # (input index, value, why) Python scalar args
        self.suspended_s = 0.0        # seconds run concretely (segments, NumPy calls)
        # arrays segments of this trace computed, and those user code has seen
        # (concrete values, NumPy calls behind a graph break), by id: a made, unseen
        # array that owns its memory is the trace's own, and its next segment may write
        # into it (see donatable). Weak: a dead array's id may be reused
        self.made = weakref.WeakValueDictionary()
        self.seen = weakref.WeakValueDictionary()

    # -- entering / leaving -----------------------------------------------------
    def __enter__(self):
        self._prev = getattr(_tls, "state", None)
        _tls.state = self
        self._prev_sink = symbolic.set_guard_sink(self.guards)
        from .npapi import hooks
        from .untraced import install_random
        install_random(True)    # (first: it may import numpy.random, which must not be
        hooks(True)             # traced)
        return self

    def __exit__(self, *exc):
        from .npapi import hooks
        from .untraced import install_random
        hooks(False)
        install_random(False)
        _tls.state = self._prev
        symbolic.set_guard_sink(self._prev_sink)
        return False

    class _suspended:
        def __init__(self, st):
            self.st = st

        def __enter__(self):
            from .npapi import hooks
            self.prev = self.st.active
            self.st.active = False
            self.sink = symbolic.set_guard_sink(None)
            hooks(False)
            self.t0 = time.perf_counter()

        def __exit__(self, *exc):
            from .npapi import hooks
            if self.prev:
                self.st.suspended_s += time.perf_counter() - self.t0
            hooks(True)
            self.st.active = self.prev
            symbolic.set_guard_sink(self.sink)

    def suspended(self):
        """Context in which NumPy runs concretely (no tracing, no guard recording)."""
        return TraceState._suspended(self)

    # -- nodes ------------------------------------------------------------------
    def _add(self, op, inputs, attrs, aval, scalar=False, frozen=None, const=None):
        """``graph.add`` that also records the node's structural key, so the key of a
        segment (the cache lookup on every re-traced call) is a tuple of ready parts
        instead of a walk that freezes every attr again."""
        node = self.graph.add(op, inputs, attrs, aval, scalar)
        if frozen is None:
            frozen = freeze_attrs(attrs)[0]
            if frozen is None:
                frozen = object()   # unhashable attrs: this segment is never reused
        self.sigs.append((op, node.inputs, frozen, aval_key(aval), node.scalar, const))
        return node

    def segment_key(self) -> tuple:
        """Structural key of the pending graph and its outputs: the parts of the nodes the
        outputs depend on, under their ids in the unpruned graph (constants by identity,
        small list constants by value). Dead nodes are left out: a decision on a Python
        loop counter (``it < max_iter``) leaves one behind with a new value each time."""
        sigs, outputs = self.sigs, self.graph.outputs
        keep = [False] * len(sigs)
        for o in outputs:
            keep[o] = True
        for i in range(len(sigs) - 1, -1, -1):
            if keep[i]:
                for j in sigs[i][1]:
                    keep[j] = True
        return tuple([s for s, k in zip(sigs, keep) if k or s[0] == "input"]) + \
            (tuple(outputs),)

    # -- leaves -----------------------------------------------------------------
    def input(self, value, aval: AVal, src=None) -> "TracedArray":
        node = self._add("input", [], {"index": len(self.input_values)}, aval)
        self.input_values.append(value)
        t = TracedArray(self, node.id, aval)
        t._src = src
        return t

    def lift(self, x) -> "TracedArray":
        """Turn an operand of a traced op into a TracedArray (constants, scalars)."""
        if isinstance(x, TracedArray):
            if x._st is not self:
                raise RuntimeError("a traced array escaped from another trace (was it stored "
                                   "in a global by an accelerated function?)")
            return x
        t = type(x)
        if t in PY_KIND:
            kind = PY_KIND[t]
            # (what freeze_attrs makes of these attrs, without its generic walk)
            fz = x if t is int else ("f", x.hex()) if t is float else ("b", x) \
                if t is bool else None
            frozen = (("value", fz), ("dtype", ("b", None)), ("weak", kind)) \
                if fz is not None else None
            node = self._add("scalar", [], {"value": x, "dtype": None, "weak": kind},
                             aval_of(x), False, frozen)
            return TracedArray(self, node.id, node.aval)
        if isinstance(x, np.generic):
            node = self._add("scalar", [], {"value": x.item(), "dtype": x.dtype.name,
                                            "weak": None}, AVal((), x.dtype))
            return TracedArray(self, node.id, node.aval, scalar=True)
        if isinstance(x, np.ndarray):
            t = self.const_tas.get(id(x))
            if t is None:
                # global/closure arrays are captured by reference: in-place changes to them
                # are seen by later calls, a rebinding of the name is not (see README)
                node = self._add("const", [], {}, AVal(x.shape, x.dtype), const=id(x))
                self.graph.consts[node.id] = x
                t = TracedArray(self, node.id, node.aval)
                t._src = ("const", x)
                self.const_tas[id(x)] = t
                self._const_keep = getattr(self, "_const_keep", []) + [
                    (x, node.id, user_frame_info())]
            return t
        if isinstance(x, (list, tuple)):
            if any(isinstance(v, TracedArray) for v in _flat(x)):
                from .npapi import stack_nested
                return stack_nested(self, x)
            arr = np.asarray(x)
            if arr.dtype == object:
                raise UnsupportedArgument(f"cannot use {type(x).__name__} {x!r} as an array")
            # a fresh array per trace: keyed by value (small ones), so that a segment
            # holding a list literal is the same segment on every call
            ck = ("v", arr.dtype.str, arr.shape, arr.tobytes()) if arr.nbytes <= 4096 \
                else id(arr)
            node = self._add("const", [], {}, AVal(arr.shape, arr.dtype), const=ck)
            self.graph.consts[node.id] = arr
            return TracedArray(self, node.id, node.aval)
        raise UnsupportedArgument(f"cannot trace an operand of type {type(x).__name__}")

    # -- ops --------------------------------------------------------------------
    def op(self, name: str, inputs, scalar: bool = False, **attrs) -> "TracedArray":
        return self.op_attrs(name, inputs, scalar, attrs)

    def op_attrs(self, name, inputs, scalar, attrs, frozen=None) -> "TracedArray":
        """``op`` with attrs as a dict (not copied: the node gets its own), optionally
        ``frozen`` already (as ``freeze_attrs`` makes them; no Sym inside)."""
        ts = [self.lift(x) for x in inputs]
        aval, frozen = infer_cached(name, [t._aval for t in ts], attrs, frozen)
        node = self._add(name, [t._nid for t in ts], attrs, aval,
                         scalar and len(aval.shape) == 0, frozen)
        return TracedArray(self, node.id, aval, scalar=node.scalar)

    def view_node(self, nid: int, name: str, attrs: dict, scalar=False) -> int:
        """The node of view ``name(attrs)`` of node ``nid``: after a graph break, a
        view of a segment input is an input itself (concrete.py), else a view op."""
        if self.breaks:
            from .concrete import view_input
            v = view_input(self, nid, name, attrs, scalar)
            if v is not None:
                return v
        aval, frozen = infer_cached(name, [self.graph.nodes[nid].aval], attrs)
        return self._add(name, [nid], attrs, aval, scalar and len(aval.shape) == 0,
                         frozen).id

    # -- graph breaks -------------------------------------------------------------
    def graph_break(self, reason: str):
        where = user_frame_info()
        if self.fullgraph:
            raise GraphBreakError(f"graph break in {self.fn_name}: {reason}\n  at {where}\n"
                                  "(fullgraph=True; remove it to let numaccel split the "
                                  "graph here, or rewrite this line without it)")
        from ..config import log
        log("graph_breaks", f"{self.fn_name}: {reason} at {where}")
        self.breaks.append((reason, where))

    def concrete(self, ts, reason: str, user=True):
        """Concrete values of traced arrays ``ts`` (runs the pending segment), for user
        code: no later segment writes into them. ``user=False``: for numaccel's own use
        (a captured loop's variables, traced again after it), which leaves the trace's
        own arrays its own: a later segment may still write into them in place."""
        self.graph_break(reason)
        values = self.materialize(ts)
        if user:
            for v in values:
                if isinstance(v, np.ndarray):
                    self.seen[id(v)] = v
        return values

    def donatable(self) -> frozenset:
        """Indices of the pending segment's inputs it may overwrite: arrays an earlier
        segment of this trace made, that own their memory, share none with another input
        and that user code never got (so not the caller's arguments or constants)."""
        vals = self.input_values
        out = []
        for i, v in enumerate(vals):
            if self.own_array(v) and not any(
                    j != i and isinstance(w, np.ndarray) and np.may_share_memory(v, w)
                    for j, w in enumerate(vals)):
                out.append(i)
        return frozenset(out)

    def own_array(self, v) -> bool:
        """``v`` is an array an earlier segment of this trace made, that owns its memory
        and that user code never got: the trace may write into it in place."""
        return type(v) is np.ndarray and owns(v) and self.made.get(id(v)) is v \
            and self.seen.get(id(v)) is not v

    def materialize(self, ts=()):
        roots = [t for t in list(self.live) if t._st is self and t._base is None]
        for t in ts:  # the wanted ones may be views: their node must be current
            t._nid
        wanted = [t for t in ts if t._base is not None]
        wanted_ids = {id(t) for t in wanted}   # identity: `in` would call TracedArray.__eq__
        nodes = sorted({t._node for t in roots + wanted})
        g = self.graph
        g.outputs, writes = nodes, None
        if self.breaks:
            from .concrete import apply_writes, defer_writes
            g.outputs, writes = defer_writes(self, g, nodes)
        donate = self.donatable() if any(n.op == "scatter_view" for n in g.nodes) \
            else frozenset()
        with self.suspended():
            values = self.run_segment(g, self.input_values, self.segment_key(), donate)
            valmap = dict(zip(g.outputs, values)) if writes is None else \
                apply_writes(self, writes, g.outputs, values)
        # made: arrays the segment computed (not an input or constant passed through,
        # which may be the caller's: only those stay in ``made`` that already were)
        passed = {id(v) for v in self.input_values} | {id(c) for c in g.consts.values()}
        for v in values:
            if type(v) is np.ndarray and id(v) not in passed:
                self.made[id(v)] = v
        self.segments.append(g)
        result = [valmap[t._node] for t in ts]
        self.graph = Graph()
        self.sigs = []
        self.input_values = []
        self.mask_counts = {}
        self.peeked = {}
        remap = {}
        for nid in nodes:
            v = valmap[nid]
            node = self._add("input", [], {"index": len(self.input_values)}, aval_of(v),
                             g.nodes[nid].scalar)
            self.input_values.append(v)
            remap[nid] = node.id
        for t in list(self.live):
            if t._st is not self:
                continue
            if t._base is None or id(t) in wanted_ids:
                t._node = remap[t._node]
                t._aval = self.graph.nodes[t._node].aval
            if t._base is not None:
                t._ver = t._base._version if id(t) in wanted_ids else -1
        for t in roots:
            t._aval = self.graph.nodes[t._node].aval
        return result

    def fresh_consts(self) -> list:
        """Source lines of array constants made during the call by code the tracer cannot
        see (untraced.fresh_consts)."""
        from .untraced import fresh_consts
        return fresh_consts(self)

    def peek(self, t):
        """The value ``t`` has in this call, without cutting the graph (for hints).

        Values of nodes live arrays still refer to are kept between peeks of one graph:
        a loop that peeks a mask per iteration (``x[x > 0]``) would otherwise recompute
        the whole history of the loop each time (quadratic in the iterations)."""
        from ..interp import evaluate
        nid = t._nid
        with self.suspended():
            known = self.peeked
            value = evaluate(self.graph, nid, self.input_values, {}, known)
        # the rest can be recomputed from these: memory stays what the program holds
        keep = {a._node for a in list(self.live) if a._st is self} | {nid}
        for i in [i for i in known if i not in keep]:
            del known[i]
        return value

    def specialize(self, t):
        """Value of a Python-scalar traced value; guards the arguments it comes from."""
        value = self.peek(t)
        seen, stack = set(), [t._nid]
        while stack:
            n = self.graph.nodes[stack.pop()]
            if n.id in seen:
                continue
            seen.add(n.id)
            if n.op == "input":
                k = n.attrs["index"]
                if k not in dict((i, v) for i, v, _ in self.specialized):
                    self.specialized.append((k, self.input_values[k], user_frame_info()))
            stack.extend(n.inputs)
        return value

    def mask_count(self, mask):
        """The (data-dependent) number of True values of a boolean index."""
        nid = mask._nid
        if nid not in self.mask_counts:
            if self.segmented and self.graph.nodes[nid].op != "input":
                # peek would compute the mask's whole dependency cone a second time, in
                # NumPy, on every call; cutting the segment here computes it once (the
                # mask becomes an input of the next segment: a new node id)
                value = self.materialize([mask])[0]
                nid = mask._nid
            else:
                value = self.peek(mask)
            self.mask_counts[nid] = self.new_unbacked(int(np.count_nonzero(value)))
        return self.mask_counts[nid]

    def new_unbacked(self, hint_value: int) -> Sym:
        name = f"u{self.n_unbacked}"
        self.n_unbacked += 1
        return Sym.symbol(name, hint_value)


def _flat(x):
    if isinstance(x, (list, tuple)):
        for v in x:
            yield from _flat(v)
    else:
        yield x


# ------------------------------------------------------------------------------ traced array

def _binop(ufunc, pyop, reflected=False):
    def method(self, other):
        if not isinstance(other, (TracedArray, np.ndarray, np.generic, bool, int, float,
                                  complex, list, tuple)):
            return NotImplemented
        if self._aval.weak and (type(other) in PY_KIND or
                                (isinstance(other, TracedArray) and other._aval.weak)):
            args = (other, self) if reflected else (self, other)
            return self._st.op("pyop", args, op=pyop)
        # what ufunc(self, other) does (NumPy finds this array's __array_ufunc__ first),
        # without NumPy's override lookup
        return _api().trace_ufunc(self._st, ufunc, "__call__",
                                  (other, self) if reflected else (self, other), {})
    return method


def _inplace(ufunc):
    def method(self, other):
        if self._aval.weak:
            # Python scalars are immutable: `dt *= 2` rebinds, like Python
            return _binop(ufunc, _PYNAME[ufunc.__name__])(self, other)
        return ufunc(self, other, out=(self,))
    return method


_PYNAME = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "truediv",
           "floor_divide": "floordiv", "remainder": "mod", "power": "pow",
           "bitwise_and": "and_", "bitwise_or": "or_", "bitwise_xor": "xor",
           "left_shift": "lshift", "right_shift": "rshift", "true_divide": "truediv"}


class TracedArray:
    """Stands for an ndarray (or NumPy/Python scalar) while a function is traced."""

    __array_priority__ = 1e6
    __slots__ = ("_st", "_node", "_aval", "_scalar", "_base", "_chain", "_ver", "_version",
                 "_mutated", "_src", "__weakref__")

    def __init__(self, st: TraceState, node: int, aval: AVal, scalar: bool = False):
        self._st = st
        self._node = node
        self._aval = aval
        self._scalar = scalar
        self._base = None      # root array this is a view of
        self._chain = ()       # view ops (name, attrs) from the root
        self._ver = 0          # root version this view's node was derived at
        self._version = 0      # bumped on every write to a root
        self._mutated = False
        self._src = None       # ("input", k) or ("const", ndarray): written back after the call
        st.live.add(self)

    __hash__ = object.__hash__

    # -- node, refreshed for views ------------------------------------------------
    @property
    def _nid(self) -> int:
        b = self._base
        if b is not None and self._ver != b._version:
            st = self._st
            cur = b
            nid = b._nid
            for name, attrs in self._chain:
                nid = st.view_node(nid, name, attrs)
            self._node = nid
            self._aval = st.graph.nodes[nid].aval
            self._ver = cur._version
        return self._node

    def _view(self, name: str, attrs: dict, scalar=False) -> "TracedArray":
        if self._aval.weak:
            return self._st.op(name, [self], scalar=scalar, **attrs)
        st = self._st
        nid = st.view_node(self._nid, name, attrs, scalar)
        node = st.graph.nodes[nid]
        out = TracedArray(st, nid, node.aval, scalar=node.scalar)
        root = self._base if self._base is not None else self
        out._base = root
        out._chain = self._chain + ((name, attrs),)
        out._ver = root._version
        return out

    def _assign(self, new: "TracedArray") -> None:
        """Give this array (a root or a view) the value ``new`` (same shape and dtype)."""
        st = self._st
        new = st.lift(new)
        if self._base is None:
            self._node = new._nid
            self._aval = new._aval
            self._version += 1
            self._mutated = True
            return
        root = self._base
        out = st.op("scatter_view", [root, new], chain=self._chain)
        root._node = out._nid
        root._aval = out._aval
        root._version += 1
        root._mutated = True
        self._node = new._nid
        self._ver = root._version

    # -- attributes -------------------------------------------------------------
    @property
    def shape(self):
        return tuple(self._aval.shape)

    @property
    def dtype(self):
        return self._aval.dtype

    @property
    def ndim(self):
        return len(self._aval.shape)

    @property
    def size(self):
        return prod(self._aval.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def T(self):
        return self.transpose()

    @property
    def mT(self):
        return np.swapaxes(self, -1, -2)

    @property
    def real(self):
        return np.real(self)

    @property
    def imag(self):
        return np.imag(self)

    @property
    def flat(self):
        return self.reshape(-1)

    def __len__(self):
        if not self._aval.shape:
            raise TypeError("len() of unsized object")
        return int(self._aval.shape[0])

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __repr__(self):
        return f"TracedArray({self._aval})"

    # -- conversions to Python demand a concrete value: graph break -----------------
    def _concrete(self, why):
        if self._aval.weak:
            # Python scalars come from the arguments: specialize on their value (a guard),
            # no graph break needed
            return self._st.specialize(self)
        return self._st.concrete([self], why)[0]

    def __bool__(self):
        return bool(self._concrete(f"bool() of a traced value ({self._aval})"))

    def __float__(self):
        return float(self._concrete("float() of a traced value"))

    def __int__(self):
        return int(self._concrete("int() of a traced value"))

    def __index__(self):
        v = self._concrete("a traced value used as an index or size")
        return int(v.__index__() if hasattr(v, "__index__") else v)

    def __complex__(self):
        return complex(self._concrete("complex() of a traced value"))

    def item(self, *args):
        return np.asarray(self._concrete("item() of a traced value")).item(*args)

    def tolist(self):
        return np.asarray(self._concrete("tolist() of a traced value")).tolist()

    def __array__(self, dtype=None, copy=None):
        v = np.asarray(self._concrete("conversion to numpy.ndarray (np.asarray or a "
                                      "non-NumPy function)"))
        return v.astype(dtype) if dtype is not None else v

    # -- the NumPy protocols -------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _api().trace_ufunc(self._st, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _api().trace_function(self._st, func, args, kwargs)

    # -- indexing -------------------------------------------------------------------
    def __getitem__(self, index):
        return _api().getitem(self, index)

    def __setitem__(self, index, value):
        _api().setitem(self, index, value)

    # -- operators ------------------------------------------------------------------
    __add__ = _binop(np.add, "add")
    __radd__ = _binop(np.add, "add", True)
    __sub__ = _binop(np.subtract, "sub")
    __rsub__ = _binop(np.subtract, "sub", True)
    __mul__ = _binop(np.multiply, "mul")
    __rmul__ = _binop(np.multiply, "mul", True)
    __truediv__ = _binop(np.true_divide, "truediv")
    __rtruediv__ = _binop(np.true_divide, "truediv", True)
    __floordiv__ = _binop(np.floor_divide, "floordiv")
    __rfloordiv__ = _binop(np.floor_divide, "floordiv", True)
    __mod__ = _binop(np.remainder, "mod")
    __rmod__ = _binop(np.remainder, "mod", True)
    __pow__ = _binop(np.power, "pow")
    __rpow__ = _binop(np.power, "pow", True)
    __and__ = _binop(np.bitwise_and, "and_")
    __rand__ = _binop(np.bitwise_and, "and_", True)
    __or__ = _binop(np.bitwise_or, "or_")
    __ror__ = _binop(np.bitwise_or, "or_", True)
    __xor__ = _binop(np.bitwise_xor, "xor")
    __rxor__ = _binop(np.bitwise_xor, "xor", True)
    __lshift__ = _binop(np.left_shift, "lshift")
    __rlshift__ = _binop(np.left_shift, "lshift", True)
    __rshift__ = _binop(np.right_shift, "rshift")
    __rrshift__ = _binop(np.right_shift, "rshift", True)
    __lt__ = _binop(np.less, "lt")
    __le__ = _binop(np.less_equal, "le")
    __gt__ = _binop(np.greater, "gt")
    __ge__ = _binop(np.greater_equal, "ge")
    __eq__ = _binop(np.equal, "eq")
    __ne__ = _binop(np.not_equal, "ne")
    __iadd__ = _inplace(np.add)
    __isub__ = _inplace(np.subtract)
    __imul__ = _inplace(np.multiply)
    __itruediv__ = _inplace(np.true_divide)
    __ifloordiv__ = _inplace(np.floor_divide)
    __imod__ = _inplace(np.remainder)
    __ipow__ = _inplace(np.power)
    __iand__ = _inplace(np.bitwise_and)
    __ior__ = _inplace(np.bitwise_or)
    __ixor__ = _inplace(np.bitwise_xor)
    __ilshift__ = _inplace(np.left_shift)
    __irshift__ = _inplace(np.right_shift)

    def __matmul__(self, other):
        return np.matmul(self, other)

    def __rmatmul__(self, other):
        return np.matmul(other, self)

    def __imatmul__(self, other):
        return np.matmul(self, other, out=(self,))

    def __neg__(self):
        if self._aval.weak:
            return self._st.op("pyop", [self], op="neg")
        return np.negative(self)

    def __pos__(self):
        return self if self._aval.weak else np.positive(self)

    def __abs__(self):
        if self._aval.weak:
            return self._st.op("pyop", [self], op="abs")
        return np.absolute(self)

    def __invert__(self):
        if self._aval.weak:
            return self._st.op("pyop", [self], op="invert")
        return np.invert(self)

    def __round__(self, ndigits=None):
        return float(self).__round__(ndigits) if ndigits is None else np.round(self, ndigits)

    def __getattr__(self, name):
        methods = _api().METHODS
        if name in methods:
            fn = methods[name]
            return lambda *a, **k: fn(self, *a, **k)
        raise AttributeError(f"'TracedArray' (standing for numpy.ndarray) has no attribute "
                             f"{name!r}, or numaccel does not trace it yet")
