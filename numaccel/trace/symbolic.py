"""Symbolic integers for dynamic dimensions.

A ``Sym`` is an integer expression over named dims (``s0``, ``s1``, ...) together with the
concrete value (*hint*) it has in the call being traced. Arithmetic builds expressions;
every *decision* taken on a Sym (comparison, ``bool``, ``int``/``__index__``) returns the
hint's answer and records a guard ``(expr, answer)`` in the active trace, so the compiled
graph is only replayed on calls where all those decisions come out the same. Input
symbols are only created for sizes >= 2 (0 and 1 are specialized), which lets comparisons
of a bare symbol with 0 or 1 resolve without a guard.

Expressions are nested tuples (hashable, JSON-able): ``("s", name)``, ``("c", value)``,
``(op, a, b)`` with op in ``OPS``.
"""
from __future__ import annotations

import operator
import threading

OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "floordiv": operator.floordiv, "mod": operator.mod,
    "min": min, "max": max,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge,
}
_SYMS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%", "eq": "==",
         "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

_state = threading.local()


def guard_sink():
    """The list guards are recorded into (set by the active trace), or None."""
    return getattr(_state, "sink", None)


def set_guard_sink(sink):
    prev = getattr(_state, "sink", None)
    _state.sink = sink
    return prev


def _record(expr, value, why):
    sink = guard_sink()
    if sink is not None:
        sink.append((expr, value, why))


def evaluate(expr, env):
    tag = expr[0]
    if tag == "c":
        return expr[1]
    if tag == "s":
        return env[expr[1]]
    return OPS[tag](evaluate(expr[1], env), evaluate(expr[2], env))


def render(expr) -> str:
    tag = expr[0]
    if tag == "c":
        return str(expr[1])
    if tag == "s":
        return expr[1]
    if tag in ("min", "max"):
        return f"{tag}({render(expr[1])}, {render(expr[2])})"
    return f"({render(expr[1])} {_SYMS[tag]} {render(expr[2])})"


def _lift(x):
    if isinstance(x, Sym):
        return x.expr, x.hint
    return ("c", int(x)), int(x)


def _make(op, a, b, hint):
    if a[0] == "c" and b[0] == "c":
        return hint
    if op == "add" and b == ("c", 0) or op in ("sub",) and b == ("c", 0):
        return Sym(a, hint)
    if op == "add" and a == ("c", 0):
        return Sym(b, hint)
    if op == "mul" and b == ("c", 1) or op == "floordiv" and b == ("c", 1):
        return Sym(a, hint)
    if op == "mul" and a == ("c", 1):
        return Sym(b, hint)
    if op == "mul" and (a == ("c", 0) or b == ("c", 0)):
        return 0
    if op == "sub" and a == b:
        return 0
    return Sym((op, a, b), hint)


class Sym:
    """A symbolic integer with the concrete value it has in the current trace."""

    __slots__ = ("expr", "hint")

    def __init__(self, expr, hint: int):
        self.expr = expr
        self.hint = int(hint)

    @staticmethod
    def symbol(name: str, hint: int) -> "Sym":
        return Sym(("s", name), hint)

    # -- arithmetic builds expressions ----------------------------------------
    def _bin(self, op, other, rev=False):
        if isinstance(other, bool) or not isinstance(other, (int, Sym)):
            try:
                other = operator.index(other)
            except TypeError:
                return NotImplemented
        a, ah = _lift(self)
        b, bh = _lift(other)
        if rev:
            a, ah, b, bh = b, bh, a, ah
        return _make(op, a, b, OPS[op](ah, bh))

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __floordiv__(self, o): return self._bin("floordiv", o)
    def __rfloordiv__(self, o): return self._bin("floordiv", o, True)
    def __mod__(self, o): return self._bin("mod", o)
    def __rmod__(self, o): return self._bin("mod", o, True)
    def __neg__(self): return _make("sub", ("c", 0), self.expr, -self.hint)
    def __pos__(self): return self

    # -- decisions record guards ---------------------------------------------
    def _cmp(self, op, other):
        if isinstance(other, bool) or not isinstance(other, (int, Sym)):
            try:
                other = operator.index(other)
            except TypeError:
                return NotImplemented
        b, bh = _lift(other)
        result = OPS[op](self.hint, bh)
        # bare input symbols are >= 2, so these comparisons never depend on the call
        if not (self.expr[0] == "s" and b[0] == "c" and b[1] in (0, 1)):
            _record((op, self.expr, b), result, "comparison")
        return result

    def __eq__(self, o): return self._cmp("eq", o)
    def __ne__(self, o): return self._cmp("ne", o)
    def __lt__(self, o): return self._cmp("lt", o)
    def __le__(self, o): return self._cmp("le", o)
    def __gt__(self, o): return self._cmp("gt", o)
    def __ge__(self, o): return self._cmp("ge", o)
    def __bool__(self): return self._cmp("ne", 0)

    def __index__(self) -> int:
        _record(self.expr, self.hint, "specialized")
        return self.hint

    __int__ = __index__

    def __float__(self) -> float:
        return float(self.__index__())

    def __hash__(self):
        return hash(self.expr)

    def __repr__(self):
        return render(self.expr)


def hint(d) -> int:
    """Concrete value of a dim (int or Sym), recording nothing."""
    return d.hint if isinstance(d, Sym) else int(d)


def hints(shape) -> tuple:
    return tuple(hint(d) for d in shape)


def sym_min(a, b):
    if isinstance(a, Sym) or isinstance(b, Sym):
        (ea, ha), (eb, hb) = _lift(a), _lift(b)
        return _make("min", ea, eb, min(ha, hb))
    return min(a, b)


def sym_max(a, b):
    if isinstance(a, Sym) or isinstance(b, Sym):
        (ea, ha), (eb, hb) = _lift(a), _lift(b)
        return _make("max", ea, eb, max(ha, hb))
    return max(a, b)


def prod(dims):
    out = 1
    for d in dims:
        out = out * d
    return out


def is_static(shape) -> bool:
    for d in shape:     # (a loop: any() over a generator costs 0.5 us, once per traced op)
        if type(d) is not int and isinstance(d, Sym):
            return False
    return True


def to_json(d):
    """A dim or attr value as JSON-able data (Sym -> {"sym": expr})."""
    if isinstance(d, Sym):
        return {"sym": d.expr}
    return d


def resolve(value, env):
    """Replace every Sym inside ``value`` (nested tuples/lists/slices/dicts) by its value
    in env. Symbols env does not bind (data-dependent sizes, known only at run time)
    stay as they are: attrs carry them for shape rules only, references never read them."""
    if isinstance(value, Sym):
        try:
            return evaluate(value.expr, env)
        except KeyError:
            return value
    if isinstance(value, tuple):
        return tuple(resolve(v, env) for v in value)
    if isinstance(value, list):
        return [resolve(v, env) for v in value]
    if isinstance(value, slice):
        return slice(resolve(value.start, env), resolve(value.stop, env),
                     resolve(value.step, env))
    if isinstance(value, dict):
        return {k: resolve(v, env) for k, v in value.items()}
    return value


def has_sym(value) -> bool:
    if isinstance(value, Sym):
        return True
    if isinstance(value, (tuple, list)):
        return any(has_sym(v) for v in value)
    if isinstance(value, slice):
        return has_sym(value.start) or has_sym(value.stop) or has_sym(value.step)
    if isinstance(value, dict):
        return any(has_sym(v) for v in value.values())
    return False
