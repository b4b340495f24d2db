"""NUMACCEL_CPU_CAPABILITY selects the instruction set: checked in generated assembly."""
import os
import subprocess
import sys

import pytest

import numaccel
from numaccel.cpu_features import host_features, resolve

SCRIPT = r"""
import numpy as np, numaccel
f = numaccel.accelerate(lambda x, y: x * y + 1.5, backend="cpu")
x = np.ones(1 << 19, np.float32)   # over parallel_min: a kernel of its own, not the wrapper
f(x, x)
run = f.entries[0].run
mod = next(iter(run.steps[0].mods.values()))
asm = "\n".join(mod.kernel.inspect_asm().values())
print(numaccel.cpu_capability(), "zmm" in asm, "ymm" in asm)
"""


def run_with(cap, tmp_path):
    env = dict(os.environ, NUMACCEL_CPU_CAPABILITY=cap, NUMACCEL_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.skipif("avx512f" not in host_features(), reason="CPU without AVX-512")
def test_avx512_emits_zmm_and_avx2_does_not(tmp_path):
    assert run_with("avx512", tmp_path / "a")[:2] == ["avx512", "True"]
    cap, zmm, ymm = run_with("avx2", tmp_path / "b")
    assert (cap, zmm, ymm) == ("avx2", "False", "True")


def test_capability_names():
    assert numaccel.cpu_capability() in ("avx512", "avx2", "default")
    assert numaccel.config.cpu_capability == numaccel.cpu_capability()
    with pytest.raises(ValueError, match="choose one of"):
        resolve("sse9")
