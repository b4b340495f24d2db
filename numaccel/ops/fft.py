"""The ``fft`` op: one 1-D discrete Fourier transform along one axis, through NumPy's
pocketfft (``np.fft.fft/ifft/rfft/irfft``), and its multi-threaded CPU kernel.

The tracer (``trace/np_fft.py``) writes every ``np.fft`` transform, 1-D, 2-D or n-D, as
the sequence of 1-D transforms NumPy's own ``fftn``/``rfftn``/``irfftn`` make, so results
are NumPy's and a program with FFTs stays one graph (before, each was a graph break).

Attrs: ``kind`` ("c2c", "r2c" real to half spectrum, "c2r" its inverse), ``inverse``
(c2c only), ``n`` (points; the input is cut or zero-padded to it, to ``n // 2 + 1`` for
c2r), ``axis`` (non-negative), ``norm``. Dtypes as NumPy 2: single precision input
(float32, complex64) transforms in single precision, everything else in double.

CPU kernel: the transforms along ``axis`` are independent, so a large call is cut along
another axis into one piece per thread, each transformed by NumPy into its part of the
output (``out=``; pocketfft releases the GIL). Each 1-D transform is computed as in one
call, so the result is bit-identical to NumPy's (2048x2048 float64 ``rfft`` along rows:
15.7 ms in one call, 6.1 ms as two halves on 2 threads).
"""
from __future__ import annotations

import numpy as np

from ..backends import register_kernel
from ..ir import AVal
from .table import OpDef, register_op

_SINGLE = (np.dtype(np.float32), np.dtype(np.complex64))
_FUNCS = {("c2c", False): np.fft.fft, ("c2c", True): np.fft.ifft,
          ("r2c", False): np.fft.rfft, ("c2r", True): np.fft.irfft}


def fft_ref(a, kind, inverse, n, axis, norm):
    return _FUNCS[kind, inverse](a, n=n, axis=axis, norm=norm)


def out_aval(a: AVal, kind, n, axis) -> AVal:
    single = a.dtype in _SINGLE
    if kind == "c2r":
        dt = np.dtype(np.float32 if single else np.float64)
    else:
        dt = np.dtype(np.complex64 if single else np.complex128)
    shape = list(a.shape)
    shape[axis] = n // 2 + 1 if kind == "r2c" else n
    return AVal(tuple(shape), dt)


def fft_infer(avals, kind, inverse, n, axis, norm):
    return out_aval(avals[0], kind, n, axis)


FFT = register_op(OpDef(
    "fft", "opaque", fft_ref, fft_infer,
    doc="one 1-D FFT along axis (kind c2c/r2c/c2r, inverse, n, norm), as np.fft"),
    replace=True)


def _cpu_supports(a, kind, inverse, n, axis, norm) -> bool:
    return isinstance(a, np.ndarray) and a.ndim >= 2


def _cpu_fft(a, kind, inverse, n, axis, norm):
    from ..config import config
    from ..lower.cpu_threads import launch, num_threads
    fn = _FUNCS[kind, inverse]
    av = out_aval(AVal(a.shape, a.dtype), kind, n, axis)
    total = int(np.prod(av.shape))
    # the longest other axis is cut between the threads
    batch = max((d for d in range(a.ndim) if d != axis), key=lambda d: a.shape[d])
    rows = a.shape[batch]
    if total < config.parallel_min or rows < 2 or num_threads() < 2:
        return fn(a, n=n, axis=axis, norm=norm)
    out = np.empty(av.shape, av.dtype)
    lead = (slice(None),) * batch

    def piece(lo, hi):
        sl = lead + (slice(lo, hi),)
        fn(a[sl], n=n, axis=axis, norm=norm, out=out[sl])

    launch(piece, [], rows, total)
    return out


register_kernel("fft", "cpu", _cpu_fft, supports=_cpu_supports, name="fft_threads_cpu")
