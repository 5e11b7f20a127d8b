#!/usr/bin/env bash
# Set up (if needed) and launch the app on the embedded default model. Extra args go to streamlit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/streamlit run app.py "$@"
