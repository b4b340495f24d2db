"""Shared test helpers: ``check_np`` compares an accelerated call with plain NumPy."""
from __future__ import annotations

import copy
import os

import ml_dtypes
import numpy as np
import pytest

# the suite inspects what a call compiled right after it: first calls compile on the
# caller's thread here (test_background.py tests the default, background compiles);
# NUMACCEL_BACKGROUND_COMPILE=1 runs the whole suite the default way
os.environ.setdefault("NUMACCEL_BACKGROUND_COMPILE", "0")
# NUMACCEL_SETTLE_S=<s> makes the demo's and bench's timed runs busy-wait for BLAS threads
# first (demo.settle): the tests check what they report, not how fast, so they never wait
os.environ.setdefault("NUMACCEL_SETTLE_S", "0")

import numaccel  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)

_TOL = {"float16": (2e-3, 1e-3), "bfloat16": (2e-2, 1e-2), "float32": (1e-5, 1e-6),
        "float64": (1e-12, 1e-12), "complex64": (1e-5, 1e-6), "complex128": (1e-12, 1e-12)}


def assert_same(got, ref, path="result", rtol=None, atol=None):
    """Same structure, type class (scalar vs array), dtype, shape and values as NumPy."""
    if isinstance(ref, (tuple, list)):
        assert isinstance(got, type(ref)), f"{path}: {type(got)} vs {type(ref)}"
        assert len(got) == len(ref), f"{path}: length {len(got)} vs {len(ref)}"
        for i, (g, r) in enumerate(zip(got, ref)):
            assert_same(g, r, f"{path}[{i}]", rtol, atol)
        return
    if isinstance(ref, dict):
        assert isinstance(got, dict) and list(got) == list(ref), f"{path}: keys differ"
        for k in ref:
            assert_same(got[k], ref[k], f"{path}[{k!r}]", rtol, atol)
        return
    if ref is None or isinstance(ref, (str, bool, int, float, complex)):
        assert type(got) is type(ref), f"{path}: {type(got)} vs {type(ref)}"
        if isinstance(ref, float) and np.isnan(ref):
            assert np.isnan(got)
        elif isinstance(ref, (float, complex)):
            assert np.isclose(got, ref, rtol=rtol or 1e-12, atol=atol or 0), f"{path}"
        else:
            assert got == ref, f"{path}: {got!r} vs {ref!r}"
        return
    if isinstance(ref, np.generic):
        assert isinstance(got, np.generic), f"{path}: expected a NumPy scalar, got {type(got)}"
    else:
        assert isinstance(got, np.ndarray) and type(got) is np.ndarray, \
            f"{path}: expected ndarray, got {type(got)}"
    g, r = np.asarray(got), np.asarray(ref)
    assert g.dtype == r.dtype, f"{path}: dtype {g.dtype} vs {r.dtype}"
    assert g.shape == r.shape, f"{path}: shape {g.shape} vs {r.shape}"
    if r.dtype.kind in "fc" or r.dtype == BF16:
        rt, at = _TOL.get(r.dtype.name, (1e-6, 1e-6))
        rt, at = rtol if rtol is not None else rt, atol if atol is not None else at
        gg = g.astype(np.float32) if r.dtype == BF16 else g
        rr = r.astype(np.float32) if r.dtype == BF16 else r
        np.testing.assert_allclose(gg, rr, rtol=rt, atol=at, equal_nan=True, err_msg=path)
    else:
        np.testing.assert_array_equal(g, r, err_msg=path)


def check_np(fn, *args, backend=None, fullgraph=False, calls=2, rtol=None, atol=None,
             **kwargs):
    """Run ``fn`` with NumPy and accelerated (``calls`` times, so cached replays are
    checked too) on deep copies of the arguments; compare results and mutated arguments.
    Returns the accelerated function (for counters)."""
    ref_args = copy.deepcopy((args, kwargs))
    ref = fn(*ref_args[0], **ref_args[1])
    # NUMACCEL_TEST_BACKEND=cpu runs the whole op suite through the cpu backend
    backend = backend or os.environ.get("NUMACCEL_TEST_BACKEND", "numpy")
    acc = numaccel.accelerate(fn, backend=backend, fullgraph=fullgraph)
    for _ in range(calls):
        got_args = copy.deepcopy((args, kwargs))
        got = acc(*got_args[0], **got_args[1])
        assert_same(got, ref, rtol=rtol, atol=atol)
        assert_same(got_args, ref_args, path="arguments after the call", rtol=rtol, atol=atol)
    return acc


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def step_wrapper():
    """Kernel tests (``pytestmark = pytest.mark.usefixtures("step_wrapper")``): small
    inputs would otherwise run through the compiled wrapper (tested in
    test_cpu_wrapper.py), not the kernels and steps these tests inspect."""
    numaccel.config.compiled_wrapper = False
    yield
    numaccel.config.compiled_wrapper = True


@pytest.fixture
def traced_loops():
    """Loop-capture tests: every call re-traces (the auto policy could run later calls
    as plain NumPy) and loops are captured."""
    saved = numaccel.config.segmented_mode, numaccel.config.capture_loops
    numaccel.config.segmented_mode = "trace"
    numaccel.config.capture_loops = True
    yield
    numaccel.config.segmented_mode, numaccel.config.capture_loops = saved


def captured(acc):
    """Loops of ``acc`` run as captured steps, over all its calls."""
    return sum(s.captured for s in acc.loop_sites)


def cpu(fn, *args, **kw):
    """``check_np`` on the cpu backend."""
    return check_np(fn, *args, backend="cpu", **kw)


def kernels_of(acc):
    """The compiled steps of ``acc``'s last entry (failing if it fell back to the
    reference interpreter)."""
    run = acc.entries[-1].run
    assert hasattr(run, "steps"), "the cpu backend fell back to the reference interpreter"
    return run

