"""Code the tracer cannot see, called from a traced function: ``np.random``'s module
functions (hooked while a trace is active: they draw new numbers on every call, so the
call is marked impure and is re-traced, never replayed) and arrays that such code returns
(``fresh_consts``: an array constant nothing outside the trace holds was made during
the call)."""
from __future__ import annotations

import gc

import numpy as np

from .npapi import call_concrete
from .tracer import user_frame_info

_RANDOM = {}            # name -> (original, hook): np.random's functions (one RandomState)


def _draw(name, orig):
    def builder(st, *args, **kwargs):
        # new numbers on every call: a graph holding them must not be replayed (the call
        # is re-traced instead, see api.py), nor a loop step holding them (loop_capture)
        if not getattr(st, "impure", None):
            st.impure = user_frame_info()
        return call_concrete(st, orig, args, kwargs, f"numpy.random.{name} is not traced")
    return builder


def _random_functions():
    """Make the hooks (once): np.random's module functions are methods of one hidden
    RandomState."""
    from .np_create import hook_for
    for name in getattr(np.random, "__all__", ()):
        f = getattr(np.random, name, None)
        if isinstance(getattr(f, "__self__", None), np.random.RandomState):
            _RANDOM[name] = (f, hook_for(name, _draw(name, f), f))


_traces = [0]


def install_random(active: bool) -> None:
    """Enter (True) or leave (False) a trace. The hooks stay in place while the trace
    runs concretely (a hook outside tracing calls NumPy's function): swapping ~50
    functions at every graph break cost ~10 us each."""
    if not _RANDOM:
        _random_functions()
    _traces[0] += 1 if active else -1
    if _traces[0] == (1 if active else 0):
        for name, (orig, hook) in _RANDOM.items():
            setattr(np.random, name, hook if active else orig)


def fresh_consts(st) -> list:
    """Source lines of the array constants of the pending graph that nothing outside
    this trace holds: arrays made during the call by code the tracer cannot see (a
    ``np.random.Generator`` method, a compiled extension). A replayed graph would
    serve them again on every call (the same random numbers), so such a call is
    re-traced each time instead. A view counts by the array it views (a slice of a
    global array is that global's)."""
    keep = getattr(st, "_const_keep", [])
    internal = {id(keep), id(st.graph.consts)}
    out = []
    for x, nid, where in keep:
        # (arrays, and tuples and dicts of untracked objects, are not tracked by the
        # gc: a global array is found through its module's dict, a closure's cell,
        # an object's __dict__; a view through the array it views)
        held, a = False, x
        while isinstance(a, np.ndarray) and not held:
            for r in gc.get_referrers(a):
                if id(r) in internal or type(r).__name__ == "frame" or \
                        type(r) is tuple and (len(r) == 2 and isinstance(r[0], str) or
                                              len(r) == 3 and r[0] is x):
                    continue
                held = True
                break
            a = a.base
        if not held:
            out.append(where)
    return out
