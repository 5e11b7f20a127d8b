#!/usr/bin/env bash
# Set up (if needed) and launch the app on the embedded default model. Extra args go to streamlit.
# --warm (or NORMVIZ_WARM=1): load the default model, compile the kernels and analyse the default view in the
# server's process before it accepts visitors (normviz/ui/kit/warm.py). The server listens on 127.0.0.1 only
# (.streamlit/config.toml); to serve other machines pass --server.address 0.0.0.0 (better: behind a proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
# idle OpenMP threads sleep, not spin (app.py says why; set here too: --warm loads torch before app.py runs)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
bash scripts/setup.sh
warm=${NORMVIZ_WARM:-0}
args=()
for a in "$@"; do
  if [ "$a" = "--warm" ]; then warm=1; else args+=("$a"); fi
done
if [ "$warm" = "1" ]; then
  exec .venv/bin/python -m normviz.ui.kit.warm app.py "${args[@]}"
fi
exec .venv/bin/streamlit run app.py "${args[@]}"
