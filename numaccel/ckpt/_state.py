"""State trees: flattening to fully-qualified names, Shard boxes, dtypes and JSON values.

Nothing here touches files or MPI. A state is a nested dict/list of leaves; a leaf is an
ndarray, a :class:`Shard`, or a plain value (None, bool, int, float, complex, str, bytes, NumPy
scalar, or a list/tuple/dict of those). Values are encoded as tagged JSON so that loading them
never runs code (no pickle, no eval).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np


class CheckpointError(ValueError):
    """A checkpoint could not be written or read: the message names the path and key."""


class ChecksumError(CheckpointError):
    """A chunk of a checkpoint is truncated or its bytes do not match their checksum."""


class CheckpointVersionError(CheckpointError):
    """The checkpoint was written by a newer format version than this numaccel reads."""


# The only dtypes a checkpoint may hold, by their NumPy name. Data are always little-endian.
_DTYPES: dict[str, np.dtype] = {
    np.dtype(t).name: np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64, np.complex64, np.complex128,
        ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
    )
}


def dtype_name(dtype: np.dtype, key: str) -> str:
    """The portable name of a supported dtype; raises TypeError naming ``key`` otherwise."""
    name = np.dtype(dtype).name
    if name not in _DTYPES or np.dtype(dtype).newbyteorder("=") != _DTYPES[name]:
        raise TypeError(
            f"array {key!r} has dtype {np.dtype(dtype)!s}, which a checkpoint cannot hold; "
            f"supported: {', '.join(sorted(_DTYPES))}. Convert it (e.g. .astype) before saving."
        )
    return name


def dtype_from_name(name: Any, where: str) -> np.dtype:
    """The little-endian dtype for a stored name (only names from the fixed list)."""
    if not isinstance(name, str) or name not in _DTYPES:
        raise CheckpointError(f"{where}: unsupported dtype {name!r} in checkpoint metadata")
    return _DTYPES[name].newbyteorder("<")


@dataclass
class Shard:
    """The box of a global array that this rank holds.

    ``local`` is this rank's block; it starts at ``offsets`` inside an array of shape
    ``global_shape``. Splits may be along any axis, uneven, or 2-D blocks. On load, ``local`` is
    filled in place with that box of the stored array, whatever sharding wrote it.

        >>> import numpy as np
        >>> w = np.zeros((2, 4), np.float32)        # rows 2..3 of an (8, 4) weight
        >>> s = Shard(w, offsets=(2, 0), global_shape=(8, 4))
        >>> s.shape
        (2, 4)
    """

    local: np.ndarray
    offsets: tuple[int, ...]
    global_shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.local, np.ndarray):
            raise TypeError(f"Shard.local must be a numpy.ndarray, got {type(self.local).__name__}")
        self.offsets = tuple(int(o) for o in self.offsets)
        self.global_shape = tuple(int(g) for g in self.global_shape)
        shape = self.local.shape
        if not (len(self.offsets) == len(self.global_shape) == len(shape)):
            raise ValueError(
                f"Shard with local shape {shape} needs offsets and global_shape of length "
                f"{len(shape)}, got offsets={self.offsets} global_shape={self.global_shape}"
            )
        for o, n, g in zip(self.offsets, shape, self.global_shape):
            if o < 0 or o + n > g:
                raise ValueError(
                    f"Shard box offsets={self.offsets} shape={shape} does not fit in "
                    f"global_shape={self.global_shape}"
                )

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the local block."""
        return tuple(self.local.shape)


@dataclass
class Leaf:
    """One flattened leaf: its name, where it sits (container and key), and its content."""

    fqn: str
    container: Any
    key: Any
    value: Any

    @property
    def is_array(self) -> bool:
        return isinstance(self.value, (np.ndarray, Shard))


def _has_array(obj: Any) -> bool:
    if isinstance(obj, (np.ndarray, Shard)):
        return True
    if isinstance(obj, dict):
        return any(_has_array(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_has_array(v) for v in obj)
    return False


def flatten(state: Any) -> list[Leaf]:
    """Flatten a nested dict/list state into leaves with dotted fully-qualified names.

    Dicts (str or int keys) and lists/tuples that contain arrays are containers; any other
    list/tuple of plain values is one value leaf. Two leaves with the same name raise.

        >>> [l.fqn for l in flatten({"m": {"w": np.zeros(2)}, "opt": {"step": 3}})]
        ['m.w', 'opt.step']
    """
    if not isinstance(state, dict):
        raise TypeError(f"a checkpoint state must be a dict, got {type(state).__name__}")
    leaves: list[Leaf] = []
    seen: set[str] = set()

    def walk(obj: Any, prefix: str) -> None:
        items: Iterator[tuple[Any, Any]]
        if isinstance(obj, dict):
            items = iter(obj.items())
        else:
            items = enumerate(obj)
        for k, v in items:
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(
                    f"state key {k!r} under {prefix or '<root>'!r} is a {type(k).__name__}; "
                    "only str and int keys can be named in a checkpoint"
                )
            name = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) or (isinstance(v, (list, tuple)) and _has_array(v)):
                walk(v, name)
                continue
            if not isinstance(v, (np.ndarray, Shard)):
                encode_value(v, name)  # raises early on unsupported types
            if name in seen:
                raise ValueError(
                    f"two entries of the state flatten to the same name {name!r}; "
                    "rename keys that contain '.'"
                )
            seen.add(name)
            leaves.append(Leaf(name, obj, k, v))

    walk(state, "")
    return leaves


# ---- plain values as tagged JSON -------------------------------------------------------------

def encode_value(v: Any, key: str) -> Any:
    """Encode a plain value as tagged JSON (exact for floats, NaN/inf and NumPy scalars)."""
    if v is None:
        return {"t": "none"}
    if isinstance(v, bool):
        return {"t": "bool", "v": bool(v)}
    if isinstance(v, np.generic):
        name = dtype_name(v.dtype, key)
        raw = np.asarray(v).astype(_DTYPES[name].newbyteorder("<")).tobytes()
        return {"t": "np", "dtype": name, "hex": raw.hex()}
    if isinstance(v, int):
        return {"t": "int", "v": int(v)}
    if isinstance(v, float):
        return {"t": "float", "v": float(v).hex()}
    if isinstance(v, complex):
        return {"t": "complex", "re": v.real.hex(), "im": v.imag.hex()}
    if isinstance(v, str):
        return {"t": "str", "v": v}
    if isinstance(v, (bytes, bytearray)):
        return {"t": "bytes", "hex": bytes(v).hex()}
    if isinstance(v, (list, tuple)):
        return {"t": type(v).__name__, "v": [encode_value(x, key) for x in v]}
    if isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                raise TypeError(f"value {key!r}: dict keys inside plain values must be str, "
                                f"got {k!r}")
        return {"t": "dict", "v": [[k, encode_value(x, key)] for k, x in v.items()]}
    raise TypeError(
        f"state entry {key!r} is a {type(v).__module__}.{type(v).__qualname__}, which a "
        "checkpoint cannot hold; use numpy arrays, numaccel.ckpt.Shard, numbers, str, "
        "bytes, None or lists/dicts of those"
    )


def decode_value(node: Any, key: str) -> Any:
    """Inverse of :func:`encode_value`; only builds the fixed set of types above."""
    try:
        t = node["t"]
        if t == "none":
            return None
        if t == "bool":
            return bool(node["v"])
        if t == "int":
            if not isinstance(node["v"], int):
                raise TypeError
            return int(node["v"])
        if t == "float":
            return float.fromhex(node["v"])
        if t == "complex":
            return complex(float.fromhex(node["re"]), float.fromhex(node["im"]))
        if t == "str":
            return str(node["v"])
        if t == "bytes":
            return bytes.fromhex(node["hex"])
        if t == "np":
            dt = dtype_from_name(node["dtype"], key)
            raw = np.frombuffer(bytes.fromhex(node["hex"]), dtype=dt)
            return raw.astype(dt.newbyteorder("="))[0]
        if t in ("list", "tuple"):
            items = [decode_value(x, key) for x in node["v"]]
            return items if t == "list" else tuple(items)
        if t == "dict":
            return {str(k): decode_value(x, key) for k, x in node["v"]}
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise CheckpointError(f"value {key!r}: malformed entry in checkpoint metadata") from e
    raise CheckpointError(f"value {key!r}: unknown value tag {t!r} in checkpoint metadata")


# ---- boxes ------------------------------------------------------------------------------------

def volume(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def intersect(a_off, a_shape, b_off, b_shape):
    """Intersection of two boxes as (offsets, shape), or None when empty."""
    lo = [max(x, y) for x, y in zip(a_off, b_off)]
    hi = [min(x + n, y + m) for x, n, y, m in zip(a_off, a_shape, b_off, b_shape)]
    if any(h <= low for low, h in zip(lo, hi)):
        return None
    return tuple(lo), tuple(h - low for low, h in zip(lo, hi))


def split_box(shape: tuple[int, ...], itemsize: int, limit: int):
    """Split a C-ordered block into boxes of at most ``limit`` bytes, each contiguous in memory.

    Leading axes are fixed one index at a time until the trailing block fits, then that axis is
    cut into runs; so each piece of a C-contiguous array is a contiguous byte range.
    """
    nd = len(shape)
    if volume(shape) == 0:
        return []
    if nd == 0:
        return [((), ())]
    k = nd - 1
    for axis in range(nd):
        if volume(shape[axis + 1:]) * itemsize <= limit:
            k = axis
            break
    inner = volume(shape[k + 1:]) * itemsize
    step = max(1, limit // max(inner, 1))
    out = []
    for idx in np.ndindex(*shape[:k]):
        for s in range(0, shape[k], step):
            n = min(step, shape[k] - s)
            out.append((tuple(idx) + (s,) + (0,) * (nd - k - 1),
                        (1,) * k + (n,) + tuple(shape[k + 1:])))
    return out
