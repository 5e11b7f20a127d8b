"""Issue 41: the per-layer knockout (normviz.trust.layer_knockout) equals one pass per edge written here
independently: a forward pre-hook on layer l's attention module adds −∞ at (i, j) to the mask it is given (all
heads, or a 4D mask with −∞ for one head only), on a tiny float64 Llama; other layers run unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.core.errors import NormvizError, TooCostlyError
from normviz.trust.layer_knockout import edges, layer_knockout

from ..helpers import tiny


def _score(hm, ids, i, token, foil):
    with torch.no_grad():
        logits = hm(input_ids=torch.tensor([ids])).logits[0, i].double()
    return float(logits[token] - logits[foil])


def _reference(lm, ids, i, token, foil, layer, edge, head=None):
    hm = lm.head_model
    attn = hm.model.layers[layer].self_attn
    n = len(ids)

    def pre(module, args, kwargs):
        mask = kwargs["attention_mask"]
        H = hm.config.num_attention_heads
        extra = torch.zeros((1, H if head is not None else 1, n, n), dtype=torch.float64)
        extra[0, head if head is not None else 0, edge[0], edge[1]] = float("-inf")
        kwargs["attention_mask"] = (mask if mask is not None else 0) + extra
        return args, kwargs

    handle = attn.register_forward_pre_hook(pre, with_kwargs=True)
    try:
        return _score(hm, ids, i, token, foil)
    finally:
        handle.remove()


@pytest.mark.parametrize("head", [None, 2])
def test_layer_knockout_equals_one_hooked_pass_per_edge(head_model, head):
    lm = head_model("llama")
    enc = tiny.encoded(n=5, seed=3)
    s = normviz.Session.from_encoded(lm, [enc], options={"intervention_batch_tokens": 7 * 5})[0]
    d = layer_knockout(s, token=7, foil=13, head=head)
    total = _score(lm.head_model, enc.ids, 4, 7, 13)
    assert d.shape == (2, 5, 5)
    for l in range(2):
        for i in range(5):
            for j in range(5):
                if (i, j) not in edges(5, True):
                    assert np.isnan(d[l, i, j])
                    continue
                ref = total - _reference(lm, enc.ids, 4, 7, 13, l, (i, j), head)
                assert d[l, i, j] == pytest.approx(ref, abs=1e-9), (l, i, j)
    assert np.nanmax(np.abs(d)) > 1e-3


def test_refusals(head_model):
    lm = head_model("llama")
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=5, seed=3)], options={"knockout_budget_s": 1e-12})[0]
    with pytest.raises(TooCostlyError, match="knockout_budget_s"):
        layer_knockout(s)
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=5, seed=3)])[0]
    with pytest.raises(NormvizError, match="layers must"):
        layer_knockout(s, layers=[5])


def test_rows_cut_only_the_prediction_row(head_model):
    lm = head_model("llama")
    enc = tiny.encoded(n=5, seed=3)
    s = normviz.Session.from_encoded(lm, [enc])[0]
    full = layer_knockout(s, token=7, foil=13)
    row = layer_knockout(s, token=7, foil=13, rows=[-1])
    np.testing.assert_allclose(row[:, 4], full[:, 4], atol=1e-12)
    assert np.isnan(row[:, :4]).all()


def test_per_layer_maps_are_scored_against_their_own_layer(head_model):
    """explain_text(layers=True): each per-layer map's row i in layer l against layer l's knockout row, Spearman
    over the scored tokens, mean over layers; a map equal to the knockout scores 1, its negation −1; rollouts are
    not per-layer maps and are not scored."""
    from normviz.trust.attributions import explain_text, layer_scores, per_layer_keys
    from normviz.trust.scores import spearman

    lm = head_model("llama")
    enc = tiny.encoded(n=7, seed=3)
    s = normviz.Session.from_encoded(lm, [enc])[0]
    t = explain_text(
        s,
        ["attention", "norm", "rollout_attn_res"],
        token=7,
        foil=13,
        heads=False,
        gradients=False,
        erase=False,
        layers=True,
    )
    lk, i, sc = t.layer_knockout, t.position, t.scored
    assert lk.shape == (2, 7, 7) and np.isfinite(lk[:, i, sc]).all() and np.isnan(lk[:, :i]).all()
    np.testing.assert_allclose(lk, layer_knockout(s, token=7, foil=13, rows=[i]), atol=1e-12)
    a = s.get(["norm"])["norm"]
    want = np.mean(
        [
            spearman(
                np.asarray(a)[l, :, i, :].mean(0)[sc] if np.ndim(a) == 4 else np.asarray(a)[l, i, sc], lk[l, i, sc]
            )
            for l in range(2)
        ]
    )
    assert t.spearman_layers["norm"] == pytest.approx(want, abs=1e-12)
    assert set(t.spearman_layers) == {"attention", "norm", "random"}
    filled = np.nan_to_num(lk)
    got = layer_scores(s, {"truth": filled, "flipped": -filled}, ["truth", "flipped"], lk, i, sc)
    assert got == {"truth": pytest.approx(1.0), "flipped": pytest.approx(-1.0)}
    assert per_layer_keys(["rollout_attn_res"], {"rollout_attn_res": np.zeros((2, 7, 7))}) == []
