"""One MPI rank of the checkpoint tests: ``mpiexec -n K python -m mpi4py worker.py MODE PATH``.

Modes:
  save PATH [LAYOUT]   save the common state as sharded by this rank count
  load PATH [LAYOUT]   load into zeroed Shards of this rank count and check every byte
  async PATH           async_save, overwrite the arrays at once, check what was written
  kill PATH            rank 1 SIGKILLs itself after writing its first chunk of a new save
Any failure raises, and ``-m mpi4py`` then aborts the whole job with a non-zero status.
"""
from __future__ import annotations

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
from mpi4py import MPI

from numaccel import ckpt
from numaccel.ckpt import Shard, _save


def _mutate(state) -> None:
    for v in state.values():
        if isinstance(v, dict):
            _mutate(v)
        elif isinstance(v, Shard):
            v.local[...] = 0
        elif hasattr(v, "fill"):
            v.fill(0)


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    mode, path = sys.argv[1], sys.argv[2]
    layout = sys.argv[3] if len(sys.argv) > 3 else None
    if mode == "save":
        ckpt.save(common.make_state(rank, n, layout), path, comm, chunk_bytes=64)
    elif mode == "load":
        state = common.make_state(rank, n, layout, fill=False)
        ckpt.load(state, path, comm)
        common.check_state(state, rank, n, layout)
    elif mode == "async":
        state = common.make_state(rank, n, layout)
        fut = ckpt.async_save(state, path, comm, staging_bytes=256, chunk_bytes=128)
        _mutate(state)  # the caller may change its arrays as soon as async_save returns
        comm.Barrier()  # the main thread keeps using comm while the writer commits on a Dup
        assert fut.result(timeout=60) == path
        got = common.make_state(rank, n, "rows", fill=False)
        ckpt.load(got, path, comm)
        common.check_state(got, rank, n, "rows")
    elif mode == "kill":
        real = _save.write_pieces

        def dying(fname, pieces, done=None, fsync=True):
            def gen():
                for i, p in enumerate(pieces):
                    if i == 1 and rank == 1:
                        os.kill(os.getpid(), signal.SIGKILL)
                    yield p
            return real(fname, gen(), done, fsync)

        _save.write_pieces = dying
        # Different data than the checkpoint already at PATH, so a mix would be detected.
        state = common.make_state(rank, n)
        _mutate(state)
        ckpt.save(state, path, comm, chunk_bytes=64)
        raise AssertionError("the save should not have completed")
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
