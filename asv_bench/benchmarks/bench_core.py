"""asv benchmarks of the CPU compiler: NumPy vs hand-written Numba vs numaccel.

The workloads are the ones of ``python -m numaccel.bench`` (numaccel/bench_workloads.py), so
the asv history and the side-by-side script measure the same code. Parameter ``impl`` is
``numpy`` (the plain function), ``numba`` (the expert baseline) or ``numaccel``
(``numaccel.accelerate`` on the plain function). A combination that cannot run (numaccel not
built yet, no Numba version) raises NotImplementedError in setup, which asv reports as skipped.

The first call is made in ``setup`` so ``time_*`` measure the steady state; compile time and
warm start are ``timeraw_*`` benchmarks, each sample a fresh interpreter.

Run from asv_bench/ (see README.md)::

    asv machine --yes && asv run --python=same --bench bench_core
"""
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

try:  # asv imports this file on its own; fall back to the checkout next to asv_bench/
    import numaccel
    from numaccel import bench_workloads as bw
except ImportError:  # pragma: no cover - depends on how numaccel was installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import numaccel
    from numaccel import bench_workloads as bw

REPO_ROOT = str(Path(numaccel.__file__).resolve().parents[1])
IMPLS = ["numpy", "numba", "numaccel"]


def _accelerate(fn):
    try:
        accelerate = numaccel.accelerate
    except (ImportError, AttributeError) as exc:
        raise NotImplementedError(f"numaccel.accelerate is not available: {exc}") from exc
    return accelerate(fn)


def _build(fn_numpy, fn_numba, impl):
    if impl == "numpy":
        return fn_numpy
    if impl == "numba":
        if fn_numba is None:
            raise NotImplementedError("no Numba baseline for this benchmark")
        return fn_numba
    return _accelerate(fn_numpy)


class _Workload:
    """Steady-state timing of one bench workload; subclasses set ``workload``."""

    params = [IMPLS]
    param_names = ["impl"]
    workload = ""
    timeout = 300.0

    def setup(self, impl):
        w = bw.WORKLOADS[self.workload]
        self.args = w.make_args(False)
        self.fn = _build(w.numpy_fn, w.numba_fn, impl)
        np.asarray(self.fn(*self.args))  # first call: tracing/compiling is not timed here
        numaccel.wait_for_compiles()      # ... nor the kernels it compiles in the background

    def time_call(self, impl):
        self.fn(*self.args)


class ElementwiseChainF32(_Workload):
    """np.sin(x)*y + np.exp(-x)*0.5 on 16M float32."""
    workload = "chain_f32"


class SoftmaxF32(_Workload):
    """Row softmax 4096x1024 float32."""
    workload = "softmax_f32"


class LayernormF32(_Workload):
    """Row layernorm 4096x1024 float32."""
    workload = "layernorm_f32"


class StencilHeat2D(_Workload):
    """40 explicit steps of a 2-D heat stencil on 1024x1024 float64."""
    workload = "heat2d_f64"


class MatmulGeluF32(_Workload):
    """(2048x1024 @ 1024x1024) + bias, tanh-GELU epilogue, float32."""
    workload = "matmul_gelu_f32"


class ChainBF16(_Workload):
    """The elementwise chain on bfloat16 storage."""
    workload = "chain_bf16"


class SoftmaxBF16(_Workload):
    """Row softmax with bfloat16 storage, float32 compute."""
    workload = "softmax_bf16"


class MatmulGeluBF16(_Workload):
    """bfloat16 matmul + bias + GELU with float32 compute."""
    workload = "matmul_gelu_bf16"


class JacobiWhile(_Workload):
    """Jacobi sweeps in a while loop on the computed error, 256x256 float64."""
    workload = "jacobi_while"


class OverheadTiny(_Workload):
    """a*b + c on 10-element arrays: the per-call overhead."""
    workload = "overhead_tiny"


# ---- reductions (not in the side-by-side list: simple enough that numpy is the baseline)

def row_sumsq(x):
    return (x * x).sum(axis=-1)


def global_norm(x):
    return np.sqrt((x.astype(np.float64) ** 2).sum())


def max_abs_dev(x):
    return np.abs(x - x.mean(axis=0)).max(axis=0)


def standardize_columns(x):
    # column reductions (var/std decompose into two fused passes)
    return (x - x.mean(axis=0)) / x.std(axis=0)


class Reductions:
    """Reductions with their elementwise producers, 4096x1024 float32."""

    params = [["row_sumsq", "global_norm", "max_abs_dev", "standardize_columns"],
              ["numpy", "numaccel"]]
    param_names = ["kernel", "impl"]

    def setup(self, kernel, impl):
        self.x = np.random.default_rng(0).standard_normal((4096, 1024)).astype(np.float32)
        self.fn = _build(globals()[kernel], None, impl)
        np.asarray(self.fn(self.x))
        numaccel.wait_for_compiles()

    def time_reduce(self, kernel, impl):
        self.fn(self.x)


# ---- first call and warm start, each sample a new interpreter

_PROGRAM = '''
import numpy as np


def kernel(x, gamma, beta, temperature):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + np.float32(1e-5)) * gamma + beta
    logits = y / temperature
    logits = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(logits)
    p = e / e.sum(axis=-1, keepdims=True)
    return y, p


def init():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 128, 256)).astype(np.float32)
    return x, np.ones(256, np.float32), np.zeros(256, np.float32), 0.7
'''

# runs before the clock in the child: the environment, the program and its inputs, but not
# numaccel (its import is part of what a new process pays)
_SETUP = '''
import os, sys
os.environ["NUMACCEL_CACHE_DIR"] = {cache!r}
sys.path[:0] = [{prog_dir!r}, {repo!r}]
import numpy as np
import bench_core_program as prog
args = prog.init()
'''

_CALL = '''
f = numaccel.accelerate(prog.kernel)
out = f(*args)
[np.asarray(o) for o in out]
'''
_STMT = "import numaccel\n" + _CALL
# the first call returns while its kernels compile in the background: this waits for them
_COMPILED = _CALL + "numaccel.wait_for_compiles()\n"


class _NewProcess:
    number = 1
    repeat = (3, 5, 120.0)
    timeout = 300.0

    def setup(self):
        try:
            numaccel.accelerate  # noqa: B018 - the lazy import is the check
        except (ImportError, AttributeError) as exc:
            raise NotImplementedError(f"numaccel.accelerate is not available: {exc}")
        self.tmp = tempfile.mkdtemp(prefix="numaccel-asv-")
        Path(self.tmp, "bench_core_program.py").write_text(_PROGRAM)

    def teardown(self):
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _setup_code(self, cache):
        return textwrap.dedent(_SETUP).format(cache=cache, prog_dir=self.tmp, repo=REPO_ROOT)


class ImportNumaccel(_NewProcess):
    """``import numaccel`` in a new process (after NumPy): lazy, so it stays small."""

    def timeraw_import(self):
        return "import numaccel", self._setup_code(os.path.join(self.tmp, "unused"))


class FirstCall(_NewProcess):
    """accelerate + first call of a layernorm/softmax program with an empty disk cache."""

    def _cold_setup(self):
        # the child empties the cache directory before the clock starts: every sample is
        # cold; numaccel is imported before the clock too (ImportNumaccel times that)
        return self._setup_code(os.path.join(self.tmp, "cold")) + (
            "\nimport shutil; shutil.rmtree(os.environ['NUMACCEL_CACHE_DIR'], "
            "ignore_errors=True)\nimport numaccel\n")

    def timeraw_first_call(self):
        return _CALL, self._cold_setup()

    def timeraw_first_call_compiled(self):
        """... until the compiled code is ready (the first call itself returns earlier)."""
        return _COMPILED, self._cold_setup()


class WarmStart(_NewProcess):
    """import numaccel + accelerate + first call in a new process, disk cache already warm."""

    def setup(self):
        super().setup()
        self.cache = os.path.join(self.tmp, "warm")
        code = self._setup_code(self.cache) + _STMT + "numaccel.wait_for_compiles()\n"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=self.timeout)

    def timeraw_warm_start(self):
        return _STMT, self._setup_code(self.cache)

    def timeraw_warm_first_call(self):
        """accelerate + first call only (numaccel imported before the clock)."""
        return _CALL, self._setup_code(self.cache) + "import numaccel\n"
