"""Attention rollout and rollout of the norm-based maps: hand-worked cases, invariants, naive products."""
from __future__ import annotations

import numpy as np
import pytest

from normviz.analysis import analyze_encoded
from normviz.errors import NormvizError
from normviz.methods import rollout as ro

from .tiny import ARCHS, encoded, tiny_model


class _Info:  # stands in for Analysis in the pure model-scope functions
    def __init__(self, placement="post"):
        self.placement = placement
        self.notes = {}


def test_attention_rollout_by_hand():
    """Two layers, one head, three tokens, worked on paper.

    A_0 = [[1,0,0],[.5,.5,0],[.2,.2,.6]]  →  Â_0 = 0.5·A_0 + 0.5·I = [[1,0,0],[.25,.75,0],[.1,.1,.8]]
    A_1 = [[0,1,0],[0,0,1],[1,0,0]]       →  Â_1 = [[.5,.5,0],[0,.5,.5],[.5,0,.5]]
    R_1 = Â_1·Â_0 = [[.625,.375,0],[.175,.425,.4],[.55,.05,.4]]
    """
    a0 = np.array([[1, 0, 0], [.5, .5, 0], [.2, .2, .6]])
    a1 = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=float)
    att = np.stack([a0, a1])[:, None]  # [L=2, H=1, 3, 3]
    out = ro._compute_attention({"attention": att}, _Info(), ["rollout_attention"], {})["rollout_attention"]
    np.testing.assert_allclose(out[0], [[1, 0, 0], [.25, .75, 0], [.1, .1, .8]], atol=1e-15)
    np.testing.assert_allclose(out[1], [[.625, .375, 0], [.175, .425, .4], [.55, .05, .4]], atol=1e-15)


def test_head_average_by_hand():
    """Two heads [[1,0],[0,1]] and [[0,1],[1,0]] average to 0.5 everywhere; Â = [[.75,.25],[.25,.75]]."""
    att = np.array([[[[1., 0], [0, 1]], [[0, 1], [1, 0]]]])
    out = ro._compute_attention({"attention": att}, _Info(), ["rollout_attention"], {})["rollout_attention"]
    np.testing.assert_allclose(out[0], [[.75, .25], [.25, .75]], atol=1e-15)


def test_norm_rollout_by_hand():
    """No identity is added: M_0 = [[2,2],[1,3]] → [[.5,.5],[.25,.75]]; M_1 = [[1,0],[1,1]] → [[1,0],[.5,.5]];
    R_1 = [[.5,.5],[.375,.625]]."""
    m = np.array([[[2., 2], [1, 3]], [[1, 0], [1, 1]]])
    out = ro._compute_norm({"attn_res": m}, _Info(), ["rollout_attn_res"], {})["rollout_attn_res"]
    np.testing.assert_allclose(out[0], [[.5, .5], [.25, .75]], atol=1e-15)
    np.testing.assert_allclose(out[1], [[.5, .5], [.375, .625]], atol=1e-15)


def test_rollout_of_identity_is_identity():
    n, layers = 5, 4
    eye = np.broadcast_to(np.eye(n), (layers, 3, n, n)).copy()
    out = ro._compute_attention({"attention": eye}, _Info(), ["rollout_attention"], {})["rollout_attention"]
    np.testing.assert_array_equal(out, np.broadcast_to(np.eye(n), (layers, n, n)))
    diag = np.broadcast_to(np.diag(np.arange(1., n + 1)), (layers, n, n)).copy()  # residual-only norm maps
    out = ro._compute_norm({"attn_res_ln": diag}, _Info(), ["rollout_attn_res_ln"], {})["rollout_attn_res_ln"]
    np.testing.assert_array_equal(out, np.broadcast_to(np.eye(n), (layers, n, n)))


def test_receptive_field_normalisation_of_uniform_attention_is_uniform():
    """A decoder that attends uniformly over its receptive field gets rows 1/(i+1) with the correction,
    while the standard rollout piles weight on the first token."""
    n, layers = 6, 3
    u = ro.uniform_causal(n)
    att = np.broadcast_to(u, (layers, 2, n, n)).copy()
    info = _Info("pre")
    std = ro._compute_attention({"attention": att}, info, ["rollout_attention"], {})["rollout_attention"]
    assert std[-1, -1, 0] > 2 * std[-1, -1, -2]  # bias to the first token
    assert info.notes["rollout_attention"].startswith("standard")
    rf = ro._compute_attention({"attention": att}, info, ["rollout_attention"],
                               {"rollout_normalization": "receptive_field"})["rollout_attention"]
    np.testing.assert_allclose(rf, np.broadcast_to(u, (layers, n, n)), atol=1e-12)
    assert "receptive-field" in info.notes["rollout_attention"]
    rf2 = ro._compute_norm({"ff_res": att[:, 0]}, info, ["rollout_ff_res"],
                           {"rollout_normalization": "receptive_field"})["rollout_ff_res"]
    np.testing.assert_allclose(rf2, np.broadcast_to(u, (layers, n, n)), atol=1e-12)


def test_receptive_field_hand_case():
    """Two tokens, one layer, A = [[1,0],[.8,.2]]: Â = [[1,0],[.4,.6]], baseline Û = [[1,0],[.25,.75]];
    ratios row 1: .4/.25 = 1.6, .6/.75 = .8 → [2/3, 1/3]."""
    att = np.array([[[[1., 0], [.8, .2]]]])
    rf = ro._compute_attention({"attention": att}, _Info("pre"), ["rollout_attention"],
                               {"rollout_normalization": "receptive_field"})["rollout_attention"]
    np.testing.assert_allclose(rf[0], [[1, 0], [2 / 3, 1 / 3]], atol=1e-15)


def test_unknown_normalisation_is_refused():
    with pytest.raises(NormvizError, match="rollout_normalization"):
        ro._compute_attention({"attention": np.ones((1, 1, 2, 2)) / 2}, _Info(), ["rollout_attention"],
                              {"rollout_normalization": "bogus"})


ROLLOUTS = {"rollout_attn_res": "attn_res", "rollout_attn_res_ln": "attn_res_ln", "rollout_ff_res": "ff_res",
            "rollout_ff_res_ln": "ff_res_ln"}


@pytest.mark.parametrize("arch", ARCHS)
def test_rollouts_equal_naive_products(arch):
    lm = tiny_model(arch)
    keys = ["attention", "rollout_attention"] + [k for k in ROLLOUTS if lm.spec.placement == "post" or k != "rollout_ff_res_ln"]
    a = analyze_encoded(lm, [encoded(n=7)], methods=keys + list(ROLLOUTS.values())[:3]
                        + (["ff_res_ln"] if lm.spec.placement == "post" else []))[0]
    n = a.n_tokens
    # attention rollout, written out loop by loop
    acc = np.eye(n)
    for layer in range(a.n_layers):
        mean = a["attention"][layer].mean(0)
        step = 0.5 * mean + 0.5 * np.eye(n)
        step = step / step.sum(1, keepdims=True)
        acc = step @ acc
        np.testing.assert_allclose(a["rollout_attention"][layer], acc, rtol=1e-12, atol=1e-14)
    for key, src in ROLLOUTS.items():
        if key not in a:
            continue
        acc = np.eye(n)
        for layer in range(a.n_layers):
            m = a[src][layer]
            acc = (m / m.sum(1, keepdims=True)) @ acc
            np.testing.assert_allclose(a[key][layer], acc, rtol=1e-12, atol=1e-14)
    for key in a.keys():
        if key.startswith("rollout_"):
            np.testing.assert_allclose(a[key].sum(-1), 1, atol=1e-12)
            assert np.all(a[key] >= 0)
            if lm.spec.placement == "pre":
                assert np.all(np.triu(a[key], 1) == 0), key


def test_post_ln_only_key_refused_for_decoders():
    lm = tiny_model("gpt2")
    with pytest.raises(NormvizError, match="post"):
        analyze_encoded(lm, [encoded(n=4)], methods=["rollout_ff_res_ln"])


def test_asking_one_rollout_computes_only_its_source():
    lm = tiny_model("bert")
    a = analyze_encoded(lm, [encoded(n=4)], methods=["rollout_attn_res"])[0]
    assert set(a.keys()) == {"attn_res", "rollout_attn_res"}
    assert "rollout_attn_res" in a.notes
