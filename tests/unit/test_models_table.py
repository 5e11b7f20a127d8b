"""docs/models.md's capability table is the one scripts/models_table.py generates from the registry (each row's
capabilities asked of the library on a tiny model), so that a new row, or a capability gained or lost, shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_models_table_in_the_docs_is_current():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "models_table.py"), "--check"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_table_has_a_row_per_architecture_and_the_floor():
    sys.path.insert(0, str(ROOT / "scripts"))
    import models_table

    from normviz.models.arch import ARCHITECTURES

    doc = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    part = doc.split(models_table.BEGIN)[1].split(models_table.END)[0]
    for mt in ARCHITECTURES:
        assert f"`{mt}`" in part, mt
    floor = next(line for line in part.splitlines() if line.startswith("| any other type"))
    assert "| 2 of " in floor and "needs a row" in floor
    for name in ("minilm", "smollm2", "gemma3", "toy-mt"):
        assert f"| `{name}` |" in part
    assert "Gemma Terms of Use" in part
