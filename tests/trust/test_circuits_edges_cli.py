"""Issue 41: ``normviz faithfulness --circuits … --edges`` adds the edge faithfulness curves (areas with bootstrap
intervals) to the known-circuit table: circuits_edges.csv, a second table in circuits.md and .html, and each
benchmark's ``edge_curves`` in circuits.json. Two tiny benchmark-like models stand in for the shipped ones: a
Llama-style one, whose edges are scored, and a GPT-2, whose row says why not (never a blank cell). Without
--edges nothing is computed and the md says so."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from normviz import circuits
from normviz.circuits import Benchmark
from normviz.trust import circuit_scores as cs
from normviz.trust import edge_curves as ec

from ..helpers import tiny
from ..helpers.cli import run


def _bench(arch: str, name: str) -> Benchmark:
    lm = tiny.build_with_head(arch)
    rng = np.random.default_rng(0)
    examples = [([int(x) for x in rng.integers(1, 97, 6)], 7, 13) for _ in range(3)]
    return Benchmark(
        name=name,
        lm=lm,
        examples=examples,
        circuit=frozenset({(0, 1), (1, 0)}),
        edges=frozenset({((0, 1), (1, 0))}),
        description=f"a tiny {arch} standing in for a benchmark",
    )


@pytest.fixture(scope="module")
def benches():
    return {"tiny_llama": _bench("llama", "tiny_llama"), "tiny_gpt2": _bench("gpt2", "tiny_gpt2")}


@pytest.fixture
def shipped(monkeypatch, benches):
    monkeypatch.setattr(circuits, "names", lambda: sorted(benches))
    monkeypatch.setattr(circuits, "load", lambda name: benches[name])
    head_table = cs.evaluate  # the head table is not under test here: two methods, no edge AUROC

    def evaluate(bench, **kwargs):
        return head_table(bench, methods=("attn-lrp", "ablation"), edge_methods=(), resamples=kwargs["resamples"])

    monkeypatch.setattr(cs, "evaluate", evaluate)
    return benches


def test_edges_table_is_written(tmp_path, shipped):
    argv = ["faithfulness", "--circuits", "tiny_llama", "tiny_gpt2", "--edges", "--resamples", "20"]
    assert run(argv + ["--out", str(tmp_path)]) == 0
    with open(tmp_path / "circuits_edges.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    llama = [r for r in rows if r["benchmark"] == "tiny_llama"]
    gpt2 = [r for r in rows if r["benchmark"] == "tiny_gpt2"]
    assert [r["method"] for r in llama] == list(ec.EDGE_CURVE_METHODS)
    n_edges = len(ec.edge_list(shipped["tiny_llama"].lm))
    for r in llama:
        assert not r["not_scored"] and int(r["edges"]) == n_edges
        assert np.isfinite(float(r["area"])) and float(r["area_lo"]) <= float(r["area_hi"])
        assert 0.0 <= float(r["edge_auroc"]) <= 1.0 and float(r["seconds"]) > 0
    assert len(gpt2) == 1 and "Llama-style" in gpt2[0]["not_scored"] and "'gpt2'" in gpt2[0]["not_scored"]

    got = {b["benchmark"]: b for b in json.loads((tmp_path / "circuits.json").read_text(encoding="utf-8"))}
    assert got["tiny_gpt2"]["edge_curves"]["not_scored"] == gpt2[0]["not_scored"]
    curves = got["tiny_llama"]["edge_curves"]
    x = np.asarray(curves["ks"], dtype=float) / curves["edges"]
    for m, r in zip(curves["methods"], llama):  # the area is the trapezoid under the recovered share it keeps
        assert float(r["area"]) == pytest.approx(cs.area(np.asarray(m["share"]), x), rel=1e-5)
        assert m["share"][0] == pytest.approx(0.0, abs=1e-12) and m["share"][-1] == pytest.approx(1.0, abs=1e-12)

    md = (tmp_path / "circuits.md").read_text(encoding="utf-8")
    assert "## Edge faithfulness curves" in md and "| tiny_llama | eap-ig |" in md
    assert "| tiny_gpt2 | — | not scored: edge curves need a Llama-style decoder" in md
    page = (tmp_path / "circuits.html").read_text(encoding="utf-8")
    assert "Edge faithfulness curves" in page and "not scored:" in page


def test_without_the_flag_nothing_is_computed(tmp_path, shipped, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("edge curves computed without --edges")

    monkeypatch.setattr(ec, "evaluate_edges", refuse)
    assert run(["faithfulness", "--circuits", "tiny_gpt2", "--resamples", "10", "--out", str(tmp_path)]) == 0
    assert not (tmp_path / "circuits_edges.csv").exists()
    assert "not computed (ask with --edges)" in (tmp_path / "circuits.md").read_text(encoding="utf-8")
    assert "edge_curves" not in json.loads((tmp_path / "circuits.json").read_text(encoding="utf-8"))[0]


def test_help_documents_the_cost(capsys):
    assert run(["faithfulness", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--edges" in out and "Slow" in out
