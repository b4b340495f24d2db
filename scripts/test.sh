#!/usr/bin/env bash
# Install numaccel with every extra into a venv and run the test suite.
#   bash scripts/test.sh            the suite on python3.11 with every extra (what CI runs;
#                                   tests marked slow are left out: add --all for them)
#   PYTHON=python3.13 bash scripts/test.sh --quick   quick subset, core extras only
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
if ! "$PY" -c "" 2>/dev/null; then
    # pyenv's shim answers only for its selected versions: look the interpreter up directly
    for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"${PY#python}"*/bin/"$PY"; do
        if [ -x "$cand" ]; then PY=$cand; break; fi
    done
fi
"$PY" -c "" || { echo "cannot run $PY: install it or set PYTHON=/path/to/python" >&2; exit 1; }
VENV=".venv-$($PY -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ -x "$VENV/bin/python" ] || $PY -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
if [ "${1:-}" = "--quick" ]; then
    shift
    "$VENV/bin/python" -m pip install -q -e ".[test]"
    exec "$VENV/bin/python" -m pytest -q -m "not slow and not mpi and not cudasim" "$@"
fi
"$VENV/bin/python" -m pip install -q -e ".[test,oracle,dist,export,cuda,bench]"
if [ "${1:-}" = "--all" ]; then
    shift
    exec "$VENV/bin/python" -m pytest -q "$@"
fi
exec "$VENV/bin/python" -m pytest -q -m "not slow" "$@"
