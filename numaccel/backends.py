"""Backends by name, and hand-written kernels per (op, backend).

A backend is an object with ``name``, ``capabilities``, ``is_available()``,
``compile(graph, ...)`` and host transfer (``to_host`` / ``from_host``). The built-ins
(``numpy`` reference interpreter, ``cpu`` Numba, ``cuda``) register here like any third
party: nothing outside this registry names a device by string. Third-party packages can
also register through the ``numaccel.backends`` entry point group.

Kernels: ``register_kernel("sdpa", "cpu", fn, supports=pred)`` attaches a hand-written
implementation of an op to a backend; ``supports(*inputs, **attrs)`` says which cases it
handles (dtypes, ranks, ...). When no registered kernel supports a case, the op's
decomposition (or reference) is used instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


class Backend:
    """Base class for backends. Subclasses override ``compile``."""

    name: str = "?"
    capabilities: frozenset = frozenset()
    #: True: ``compile`` and the compiled run may happen on numaccel's background compile
    #: thread while the reference interpreter runs the first calls (see
    #: ``numaccel.config.background_compile``)
    compiles_in_background: bool = False

    def is_available(self) -> bool:
        return True

    def compile(self, graph, **options):  # pragma: no cover - abstract
        raise NotImplementedError(f"backend {self.name!r} does not implement compile()")

    def to_host(self, x):
        return x

    def from_host(self, x):
        return x

    def __repr__(self):
        return f"<numaccel backend {self.name!r}>"


_BACKENDS: dict[str, Any] = {}   # name -> Backend instance or zero-arg factory
_ENTRY_POINTS_LOADED = False


def register_backend(name: str, backend, *, replace: bool = False) -> None:
    """Register ``backend`` (an instance, or a zero-argument factory) under ``name``."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"backend name must be an identifier string, got {name!r}")
    if name in _BACKENDS and not replace:
        raise ValueError(f"backend {name!r} is already registered; pass replace=True")
    _BACKENDS[name] = backend


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points
    for ep in entry_points(group="numaccel.backends"):
        if ep.name not in _BACKENDS:
            _BACKENDS[ep.name] = ep.load()


def get_backend(name: str) -> Backend:
    """Return the backend registered as ``name`` (instantiating a factory once)."""
    if name not in _BACKENDS:
        _load_entry_points()
    if name not in _BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {sorted(_BACKENDS)}. "
                         "Register one with numaccel.register_backend(name, backend).")
    b = _BACKENDS[name]
    if not isinstance(b, Backend) and callable(b):
        b = _BACKENDS[name] = b()
    return b


def list_backends() -> list[str]:
    _load_entry_points()
    return sorted(_BACKENDS)


@dataclass(frozen=True)
class Kernel:
    op: str
    backend: str
    fn: Callable[..., Any]
    supports: Optional[Callable[..., bool]] = None
    name: str = ""


_KERNELS: dict[tuple[str, str], list[Kernel]] = {}


def register_kernel(op: str, backend: str, fn: Callable[..., Any], *,
                    supports: Optional[Callable[..., bool]] = None, name: str = "") -> Kernel:
    """Attach a hand-written kernel for ``op`` on ``backend``. Later registrations win."""
    k = Kernel(op, backend, fn, supports, name or getattr(fn, "__name__", "kernel"))
    _KERNELS.setdefault((op, backend), []).insert(0, k)
    return k


def find_kernel(op: str, backend: str, *inputs, **attrs) -> Optional[Kernel]:
    """The first registered kernel of ``op`` on ``backend`` that supports these inputs."""
    for k in _KERNELS.get((op, backend), ()):
        if k.supports is None or k.supports(*inputs, **attrs):
            return k
    return None


def kernels_of(op: str) -> list[Kernel]:
    return [k for (o, _), ks in _KERNELS.items() if o == op for k in ks]
