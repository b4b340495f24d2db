"""Where numaccel's math-library functions live: names only, no Numba.

Kernel-source generation (``render``, ``cpu_codegen``) needs these tables; importing them
from here keeps Numba out of a process that runs every kernel from the native cache
(``numaccel.lower.native``). ``mathlib`` re-exports them.
"""
from __future__ import annotations

# The <op>_f32/<op>_f64 functions load on first access (module ``__getattr__``): a
# generated kernel imports the few it calls from their submodule (``LOCATION``), so a
# process imports and registers with Numba only those (all of them: ~35 ms measured).
_HOME = {
    "mathlib_exp_log": ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p"),
    "mathlib_trig": ("sin", "cos", "tan"),
    "mathlib_atan": ("arctan", "arcsin", "arccos", "arctan2"),
    "mathlib_hyper": ("arcsinh", "arccosh", "arctanh", "hypot", "logaddexp", "logaddexp2"),
    "mathlib_special": ("cbrt", "cosh", "erf", "power", "powi", "sigmoid", "sinh", "tanh"),
}
_CORE = ("copysign", "f32_as_i32", "f64_as_i64", "fma", "i32_as_f32", "i64_as_f64", "rint")

#: attribute name (``exp_f32``, ``fma``, ...) -> the module defining it.
LOCATION: dict[str, str] = {f"{base}_{sfx}": f"numaccel.lower.{mod}"
                            for mod, bases in _HOME.items() for base in bases
                            for sfx in ("f32", "f64")}
LOCATION.update({name: "numaccel.lower.mathlib_core" for name in _CORE})
# float32 sin/cos/tan valid up to mathlib_trig.TRIG_FAST_MAX_F32, and the predicate of
# the arguments they get wrong: map kernels' fast loop + fix-up loop (cpu_codegen)
LOCATION.update({f"{b}_f32": "numaccel.lower.mathlib_trig"
                 for b in ("sin_fast", "cos_fast", "tan_fast", "trig_big")})

_UNARY = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
          "tanh", "sinh", "cosh", "sigmoid", "arctan", "arcsin", "arccos", "erf", "cbrt",
          "arcsinh", "arccosh", "arctanh"]
_BINARY = ["arctan2", "power", "logaddexp", "logaddexp2", "hypot"]

#: NumPy ufunc name (or numaccel op name) -> base attribute name in this module.
SOURCE_NAMES: dict[str, str] = {n: n for n in _UNARY + _BINARY + ["powi"]}
SOURCE_NAMES.update({"float_power": "power", "expit": "sigmoid"})
