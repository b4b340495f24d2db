"""Source rewrite that lets ``while`` and ``for`` loops on traced values run compiled.

A ``while err > tol:`` loop in an accelerated function breaks the graph on every
iteration (its test needs a concrete value), and so does a ``for`` loop whose body takes
a Python branch on array values (``if energy > threshold:``): re-tracing such a loop on
every call costs far more than the NumPy it replaces. ``rewrite(fn)`` returns a copy of
``fn`` in which each loop of a simple form is handed to ``loop_capture.run_while`` or
``loop_for.run_for``: its test and body become nested functions of the loop's variables,
which that runner can call as plain Python (the loop's own semantics, exactly) or trace
once into one graph and run compiled, one call per iteration. Inside such a loop, each
``if`` statement becomes a call of ``loop_capture.run_if`` with its branches as nested
functions: plain Python's ``if`` unless a captured body is being traced, where a test on
array values takes both branches and selects their results (``np.where``).

What is rewritten: ``while`` loops and ``for`` loops over one name, without ``else``,
``break``, ``continue``, ``return``,
``yield``, bare expression statements (calls made for their side effects: ``print``,
``list.append``), nested function or class definitions, ``try``/``with``/``del``/
``global``/``nonlocal``, walrus and ``locals()``-like calls, whose variables are plain
locals (not shared with a nested function). Anything else keeps its code. The copy keeps
the file name, line and column numbers, globals, defaults and closure cells of ``fn``.
"""
from __future__ import annotations

import ast
import inspect
import types

_BANNED = (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Await,
           ast.Global, ast.Nonlocal, ast.Delete, ast.Try, ast.With, ast.AsyncWith,
           ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Import,
           ast.ImportFrom, ast.NamedExpr, ast.While, ast.AsyncFor, ast.Raise)
_BANNED_CALLS = {"locals", "vars", "globals", "eval", "exec", "super", "breakpoint", "print",
                 "input", "open", "setattr", "delattr"}


class Site:
    """One rewritten loop: its variables and what capturing it has shown."""

    __slots__ = ("where", "names", "written", "reason", "failures", "captured", "target")

    def __init__(self, where, names, written, target=None):
        self.where = where          # "file:line"
        self.names = names          # the loop's variables (locals it reads or writes)
        self.written = written      # indices into names of those it assigns
        self.target = target        # a for loop: index into names of its counter
        self.reason = ""            # why the last capture was refused
        self.failures = 0
        self.captured = 0           # loops run compiled


def _head(loop) -> list:
    """The parts of a loop evaluated on every iteration (a for loop's iterable is
    evaluated once, before it)."""
    return [loop.test] if isinstance(loop, ast.While) else [loop.target]


def _why_not(loop) -> str:
    if loop.orelse:
        return "it has an else clause"
    if isinstance(loop, ast.For) and not isinstance(loop.target, ast.Name):
        return "its target is not one name"
    for node in [n for s in _head(loop) + loop.body for n in ast.walk(s)]:
        if isinstance(node, _BANNED):
            return f"it contains {type(node).__name__.lower()}"
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            return "it has an expression statement (a call for its side effect)"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in _BANNED_CALLS:
            return f"it calls {node.func.id}()"
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            return "it assigns an attribute"
    return ""


def _names(nodes):
    loads, stores = [], []
    for n in nodes:
        for m in ast.walk(n):
            if isinstance(m, ast.Name):
                (stores if isinstance(m.ctx, ast.Store) else loads).append(m.id)
    return loads, stores


def _subscript_stores(body):
    """Names whose element a statement writes (``a[i] = v``, ``a[1:] += v``)."""
    out = []
    for s in body:
        for m in ast.walk(s):
            if isinstance(m, ast.Subscript) and isinstance(m.ctx, ast.Store):
                base = m.value
                while isinstance(base, ast.Subscript):
                    base = base.value
                out.append(base.id if isinstance(base, ast.Name) else "<expression>")
    return out


def _unique(seq):
    return list(dict.fromkeys(seq))


class _Rewriter(ast.NodeTransformer):
    def __init__(self, local_names, filename):
        self.local_names = local_names
        self.filename = filename
        self.sites: list = []
        self.skipped: list = []     # (line, why)

    # nested scopes keep their code: their loops are not the function's
    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_While(self, node):
        return self._loop(node)

    visit_For = visit_While

    def _loop(self, node):
        why = _why_not(node)
        loads, stores = _names(_head(node) + node.body)
        names = [n for n in _unique(loads + stores) if n in self.local_names]
        if not why and any(n not in self.local_names for n in stores):
            why = "it assigns a name that is not a plain local"
        if not why and any(n not in self.local_names for n in _subscript_stores(node.body)):
            why = "it writes into an array that is not a plain local"
        if not why and any(n.startswith("_na_") or n == "_NA_UNBOUND" for n in names):
            why = "it uses numaccel's reserved names"
        if why:
            self.skipped.append((node.lineno, why))
            self.generic_visit(node)        # a loop inside it may qualify
            return node
        written = [i for i, n in enumerate(names) if n in set(stores)]
        k = len(self.sites)
        target = names.index(node.target.id) if isinstance(node, ast.For) else None
        self.sites.append(Site(f"{self.filename}:{node.lineno}", tuple(names),
                               tuple(written), target))
        node.body = _IfRewriter(self).rewrite(node.body)
        return self._replacement(node, k, names, [names[i] for i in written])

    def _replacement(self, loop, k, names, written):
        body_fn = _branch_fn(f"_na_body_{k}", names, written, loop.body, loop)
        if isinstance(loop, ast.While):
            cond_fn = _def(f"_na_cond_{k}", _params(names), _unbind(names) +
                           [ast.Return(_truth_tree(loop.test))])
            _locate_new(cond_fn, loop)
            fns, head = [body_fn, cond_fn], f"_na_while_(_na_site_{k}, _na_cond_{k}, "
        else:
            fns, head = [body_fn], f"_na_for_(_na_site_{k}, _NA_ITER, "
        call = ast.parse(f"_na_r = {head}_na_body_{k}, (" + "".join(
            f"_na_v.get({n!r}, _NA_UNBOUND), " for n in names) + "))").body[0]
        if isinstance(loop, ast.For):     # the iterable, evaluated where the loop was
            call.value.args[1] = loop.iter
        return _call_stmts(fns, call, written, loop)


class _IfRewriter:
    """The ``if`` statements of a rewritten loop's body as ``_na_if_`` calls."""

    def __init__(self, rw):
        self.rw = rw
        self.n = 0

    def rewrite(self, stmts):
        out = []
        for s in stmts:
            if isinstance(s, ast.If):
                out.extend(self._if(s))
            else:
                for name in ("body", "orelse"):      # ifs inside an inner for loop
                    if isinstance(s, ast.For):
                        setattr(s, name, self.rewrite(getattr(s, name)))
                out.append(s)
        return out

    def _if(self, node):
        k = self.n
        self.n += 1
        loads, stores = _names([node.test] + node.body + node.orelse)
        names = [n for n in _unique(loads + stores) if n in self.rw.local_names]
        written = [n for n in names if n in set(stores)]
        then = _branch_fn(f"_na_then_{k}", names, written, self.rewrite(node.body), node)
        other = _branch_fn(f"_na_else_{k}", names, written,
                           self.rewrite(node.orelse) or [ast.Pass()], node)
        call = ast.parse(f"_na_r = _na_if_(_NA_TEST, _na_then_{k}, _na_else_{k}, (" +
                         "".join(f"_na_v.get({n!r}, _NA_UNBOUND), " for n in names) +
                         "))").body[0]
        call.value.args[0] = _truth_tree(node.test)
        return _call_stmts([then, other], call, written, node)


def _params(names):
    return ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in names], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])


def _unbind(names):
    return [ast.parse(f"if {n} is _NA_UNBOUND: del {n}").body[0] for n in names]


def _branch_fn(name, names, written, body, src):
    """``def name(*names): body; return (written...)`` (UNBOUND where unset)."""
    ret = ast.parse("_na_l = locals()\nreturn (" + "".join(
        f"_na_l.get({n!r}, _NA_UNBOUND), " for n in written) + ")").body
    fn = _def(name, _params(names), _unbind(names) + body + ret)
    _locate_new(fn, src)
    return fn


def _call_stmts(fns, call, written, src):
    """``_na_v = locals()``, the nested functions, the runner's call and the rebinding
    of the names it assigns."""
    stmts = [ast.parse("_na_v = locals()").body[0]] + fns + [call]
    for i, n in enumerate(written):
        stmts.append(ast.parse(f"if _na_r[{i}] is not _NA_UNBOUND: {n} = _na_r[{i}]")
                     .body[0])
    # (the nested functions, and the source's own test or iterable inside the call, keep
    # their positions)
    own = {id(n) for f in fns for n in ast.walk(f)} | \
        {id(n) for e in call.value.args for n in ast.walk(e)
         if not isinstance(e, (ast.Name, ast.Tuple))}
    for s in stmts:
        if s not in fns:
            _locate(s, src, own)
    return stmts


def _locate(tree, src, keep=frozenset()):
    for n in ast.walk(tree):
        if id(n) not in keep and hasattr(n, "lineno"):
            n.lineno, n.end_lineno = src.lineno, src.lineno
            n.col_offset, n.end_col_offset = src.col_offset, src.col_offset


def _locate_new(fn_node, loop):
    # the loop's own statements keep their positions; the added ones take the loop's
    own = {id(n) for s in _own_parts(loop) for n in ast.walk(s)}
    fn_node.lineno, fn_node.end_lineno = loop.lineno, loop.lineno
    fn_node.col_offset, fn_node.end_col_offset = loop.col_offset, loop.col_offset
    for s in [fn_node.args] + fn_node.body:
        for n in ast.walk(s):
            if id(n) not in own and hasattr(n, "lineno"):
                n.lineno = n.end_lineno = loop.lineno
                n.col_offset = n.end_col_offset = loop.col_offset


def _own_parts(src):
    if isinstance(src, ast.If):
        return [src.test] + src.body + src.orelse
    return _head(src) + src.body


def _truth_tree(test):
    """The loop test as calls that keep Python's short-circuit truth when run on
    concrete values and build one traced boolean when captured."""
    if isinstance(test, ast.BoolOp):
        fn = "_na_and_" if isinstance(test.op, ast.And) else "_na_or_"
        args = [ast.Lambda(args=_no_args(), body=_truth_tree(v)) for v in test.values]
        return ast.copy_location(ast.Call(ast.Name(fn, ast.Load()), args, []), test)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.copy_location(ast.Call(ast.Name("_na_not_", ast.Load()), [
            ast.Lambda(args=_no_args(), body=_truth_tree(test.operand))], []), test)
    return test


def _def(name, args, body):
    kw = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    return ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], returns=None,
                           **kw)


def _no_args():
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                         kwarg=None, defaults=[])


def rewrite(fn, helpers: dict):
    """``fn`` with its loops calling ``helpers`` (name -> object, loop_capture.HELPERS):
    ``(new function, sites, skipped)``; ``(None, [], skipped or reason)`` where nothing
    is rewritten (no eligible loop, no source, a closure over a loop variable...)."""
    if not isinstance(fn, types.FunctionType):
        return None, [], "not a plain Python function"
    code = fn.__code__
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE |
                        inspect.CO_ASYNC_GENERATOR):
        return None, [], "a generator or coroutine"
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None, [], "its source is not available"
    if first != code.co_firstlineno:     # (getsource follows __wrapped__)
        return None, [], "its source is another function's"
    src = "".join(lines)
    if "while" not in src and "for" not in src:
        return None, [], "no loop"
    # parse with the lines as they are, so that column offsets stay the file's (the
    # creation hooks read the source of a call by its columns)
    wrapped = src[:1].isspace()
    try:
        tree = ast.parse("if 1:\n" + src if wrapped else src)
    except SyntaxError:
        return None, [], "its source does not parse on its own"
    ast.increment_lineno(tree, first - 1 - (1 if wrapped else 0))
    fdef = tree.body[0].body[0] if wrapped else tree.body[0]
    if not isinstance(fdef, ast.FunctionDef) or fdef.name != code.co_name:
        return None, [], "its source is not one def statement"
    fdef.decorator_list = []
    local_names = set(code.co_varnames) - set(code.co_cellvars)
    rw = _Rewriter(local_names, code.co_filename)
    fdef.body = [s for stmt in fdef.body for s in _as_list(rw.visit(stmt))]
    if not rw.sites:
        return None, [], rw.skipped or "no loop"
    helper_names = list(helpers) + [f"_na_site_{k}" for k in range(len(rw.sites))]
    free = list(code.co_freevars)
    factory = _def("_na_factory", ast.arguments(
        posonlyargs=[], args=[ast.arg(n) for n in helper_names + free], vararg=None,
        kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))])
    ast.copy_location(factory, fdef)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    fcode = compile(module, code.co_filename, "exec")
    fact_code = next(c for c in fcode.co_consts if isinstance(c, types.CodeType))
    new_code = next(c for c in fact_code.co_consts
                    if isinstance(c, types.CodeType) and c.co_name == code.co_name)
    values = dict(helpers)
    values.update({f"_na_site_{k}": s for k, s in enumerate(rw.sites)})
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    closure = tuple(cells[n] if n in cells else types.CellType(values[n])
                    for n in new_code.co_freevars)
    new = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__doc__ = fn.__doc__
    return new, rw.sites, rw.skipped


def _as_list(x):
    return x if isinstance(x, list) else [x]
