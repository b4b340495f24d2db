"""Flattening call arguments and results into leaves plus a hashable structure."""
from __future__ import annotations

import numpy as np

LEAF = "*"
_STATIC = (type(None), str, bytes, type(Ellipsis), np.dtype, slice)


_LEAF_TYPES = (np.ndarray, np.generic, bool, int, float, complex)


def flatten_args(args, kwargs, leaves):
    """flatten((args, kwargs)) with a fast path for the usual all-leaf positional call."""
    if not kwargs:
        for a in args:
            if not isinstance(a, _LEAF_TYPES):
                break
        else:
            leaves.extend(args)
            return ("tuple", (("tuple", (LEAF,) * len(args)), ("dict", (), ())))
    return flatten((args, kwargs), leaves)


def flatten(x, leaves, where="argument"):
    """Append the leaves of ``x`` (arrays, NumPy and Python scalars) and return its
    structure. Static values (None, strings, dtypes) are part of the structure."""
    if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)) or \
            type(x).__name__ == "TracedArray":
        leaves.append(x)
        return LEAF
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return ("tuple", tuple(flatten(v, leaves, where) for v in x))
    if isinstance(x, list):
        return ("list", tuple(flatten(v, leaves, where) for v in x))
    if isinstance(x, dict):
        keys = tuple(x)
        return ("dict", keys, tuple(flatten(x[k], leaves, where) for k in keys))
    if isinstance(x, _STATIC) or (isinstance(x, type) and issubclass(x, np.generic)):
        return ("static", x)
    raise TypeError(
        f"numaccel.accelerate: unsupported {where} of type {type(x).__module__}."
        f"{type(x).__qualname__}. Accelerated functions take NumPy arrays, NumPy or Python "
        "scalars, None, strings, dtypes, and tuples/lists/dicts of these. Convert it to an "
        "array, or read it from a global/closure instead of passing it.")


def unflatten(tree, leaves):
    return _build(tree, iter(leaves))


def _build(t, it):
    # a module function, not a recursive closure: that would be a reference cycle that
    # keeps the leaves (the call's results) alive until the garbage collector runs
    if t == LEAF:
        return next(it)
    tag = t[0]
    if tag == "tuple":
        return tuple(_build(c, it) for c in t[1])
    if tag == "list":
        return [_build(c, it) for c in t[1]]
    if tag == "dict":
        return {k: _build(c, it) for k, c in zip(t[1], t[2])}
    return t[1]
