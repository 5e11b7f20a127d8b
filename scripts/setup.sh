#!/usr/bin/env bash
# Create .venv (once) and install the pinned requirements; a stamp skips the install when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.normviz-reqs
want=$(cat requirements.txt requirements-nodeps.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
quiet() {  # pip, minus this machine's notes about local mirror folders that don't exist
  "$@" 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }
}
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up .venv (first run: a few minutes)…"
  quiet .venv/bin/python -m pip install -q -r requirements.txt -r requirements-dev.txt
  quiet .venv/bin/python -m pip install -q --no-deps -r requirements-nodeps.txt
  quiet .venv/bin/python -m pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi
