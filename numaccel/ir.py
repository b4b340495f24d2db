"""Core data of the graph IR: symbolic dims, abstract values, nodes, graphs.

Small, frozen and printable. A dim is an ``int`` or a ``Sym`` expression (see
``numaccel.trace.symbolic``); shape rules must use plain arithmetic on dims (``+``, ``-``,
``*``, ``//``) and never call ``int()`` on them, so they work for symbolic dims too.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AVal:
    """What tracing knows of an array: its shape (ints or symbolic dims) and dtype."""

    shape: tuple
    dtype: np.dtype
    #: a Python scalar kind ("bool", "int", "float", "complex") for NEP 50 weak scalars
    weak: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self):
        if self.weak:
            return f"py{self.weak}"
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"
