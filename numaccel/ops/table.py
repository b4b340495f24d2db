"""One place per op.

Every primitive (and every composite op such as ``sdpa`` or ``linear_24``) is an
``OpDef`` record registered here by name. Consumers of the graph (the reference
interpreter, the CPU/CUDA compilers, autodiff, export, quantization) look ops up by
name and read the fields they need:

- ``ref(*inputs, **attrs)``: the NumPy reference implementation, the spec every
  backend is tested against.
- ``infer(avals, **attrs)``: the shape/dtype rule, returns the output ``AVal``
  (or a tuple of them when ``nout > 1``).
- ``expr``: for elementwise ops, the scalar expression used by codegen.
- ``vjp``: the reverse-mode gradient rule.
- ``decompose(*inputs, **attrs)``: for composite ops, the same computation written
  with NumPy calls on (traced) arrays, so that a backend without a hand-written
  kernel can trace it into primitives.

Hand-written kernels are not stored here: they register per backend in
``numaccel.backends`` (``register_kernel``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

KINDS = ("elementwise", "reduce", "scan", "movement", "index", "contraction",
         "creation", "opaque", "composite")


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: str
    ref: Callable[..., Any]
    infer: Optional[Callable[..., Any]] = None
    expr: Optional[Any] = None
    vjp: Optional[Callable[..., Any]] = None
    decompose: Optional[Callable[..., Any]] = None
    nout: int = 1
    doc: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"op {self.name!r}: kind {self.kind!r} is not one of {KINDS}")


_OPS: dict[str, OpDef] = {}


def register_op(op: OpDef, *, replace: bool = False) -> OpDef:
    """Add ``op`` to the table. Registering a name twice is an error unless ``replace``."""
    if op.name in _OPS and not replace and _OPS[op.name] is not op:
        raise ValueError(f"op {op.name!r} is already registered; pass replace=True to override")
    _OPS[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    try:
        return _OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; registered ops: {sorted(_OPS)}") from None


def all_ops() -> dict[str, OpDef]:
    return dict(_OPS)
