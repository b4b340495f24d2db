"""numaccel.ckpt in one process: round trips, resharding over in-process ranks, errors, tools.

Ranks are simulated by threads sharing a tiny communicator (allgather/gather/bcast/Dup), so
N -> M resharding runs here without MPI; tests/test_ckpt_mpi.py repeats the key cases with real
mpiexec ranks.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import threading
from typing import ClassVar

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaccel import ckpt
from numaccel.ckpt import (
    CheckpointError,
    CheckpointVersionError,
    ChecksumError,
    Shard,
    _format,
    _save,
)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "ckpt_mpi"))
import common

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
          ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


# ---- in-process ranks -------------------------------------------------------------------------

class _Hub:
    def __init__(self, n: int) -> None:
        self.n, self.slots = n, [None] * n
        self.barrier = threading.Barrier(n, timeout=30)


class ThreadComm:
    """Just the communicator methods numaccel.ckpt uses, for ranks that are threads."""

    hubs: ClassVar[list] = []

    def __init__(self, hub: _Hub, rank: int) -> None:
        self.hub, self.rank = hub, rank

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.hub.n

    def _exchange(self, x):
        self.hub.barrier.wait()
        self.hub.slots[self.rank] = x
        self.hub.barrier.wait()
        out = list(self.hub.slots)
        self.hub.barrier.wait()
        return out

    def allgather(self, x):
        return self._exchange(x)

    def gather(self, x, root=0):
        out = self._exchange(x)
        return out if self.rank == root else None

    def bcast(self, x, root=0):
        return self._exchange(x)[root]

    def barrier(self) -> None:
        self.hub.barrier.wait()

    def Dup(self):
        hub = _Hub(self.hub.n) if self.rank == 0 else None
        hub = self.bcast(hub)
        ThreadComm.hubs.append(hub)
        return ThreadComm(hub, self.rank)

    def Free(self) -> None:
        pass


def run_ranks(n: int, fn):
    """Run fn(comm, rank) on n thread-ranks; re-raise the first failure; return results."""
    hub = _Hub(n)
    ThreadComm.hubs.append(hub)
    results, errors = [None] * n, []

    def body(r: int) -> None:
        try:
            results[r] = fn(ThreadComm(hub, r), r)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            for h in ThreadComm.hubs:
                h.barrier.abort()  # the other ranks stop waiting instead of timing out

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ThreadComm.hubs.clear()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]
    return results


def sample(dtype, shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.asarray(rng.integers(0, 2, shape).astype(bool))
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.asarray(rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True))
    a = np.asarray(rng.standard_normal(shape) * 3)
    if dt.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    a = np.asarray(a.astype(dt))
    flat = a.reshape(-1)
    for i, v in enumerate([np.nan, np.inf, -np.inf, -0.0][: flat.size]):
        if not (dt == ml_dtypes.float8_e4m3fn and np.isinf(v)):  # e4m3fn has no inf
            flat[i] = v
    return a


# ---- round trips ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (1,), (1, 1), (5, 7), (2, 3, 4)])
def test_round_trip_every_dtype_and_shape(tmp_path, dtype, shape):
    a = sample(dtype, shape)
    ckpt.save({"a": a}, tmp_path / "ck", chunk_bytes=16)
    out = {"a": np.zeros(shape, dtype)}
    ckpt.load(out, tmp_path / "ck")
    assert common.same_bits(out["a"], a)


@pytest.mark.parametrize("kind", ["strided", "reversed", "fortran", "bigendian"])
def test_noncontiguous_sources_and_destinations(tmp_path, kind):
    base = sample(np.float32, (9, 12), seed=3)
    src = {"strided": base[::2, 1::3], "reversed": base[::-1, ::-1],
           "fortran": np.asfortranarray(base),
           "bigendian": base.astype(">f4")}[kind]
    ckpt.save({"x": src}, tmp_path / "ck", chunk_bytes=40)
    dest = np.zeros((2 * src.shape[0], 2 * src.shape[1]), np.float32)[::2, ::2]  # a view
    if kind == "fortran":
        dest = np.zeros(src.shape, np.float32, order="F")
    if kind == "bigendian":
        dest = np.zeros(src.shape, ">f4")
    ckpt.load({"x": dest}, tmp_path / "ck")
    np.testing.assert_array_equal(dest, src)


def test_values_round_trip_exactly(tmp_path):
    vals = {"i": -(2 ** 70), "f": -0.0, "nan": float("nan"), "inf": float("-inf"),
            "c": complex(1.5, -2.0), "s": "ünïcode.with.dots", "b": b"\x00\xff", "none": None,
            "t": True, "f32": np.float32(1 / 3), "bf": ml_dtypes.bfloat16(2.5),
            "i64": np.int64(-7), "nested": [1, (2.0, "x"), {"k": [None, np.uint8(3)]}],
            "e": [], 3: "int key"}
    ckpt.save({"v": vals}, tmp_path / "ck")
    out = {"v": {k: 0 for k in vals}}
    ckpt.load(out, tmp_path / "ck")
    got = out["v"]
    for k, v in vals.items():
        if isinstance(v, float) and math.isnan(v):
            assert math.isnan(got[k])
        elif isinstance(v, np.generic):
            assert type(got[k]) is type(v) and got[k].tobytes() == v.tobytes()
        else:
            assert type(got[k]) is type(v) and got[k] == v, k
    assert str(np.float64(got["f"])) == "-0.0"


def test_optimizer_state_round_trip_by_name(tmp_path):
    """A model + optimizer state, saved from 4 in-process ranks, loaded by name on 1 and 3."""
    path = tmp_path / "ck"
    run_ranks(4, lambda comm, r: ckpt.save(common.make_state(r, 4), path, comm, chunk_bytes=32))
    one = common.make_state(0, 1, "rep", fill=False)
    ckpt.load(one, path)
    common.check_state(one, 0, 1, "rep")
    assert one["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)

    def load3(comm, r):
        s = common.make_state(r, 3, "cols", fill=False)
        ckpt.load(s, path, comm)
        common.check_state(s, r, 3, "cols")
    run_ranks(3, load3)

    def load8(comm, r):  # 8 ranks over 5..10 rows: some ranks hold empty Shards
        s = common.make_state(r, 8, "rows", fill=False)
        ckpt.load(s, path, comm)
        common.check_state(s, r, 8, "rows")
    run_ranks(8, load8)


def test_list_containers_of_arrays(tmp_path):
    state = {"layers": [{"w": np.arange(3.0)}, {"w": np.arange(4.0)}], "hist": [1, 2]}
    ckpt.save(state, tmp_path / "ck")
    meta = ckpt.read_metadata(str(tmp_path / "ck"))
    assert set(meta.arrays) == {"layers.0.w", "layers.1.w"} and set(meta.values) == {"hist"}
    out = {"layers": [{"w": np.zeros(3)}, {"w": np.zeros(4)}], "hist": None}
    ckpt.load(out, tmp_path / "ck")
    np.testing.assert_array_equal(out["layers"][1]["w"], np.arange(4.0))
    assert out["hist"] == [1, 2]


# ---- resharding -------------------------------------------------------------------------------

def _grid(draw, shape):
    """A random block partition of ``shape`` into at most 4 boxes (uneven cuts per axis)."""
    budget, cuts = 4, []
    for n in shape:
        k = draw(st.integers(1, max(1, min(n, budget))))
        budget //= k
        pts = sorted(draw(st.sets(st.integers(1, n - 1), min_size=k - 1, max_size=k - 1))) \
            if k > 1 else []
        cuts.append([0] + pts + [n])
    boxes = [((), ())]
    for c in cuts:
        boxes = [(o + (a,), s + (b - a,)) for o, s in boxes for a, b in itertools.pairwise(c)]
    return boxes


@st.composite
def _resharding_case(draw):
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=3)))
    dtype = draw(st.sampled_from([np.float32, ml_dtypes.bfloat16, np.int16, np.complex64]))
    chunk = draw(st.sampled_from([4, 24, 1 << 20]))
    return shape, _grid(draw, shape), _grid(draw, shape), dtype, chunk


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_resharding_case())
def test_any_sharding_to_any_other(tmp_path_factory, case):
    shape, save_boxes, load_boxes, dtype, chunk = case
    g = sample(dtype, shape, seed=len(shape))
    path = tmp_path_factory.mktemp("rs") / "ck"

    def shard_of(box, fill=True):
        off, shp = box
        sl = tuple(slice(o, o + n) for o, n in zip(off, shp))
        return Shard(g[sl].copy() if fill else np.zeros(shp, dtype), off, shape)

    # One extra rank replicates rank 0's box: it must be written once.
    boxes = save_boxes + [save_boxes[0]]
    run_ranks(len(boxes), lambda comm, r: ckpt.save(
        {"p": {"w": shard_of(boxes[r])}, "step": r}, path, comm, chunk_bytes=chunk))
    meta = ckpt.read_metadata(str(path))
    assert sum(c.nbytes for c in meta.arrays["p.w"].chunks) == g.nbytes
    full = {"step": None, "p": {"w": np.zeros(shape, dtype)}}
    assert ckpt.load(full, path)["step"] == 0
    assert common.same_bits(full["p"]["w"], g)

    def load(comm, r):
        s = {"p": {"w": shard_of(load_boxes[r], fill=False)}, "step": None}
        ckpt.load(s, path, comm)
        assert common.same_bits(s["p"]["w"].local, shard_of(load_boxes[r]).local)
    run_ranks(len(load_boxes), load)


def test_replicated_arrays_written_once_and_spread(tmp_path):
    reps = {f"r{i}": np.full(1000, i, np.float64) for i in range(6)}
    run_ranks(3, lambda comm, r: ckpt.save(dict(reps), tmp_path / "ck", comm))
    meta = ckpt.read_metadata(str(tmp_path / "ck"))
    assert all(len(a.chunks) == 1 for a in meta.arrays.values())
    writers = [meta.files[a.chunks[0].file] for a in meta.arrays.values()]
    assert len(set(writers)) == 3  # the six arrays are balanced over all three ranks
    assert sum(meta.file_sizes) < 6 * 8000 + 6 * _format.ALIGN


def test_load_reads_only_needed_chunks(tmp_path, monkeypatch):
    g = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    ckpt.save({"w": g}, tmp_path / "ck", chunk_bytes=8 * 4 * 8)  # 8 rows per chunk
    seen = []
    real = ckpt._load._Reader.read
    monkeypatch.setattr(ckpt._load._Reader, "read",
                        lambda self, key, c, buf: (seen.append(c.offsets), real(self, key, c, buf)))
    s = Shard(np.zeros((10, 8), np.float32), (20, 0), (64, 8))
    ckpt.load({"w": s}, tmp_path / "ck")
    np.testing.assert_array_equal(s.local, g[20:30])
    assert sorted(seen) == [(16, 0), (24, 0)]


# ---- async ------------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [1, 100, 1 << 30])
def test_async_save_stages_then_caller_may_mutate(tmp_path, budget):
    a = sample(np.float32, (50, 13), seed=1)
    b = sample(ml_dtypes.bfloat16, (7,), seed=2)
    orig = (a.copy(), b.copy())
    fut = ckpt.async_save({"a": a, "b": b, "n": 5}, tmp_path / "ck", staging_bytes=budget,
                          chunk_bytes=256)
    a[...] = 0
    b[...] = 1
    assert fut.result(timeout=30) == str(tmp_path / "ck")
    out = {"a": np.empty_like(a), "b": np.empty_like(b), "n": 0}
    ckpt.load(out, tmp_path / "ck")
    assert common.same_bits(out["a"], orig[0]) and common.same_bits(out["b"], orig[1])
    assert out["n"] == 5


def test_async_save_staging_stays_within_budget(tmp_path, monkeypatch):
    """Track bytes staged but not yet written while a slow writer drains them."""
    live, peak, lock = [0], [0], threading.Lock()
    real_copyto, real_write = np.copyto, _save.write_pieces

    def counting_copyto(dst, src, *args, **kw):
        with lock:
            live[0] += dst.nbytes
            peak[0] = max(peak[0], live[0])
        return real_copyto(dst, src, *args, **kw)

    def slow_write(fname, pieces, done=None, fsync=True):
        def d(n):
            with lock:
                live[0] -= n
            done(n)
        return real_write(fname, pieces, d, fsync)

    monkeypatch.setattr(_save.np, "copyto", counting_copyto)
    monkeypatch.setattr(_save, "write_pieces", slow_write)
    arrs = {f"a{i}": np.full((40, 10), i, np.float64) for i in range(5)}  # 3200 B each
    fut = ckpt.async_save(arrs, tmp_path / "ck", staging_bytes=4000, chunk_bytes=1 << 20)
    fut.result(timeout=30)
    assert 0 < peak[0] <= 4000
    out = {k: np.zeros_like(v) for k, v in arrs.items()}
    ckpt.load(out, tmp_path / "ck")
    assert all((out[k] == arrs[k]).all() for k in arrs)


def test_async_save_over_ranks_with_failure_reported_in_future(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(_save, "_write_all", boom)

    def body(comm, r):
        fut = ckpt.async_save({"w": Shard(np.ones(2), (2 * r,), (4,))}, tmp_path / "ck", comm)
        with pytest.raises(CheckpointError, match="disk full"):
            fut.result(timeout=30)
    run_ranks(2, body)
    with pytest.raises(CheckpointError, match="no numaccel_ckpt.json"):
        ckpt.load({"w": np.zeros(4)}, tmp_path / "ck")


# ---- atomicity --------------------------------------------------------------------------------

def test_failed_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ck"
    old = {"w": np.arange(100.0), "step": 1}
    ckpt.save(old, path, chunk_bytes=64)
    real = _save._write_all
    calls = [0]

    def flaky(f, mv):
        calls[0] += 1
        if calls[0] == 3:
            raise OSError("no space left on device")
        return real(f, mv)
    monkeypatch.setattr(_save, "_write_all", flaky)
    with pytest.raises(CheckpointError, match="no space left"):
        ckpt.save({"w": np.zeros(100), "step": 2}, path, chunk_bytes=64)
    monkeypatch.setattr(_save, "_write_all", real)
    out = {"w": np.empty(100), "step": 0}
    ckpt.load(out, path)
    assert out["step"] == 1 and (out["w"] == old["w"]).all()
    # A rank killed mid-save (simulated: its generation folder left behind) is recycled or
    # cleaned up by the next successful saves, and never read.
    os.makedirs(path / ("g-" + "0" * 32))
    for step in (3, 4):
        ckpt.save({"w": np.ones(100), "step": step}, path)
    _save.wait_for_cleanup()
    gens = sorted(n for n in os.listdir(path) if n.startswith("g-"))
    assert "g-" + "0" * 32 not in gens and len(gens) == 2  # the current one and a spare
    assert ckpt.read_metadata(str(path)).generation in gens
    assert ckpt.load(out, path)["step"] == 4


def test_repeated_saves_recycle_one_spare_generation(tmp_path):
    path = tmp_path / "ck"
    seen = []
    for i, n in enumerate([3, 3, 1, 2]):
        g = np.arange(12.0) + i
        run_ranks(n, lambda comm, r, g=g, n=n: ckpt.save(
            {"w": Shard(g[r * 12 // n:(r + 1) * 12 // n].copy(), (r * 12 // n,), (12,))},
            path, comm))
        _save.wait_for_cleanup()
        meta = ckpt.read_metadata(str(path))
        gens = sorted(x for x in os.listdir(path) if x.startswith("g-"))
        assert len(gens) == min(i + 1, 2) and meta.generation in gens
        # Files of ranks that did not write this time are gone from the new generation.
        assert sorted(os.listdir(path / meta.generation)) == [f"rank{r:05d}.bin"
                                                              for r in range(n)]
        out = {"w": np.zeros(12)}
        ckpt.load(out, path)
        np.testing.assert_array_equal(out["w"], g)
        seen.append(meta.generation)
    assert len(set(seen)) == 4  # every save is a new generation name, even when recycled


def test_save_refuses_foreign_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.txt"):
        ckpt.save({"w": np.zeros(2)}, tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a directory"):
        ckpt.save({"w": np.zeros(2)}, tmp_path / "file")


# ---- errors on save ---------------------------------------------------------------------------

@pytest.mark.parametrize("state,exc,match", [
    ({"a": np.array(["x"])}, TypeError, "dtype <U1"),
    ({"a": np.array([object()])}, TypeError, "dtype object"),
    ({"a": {"b": object()}}, TypeError, "'a.b' is a builtins.object"),
    ({"a.b": 1, "a": {"b": 2}}, ValueError, "same name 'a.b'"),
    ({(1, 2): np.zeros(1)}, TypeError, "only str and int keys"),
    ([np.zeros(1)], TypeError, "must be a dict"),
    ({"w": Shard(np.zeros(2), (0,), (4,))}, ValueError, "cover 2 of 4 elements"),
])
def test_save_rejects_bad_states(tmp_path, state, exc, match):
    with pytest.raises(exc, match=match):
        ckpt.save(state, tmp_path / "ck")
    assert not (tmp_path / "ck").exists()


def test_shard_validation():
    with pytest.raises(ValueError, match="does not fit"):
        Shard(np.zeros((2, 2)), (3, 0), (4, 2))
    with pytest.raises(ValueError, match="length 2"):
        Shard(np.zeros((2, 2)), (0,), (4, 2))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        Shard([1, 2], (0,), (2,))


def test_ranks_disagreeing_or_overlapping_raise_on_every_rank(tmp_path):
    def overlap(comm, r):
        with pytest.raises(ValueError, match="partly overlaps"):
            ckpt.save({"w": Shard(np.zeros(3), (r,), (4,))}, tmp_path / "a", comm)
    run_ranks(2, overlap)

    def disagree(comm, r):
        with pytest.raises(ValueError, match="rank 1 has dtype float32"):
            ckpt.save({"w": np.zeros(2, [np.float64, np.float32][r])}, tmp_path / "b", comm)
    run_ranks(2, disagree)

    def one_bad(comm, r):
        state = {"w": np.zeros(2) if r == 0 else np.zeros(2, dtype="U1")}
        with pytest.raises((TypeError, CheckpointError), match="dtype <U1"):
            ckpt.save(state, tmp_path / "c", comm)
    run_ranks(2, one_bad)


# ---- errors on load ---------------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "ck"
    ckpt.save({"model": {"w": np.arange(12, dtype=np.float32).reshape(3, 4),
                         "b": np.ones(4, ml_dtypes.bfloat16)}, "step": 7}, path, chunk_bytes=16)
    return path


def _state():
    return {"model": {"w": np.zeros((3, 4), np.float32), "b": np.zeros(4, ml_dtypes.bfloat16)},
            "step": 0}


def test_missing_and_unexpected_keys_named(saved):
    s = _state()
    del s["model"]["b"]
    s["model"]["extra"] = np.zeros(1)
    with pytest.raises(CheckpointError, match=r"missing from the checkpoint: 'model.extra'.*"
                                              r"not in the state: 'model.b'.*strict=False"):
        ckpt.load(s, saved)
    assert s["step"] == 0  # nothing was changed
    ckpt.load(s, saved, strict=False)
    assert s["step"] == 7 and s["model"]["w"][2, 3] == 11 and s["model"]["extra"][0] == 0


@pytest.mark.parametrize("bad,match", [
    ({"w": np.zeros((4, 3), np.float32)}, r"'model.w': stored shape \(3, 4\).*\(4, 3\)"),
    ({"w": Shard(np.zeros((1, 4), np.float32), (0, 0), (2, 4))}, r"global shape \(2, 4\)"),
    ({"w": np.zeros((3, 4), np.float64)}, "'model.w': stored dtype float32.*float64"),
    ({"b": np.zeros(4, np.float16)}, "'model.b': stored dtype bfloat16"),
    ({"w": 3}, "'model.w' is a stored array of shape"),
])
def test_shape_dtype_kind_mismatch_named(saved, bad, match):
    s = _state()
    s["model"].update(bad)
    with pytest.raises(CheckpointError, match=match):
        ckpt.load(s, saved)


def test_value_where_array_expected_and_readonly(saved):
    s = _state()
    s["step"] = np.zeros(1)
    with pytest.raises(CheckpointError, match="'step' is a stored plain value"):
        ckpt.load(s, saved)
    s = _state()
    s["model"]["w"].flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ckpt.load(s, saved)


def _data_file(path) -> str:
    meta = ckpt.read_metadata(str(path))
    return os.path.join(path, meta.files[0])


def test_flipped_byte_reports_key_and_chunk(saved):
    meta = ckpt.read_metadata(str(saved))
    c = meta.arrays["model.b"].chunks[0]
    with open(_data_file(saved), "r+b") as f:
        f.seek(c.offset + 1)
        byte = f.read(1)
        f.seek(c.offset + 1)
        f.write(bytes([byte[0] ^ 0x10]))
    with pytest.raises(ChecksumError, match=r"array 'model.b', chunk offsets=\(0,\).*checksum"):
        ckpt.load(_state(), saved)
    with pytest.raises(ChecksumError):
        ckpt.inspect(saved, verify=True)
    # A load that does not touch the damaged chunk still works.
    ckpt.load({"model": {"w": _state()["model"]["w"]}}, saved, strict=False)


def test_truncated_file_reports_key(saved):
    fn = _data_file(saved)
    size = os.path.getsize(fn)
    with open(fn, "r+b") as f:
        f.truncate(size - 3)
    with pytest.raises(ChecksumError, match=r"truncated, read \d+ of \d+ bytes"):
        ckpt.load(_state(), saved)


def _edit_meta(path, fn):
    mfile = os.path.join(path, _format.META_NAME)
    with open(mfile) as f:
        m = json.load(f)
    fn(m)
    with open(mfile, "w") as f:
        json.dump(m, f)


def test_newer_version_and_not_a_checkpoint(saved, tmp_path):
    _edit_meta(saved, lambda m: m.update(version=_format.VERSION + 1))
    with pytest.raises(CheckpointVersionError, match=f"version {_format.VERSION + 1}.*Upgrade"):
        ckpt.load(_state(), saved)
    with pytest.raises(CheckpointError, match="does not exist"):
        ckpt.load(_state(), tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="is not a numaccel checkpoint"):
        ckpt.load(_state(), tmp_path / "empty")
    (tmp_path / "f.npy").write_bytes(b"\x93NUMPY")
    with pytest.raises(CheckpointError, match="is not a directory"):
        ckpt.load(_state(), tmp_path / "f.npy")
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / _format.META_NAME).write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        ckpt.load(_state(), tmp_path / "j")
    (tmp_path / "j" / _format.META_NAME).write_text('{"format": "other"}')
    with pytest.raises(CheckpointError, match="no format='numaccel.ckpt'"):
        ckpt.load(_state(), tmp_path / "j")


@pytest.mark.parametrize("edit,match", [
    (lambda m: m["files"][0].update(name="../../etc/passwd"), "not allowed"),
    (lambda m: m["arrays"]["model.w"].update(dtype="object"), "unsupported dtype 'object'"),
    (lambda m: m["arrays"]["model.w"]["chunks"][0].update(nbytes=10 ** 12), "nbytes"),
    (lambda m: m["arrays"]["model.w"]["chunks"][0].update(offsets=[9, 0]), "exceeds shape"),
    (lambda m: m["arrays"]["model.w"]["chunks"].pop(), "cover .* requested elements"),
    (lambda m: m["values"].update(step={"t": "pickle", "v": "cos\nsystem"}), "unknown value tag"),
    (lambda m: m["values"].update(step={"t": "int", "v": "__import__('os')"}), "malformed"),
    (lambda m: m.pop("arrays"), "malformed metadata"),
])
def test_hostile_or_damaged_metadata_is_refused(saved, edit, match):
    _edit_meta(saved, edit)
    with pytest.raises(CheckpointError, match=match):
        ckpt.load(_state(), saved)


# ---- tools ------------------------------------------------------------------------------------

def test_consolidate_to_safetensors_and_cli(tmp_path):
    path = tmp_path / "ck"
    run_ranks(4, lambda comm, r: ckpt.save(common.make_state(r, 4), path, comm))
    out = str(tmp_path / "all.safetensors")
    from numaccel.ckpt.__main__ import main
    assert main(["consolidate", str(path), out]) == 0
    from safetensors import safe_open
    with safe_open(out, framework="numpy") as f:
        names = set(f.keys())
        meta = f.metadata()
        for name in names:
            assert common.same_bits(f.get_tensor(name), common.global_array(name)), name
    assert names == set(ckpt.read_metadata(str(path)).arrays)
    assert json.loads(meta["numaccel.values"])["optim.step"] == {"t": "int", "v": 10}
    # The module entry point, as a user runs it.
    r = subprocess.run([sys.executable, "-m", "numaccel.ckpt", "inspect", str(path), "--verify"],
                       capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
                       env={**os.environ, "PYTHONPATH": REPO})
    assert r.returncode == 0, r.stderr
    assert "model.layers.0.mlp.w  bfloat16  (5, 9)" in r.stdout
    assert "written by 4 ranks" in r.stdout and "checksums verified" in r.stdout
    assert main(["inspect", str(tmp_path / "nope")]) == 2


def test_consolidate_rejects_dtypes_safetensors_lacks(tmp_path):
    ckpt.save({"c": np.zeros(2, np.complex128)}, tmp_path / "ck")
    with pytest.raises(TypeError, match="complex128"):
        ckpt.consolidate(tmp_path / "ck", tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


@pytest.mark.parametrize("corrupt", [None, 0, 3, 6])
def test_checksums_on_the_helper_thread(tmp_path, monkeypatch, corrupt):
    """Large chunks are checksummed on a helper thread: same results, same errors."""
    monkeypatch.setattr(_format, "PARALLEL_CRC_BYTES", 1)
    g = sample(np.float64, (7, 50), seed=5)
    path = tmp_path / "ck"
    ckpt.save({"w": g, "v": np.arange(3)}, path, chunk_bytes=400)
    meta = ckpt.read_metadata(str(path))
    assert len(meta.arrays["w"].chunks) == 7
    if corrupt is not None:
        c = sorted(meta.arrays["w"].chunks, key=lambda c: c.offset)[corrupt]
        with open(_data_file(path), "r+b") as f:
            f.seek(c.offset + 5)
            b = f.read(1)
            f.seek(c.offset + 5)
            f.write(bytes([b[0] ^ 0x80]))
    out = {"w": np.zeros_like(g), "v": np.zeros(3, int)}
    if corrupt is None:
        ckpt.load(out, path)
        assert common.same_bits(out["w"], g)
    else:
        with pytest.raises(ChecksumError, match=rf"'w', chunk offsets=\({corrupt}, 0\)"):
            ckpt.load(out, path)


def test_works_without_mpi4py(tmp_path):
    """comm=None needs no MPI: run save/async_save/load with mpi4py made unimportable."""
    code = (
        "import sys; sys.modules['mpi4py'] = None\n"
        "import numpy as np, numaccel.ckpt as c\n"
        f"p = {str(tmp_path / 'ck')!r}\n"
        "c.save({'w': np.arange(5.0)}, p)\n"
        "c.async_save({'w': np.arange(5.0) * 2}, p).result()\n"
        "s = {'w': np.zeros(5)}; c.load(s, p); assert s['w'][4] == 8.0\n"
        "assert 'mpi4py' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO},
                       check=False)
    assert r.returncode == 0, r.stderr


def test_back_to_back_async_saves_to_one_path(tmp_path):
    """A second save waits for the first one's commit; the last one wins, nothing is lost."""
    path = tmp_path / "ck"
    futs = [ckpt.async_save({"w": np.full(3000, float(i))}, path, staging_bytes=1000,
                            chunk_bytes=800) for i in range(3)]
    ckpt.save({"w": np.full(3000, 7.0)}, path)
    assert all(f.result(timeout=30) == str(path) for f in futs)
    out = {"w": np.zeros(3000)}
    ckpt.load(out, path)
    assert (out["w"] == 7.0).all()
    ckpt.inspect(path, verify=True)
