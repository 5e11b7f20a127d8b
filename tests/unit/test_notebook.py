"""examples/quickstart.ipynb runs top to bottom (nbclient, the project's own Python as the kernel)."""

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quickstart_notebook_executes(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    nb = nbformat.read(ROOT / "examples" / "quickstart.ipynb", as_version=4)
    # kernel "python3": jupyter_client starts it with this interpreter (sys.executable), i.e. the venv's
    client = nbclient.NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    plots = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(plots) >= 5  # heatmaps, strip, two lines views, difference
    page = (tmp_path / "quickstart.html").read_text(encoding="utf-8")
    assert "normviz-data" in page
