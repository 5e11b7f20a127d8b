"""Issue 41: ``normviz faithfulness --circuits [NAME …]`` writes the known-circuit table (csv, md, html); an unknown
benchmark and a missing --model/--corpus are refused with one line."""

from __future__ import annotations

import csv

from normviz.cli import main
from normviz.trust import circuit_scores as cs


def test_circuits_table_is_written(tmp_path, capsys):
    assert main(["faithfulness", "--circuits", "induction", "--out", str(tmp_path), "--resamples", "30"]) == 0
    with open(tmp_path / "circuits.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["method"] for r in rows] == list(cs.METHODS)
    assert {r["benchmark"] for r in rows} == {"induction"}
    for r in rows:
        assert 0.0 <= float(r["auroc"]) <= 1.0 and float(r["seconds"]) > 0
    md = (tmp_path / "circuits.md").read_text(encoding="utf-8")
    assert "| induction | ablation |" in md and "bootstrap" in md
    assert "<table>" in (tmp_path / "circuits.html").read_text(encoding="utf-8")


def test_refusals(tmp_path, capsys):
    assert main(["faithfulness", "--circuits", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown circuit benchmark" in capsys.readouterr().err
    assert main(["faithfulness", "--out", str(tmp_path)]) == 2
    assert "needs --model and --corpus" in capsys.readouterr().err
