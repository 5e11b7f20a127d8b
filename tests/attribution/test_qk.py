"""Issue 33: ``Session.attend`` — one head's pre-softmax score split exactly over what wrote the query's and the
key's residual states (components, source tokens): complete, equal to an independent computation from the raw
weights (GPT-2), and equal to the model's own scores up to each row's softmax constant."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.attribution.qk import attend, components
from normviz.core.errors import NormvizError, NotApplicableError

from ..helpers import tiny

ARCHS = ["llama", "llama_bias", "qwen2", "gpt2"]
# the model's own score vs ours: Llama-family RMSNorm rounds through float32 even in a float64 model
MODEL_TOL = {"llama": 1e-6, "llama_bias": 1e-6, "qwen2": 1e-6, "gpt2": 1e-10}
# the token route vs the components: the components are the model's own writes, the token route carries each
# earlier layer's formula (its norms in float64, α's rows summing to 1). The model's RMSNorm casts its input to
# float32 and its eager softmax is float32 (α's rows sum to 1 only to ~1e-7, which llama_bias's b^V carries),
# so the two routes' states differ by float32 rounding, whose realisation follows the CPU's vector width
# (llama_bias: 1.5e-6 on an AVX2 machine, 7e-7 with ATEN_CPU_CAPABILITY=default; both in float64: 3e-15).
# 2e-6 as the other Llama-family comparisons with a propagation (test_direct, test_graph, test_adjoint).
TOKEN_TOL = {"llama": 2e-6, "llama_bias": 2e-6, "qwen2": 2e-6, "gpt2": 1e-10}


def _session(lm, n=9, seed=1):
    return normviz.Session.from_encoded(lm, [tiny.encoded(n=n, seed=seed)])[0]


@pytest.mark.parametrize("arch", ARCHS)
def test_components_sum_to_the_layer_input(head_model, arch):
    lm = head_model(arch)
    s = _session(lm)
    views = s.layers()
    for layer in range(lm.n_layers):
        _, parts = components(views, layer)
        x = views[layer].rec.x
        assert torch.allclose(parts.sum(0), x, rtol=0, atol=1e-12 * float(x.abs().max()))


@pytest.mark.parametrize("arch", ARCHS)
def test_parts_sum_to_the_score_and_match_the_model_up_to_a_row_constant(head_model, arch):
    lm = head_model(arch)
    s = _session(lm)
    n = len(s.tokens)
    i = n - 2
    for layer in range(lm.n_layers):
        alpha = s.layers()[layer].rec.attention()
        for head in (0, lm.n_heads - 1):
            got = [attend(s, layer, head, query=i, key=j, by_token=True) for j in range(i + 1)]
            for a in got:
                scale = max(1.0, abs(a.total))
                assert a.by_component.shape == (len(a.components),) * 2
                assert abs(a.by_component.sum() - a.total) <= 1e-10 * scale
                # the token split carries the same state by another route (the exact propagation)
                assert abs(a.by_token_full.sum() - a.total) <= TOKEN_TOL[arch] * scale
                assert abs(a.model_score - a.total) <= MODEL_TOL[arch] * scale
            scores = np.array([a.total for a in got])
            log_alpha = np.log(alpha[head, i, : i + 1].double().numpy())
            shift = log_alpha - scores  # the row's log-partition function, the same for every key
            assert np.ptp(shift) <= 10 * MODEL_TOL[arch] * max(1.0, np.abs(scores).max())


def test_gpt2_split_equals_a_computation_from_the_raw_weights(head_model):
    """q_i(a) = (γ⊙C(x_i(a))/s_i) W_Q, k_j(b) likewise, constant βW + b: c·⟨q_i(a), k_j(b)⟩ from the modules' own
    weights, without the layer's code."""
    lm = head_model("gpt2")
    s = _session(lm)
    views = s.layers()
    layer, head, i, j = 1, 1, 7, 4
    names, parts = components(views, layer)
    block = lm.model.h[layer]
    ln, W, b = block.ln_1, block.attn.c_attn.weight, block.attn.c_attn.bias  # Conv1D: [d, 3d]
    d = W.shape[0]
    dh = d // lm.n_heads
    x = views[layer].rec.x
    sd = torch.sqrt(x.var(-1, unbiased=False) + ln.eps)

    def lin(v, pos):
        return (v - v.mean(-1, keepdim=True)) * ln.weight / sd[pos]

    cols_q = slice(head * dh, (head + 1) * dh)
    cols_k = slice(d + head * dh, d + (head + 1) * dh)
    q = torch.stack([lin(p[i], i) @ W[:, cols_q] for p in parts] + [ln.bias @ W[:, cols_q] + b[cols_q]])
    k = torch.stack([lin(p[j], j) @ W[:, cols_k] for p in parts] + [ln.bias @ W[:, cols_k] + b[cols_k]])
    want = (q @ k.T / dh**0.5).numpy()
    got = attend(s, layer, head, query=i, key=j)
    assert got.components == names + ["constant"]
    np.testing.assert_allclose(got.by_component, want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_component_names_follow_the_layers(head_model):
    lm = head_model("llama")
    s = _session(lm)
    a = attend(s, 1, 0, query=5, key=2)
    H = lm.n_heads
    assert a.components[0] == "embedding" and a.components[-1] == "constant"
    assert a.components[1 : H + 1] == [f"L0.H{h}" for h in range(H)]
    assert a.components[H + 1 : H + 3] == ["L0.attn bias", "L0.FF"]
    top = a.top_pairs(3)
    assert len(top) == 3 and abs(top[0][2]) >= abs(top[1][2]) >= abs(top[2][2])


def test_clear_errors(head_model):
    lm = head_model("llama")
    s = _session(lm)
    with pytest.raises(NormvizError, match="causal"):
        attend(s, 0, 0, query=2, key=5)
    with pytest.raises(NormvizError, match="head"):
        attend(s, 0, lm.n_heads, query=2, key=1)
    with pytest.raises(NormvizError, match="layer"):
        attend(s, lm.n_layers, 0)
    with pytest.raises(NormvizError, match="by_token"):
        attend(s, 0, 0, query=3, key=1).top_pairs(by="token")
    bert = head_model("bert")
    with pytest.raises(NotApplicableError, match="pre-LN"):
        attend(_session(bert), 0, 0, query=3, key=1)


def test_session_attend_delegates(head_model):
    lm = head_model("qwen2")
    s = _session(lm)
    a, b = s.attend(1, 1, query=6, key=3), attend(s, 1, 1, query=6, key=3)
    np.testing.assert_array_equal(a.by_component, b.by_component)


def test_smollm2_float32(smollm2):
    """The embedded Llama (float32, GQA, RoPE): complete to 1e-4 of the score's scale, the model's own score
    and α's row constant likewise; the token split carries the same score."""
    s = normviz.Session(smollm2, "The capital of France is")
    i = len(s.tokens) - 1
    layer, head = 20, 4
    got = [attend(s, layer, head, query=i, key=j, by_token=(j == 3)) for j in range(i + 1)]
    scale = max(1.0, max(abs(a.total) for a in got))
    for a in got:
        assert abs(a.by_component.sum() - a.total) <= 1e-4 * scale
        assert abs(a.model_score - a.total) <= 1e-4 * scale
    assert abs(got[3].by_token_full.sum() - got[3].total) <= 1e-4 * scale
    assert got[3].by_token.shape == (i + 1, i + 1)
    alpha = s.layers()[layer].rec.attention()[head, i, : i + 1].double().numpy()
    shift = np.log(alpha) - np.array([a.total for a in got])
    assert np.ptp(shift) <= 1e-4 * scale


def test_grouped_sums_to_the_score(head_model):
    a = attend(_session(head_model("gpt2")), 1, 0, query=6, key=2)
    for by, size in (("block", 2 + 2 * 1), ("layer", 2 + 1)):
        labels, m = a.grouped(by)
        assert len(labels) == size and m.shape == (size, size)
        assert abs(m.sum() - a.total) <= 1e-12 * max(1.0, abs(a.total))
    with pytest.raises(NormvizError, match="grouped"):
        a.grouped("head")
