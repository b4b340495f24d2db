#!/usr/bin/env bash
# Install numaccel and run the main job: corpus programs plain vs accelerated.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh
"$VENV/bin/python" -m pip install -q -e ".[bench]"
exec "$VENV/bin/python" -m numaccel demo "$@"
