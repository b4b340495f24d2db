"""Running a rewritten ``for`` loop (see loop_rewrite.py): plain Python, or captured.

A loop that walks an array in blocks and takes a Python branch on each block's values::

    for start in range(0, n, block):
        seg = x[:, start:start + block]
        if np.mean(seg * seg) > threshold:
            ...
        out[:, start:start + block] = y

breaks the graph at every such ``if``, so all of it is traced again, block by block, on
every call: ~25 us of Python per NumPy call, more than NumPy takes for a block of a few
thousand elements. Once its first iteration has run as written and the trace has broken,
the rest of the loop is captured, as a ``while`` loop is (loop_capture.py): the body is
traced ONCE, with the counter as a ``LoopIndex`` (``a * i + b`` of the counter ``i``) and
its ``if``s on array values taking both branches and selecting their results
(``loop_capture.run_if``), and that step runs once per iteration, compiled once it
repeats. Slices at the counter are not ops of the step:

* a read ``x[:, start:start + block]`` of a loop variable is taken on the concrete array
  before each iteration and passed to the step as an input (a NumPy view);
* a write ``out[:, start:start + block] = y`` into a loop variable leaves the step: the
  step computes ``y``, and the runner writes it in place after each iteration.

An iteration whose slices have other shapes than the traced step's (the shorter last
block) ends the capture: it and the rest of the loop run as written. Capture is refused,
and the loop runs as written, where the step would not repeat exactly (loop_capture.py),
where the counter is used other than in ``+ - *`` with integers, slice bounds, indices
and arithmetic with arrays (a comparison, ``int()``, ``range()``: a decision on it), and
where the body reads an array after writing into it at the counter.
"""
from __future__ import annotations

import numpy as np

from ..config import config
from ..ir import AVal
from .loop_capture import HELPERS as CAPTURE_HELPERS
from .loop_capture import (NoCapture, Stepper, _MAX_FAILURES, _back, _inputs, _interpret,
                           _mutated, _plan, _refuse, _settled, _like)
from .tracer import TraceState, TracedArray, current
from ..lower.passes import VIEW_OPS


class LoopIndex:
    """The counter of a captured ``for`` loop while its body is traced: ``a * i + b``
    (``hint``: its value in the traced iteration; ``t``: the traced counter ``i``)."""

    __slots__ = ("a", "b", "hint", "t")
    __array_ufunc__ = None      # NumPy's operators defer to ours

    def __init__(self, a, b, hint, t):
        self.a, self.b, self.hint, self.t = a, b, hint, t

    def at(self, i: int) -> int:
        return self.a * i + self.b

    def traced(self) -> TracedArray:
        """The value as a traced Python int (for arithmetic with arrays)."""
        v = self.t
        if self.a != 1:
            v = v * self.a
        return v + self.b if self.b else v

    def _affine(self, o, sa, so):
        """``sa * self + so * o`` where that stays affine, else None."""
        if type(o) is int:
            return LoopIndex(sa * self.a, sa * self.b + so * o, sa * self.hint + so * o,
                             self.t)
        if isinstance(o, LoopIndex) and o.t is self.t:
            return LoopIndex(sa * self.a + so * o.a, sa * self.b + so * o.b,
                             sa * self.hint + so * o.hint, self.t)
        return None

    def __add__(self, o):
        r = self._affine(o, 1, 1)
        return self.traced() + _traced(o) if r is None else r

    __radd__ = __add__

    def __sub__(self, o):
        r = self._affine(o, 1, -1)
        return self.traced() - _traced(o) if r is None else r

    def __rsub__(self, o):
        r = self._affine(o, -1, 1)
        return _traced(o) - self.traced() if r is None else r

    def __mul__(self, o):
        if type(o) is int:
            return LoopIndex(self.a * o, self.b * o, self.hint * o, self.t)
        return self.traced() * _traced(o)

    __rmul__ = __mul__

    def __neg__(self):
        return LoopIndex(-self.a, -self.b, -self.hint, self.t)

    def __pos__(self):
        return self

    def __truediv__(self, o): return self.traced() / _traced(o)
    def __rtruediv__(self, o): return _traced(o) / self.traced()
    def __floordiv__(self, o): return self.traced() // _traced(o)
    def __rfloordiv__(self, o): return _traced(o) // self.traced()
    def __mod__(self, o): return self.traced() % _traced(o)
    def __rmod__(self, o): return _traced(o) % self.traced()
    def __pow__(self, o): return self.traced() ** _traced(o)
    def __rpow__(self, o): return _traced(o) ** self.traced()

    def _decide(self, *_):
        raise NoCapture("the body takes a decision on the loop counter (a comparison, "
                        "int(), range(), a dict key...)")

    __index__ = __int__ = __float__ = __bool__ = __hash__ = _decide
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _decide
    __format__ = __str__ = _decide

    def __repr__(self):
        return f"<loop counter {self.a}*i + {self.b}>"


def _traced(o):
    return o.traced() if isinstance(o, LoopIndex) else o


def _has_counter(items) -> bool:
    for it in items:
        if isinstance(it, LoopIndex):
            return True
        if type(it) is slice and (isinstance(it.start, LoopIndex) or
                                  isinstance(it.stop, LoopIndex) or
                                  isinstance(it.step, LoopIndex)):
            return True
    return False


def _indexer(template):
    """``i -> the index template at counter i``, as one compiled lambda (it runs once
    per slice per iteration: a generic walk of the template cost ~9 us). NoCapture for
    items other than ints, slices, None and ``...`` (index arrays)."""
    def bound(v):
        if isinstance(v, LoopIndex):
            return f"{v.a} * i + {v.b}"
        if v is None or type(v) is int:
            return repr(v)
        raise NoCapture(f"an index item {v!r} beside the loop counter")

    parts = []
    for it in template:
        if it is None or it is Ellipsis or type(it) is int or isinstance(it, LoopIndex):
            parts.append("..." if it is Ellipsis else bound(it))
        elif type(it) is slice:
            parts.append(f"slice({bound(it.start)}, {bound(it.stop)}, {bound(it.step)})")
        else:
            raise NoCapture(f"an index item {it!r} beside the loop counter")
    return eval("lambda i: (" + "".join(p + ", " for p in parts) + ")")  # noqa: S307


class DynIndex:
    """Slices at the counter in a captured body (``TraceState.dyn``): reads become
    inputs, writes leave the step (see the module docstring)."""

    def __init__(self, st, hint):
        self.st = st
        self.hint = hint
        self.reads = []     # (source input index, indexer, shape, input node id)
        # (loop variable, its input index, indexer, shape, value node id, node count)
        self.writes = []

    def _source(self, a, what):
        st = self.st
        node = st.graph.nodes[a._nid]
        if a._base is not None or node.op != "input" or a._mutated:
            raise NoCapture(f"the body {what} at the loop counter an array it computes "
                            "or changes (only the loop's own arrays, as they are)")
        return node.attrs["index"]

    def getitem(self, a, index):
        items = index if type(index) is tuple else (index,)
        if not _has_counter(items):
            return None
        st = self.st
        k = self._source(a, "slices")
        if any(w[1] == k for w in self.writes):
            raise NoCapture("the body reads an array after writing into it at the counter")
        if any(type(it) is slice and isinstance(it.step, LoopIndex) for it in items):
            raise NoCapture("a slice step depends on the loop counter")
        at = _indexer(items)
        view = st.input_values[k][at(self.hint)]
        scalar = not isinstance(view, np.ndarray)
        aval = AVal(np.shape(view), np.asarray(view).dtype)
        t = st.input(view, aval)
        t._scalar = scalar
        self.reads.append((k, at, np.shape(view), t._nid))
        return t

    def setitem(self, a, index, value):
        items = index if type(index) is tuple else (index,)
        if not _has_counter(items):
            return False
        st = self.st
        k = self._source(a, "writes")
        if not (a._src and a._src[0] == "input"):
            raise NoCapture("the body writes at the loop counter into an array that is not "
                            "a loop variable")
        at = _indexer(items)
        target = st.input_values[k]
        if not isinstance(target, np.ndarray):
            raise NoCapture("the body writes at the loop counter into a scalar")
        view_shape = target[at(self.hint)].shape
        v = st.lift(value)
        if v.dtype != a.dtype or v._aval.weak:
            v = st.op("astype", [v], dtype=a.dtype)
        if np.broadcast_shapes(tuple(map(int, v.shape)), view_shape) != view_shape:
            raise ValueError(f"could not broadcast input array from shape {v.shape} into "
                             f"shape {view_shape}")
        self.writes.append((a._src[1], k, at, view_shape, v._nid, len(st.graph.nodes)))
        return True

    def check_order(self):
        """A node made after a write at the counter must not read the written array
        (nor a view of it): the write happens after the step."""
        nodes = self.st.graph.nodes
        for _, k, _, _, _, count in self.writes:
            alias = {n.id for n in nodes if n.op == "input" and n.attrs["index"] == k}
            alias |= {nid for src, _, _, nid in self.reads if src == k}
            for n in nodes:
                if n.id >= count and any(j in alias for j in n.inputs):
                    raise NoCapture("the body reads an array after writing into it at the "
                                    "loop counter")
                if n.op in VIEW_OPS and n.inputs and n.inputs[0] in alias:
                    alias.add(n.id)


def run_for(site, iterable, body, values):
    """The loop over ``iterable`` with variables ``values`` (``UNBOUND`` where unset);
    returns the new values of the variables it assigns."""
    vals = list(values)
    st = current()
    if type(iterable) is not range:
        for x in iterable:
            _step(site, body, vals, x)
        return tuple(vals[k] for k in site.written)
    rng, k = iterable, 0
    while k < len(rng):
        if k == 1 and len(rng) > 2 and st is not None and st.active and st.breaks and \
                not st.fullgraph and config.capture_loops and site.failures < _MAX_FAILURES:
            done = _captured(st, site, rng, body, vals)
            if done is not None:
                vals, k = done
                continue
        _step(site, body, vals, rng[k])
        k += 1
    return tuple(vals[k] for k in site.written)


def _step(site, body, vals, x):
    vals[site.target] = x
    new = body(*vals)
    for i, k in enumerate(site.written):
        vals[k] = new[i]


def _captured(st, site, rng, body, vals):
    """Runs the loop from its second iteration compiled, as far as the step applies:
    ``(variables, index of the next iteration to run as written)``; None where the
    step cannot be traced (that iteration runs as written)."""
    traced = [v for v in vals if isinstance(v, TracedArray)]
    if any(t._st is not st for t in traced):
        return None
    tk = site.target
    conc = st.concrete(traced, f"for loop at {site.where}: its variables go to one "
                               "compiled step per iteration", user=False) if traced else []
    cmap = {id(t): v for t, v in zip(traced, conc)}
    cvals = [_settled(v, cmap[id(v)]) if isinstance(v, TracedArray) else v for v in vals]
    cvals[tk] = rng[1]
    sub = TraceState(fullgraph=False, run_segment=_interpret, fn_name=st.fn_name)
    sub.loop_capture = True
    dyn = sub.dyn = DynIndex(sub, rng[1])
    try:
        with sub:
            tv, in_idx = _inputs(sub, site, cvals, const_ints=True)
            counter = tv[tk]
            tv[tk] = LoopIndex(1, 0, rng[1], counter)
            new = body(*tv)
            after = list(tv)
            for i, k in enumerate(site.written):
                after[k] = new[i]
            if after[tk] is not tv[tk]:
                raise NoCapture("the body assigns the loop's counter")
            after[tk] = tv[tk] = counter
            dyn.check_order()
            mutated = _mutated(sub)
            for k, _, _, _ in dyn.reads:
                src = sub.input_values[k]
                if any(src is cvals[j] for j in mutated):
                    raise NoCapture("the body slices at the counter an array it also "
                                    "changes")
            writes = [w[4] for w in dyn.writes]
            graph, key, slots = _plan(sub, site, tv, after, None, cvals, mutated,
                                      skip=(tk,), extra=writes)
    except Exception as exc:  # noqa: BLE001  (the iteration runs as written: it raises
        # the program's own errors, if any)
        _refuse(st, site, exc.args[0] if isinstance(exc, NoCapture) and exc.args else
                f"{type(exc).__name__}: {exc}", "for")
        return None
    site.captured += 1
    out_of = {nid: j for j, nid in enumerate(graph.outputs)}
    writes = [(var, at, shape, out_of[nid]) for var, _, at, shape, nid, _ in dyn.writes]
    reads = [(k, at, shape) for k, at, shape, _ in dyn.reads]
    written_vars = {var for var, _, _, _ in writes}
    cur = list(cvals)
    run = Stepper(st, graph, key)
    k = 1
    # the step selects between branches that both ran: the one not taken may divide
    # by zero (compiled kernels never warn; the interpreter must not either)
    with st.suspended(), np.errstate(all="ignore"):
        while k < len(rng):
            i = rng[k]
            cur[tk] = i
            ins = [cur[j] for j in in_idx]
            if not _prepare(ins, reads, writes, cur, i):
                break
            outs = run(ins)
            for var, at, _, j in writes:
                cur[var][at(i)] = outs[j]
            for var, j in slots:
                cur[var] = _like(cvals[var], outs[j])
            k += 1
    cur[tk] = rng[k - 1]
    mutated = dict(mutated)
    mutated.update({v: None for v in written_vars})
    return _back(st, vals, cvals, cur, mutated, dict(slots)), k


def _prepare(ins, reads, writes, cur, i) -> bool:
    """Append iteration ``i``'s slices to the step's inputs ``ins``; False where one has
    another shape than in the traced step (the loop goes on as written)."""
    for k, at, shape in reads:
        v = ins[k][at(i)]
        if np.shape(v) != shape:
            return False
        ins.append(v)
    for var, at, shape, _ in writes:
        if cur[var][at(i)].shape != shape:
            return False
    return True


HELPERS = dict(CAPTURE_HELPERS, _na_for_=run_for)
