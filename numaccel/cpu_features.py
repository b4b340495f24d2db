"""CPU instruction-set selection for compiled kernels (like PyTorch's ATEN_CPU_CAPABILITY).

``NUMACCEL_CPU_CAPABILITY=avx512|avx2|default`` (or ``numaccel.config.cpu_capability``
before the first compilation) selects what Numba may emit. The choice is process-wide and
part of Numba's cache key: Numba reads ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` when its
code generator starts, so it must be made before anything is compiled.
Default: AVX-512 where the CPU has it.
"""
from __future__ import annotations

import os
import sys

CAPABILITIES = ("avx512", "avx2", "default")
_NUMBA_ENV = {"avx2": ("haswell", "-avx512f"), "default": ("generic", "")}


def host_features() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    import llvmlite.binding as llvm
    return {f[1:] for f in llvm.get_host_cpu_features().flatten().split(",")
            if f.startswith("+")}


def resolve(requested: str | None) -> str:
    feats = host_features()
    best = "avx512" if "avx512f" in feats else ("avx2" if "avx2" in feats else "default")
    if not requested:
        return best
    req = requested.lower()
    if req not in CAPABILITIES:
        raise ValueError(f"NUMACCEL_CPU_CAPABILITY={requested!r}: choose one of {CAPABILITIES}")
    order = CAPABILITIES
    if order.index(req) < order.index(best):
        print(f"numaccel: this CPU has no {req}; using {best}", file=sys.stderr)
        return best
    return req


def _avx512_env():
    """The host CPU with 512-bit vectors: LLVM tunes many Intel cores (Skylake-X, Ice
    Lake, Rocket Lake...) to "prefer-256-bit", i.e. AVX-512 instructions on ymm registers;
    the capability "avx512" means zmm, so that tuning is switched off."""
    import llvmlite.binding as llvm
    feats = llvm.get_host_cpu_features().flatten()
    return llvm.get_host_cpu_name(), feats + ",-prefer-256-bit"


def apply(capability: str) -> None:
    """Point Numba at ``capability`` (before its first compilation)."""
    name, feats = _avx512_env() if capability == "avx512" else \
        _NUMBA_ENV.get(capability, (None, None))
    if name is None:
        os.environ.pop("NUMBA_CPU_NAME", None)
        os.environ.pop("NUMBA_CPU_FEATURES", None)
    else:
        os.environ["NUMBA_CPU_NAME"] = name
        os.environ["NUMBA_CPU_FEATURES"] = feats
    cfg = sys.modules.get("numba.core.config")
    if cfg is not None:
        cfg.CPU_NAME = name
        cfg.CPU_FEATURES = feats


_in_force = None


def init_from_env() -> str:
    global _in_force
    _in_force = resolve(os.environ.get("NUMACCEL_CPU_CAPABILITY"))
    user_numba = os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES")
    if os.environ.get("NUMACCEL_CPU_CAPABILITY") or (_in_force == "avx512" and
                                                     not user_numba):
        apply(_in_force)
    return _in_force


def cpu_capability() -> str:
    """The instruction set compiled kernels use in this process."""
    return _in_force or init_from_env()


def set_capability(value: str) -> None:
    global _in_force
    _in_force = resolve(value)
    apply(_in_force)
