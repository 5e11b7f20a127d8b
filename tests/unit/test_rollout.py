"""Attention rollout and rollout of the norm-based maps on hand-worked arrays, through the rollouts family's
public ``compute`` (the maps of other families given, as the session gives them)."""

from __future__ import annotations

import numpy as np
import pytest

from normviz.core.errors import NormvizError
from normviz.methods import rollouts as ro
from normviz.methods.base import Inputs, Request


def _never():
    raise AssertionError("a rollout must not read the records (no forward pass)")


def roll(arrays: dict, key: str, options: dict | None = None, causal: bool = False):
    """(array, note) of one rollout key from the given per-layer maps."""
    some = next(iter(arrays.values()))
    request = Request(
        n_tokens=some.shape[-1],
        n_layers=some.shape[0],
        n_heads=some.shape[1] if some.ndim == 4 else 1,
        d_model=8,
        d_ff=16,
        placement="pre" if causal else "post",
        causal=causal,
        gated=False,
        device="cpu",
    )
    options = options or {}
    ro.check(request, key, options)
    out = ro.compute(Inputs(request=request, layer_views=_never, arrays=arrays), [key], options)
    return out.arrays[key], out.notes[key]


def test_attention_rollout_by_hand():
    """Two layers, one head, three tokens, worked on paper.

    A_0 = [[1,0,0],[.5,.5,0],[.2,.2,.6]]  →  Â_0 = 0.5·A_0 + 0.5·I = [[1,0,0],[.25,.75,0],[.1,.1,.8]]
    A_1 = [[0,1,0],[0,0,1],[1,0,0]]       →  Â_1 = [[.5,.5,0],[0,.5,.5],[.5,0,.5]]
    R_1 = Â_1·Â_0 = [[.625,.375,0],[.175,.425,.4],[.55,.05,.4]]
    """
    a0 = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.2, 0.6]])
    a1 = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=float)
    att = np.stack([a0, a1])[:, None]  # [L=2, H=1, 3, 3]
    out, _ = roll({"attention": att}, "rollout_attention")
    np.testing.assert_allclose(out[0], [[1, 0, 0], [0.25, 0.75, 0], [0.1, 0.1, 0.8]], atol=1e-15)
    np.testing.assert_allclose(out[1], [[0.625, 0.375, 0], [0.175, 0.425, 0.4], [0.55, 0.05, 0.4]], atol=1e-15)


def test_head_average_by_hand():
    """Two heads [[1,0],[0,1]] and [[0,1],[1,0]] average to 0.5 everywhere; Â = [[.75,.25],[.25,.75]]."""
    att = np.array([[[[1.0, 0], [0, 1]], [[0, 1], [1, 0]]]])
    out, _ = roll({"attention": att}, "rollout_attention")
    np.testing.assert_allclose(out[0], [[0.75, 0.25], [0.25, 0.75]], atol=1e-15)


def test_norm_rollout_by_hand():
    """No identity is added: M_0 = [[2,2],[1,3]] → [[.5,.5],[.25,.75]]; M_1 = [[1,0],[1,1]] → [[1,0],[.5,.5]];
    R_1 = [[.5,.5],[.375,.625]]."""
    m = np.array([[[2.0, 2], [1, 3]], [[1, 0], [1, 1]]])
    out, _ = roll({"attn_res": m}, "rollout_attn_res")
    np.testing.assert_allclose(out[0], [[0.5, 0.5], [0.25, 0.75]], atol=1e-15)
    np.testing.assert_allclose(out[1], [[0.5, 0.5], [0.375, 0.625]], atol=1e-15)


def test_rollout_of_identity_is_identity():
    n, layers = 5, 4
    eye = np.broadcast_to(np.eye(n), (layers, 3, n, n)).copy()
    out, _ = roll({"attention": eye}, "rollout_attention")
    np.testing.assert_array_equal(out, np.broadcast_to(np.eye(n), (layers, n, n)))
    diag = np.broadcast_to(np.diag(np.arange(1.0, n + 1)), (layers, n, n)).copy()  # residual-only norm maps
    out, _ = roll({"attn_res_ln": diag}, "rollout_attn_res_ln")
    np.testing.assert_array_equal(out, np.broadcast_to(np.eye(n), (layers, n, n)))


def test_receptive_field_normalisation_of_uniform_attention_is_uniform():
    """A decoder that attends uniformly over its receptive field gets rows 1/(i+1) with the correction,
    while the standard rollout piles weight on the first token."""
    n, layers = 6, 3
    u = ro.uniform_causal(n)
    att = np.broadcast_to(u, (layers, 2, n, n)).copy()
    std, note = roll({"attention": att}, "rollout_attention", causal=True)
    assert std[-1, -1, 0] > 2 * std[-1, -1, -2]  # bias to the first token
    assert note.startswith("standard")
    rf, note = roll({"attention": att}, "rollout_attention", {"rollout_normalization": "receptive_field"}, causal=True)
    np.testing.assert_allclose(rf, np.broadcast_to(u, (layers, n, n)), atol=1e-12)
    assert "receptive-field" in note
    rf2, _ = roll({"ff_res": att[:, 0]}, "rollout_ff_res", {"rollout_normalization": "receptive_field"}, causal=True)
    np.testing.assert_allclose(rf2, np.broadcast_to(u, (layers, n, n)), atol=1e-12)


def test_receptive_field_hand_case():
    """Two tokens, one layer, A = [[1,0],[.8,.2]]: Â = [[1,0],[.4,.6]], baseline Û = [[1,0],[.25,.75]];
    ratios row 1: .4/.25 = 1.6, .6/.75 = .8 → [2/3, 1/3]."""
    att = np.array([[[[1.0, 0], [0.8, 0.2]]]])
    rf, _ = roll({"attention": att}, "rollout_attention", {"rollout_normalization": "receptive_field"}, causal=True)
    np.testing.assert_allclose(rf[0], [[1, 0], [2 / 3, 1 / 3]], atol=1e-15)


def test_receptive_field_on_an_encoder_is_ignored_with_a_note():
    att = np.array([[[[1.0, 0], [0.8, 0.2]]]])
    std, _ = roll({"attention": att}, "rollout_attention")
    rf, note = roll({"attention": att}, "rollout_attention", {"rollout_normalization": "receptive_field"})
    np.testing.assert_array_equal(rf, std)
    assert "ignored" in note


def test_unknown_normalisation_is_refused():
    with pytest.raises(NormvizError, match="rollout_normalization"):
        roll({"attention": np.ones((1, 1, 2, 2)) / 2}, "rollout_attention", {"rollout_normalization": "bogus"})


def test_the_residual_inside_baseline_keeps_each_rows_self_share():
    """B̂_l: the map's own diagonal, the rest spread evenly over the earlier tokens; uniform maps give U."""
    m = np.array([[[1.0, 0, 0], [0.4, 0.6, 0], [0.2, 0.5, 0.3]]])
    np.testing.assert_allclose(ro.matched_baseline(m)[0], [[1, 0, 0], [0.4, 0.6, 0], [0.35, 0.35, 0.3]], atol=1e-15)
    u = ro.uniform_causal(5)
    np.testing.assert_allclose(ro.matched_baseline(u[None])[0], u, atol=1e-15)


def test_receptive_field_of_a_deep_residual_heavy_decoder_does_not_pile_on_the_diagonal():
    """30 layers whose maps keep 0.9 of each token and spread the rest evenly over its prefix (the shape of a
    residual-heavy decoder): the corrected rows are uniform, 1/(i+1); a baseline of uniform attention alone (the
    previous one) put almost all of the last row on the token itself."""
    n, layers, d = 8, 30, 0.9
    m = np.tril(np.ones((n, n)), -1) * ((1 - d) / np.maximum(np.arange(n), 1))[:, None] + d * np.eye(n)
    m[0, 0] = 1.0
    maps = np.broadcast_to(m, (layers, n, n)).copy()
    for key, src in (("rollout_attn_res", "attn_res"), ("rollout_ff_res", "ff_res")):
        rf, note = roll({src: maps}, key, {"rollout_normalization": "receptive_field"}, causal=True)
        np.testing.assert_allclose(rf, np.broadcast_to(ro.uniform_causal(n), (layers, n, n)), atol=1e-12)
        assert "self share" in note and "underflow" not in note
    std = ro.rollout(maps)
    old = ro.receptive_field_correct(std[-1], ro.rollout(np.broadcast_to(ro.uniform_causal(n), (layers, n, n)))[-1])
    assert old[-1, -1] > 0.99


def test_baseline_entries_that_underflow_are_said():
    r = np.tril(np.full((1, 3, 3), 0.5))
    base = r.copy()
    base[0, 2, 0] = 1e-300
    out, note = ro.receptive_field(r, base, "a test baseline")
    assert out[0, 2, 0] == 0 and "1 baseline entries underflow" in note
