"""Running a rewritten ``while`` loop (see loop_rewrite.py): plain Python, or captured.

Captured: after one iteration has run as written (its values settle into their types:
``err = np.inf`` becomes a float64 array scalar), the loop's variables are made
concrete, the body and then the test are traced ONCE into one graph, and that graph runs
once per iteration through the function's segment cache (compiled once it repeats, as
any segment is) until the test is false. Per iteration that costs one compiled call
instead of re-tracing every NumPy call of the body: jacobi's 128x128 sweep went from
~450 us re-traced to ~50 us (NumPy ~80 us).

Capture is refused, and the loop runs as written, where the traced body would not
repeat exactly: a graph break or a value specialized inside it, an array the body gets
from code the tracer cannot see (np.random), a variable whose type, shape or dtype
changes from one iteration to the next, in-place updates of arrays that share memory, a
test that is not one truth value. The reason is logged (``NUMACCEL_LOGS=graph_breaks``)
and kept on the loop's ``Site``.
"""
from __future__ import annotations

import types

import numpy as np

from ..config import config, log
from ..ir import AVal
from .tracer import PY_KIND, TraceState, TracedArray, current


class _Unbound:
    __slots__ = ()

    def __repr__(self):
        return "<unbound>"


UNBOUND = _Unbound()
_MAX_FAILURES = 3
_PY_TYPE = {kind: t for t, kind in PY_KIND.items()}     # "int" -> int


class NoCapture(Exception):
    pass


def _capturing():
    st = current()
    return st is not None and getattr(st, "loop_capture", False)


def _truth(v):
    """A traced 0-d bool: the truth of ``v`` as Python's ``while`` takes it."""
    st = current()
    if not isinstance(v, TracedArray):
        return st.lift(bool(v))
    if any(not isinstance(d, int) for d in v.shape) or int(np.prod(v.shape)) != 1:
        raise NoCapture(f"the loop test is an array of shape {v.shape}, not one truth value")
    if v.dtype != np.bool_ or v._aval.weak:
        v = st.op("astype", [v], dtype=np.dtype(bool))
    return v.reshape(()) if v.shape else v


def loop_and(*thunks):
    return _bool_op(thunks, np.logical_and, False)


def loop_or(*thunks):
    return _bool_op(thunks, np.logical_or, True)


def _bool_op(thunks, combine, stop):
    """``and`` (``stop`` False) / ``or`` (True) of the operands' truths: short-circuit on
    concrete values, one traced boolean when captured."""
    if _capturing():
        out = _truth(thunks[0]())
        for t in thunks[1:]:
            out = combine(out, _truth(t()))
        return out
    for t in thunks:
        if bool(t()) is stop:
            return stop
    return not stop


def loop_not(thunk):
    if _capturing():
        return np.logical_not(_truth(thunk()))
    return not thunk()


def run_while(site, cond, body, values):
    """The loop with variables ``values`` (``UNBOUND`` where unset); returns the new
    values of the variables it assigns."""
    vals = list(values)
    st = current()
    capture = st is not None and not st.fullgraph and config.capture_loops and \
        site.failures < _MAX_FAILURES
    n = 0
    test = cond(*vals)
    while test:
        if n == 1 and capture:
            done = _captured(st, site, cond, body, vals)
            if done is not None:        # ran compiled to the end, or ran this iteration
                vals, test = done
                n += 1
                continue
        new = body(*vals)
        for i, k in enumerate(site.written):
            vals[k] = new[i]
        n += 1
        test = cond(*vals)
    return tuple(vals[k] for k in site.written)


def _refuse(st, site, why, kind="while"):
    site.failures += 1
    site.reason = why
    log("graph_breaks", f"{st.fn_name}: {kind} loop at {site.where} runs as written "
                        f"(not captured: {why})")


def _captured(st, site, cond, body, vals):
    """Runs the rest of the loop compiled: ``(variables after it, False)``. Where the
    traced iteration cannot be replayed, that iteration's own results instead
    (``(variables, test)``: its body ran once, as the loop would have run it), and None
    where tracing it failed before the end (the loop runs that iteration as written)."""
    traced = [v for v in vals if isinstance(v, TracedArray)]
    if not traced or any(t._st is not st for t in traced):
        return None
    conc = st.concrete(traced, f"while loop at {site.where}: its variables go to one "
                               "compiled step per iteration", user=False)
    cmap = {id(t): v for t, v in zip(traced, conc)}
    cvals = [_settled(v, cmap[id(v)]) if isinstance(v, TracedArray) else v for v in vals]
    # the step's trace runs what it cannot trace (its breaks) on the interpreter, so
    # that it is one real iteration whether or not it can be replayed
    sub = TraceState(fullgraph=False, run_segment=_interpret, fn_name=st.fn_name)
    sub.loop_capture = True
    try:
        with sub:
            tv, in_idx = _inputs(sub, site, cvals)
            new = body(*tv)
            after = list(tv)
            for i, k in enumerate(site.written):
                after[k] = new[i]
            test = cond(*after)
            mutated = _mutated(sub)
            plan = None
            try:
                plan = _plan(sub, site, tv, after, test, cvals, mutated)
            except NoCapture as exc:
                _refuse(st, site, str(exc))
                ts = [v for v in after + [test] if isinstance(v, TracedArray)]
                got = dict(zip(map(id, ts), sub.materialize(ts) if ts else []))
                done = [_settled(v, got[id(v)]) if isinstance(v, TracedArray) else v
                        for v in after]
                test = bool(got[id(test)]) if isinstance(test, TracedArray) else test
    except Exception as exc:  # noqa: BLE001  (the loop runs this iteration as written:
        # it raises the program's own errors, if any)
        _refuse(st, site, exc.args[0] if isinstance(exc, NoCapture) else
                f"{type(exc).__name__}: {exc}")
        return None
    if plan is None:
        return _back(st, vals, cvals, done, mutated, {}), test
    site.captured += 1
    graph, key, slots = plan
    cur = list(cvals)
    run = Stepper(st, graph, key)
    with st.suspended():
        while True:
            outs = run([cur[k] for k in in_idx])
            for k, j in slots:
                cur[k] = _like(cvals[k], outs[j])
            if not outs[-1]:
                break
    return _back(st, vals, cvals, cur, mutated, dict(slots)), False


class Stepper:
    """Runs a captured step on concrete inputs: through the function's segment cache
    until the runner has it compiled, then the compiled function directly."""

    def __init__(self, st, graph, key):
        self.st, self.graph, self.key = st, graph, key
        self.runner = getattr(st, "runner", None)
        self.fast = None

    def __call__(self, ins):
        if self.fast is not None:
            try:
                return self.fast(ins, {})
            except Exception:  # noqa: BLE001  (the runner's path decides)
                self.fast = None
        outs = self.st.run_segment(self.graph, ins, self.key)
        if self.runner is not None:
            self.fast = self.runner.ready(self.key, ins)
        return outs


def _interpret(g, values, key, donate=frozenset()):
    from ..backends import get_backend
    return get_backend("numpy").compile(g.prune())(values, {})


def _back(st, vals, cvals, cur, mutated, slots):
    """The loop's variables in the enclosing trace, from their concrete values ``cur``
    (``slots``: variable -> output, where variables bound to one output stay one)."""
    result, made = list(vals), {}
    for k in range(len(vals)):
        v = cur[k]
        if k in mutated:
            # updated in place: the variable keeps its array, with the new contents
            orig = vals[k]
            if isinstance(orig, TracedArray):
                orig._assign(st.input(v, AVal(v.shape, v.dtype)))
            else:
                np.copyto(orig, v)
        elif v is not cvals[k] or k in slots:
            if isinstance(v, TracedArray) or v is UNBOUND:
                result[k] = v
                continue
            j = slots.get(k, ("id", id(v)))
            if j not in made:
                made[j] = _to_trace(st, v, cvals[k])
            result[k] = made[j]
    return result


def _settled(t, v):
    """The concrete value of traced ``t``, of the kind the program sees: a Python scalar
    for a weak one, an array scalar for a NumPy scalar."""
    if t._aval.weak:
        return _PY_TYPE[t._aval.weak](np.asarray(v).item())
    if t._scalar and isinstance(v, np.ndarray) and v.ndim == 0:
        return v[()]
    return v


def _like(before, out):
    """An iteration's output in the type the variable had (the segment runner may give a
    0-d array for a scalar)."""
    if type(before) in PY_KIND:
        return type(before)(np.asarray(out).item())
    if isinstance(before, np.generic):
        return out[()] if isinstance(out, np.ndarray) else out
    return out


def _to_trace(st, v, before):
    if type(before) in PY_KIND:
        return v
    if isinstance(v, np.generic):
        t = st.input(v, AVal((), v.dtype))
        t._scalar = True
        return t
    return st.input(v, AVal(v.shape, v.dtype))


def _sub_input(sub, v, k):
    if isinstance(v, np.ndarray):
        t = sub.input(v, AVal(v.shape, v.dtype), src=("input", k))
    elif isinstance(v, np.generic):
        t = sub.input(v, AVal((), v.dtype), src=("input", k))
        t._scalar = True
    else:
        t = sub.input(v, AVal((), np.asarray(v).dtype, PY_KIND[type(v)]), src=("input", k))
    return t


def _position(outs, nid):
    # one output per node: variables bound to one array stay one object after the loop
    if nid not in outs:
        outs.append(nid)
    return outs.index(nid)


def _inputs(sub, site, cvals, const_ints=False):
    """The step's values of the loop's variables and the indices of those that are its
    inputs. ``const_ints``: Python ints the loop does not assign are constants of the
    step (a for loop's block size: slice bounds from the counter stay affine)."""
    written = set(site.written)
    tv, in_idx = [], []
    for k, v in enumerate(cvals):
        if const_ints and type(v) is int and k not in written:
            tv.append(v)
        elif isinstance(v, (np.ndarray, np.generic)) or type(v) in PY_KIND:
            tv.append(_sub_input(sub, v, k))
            in_idx.append(k)
        elif k in written and v is not UNBOUND:
            raise NoCapture(f"{site.names[k]!r} is a {type(v).__name__}, not an array or "
                            "a number")
        elif not _immutable(v):
            # the traced body could store a value of its own trace into it (d[k] = v)
            raise NoCapture(f"{site.names[k]!r} is a {type(v).__name__}, which the body "
                            "could change")
        else:
            tv.append(v)         # read only: a constant of the traced step
    return tv, in_idx


_IMMUTABLE = (str, bytes, type(None), np.dtype, type, types.FunctionType,
              types.BuiltinFunctionType, types.ModuleType, np.ufunc, range, slice,
              type(Ellipsis), frozenset)


def _immutable(v) -> bool:
    if v is UNBOUND or isinstance(v, _IMMUTABLE):
        return True
    if type(v) is tuple:
        return all(_immutable(x) for x in v)
    return False


def _mutated(sub):
    """Variables whose array the iteration updated in place."""
    out = {}
    for t in list(sub.live):
        if t._st is sub and t._base is None and t._mutated and t._src is not None:
            out[t._src[1]] = t
    return out


def _plan(sub, site, tv, after, test, cvals, mutated, skip=(), extra=()):
    """(graph "body, then test", its key, (variable, output) pairs) for a step that
    repeats exactly; NoCapture where it would not. ``test`` None: no test (a for loop,
    whose counter ``skip`` holds); ``extra``: more nodes to output (after the
    variables, before the test)."""
    if sub.breaks:
        raise NoCapture(f"the body breaks the graph ({sub.breaks[0][0]})")
    if sub.specialized:
        raise NoCapture("the body takes a concrete value of a loop variable (a Python "
                        "branch, a size or an index from it)")
    if sub.n_unbacked or sub.mask_counts:
        raise NoCapture("a size in the body depends on the data (a boolean mask)")
    if getattr(sub, "impure", None) or getattr(sub, "_const_keep", None) and \
            sub.fresh_consts():
        raise NoCapture("the body uses numbers made by code numaccel cannot trace "
                        "(np.random, a compiled extension): new ones every iteration")
    if test is not None and not isinstance(test, TracedArray):
        raise NoCapture("the loop test does not depend on the loop's arrays")
    outs, slots = [], []
    for k in site.written:
        if k in skip:
            continue
        v = after[k]
        if v is UNBOUND:
            raise NoCapture(f"{site.names[k]!r} is not set on every iteration")
        t = sub.lift(v) if not isinstance(v, TracedArray) else v
        a, b = t._aval, tv[k]._aval if isinstance(tv[k], TracedArray) else None
        if b is None or (tuple(a.shape), a.dtype, a.weak) != (tuple(b.shape), b.dtype, b.weak):
            raise NoCapture(f"{site.names[k]!r} changes from {b} to {a} in one iteration")
        slots.append((k, _position(outs, t._nid)))
    written = set(site.written)
    arrays = [(k, v) for k, v in enumerate(cvals) if isinstance(v, np.ndarray)]
    for k, t in mutated.items():
        if k in written and after[k] is not t:
            raise NoCapture(f"{site.names[k]!r} is updated in place and rebound in one "
                            "iteration")
        if k not in written:
            slots.append((k, _position(outs, t._nid)))
        if any(j != k and np.may_share_memory(cvals[k], w) for j, w in arrays):
            raise NoCapture(f"{site.names[k]!r} is updated in place and shares memory with "
                            "another of the loop's arrays")
    for nid in extra:
        _position(outs, nid)
    if test is not None:
        outs.append(test._nid)
    sub.graph.outputs = outs
    return sub.graph, ("while" if test is not None else "for", site.where,
                       sub.segment_key()), slots


# ------------------------------------------------------------------ if statements in loops

def run_if(test, then, other, values):
    """An ``if`` statement of a rewritten loop's body: ``test`` its value (a traced
    boolean while a captured body is traced), ``then``/``other`` its branches as
    functions of its variables ``values``; returns the new values of those it assigns.
    Plain Python's ``if``, except in a captured body on a traced test: there both
    branches are traced and each variable gets ``np.where(test, then's, other's)``."""
    if not (_capturing() and isinstance(test, TracedArray)):
        return then(*values) if test else other(*values)
    st = current()
    t = _truth(test)
    a = _branch(st, then, values)
    b = _branch(st, other, values)
    return tuple(_select(st, t, x, y) for x, y in zip(a, b))


def _branch(st, fn, values):
    roots = [(t, t._version) for t in list(st.live)
             if t._st is st and t._base is None]
    writes = len(st.dyn.writes) if st.dyn is not None else 0
    out = fn(*values)
    if any(t._version != v for t, v in roots) or \
            (st.dyn is not None and len(st.dyn.writes) != writes):
        raise NoCapture("a branch of an if on array values writes into an array (both "
                        "branches run when the loop is captured)")
    return out


def _select(st, t, x, y):
    """``x`` where the traced truth ``t``, else ``y``: one value of the kind both are."""
    if x is y:
        return x
    if x is UNBOUND or y is UNBOUND:
        raise NoCapture("an if on array values sets a variable in one branch only")
    if not all(isinstance(v, TracedArray) or type(v) in PY_KIND for v in (x, y)):
        raise NoCapture(f"an if on array values sets a variable to a "
                        f"{type(x).__name__} or a {type(y).__name__}")
    tx, ty = st.lift(x), st.lift(y)
    ax, ay = tx._aval, ty._aval
    if (tuple(map(str, ax.shape)), ax.dtype, ax.weak, tx._scalar) != \
            (tuple(map(str, ay.shape)), ay.dtype, ay.weak, ty._scalar):
        raise NoCapture(f"an if on array values sets a variable to {ax} or to {ay}")
    if ax.weak:     # a Python number stays one (NEP 50: it does not promote what it meets)
        node = st._add("where", [t._nid, tx._nid, ty._nid], {}, AVal((), ax.dtype, ax.weak))
        return TracedArray(st, node.id, node.aval)
    return st.op("where", [t, tx, ty], scalar=tx._scalar)


HELPERS = {"_na_while_": run_while, "_na_and_": loop_and, "_na_or_": loop_or,
           "_na_not_": loop_not, "_na_if_": run_if, "_NA_UNBOUND": UNBOUND}
