"""The native kernel cache (numaccel.lower.native): kernels stored as machine code after
Numba compiles them, run by later processes through a ctypes trampoline without Numba."""
import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import numaccel
from numaccel.config import config
from numaccel.lower import cpu_codegen, native
from numaccel.lower.cpu_threads import launch


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMACCEL_CACHE_DIR", str(tmp_path))
    return tmp_path


def _kernels(body: str):
    src = cpu_codegen._PRELUDE + "\n" + cpu_codegen.KERNEL_DECORATOR + "\n" + \
        textwrap.dedent(body)
    return cpu_codegen.load_kernels(src)


def _is_native(fn) -> bool:
    return isinstance(fn, ctypes._CFuncPtr)


def _fresh(km):
    """The same kernels as a new process sees them (nothing loaded through Numba)."""
    return cpu_codegen.KernelModule(km._src, km.key, km.path)


SCALE = """
def kernel(a, o, s32, s64, flag, u, i, lo, hi):
    for r in range(lo, hi):
        for c in range(a.shape[1]):
            v = a[r, c] * s32 + s64
            o[r, c] = (v if flag else -v) + u - i
"""


@pytest.mark.parametrize("flag", [True, False])
def test_scalar_types_and_layouts(cache, flag):
    km = _kernels(SCALE)
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    scalars = (np.float32(1.5), 0.25, flag, np.uint64(3), -2)

    def ref(x):
        v = x * np.float32(1.5) + 0.25
        return (v if flag else -v) + np.uint64(3) - (-2)

    for x in (a, a[:, ::2], np.asfortranarray(a), a[1:1], a[::-1]):
        x.flags.writeable = x is not a      # readonly and writeable arrays: two keys
        o = np.zeros(x.shape, np.float64)
        km.kernel(x, o, *scalars, 0, x.shape[0])     # through Numba, entry stored
        km2 = _fresh(km)
        o2 = np.zeros(x.shape, np.float64)
        km2.kernel(x, o2, *scalars, 0, x.shape[0])   # a new process: native
        np.testing.assert_allclose(o, ref(x), rtol=1e-6)
        np.testing.assert_array_equal(o2, o)
        assert _is_native(km2.kernel.calls[native.arg_key((x, o2, *scalars, 0, 1))])
        assert not _is_native(km.kernel.calls[native.arg_key((x, o2, *scalars, 0, 1))])
    layouts = {k[0][2] & 3 for k in km.kernel.calls if k is not None}
    assert layouts == {0, 1, 2, 3}          # A, C, F, and 1-D empty (C and F)
    assert len(list(cache.glob("kernels/*.o"))) == len(km.kernel.calls)


def test_new_process_loads_native_without_numba(cache):
    prog = textwrap.dedent("""
        import sys, json
        import numpy as np, numaccel
        from numaccel.lower import native

        def f(x, g, b):
            mu = x.mean(axis=-1, keepdims=True)
            y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
            e = np.exp(y * g + b)
            return e / e.sum(axis=-1, keepdims=True), np.sin(x) * 2 + x.sum(axis=0)

        rng = np.random.default_rng(0)
        # (above parallel_min: step kernels; a mid-size graph runs as the compiled
        # wrapper, a Numba function)
        x = rng.standard_normal((600, 500)).astype(np.float32)
        g, b = np.float32(1.5), rng.standard_normal(500).astype(np.float32)
        got = numaccel.accelerate(f)(x, g, b)
        ok = all(np.allclose(u, v, rtol=1e-5, atol=1e-4) for u, v in zip(got, f(x, g, b)))
        print(json.dumps({"ok": ok, "numba": "numba" in sys.modules,
                          "native": native.loaded_entries()}))
    """)
    env = dict(os.environ, NUMACCEL_CACHE_DIR=str(cache))

    def run():
        out = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold = run()
    assert cold["ok"] and cold["numba"]
    warm = run()
    assert warm == {"ok": True, "numba": False, "native": warm["native"]}
    assert warm["native"] >= 2          # the row kernel and the map/reduce kernels


def test_corrupted_entry_is_rebuilt_never_run(cache):
    km = _kernels("""
    def kernel(a, o, lo, hi):
        for i in range(lo, hi):
            o[i] = a[i] * 3.0
    """)
    a = np.linspace(0, 1, 50)
    o = np.empty_like(a)
    km.kernel(a, o, 0, 50)
    key = native.arg_key((a, o, 0, 50))
    path = native.entry_path(km.path, "kernel", key)
    obj = path[:-5] + ".o"
    data = bytearray(open(obj, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(obj, "wb").write(bytes(data))
    native._loaded.pop(path, None)
    assert native.load(path) is None            # the hash does not match: removed
    assert not os.path.exists(path) and not os.path.exists(obj)
    km2 = cpu_codegen.KernelModule(km._src, km.key, km.path)   # a "new process"
    o2 = np.empty_like(a)
    km2.kernel(a, o2, 0, 50)                    # Numba again, entry rewritten
    np.testing.assert_array_equal(o2, a * 3.0)
    assert os.path.exists(path) and native.load(path) is not None


def test_unreadable_meta_is_a_miss(cache):
    km = _kernels("""
    def kernel(a, lo, hi):
        for i in range(lo, hi):
            a[i] += 1
    """)
    a = np.zeros(4)
    km.kernel(a, 0, 4)
    path = native.entry_path(km.path, "kernel", native.arg_key((a, 0, 4)))
    native._loaded.pop(path, None)
    with open(path, "w") as f:
        f.write("{not json")
    assert native.load(path) is None


def test_kernel_error_raises_through_numba(cache):
    km = _kernels("""
    def kernel(a, o, lo, hi):
        for i in range(lo, hi):
            if a[i] < 0:
                raise ValueError("negative input")
            o[i] = a[i] * 2
    """)
    a = np.arange(6.0)
    o = np.empty_like(a)
    km.kernel(a, o, 0, 6)
    km = _fresh(km)
    km.kernel(a, o, 0, 6)
    np.testing.assert_array_equal(o, a * 2)
    assert any(_is_native(f) for f in km.kernel.calls.values())
    b = a - 3
    with pytest.raises(ValueError, match="negative input"):
        km.kernel(b, o, 0, 6)       # native returns a status; Numba raises the error


def test_scratch_allocation_and_threads(cache, monkeypatch):
    # np.empty inside a kernel: NRT allocation provided by the native runtime
    km = _kernels("""
    def kernel(a, o, lo, hi):
        t = np.empty(a.shape[1], np.float64)
        for r in range(lo, hi):
            for c in range(a.shape[1]):
                t[c] = a[r, c] * a[r, c]
            s = 0.0
            for c in range(a.shape[1]):
                s += t[c]
            o[r] = s
    """)
    monkeypatch.setattr(config, "parallel_min", 1)
    monkeypatch.setattr(config, "num_threads", 3)
    a = np.random.default_rng(1).standard_normal((101, 33))
    for i in range(3):
        km = _fresh(km) if i == 1 else km
        o = np.full(101, np.nan)
        launch(km.kernel, [a, o], 101, a.size)
        np.testing.assert_allclose(o, (a * a).sum(axis=1), rtol=1e-12)
    assert any(_is_native(f) for f in km.kernel.calls.values())


def test_switched_off_runs_numba_only(cache, monkeypatch):
    monkeypatch.setattr(config, "native_kernels", False)
    km = _kernels("""
    def kernel(a, lo, hi):
        for i in range(lo, hi):
            a[i] = i
    """)
    a = np.zeros(5)
    km.kernel(a, 0, 5)
    km.kernel(a, 0, 5)
    np.testing.assert_array_equal(a, np.arange(5.0))
    assert not any(_is_native(f) for f in km.kernel.calls.values())
    assert not list(cache.glob("kernels/*.o"))


def test_accelerate_results_with_native_entries(cache):
    # the same compiled graph after its kernels moved to native entries: equal results
    f = numaccel.accelerate(lambda x, y: (np.exp(-x) * y + 1, (x * y).sum(axis=1)))
    rng = np.random.default_rng(2)
    for shape in [(600, 500), (0, 500), (1, 500)]:
        x, y = rng.standard_normal(shape), rng.standard_normal(shape)
        for _ in range(2):
            got = f(x, y)
            np.testing.assert_allclose(got[0], np.exp(-x) * y + 1, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(got[1], (x * y).sum(axis=1), rtol=1e-10)


def test_python_ints_beyond_int64_go_through_numba(cache):
    # ctypes would wrap such an int silently: it never takes the native path
    km = _kernels("""
    def kernel(o, s, lo, hi):
        for i in range(lo, hi):
            o[i] = s % 1000
    """)
    o = np.zeros(3)
    for s in (5, -3, 2**62):
        km.kernel(o, s, 0, 3)
        km.kernel(o, s, 0, 3)
        np.testing.assert_array_equal(o, float(s % 1000))
    assert native.arg_key((o, 2**63, 0, 3)) is None
    assert native.arg_key((o, -2**63 - 1, 0, 3)) is None
    assert native.arg_key((o, 2**63 - 1, 0, 3)) is not None
