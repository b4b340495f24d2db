"""Process-wide settings: ``numaccel.config.<name> = value``.

Environment variables give the defaults:
``NUMACCEL_LOGS=recompiles,graph_breaks,guards,graphs`` prints those events as they happen.
``NUMACCEL_PARALLEL_MIN=<elements>`` sets ``parallel_min``.
``NUMACCEL_NATIVE_KERNELS=0`` sets ``native_kernels`` off.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field


def _env_logs() -> frozenset:
    raw = os.environ.get("NUMACCEL_LOGS", "")
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


def _env_parallel_min() -> int:
    # '' counts as unset (a shell's NUMACCEL_PARALLEL_MIN= must not crash the import)
    return int(os.environ.get("NUMACCEL_PARALLEL_MIN") or 1 << 18)


def _env_flag(name: str):
    # on unless the variable says 0/false/no/off
    return lambda: os.environ.get(name, "1").strip().lower() not in ("0", "false", "no", "off")


LOG_KINDS = frozenset({"recompiles", "graph_breaks", "guards", "graphs", "all"})


@dataclass
class Config:
    #: a dim that changes between calls becomes symbolic (compiled once more, then reused)
    automatic_dynamic_shapes: bool = True
    #: cache entries per function; past it the function runs uncompiled (one warning)
    cache_size_limit: int = 8
    #: a graph-break segment is compiled the N-th time it is seen (same structure, input
    #: shapes and dtypes); before that the reference interpreter runs it, so segments that
    #: change every loop iteration are never compiled. 1: compile on first sight
    segment_compile_after: int = 2
    #: segments whose ops produce fewer elements than this (in total) always run on the
    #: reference interpreter: for them NumPy's calls are cheaper than compiled kernels
    segment_min_elements: int = 0
    #: a call that meets more new segments than this marks its function as making
    #: loop-variant segments: from then on only segments that repeat within a call compile
    segment_churn_limit: int = 16
    #: how a function with graph breaks runs after its first call: "trace" (re-run it
    #: under tracing, the compiled segments in between), "eager" (plain NumPy) or "auto"
    #: (per argument shapes, whichever of the two was faster when last timed)
    segmented_mode: str = "auto"
    #: small static-shape graphs run as ONE generated Numba function (False: the Python
    #: loop over kernel steps, for debugging)
    compiled_wrapper: bool = True
    #: elements from which a generated CPU kernel launch is split between threads
    #: (default ``NUMACCEL_PARALLEL_MIN``, else 2^18); smaller ones run on the calling
    #: thread, and graphs whose nodes are all smaller may run as the compiled wrapper
    parallel_min: int = field(default_factory=_env_parallel_min)
    #: threads of a large generated CPU kernel launch (0: ``NUMBA_NUM_THREADS``, which
    #: defaults to the CPU count)
    num_threads: int = 0
    #: bytes the cpu backend may hold in reused output buffers (numaccel.lower.pool;
    #: 0: every output is a fresh np.empty)
    buffer_pool_bytes: int = 1 << 30
    #: generated kernels run from the native cache (numaccel.lower.native: a new process
    #: loads their machine code without importing Numba); default
    #: ``NUMACCEL_NATIVE_KERNELS`` (0 turns it off: every kernel through Numba)
    native_kernels: bool = field(default_factory=_env_flag("NUMACCEL_NATIVE_KERNELS"))
    #: a graph's first call runs on the reference interpreter while a worker thread
    #: compiles it; later calls use the compiled code once it is ready (trace/background.py;
    #: default ``NUMACCEL_BACKGROUND_COMPILE``, 0 turns it off: the first call compiles)
    background_compile: bool = field(default_factory=_env_flag("NUMACCEL_BACKGROUND_COMPILE"))
    #: a ``while`` loop on traced values runs as one compiled step per iteration once
    #: its first iteration has run (trace/loop_capture.py; default
    #: ``NUMACCEL_CAPTURE_LOOPS``, 0 turns it off: the loop re-traces every iteration)
    capture_loops: bool = field(default_factory=_env_flag("NUMACCEL_CAPTURE_LOOPS"))
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
