"""Saving: plan across ranks, write each rank's chunks in parallel, commit atomically on rank 0."""
from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from queue import Queue
from typing import Any

import numpy as np

from . import _format as F
from ._state import CheckpointError, Shard, dtype_name, encode_value, flatten, split_box, volume

DEFAULT_CHUNK_BYTES = 32 << 20
DEFAULT_STAGING_BYTES = 1 << 30


class SelfComm:
    """The one-rank stand-in for an mpi4py communicator, used when ``comm=None``."""

    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return 1

    def allgather(self, x: Any) -> list:
        return [x]

    def gather(self, x: Any, root: int = 0) -> list:
        return [x]

    def bcast(self, x: Any, root: int = 0) -> Any:
        return x

    def barrier(self) -> None:
        pass


def as_comm(comm: Any) -> Any:
    return SelfComm() if comm is None else comm


def _raise_gathered(errors: list, rank: int, what: str) -> None:
    """Raise on every rank when any rank failed, with the failing ranks' messages."""
    bad = [(r, e) for r, e in enumerate(errors) if e]
    if not bad:
        return
    if errors[rank]:
        kind, msg = errors[rank]
        exc = {"TypeError": TypeError, "ValueError": ValueError,
               "FileExistsError": FileExistsError}.get(kind, CheckpointError)
        raise exc(msg)
    r, (kind, msg) = bad[0]
    raise CheckpointError(f"{what} failed on rank {r}: {kind}: {msg}")


def _local_plan(state: Any) -> tuple[dict, dict[str, np.ndarray]]:
    """This rank's array boxes and values (JSON-able), plus its local blocks by name."""
    arrays, values, blocks = {}, {}, {}
    for leaf in flatten(state):
        v = leaf.value
        if isinstance(v, Shard):
            dt = dtype_name(v.local.dtype, leaf.fqn)
            arrays[leaf.fqn] = [dt, list(v.global_shape), list(v.offsets), list(v.shape)]
            blocks[leaf.fqn] = v.local
        elif isinstance(v, np.ndarray):
            dt = dtype_name(v.dtype, leaf.fqn)
            arrays[leaf.fqn] = [dt, list(v.shape), [0] * v.ndim, list(v.shape)]
            blocks[leaf.fqn] = v
        else:
            values[leaf.fqn] = encode_value(v, leaf.fqn)
    return {"a": arrays, "v": values}, blocks


def _check_cover(key: str, gshape: tuple, boxes: dict) -> None:
    """The ranks' distinct boxes must tile the global array: no overlaps, no holes."""
    total = volume(gshape)
    nonempty = [(b, rs) for b, rs in boxes.items() if volume(b[1]) > 0]
    if len(nonempty) > 1:
        starts = np.array([b[0] for b, _ in nonempty], dtype=np.int64).reshape(len(nonempty), -1)
        ends = starts + np.array([b[1] for b, _ in nonempty], dtype=np.int64).reshape(starts.shape)
        lo = np.maximum(starts[:, None, :], starts[None, :, :])
        hi = np.minimum(ends[:, None, :], ends[None, :, :])
        hit = np.all(lo < hi, axis=2)
        np.fill_diagonal(hit, False)
        if hit.any():
            i, j = map(int, np.argwhere(hit)[0])
            (bi, ri), (bj, rj) = nonempty[i], nonempty[j]
            raise ValueError(
                f"array {key!r}: Shard box offsets={bi[0]} shape={bi[1]} (rank {ri[0]}) partly "
                f"overlaps offsets={bj[0]} shape={bj[1]} (rank {rj[0]}); shards of one array "
                "must be disjoint or identical (identical boxes are written once)"
            )
    covered = sum(volume(b[1]) for b, _ in nonempty)
    if covered != total:
        raise ValueError(
            f"array {key!r} of global shape {tuple(gshape)}: the ranks' Shards cover {covered} "
            f"of {total} elements; every element must be held by some rank"
        )


def global_plan(plans: list[dict]) -> tuple[dict, dict, list[list]]:
    """Merge all ranks' plans: array headers, values, and per-rank lists of boxes to write.

    Identical boxes held by several ranks (replicated arrays) are written once, by the holder
    with the fewest bytes assigned so far, so writing is spread evenly over ranks.
    """
    arrays: dict[str, dict] = {}
    values: dict[str, Any] = {}
    for r, p in enumerate(plans):
        for key, (dt, gs, off, shp) in p["a"].items():
            ent = arrays.setdefault(key, {"dtype": dt, "shape": gs, "boxes": {}, "rank": r})
            if ent["dtype"] != dt or ent["shape"] != gs:
                raise ValueError(
                    f"array {key!r}: rank {ent['rank']} has dtype {ent['dtype']} global shape "
                    f"{tuple(ent['shape'])}, rank {r} has dtype {dt} global shape {tuple(gs)}"
                )
            ent["boxes"].setdefault((tuple(off), tuple(shp)), []).append(r)
        for key, enc in p["v"].items():
            values.setdefault(key, enc)  # the lowest rank that holds a value wins
    both = sorted(set(arrays) & set(values))
    if both:
        raise ValueError(f"keys {both[:5]} are arrays on some ranks and plain values on others")
    items = []
    for key, ent in arrays.items():
        _check_cover(key, ent["shape"], ent["boxes"])
        item = np.dtype(F.dtype_from_name(ent["dtype"], key)).itemsize
        for box, ranks in ent["boxes"].items():
            if volume(box[1]):
                items.append((-volume(box[1]) * item, key, box, ranks))
    items.sort()
    load = [0] * len(plans)
    assign: list[list] = [[] for _ in plans]
    for negbytes, key, box, ranks in items:
        r = min(ranks, key=lambda q: (load[q], q))
        load[r] -= negbytes
        assign[r].append((key, box))
    for a in assign:
        a.sort()
    headers = {k: {"dtype": e["dtype"], "shape": e["shape"]} for k, e in arrays.items()}
    return headers, values, assign


def _pieces(assigned: list, blocks: dict, chunk_bytes: int) -> Iterator[tuple]:
    """(key, global offsets, shape, local view) for each chunk this rank writes, in file order."""
    for key, (off, shp) in assigned:
        a = blocks[key]
        for rel, cshape in split_box(shp, a.dtype.itemsize, chunk_bytes):
            sl = tuple(slice(o, o + n) for o, n in zip(rel, cshape))
            yield key, tuple(o + r for o, r in zip(off, rel)), cshape, a[sl + (Ellipsis,)]


def _le_contiguous(view: np.ndarray) -> np.ndarray:
    """The bytes of a block as stored: C order, little-endian (no copy when already so)."""
    if view.dtype.byteorder == ">":
        view = view.astype(view.dtype.newbyteorder("<"))
    return np.ascontiguousarray(view)


def _write_all(f, mv: memoryview) -> None:
    while len(mv):
        n = f.write(mv)
        mv = mv[n:]


def write_pieces(fname: str, pieces: Iterable[tuple], done=None, fsync: bool = True):
    """Write chunks to one data file; returns (records, file size, error or None).

    An error stops writing but keeps consuming ``pieces`` (so a staging producer never waits
    forever); it is reported at commit time so that every rank fails together.
    """
    records, pos, err, f = [], 0, None, None
    try:
        for key, goff, shape, arr in pieces:
            try:
                if err is None:
                    if f is None:
                        f = open(fname, "wb", buffering=0)  # noqa: SIM115 (closed below)
                    buf = arr.reshape(-1).view(np.uint8)
                    pad = (-pos) % F.ALIGN
                    if pad:
                        _write_all(f, memoryview(b"\0" * pad))
                        pos += pad
                    crc = F.crc32_async(buf)
                    _write_all(f, memoryview(buf))
                    records.append([key, list(goff), list(shape), pos, buf.nbytes,
                                    crc.result()])
                    pos += buf.nbytes
            except Exception as e:  # noqa: BLE001 (reported collectively below)
                err = (type(e).__name__, f"writing {fname!r}, array {key!r}: {e}")
            finally:
                if done is not None:
                    done(arr.nbytes)
        if f is not None and err is None and fsync:
            os.fsync(f.fileno())
    except Exception as e:  # noqa: BLE001
        err = err or (type(e).__name__, f"writing {fname!r}: {e}")
    finally:
        if f is not None:
            f.close()
    return records, pos, err


def prepare(state: Any, path: str, comm: Any, chunk_bytes: int) -> dict:
    """Collective: plan, check the target and create this save's generation folder."""
    rank, size = comm.Get_rank(), comm.Get_size()
    path = os.fspath(path)
    plan, blocks, err = None, {}, None
    try:
        plan, blocks = _local_plan(state)
    except (TypeError, ValueError) as e:
        err = (type(e).__name__, str(e))
    gathered = comm.allgather(json.dumps({"err": err, "plan": plan}))
    gathered = [json.loads(g) for g in gathered]
    _raise_gathered([g["err"] for g in gathered], rank, "planning the save")
    headers, values, assign = global_plan([g["plan"] for g in gathered])
    gen, err = None, None
    if rank == 0:
        try:
            F.check_target(path)
            gen = "g-" + uuid.uuid4().hex
            spare = _spare(path)
            if spare:
                # Overwriting the files of an unreferenced earlier generation is markedly
                # faster than allocating new ones (and skips deleting the old), on ext4 at least.
                os.rename(os.path.join(path, spare), os.path.join(path, gen))
            else:
                os.makedirs(os.path.join(path, gen))
        except OSError as e:
            err = (type(e).__name__, str(e))
    gen, err0 = comm.bcast((gen, err), root=0)
    _raise_gathered([err0] + [None] * (size - 1), rank, "creating the checkpoint folder")
    fname = f"{gen}/rank{rank:05d}.bin"
    return {"path": path, "gen": gen, "rank": rank, "size": size, "headers": headers,
            "values": values, "fname": fname,
            "pieces": list(_pieces(assign[rank], blocks, chunk_bytes))}


def commit(comm: Any, setup: dict, records: list, fsize: int, err, fsync: bool) -> None:
    """Collective: rank 0 writes the metadata last, renames it into place, drops old data."""
    rank, path, gen = setup["rank"], setup["path"], setup["gen"]
    mine = {"err": err, "records": records, "fname": setup["fname"] if records else None,
            "size": fsize}
    got = comm.gather(json.dumps(mine), root=0)
    status = None
    if rank == 0:
        got = [json.loads(g) for g in got]
        bad = [(r, g["err"]) for r, g in enumerate(got) if g["err"]]
        if bad:
            r, (kind, msg) = bad[0]
            status = f"save to {path!r} failed on rank {r}: {kind}: {msg}"
            shutil.rmtree(os.path.join(path, gen), ignore_errors=True)
        else:
            try:
                _write_meta(path, gen, setup, got, fsync)
            except Exception as e:  # noqa: BLE001 (every rank must hear of it, not just 0)
                status = f"save to {path!r} failed writing metadata: {type(e).__name__}: {e}"
    status = comm.bcast(status, root=0)
    if status:
        raise CheckpointError(status)


def _write_meta(path: str, gen: str, setup: dict, got: list, fsync: bool) -> None:
    files, chunks = [], {k: [] for k in setup["headers"]}
    for g in got:
        if not g["fname"]:
            continue
        fi = len(files)
        files.append({"name": g["fname"], "size": g["size"]})
        for key, off, shp, pos, nbytes, crc in g["records"]:
            chunks[key].append({"offsets": off, "shape": shp, "file": fi, "offset": pos,
                                "nbytes": nbytes, "crc32": crc})
    arrays = {}
    for key in sorted(setup["headers"]):
        h = setup["headers"][key]
        arrays[key] = {"dtype": h["dtype"], "shape": h["shape"],
                       "chunks": sorted(chunks[key], key=lambda c: c["offsets"])}
    meta = {"format": F.FORMAT, "version": F.VERSION, "generation": gen,
            "world_size": setup["size"], "files": files, "arrays": arrays,
            "values": dict(sorted(setup["values"].items()))}
    previous = _referenced(path)
    F.write_metadata(path, meta, fsync)
    # Only now is the old generation unreferenced; a crash before this line leaves it usable.
    # It stays as the spare that the next save overwrites; other old generations, files of
    # ranks that wrote nothing this time, and temporary files are deleted. Deleting a large
    # file costs about as much as writing a tenth of it, so that runs in the background.
    keep = {gen, previous}
    listed = {f["name"].split("/")[-1] for f in files}
    stale = [os.path.join(path, name) for name in os.listdir(path)
             if (F.GEN_RE.match(name) and name not in keep)
             or (name.startswith(f".{F.META_NAME}.") and name.endswith(".tmp"))]
    stale += [os.path.join(path, gen, name) for name in os.listdir(os.path.join(path, gen))
              if name not in listed]
    if stale:
        t = threading.Thread(target=_remove, args=(stale,), name="numaccel-ckpt-cleanup")
        _cleaners.append(t)
        t.start()


_cleaners: list[threading.Thread] = []


def _referenced(path: str) -> str | None:
    """The generation the current metadata at ``path`` points to, if it can be read."""
    try:
        with open(os.path.join(path, F.META_NAME), "rb") as f:
            gen = json.loads(f.read().decode("utf-8")).get("generation")
        return gen if isinstance(gen, str) and F.GEN_RE.match(gen) else None
    except (OSError, ValueError, AttributeError):
        return None


def _spare(path: str) -> str | None:
    """An earlier generation folder at ``path`` that no metadata refers to, or None.

    Never the referenced one; and when the metadata cannot be read, none at all (a damaged
    checkpoint's data are left alone).
    """
    wait_for_cleanup()  # never rename a folder that a background clean-up is deleting
    if not os.path.isdir(path):
        return None
    if os.path.exists(os.path.join(path, F.META_NAME)):
        live = _referenced(path)
        if live is None:
            return None
    else:
        live = None
    gens = [n for n in os.listdir(path) if F.GEN_RE.match(n) and n != live
            and os.path.isdir(os.path.join(path, n))]
    return max(gens, key=lambda n: os.path.getmtime(os.path.join(path, n)), default=None)


def _remove(paths: list[str]) -> None:
    for full in paths:
        if os.path.isdir(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.remove(full)
            except OSError:
                pass


def wait_for_cleanup() -> None:
    """Wait until earlier saves have deleted the data they replaced (used by tests)."""
    while _cleaners:
        _cleaners.pop().join()


# Async saves still running in this process, by absolute path: a later save to the same path
# waits for them, so that its clean-up can never delete a generation that is being written.
_inflight: dict[str, Future] = {}


def _wait_inflight(path: str | os.PathLike) -> None:
    fut = _inflight.pop(os.path.abspath(os.fspath(path)), None)
    if fut is not None:
        try:
            fut.result()
        except Exception:  # noqa: BLE001, S110 (its own caller gets that error)
            pass


def save(state: dict, path: str | os.PathLike, comm: Any = None, *,
         chunk_bytes: int = DEFAULT_CHUNK_BYTES, fsync: bool = True) -> None:
    """Save a (possibly sharded) state to the checkpoint directory ``path``; collective.

    Every rank writes only the boxes it is assigned (replicated arrays once), into its own
    file, in parallel. The checkpoint appears atomically when all ranks have finished; until
    then a previous checkpoint at ``path`` stays intact and loadable.

        >>> import numpy as np, tempfile, os
        >>> d = os.path.join(tempfile.mkdtemp(), "ck")
        >>> save({"w": np.arange(4.0), "step": 3}, d)
        >>> sorted(os.listdir(d))[-1]
        'numaccel_ckpt.json'
    """
    _wait_inflight(path)
    comm = as_comm(comm)
    setup = prepare(state, path, comm, chunk_bytes)
    pieces = ((k, o, s, _le_contiguous(v)) for k, o, s, v in setup["pieces"])
    records, fsize, err = write_pieces(os.path.join(setup["path"], setup["fname"]), pieces,
                                       fsync=fsync)
    commit(comm, setup, records, fsize, err, fsync)


def async_save(state: dict, path: str | os.PathLike, comm: Any = None, *,
               staging_bytes: int = DEFAULT_STAGING_BYTES,
               chunk_bytes: int = DEFAULT_CHUNK_BYTES, fsync: bool = True) -> Future:
    """Like :func:`save`, but returns a Future once the data are copied to staging buffers.

    The caller may change its arrays as soon as this returns. Staging memory stays below
    ``staging_bytes``: when the budget is full, this call waits for the writer thread to drain
    earlier chunks. The commit runs on a duplicate of ``comm`` in the writer thread, so MPI must
    be initialized with ``MPI_THREAD_MULTIPLE`` (mpi4py's default).

        >>> import numpy as np, tempfile, os
        >>> w = np.ones(4)
        >>> fut = async_save({"w": w}, os.path.join(tempfile.mkdtemp(), "ck"))
        >>> w[:] = 0                      # safe: the data were staged
        >>> fut.result().endswith("ck")
        True
    """
    if staging_bytes < 1:
        raise ValueError(f"staging_bytes must be positive, got {staging_bytes}")
    _wait_inflight(path)
    own = comm is None
    comm = as_comm(comm)
    if not own:
        if type(comm).__module__.startswith("mpi4py"):
            from mpi4py import MPI
            thread_ok = MPI.Query_thread() >= MPI.THREAD_MULTIPLE
        else:
            thread_ok = True  # a communicator-like object of the caller's (e.g. in tests)
        if not thread_ok:
            raise RuntimeError(
                "async_save needs MPI initialized with MPI_THREAD_MULTIPLE (mpi4py's default "
                "thread_level='multiple'); use save() instead, or keep mpi4py.rc.thread_level"
            )
    setup = prepare(state, path, comm, min(chunk_bytes, staging_bytes))
    # The writer thread's collectives run on their own communicator, so they cannot interleave
    # with whatever the caller does on ``comm`` meanwhile.
    bg_comm = comm if own else comm.Dup()
    cond = threading.Condition()
    inflight = [0]
    q: Queue = Queue()
    fut: Future = Future()
    fut.set_running_or_notify_cancel()
    _inflight[os.path.abspath(setup["path"])] = fut

    def release(n: int) -> None:
        with cond:
            inflight[0] -= n
            cond.notify_all()

    def consume() -> Iterator[tuple]:
        while (item := q.get()) is not None:
            yield item

    def writer() -> None:
        try:
            records, fsize, err = write_pieces(os.path.join(setup["path"], setup["fname"]),
                                               consume(), release, fsync)
            if stage_err:
                err = err or stage_err[0]
            commit(bg_comm, setup, records, fsize, err, fsync)
            fut.set_result(setup["path"])
        except BaseException as e:  # noqa: BLE001 (handed to the caller through the future)
            fut.set_exception(e)
        finally:
            if not own:
                bg_comm.Free()

    stage_err: list = []
    t = threading.Thread(target=writer, name="numaccel-ckpt-writer")
    t.start()
    try:
        for key, goff, shape, view in setup["pieces"]:
            n = view.nbytes
            with cond:
                cond.wait_for(lambda n=n: inflight[0] == 0 or inflight[0] + n <= staging_bytes)
                inflight[0] += n
            staged = np.empty(shape, view.dtype.newbyteorder("<"))
            np.copyto(staged, view)
            q.put((key, goff, shape, staged))
    except BaseException as e:
        stage_err.append((type(e).__name__, f"staging: {e}"))
        raise
    finally:
        q.put(None)
    return fut
