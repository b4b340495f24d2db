"""``np.fft`` transforms traced as ``fft`` ops (ops/fft.py), one per transformed axis, in
the order NumPy's ``_raw_fftnd``/``rfftn``/``irfftn`` apply them (so results are
NumPy's), and ``fftshift``/``ifftshift`` as rolls.

Traced: float32/64, complex64/128, integer and bool inputs (NumPy casts those to
double), ``n``/``s`` of positive ints (``-1`` in ``s``: the whole axis), ``norm`` of
None/"backward"/"ortho"/"forward". Anything else (``out=``, float16, ``s`` without
``axes``, bad axes or sizes) stays a graph break, so NumPy decides and raises its own
errors.
"""
from __future__ import annotations

import operator

import numpy as np

from .npapi import Unhandled, _ndim, _st_of, handles

_NORMS = (None, "backward", "ortho", "forward")


def _operand(a, real_input=False):
    st = _st_of(a)
    a = st.lift(a)
    k = a.dtype.kind
    if k in "biu":
        a = st.op("astype", [a], dtype=np.dtype(np.float64))
    elif a.dtype.name not in ("float32", "float64", "complex64", "complex128") or \
            real_input and k == "c":
        raise Unhandled(f"an FFT of {a.dtype}")      # NumPy raises or casts its own way
    return st, a


def _axis(axis, ndim):
    try:
        axis = operator.index(axis)
    except TypeError:
        raise Unhandled("a non-integer axis") from None
    if not -ndim <= axis < ndim:
        raise Unhandled("NumPy raises the AxisError")
    return axis % ndim


def _points(n):
    if type(n) is not int or n < 1:
        raise Unhandled("NumPy raises the error")     # or a symbolic/odd size: NumPy's
    return n


def _one(st, a, kind, inverse, n, axis, norm):
    if norm not in _NORMS:
        raise Unhandled("NumPy raises the error")
    return st.op("fft", [a], kind=kind, inverse=inverse, n=n, axis=axis, norm=norm)


def _fft1(kind, inverse):
    def fn(a, n=None, axis=-1, norm=None, out=None):
        if out is not None:
            raise Unhandled("out=")
        st, a = _operand(a, kind == "r2c")
        if a.ndim == 0:
            raise Unhandled("NumPy raises the error")
        ax = _axis(axis, a.ndim)
        if n is None:
            m = a.shape[ax]
            n = 2 * (m - 1) if kind == "c2r" else m
        return _one(st, a, kind, inverse, _points(n), ax, norm)
    return fn


handles(np.fft.fft)(_fft1("c2c", False))
handles(np.fft.ifft)(_fft1("c2c", True))
handles(np.fft.rfft)(_fft1("r2c", False))
handles(np.fft.irfft)(_fft1("c2r", True))


def _cook(a, s, axes, invreal=False):
    """NumPy's ``_cook_nd_args`` (the deprecated forms stay NumPy's)."""
    if axes is None:
        if s is not None:
            raise Unhandled("s= without axes= (deprecated in NumPy 2)")
        axes = list(range(-a.ndim, 0))
    axes = [_axis(x, a.ndim) for x in axes]
    if s is None:
        s = [a.shape[x] for x in axes]
        if invreal and axes:
            s[-1] = (a.shape[axes[-1]] - 1) * 2
    else:
        s = list(s)
        if len(s) != len(axes) or None in s:
            raise Unhandled("NumPy raises or warns")
        s = [a.shape[x] if v == -1 else v for v, x in zip(s, axes)]
    if not axes:
        raise Unhandled("no axes")
    return [_points(v) for v in s], axes


def _fftn(inverse, default_axes=None):
    def fn(a, s=None, axes=default_axes, norm=None, out=None):
        if out is not None:
            raise Unhandled("out=")
        st, a = _operand(a)
        s, axes = _cook(a, s, axes)
        for n, ax in reversed(list(zip(s, axes))):
            a = _one(st, a, "c2c", inverse, n, ax, norm)
        return a
    return fn


def _rfftn(default_axes=None):
    def fn(a, s=None, axes=default_axes, norm=None, out=None):
        if out is not None:
            raise Unhandled("out=")
        st, a = _operand(a, real_input=True)
        s, axes = _cook(a, s, axes)
        a = _one(st, a, "r2c", False, s[-1], axes[-1], norm)
        for n, ax in reversed(list(zip(s[:-1], axes[:-1]))):
            a = _one(st, a, "c2c", False, n, ax, norm)
        return a
    return fn


def _irfftn(default_axes=None):
    def fn(a, s=None, axes=default_axes, norm=None, out=None):
        if out is not None:
            raise Unhandled("out=")
        st, a = _operand(a)
        s, axes = _cook(a, s, axes, invreal=True)
        for n, ax in zip(s[:-1], axes[:-1]):
            a = _one(st, a, "c2c", True, n, ax, norm)
        return _one(st, a, "c2r", True, s[-1], axes[-1], norm)
    return fn


handles(np.fft.fftn)(_fftn(False))
handles(np.fft.ifftn)(_fftn(True))
handles(np.fft.fft2)(_fftn(False, (-2, -1)))
handles(np.fft.ifft2)(_fftn(True, (-2, -1)))
handles(np.fft.rfftn)(_rfftn())
handles(np.fft.rfft2)(_rfftn((-2, -1)))
handles(np.fft.irfftn)(_irfftn())
handles(np.fft.irfft2)(_irfftn((-2, -1)))


def _shift(sign):
    def fn(x, axes=None):
        nd = _ndim(x)
        ax = list(range(nd)) if axes is None else \
            [axes] if isinstance(axes, (int, np.integer)) else list(axes)
        ax = [_axis(a, nd) for a in ax]
        st = _st_of(x)
        x = st.lift(x)
        if any(type(x.shape[a]) is not int for a in ax):
            raise Unhandled("a symbolic size")
        shift = [x.shape[a] // 2 if sign > 0 else -(x.shape[a] // 2) for a in ax]
        return np.roll(x, shift, ax)
    return fn


handles(np.fft.fftshift)(_shift(1))
handles(np.fft.ifftshift)(_shift(-1))
