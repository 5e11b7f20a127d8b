#!/usr/bin/env bash
# Set up (if needed) and launch the app: the same as `.venv/bin/normviz app …` after the set-up.
#   bash scripts/app.sh [--warm [MODELS]] [--public] [--procs N] [--port P] [streamlit run arguments…]
# --warm smollm2,minilm (or NORMVIZ_WARM=…): load those models and analyse their default view in the server's
# process before it accepts visitors (normviz/ui/kit/warm.py, via normviz.cli.app). The server listens on 127.0.0.1
# only (.streamlit/config.toml); to serve other machines pass --server.address 0.0.0.0 (better: behind a proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
# idle OpenMP threads sleep, not spin (app.py says why; set here too: --warm loads torch before app.py runs)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
bash scripts/setup.sh --app "$@"  # the app's set-up (SmolLM2's first conversion beside the server's start)
exec .venv/bin/python -m normviz app "$@"
