"""Index specs: normalizing Python indices and computing result shapes.

A spec is a tuple of ints/Syms, slices, None, Ellipsis and ``("arr", k)`` placeholders
for index arrays (boolean or integer), as stored in ``getitem``/``setitem`` attrs.
"""
from __future__ import annotations

import numpy as np

from .symbolic import Sym, hint
from ..ops.prims import broadcast_shapes


def static_index(spec) -> bool:
    """A basic index of plain ints, slices of ints, None and Ellipsis (no Sym, no
    index arrays): one NumPy can apply to a concrete array as is."""
    for it in spec:
        t = type(it)
        if t is slice:
            if not all(v is None or type(v) is int for v in (it.start, it.stop, it.step)):
                return False
        elif not (t is int or it is None or it is Ellipsis):
            return False
    return True


def is_basic(spec) -> bool:
    return not any(isinstance(it, tuple) for it in spec)


def slice_length(s: slice, n):
    """len(range(*s.indices(n))) for a possibly symbolic n (decisions record guards)."""
    step = 1 if s.step is None else s.step
    if step == 0:
        raise ValueError("slice step cannot be zero")
    neg = step < 0

    def adjust(v, default):
        if v is None:
            return default
        if v < 0:
            v = v + n
            if v < 0:
                return -1 if neg else 0
            return v
        if v >= n:
            return n - 1 if neg else n
        return v

    start = adjust(s.start, n - 1 if neg else 0)
    stop = adjust(s.stop, -1 if neg else n)
    if neg:
        return (start - stop - 1) // (-step) + 1 if stop < start else 0
    return (stop - start - 1) // step + 1 if start < stop else 0


def expand_ellipsis(spec, ndim, arr_avals=()):
    """Replace Ellipsis by full slices; returns the spec with one item per consumed dim."""
    used = 0
    for it in spec:
        if it is None or it is Ellipsis:
            continue
        if isinstance(it, tuple) and arr_avals and arr_avals[it[1]].dtype == np.bool_:
            used += arr_avals[it[1]].ndim
        else:
            used += 1
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, "
                         f"but {used} were indexed")
    n_ell = sum(1 for it in spec if it is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    out = []
    for it in spec:
        if it is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(it)
    if n_ell == 0:
        out.extend([slice(None)] * (ndim - used))
    return tuple(out)


def index_shape(shape, spec, arr_avals=()):
    """Result shape of ``x[spec]`` for x of ``shape`` (NumPy rules, incl. advanced)."""
    spec = expand_ellipsis(spec, len(shape), arr_avals)
    out, adv_shapes, adv_pos = [], [], []
    has_adv = any(isinstance(it, tuple) for it in spec)
    d = 0
    for it in spec:
        if it is None:
            out.append(1)
        elif isinstance(it, slice):
            out.append(slice_length(it, shape[d]))
            d += 1
        elif isinstance(it, tuple):
            av = arr_avals[it[1]]
            if av.dtype == np.bool_:
                # the count of a mask is carried as the mask aval's first dim of its "nonzero"
                n = it[2] if len(it) > 2 else None
                if n is None:
                    raise NotImplementedError("boolean mask without a known count")
                adv_shapes.append((n,))
                d += av.ndim
            else:
                adv_shapes.append(tuple(av.shape))
                d += 1
            adv_pos.append(len(out))
            out.append(None)
        else:  # integer index
            n = shape[d]
            if not (it < n and it >= -n):
                raise IndexError(f"index {hint(it)} is out of bounds for axis {d} "
                                 f"with size {hint(n)}")
            if has_adv:
                # next to index arrays, an integer is an advanced index of shape ()
                adv_shapes.append(())
                adv_pos.append(len(out))
                out.append(None)
            d += 1
    if not adv_shapes:
        return tuple(out)
    bshape = broadcast_shapes(*adv_shapes)
    # NumPy: advanced indices next to each other -> result dims in place; else in front
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    rest = [x for x in out if x is not None]
    if contiguous:
        first = adv_pos[0]
        before = [x for x in out[:first] if x is not None]
        after = [x for x in out[first:] if x is not None]
        return tuple(before) + bshape + tuple(after)
    return bshape + tuple(rest)
