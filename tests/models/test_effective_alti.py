"""Effective attention and ALTI on the tiny models, against the model's own vectors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normviz.methods.effective import effective_attention

from ..helpers.alti_code import alti_code_layer
from ..helpers.maps import analysis, decompositions
from ..helpers.tiny import ARCHS, distinct, encoded, from_ids
from ..helpers.vectors import independent_head_vectors, model_vectors


@pytest.mark.parametrize("arch", ARCHS)
def test_effective_attention_short_input_is_attention(tiny_model, arch):
    """n ≤ head size (8 in the tiny models): no left null space, effective = attention exactly."""
    lm = tiny_model(arch)
    a = analysis(lm, distinct(8), ["attention", "effective_attention"])
    np.testing.assert_array_equal(a["effective_attention"], a["attention"])


@pytest.mark.parametrize("arch", ARCHS)
def test_effective_attention_long_input_changes_rows_not_output(tiny_model, arch):
    """n = 14 > head size 8: rows change, but α̃·T = α·T with T from the model's own value output."""
    lm = tiny_model(arch)
    enc = distinct(14)
    a = analysis(lm, enc, ["attention", "effective_attention"])
    mv = model_vectors(lm, enc.ids)
    for layer, v in enumerate(mv):
        t = independent_head_vectors(lm, layer, v["value"]).numpy()  # [H, n, d], b^V included
        eff, att = a["effective_attention"][layer], a["attention"][layer]
        assert np.abs(eff - att).max() > 1e-3
        np.testing.assert_allclose(eff @ t, att @ t, rtol=0, atol=1e-9 * np.abs(att @ t).max())
        if lm.spec.placement == "pre":
            assert np.all(np.triu(eff, 1) == 0)
            # each row keeps the output of its own prefix and the first head-size rows are untouched
            np.testing.assert_array_equal(eff[:, :8], att[:, :8])


def test_repeated_tokens_without_position_in_values_are_unidentifiable(tiny_model):
    """Llama layer 0: two equal tokens have equal T rows, so attention can move between them freely:
    effective attention gives both the same weight even for n ≤ head size."""
    lm = tiny_model("llama")
    ids = [11, 12, 11, 13]
    enc = from_ids(ids)
    a = analysis(lm, enc, ["attention", "effective_attention"])
    eff, att = a["effective_attention"][0], a["attention"][0]
    np.testing.assert_allclose(eff[:, 2:, 0], eff[:, 2:, 2], atol=1e-12)
    np.testing.assert_allclose(eff[:, 2:, 0] + eff[:, 2:, 2], att[:, 2:, 0] + att[:, 2:, 2], atol=1e-12)


@pytest.mark.parametrize("arch", ARCHS)
def test_alti_through_the_norm_against_the_models_own_normalised_vectors(tiny_model, records, arch):
    """y_i from a hook on the model's norm (not from our parts), T_i(x_j) our exact parts through it; the
    formula c = max(0, ‖y‖₁ − ‖y − T‖₁) row-normalised; the rollout the plain product. Post-LN that is ``alti``
    (LN1), pre-LN our variant ``alti_ln`` (the norm before the FF). Llama-family RMSNorm modules compute in
    float32 even in a float64 model, so their y is only float32-exact."""
    lm = tiny_model(arch)
    key = "alti" if lm.spec.placement == "post" else "alti_ln"
    tol = 1e-9 if lm.spec.norm_kind == "layernorm" else 1e-5
    enc = encoded(n=9)
    a = analysis(lm, enc, [key, "rollout_" + key], options={"chunk_bytes": 4096})
    mv = model_vectors(lm, enc.ids)
    acc = np.eye(len(enc.ids))
    for layer, (ctx, v) in enumerate(zip(decompositions(lm, records(arch, enc)[2], chunk_bytes=10**9), mv)):
        parts, _ = ctx.attn_res_ln_vectors(slice(0, ctx.n))
        y = v["ln_out"]
        c = (y.abs().sum(-1)[:, None] - (y[:, None, :] - parts).abs().sum(-1)).clamp_min(0).numpy()
        expected = c / c.sum(-1, keepdims=True)
        np.testing.assert_allclose(a[key][layer], expected, rtol=tol, atol=tol * 1e-3)
        np.testing.assert_allclose(a[key][layer].sum(-1), 1, atol=1e-12)
        acc = expected @ acc
        np.testing.assert_allclose(a["rollout_" + key][layer], acc, rtol=tol, atol=tol * 1e-3)
        if lm.spec.placement == "pre":
            assert np.all(np.triu(a[key][layer], 1) == 0)
            assert np.all(np.triu(a["rollout_" + key][layer], 1) == 0)


@pytest.mark.parametrize("arch", ["bert", "distilbert", "gpt2", "llama", "qwen3"])
def test_alti_is_the_alti_codes_formula(tiny_model, arch):
    """``alti`` against an independent implementation of the authors' code (tests/helpers/alti_code.py) on the
    model's hooked vectors: post-LN through LN1, pre-LN (GPT-2, Llama, Qwen3) their pre_layer_norm branch with the
    raw attention + residual parts, whose y_i is the model's own residual stream before the FF norm."""
    lm = tiny_model(arch)
    enc = encoded(n=9)
    a = analysis(lm, enc, ["alti", "rollout_alti"])
    mv = model_vectors(lm, enc.ids)
    acc = np.eye(len(enc.ids))
    for layer, v in enumerate(mv):
        expected, y = alti_code_layer(lm, layer, v)
        own = v["ln_out"] if lm.spec.placement == "post" else v["z"]
        torch.testing.assert_close(y, own, rtol=0, atol=1e-9 * float(own.abs().max()))
        np.testing.assert_allclose(a["alti"][layer], expected.numpy(), rtol=1e-10, atol=1e-13)
        acc = expected.numpy() @ acc
        np.testing.assert_allclose(a["rollout_alti"][layer], acc, rtol=1e-10, atol=1e-13)
    if lm.spec.placement == "pre":  # the variant through the FF norm is another map
        assert np.abs(analysis(lm, enc, ["alti_ln"])["alti_ln"] - a["alti"]).max() > 1e-3


def test_alti_ln_is_for_pre_ln_models_only(tiny_model):
    import normviz

    s = normviz.Session.from_encoded(tiny_model("bert"), [encoded(n=5)])[0]
    assert s.refusal("alti_ln") is not None and s.refusal("rollout_alti_ln") is not None
    assert "alti_ln" not in s.get("interactions", strict=False).arrays


def test_causal_mode_full_is_the_literal_formula(tiny_model):
    """effective_causal=full: decoders get α·U_rU_rᵀ with the whole T (weight may move to future tokens);
    the default keeps every row inside its prefix."""
    lm = tiny_model("gpt2")
    enc = distinct(14)
    full = analysis(lm, enc, ["attention", "effective_attention"], options={"effective_causal": "full"})
    prefix = analysis(lm, enc, ["effective_attention"])
    mv = model_vectors(lm, enc.ids)
    t = independent_head_vectors(lm, 0, mv[0]["value"])
    expected = effective_attention(torch.tensor(full["attention"][0]), t)
    np.testing.assert_allclose(full["effective_attention"][0], expected.numpy(), atol=1e-9)
    assert np.abs(np.triu(full["effective_attention"], 1)).max() > 1e-6
    assert np.all(np.triu(prefix["effective_attention"], 1) == 0)
