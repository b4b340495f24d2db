"""Process-wide settings: ``numaccel.config.<name> = value``.

Environment variables give the defaults:
``NUMACCEL_LOGS=recompiles,graph_breaks,guards,graphs`` prints those events as they happen.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field


def _env_logs() -> frozenset:
    raw = os.environ.get("NUMACCEL_LOGS", "")
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


LOG_KINDS = frozenset({"recompiles", "graph_breaks", "guards", "graphs", "all"})


@dataclass
class Config:
    #: a dim that changes between calls becomes symbolic (compiled once more, then reused)
    automatic_dynamic_shapes: bool = True
    #: cache entries per function; past it the function runs uncompiled (one warning)
    cache_size_limit: int = 8
    #: default backend of @accelerate
    default_backend: str = "cpu"
    #: event kinds printed to stderr (see module docstring)
    logs: frozenset = field(default_factory=_env_logs)

    @property
    def cpu_capability(self) -> str:
        """Instruction set of compiled CPU kernels: "avx512", "avx2" or "default"."""
        from .cpu_features import cpu_capability
        return cpu_capability()

    @cpu_capability.setter
    def cpu_capability(self, value: str) -> None:
        from .cpu_features import set_capability
        set_capability(value)

    def log_enabled(self, kind: str) -> bool:
        return kind in self.logs or "all" in self.logs


config = Config()


def log(kind: str, msg: str) -> None:
    if config.log_enabled(kind):
        print(f"[numaccel:{kind}] {msg}", file=sys.stderr)
