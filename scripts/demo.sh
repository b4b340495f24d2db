#!/usr/bin/env bash
# Install numaccel and run the main job: corpus programs plain vs accelerated.
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
"$VENV/bin/python" -m pip install -q -e ".[bench]"
exec "$VENV/bin/python" -m numaccel demo "$@"
