"""Sharded checkpoints: save from N ranks in parallel, load on M ranks with resharding.

A state is a nested dict of arrays, :class:`Shard` boxes and plain values; keys flatten to
dotted names (``model.layers.0.attn.q.weight``), so states map by name. The format is
pickle-free and documented in docs/ckpt_format.md.

    import numpy as np
    from mpi4py import MPI
    from numaccel import ckpt

    comm = MPI.COMM_WORLD
    r, n = comm.Get_rank(), comm.Get_size()
    rows = np.full((2, 4), r, np.float32)                   # rank r holds rows 2r..2r+1
    state = {"model": {"w": ckpt.Shard(rows, (2 * r, 0), (2 * n, 4)), "b": np.zeros(4)},
             "optim": {"step": 10}}
    ckpt.save(state, "run/ckpt", comm)                       # any rank count, in parallel
    ckpt.load(state, "run/ckpt", comm)                       # any other sharding, in place

Command line: ``python -m numaccel.ckpt inspect PATH`` and
``python -m numaccel.ckpt consolidate PATH OUT.safetensors``.
"""
from __future__ import annotations

from ._format import FORMAT, VERSION, read_metadata
from ._load import load
from ._save import async_save, save
from ._state import CheckpointError, CheckpointVersionError, ChecksumError, Shard
from ._tools import consolidate, inspect

__all__ = [
    "FORMAT",
    "VERSION",
    "CheckpointError",
    "CheckpointVersionError",
    "ChecksumError",
    "Shard",
    "async_save",
    "consolidate",
    "inspect",
    "load",
    "read_metadata",
    "save",
]
