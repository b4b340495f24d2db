"""The shared scalar-expression renderer (used by the CPU wrapper, later by CUDA).

``render(node, args, in_dtypes)`` turns one elementwise node into a Python expression over
the (already loaded) scalar operands ``args``, with NumPy's semantics: operands are cast
to the ufunc's loop dtype, the result to the node's dtype. float16 and bfloat16 values
live in float32 registers (loaded from and stored to their uint16 bits). Transcendentals
come from ``numaccel.lower.mathlib`` (vectorizable, no libm calls).
"""
from __future__ import annotations

import numpy as np

from .mathlib_names import SOURCE_NAMES

NARROW = {"float16", "bfloat16"}


def reg_dtype(dt) -> str:
    """The dtype a value of ``dt`` has in registers."""
    name = np.dtype(dt).name
    return "float32" if name in NARROW else name


def cast(expr: str, src, dst) -> str:
    sn, dn = np.dtype(src).name, np.dtype(dst).name
    if dn in NARROW and sn != dn:
        # into float16/bfloat16: round like NumPy's cast (the register stays float32)
        rt = "f16" if dn == "float16" else "bf16"
        return f"{rt}_to_f32(f32_to_{rt}(np.float32({expr})))"
    s, d = reg_dtype(src), reg_dtype(dst)
    if s == d:
        return expr
    if d == "bool":
        return f"({expr} != 0)"
    return f"np.{d}({expr})"


def literal(value, dt) -> str:
    d = reg_dtype(dt)
    if d == "bool":
        return "True" if value else "False"
    if isinstance(value, float) and not np.isfinite(value):
        v = "np.nan" if value != value else ("np.inf" if value > 0 else "-np.inf")
        return f"np.{d}({v})"
    return f"np.{d}({value!r})"


_ARITH = {"add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
          "true_divide": "({0} / {1})", "divide": "({0} / {1})", "negative": "(-{0})", "positive": "(+{0})",
          "square": "({0} * {0})", "sqrt": "np.sqrt({0})", "absolute": "abs({0})",
          "fabs": "abs({0})", "floor": "np.floor({0})", "ceil": "np.ceil({0})",
          "trunc": "np.trunc({0})", "rint": "np.rint({0})",
          "reciprocal": "(1 / {0})",
          # NaN-propagating like NumPy: a NaN operand wins
          "maximum": "({0} if ({0} >= {1} or {0} != {0}) else {1})",
          "minimum": "({0} if ({0} <= {1} or {0} != {0}) else {1})",
          "fmax": "({0} if ({0} >= {1} or {1} != {1}) else {1})",
          "fmin": "({0} if ({0} <= {1} or {1} != {1}) else {1})",
          "copysign": "np.copysign({0}, {1})",
          "sign": "(np.sign({0}))",
          "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})",
          "bitwise_xor": "({0} ^ {1})", "invert": "(~{0})"}
# ops whose Numba result has the (float) type of their operands
_SAME_TYPE = {"add", "subtract", "multiply", "true_divide", "divide", "negative", "positive",
              "square", "absolute", "fabs", "maximum", "minimum", "fmax", "fmin"}
_COMPARE = {"less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=",
            "equal": "==", "not_equal": "!="}
_LOGICAL = {"logical_and": "({0} and {1})", "logical_or": "({0} or {1})",
            "logical_xor": "({0} != {1})", "logical_not": "(not {0})"}
_PREDICATES = {"isnan": "({0} != {0})", "isinf": "(abs({0}) == np.inf)",
               "isfinite": "(abs({0}) < np.inf)", "signbit": "np.signbit({0})"}
_FLOAT_ONLY = {"sqrt", "floor", "ceil", "trunc", "rint", "reciprocal", "copysign", "sign",
               "true_divide", "divide"} | set(SOURCE_NAMES) | set(_PREDICATES)
_INT_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "invert"}


def supported(node, in_dtypes) -> bool:
    """Can this elementwise node be rendered (else it runs as a NumPy call)?"""
    op = node.op
    dts = [np.dtype(d) for d in in_dtypes] + [node.aval.dtype]
    if any(d.kind in "cOSUVmM" and d.name != "bfloat16" for d in dts):
        return False
    if op in ("astype", "copy", "where", "clip"):
        return True
    if op == "round":
        return node.attrs.get("decimals", 0) == 0 and node.aval.dtype.kind == "f"
    if node.attrs.get("dtype") is not None or node.attrs.get("casting") is not None:
        return False
    loop = loop_dtype(node, in_dtypes)
    if op in _COMPARE or op in _LOGICAL:
        return True
    if op in _PREDICATES:
        return loop.kind == "f"
    if op in _INT_ONLY:
        return loop.kind in "biu"
    if op in _ARITH:
        if op in _FLOAT_ONLY and loop.kind != "f":
            return False
        if op == "absolute" and loop.kind == "b":
            return False
        return True
    if op in SOURCE_NAMES:
        return loop.name in ("float32", "float64") and reg_dtype(node.aval.dtype) == loop.name
    if op == "power":
        return loop.kind == "f" and loop.name in ("float32", "float64")
    return False


def loop_dtype(node, in_dtypes):
    """The dtype NumPy computes this ufunc in (inputs are cast to it)."""
    op = node.op
    out = node.aval.dtype
    if op in _COMPARE or op in _LOGICAL:
        if op in _LOGICAL:
            return np.dtype(bool)
        return np.result_type(*[np.dtype(reg_dtype(d)) for d in in_dtypes])
    if op in _PREDICATES:
        return np.dtype(reg_dtype(in_dtypes[0]))
    return np.dtype(reg_dtype(out))


def render(node, args, in_dtypes) -> str:
    """Expression for ``node`` applied to operand expressions ``args``."""
    op = node.op
    out = node.aval.dtype
    if op in ("astype", "copy"):
        return cast(args[0], in_dtypes[0], out)
    if op == "where":
        c = cast(args[0], in_dtypes[0], np.bool_)
        return f"({cast(args[1], in_dtypes[1], out)} if {c} else " \
               f"{cast(args[2], in_dtypes[2], out)})"
    if op == "clip":
        x = cast(args[0], in_dtypes[0], out)
        k = 1
        if node.attrs.get("has_lo", True):
            lo = cast(args[k], in_dtypes[k], out)
            x = _ARITH["maximum"].format(x, lo)
            k += 1
        if node.attrs.get("has_hi", True):
            hi = cast(args[k], in_dtypes[k], out)
            x = _ARITH["minimum"].format(x, hi)
        return x
    if op == "round":
        return f"np.rint({cast(args[0], in_dtypes[0], out)})"
    loop = loop_dtype(node, in_dtypes)
    # a float16/bfloat16 op first casts its operands to that dtype (e.g. a Python float)
    target = out if (out.name in NARROW and op not in _COMPARE and op not in _LOGICAL
                     and op not in _PREDICATES) else loop
    xs = [cast(a, d, target) for a, d in zip(args, in_dtypes)]
    if op in _COMPARE:
        return f"({xs[0]} {_COMPARE[op]} {xs[1]})"
    if op in _LOGICAL:
        return _LOGICAL[op].format(*xs)
    if op in _PREDICATES:
        return _PREDICATES[op].format(*xs)
    if op in _ARITH:
        e = _ARITH[op].format(*xs)
    elif op == "power":
        e = f"power_{'f32' if loop.name == 'float32' else 'f64'}({xs[0]}, {xs[1]})"
    else:
        e = f"{SOURCE_NAMES[op]}_{'f32' if loop.name == 'float32' else 'f64'}({xs[0]}" + \
            "".join(f", {x}" for x in xs[1:]) + ")"
    # Numba types mixed/small-int arithmetic its own way (int8 + int8 is int64): pin the
    # result to the node's dtype, which also wraps integers like NumPy. Float arithmetic on
    # operands already of the result's dtype keeps it: no pin (each pin is a call Numba
    # must type, which dominates compile time for large graphs)
    if out.kind == "f" and reg_dtype(out) == loop.name and op in _SAME_TYPE:
        return e
    if out.kind == "b":
        # bool arithmetic is logical in NumPy (True + True is True), not integer
        return f"({e} != 0)" if op in _ARITH else e
    return f"np.{reg_dtype(out)}({e})"
