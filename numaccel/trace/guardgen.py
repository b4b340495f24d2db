"""Guard checks as generated code: one straight-line Python function per cache entry.

``Entry.bind`` walks the entry's specs generically (a loop, dict lookups, formatted
reasons): microseconds per call, which is most of the call overhead on tiny inputs. The
generated check tests exactly this entry's guards in order and returns the symbol
environment, or None; only then does ``bind`` run its generic walk, to say which guard
failed (or to accept what the check does not cover, e.g. an ndarray subclass).
"""
from __future__ import annotations

import numpy as np

from .symbolic import evaluate


def compile_check(entry):
    """The fast guard check of ``entry``: ``check(leaves) -> env dict | None``."""
    consts = {"ndarray": np.ndarray, "generic": np.generic, "evaluate": evaluate}
    lines = ["def check(L):", f"    if len(L) != {len(entry.specs)}:", "        return None"]
    sym_var = {}

    def const(v):
        name = f"K{len(consts)}"
        consts[name] = v
        return name

    for k, spec in enumerate(entry.specs):
        kind = spec[0]
        lines.append(f"    x = L[{k}]")
        if kind == "array":
            dims = spec[2]
            dt = const(spec[1])
            lines += ["    if type(x) is not ndarray:", "        return None",
                      "    d = x.dtype",
                      f"    if d is not {dt} and d != {dt}:", "        return None",
                      "    s = x.shape", f"    if len(s) != {len(dims)}:", "        return None"]
            for d, want in enumerate(dims):
                if want == "*":
                    continue
                if isinstance(want, str):
                    if want not in sym_var:
                        v = sym_var[want] = f"v{len(sym_var)}"
                        lines += [f"    {v} = s[{d}]", f"    if {v} < 2:", "        return None"]
                    else:
                        lines += [f"    if s[{d}] != {sym_var[want]}:", "        return None"]
                else:
                    lines += [f"    if s[{d}] != {int(want)}:", "        return None"]
        elif kind == "scalar":
            dt = const(spec[1])
            lines += ["    if not isinstance(x, generic):", "        return None",
                      "    d = x.dtype", f"    if d is not {dt} and d != {dt}:",
                      "        return None"]
        else:
            lines += [f"    if type(x) is not {const(spec[1])}:", "        return None"]
    for k, v in entry.values.items():
        c = const(v)
        if isinstance(v, float) and v != v:
            lines += [f"    x = L[{k}]", f"    if type(x) is not {const(type(v))} or x == x:",
                      "        return None"]
        else:
            lines += [f"    x = L[{k}]",
                      f"    if type(x) is not {const(type(v))} or not (x == {c}):",
                      "        return None"]
    env = "{" + ", ".join(f"{name!r}: {v}" for name, v in sym_var.items()) + "}"
    lines.append(f"    env = {env}")
    for expr, expected, _ in entry.guards:
        lines += [f"    if evaluate({const(expr)}, env) != {const(expected)}:",
                  "        return None"]
    if entry.check_alias:
        from .api import _aliased
        consts["aliased"] = _aliased
        lines += ["    if aliased(L):", "        return None"]
    lines.append("    return env")
    ns = dict(consts)
    exec(compile("\n".join(lines), f"<numaccel guards {id(entry):x}>", "exec"), ns)
    return ns["check"]
