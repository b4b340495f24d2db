#!/usr/bin/env bash
# GPU check for numaccel.kernels_gpu on a machine with an NVIDIA GPU (written for a lent H200:
# Python 3.12 with torch, cupy-cuda13x and numba-cuda preinstalled, no network). Under 5 min:
#   1. the kernel tests of tests/gpu_sim/ on the real device (no simulator; the tests that
#      need CuPy and larger shapes are enabled there),
#   2. a short side-by-side benchmark table (python -m numaccel.kernels_gpu.bench --quick).
#   bash scripts/gpu_check.sh [--full]      (--full: larger shapes, more repeats)
# Exit status: non-zero if the tests failed or the benchmark did not run.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
unset NUMBA_ENABLE_CUDASIM
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0   # tiny test grids warn otherwise
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
BENCH_ARGS=--quick
[ "${1:-}" = "--full" ] && BENCH_ARGS=

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$PY" - <<'PY'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("numpy", "numba", "numba_cuda", "cupy", "torch", "ml_dtypes"):
    try:
        mod = importlib.import_module(m)
        print(f"{m} {getattr(mod, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{m} missing ({type(e).__name__}: {e})")
from numaccel.kernels_gpu import device_info, is_available
print("kernels_gpu available:", is_available(), "-", device_info())
sys.exit(0 if is_available() else 3)
PY
if [ $? != 0 ]; then echo "no usable CUDA device: nothing checked"; exit 3; fi

echo "== tests on the device"
timeout 200 "$PY" -m pytest -q -p no:cacheprovider -W ignore::RuntimeWarning \
    --junitxml="$OUT/gpu_tests.xml" tests/gpu_sim/sim_*.py 2>&1 | tee "$OUT/gpu_tests.txt" \
    | tail -25
test_rc=${PIPESTATUS[0]}

echo "== benchmark"
timeout 150 "$PY" -m numaccel.kernels_gpu.bench $BENCH_ARGS 2>&1 | tee "$OUT/gpu_bench.txt"
bench_rc=${PIPESTATUS[0]}

echo "== summary: tests rc=$test_rc, benchmark rc=$bench_rc (files in $OUT)"
[ "$test_rc" = 0 ] && [ "$bench_rc" = 0 ]
