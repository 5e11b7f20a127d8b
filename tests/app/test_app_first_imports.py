"""Issue 42 (hostile visitors): transformers' lazy imports raced when several script threads imported at once
("cannot import name 'AutoTokenizer' from 'transformers'" for one visitor of the load benchmark). The pages'
names are imported once, under a lock, by app.py before any page: eight first visits at once in a fresh process
all find them. (The race itself is timing-dependent; this checks the guard, not that the race reproduces.)"""

from __future__ import annotations

import os
import subprocess
import sys

from ..helpers.app import ROOT

SCRIPT = """
import sys, threading
assert "transformers" not in sys.modules
from normviz.ui.kit.warm import PAGE_IMPORTS, import_once
start, errors = threading.Barrier(8), []

def visit():
    start.wait()
    try:
        import_once()
        from transformers import AutoConfig, AutoModel, AutoTokenizer  # noqa: F401
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=visit) for _ in range(8)]
[t.start() for t in threads]
[t.join(300) for t in threads]
import transformers
print("ERRORS", errors, "NAMES", all(hasattr(transformers, n) for n in PAGE_IMPORTS))
"""


def test_eight_first_visits_at_once_find_the_transformers_names():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)},
    )
    assert "ERRORS [] NAMES True" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]


def test_app_imports_them_before_any_page():
    source = (ROOT / "app.py").read_text(encoding="utf-8")
    assert source.index("import_once()") < source.index("nav.run()")
