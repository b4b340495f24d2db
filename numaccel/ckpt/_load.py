"""Loading: each rank reads only the chunks that overlap the boxes it asks for."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import _format as F
from ._save import as_comm
from ._state import CheckpointError, ChecksumError, Shard, decode_value, flatten, intersect, volume

_MAX_LISTED = 10


def _names(keys: list[str]) -> str:
    keys = sorted(keys)
    more = f" ... and {len(keys) - _MAX_LISTED} more" if len(keys) > _MAX_LISTED else ""
    return ", ".join(repr(k) for k in keys[:_MAX_LISTED]) + more


def metadata_collective(path: str, comm: Any) -> F.Metadata:
    """Rank 0 reads the metadata file and broadcasts it; every rank raises the same error."""
    raw, err = None, None
    if comm.Get_rank() == 0:
        try:
            raw = F.read_metadata_bytes(path)
        except CheckpointError as e:
            err = str(e)
        except OSError as e:  # e.g. permissions: every rank must raise, not only rank 0
            err = f"cannot read checkpoint {path!r}: {e}"
    raw, err = comm.bcast((raw, err), root=0)
    if err:
        raise CheckpointError(err)
    return F.parse_metadata(raw, path)


def _read_into(f, buf: np.ndarray, offset: int) -> int:
    mv = memoryview(buf.reshape(-1).view(np.uint8))
    f.seek(offset)
    got = 0
    while got < len(mv):
        n = f.readinto(mv[got:])
        if not n:
            break
        got += n
    return got


class _Reader:
    """Open data files once per load and verify every chunk's checksum.

    The CRC of a chunk runs on a helper thread while the next chunk is read; a mismatch is
    raised by the next ``read`` or by ``finish``, before the load returns.
    """

    def __init__(self, path: str, meta: F.Metadata) -> None:
        self.path, self.meta, self.files = path, meta, {}
        self.pending: tuple | None = None

    def close(self) -> None:
        for f in self.files.values():
            f.close()

    def _file(self, i: int):
        if i not in self.files:
            name = os.path.join(self.path, *self.meta.files[i].split("/"))
            try:
                self.files[i] = open(name, "rb", buffering=0)  # noqa: SIM115 (see close)
            except OSError as e:
                raise CheckpointError(f"checkpoint {self.path!r}: cannot open data file "
                                      f"{self.meta.files[i]!r}: {e}") from e
        return self.files[i]

    def _where(self, key: str, c: F.Chunk) -> str:
        return (f"checkpoint {self.path!r}, array {key!r}, chunk offsets={c.offsets} "
                f"shape={c.shape} in {self.meta.files[c.file]!r}")

    def read(self, key: str, c: F.Chunk, buf: np.ndarray) -> None:
        got = _read_into(self._file(c.file), buf, c.offset)
        if got != c.nbytes:
            raise ChecksumError(f"{self._where(key, c)}: truncated, read {got} of {c.nbytes} "
                                f"bytes at byte {c.offset}")
        crc = F.crc32_async(buf.reshape(-1).view(np.uint8))
        self.finish()
        self.pending = (crc, key, c)

    def finish(self) -> None:
        """Wait for the last checksum; raise ChecksumError if it does not match."""
        if self.pending is None:
            return
        fut, key, c = self.pending
        self.pending = None
        crc = fut.result()
        if crc != c.crc32:
            raise ChecksumError(f"{self._where(key, c)}: checksum mismatch (crc32 {crc:#010x}, "
                                f"recorded {c.crc32:#010x}); the data file is corrupted")


def _fill(reader: _Reader, key: str, a: F.ArrayMeta, dest: np.ndarray, off: tuple) -> None:
    """Fill ``dest`` (the box at ``off`` of array ``key``) from every overlapping chunk."""
    covered = 0
    for c in sorted(a.chunks, key=lambda c: (c.file, c.offset)):
        hit = intersect(c.offsets, c.shape, off, dest.shape)
        if hit is None:
            continue
        lo, n = hit
        dsl = tuple(slice(x - o, x - o + m) for x, o, m in zip(lo, off, n))
        sub = dest[dsl + (Ellipsis,)]  # a view, also for 0-d arrays
        direct = (tuple(n) == c.shape and sub.flags.c_contiguous and sub.dtype == a.dtype)
        if direct:
            reader.read(key, c, sub)
        else:
            buf = np.empty(c.shape, a.dtype)
            reader.read(key, c, buf)
            csl = tuple(slice(x - o, x - o + m) for x, o, m in zip(lo, c.offsets, n))
            sub[...] = buf[csl]
        covered += volume(n)
    if covered != dest.size:
        raise CheckpointError(f"checkpoint {reader.path!r}, array {key!r}: stored chunks cover "
                              f"{covered} of the {dest.size} requested elements; it is damaged")


def _target(leaf, a: F.ArrayMeta, path: str) -> tuple[np.ndarray, tuple]:
    """The array to fill and its box; checks shape and dtype against the stored array."""
    v = leaf.value
    dest, off, gshape = ((v.local, v.offsets, v.global_shape) if isinstance(v, Shard)
                         else (v, (0,) * v.ndim, tuple(v.shape)))
    what = "Shard of global shape" if isinstance(v, Shard) else "array of shape"
    if tuple(gshape) != a.shape:
        raise CheckpointError(
            f"checkpoint {path!r}, array {leaf.fqn!r}: stored shape {a.shape}, but the state "
            f"holds an {what} {tuple(gshape)}; give it the stored shape (or strict=False and "
            "drop the key)"
        )
    if dest.dtype.name != a.dtype.name:
        raise CheckpointError(
            f"checkpoint {path!r}, array {leaf.fqn!r}: stored dtype {a.dtype.name}, but the "
            f"state holds {dest.dtype}; load into a {a.dtype.name} array and convert after"
        )
    if not dest.flags.writeable:
        raise ValueError(f"array {leaf.fqn!r} is read-only; load needs a writeable array to "
                         "fill in place")
    return dest, off


def load(state: dict, path: str | os.PathLike, comm: Any = None, *, strict: bool = True) -> dict:
    """Fill ``state`` in place from the checkpoint at ``path``, resharding as needed.

    Arrays are filled in place; a :class:`Shard` receives its box of the stored array, whatever
    the sharding that wrote it. Plain values are replaced in their dict or list. With
    ``strict=True`` keys missing from the checkpoint, or stored but absent from ``state``,
    raise; with ``strict=False`` they are skipped. Returns ``state``.

        >>> import numpy as np, tempfile, os
        >>> from numaccel.ckpt import save
        >>> d = os.path.join(tempfile.mkdtemp(), "ck")
        >>> save({"w": np.arange(4.0), "step": 3}, d)
        >>> st = {"w": np.zeros(4), "step": 0}
        >>> load(st, d)["step"], float(st["w"][-1])
        (3, 3.0)
    """
    path = os.fspath(path)
    meta = metadata_collective(path, as_comm(comm))
    leaves = flatten(state)
    names = {leaf.fqn for leaf in leaves}
    stored = set(meta.arrays) | set(meta.values)
    missing, unexpected = names - stored, stored - names
    if strict and (missing or unexpected):
        parts = []
        if missing:
            parts.append(f"missing from the checkpoint: {_names(list(missing))}")
        if unexpected:
            parts.append(f"in the checkpoint but not in the state: {_names(list(unexpected))}")
        raise CheckpointError(f"checkpoint {path!r} does not match the state: "
                              + "; ".join(parts) + ". Pass strict=False to load the common keys.")
    reader = _Reader(path, meta)
    try:
        plan, assign = [], []
        for leaf in leaves:
            if leaf.fqn in meta.arrays:
                if not leaf.is_array:
                    raise CheckpointError(
                        f"checkpoint {path!r}: {leaf.fqn!r} is a stored array of shape "
                        f"{meta.arrays[leaf.fqn].shape} {meta.arrays[leaf.fqn].dtype.name}, "
                        f"but the state holds a {type(leaf.value).__name__}; put an array or "
                        "Shard there"
                    )
                a = meta.arrays[leaf.fqn]
                plan.append((leaf.fqn, a) + _target(leaf, a, path))
            elif leaf.fqn in meta.values:
                if leaf.is_array:
                    raise CheckpointError(f"checkpoint {path!r}: {leaf.fqn!r} is a stored plain "
                                          "value, but the state holds an array there")
                if isinstance(leaf.container, tuple):
                    raise TypeError(f"cannot load value {leaf.fqn!r} into a tuple; use a list")
                assign.append((leaf, decode_value(meta.values[leaf.fqn], leaf.fqn)))
        # Everything was checked above, so a mismatch leaves the state untouched.
        for leaf, value in assign:
            leaf.container[leaf.key] = value
        for key, a, dest, off in plan:
            _fill(reader, key, a, dest, off)
        reader.finish()
    finally:
        reader.close()
    return state
