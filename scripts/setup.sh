#!/usr/bin/env bash
# Create .venv (once) and install what the app needs (requirements.txt, the pinned lock; requirements-nodeps.txt;
# the package itself, editable); a stamp skips the install when nothing changed. The test command
# (scripts/test.sh) adds the tests', benchmarks' and docs' requirements (requirements-dev.txt) on top.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
t_phase=$SECONDS
phase() {  # "normviz: set-up <phase> <seconds> s" (benchmarks/bench_fresh_clone.py reads these lines)
  echo "normviz: set-up $1 $((SECONDS - t_phase)) s" >&2
  t_phase=$SECONDS
}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  phase venv
fi
stamp=.venv/.normviz-reqs
# pyproject.toml too: its [project.scripts] (the .venv/bin/normviz command) comes with the editable install
want=$(cat requirements.txt requirements-nodeps.txt pyproject.toml | sha256sum | cut -d' ' -f1)
quiet() {  # pip, minus this machine's notes about local mirror folders that don't exist
  "$@" 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }
}
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up .venv (first run: a few minutes)…"
  quiet .venv/bin/python -m pip install -q -r requirements.txt
  phase pip-requirements
  quiet .venv/bin/python -m pip install -q --no-deps -r requirements-nodeps.txt
  phase pip-nodeps
  quiet .venv/bin/python -m pip install -q --no-deps -e .
  phase pip-editable
  echo "$want" > "$stamp"
fi
# Compile the numba kernels once into numba's cache (normviz/methods/norms/__pycache__): later processes load them
if ! ls normviz/methods/norms/__pycache__/kernels.*.nbi >/dev/null 2>&1; then
  .venv/bin/python -c "import normviz.methods.norms.kernels as k; k.warm() or print('numba kernels unavailable: the torch versions will run')"
  phase numba-kernels
fi

# The embedded SmolLM2 converted from its GGUF file once, here (~30-40 s), not at a visitor's first switch to it
# (normviz.ui.kit.warm.prepare; kept in NORMVIZ_CACHE, default ~/.cache/normviz)
if [ "${NORMVIZ_SETUP_SMOLLM2:-1}" = "1" ] \
   && [ ! -f "${NORMVIZ_CACHE:-$HOME/.cache/normviz}/smollm2-135m-instruct-q4_1/model.safetensors" ]; then
  .venv/bin/python -m normviz.ui.kit.warm --prepare smollm2 || echo "SmolLM2 not converted now: the first load converts it."
  phase smollm2-conversion
fi

# The browser test drives Debian's Chromium through Selenium. scripts/test.sh asks for it (NORMVIZ_SETUP_BROWSER=1):
# installed once when we are root and apt works; elsewhere the test skips and says why. The app alone skips this.
if [ "${NORMVIZ_SETUP_BROWSER:-0}" = "1" ] && ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    echo "Installing chromium + chromium-driver for the browser test (once)…"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }; } \
      || echo "Could not install chromium; the browser test will be skipped."
  else
    echo "No chromium/chromedriver (and not root): the browser test will be skipped."
  fi
fi
