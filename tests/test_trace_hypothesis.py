"""Hypothesis: random expression programs (dtypes, broadcast shapes, axes) vs NumPy."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import numaccel

from conftest import _TOL, assert_same

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16]
UN = [np.negative, np.abs, np.square, np.sin, np.exp, np.tanh, np.floor, np.logical_not,
      np.isnan, np.sqrt]
BIN = [np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.true_divide, np.less,
       np.equal, np.logical_and, np.where]
RED = ["sum", "max", "min", "mean", "prod", "any", "argmax", "cumsum"]


@st.composite
def programs(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    dtype = draw(st.sampled_from(DTYPES))
    n_in = draw(st.integers(1, 3))
    shapes = [shape] + [draw(hnp.broadcastable_shapes(shape, min_dims=0, max_dims=3,
                                                      max_side=5)) for _ in range(n_in - 1)]
    kind = np.dtype(dtype).kind
    elems = None
    if kind == "f":
        elems = st.floats(-8, 8, width=np.dtype(dtype).itemsize * 8)
    elif kind in "iu":
        elems = st.integers(0 if kind == "u" else -8, 8)
    arrays = [draw(hnp.arrays(dtype, s, elements=elems)) for s in shapes]
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["un", "bin", "scalar", "red", "slice"]))
        if kind == "un":
            steps.append(("un", draw(st.sampled_from(UN))))
        elif kind == "bin":
            steps.append(("bin", draw(st.sampled_from(BIN)), draw(st.integers(0, n_in - 1))))
        elif kind == "scalar":
            steps.append(("scalar", draw(st.sampled_from([2, 0.5, -1.5, True,
                                                          np.float32(2.5)]))))
        elif kind == "red":
            steps.append(("red", draw(st.sampled_from(RED)), draw(st.sampled_from(
                [None, 0, -1])), draw(st.booleans())))
        else:
            steps.append(("slice", draw(st.sampled_from([slice(None, None, -1), slice(1, None),
                                                         slice(None, None, 2)]))))
    return arrays, steps


def run_program(steps, *arrays):
    x = arrays[0]
    for step in steps:
        if step[0] == "un":
            x = step[1](x)
        elif step[0] == "bin":
            y = arrays[step[2]]
            x = np.where(x > 0, x, y) if step[1] is np.where else step[1](x, y)
        elif step[0] == "scalar":
            x = x * step[1]
        elif step[0] == "red":
            _, name, axis, keep = step
            if np.ndim(x) == 0:
                axis = None
            if name in ("argmax", "cumsum"):
                x = getattr(np, name)(x, axis=axis)
            else:
                x = getattr(np, name)(x, axis=axis, keepdims=keep)
        else:
            if np.ndim(x) > 0:
                x = x[step[1]]
    return x


def check_random_programs(max_examples, backend="cpu"):
    """``max_examples`` random programs on ``backend`` give NumPy's results (programs
    NumPy rejects are skipped). For the backend test files."""
    @settings(max_examples=max_examples, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def check(prog):
        arrays, steps = prog
        with np.errstate(all="ignore"):
            try:
                ref = run_program(steps, *arrays)
            except (ValueError, TypeError):
                return
        f = numaccel.accelerate(lambda *a: run_program(steps, *a), backend=backend)
        assert_same(f(*arrays), ref, **narrow_tolerance(arrays))
    check()


def narrow_tolerance(arrays) -> dict:
    """Tolerances of the narrowest float input: a float16 product promoted to float32 later
    carries float16's rounding, and NumPy's own (rounded per step along a strided axis,
    once for a contiguous one) is not the kernels' (float64 accumulators, rounded once)."""
    for name in ("bfloat16", "float16"):
        if any(a.dtype.name == name for a in arrays):
            rtol, atol = _TOL[name]
            return {"rtol": rtol, "atol": atol}
    return {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_match_numpy(prog):
    arrays, steps = prog
    with np.errstate(all="ignore"):
        try:
            ref = run_program(steps, *arrays)
        except (ValueError, TypeError) as e:  # an invalid program: numaccel must raise too
            err = type(e)
            ref = None
    f = numaccel.accelerate(lambda *a: run_program(steps, *a), backend="numpy")
    if ref is None:
        try:
            f(*arrays)
        except err:
            return
        raise AssertionError("numaccel did not raise where NumPy did")
    got = f(*arrays)
    assert_same(got, ref)
    assert_same(f(*arrays), ref)  # the cached replay too
