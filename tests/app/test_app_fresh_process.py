"""app.py in a process where neither torch nor numba is loaded yet (the server's first run) reads the deployment
settings on its own, from normviz/core/settings.py. After the folder moves (1b5f246) it still looked for
normviz/settings.py: every fresh server's first page ended in FileNotFoundError."""

from __future__ import annotations

import os
import subprocess
import sys

from ..helpers.app import ROOT

SCRIPT = """
import sys
from streamlit.testing.v1 import AppTest
assert "torch" not in sys.modules and "numba" not in sys.modules
at = AppTest.from_file("app.py", default_timeout=600)
at.run()
print("EXCEPTIONS", [e.value for e in at.exception])
print("CHARTS", len(at.get("plotly_chart")))
"""


def test_app_runs_in_a_fresh_process():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)},
    )
    assert "EXCEPTIONS []" in out.stdout, out.stdout[-2000:] + out.stderr[-4000:]
    charts = int(out.stdout.split("CHARTS", 1)[1].split()[0])
    assert charts >= 4, out.stdout[-2000:]
