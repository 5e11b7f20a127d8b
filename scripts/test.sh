#!/usr/bin/env bash
# Set up (if needed) and run the test suite. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
NORMVIZ_SETUP_BROWSER=1 bash scripts/setup.sh
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
# idle OpenMP threads sleep instead of spinning: on a loaded machine (CI beside other jobs) spinning threads
# of one test process took the cores the app servers and browsers of the browser tests needed
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
exec .venv/bin/python -m pytest -q "$@"
