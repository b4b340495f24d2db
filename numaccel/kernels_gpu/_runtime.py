"""Shared runtime of the GPU kernels: array intake, dtype kinds, bf16 bits, launch helpers.

Arrays come in three flavours and all kernels treat them alike:

* device arrays: CuPy arrays, Numba device arrays, or any object with
  ``__cuda_array_interface__`` (taken zero-copy through ``cuda.as_cuda_array``);
* :class:`Bf16Device`: a uint16 device buffer marked as bfloat16 (CuPy and the CUDA array
  interface have no bfloat16 type, so bf16 device data travels as its bits);
* NumPy arrays (bfloat16 through ml_dtypes included): copied to the device, and the results
  copied back, so a call with any host input returns host arrays.

Inside kernels every floating dtype is handled through a *kind* (``"f32"``, ``"f16"``,
``"bf16"``, ``"f64"``): ``LOAD[kind]`` widens one element to the compute type (float32, or
float64 for f64) and ``STORE[kind]`` narrows back (bf16 rounds to nearest even, bit-identical
to ml_dtypes). Under ``NUMBA_ENABLE_CUDASIM=1`` the two bf16 bit casts are plain NumPy
(the simulator has no libdevice); everything else is the same code.
"""
from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
from numba import cuda

try:        # numba-cuda >= 0.2x vendors its own core; older releases use numba's
    from numba.cuda import config as _cuda_config
    from numba.cuda import types as nt
except ImportError:     # pragma: no cover - depends on the installed numba-cuda
    from numba.core import config as _cuda_config
    from numba.core import types as nt

SIM: bool = bool(_cuda_config.ENABLE_CUDASIM)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
f16 = nt.float16
f32 = nt.float32
f64 = nt.float64
i32 = nt.int32
u32 = nt.uint32
u16 = nt.uint16

KINDS = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", bfloat16: "bf16",
         np.dtype(np.float64): "f64"}
FLOAT_KINDS = ("f32", "f16", "bf16", "f64")
# dtype of the buffer a kind travels in on the device (bf16 as its uint16 bits)
STORAGE = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
           "bf16": np.dtype(np.uint16), "f64": np.dtype(np.float64)}
NUMBA_STORAGE = {"f32": nt.float32, "f16": nt.float16, "bf16": nt.uint16, "f64": nt.float64}
HOST_DTYPE = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": bfloat16,
              "f64": np.dtype(np.float64)}



def devfn(fn):
    """``cuda.jit(device=True)``, force-inlined on the real target (the simulator has no
    ``forceinline`` option)."""
    if SIM:
        return cuda.jit(device=True)(fn)
    return cuda.jit(device=True, forceinline=True)(fn)


# ---------------------------------------------------------------- bf16 bits on the device
if SIM:
    def _u32_as_f32(v):
        return np.uint32(int(v) & 0xFFFFFFFF).view(np.float32)

    def _f32_as_u32(x):
        return int(np.float32(x).view(np.uint32))

    bf16_to_f32 = cuda.jit(device=True)(lambda b: _u32_as_f32(int(b) << 16))

    @cuda.jit(device=True)
    def f32_to_bf16(x):
        v = _f32_as_u32(x)
        if (v & 0x7FFFFFFF) > 0x7F800000:
            return np.uint16((v >> 16) | 0x40)
        return np.uint16(((v + 0x7FFF + ((v >> 16) & 1)) >> 16) & 0xFFFF)
else:
    from numba.cuda import libdevice

    @devfn
    def bf16_to_f32(b):
        return libdevice.int_as_float(i32(u32(b) << u32(16)))

    @devfn
    def f32_to_bf16(x):
        v = u32(libdevice.float_as_int(f32(x)))
        if (v & u32(0x7FFFFFFF)) > u32(0x7F800000):
            # NaN: keep the sign and top payload bits, force the quiet bit (as ml_dtypes)
            return u16((v >> u32(16)) | u32(0x40))
        return u16(u32(v + u32(0x7FFF) + ((v >> u32(16)) & u32(1))) >> u32(16))


@devfn
def _ld_f32(x):
    return f32(x)


@devfn
def _ld_f64(x):
    return f64(x)


@devfn
def _st_f32(v):
    return f32(v)


@devfn
def _st_f16(v):
    return f16(v)


@devfn
def _st_f64(v):
    return f64(v)


LOAD = {"f32": _ld_f32, "f16": _ld_f32, "bf16": bf16_to_f32, "f64": _ld_f64}
STORE = {"f32": _st_f32, "f16": _st_f16, "bf16": f32_to_bf16, "f64": _st_f64}
ACC = {"f32": f32, "f16": f32, "bf16": f32, "f64": f64}
ACC_NP = {"f32": np.float32, "f16": np.float32, "bf16": np.float32, "f64": np.float64}


# ---------------------------------------------------------------- arrays in and out
class Bf16Device:
    """A bfloat16 array on the device, held as its uint16 bits (no copy).

    Example::

        x = Bf16Device(cupy.zeros((4, 8), cupy.uint16))
        y = numaccel.kernels_gpu.softmax(x)      # -> Bf16Device
        y.copy_to_host()                          # -> ml_dtypes.bfloat16 ndarray
    """

    dtype = bfloat16

    def __init__(self, bits: Any):
        if not hasattr(bits, "__cuda_array_interface__") and not _is_sim_device(bits):
            raise TypeError(f"Bf16Device wraps a uint16 device array, got {type(bits)!r}")
        self.bits = bits
        if np.dtype(bits.dtype) != np.uint16:
            raise TypeError(f"Bf16Device wraps uint16 bits, got dtype {bits.dtype}")

    @property
    def shape(self) -> tuple:
        return tuple(self.bits.shape)

    @property
    def ndim(self) -> int:
        return len(self.bits.shape)

    def copy_to_host(self) -> np.ndarray:
        bits = self.bits
        host = bits.get() if hasattr(bits, "get") else _as_numba(bits).copy_to_host()
        return np.asarray(host).view(bfloat16)

    def __repr__(self):
        return f"Bf16Device(shape={self.shape})"


def _is_sim_device(x) -> bool:
    return SIM and type(x).__name__ == "FakeCUDAArray"


def _as_numba(x):
    if SIM:
        if _is_sim_device(x):
            return x
        raise TypeError(f"the CUDA simulator only takes its own device arrays or NumPy "
                        f"arrays, got {type(x).__name__}")
    return cuda.as_cuda_array(x)


def is_device(x) -> bool:
    """True for CuPy/Numba device arrays, CUDA-array-interface objects and Bf16Device."""
    return isinstance(x, Bf16Device) or hasattr(x, "__cuda_array_interface__") \
        or _is_sim_device(x)


class Intake:
    """Collects a call's inputs: moves host arrays over and remembers how to answer.

    ``arr(x)`` returns ``(device_array, kind_or_dtype)``; ``out(dev, kind)`` turns a device
    result into what the caller gets back (NumPy when any input was on the host, a CuPy array
    when an input was CuPy, else the Numba device array; bf16 as :class:`Bf16Device`).
    """

    def __init__(self):
        self.host = False
        self.cupy = False

    def arr(self, x, name: str = "array"):
        if isinstance(x, Bf16Device):
            return _as_numba(x.bits), "bf16"
        if is_device(x):
            if type(x).__module__.startswith("cupy"):
                self.cupy = True
            d = _as_numba(x)
            return d, KINDS.get(np.dtype(d.dtype), np.dtype(d.dtype))
        if not isinstance(x, (np.ndarray, np.generic, list, tuple, int, float, bool)):
            raise TypeError(f"{name}: expected a NumPy array, a device array or an object with "
                            f"__cuda_array_interface__, got {type(x).__name__}")
        self.host = True
        a = np.asarray(x)
        kind = KINDS.get(a.dtype, a.dtype)
        if a.dtype == bfloat16:
            a = a.view(np.uint16)
        if a.dtype == np.bool_:
            a = a.view(np.uint8)
        # (np.ascontiguousarray would turn 0-d into 1-d)
        return cuda.to_device(a if a.flags.c_contiguous else a.copy(order="C")), kind

    def out(self, dev, kind):
        if self.host:
            h = dev.copy_to_host()
            return h.view(bfloat16) if kind == "bf16" else h
        if kind == "bf16":
            return Bf16Device(_cupy_of(dev) if self.cupy else dev)
        return _cupy_of(dev) if self.cupy else dev


def _cupy_of(dev):
    import cupy
    return cupy.asarray(dev)


def empty(shape, kind_or_dtype):
    """A device array for ``kind`` (bf16 as uint16 bits)."""
    dt = STORAGE.get(kind_or_dtype, kind_or_dtype)
    return cuda.device_array(tuple(int(s) for s in shape), dtype=np.dtype(dt))


def strided_view(dev, shape, strides):
    """A view of ``dev`` with new shape/strides in bytes (no copy; zero strides allowed)."""
    shape = tuple(int(s) for s in shape)
    strides = tuple(int(s) for s in strides)
    if SIM:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        base = dev._ary if hasattr(dev, "_ary") else np.asarray(dev)
        return FakeCUDAArray(np.lib.stride_tricks.as_strided(base, shape, strides))
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return DeviceNDArray(shape, strides, dev.dtype, gpu_data=dev.gpu_data)


def reshape(dev, shape):
    """Reshape a C-contiguous device array (no copy)."""
    shape = tuple(int(s) for s in shape)
    item = dev.dtype.itemsize
    strides, acc = [], item
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return strided_view(dev, shape, tuple(reversed(strides)))


def is_c_contig(dev) -> bool:
    acc = dev.dtype.itemsize
    for s, st in zip(reversed(dev.shape), reversed(dev.strides)):
        if s != 1 and st != acc:
            return False
        acc *= s
    return True


# The simulator runs every thread as a Python thread: grid-stride loops let it use two
# blocks and still cover everything (the real device gets enough blocks to fill its SMs).
SIM_BLOCK = 8
_SIM_MAX_BLOCKS = 2


def grid_1d(n: int, block: int, max_blocks: int = 65535 * 4) -> int:
    """Blocks for a grid-stride loop over ``n`` items (at least 1)."""
    if SIM:
        max_blocks = min(max_blocks, _SIM_MAX_BLOCKS)
    return max(1, min(math.ceil(n / block), max_blocks))


def device_info() -> str:
    """One line naming the device the kernels run on (or the simulator)."""
    if SIM:
        return "CUDA simulator (NUMBA_ENABLE_CUDASIM=1)"
    if not cuda.is_available():
        return "no CUDA device"
    d = cuda.get_current_device()
    return f"{d.name.decode() if isinstance(d.name, bytes) else d.name} cc={d.compute_capability}"


def have_cupy() -> bool:
    """True when CuPy imports and sees a device (used for cuBLAS dispatch)."""
    if SIM:
        return False
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:       # noqa: BLE001 - any failure means "no CuPy path"
        return False
