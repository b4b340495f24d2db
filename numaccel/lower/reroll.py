"""Roll repeated statement blocks of a compiled-wrapper body back into a loop.

Tracing unrolls the user's static loops (``for i in range(n_steps)``): a time-stepping
program becomes ``n_steps`` copies of one body in the compiled wrapper's single Numba
function, and Numba's typing and lowering grow with every copy (corpus lorenz_rk4_tiny:
10 RK4 steps, 787 lines, ~6 s of compile). This pass finds the longest run of N >= 3
consecutive blocks of top-level statements that differ only by

* the names of the values they define (``n<id>``, ``w<id>``, ``r<id>``, ``c<id>``: node
  ids advance by the same amount from block to block; ``k<j>_<m>``, ``acc<j>``,
  ``xr<j>``: kernel numbers likewise),
* references to the previous block's values (loop-carried: ``q<name>`` variables set at
  the end of each iteration) or to values from before the run (the same in every block),
* integer literals that advance by a constant step (``traj[i + 1] = s``),

and emits the first block as it is, then ``for _it in range(1, N)`` over the first block's
text with those substitutions. Statements after the run may read only the last block's
values (the loop's variables hold them), and tuples of one value from every block, in
order (``np.array(population)`` of a per-step scalar, possibly after values from
before the run), which the loop collects into a list. Anything else leaves the body unrolled.

Example::

    lines = reroll(lines)     # the body lines of ``def entry(...)``, 4-space indented
"""
from __future__ import annotations

import re

# names of values by node id, and by kernel number (with an optional _<m> suffix)
_NAME = re.compile(r"\b(n|w|r|c|k|acc|xr)(\d+)(?=\b|_)")
_INT = re.compile(r"(?<![\w.])\d+(?![\w.])")
_DEF = re.compile(r"^\s*((?:n|w|r|c|k|acc|xr)\d+(?:_\d+)?)\s*=[^=]")
_SPACE = {"n": "id", "w": "id", "r": "id", "c": "id", "k": "kn", "acc": "kn", "xr": "kn"}
MIN_BLOCKS = 3


def _statements(lines):
    """Top-level statements (4-space indented) with their nested lines, as (lo, hi)."""
    starts = [i for i, ln in enumerate(lines) if ln.startswith("    ") and ln[4] != " "]
    return [(a, b) for a, b in zip(starts, starts[1:] + [len(lines)])]


def _tokens(text):
    """(kind, prefix/None, value, span) of every name number and integer literal."""
    toks = [("name", m.group(1), int(m.group(2)), m.span(2)) for m in _NAME.finditer(text)]
    toks += [("int", None, int(m.group()), m.span()) for m in _INT.finditer(text)]
    return sorted(toks, key=lambda t: t[3])


def _shape(text):
    return _INT.sub("0", _NAME.sub(lambda m: m.group(1) + "#", text))


def _best_run(shapes):
    """(start, period, blocks) of the repeated run saving the most statements."""
    ids = {}
    h = [ids.setdefault(s, len(ids)) for s in shapes]
    m = len(h)
    best = (0, 0, 0)
    for p in range(1, m // MIN_BLOCKS + 1):
        run = 0
        for i in range(m - p - 1, -1, -1):      # run[i]: equal pairs from i on
            run = run + 1 if h[i] == h[i + p] else 0
            n = run // p + 1
            if n >= MIN_BLOCKS and (n - 1) * p > (best[2] - 1) * best[1]:
                best = (i, p, n)
    return best


def reroll(lines: list[str]) -> list[str]:
    """``lines`` with the largest repeated run of blocks rolled into a loop (see the
    module docstring), or ``lines`` unchanged when there is none it can roll."""
    stmts = _statements(lines)
    body = [s for s in stmts if not lines[s[0]].startswith("    return ")]
    texts = ["\n".join(lines[a:b]) for a, b in body]
    s, p, n = _best_run([_shape(t) for t in texts])
    if n < MIN_BLOCKS:
        return lines
    out = _roll(lines, body, texts, s, p, n)
    return lines if out is None else out


def _roll(lines, body, texts, s, p, n):
    blocks = ["\n".join(texts[s + k * p: s + (k + 1) * p]) for k in range(n)]
    toks = [_tokens(b) for b in blocks]
    if len({len(t) for t in toks}) != 1:
        return None
    defs = [{_split(d) for ln in b.split("\n") for d in _DEF.findall(ln)} for b in blocks]
    # per token position: the step from block to block (constant over the run)
    steps, delta = [], {}
    for j, t0 in enumerate(toks[0]):
        d = toks[1][j][2] - t0[2]
        if any(toks[k + 1][j][2] - toks[k][j][2] != d for k in range(n - 1)):
            return None
        steps.append(d)
        if t0[0] == "name" and d:
            if delta.setdefault(_SPACE[t0[1]], d) != d:
                return None
    # the template: block 0 with carried references and advancing literals substituted
    text, carried, pos = blocks[0], {}, 0
    pieces = []
    for (kind, pre, v, (a, b)), d in zip(toks[0], steps):
        pieces.append(text[pos:a])
        pos = b
        if kind == "int":
            pieces.append(str(v) if d == 0 else f"({v} + {d} * _it)")
            continue
        name = (pre, v)
        if d == 0:
            if any(name in df for df in defs):    # a value of the run read as invariant
                return None
            pieces.append(str(v))
        elif name in defs[0]:
            pieces.append(str(v))
        elif (pre, v + d) in defs[0] and pre in ("n", "w", "r", "c", "acc"):
            # the previous block's value: a carried variable, set after each block
            carried[(pre, v + d)] = True
            pieces[-1] = pieces[-1][:len(pieces[-1]) - len(pre)] + "q" + pre
            pieces.append(str(v + d))
        else:
            return None                            # an older block's value
    pieces.append(text[pos:])
    template = "".join(pieces)
    # statements after the run may read only the last block's values, and tuples of
    # one value of every block (np.array(population) of a per-step scalar): those are
    # collected into a list as the loop runs
    last = {(pre, v): v - (n - 1) * delta.get(_SPACE[pre], 0) for pre, v in defs[-1]}
    older = set().union(*defs[:-1])
    after = lines[body[s + n * p][0]:] if s + n * p < len(body) else \
        lines[body[-1][1]:]
    after, collected = _collect(after, defs, delta, n)
    if any((m.group(1), int(m.group(2))) in older
           for ln in after for m in _NAME.finditer(ln)):
        return None
    fixed = [_NAME.sub(lambda m: m.group(1) + str(last.get((m.group(1), int(m.group(2))),
                                                            m.group(2))), ln)
             for ln in after]
    head = lines[:body[s + p][0]]              # everything up to block 1: block 0 verbatim
    loop = [f"    for _it in range(1, {n}):"]
    loop += ["    " + ln for ln in template.split("\n")]
    loop += [f"        q{pre}{v} = {pre}{v}" for pre, v in carried]
    loop += [f"        l{pre}{v}.append({pre}{v})" for pre, v in collected]
    init = [f"    q{pre}{v} = {pre}{v}" for pre, v in carried]
    init += [f"    l{pre}{v} = [{', '.join(f'{a}{b}' for a, b in before + [(pre, v)])}]"
             for (pre, v), before in collected.items()]
    return head + init + loop + fixed


_TUPLE = re.compile(r"\(((?:[a-z]+\d+, )+[a-z]+\d+),?\)")


def _collect(after, defs, delta, n):
    """``after`` with each tuple literal that ends in exactly the n blocks' values of one
    name (in block order; values from before the run may precede them) replaced by the
    list the loop appends them to; and ``(name as block 0 names it, the values before)``
    of each such list."""
    collected = {}
    run_defs = set().union(*defs)

    def sub(m):
        names = [_NAME.fullmatch(x) for x in m.group(1).split(", ")]
        if len(names) < n or not all(names):
            return m.group(0)
        names = [(x.group(1), int(x.group(2))) for x in names]
        before, own = names[:-n], names[-n:]
        (pre, v0), d = own[0], delta.get(_SPACE.get(own[0][0]), 0)
        if (pre, v0) not in defs[0] or not d or any(x in run_defs for x in before) or \
                own != [(pre, v0 + k * d) for k in range(n)] or \
                collected.setdefault((pre, v0), before) != before:
            return m.group(0)
        return f"l{pre}{v0}"
    return [_TUPLE.sub(sub, ln) for ln in after], collected


def _split(name):
    m = _NAME.match(name)
    return (m.group(1), int(m.group(2)))
