"""Issue 33: ``normviz.graph`` — an exact attribution graph with heads and FF blocks as nodes: every node's
incoming and outgoing edges sum to its value, the tokens' values are ``explain().sources`` (the forward
propagation, independent code), the logit's incoming edges are explain's direct parts; circuit-tracer's pruning;
Neuronpedia's graph JSON fields."""

from __future__ import annotations

import json

import numpy as np
import pytest

import normviz
from normviz.attribution.graph import graph, prune
from normviz.core.errors import NormvizError, NotApplicableError

from ..helpers import tiny

ARCHS = ["llama", "llama_bias", "qwen2", "gpt2"]


def _session(lm, n=9, seed=1):
    return normviz.Session.from_encoded(lm, [tiny.encoded(n=n, seed=seed)])[0]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("foil", [None, 11])
def test_edges_are_complete_and_tokens_are_the_sources(head_model, arch, foil):
    lm = head_model(arch)
    s = _session(lm)
    g = graph(s, foil=foil, position=6)
    e = s.explain(token=g.token, foil=foil, position=6)
    n, N = len(s.tokens), g.n_nodes
    A, v = g.adjacency, g.values
    scale = max(1.0, np.abs(v).max())
    comps = slice(n, N - 2)
    assert np.abs(A[comps].sum(1) - v[comps]).max() <= 1e-12 * scale  # incoming (biases' edge included)
    assert np.abs(A[:, :-1].sum(0) - v[:-1]).max() <= 1e-12 * scale  # outgoing
    np.testing.assert_allclose(v[:n], e.sources, rtol=0, atol=1e-12 * scale)
    assert abs(v[N - 2] - e.bias) <= 1e-12 * scale
    assert abs(v[:n].sum() + v[N - 2] - v[-1]) <= 1e-12 * scale
    tol = 1e-9 if arch == "gpt2" else 2e-6  # Llama-family RMSNorm rounds through float32 in a float64 model
    assert abs(v[-1] - e.total) <= tol * max(1.0, abs(e.total))
    # the graph is a DAG in layer order: nothing reads the logit, no token or the biases reads anything
    assert not A[:, -1].any() and not A[:n].any() and not A[N - 2].any()


def test_logit_edges_are_the_direct_parts_without_biases(head_model):
    """On a model without biases a component's direct edge to the logit is explain()'s direct part."""
    lm = head_model("llama")
    s = _session(lm)
    g = graph(s)
    e = s.explain()
    n, L, H = len(s.tokens), lm.n_layers, lm.n_heads
    direct = g.adjacency[-1, n : n + L * (H + 1)].reshape(L, H + 1)
    np.testing.assert_allclose(direct[:, :H], e.heads.sum(-1), rtol=0, atol=2e-6)
    np.testing.assert_allclose(direct[:, H], e.ff, rtol=0, atol=2e-6)
    assert g.adjacency[-1, g.position] == pytest.approx(e.embedding, abs=1e-12)


def test_pruning_keeps_tokens_and_logit_and_connected_components(head_model):
    lm = head_model("qwen2")
    g = graph(_session(lm), node_threshold=0.5, edge_threshold=0.9)
    n = len(g.tokens)
    assert g.node_mask[:n].all() and g.node_mask[-1]
    kept = np.nonzero(g.node_mask[n:-2])[0] + n
    for k in kept:  # every kept component has a kept edge in and out
        assert g.edge_mask[k].any() and g.edge_mask[:, k].any()
    assert not g.edge_mask[~g.node_mask].any() and not g.edge_mask[:, ~g.node_mask].any()
    full = graph(_session(lm), node_threshold=1.0, edge_threshold=1.0)
    assert full.node_mask.sum() >= g.node_mask.sum() and full.edge_mask.sum() > g.edge_mask.sum()
    with pytest.raises(NormvizError, match="node_threshold"):
        prune(g.adjacency, g.n_nodes - 1, g.node_mask, 1.5, 0.9)


def test_pruning_keeps_the_most_influential_edge(head_model):
    """A chain token → head → logit that carries most of the logit survives any threshold."""
    A = np.zeros((5, 5))  # nodes: token 0, token 1, component 2, bias 3, logit 4
    A[2, 0], A[2, 1], A[4, 2], A[4, 1] = 5.0, 0.01, 3.0, 0.02
    always = np.array([True, True, False, True, True])
    nodes, edges, cum = prune(A, 4, always, 0.5, 0.5)
    assert nodes[2] and edges[4, 2] and edges[2, 0] and not edges[2, 1]


def test_neuronpedia_export_has_the_schema_fields(head_model, tmp_path):
    """The fields Neuronpedia's graph schema 1.0.0 requires (normviz.attribution.graph.SCHEMA), with their types;
    ids unique; every link between exported nodes; the logit's label carries "(p=…)" as its loader reads it."""
    lm = head_model("gpt2")
    g = graph(_session(lm), foil=11)
    path = tmp_path / "g.json"
    g.save(path, slug="tiny")
    doc = json.loads(path.read_text())
    assert set(doc) == {"metadata", "qParams", "nodes", "links"}
    meta = doc["metadata"]
    assert {"slug", "scan", "prompt_tokens", "prompt"} <= set(meta) and meta["slug"] == "tiny"
    assert meta["prompt_tokens"] == g.tokens
    ids = [node["node_id"] for node in doc["nodes"]]
    assert len(ids) == len(set(ids)) == int(g.node_mask.sum())
    for node in doc["nodes"]:
        assert {"node_id", "feature", "layer", "ctx_idx", "feature_type", "jsNodeId", "clerp"} <= set(node)
        assert isinstance(node["feature"], int) and isinstance(node["layer"], str)
        assert isinstance(node["ctx_idx"], int) and isinstance(node["clerp"], str)
    logit = [node for node in doc["nodes"] if node["feature_type"] == "logit"]
    assert len(logit) == 1 and "(p=" in logit[0]["clerp"] and logit[0]["is_target_logit"]
    assert float(logit[0]["clerp"].split("(p=")[1].split(")")[0]) == pytest.approx(g.prob, abs=1e-3)
    numeric = [int(node["layer"]) for node in doc["nodes"] if node["layer"] != "E"]
    assert max(numeric) == int(logit[0]["layer"])
    assert doc["links"] and all(link["source"] in ids and link["target"] in ids for link in doc["links"])
    assert all(isinstance(link["weight"], float) for link in doc["links"])
    np.savez(tmp_path / "g.npz", **g.to_arrays())
    back = np.load(tmp_path / "g.npz")
    np.testing.assert_array_equal(back["adjacency"], g.adjacency)
    plain = json.loads(g.to_json())
    assert len(plain["nodes"]) == int(g.node_mask.sum())
    with pytest.raises(NormvizError, match=".npz"):
        g.save(tmp_path / "g.txt")


def test_post_ln_models_are_refused(head_model):
    with pytest.raises(NotApplicableError, match="pre-LN"):
        graph(_session(head_model("bert")))


def test_smollm2_paris(smollm2):
    s = normviz.Session(smollm2, "The capital of France is")
    g = graph(s, token=" Paris", foil=" London")
    e = s.explain(token=" Paris", foil=" London")
    n = len(s.tokens)
    v, A = g.values, g.adjacency
    scale = max(1.0, np.abs(v).max())
    assert abs(v[-1] - e.total) <= 1e-4 * abs(e.total)
    np.testing.assert_allclose(v[:n], e.sources, rtol=0, atol=1e-4 * scale)
    assert np.abs(A[n:-2].sum(1) - v[n:-2]).max() <= 1e-4 * scale
    assert g.names[int(np.argmax(v[:n]))] == " France [3]" and g.tokens[3] == " France"
