"""Issue 42 item 11, the Neuronpedia export read against their loader and schema: a Hub id or local path as
``scan`` held '/', which their save route refuses, and a file name with spaces made a refused slug; heads and FF
blocks were typed 'attention head' / 'mlp', which their graph-score code does not know; a predicted '"' closed
the logit label's quotes early; emoji split into bytes showed as '�'."""

from __future__ import annotations

import json
import re

import pytest

import normviz
from normviz.attribution.graph import graph, neuronpedia_name
from normviz.attribution.predict import token_text
from normviz.models import loading

from ..helpers import tiny

SAFE = re.compile(r"^[A-Za-z0-9._-]+$")
THEIR_TYPES = {"embedding", "cross layer transcoder", "mlp reconstruction error", "logit"}


@pytest.fixture(scope="module")
def g(head_model):
    return graph(normviz.Session.from_encoded(head_model("llama"), [tiny.encoded(n=9, seed=1)])[0], foil=11)


@pytest.mark.parametrize(
    "scan, want",
    [
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB-SmolLM2-135M-Instruct"),
        ("/home/me/models/tiny llama/", "tiny-llama"),
        ("./runs/m", "m"),
        ("smollm2", "smollm2"),
        ("C:\\models\\gpt2", "gpt2"),
    ],
)
def test_scan_names_their_save_route_takes(g, scan, want):
    meta = g.to_neuronpedia(scan=scan)["metadata"]
    assert meta["scan"] == want and SAFE.match(meta["scan"])
    g.model = scan
    assert g.to_neuronpedia()["metadata"]["scan"] == want


@pytest.mark.parametrize("slug", ["my graph", "Paris vs London!", "a/b", "  "])
def test_slugs_have_no_spaces_or_slashes(g, slug, tmp_path):
    assert SAFE.match(g.to_neuronpedia(slug=slug)["metadata"]["slug"])
    assert neuronpedia_name("Paris vs London!", lower=True) == "paris-vs-london"


def test_node_types_are_ones_their_graph_code_knows(g):
    nodes = g.to_neuronpedia()["nodes"]
    assert {n["feature_type"] for n in nodes} <= THEIR_TYPES
    kinds = {n["feature_type"] for n in nodes}
    assert "cross layer transcoder" in kinds and "logit" in kinds
    heads = [n for n in nodes if "(attention head)" in n["clerp"]]
    assert heads and all(n["feature_type"] == "cross layer transcoder" for n in heads)


@pytest.mark.parametrize("text", ['"', 'say "hi"', "back\\slash", ' "'])
def test_a_predicted_quote_stays_inside_the_logit_label(g, text, monkeypatch):
    monkeypatch.setattr(g, "token_text", text)
    monkeypatch.setattr(g, "foil_text", text + "x")
    logit = next(n for n in g.to_neuronpedia()["nodes"] if n["feature_type"] == "logit")
    got = re.fullmatch(r'Output "((?:[^"\\]|\\.)*)" − "((?:[^"\\]|\\.)*)" \(p=([0-9.]+)\)', logit["clerp"])
    assert got is not None, logit["clerp"]
    assert json.loads(f'"{got.group(1)}"') == text and json.loads(f'"{got.group(2)}"') == text + "x"


@pytest.mark.skipif(loading.preview("smollm2") is None, reason="smollm2 is not converted in NORMVIZ_CACHE yet")
def test_emoji_split_into_bytes_read_as_their_bytes():
    tok = loading.preview("smollm2")[1]
    ids = tok.encode("I love 🦜")
    shown = [token_text(tok, i) for i in ids]
    assert not any("\ufffd" in t for t in shown)
    assert shown[-3:] == [" \\xf0\\x9f", "\\xa6", "\\x9c"]
    joined = b"".join(
        t.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1") for t in shown[-3:]
    )
    assert joined.decode("utf-8") == " 🦜"
    assert token_text(tok, tok.encode(" Paris")[0]) == " Paris"  # whole characters as the tokenizer decodes them
