"""Reading and writing views of an array at index arithmetic on the array itself.

The compiled wrapper (cpu_wrapper.py) indexes the base array of a chain of slices and
transposes instead of making Numba views of it: a view's strides are run-time values in
every dim, and a loop over one does not vectorize. ``base_index`` maps an element's
index expressions through one view to its base; ``pitched`` gives a strided argument a
C-contiguous type over its own memory.
"""
from __future__ import annotations

import numpy as np


def _slice_index(index, shape, ix):
    # a basic index of ints, slices, None and Ellipsis (trace.indexing.static_index)
    used = sum(1 for it in index if it is not None and it is not Ellipsis)
    items = []
    for it in index:
        items += [slice(None)] * (len(shape) - used) if it is Ellipsis else [it]
    items += [slice(None)] * (len(shape) - sum(1 for it in items if it is not None))
    out, d, k = [], 0, 0
    for it in items:
        if it is None:
            k += 1                        # a new size-1 dim of the view: no base dim
        elif type(it) is int:
            out.append(str(it % shape[d]))
            d += 1
        else:
            start, _, step = it.indices(shape[d])
            i = ix[k] if ix[k].isidentifier() or ix[k].isdigit() else f"({ix[k]})"
            term = i if step == 1 else f"{step} * {i}"
            out.append(term if start == 0 else f"{start} + {term}")
            d += 1
            k += 1
    return out


def base_index(op, attrs, shape, ix) -> list:
    """Index expressions into an array of static ``shape`` that read element ``ix``
    (expressions, one per dim of the view) of its view ``op(attrs)``: a ``transpose``
    or a ``getitem`` of a basic index."""
    if op == "transpose":
        axes = attrs.get("axes")
        axes = tuple(reversed(range(len(shape)))) if axes is None else tuple(axes)
        base = [None] * len(shape)
        for d, a in enumerate(axes):
            base[a % len(shape)] = ix[d]
        return base
    return _slice_index(attrs["index"], shape, ix)


def pitched(a):
    """``a`` as a C-contiguous array with its own row pitch (the same memory, the same
    first dim, the others as long as the strides say: the elements past each row's end
    are never read), or ``a`` itself where its strides do not allow that."""
    if a.flags.c_contiguous or a.strides[-1] != a.itemsize:
        return a
    st = a.strides
    shape = [a.shape[0]]
    for d in range(a.ndim - 1):
        if st[d + 1] <= 0 or st[d] % st[d + 1] or st[d] // st[d + 1] < a.shape[d + 1]:
            return a
        shape.append(st[d] // st[d + 1])
    return np.lib.stride_tricks.as_strided(a, shape, st, writeable=a.flags.writeable)
