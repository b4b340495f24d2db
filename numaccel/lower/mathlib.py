r"""numaccel's vectorizable transcendental functions for Numba kernels (the index module).

This llvmlite has no SVML, so ``np.exp``/``math.sin``/... inside a Numba loop become scalar
libm calls and the loop stays scalar. The functions here are plain arithmetic (range
reduction, fma polynomials, exponent bit tricks, table gathers) and ``inline="always"``, with
every special case written as a select, so LLVM's loop vectorizer widens a loop calling them
to zmm (AVX-512) or ymm code. None of them calls libm, on any path: large sin/cos/tan
arguments are reduced by a branch-free Payne-Hanek (exponent-indexed table of 2/pi bits).

Interface for generated code
----------------------------
* One function per (operation, dtype), named ``<base>_f32`` / ``<base>_f64``, importable
  from this module: ``from numaccel.lower.mathlib import exp_f32``. Each takes and returns
  scalars of exactly that float type (two arguments for ``arctan2``/``power``; ``powi_*``
  takes ``(x, integer n)``). float16/bfloat16 callers compute in float32.
* ``MATH_FUNCS[name][dtype_name]`` -> that function, e.g. ``MATH_FUNCS["exp"]["float32"]``;
  ``name`` is the NumPy ufunc name (plus ``"sigmoid"`` and ``"powi"``).
* ``SOURCE_NAMES[ufunc_name]`` -> the base attribute name; ``source_name("exp",
  "float32") == "exp_f32"`` gives the full name to render into source.
* ``LOCATION[full_name]`` -> the submodule defining it (``"numaccel.lower.mathlib_exp_log"``
  for ``exp_f32``): generated kernels import only what they call from there. This index
  loads a function's submodule on first access.
* Generic ``exp(x)``, ``sin(x)``, ... (same base names): Python functions that call NumPy
  when called from Python and dispatch on the argument type inside Numba code (a
  ``numba.extending.overload``); two-argument ones use float64 unless both are float32.
* sqrt/abs/floor/ceil/min/max need nothing: LLVM vectorizes them natively.
* Do not compile callers with ``fastmath`` flags ``nnan``/``ninf`` (or ``fastmath=True``):
  the NaN/inf selects would be folded away. Plain ``fma`` contraction is fine.

Accuracy
--------
Max error in ulp of the result type, measured by ``tests/test_mathlib.py`` against a wider
reference (NumPy float64 for float32 inputs, NumPy long double for float64 inputs; erf
against ``math.erf``) over dense random ranges, random bit patterns over the whole float
range, and special values. NaN/inf/overflow/underflow/subnormals and the sign of zero follow
NumPy. Error bounds checked by the tests (``MAX_ULP``):

==========  =======  =======  ====================================================
function    float32  float64  notes
==========  =======  =======  ====================================================
exp         1        1
exp2        1        1
expm1       2        2
log         1        1
log2        1        1
log10       1        1
log1p       2.5      1.5
sin         1        1        whole range (float32: two paths, see below)
cos         1        1        whole range (float32: two paths, see below)
tan         1.5      2.5      whole range
tanh        3        3
sinh        2.5      2.5
cosh        2        2
sigmoid     3        3        1 / (1 + exp(-x)), e / (1 + e) for x < 0
arctan      1.5      1.5
arcsin      2.5      2.5      via arctan2(x, sqrt((1-x)(1+x)))
arccos      2.5      2.5      via arctan2(sqrt((1-x)(1+x)), x)
arctan2     2        2        all C99 special cases
erf         1        2.5      float32 through float64; bound includes math.erf's error
power       1        2        float32 through float64; C99 pow special cases
cbrt        1        1        float32 through float64
arcsinh     1        3        float32 through float64 (also arccosh, arctanh)
arccosh     1        3
arctanh     1        3
logaddexp   1        3        float32 via float64; ulp of max(|result|, |x|, |y|) *
logaddexp2  1        3        as logaddexp
hypot       1        1.5      np.hypot in Numba would call libm
==========  =======  =======  ====================================================

\* max(x, y) + log1p(exp(-|x - y|)) cancels where the result crosses zero; NumPy's
formula is the same and its error there is identical.

Known limits: float64 sin/cos/tan reduce with ~2^-100 absolute precision, so the few doubles
lying within ~2^-55 of a multiple of pi/2 far above 2^60 (e.g. the classic worst case
6381956970095103 * 2^797) get a few hundred ulp relative (absolute error still < 1e-30);
NumPy's own cos is off by ~8 ulp there. ``powi`` uses binary powering (error grows like
log2(n) ulp) and is meant for small integer exponents; constant small powers are best
expanded into multiplications by the renderer.

Compile cost: ``inline="always"`` is Numba-IR inlining (LLVM does not inline across Numba
dispatchers, and an out-of-line call would stop vectorization), so each call site adds
roughly 0.2 s (exp, log) to 1.2 s (float64 power) of CPU compile time; cache the kernels.
float32 erf/power/cbrt/arc*h run in float64 (8 lanes per zmm, not 16).

float32 sin/cos/tan compute in float32 (16 lanes): a float32 Cody-Waite reduction for |x|
<= ``mathlib_trig.TRIG_FAST_MAX_F32`` (2^18), the Payne-Hanek above. Measured over every
finite float32 (``scripts/check_trig_f32.py``): sin 0.88, cos 0.80, tan 1.11 ulp;
NumPy's own float32 results differ from these by at most 2, 2 and 4 ulp (its tan is ~3.6
ulp off). ``sin_f32`` computes both reductions in every lane (a select, ~5x the cost of the
fast path), so map kernels call ``sin_fast_f32`` (bit-identical up to the bound, wrong
above it) in their vectorized loop with a per-block flag from ``trig_big_f32``, and rerun
only the flagged blocks with ``sin_f32`` (``cpu_codegen.map_source``).

Example::

    import numba, numpy as np
    from numaccel.lower.mathlib import exp_f32, sin_f32

    @numba.njit(parallel=True)
    def fused(x, y, out):
        for i in numba.prange(x.size):
            out[i] = sin_f32(x[i]) * y[i] + exp_f32(-x[i]) * np.float32(0.5)
"""
from __future__ import annotations

import importlib
import math
import sys

import numpy as np
from numba import types
from numba.extending import overload

from .mathlib_names import _BINARY, _CORE, _HOME, _UNARY, LOCATION, SOURCE_NAMES  # noqa: F401

__all__ = [
    "MATH_FUNCS",
    "MAX_ULP",
    "SOURCE_NAMES",
    "copysign",
    "f32_as_i32",
    "f64_as_i64",
    "fma",
    "i32_as_f32",
    "i64_as_f64",
    "rint",
    "source_name",
]

_SUFFIX = {"float32": "f32", "float64": "f64"}

#: ``MATH_FUNCS[name][dtype name]`` -> Numba-inlinable scalar function (imports the whole
#: library on first access).
MATH_FUNCS: dict[str, dict[str, object]]


def __getattr__(name: str):
    if name in LOCATION:
        fresh = LOCATION[name] not in sys.modules
        value = getattr(importlib.import_module(LOCATION[name]), name)
        if fresh:
            # a first access may come from Numba typing a caller (``mathlib.exp_f32`` in
            # an njit function): the submodule's intrinsics must be in Numba's typing and
            # target contexts before that caller compiles on (refresh is incremental)
            from numba.core.registry import cpu_target
            cpu_target.target_context.refresh()
    elif name == "MATH_FUNCS":
        value = {base: {dt: __getattr__(f"{base}_{sfx}") for dt, sfx in _SUFFIX.items()}
                 for base in _UNARY + _BINARY + ["powi"]}
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(LOCATION) | {"MATH_FUNCS"})

#: Error bounds in ulp checked by the tests (the table in the module docstring).
MAX_ULP: dict[str, dict[str, float]] = {
    "exp": (1, 1), "exp2": (1, 1), "expm1": (2, 2), "log": (1, 1), "log2": (1, 1),
    "log10": (1, 1), "log1p": (2.5, 1.5), "sin": (1, 1), "cos": (1, 1), "tan": (1.5, 2.5),
    "tanh": (3, 3), "sinh": (2.5, 2.5), "cosh": (2, 2), "sigmoid": (3, 3),
    "arctan": (1.5, 1.5), "arcsin": (2.5, 2.5), "arccos": (2.5, 2.5), "arctan2": (2, 2),
    "erf": (1, 2.5), "power": (1, 2), "cbrt": (1, 1), "arcsinh": (1, 3), "arccosh": (1, 3),
    "arctanh": (1, 3), "logaddexp": (1, 3), "logaddexp2": (1, 3), "hypot": (1, 1.5),
}
MAX_ULP = {k: {"float32": v[0], "float64": v[1]} for k, v in MAX_ULP.items()}


def source_name(op: str, dtype) -> str:
    """Attribute name to render for NumPy ufunc ``op`` on ``dtype`` (float32/float64).

    >>> source_name("exp", "float32")
    'exp_f32'
    """
    dt = np.dtype(dtype).name
    if op not in SOURCE_NAMES:
        raise NotImplementedError(
            f"numaccel.lower.mathlib has no vectorizable {op!r}; supported: "
            f"{sorted(SOURCE_NAMES)}. Call the NumPy ufunc outside the fused kernel instead.")
    if dt not in _SUFFIX:
        raise TypeError(
            f"mathlib.{op} takes float32 or float64, got {dt}; compute float16/bfloat16 "
            f"in float32 and integers in float64.")
    return f"{SOURCE_NAMES[op]}_{_SUFFIX[dt]}"


# ------------------------------------------------------------------ generic dispatchers
_NUMPY_REF = {"sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
              "erf": np.vectorize(math.erf, otypes=[np.float64])}


def _make_generic(base: str, nargs: int):
    ref = _NUMPY_REF.get(base, getattr(np, base, None))

    # Numba finds an overload only if it is registered before the caller compiles, so
    # the stubs exist from import on; the functions they call load when first typed.
    if nargs == 1:
        def stub(x):
            return ref(x)

        @overload(stub, inline="always")
        def _ov(x):
            f32, f64 = __getattr__(f"{base}_f32"), __getattr__(f"{base}_f64")
            if x == types.float32:
                return lambda x: f32(x)
            if isinstance(x, (types.Float, types.Integer)):
                return lambda x: f64(np.float64(x))
            return None
    else:
        def stub(x, y):
            return ref(x, y)

        @overload(stub, inline="always")
        def _ov(x, y):
            f32, f64 = __getattr__(f"{base}_f32"), __getattr__(f"{base}_f64")
            if x == types.float32 and y == types.float32:
                return lambda x, y: f32(x, y)
            if all(isinstance(t, (types.Float, types.Integer)) for t in (x, y)):
                return lambda x, y: f64(np.float64(x), np.float64(y))
            return None

    stub.__name__ = stub.__qualname__ = base
    stub.__doc__ = (f"Generic {base}: dispatches to {base}_f32 / {base}_f64 in Numba code "
                    f"(float64 for mixed or integer arguments).")
    return stub


for _b in _UNARY:
    globals()[_b] = _make_generic(_b, 1)
for _b in _BINARY:
    globals()[_b] = _make_generic(_b, 2)
del _b
