"""Effective attention (Brunner et al. 2020) and ALTI (Ferrando et al. 2022)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from normviz.analysis import analyze_encoded
from normviz.decompose import LayerDecomposition
from normviz.methods.alti import alti_layer
from normviz.methods.effective import effective_attention, effective_attention_causal
from normviz.record import record
from normviz.tokens import pad_batch

from normviz.tokens import Encoded

from .tiny import ARCHS, encoded, tiny_model


def distinct(n: int) -> Encoded:
    """n different tokens. (Repeated tokens have equal value vectors at layer 0 of a model without position
    embeddings in the residual stream (Llama), which is a genuine rank deficiency of T.)"""
    ids = list(range(11, 11 + 5 * n, 5))
    return Encoded(ids=ids, tokens=[f"t{i}" for i in ids], labels=[f"t{i}" for i in ids], special=[False] * n,
                   dropped=0)
from .vectors import independent_head_vectors, model_vectors


def contexts(lm, enc, chunk_bytes=4096):
    ids, mask = pad_batch([enc])
    recs = record(lm, ids, mask)[0]
    return [LayerDecomposition(r, lm.layer_params(i), lm.spec.placement, chunk_bytes=chunk_bytes)
            for i, r in enumerate(recs)]


# ---------------------------------------------------------------- effective attention
def test_effective_attention_by_hand():
    """Three tokens, one head, T of rank 1: T = [[1,0],[1,0],[0,0]] has column space span(1,1,0)/√2,
    so α = [.5,.3,.2] becomes its projection ((.5+.3)/2)·(1,1,0) = [.4,.4,0]; α·T = [.8,0] is unchanged."""
    t = torch.tensor([[[1., 0], [1, 0], [0, 0]]], dtype=torch.float64)
    alpha = torch.tensor([[[.5, .3, .2], [1, 0, 0], [0, 0, 1]]], dtype=torch.float64)
    out = effective_attention(alpha, t)
    np.testing.assert_allclose(out[0, 0], [.4, .4, 0], atol=1e-15)
    np.testing.assert_allclose(out[0, 1], [.5, .5, 0], atol=1e-15)
    np.testing.assert_allclose(out[0, 2], [0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(out @ t, alpha @ t, atol=1e-15)


def test_rank_tolerance_is_relative():
    """A singular value 1e-20 below a huge one is numerically zero; the same matrix scaled by 1e-30 gives the
    same answer (an absolute epsilon would call every singular value zero)."""
    t = torch.tensor([[[1., 0], [0, 1e-20], [0, 0]]], dtype=torch.float64)
    alpha = torch.tensor([[[.2, .3, .5]]], dtype=torch.float64).expand(1, 3, 3).contiguous()
    a = effective_attention(alpha, t)
    b = effective_attention(alpha, t * 1e-30)
    np.testing.assert_allclose(a, b, atol=1e-15)
    np.testing.assert_allclose(a[0, 0], [.2, 0, 0], atol=1e-15)


@pytest.mark.parametrize("arch", ARCHS)
def test_effective_attention_short_input_is_attention(arch):
    """n ≤ head size (8 in the tiny models): no left null space, effective = attention exactly."""
    lm = tiny_model(arch)
    a = analyze_encoded(lm, [distinct(8)], methods=["attention", "effective_attention"])[0]
    np.testing.assert_array_equal(a["effective_attention"], a["attention"])


@pytest.mark.parametrize("arch", ARCHS)
def test_effective_attention_long_input_changes_rows_not_output(arch):
    """n = 14 > head size 8: rows change, but α̃·T = α·T with T from the model's own value output."""
    lm = tiny_model(arch)
    enc = distinct(14)
    a = analyze_encoded(lm, [enc], methods=["attention", "effective_attention"])[0]
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


def test_repeated_tokens_without_position_in_values_are_unidentifiable():
    """Llama layer 0: two equal tokens have equal T rows, so attention can move between them freely:
    effective attention gives both the same weight even for n ≤ head size."""
    lm = tiny_model("llama")
    ids = [11, 12, 11, 13]
    enc = Encoded(ids=ids, tokens=[str(i) for i in ids], labels=[str(i) for i in ids], special=[False] * 4, dropped=0)
    a = analyze_encoded(lm, [enc], methods=["attention", "effective_attention"])[0]
    eff, att = a["effective_attention"][0], a["attention"][0]
    np.testing.assert_allclose(eff[:, 2:, 0], eff[:, 2:, 2], atol=1e-12)
    np.testing.assert_allclose(eff[:, 2:, 0] + eff[:, 2:, 2], att[:, 2:, 0] + att[:, 2:, 2], atol=1e-12)


def test_causal_rows_project_on_their_prefix():
    rng = np.random.default_rng(0)
    t = torch.tensor(rng.normal(size=(2, 7, 5)) @ rng.normal(size=(5, 9)) / 3)  # rank ≤ 5 ("head size" 5)
    alpha = torch.tensor(np.tril(rng.random((2, 7, 7))))
    alpha = alpha / alpha.sum(-1, keepdim=True)
    out = effective_attention_causal(alpha, t)
    for i in range(7):
        m = i + 1
        u, s, _ = np.linalg.svd(t[:, :m].numpy(), full_matrices=False)
        for h in range(2):
            r = int((s[h] > max(m, 9) * np.finfo(float).eps * s[h, 0]).sum())
            expected = alpha[h, i, :m].numpy() @ u[h, :, :r] @ u[h, :, :r].T
            np.testing.assert_allclose(out[h, i, :m], expected, atol=1e-12)
            assert np.all(out[h, i, m:].numpy() == 0)


# ---------------------------------------------------------------- ALTI

class _Ctx:
    """The minimum of a LayerDecomposition that alti_layer reads: given parts and bias."""

    def __init__(self, parts, bias):
        self.parts, self.bias = parts, bias
        self.n = parts.shape[0]
        self.dtype = self.acc = parts.dtype
        self.device = parts.device

    def row_chunks(self):
        yield slice(0, self.n)

    def attn_res_ln_vectors(self, rows):
        return self.parts[rows], self.bias[rows]


def test_alti_by_hand():
    """Row 0 with parts T(x_0) = (2,0), T(x_1) = (0,1), T(x_2) = (-1,0) and bias (0,0): y = (1,1), ‖y‖₁ = 2;
    ‖y − T(x_j)‖₁ = 2, 1, 3 → c = (0, 1, max(0, −1) = 0) → [0, 1, 0].
    Row 1 with parts (1,1), (1,0), (0,0) and bias (0,1): y = (2,2), ‖y‖₁ = 4; distances 2, 3, 4 → c = (2,1,0)
    → [2/3, 1/3, 0]. Row 2 with every part zero: c = 0 everywhere → the row stays 0."""
    parts = torch.tensor([[[2., 0], [0, 1], [-1, 0]],
                          [[1, 1], [1, 0], [0, 0]],
                          [[0, 0], [0, 0], [0, 0]]], dtype=torch.float64)
    bias = torch.tensor([[0., 0], [0, 1], [1, 1]], dtype=torch.float64)
    out = alti_layer(_Ctx(parts, bias))
    np.testing.assert_allclose(out, [[0, 1, 0], [2 / 3, 1 / 3, 0], [0, 0, 0]], atol=1e-15)


@pytest.mark.parametrize("arch", ARCHS)
def test_alti_against_the_models_own_normalised_vectors(arch):
    """y_i from a hook on the model's norm (not from our parts), T_i(x_j) our exact parts; the authors'
    formula c = max(0, ‖y‖₁ − ‖y − T‖₁) row-normalised; rollout_alti the plain product.
    Llama-family RMSNorm modules compute in float32 even in a float64 model, so their y is only float32-exact."""
    lm = tiny_model(arch)
    tol = 1e-9 if lm.spec.norm_kind == "layernorm" else 1e-5
    enc = encoded(n=9)
    a = analyze_encoded(lm, [enc], methods=["alti", "rollout_alti"], chunk_bytes=4096)[0]
    mv = model_vectors(lm, enc.ids)
    acc = np.eye(enc and len(enc.ids))
    for layer, (ctx, v) in enumerate(zip(contexts(lm, enc, chunk_bytes=10**9), mv)):
        parts, _ = ctx.attn_res_ln_vectors(slice(0, ctx.n))
        y = v["ln_out"]
        c = (y.abs().sum(-1)[:, None] - (y[:, None, :] - parts).abs().sum(-1)).clamp_min(0).numpy()
        expected = c / c.sum(-1, keepdims=True)
        np.testing.assert_allclose(a["alti"][layer], expected, rtol=tol, atol=tol * 1e-3)
        np.testing.assert_allclose(a["alti"][layer].sum(-1), 1, atol=1e-12)
        acc = expected @ acc
        np.testing.assert_allclose(a["rollout_alti"][layer], acc, rtol=tol, atol=tol * 1e-3)
        if lm.spec.placement == "pre":
            assert np.all(np.triu(a["alti"][layer], 1) == 0)
            assert np.all(np.triu(a["rollout_alti"][layer], 1) == 0)


def test_causal_mode_full_is_the_literal_formula():
    """effective_causal=full: decoders get α·U_rU_rᵀ with the whole T (weight may move to future tokens);
    the default keeps every row inside its prefix."""
    lm = tiny_model("gpt2")
    enc = distinct(14)
    full = analyze_encoded(lm, [enc], methods=["attention", "effective_attention"],
                           options={"effective_causal": "full"})[0]
    prefix = analyze_encoded(lm, [enc], methods=["effective_attention"])[0]
    mv = model_vectors(lm, enc.ids)
    t = independent_head_vectors(lm, 0, mv[0]["value"])
    expected = effective_attention(torch.tensor(full["attention"][0]), t)
    np.testing.assert_allclose(full["effective_attention"][0], expected.numpy(), atol=1e-9)
    assert np.abs(np.triu(full["effective_attention"], 1)).max() > 1e-6
    assert np.all(np.triu(prefix["effective_attention"], 1) == 0)
