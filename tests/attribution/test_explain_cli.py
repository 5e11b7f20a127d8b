"""``normviz explain``: user mistakes on one line with exit code 2 before the model loads; the .npz and .json
outputs on a tiny saved Llama with its LM head; a checkpoint without head weights loads without a head."""

from __future__ import annotations

import json

import numpy as np
import pytest

import normviz
from normviz import cli
from normviz.core.errors import NormvizError

from ..helpers.cli import run as run_cli


@pytest.mark.parametrize(
    "override, extra, says",
    [
        ({"--out": "x.txt"}, [], "name a .npz or .json"),
        ({"--out": "/no/such/folder/x.npz"}, [], "does not exist"),
        ({}, ["--token", " a", "--token-id", "3"], "give one of them"),
        ({}, ["--token", " a", "--actual-next"], "give one of them"),
        ({}, ["--foil", " a", "--foil-id", "3"], "give one of them"),
        ({}, ["--token", " a", "--foil", " a"], "the same"),
        ({}, ["--token", ""], "is empty"),
        ({}, ["--token-id", "-4"], "0 or more"),
        ({}, ["--top", "0"], "--top"),
        ({"--text": "   "}, [], "--text"),
        ({"--text": ""}, [], "--text is empty"),
        ({"--model": "/no/such/model"}, [], "Unknown model"),
        ({}, ["--position", "x"], "invalid int"),
        ({}, ["--graph", "g.txt"], "--graph"),
        ({}, ["--graph", "g.json", "--node-threshold", "2"], "--node-threshold"),
        # issue 29: exit 1 with "unexpected ValueError", and nan meaning no budget
        ({}, ["--option", "explain_budget_s=abc"], "explain_budget_s='abc' is not a number"),
        ({}, ["--option", "explain_budget_s=nan"], "explain_budget_s='nan' is not a finite number"),
    ],
)
def test_user_mistakes_are_one_line_before_the_model_loads(no_load, tmp_path, capsys, override, extra, says):
    args = {"--model": "smollm2", "--text": "The capital of France is", "--out": str(tmp_path / "e.npz"), **override}
    argv = ["explain"] + [a for kv in args.items() for a in kv] + extra
    assert run_cli(argv) == 2  # argparse's own refusals too (a position that is no number)
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error:") and says in err, err


def test_writes_npz_and_json(llama_lm_dir, tmp_path, capsys):
    npz, js = tmp_path / "e.npz", tmp_path / "e.json"
    text = "the cat sat on the mat"
    assert (
        cli.main(
            [
                "explain",
                "--model",
                str(llama_lm_dir),
                "--text",
                text,
                "--out",
                str(npz),
                "--dtype",
                "float64",
                "--foil-id",
                "1005",
                "--position",
                "3",
            ]
        )
        == 0
    )
    d = np.load(npz)
    lm = normviz.load(str(llama_lm_dir), dtype="float64", device="cpu")
    s = normviz.Session(lm, text)
    e = s.explain(foil=1005, position=3)
    assert int(d["token"]) == e.token and int(d["position"]) == 3 and int(d["foil"]) == 1005
    assert d["heads"].shape == (2, 4, s.n_tokens) and list(d["tokens"]) == s.tokens
    assert np.allclose(d["heads"], e.heads, rtol=0, atol=1e-12)
    total = float(d["total"])
    assert abs(d["sources"].sum() + float(d["bias"]) - total) <= 2e-6 * abs(total)
    assert d["sources_by_layer"].shape == (3, s.n_tokens) and np.array_equal(d["sources_by_layer"][0], d["sources"])
    assert abs(d["sources_by_layer"][1].sum() + d["bias_by_layer"][1:].sum() - total) <= 2e-6 * abs(total)
    assert abs(
        float(d["embedding"]) + d["heads"].sum() + d["attn_bias"].sum() + d["ff"].sum() + float(d["final_bias"]) - total
    ) <= 2e-6 * abs(total)
    assert int(d["top_ids"][0]) == s.predict(1, position=3)[0].id and len(d["top_ids"]) == 10
    assert (
        cli.main(
            [
                "explain",
                "--model",
                str(llama_lm_dir),
                "--text",
                text,
                "--out",
                str(js),
                "--actual-next",
                "--position",
                "1",
                "--no-sources",
            ]
        )
        == 0
    )
    j = json.loads(js.read_text())
    assert j["token"] == s.encoded.ids[2] and "sources" not in j and len(j["heads"]) == 2
    assert "wrote" in capsys.readouterr().err


def test_sources_run_under_a_default_time_budget(llama_lm_dir, tmp_path, capsys, monkeypatch):
    """Issue 29: without --option explain_budget_s the CLI's default budget applies (389 tokens of smollm2 were
    ~28 min estimated and ran): over it sources are refused before any work, with a note naming the option;
    the option given still decides."""
    from normviz.cli import explain as explain_cli

    out, text = tmp_path / "e.json", "the cat sat on the mat"
    monkeypatch.setattr(explain_cli, "SOURCES_BUDGET_S", 1e-9)
    assert cli.main(["explain", "--model", str(llama_lm_dir), "--text", text, "--out", str(out)]) == 0
    j = json.loads(out.read_text())
    assert "sources" not in j and "explain_budget_s" in j["sources_refused"] and "heads" in j
    err = capsys.readouterr().err
    assert "sources refused" in err and "--option explain_budget_s=SECONDS" in err
    assert (
        cli.main(
            [
                "explain",
                "--model",
                str(llama_lm_dir),
                "--text",
                text,
                "--out",
                str(out),
                "--option",
                "explain_budget_s=1e9",
            ]
        )
        == 0
    )
    j = json.loads(out.read_text())
    assert "sources_refused" not in j and len(j["sources"]) == len(j["tokens"])


def test_writes_the_graph(llama_lm_dir, tmp_path, capsys):
    """--graph: Neuronpedia's JSON (and .npz) of the same prediction; the graph's logit node is the total."""
    g_json, g_npz = tmp_path / "g.json", tmp_path / "g.npz"
    text = "the cat sat on the mat"
    for path in (g_json, g_npz):
        assert (
            cli.main(
                [
                    "explain",
                    "--model",
                    str(llama_lm_dir),
                    "--text",
                    text,
                    "--out",
                    str(tmp_path / "e.npz"),
                    "--dtype",
                    "float64",
                    "--graph",
                    str(path),
                    "--node-threshold",
                    "0.9",
                ]
            )
            == 0
        )
    doc = json.loads(g_json.read_text())
    assert doc["metadata"]["slug"] == "g" and doc["metadata"]["pruning_settings"]["node_threshold"] == 0.9
    e = np.load(tmp_path / "e.npz")
    arrays = np.load(g_npz)
    assert abs(float(arrays["values"][-1]) - float(e["total"])) <= 2e-6 * abs(float(e["total"]))
    assert "nodes" in capsys.readouterr().err


def test_a_checkpoint_without_head_weights_loads_without_a_head(tiny_llama_dir):
    lm = normviz.load(str(tiny_llama_dir), device="cpu")  # saved as a base LlamaModel, embeddings untied
    assert lm.head_model is None and type(lm.model).__name__ == "LlamaModel"
    with pytest.raises(NormvizError, match="without a language-model head"):
        normviz.Session(lm, "the cat").predict()
