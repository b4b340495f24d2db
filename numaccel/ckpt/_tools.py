"""Offline tools: a readable summary of a checkpoint, and one safetensors file of it.
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

from . import _format as F
from ._load import _fill, _Reader
from ._state import decode_value

# safetensors' dtype names (https://github.com/huggingface/safetensors, format section).
_ST_DTYPES = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16",
    "int32": "I32", "uint32": "U32", "int64": "I64", "uint64": "U64", "float16": "F16",
    "bfloat16": "BF16", "float32": "F32", "float64": "F64", "complex64": "C64",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
}


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def inspect(path: str | os.PathLike, verify: bool = False) -> str:
    """A text summary of a checkpoint: keys, dtypes, shapes, chunk boxes, files and sizes.

    With ``verify=True`` every chunk is read and its checksum checked (raises ChecksumError).

        >>> import numpy as np, tempfile, os
        >>> from numaccel.ckpt import save
        >>> d = os.path.join(tempfile.mkdtemp(), "ck")
        >>> save({"w": np.zeros((2, 3), np.float32), "step": 7}, d)
        >>> print(inspect(d).splitlines()[2])
        w  float32  (2, 3)  24 B  1 chunk: [0:2, 0:3]@rank00000.bin
    """
    path = os.fspath(path)
    meta = F.read_metadata(path)
    total = sum(meta.file_sizes)
    lines = [(f"numaccel checkpoint {path} (format version {meta.version}, written by "
              f"{meta.world_size} rank{'s' if meta.world_size != 1 else ''}, {_size(total)} in "
              f"{len(meta.files)} data file{'s' if len(meta.files) != 1 else ''})"),
             f"arrays: {len(meta.arrays)}, values: {len(meta.values)}"]
    for key, a in meta.arrays.items():
        nbytes = sum(c.nbytes for c in a.chunks)
        boxes = ["[" + ", ".join(f"{o}:{o + n}" for o, n in zip(c.offsets, c.shape)) + "]@"
                 + meta.files[c.file].split("/")[-1] for c in a.chunks[:4]]
        if len(a.chunks) > 4:
            boxes.append(f"... +{len(a.chunks) - 4}")
        lines.append(f"{key}  {a.dtype.name}  {a.shape}  {_size(nbytes)}  {len(a.chunks)} chunk"
                     f"{'s' if len(a.chunks) != 1 else ''}: {' '.join(boxes)}")
    for key, node in meta.values.items():
        text = repr(decode_value(node, key))
        lines.append(f"{key}  = {text if len(text) <= 80 else text[:77] + '...'}")
    if verify:
        reader = _Reader(path, meta)
        try:
            for key, a in meta.arrays.items():
                for c in a.chunks:
                    reader.read(key, c, np.empty(c.shape, a.dtype))
            reader.finish()
        finally:
            reader.close()
        lines.append("all chunk checksums verified")
    return "\n".join(lines)


def consolidate(path: str | os.PathLike, out: str | os.PathLike) -> str:
    """Write the whole checkpoint as one safetensors file that other tools can read.

    Arrays are assembled one at a time (peak memory: the largest array); plain values go into
    the safetensors ``__metadata__`` as JSON under ``numaccel.values``.

        >>> import numpy as np, tempfile, os
        >>> from numaccel.ckpt import save
        >>> d = tempfile.mkdtemp()
        >>> save({"w": np.arange(3.0)}, os.path.join(d, "ck"))
        >>> from safetensors.numpy import load_file
        >>> load_file(consolidate(os.path.join(d, "ck"), os.path.join(d, "w.st")))["w"]
        array([0., 1., 2.])
    """
    path, out = os.fspath(path), os.fspath(out)
    meta = F.read_metadata(path)
    header: dict = {}
    pos = 0
    for key, a in meta.arrays.items():
        if a.dtype.name not in _ST_DTYPES:
            raise TypeError(f"array {key!r} has dtype {a.dtype.name}, which safetensors cannot "
                            "store; load the checkpoint and convert it instead")
        n = int(np.prod(a.shape, dtype=np.int64)) * a.dtype.itemsize
        header[key] = {"dtype": _ST_DTYPES[a.dtype.name], "shape": list(a.shape),
                       "data_offsets": [pos, pos + n]}
        pos += n
    header["__metadata__"] = {"format": "numaccel.ckpt consolidated",
                              "numaccel.values": json.dumps(meta.values)}
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * ((-len(hbytes)) % 8)  # the data section starts 8-byte aligned
    tmp = out + ".tmp"
    reader = _Reader(path, meta)
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            for key, a in meta.arrays.items():
                full = np.empty(a.shape, a.dtype)
                _fill(reader, key, a, full, (0,) * len(a.shape))
                reader.finish()
                f.write(memoryview(full.reshape(-1).view(np.uint8)))
        os.replace(tmp, out)
    finally:
        reader.close()
        if os.path.exists(tmp):
            os.remove(tmp)
    return out
