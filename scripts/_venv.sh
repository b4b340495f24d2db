# Sourced by test.sh and demo.sh: pick the interpreter ($PYTHON, default python3.11) and
# create/upgrade its venv (.venv-X.Y); sets PY and VENV.
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
