#!/usr/bin/env bash
# Set up (if needed) and run the test suite. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
NORMVIZ_SETUP_BROWSER=1 bash scripts/setup.sh
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
exec .venv/bin/python -m pytest -q "$@"
