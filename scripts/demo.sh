#!/usr/bin/env bash
# Install numaccel and run the main job: corpus programs plain vs accelerated.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
VENV=".venv-$($PY -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ -x "$VENV/bin/python" ] || $PY -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q -e ".[bench]"
exec "$VENV/bin/python" -m numaccel demo "$@"
