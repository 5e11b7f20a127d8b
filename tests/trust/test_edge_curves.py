"""Edge faithfulness curves (issue 41): the edge-ablated forward pass is the model's own forward pass when no edge
is ablated, and mean-ablating a head when every edge out of it is ablated (checked against normviz.circuits.ablated,
which edits the head's output before W^O through transformers' attention interface), on tiny float64 Llama and
Qwen2 models (grouped K/V, q/k/v biases); a model it cannot split is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normviz import circuits
from normviz.attribution.knockout import head_means_of
from normviz.core.errors import NotApplicableError
from normviz.trust import edge_curves as ec

from ..helpers import tiny


def _setup(arch):
    lm = tiny.build_with_head(arch)
    enc = tiny.encoded(n=7, seed=3)
    means = head_means_of(lm, [tiny.encoded(n=5, seed=7), tiny.encoded(n=8, seed=8)])
    return lm, list(enc.ids), means


@pytest.mark.parametrize("arch", ["llama", "llama_bias", "qwen2"])
def test_nothing_ablated_is_the_forward_pass(arch):
    lm, ids, means = _setup(arch)
    got = ec.edge_forward(lm, ids, [[]], means)
    with torch.no_grad():
        ref = lm.head_model(input_ids=torch.tensor([ids])).logits[0, -1]
    torch.testing.assert_close(got[0], ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_every_edge_out_of_a_head_is_mean_ablating_it(arch):
    lm, ids, means = _setup(arch)
    edges = ec.edge_list(lm)
    heads = [(0, 1), (lm.n_layers - 1, 0), (1, lm.n_heads - 1)]
    sets = [[e for e in edges if e[0] == u] for u in heads] + [edges]
    token, foil = 3, 5
    got = ec.edge_forward(lm, ids, sets, means, token, foil).numpy()
    ref = circuits.ablated(lm, [(ids, token, foil)], [[u] for u in heads] + [sorted({e[0] for e in edges})], means)
    np.testing.assert_allclose(got, ref[0, 1:], rtol=0, atol=1e-9)
    assert np.abs(ref[0, 1:] - ref[0, 0]).max() > 1e-3  # the ablations do move the score


def test_one_edge_moves_only_its_receiver():
    """Ablating u → logits changes the score by the direct effect alone: with the final norm's scale frozen that
    is W_U (W^O_u (o_u − o'_u)) read through the norm — checked here as: ablating u → logits plus every other edge
    of u equals ablating u, and ablating u → logits alone differs from both."""
    lm, ids, means = _setup("llama")
    edges = ec.edge_list(lm)
    u = (0, 1)
    mine = [e for e in edges if e[0] == u]
    to_logits = [e for e in mine if e[1] == ("logits",)]
    rest = [e for e in mine if e[1] != ("logits",)]
    got = ec.edge_forward(lm, ids, [[], to_logits, rest, mine], means, 3, 5).numpy()
    assert abs(got[1] - got[0]) > 1e-6 and abs(got[2] - got[0]) > 1e-6 and abs(got[3] - got[1]) > 1e-6


def test_ranked_and_refused():
    lm, ids, means = _setup("llama")
    edges = ec.edge_list(lm)
    L, H = lm.n_layers, lm.n_heads
    scores = {"heads": np.full((1, L, H, L, H), np.nan), "ff": np.zeros((1, L, H, L)), "logits": np.zeros((1, L, H))}
    scores["logits"][0, 1, 2] = -5.0
    scores["ff"][0, 0, 0, 1] = 2.0
    order = ec.ranked(scores, edges)
    assert order[0] == ((1, 2), ("logits",)) and order[1] == ((0, 0), ("ff", 1)) and len(order) == len(edges)
    with pytest.raises(NotApplicableError):
        ec.edge_forward(tiny.build_with_head("gpt2"), ids, [[]], means)


def test_graph_edges_out_of_a_head_sum_to_its_node_value():
    """The exact graph's outgoing completeness (Σ_c e(s → c) + e(s → logit) = v(s)) read through graph_edges'
    layout: the mapping from the graph's [target, source] adjacency to EdgeScores' arrays is the right way round."""
    from normviz.attribution.graph import graph
    from normviz.session.session import Session

    lm, ids, _ = _setup("llama")
    s = Session.from_encoded(lm, [circuits.encoded(lm, ids)])[0]
    g = graph(s, 3, 5)
    got = ec.graph_edges(lm, g)
    node = np.nansum(got["heads"], (2, 3)) + np.nansum(got["ff"], 2) + got["logits"]
    ref = np.zeros_like(node)
    for k, kind in enumerate(g.kinds):
        if kind == "attention head":
            ref[g.layers[k], g.heads[k]] = g.values[k]
    np.testing.assert_allclose(node, ref, rtol=1e-8, atol=1e-10)
    assert np.abs(ref).max() > 1e-3
