"""numaccel.kernels_gpu: PTX build checks (sm_90, sm_80) and the kernels under the simulator.

No GPU is needed. The simulator tests live in tests/gpu_sim/sim_*.py and run in their own
pytest process with NUMBA_ENABLE_CUDASIM=1 (numba-cuda cannot compile PTX in a simulator
process, nor simulate in a compiling one); the build check runs
``python -m numaccel.kernels_gpu --build-check`` in another process.
"""
from __future__ import annotations

import io
import os
import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("numba_cuda")

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIM_FILES = sorted((ROOT / "tests" / "gpu_sim").glob("sim_*.py"))
FAMILIES = ["elementwise[chain]", "elementwise[axpb]", "elementwise[relu_i32]",
            "reduce_sum[rows]", "reduce_sum[cols]", "reduce_max[rows]", "reduce_max[cols]",
            "reduce_argmax[rows]", "reduce_argmax[cols]", "softmax[rows]",
            "layer_norm[rows]", "matmul[none]", "matmul[gelu,trans_b]", "matmul[relu]",
            "sdpa_fwd", "sdpa_bwd_dq", "sdpa_bwd_dkv", "sdpa_bwd_pre",
            "sparse24_linear[none]", "sparse24_linear[relu]"]


def _env(sim: bool) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if sim:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    return env


def _run(args, sim: bool, timeout: int = 900):
    return subprocess.run([sys.executable, *args], env=_env(sim), cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.cudasim
@pytest.mark.parametrize("path", SIM_FILES, ids=lambda p: p.stem)
def test_kernels_under_the_cuda_simulator(path):
    # RuntimeWarnings come from the simulator's NumPy-scalar arithmetic on NaN/inf inputs
    r = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::RuntimeWarning",
              str(path)], sim=True)
    tail = r.stdout[-6000:] + r.stderr[-3000:]
    assert r.returncode == 0, tail
    m = re.search(r"(\d+) passed", r.stdout)
    assert m and int(m.group(1)) >= 5, tail


def _check_build_output(r, families):
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    m = re.fullmatch(r"(\d+) passed, (\d+) failed", lines[-1])
    assert m, lines[-1]
    passes = [ln for ln in lines if ln.startswith("PASS ")]
    assert int(m.group(1)) == len(passes) == len(lines) - 1 and m.group(2) == "0"
    for cc in ("sm_90", "sm_80"):
        for fam in families:
            assert any(ln.startswith(f"PASS {cc} {fam} ") for ln in passes), (cc, fam)
    return passes


def test_build_check_quick_compiles_every_kernel_family_for_sm90_and_sm80():
    r = _run(["-m", "numaccel.kernels_gpu", "--build-check", "--quick"], sim=False)
    passes = _check_build_output(r, FAMILIES)
    assert len(passes) == 2 * len(FAMILIES)


@pytest.mark.slow
def test_build_check_every_kernel_and_signature():
    r = _run(["-m", "numaccel.kernels_gpu", "--build-check", "--jobs", "2"], sim=False)
    passes = _check_build_output(r, FAMILIES)
    for dt in ("f16", "bf16"):      # 16-bit variants of the big kernels are in the full set
        for fam in ("sdpa_fwd", "sdpa_bwd_dq", "sdpa_bwd_dkv", "matmul[none]",
                    "sparse24_linear[none]", "softmax[rows]", "layer_norm[rows]"):
            assert any(f" {fam} {dt}" in ln for ln in passes), (fam, dt)


@pytest.mark.slow
def test_build_check_parallel_workers_merge_their_lines():
    r = _run(["-m", "numaccel.kernels_gpu", "--build-check", "--only", "reduce_sum[rows] f32",
              "--jobs", "2"], sim=False)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert sorted(ln.split()[1] for ln in lines[:-1]) == ["sm_80", "sm_90"]
    assert lines[-1] == "2 passed, 0 failed"


def test_build_check_reports_a_kernel_that_does_not_compile(monkeypatch):
    from numba import cuda
    from numba.cuda import types as nt

    from numaccel.kernels_gpu import build

    @cuda.jit
    def broken(x):
        x[0] = undefined_name  # noqa: F821 - the point of the test

    @cuda.jit
    def fine(x):
        x[0] = 1.0

    arr = nt.Array(nt.float32, 1, "C")
    monkeypatch.setattr(build, "all_specs", lambda: iter([("broken", broken, (arr,)),
                                                          ("fine", fine, (arr,))]))
    out = io.StringIO()
    assert build.build_check(ccs=((9, 0),), stream=out) == (1, 1)
    text = out.getvalue().splitlines()
    assert text[0].startswith("FAIL sm_90 broken") and text[1].startswith("PASS sm_90 fine")
    assert text[-1] == "1 passed, 1 failed"


def test_rendered_elementwise_source_is_a_grid_stride_loop():
    from numaccel.kernels_gpu.elementwise import _collapse, render_source
    src1 = render_source(1, 2, 1)
    assert src1.startswith("def kernel(out, in0, in1, s0):")
    assert "while i < n:" in src1 and "i += step" in src1
    assert "out[i] = st(fn(ld0(in0[i]), ld1(in1[i]), s0))" in src1
    src3 = render_source(3, 1, 0)
    assert "out[k0, k1, k2] = st(fn(ld0(in0[k0, k1, k2])))" in src3
    compile(src3, "<test>", "exec")
    # contiguous dims merge; a broadcast (zero-stride) dim between them stops the merge
    assert _collapse((2, 3, 4), [(48, 16, 4), (48, 16, 4)]) == ((24,), [(4,), (4,)])
    shape, st = _collapse((2, 3, 4), [(48, 16, 4), (16, 0, 4)])
    assert shape == (2, 3, 4) and st[1] == (16, 0, 4)


def test_package_api_and_cuda_kernel_registration():
    import numaccel
    from numaccel.backends import kernels_of
    kg = numaccel.kernels_gpu
    assert callable(kg.matmul) and callable(kg.elementwise)     # functions, not submodules
    assert isinstance(kg.is_available(), bool)
    names = [k.name for k in kernels_of("sdpa") if k.backend == "cuda"]
    assert names == ["flash_sdpa_cuda"]
