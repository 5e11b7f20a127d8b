"""Issue 42, ``normviz explain`` and ``export``: ``--graph`` naming the ``--out`` file overwrote the explanation;
``--graph G.JSON`` passed the check before the model loaded and was refused after the graph was built; a
two-token ``--token`` failed only after the model loaded (30.7 s); a graph over the memory budget was built
anyway (~2.6 GB per 1,000 tokens); the JSON held the vocabulary's spellings ('Ġcapital'); ``export --out x.csv``
silently wrote x.csv.npz."""

from __future__ import annotations

import json

import numpy as np
import pytest

import normviz
from normviz.models import loading

from ..helpers.cli import run as run_cli

TEXT = "the cat sat on the mat"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error:"), err
    return err


@pytest.mark.parametrize("graph_name", ["e.npz", "./e.npz", "sub/../e.npz"])
def test_graph_naming_the_out_file_is_refused_before_the_model_loads(
    no_load, llama_lm_dir, tmp_path, capsys, monkeypatch, graph_name
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "e.npz").write_bytes(b"earlier")
    code = run_cli(["explain", "--model", str(llama_lm_dir), "--text", TEXT, "--out", "e.npz", "--graph", graph_name])
    assert code == 2 and "would overwrite the explanation" in _one_line(capsys)
    assert (tmp_path / "e.npz").read_bytes() == b"earlier"


@pytest.mark.parametrize("name", ["G.JSON", "G.NPZ", "G.Plain.Json"])
def test_graph_endings_in_any_case_are_written_under_the_name_given(llama_lm_dir, tmp_path, name):
    path = tmp_path / name
    assert (
        run_cli(
            [
                "explain",
                "--model",
                str(llama_lm_dir),
                "--text",
                TEXT,
                "--out",
                str(tmp_path / "E.NPZ"),
                "--dtype",
                "float64",
                "--graph",
                str(path),
            ]
        )
        == 0
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["E.NPZ", name])
    e = np.load(tmp_path / "E.NPZ")
    if name.lower().endswith(".npz"):
        assert abs(float(np.load(path)["values"][-1]) - float(e["total"])) <= 2e-6 * abs(float(e["total"]))
    else:
        doc = json.loads(path.read_text())
        assert ("metadata" in doc) == (name == "G.JSON") and doc["nodes"]


def test_a_two_token_token_is_refused_before_the_model_loads(no_load, llama_lm_dir, tmp_path, capsys):
    for flag in ("--token", "--foil"):
        code = run_cli(
            [
                "explain",
                "--model",
                str(llama_lm_dir),
                "--text",
                TEXT,
                "--out",
                str(tmp_path / "e.npz"),
                flag,
                " unbelievable catapult",
            ]
        )
        assert code == 2 and "tokens here" in _one_line(capsys)


@pytest.mark.skipif(not loading.smollm2_converted(), reason="smollm2 is not converted in NORMVIZ_CACHE yet")
def test_a_two_token_token_on_smollm2_is_refused_before_the_model_loads(no_load, tmp_path, capsys):
    code = run_cli(
        [
            "explain",
            "--model",
            "smollm2",
            "--text",
            "The capital of France is",
            "--out",
            str(tmp_path / "e.npz"),
            "--token",
            " New York",
        ]
    )
    err = _one_line(capsys)
    assert code == 2 and "is 2 tokens here" in err and "' New'" in err


def test_a_graph_over_the_memory_budget_is_refused_before_the_model_loads(no_load, llama_lm_dir, tmp_path, capsys):
    text = " ".join(["the cat sat on the mat"] * 20)
    code = run_cli(
        [
            "explain",
            "--model",
            str(llama_lm_dir),
            "--text",
            text,
            "--out",
            str(tmp_path / "e.npz"),
            "--graph",
            str(tmp_path / "g.json"),
            "--option",
            "memory_budget_mb=0.05",
        ]
    )
    err = _one_line(capsys)
    assert code == 2 and "memory budget" in err and "before the model loads" in err
    assert not any(tmp_path.iterdir())


def test_a_graph_over_the_budget_after_tokenising_is_refused_before_the_explanation(
    llama_lm_dir, tmp_path, capsys, monkeypatch
):
    """The words are fewer than the tokens (wordpieces): the check with the real count, before explain runs."""
    from normviz.session.session import Session

    monkeypatch.setattr(Session, "explain", lambda *a, **k: pytest.fail("explained"))
    from normviz.attribution.graph import graph_bytes

    lm = normviz.load(str(llama_lm_dir), device="cpu")
    d, d_ff = lm.sizes
    budget = graph_bytes(4, lm.n_layers, lm.n_heads, d, d_ff, 4) * 1.01 / 2**20  # 2 words fit, 40 pieces do not
    code = run_cli(
        [
            "explain",
            "--model",
            str(llama_lm_dir),
            "--text",
            "catapultingly unbelievabilities",
            "--out",
            str(tmp_path / "e.npz"),
            "--graph",
            str(tmp_path / "g.json"),
            "--option",
            f"memory_budget_mb={budget}",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the load's progress lines
    assert code == 2 and "memory budget" in err and "Nothing was written" in err
    assert not any(tmp_path.iterdir())


def test_the_json_holds_readable_tokens_and_the_ids(smollm2, tmp_path):
    s = normviz.Session(smollm2, "The capital of France is")
    d = s.explain().to_dict(with_sources=False)
    tok = smollm2.tokenizer
    assert list(d["token_ids"]) == list(s.encoded.ids)
    assert list(d["tokens"]) == [tok.decode([i]) for i in s.encoded.ids]
    assert " capital" in list(d["tokens"]) and not any("Ġ" in t for t in d["tokens"])
    assert "Ġcapital" in list(d["vocab_tokens"])


@pytest.mark.parametrize("out", ["x.csv", "x.json", "maps.NPZ.txt"])
def test_export_refuses_an_out_that_is_not_npz(no_load, tmp_path, capsys, out):
    code = run_cli(["export", "--model", "minilm", "--text", "a b c", "--out", str(tmp_path / out)])
    assert code == 2 and "writes an .npz file" in _one_line(capsys)
    assert not any(tmp_path.iterdir())
