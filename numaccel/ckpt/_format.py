"""The on-disk format: one JSON metadata file plus raw per-rank data files (docs/ckpt_format.md).

A checkpoint directory holds ``numaccel_ckpt.json`` and one generation folder ``g-<hex>/`` of
``rank<NNNNN>.bin`` files. The metadata is replaced atomically (write to a temporary name, then
``os.replace``), so readers see either the old generation or the new one, never a mix.
"""
from __future__ import annotations

import json
import os
import re
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._state import CheckpointError, CheckpointVersionError, dtype_from_name, volume

FORMAT = "numaccel.ckpt"
VERSION = 1
META_NAME = "numaccel_ckpt.json"
ALIGN = 64  # chunk starts are 64-byte aligned, so memory maps of any dtype are aligned too
GEN_RE = re.compile(r"^g-[0-9a-f]{8,64}$")
FILE_RE = re.compile(r"^g-[0-9a-f]{8,64}/rank[0-9]{5,}\.bin$")
# Metadata beyond this size is refused rather than parsed (a hostile file cannot exhaust RAM).
MAX_META_BYTES = 1 << 31


PARALLEL_CRC_BYTES = 1 << 20
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class _Done:
    def __init__(self, value: int) -> None:
        self.value = value

    def result(self) -> int:
        return self.value


def crc32_async(buf) -> Any:
    """CRC-32 of a buffer, on a helper thread when large; ``.result()`` gives the value.

    zlib releases the GIL while it checksums, so the CRC of one chunk overlaps the write (or
    the read of the next chunk) instead of adding to it.
    """
    global _pool
    if memoryview(buf).nbytes < PARALLEL_CRC_BYTES:
        return _Done(zlib.crc32(buf))
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(1, thread_name_prefix="numaccel-ckpt-crc")
    return _pool.submit(zlib.crc32, buf)


@dataclass(frozen=True)
class Chunk:
    """One stored box of an array: where its bytes are and their CRC-32."""

    offsets: tuple[int, ...]
    shape: tuple[int, ...]
    file: int
    offset: int
    nbytes: int
    crc32: int


@dataclass(frozen=True)
class ArrayMeta:
    """A stored array: dtype, global shape and the chunks that tile it."""

    dtype: np.dtype
    shape: tuple[int, ...]
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True)
class Metadata:
    """A parsed, validated metadata file."""

    version: int
    world_size: int
    generation: str
    files: tuple[str, ...]
    file_sizes: tuple[int, ...]
    arrays: dict[str, ArrayMeta]
    values: dict[str, Any]  # still tagged JSON; decode with _state.decode_value
    raw: dict


def chunk_json(c: Chunk) -> dict:
    return {"offsets": list(c.offsets), "shape": list(c.shape), "file": c.file,
            "offset": c.offset, "nbytes": c.nbytes, "crc32": c.crc32}


def read_metadata_bytes(path: str) -> bytes:
    """The raw metadata file of the checkpoint at ``path``, or a CheckpointError saying why not."""
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.exists(path) else "is not a directory"
        raise CheckpointError(f"{path!r} is not a numaccel checkpoint: it {what}")
    meta = os.path.join(path, META_NAME)
    if not os.path.isfile(meta):
        raise CheckpointError(
            f"{path!r} is not a numaccel checkpoint: it has no {META_NAME} (a save that never "
            "finished leaves only g-* folders)"
        )
    if os.path.getsize(meta) > MAX_META_BYTES:
        raise CheckpointError(f"{meta!r} is larger than {MAX_META_BYTES} bytes; refusing to parse")
    with open(meta, "rb") as f:
        return f.read()


def _ints(x: Any, where: str, n: int | None = None) -> tuple[int, ...]:
    if not isinstance(x, list) or not all(type(i) is int and i >= 0 for i in x):
        raise CheckpointError(f"{where}: expected a list of non-negative ints, got {x!r}")
    if n is not None and len(x) != n:
        raise CheckpointError(f"{where}: expected {n} entries, got {len(x)}")
    return tuple(x)


def _int(x: Any, where: str) -> int:
    if type(x) is not int or x < 0:
        raise CheckpointError(f"{where}: expected a non-negative int, got {x!r}")
    return x


def parse_metadata(raw: bytes, path: str) -> Metadata:
    """Parse and check every field, so later reads can trust offsets, sizes and dtypes."""
    where = os.path.join(path, META_NAME)
    try:
        m = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{where} is not valid JSON ({e}); the checkpoint is damaged") from e
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise CheckpointError(f"{path!r} is not a numaccel checkpoint: {where} has no "
                              f"format={FORMAT!r} field")
    version = m.get("version")
    if type(version) is not int:
        raise CheckpointError(f"{where}: format version {version!r} is not an int")
    if version > VERSION:
        raise CheckpointVersionError(
            f"{path!r} was written in checkpoint format version {version}; this numaccel reads "
            f"up to version {VERSION}. Upgrade numaccel to load it."
        )
    try:
        files_raw = m["files"]
        arrays_raw = m["arrays"]
        values = m["values"]
        gen = m["generation"]
        world = _int(m["world_size"], f"{where}: world_size")
        if not isinstance(files_raw, list) or not isinstance(arrays_raw, dict) \
                or not isinstance(values, dict) or not isinstance(gen, str) \
                or not GEN_RE.match(gen):
            raise TypeError
        files, sizes = [], []
        for i, f in enumerate(files_raw):
            name = f["name"]
            # Only names of the fixed pattern: a checkpoint cannot point reads outside itself.
            if not isinstance(name, str) or not FILE_RE.match(name) or not name.startswith(gen):
                raise CheckpointError(f"{where}: data file name {name!r} is not allowed")
            files.append(name)
            sizes.append(_int(f["size"], f"{where}: files[{i}].size"))
        arrays = {}
        for key, a in arrays_raw.items():
            w = f"{where}: array {key!r}"
            dt = dtype_from_name(a["dtype"], w)
            shape = _ints(a["shape"], f"{w} shape")
            chunks = []
            for j, c in enumerate(a["chunks"]):
                cw = f"{w} chunk {j}"
                off = _ints(c["offsets"], f"{cw} offsets", len(shape))
                shp = _ints(c["shape"], f"{cw} shape", len(shape))
                if any(o + n > g for o, n, g in zip(off, shp, shape)):
                    raise CheckpointError(f"{cw}: box {off}+{shp} exceeds shape {shape}")
                fi = _int(c["file"], f"{cw} file")
                if fi >= len(files):
                    raise CheckpointError(f"{cw}: file index {fi} out of range")
                nbytes = _int(c["nbytes"], f"{cw} nbytes")
                if nbytes != volume(shp) * dt.itemsize:
                    raise CheckpointError(f"{cw}: nbytes {nbytes} does not match box {shp} of "
                                          f"{dt.name}")
                start = _int(c["offset"], f"{cw} offset")
                if start + nbytes > sizes[fi]:
                    raise CheckpointError(f"{cw}: byte range ends past the recorded file size")
                chunks.append(Chunk(off, shp, fi, start, nbytes,
                                    _int(c["crc32"], f"{cw} crc32")))
            arrays[key] = ArrayMeta(dt, shape, tuple(chunks))
    except CheckpointError:
        raise
    except (KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{where}: malformed metadata ({type(e).__name__}: {e}); the "
                              "checkpoint is damaged") from e
    overlap = set(arrays) & set(values)
    if overlap:
        raise CheckpointError(f"{where}: keys stored both as array and value: {sorted(overlap)}")
    return Metadata(version, world, gen, tuple(files), tuple(sizes), arrays, values, m)


def read_metadata(path: str) -> Metadata:
    """Read and validate the metadata of the checkpoint at ``path``.

        >>> read_metadata("/no/such/ckpt")
        Traceback (most recent call last):
        ...
        numaccel.ckpt._state.CheckpointError: '/no/such/ckpt' is not a numaccel checkpoint: ...
    """
    return parse_metadata(read_metadata_bytes(path), path)


def fsync_dir(path: str) -> None:
    """Make a rename inside ``path`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_metadata(path: str, meta: dict, fsync: bool) -> None:
    """Write the metadata under a temporary name, then atomically rename it into place."""
    tmp = os.path.join(path, f".{META_NAME}.{meta['generation']}.tmp")
    data = json.dumps(meta, separators=(",", ":"), allow_nan=False).encode("utf-8")
    with open(tmp, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, os.path.join(path, META_NAME))
    if fsync:
        fsync_dir(path)


def check_target(path: str) -> None:
    """Refuse to write into a directory that holds anything but checkpoint files."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(f"cannot save a checkpoint to {path!r}: it exists and is not a "
                              "directory")
    if not os.path.isdir(path):
        return
    for name in os.listdir(path):
        if name == META_NAME or GEN_RE.match(name) or (name.startswith(f".{META_NAME}.")
                                                       and name.endswith(".tmp")):
            continue
        raise FileExistsError(
            f"cannot save a checkpoint to {path!r}: it holds {name!r}, which is not part of a "
            "numaccel checkpoint; choose an empty or new directory"
        )
