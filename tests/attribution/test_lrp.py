"""Issue 41: CP-LRP (normviz.attribution.lrp), gradient × input with norms and attention frozen.

With the FF blocks removed (their output projection zeroed) the frozen network is linear in the embeddings and
in each head's output, so CP-LRP must equal normviz's exact decomposition computed another way: the token
relevance equals explain()'s sources and its gap equals explain()'s bias (Llama; Qwen2 with q/k/v biases), and
the head relevance equals the attribution graph's head node values (Llama, no biases). With the FF in place the
gradient × input of the FF is not its output: the gap is then non-zero and the relevance differs from the
sources (the test says so, so a silent fallback to the exact parts would fail)."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.attribution.graph import graph
from normviz.attribution.lrp import cp_lrp

from ..helpers import tiny

TOKEN, FOIL = 7, 13


def _model(arch, ff=True):
    lm = tiny.build_with_head(arch)
    if not ff:
        for layer in lm.layers:
            layer.mlp.down_proj.weight.data.zero_()
    return lm


def _session(lm):
    return normviz.Session.from_encoded(lm, [tiny.encoded(n=7, seed=3)])[0]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_without_ff_tokens_are_the_exact_sources(arch):
    s = _session(_model(arch, ff=False))
    r = cp_lrp(s, token=TOKEN, foil=FOIL)
    e = s.explain(TOKEN, FOIL)
    scale = max(1.0, float(np.abs(e.sources).max()))
    assert r.tokens.shape == (7,) and np.abs(e.sources).max() > 1e-2
    assert np.abs(r.tokens - np.asarray(e.sources)).max() <= 1e-5 * scale  # float32 norms in these models
    assert r.gap == pytest.approx(float(e.bias), abs=1e-5 * scale)


def test_without_ff_heads_are_the_graph_node_values():
    lm = _model("llama", ff=False)
    s = _session(lm)
    r = cp_lrp(s, token=TOKEN, foil=FOIL)
    g = graph(s, TOKEN, FOIL)
    want = np.zeros((lm.n_layers, lm.n_heads))
    for k, kind in enumerate(g.kinds):
        if kind == "attention head":
            want[g.layers[k], g.heads[k]] = g.values[k]
    assert np.abs(want).max() > 1e-2
    assert np.abs(r.heads - want).max() <= 1e-5 * max(1.0, np.abs(want).max())


def test_with_ff_the_gap_is_reported():
    s = _session(_model("llama"))
    r = cp_lrp(s, token=TOKEN, foil=FOIL)
    e = s.explain(TOKEN, FOIL)
    assert r.total == pytest.approx(float(e.sources.sum() + e.bias), abs=1e-5 * max(1.0, abs(r.total)))
    assert abs(r.gap) > 1e-3 and np.abs(r.tokens - np.asarray(e.sources)).max() > 1e-3
    assert r.gap == pytest.approx(r.total - r.tokens.sum(), abs=1e-12) and "CP-LRP" in r.name
