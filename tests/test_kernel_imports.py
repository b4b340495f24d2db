"""What a process imports to compile and run kernels (first-call and warm-start cost).

Generated kernel modules bind only the library functions they call, so a float32
program never imports ml_dtypes or the unused parts of mathlib; the kernel file name
covers the library sources, so an edited library is never served from a stale cache.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from numaccel.lower import cpu_codegen


def _run(code, tmp_path):
    env = dict(os.environ, NUMACCEL_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, text=True,
                         capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_library_imports_name_only_what_the_source_calls():
    body = ("def kernel_ser(a, o, n):\n"
            "    for i in range(n):\n"
            "        o[i] = exp_f32(a[i]) + log_f64(a[i]) + f32_to_bf16(a[i]) + my_f32\n")
    lines = cpu_codegen._library_imports(body).splitlines()
    assert lines == ["from numaccel.kernels_cpu.bf16 import f32_to_bf16",
                     "from numaccel.lower.mathlib_exp_log import exp_f32, log_f64"]
    assert cpu_codegen._library_imports("def k(a):\n    return a + 1\n") == ""


def test_kernel_module_binds_used_functions_and_computes(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMACCEL_CACHE_DIR", str(tmp_path))
    src = cpu_codegen._PRELUDE + (
        "\n@numba.njit(cache=True, error_model='numpy')\n"
        "def kernel_ser(a, o):\n"
        "    for i in range(a.size):\n"
        "        o[i] = sin_f64(a[i]) * exp_f64(-a[i])\n")
    mod = cpu_codegen.load_source(src)
    assert {"sin_f64", "exp_f64"} <= set(vars(mod))
    assert not {"cos_f64", "log_f64", "bf16_to_f32", "_ml"} & set(vars(mod))
    with open(mod.__file__) as f:
        assert cpu_codegen._LIB_MARK not in f.read()
    a = np.linspace(-3, 3, 1001)
    out = np.empty_like(a)
    mod.kernel_ser(a, out)
    np.testing.assert_allclose(out, np.sin(a) * np.exp(-a), rtol=1e-14, atol=1e-300)
    assert cpu_codegen.load_source(src) is mod      # memo: same source, same module


FLOAT32_PROGRAM = r"""
import sys
import numpy as np, numaccel
before = "ml_dtypes" in sys.modules
f = numaccel.accelerate(lambda x: np.exp(x) * 2 + x.sum())
x = np.linspace(0, 1, 1000, dtype=np.float32)
ok = np.allclose(f(x), np.exp(x) * 2 + x.sum(), rtol=1e-5)
print(before, "ml_dtypes" in sys.modules, "numaccel.lower.mathlib_trig" in sys.modules, ok,
      numaccel.bfloat16 is __import__("ml_dtypes").bfloat16)
"""


def test_float32_program_imports_neither_ml_dtypes_nor_unused_mathlib(tmp_path):
    for _ in range(2):      # cold, then warm from the disk cache
        assert _run(FLOAT32_PROGRAM, tmp_path) == ["False", "False", "False", "True", "True"]


LAZY_MATHLIB = r"""
import sys
import numba, numpy as np
from numaccel.lower import mathlib
loaded = sorted(m for m in sys.modules if m.startswith("numaccel.lower.mathlib_")
                and m != "numaccel.lower.mathlib_names")     # the name tables only

@numba.njit
def g(x):
    # first accesses from inside Numba typing: a name, a generic, an intrinsic
    return mathlib.sin_f32(np.float32(x)) + mathlib.power(x, 2.0) + mathlib.f64_as_i64(x)

ref = (mathlib.sin_f32(np.float32(0.5)) + mathlib.power_f64(0.5, 2.0)
       + np.float64(0.5).view(np.int64))
print(loaded == [], g(0.5) == ref)
"""


def test_mathlib_functions_load_lazily_and_from_numba_typing(tmp_path):
    assert _run(LAZY_MATHLIB, tmp_path) == ["True", "True"]


def test_mathlib_location_covers_every_function():
    import importlib

    from numaccel.lower import mathlib
    assert set(mathlib.MATH_FUNCS) == set(mathlib.SOURCE_NAMES.values())
    for name, module in mathlib.LOCATION.items():
        assert getattr(importlib.import_module(module), name) is getattr(mathlib, name)
    names = {f"{b}_{s}" for b in mathlib.MATH_FUNCS for s in ("f32", "f64")}
    assert names <= set(mathlib.LOCATION) and names <= set(dir(mathlib))
    with pytest.raises(AttributeError, match="no attribute 'nope_f32'"):
        mathlib.nope_f32  # noqa: B018


def test_library_hash_changes_with_library_source(tmp_path):
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "mathlib_x.py").write_text("a = 1\n")
    (lower / "other.py").write_text("b = 1\n")
    h0 = cpu_codegen._library_hash(str(tmp_path))
    (lower / "other.py").write_text("b = 2\n")      # not a library file
    assert cpu_codegen._library_hash(str(tmp_path)) == h0
    (lower / "mathlib_x.py").write_text("a = 2\n")
    assert cpu_codegen._library_hash(str(tmp_path)) != h0
    real = os.path.dirname(os.path.dirname(cpu_codegen.__file__))
    assert cpu_codegen._versions().endswith(f"lib {cpu_codegen._library_hash(real)}")
