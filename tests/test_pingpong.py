"""In-place stencil updates (``u[1:-1, 1:-1] += f(u neighbours)``) in the step path: the
kernel writes into a fresh buffer and only the border is copied (lower/pingpong.py).

Checks NumPy's results, that the plan really used the ping-pong step, that a time loop
alternates between a bounded number of pooled buffers (the pool's counter, not a
timing), and the box-complement arithmetic on its own."""
import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import numaccel
from numaccel.lower import pool
from numaccel.lower.pingpong import box_ranges, complement_boxes

from conftest import check_np

pytestmark = pytest.mark.usefixtures("step_wrapper")


def heat(u, alpha, steps):
    u = u.copy()
    for _ in range(steps):
        c = u[1:-1, 1:-1]
        u[1:-1, 1:-1] += alpha * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                                  - 4.0 * c)
    return u


def plan(f):
    return f.entries[0].run.describe()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, ml_dtypes.bfloat16])
def test_heat_time_loop_matches_numpy_and_ping_pongs(rng, dtype):
    u = rng.random((48, 40)).astype(dtype)
    u[0] = 1
    f = check_np(heat, u, 0.2, 6, backend="cpu")
    assert plan(f).count("pingpong") == 6, plan(f)
    assert "inplace" not in plan(f)


def test_a_long_time_loop_reuses_two_pooled_buffers(rng):
    # 1024x1024 float64: 8 MB, pooled. Each step's old buffer goes back to the pool, so
    # the whole loop holds the two of a hand-written ping-pong (a leaked view of the
    # kernel output used to keep one alive per step: 40 buffers)
    u = rng.random((1024, 1024))
    pool.release()
    f = numaccel.accelerate(heat, backend="cpu")
    got = f(u, 0.2, 40)
    np.testing.assert_allclose(got, heat(u, 0.2, 40), rtol=1e-12)
    assert "pingpong" in plan(f)
    del got
    assert pool.held_bytes() <= 3 * u.nbytes, pool.held_bytes() // u.nbytes


def rows_and_ints(a, k):
    a = a.copy()
    for _ in range(k):
        a[2, 1:] = a[2, :-1] * 0.5 + a[1, 1:]          # an int index: a row of the box
        a[-1] = a[-2] + a[0]                           # a whole last row
        a[1:, 3] -= 0.1 * a[:-1, 3]                    # a column
    return a


def three_d(v):
    v = v.copy()
    for _ in range(3):
        v[1:-1, :, 1:] = 0.5 * (v[2:, :, 1:] + v[:-2, :, :-1])
    return v


@pytest.mark.parametrize("prog, shape", [(rows_and_ints, (7, 9)), (three_d, (6, 5, 4))])
def test_other_boxes_match_numpy(rng, prog, shape):
    a = rng.standard_normal(shape)
    f = check_np(prog, a, *((3,) if prog is rows_and_ints else ()), backend="cpu")
    assert "pingpong" in plan(f)


def test_nan_inf_non_contiguous_and_empty_boxes(rng):
    u = rng.random((30, 20))
    u[3, 4], u[10, 0], u[0, 5] = np.nan, np.inf, -np.inf
    check_np(heat, u, 0.1, 3, backend="cpu")
    check_np(heat, np.asfortranarray(u), 0.1, 3, backend="cpu")
    check_np(heat, u[::2, ::-1], 0.1, 3, backend="cpu")

    def empty_box(a):
        a = a.copy()
        for _ in range(2):
            a[3:3] = a[2:2] + 1.0
            a[1:] = a[:-1] * 2
        return a
    check_np(empty_box, u, backend="cpu")


def test_where_it_does_not_apply_numpy_semantics_hold(rng):
    def stepped(a):
        a = a.copy()
        for _ in range(3):
            a[1::2] = a[:-1:2] + a[1::2] * 0.5        # a step: not a box
        return a

    def old_value_read_after(a):
        b = a.copy()
        for _ in range(2):
            b[1:] = b[:-1] + 1.0
        return b, a.sum()

    f = check_np(stepped, rng.random((10, 6)), backend="cpu")
    assert "pingpong" not in plan(f)
    check_np(old_value_read_after, rng.random((10, 6)), backend="cpu")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=4).flatmap(
    lambda shape: st.tuples(st.just(tuple(shape)), st.tuples(*[
        st.one_of(st.tuples(st.integers(-7, 7), st.integers(-7, 7)).map(
            lambda p: slice(*p)), st.integers(-n, n - 1) if n else st.just(slice(None)))
        for n in shape]))))
def test_complement_boxes_cover_exactly_the_rest(case):
    shape, index = case
    ranges = box_ranges(index, shape)
    assert ranges is not None
    mark = np.zeros(shape, np.int64)
    mark[index] += 100
    for box in complement_boxes(ranges, shape):
        mark[box] += 1
    # every element is in the box or in exactly one complement box
    assert set(np.unique(mark)) <= {1, 100}
    assert np.count_nonzero(mark == 100) == np.zeros(shape)[index].size


def test_box_ranges_refuses_what_is_not_a_unit_step_box():
    assert box_ranges((slice(None, None, 2),), (5,)) is None
    assert box_ranges((None,), (5,)) is None
    assert box_ranges((Ellipsis,), (5,)) is None
    assert box_ranges((1, 2), (5,)) is None
    assert box_ranges((slice(4, 1),), (5,)) == [(4, 4)]
    assert list(itertools.chain(*box_ranges((-1, slice(1, None)), (3, 4)))) == [2, 3, 1, 4]
