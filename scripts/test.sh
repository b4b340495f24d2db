#!/usr/bin/env bash
# Install numaccel with every extra into a venv and run the test suite.
#   bash scripts/test.sh            the suite on python3.11 with every extra (what CI runs;
#                                   tests marked slow are left out: add --all for them)
#   PYTHON=python3.13 bash scripts/test.sh --quick   quick subset, core extras only
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh
if [ "${1:-}" = "--quick" ]; then
    shift
    "$VENV/bin/python" -m pip install -q -e ".[test]"
    # the compiler core, the cpu backend and checkpoints (the kernel suites are 3.11-only)
    exec "$VENV/bin/python" -m pytest -q -m "not slow and not mpi and not cudasim" \
        tests/test_trace_ops.py tests/test_trace_cache.py tests/test_trace_hypothesis.py \
        tests/test_bf16.py tests/test_cpu_backend.py tests/test_ckpt.py \
        tests/test_loop_capture.py tests/test_untraced_calls.py "$@"
fi
"$VENV/bin/python" -m pip install -q -e ".[test,oracle,dist,export,cuda,bench]"
if [ "${1:-}" = "--all" ]; then
    shift
    exec "$VENV/bin/python" -m pytest -q "$@"
fi
exec "$VENV/bin/python" -m pytest -q -m "not slow" "$@"
