#!/usr/bin/env bash
# Set up (if needed) and run the test suite. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
NORMVIZ_SETUP_BROWSER=1 bash scripts/setup.sh
# the tests', benchmarks' and docs' requirements, on top of the app's (a stamp skips this when nothing changed)
stamp=.venv/.normviz-dev-reqs
want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing the test requirements (requirements-dev.txt)…"
  .venv/bin/python -m pip install -q -r requirements.txt -r requirements-dev.txt 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }
  echo "$want" > "$stamp"
fi
# the habits: the linter and the type checker (configured in pyproject.toml) before the tests
echo "ruff check…"
.venv/bin/ruff check .
echo "ruff format --check…"
.venv/bin/ruff format --check .
echo "mypy normviz…"
.venv/bin/mypy normviz
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
# idle OpenMP threads sleep instead of spinning: on a loaded machine (CI beside other jobs) spinning threads
# of one test process took the cores the app servers and browsers of the browser tests needed
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
exec .venv/bin/python -m pytest -q "$@"
