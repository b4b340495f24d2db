"""numaccel.ckpt with real MPI ranks (mpiexec -n K python -m mpi4py tests/ckpt_mpi/worker.py).

Few, small launches: 4 -> 1, 1 -> 4, 4 -> 3 uneven (2-D blocks loaded as rows), async save with
mutation right after, a rank SIGKILLed mid-save, and a flipped byte in a rank's chunk. The
state mixes row/column/2-D-block shards, replicated arrays, bfloat16 and an optimizer state.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("mpi4py")
from numaccel import ckpt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "ckpt_mpi"))
import common

pytestmark = pytest.mark.mpi
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(REPO, "tests", "ckpt_mpi", "worker.py")
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
if MPIEXEC is None:
    pytest.skip("mpiexec not found (install the 'dist' extra: mpi4py, mpich)",
                allow_module_level=True)


def mpirun(n: int, *args: str, expect_ok: bool = True) -> subprocess.CompletedProcess:
    cmd = [MPIEXEC, "-n", str(n), sys.executable, "-m", "mpi4py", WORKER, *map(str, args)]
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
                       check=False)
    if expect_ok:
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr[-4000:]}"
    return r


@pytest.fixture(scope="module")
def saved4(tmp_path_factory):
    """A checkpoint written by 4 real ranks (rows, cols, 2-D blocks, replicated, bf16)."""
    path = tmp_path_factory.mktemp("mpi") / "p4"
    mpirun(4, "save", path)
    return path


def test_4_to_1(saved4):
    meta = ckpt.read_metadata(str(saved4))
    assert meta.world_size == 4 and len(meta.files) == 4
    # Replicated arrays were written once, not by every rank.
    assert len(meta.arrays["model.norm.scale"].chunks) == 1
    state = common.make_state(0, 1, "rep", fill=False)
    ckpt.load(state, saved4)
    common.check_state(state, 0, 1, "rep")


def test_4_to_3_uneven_blocks_to_rows(saved4):
    # "rows": 10 rows over 3 ranks -> 4/3/3; the 2-D block weight is read back as row shards.
    mpirun(3, "load", saved4, "rows")


def test_1_to_4(tmp_path):
    path = tmp_path / "p1"
    ckpt.save(common.make_state(0, 1, "rep"), path)
    mpirun(4, "load", path, "block")


def test_async_save_then_mutate(tmp_path):
    path = tmp_path / "pa"
    mpirun(2, "async", path)  # the worker checks the loaded data too
    state = common.make_state(0, 1, "rep", fill=False)
    ckpt.load(state, path)
    common.check_state(state, 0, 1, "rep")


def test_killed_rank_leaves_previous_checkpoint(saved4, tmp_path):
    path = tmp_path / "pk"
    shutil.copytree(saved4, path)
    r = mpirun(2, "kill", path, expect_ok=False)
    assert r.returncode != 0
    gens = sorted(n for n in os.listdir(path) if n.startswith("g-"))
    assert len(gens) == 2  # the dead save's folder is there, but not referenced
    state = common.make_state(0, 1, "rep", fill=False)
    ckpt.load(state, path)
    common.check_state(state, 0, 1, "rep")
    ckpt.inspect(path, verify=True)


def test_flipped_byte_in_a_rank_file(saved4, tmp_path):
    path = tmp_path / "pf"
    shutil.copytree(saved4, path)
    meta = ckpt.read_metadata(str(path))
    c = meta.arrays["model.layers.0.mlp.w"].chunks[2]
    fn = os.path.join(path, meta.files[c.file])
    with open(fn, "r+b") as f:
        f.seek(c.offset + c.nbytes - 1)
        b = f.read(1)
        f.seek(c.offset + c.nbytes - 1)
        f.write(bytes([b[0] ^ 0x01]))
    state = common.make_state(0, 1, "rep", fill=False)
    with pytest.raises(ckpt.ChecksumError, match=r"'model.layers.0.mlp.w'.*offsets=\(0, 5\)"):
        ckpt.load(state, path)
    # The other arrays are unaffected; only the damaged chunk is refused.
    part = {"model": {"embed": {"weight": np.zeros((10, 6), np.float32)}}}
    ckpt.load(part, path, strict=False)
    assert common.same_bits(part["model"]["embed"]["weight"],
                            common.global_array("model.embed.weight"))
