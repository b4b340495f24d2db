"""Generated guard checks (trace/guardgen.py) agree with the generic walk of Entry.bind."""
import numpy as np
import pytest

import numaccel
from numaccel.trace.guardgen import compile_check


def entry_of(fn, *args, **kw):
    f = numaccel.accelerate(fn, backend="numpy", **kw)
    f(*args)
    return f, f.entries[-1]


def agree(e, leaves):
    fast = compile_check(e)(leaves)
    slow = e._bind_slow(leaves)
    if fast is None:
        return slow     # the generic walk decides (a reason, or an env it accepts)
    assert fast == slow
    return fast


def test_static_symbolic_and_scalar_specs():
    x, y = np.ones((3, 4), np.float32), np.ones(4)
    f, e = entry_of(lambda a, b, s: a * b + s, x, y, np.float32(2))
    assert agree(e, [x, y, np.float32(2)]) == {}
    assert isinstance(agree(e, [x.astype(np.float64), y, np.float32(2)]), str)
    assert isinstance(agree(e, [x[:2], y, np.float32(2)]), str)
    assert isinstance(agree(e, [x, y, np.float64(2)]), str)
    assert isinstance(agree(e, [x, y]), str)
    f, e = entry_of(lambda a, b: a + b, x, x, dynamic=True)
    assert agree(e, [np.ones((5, 7)).astype(np.float32)] * 2) == {"s0": 5, "s1": 7}
    assert isinstance(agree(e, [np.ones((5, 7), np.float32), np.ones((5, 8), np.float32)]),
                      str)
    assert isinstance(agree(e, [np.ones((1, 7), np.float32)] * 2), str)   # 1 is specialized


def test_specialized_values_nan_and_python_types():
    def f(a, n, t):
        for _ in range(n):
            a = a * t
        return a
    x = np.ones(3)
    acc, e = entry_of(f, x, 3, 0.5)
    assert agree(e, [x, 3, 0.5]) == {}
    assert isinstance(agree(e, [x, 4, 0.5]), str)         # a loop count: its value
    assert isinstance(agree(e, [x, 3.0, 0.5]), str)       # a Python type change
    acc, e = entry_of(lambda a, v: a[:2] if v != v else a, x, float("nan"))
    assert agree(e, [x, float("nan")]) == {}
    assert isinstance(agree(e, [x, 1.0]), str)


def test_aliasing_guard_and_subclasses():
    def f(a, b):
        a += b
    x = np.ones(4)
    acc = numaccel.accelerate(f, backend="numpy")
    acc(x, np.ones(4))
    e = acc.entries[-1]
    assert agree(e, [x, np.ones(4)]) == {}
    assert agree(e, [x, x]) == "arguments share memory"
    m = np.ones(4).view(np.memmap) if hasattr(np, "memmap") else None
    if m is not None:
        assert compile_check(e)([m, np.ones(4)]) is None   # exact ndarray only...
        assert e.bind([m, np.ones(4)]) == {}                 # ...the walk accepts it


def test_hits_use_the_generated_check():
    f = numaccel.accelerate(lambda a: a + 1, backend="numpy")
    x = np.arange(3.0)
    f(x)
    f(x)
    e = f.entries[0]
    assert e._check is not None and e._check[0] is e.specs
    assert f.cache_info().hits == 1
    with pytest.raises(TypeError):
        compile_check(e)()
