"""Issue 41: AttnLRP (normviz.attribution.attn_lrp), Achtibat et al. 2024, by Gradient × Input with modified
backward rules over the model's own forward pass.

(1) Conservation: the token relevances, the relevance absorbed by the biases (and the readout) and the relevance
the softmax linearisations absorb add up to the logit difference (every other rule is exactly conservative), on
tiny float64 Llama (with and without biases), Qwen2 and GPT-2; the softmax's share is not zero, so the accounting
is not trivially satisfied. (2) The softmax rule is on: AttnLRP's token relevance differs from CP-LRP's (attention
frozen). (3) The rule equals the paper's closed form on one softmax, and the attention wrapper equals an explicit
layer-wise propagation (uniform rule on A·V and q·kᵀ, the softmax rule between) written out with divisions."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from transformers.models.gpt2.modeling_gpt2 import eager_attention_forward

import normviz
from normviz.attribution import attn_lrp as al
from normviz.attribution.lrp import cp_lrp

from ..helpers import tiny

TOKEN, FOIL = 7, 13
# Σ tokens + biases + softmax = F to this share of max(1, Σ |terms|): the tiny Llama-style models run their norms
# and softmax in float32 (measured residue ≤ 5e-7 absolute); GPT-2's runs in float64 (1e-16)
TOLERANCE = 1e-5


def _session(arch):
    lm = tiny.build_with_head(arch)
    return lm, normviz.Session.from_encoded(lm, [tiny.encoded(n=7, seed=3)])[0]


@pytest.mark.parametrize("arch", ["llama", "llama_bias", "qwen2", "gpt2"])
def test_relevance_is_conserved_with_biases_and_softmax(arch):
    lm, s = _session(arch)
    r = al.attn_lrp(s, token=TOKEN, foil=FOIL)
    assert r.tokens.shape == (7,) and r.heads.shape == (lm.n_layers, lm.n_heads) and "AttnLRP" in r.name
    terms = np.abs(r.tokens).sum() + abs(r.biases) + abs(r.softmax)
    assert abs(r.tokens.sum() + r.biases + r.softmax - r.total) <= TOLERANCE * max(1.0, terms)
    assert abs(r.softmax) > 1e-3  # the softmax does absorb relevance: the identity is not 0 = 0
    assert r.gap == pytest.approx(r.total - r.tokens.sum(), abs=1e-12)
    if arch == "llama":
        assert r.biases == 0.0  # no bias anywhere: the gap is the softmax's alone
    else:
        assert abs(r.biases) > 1e-3


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_differs_from_cp_lrp(arch):
    _, s = _session(arch)
    a, c = al.attn_lrp(s, TOKEN, FOIL), cp_lrp(s, TOKEN, FOIL)
    scale = max(1.0, float(np.abs(c.tokens).max()))
    assert np.abs(a.tokens - c.tokens).max() > 0.05 * scale
    assert np.abs(a.heads - c.heads).max() > 1e-3


def test_softmax_rule_is_the_papers_closed_form():
    """x ⊙ ∂/∂x ⟨softmax(x), R / s⟩ (Gradient × Input through the softmax, upstream relevance R) is the paper's
    R_in = x ⊙ (R − s Σ R), per row; and the rule is not conservative (Σ R_in ≠ Σ R)."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3, 5, generator=g, dtype=torch.float64, requires_grad=True)
    s = torch.softmax(z, -1)
    relevance = torch.randn(3, 5, generator=g, dtype=torch.float64)
    (s * (relevance / s).detach()).sum().backward()
    got = (z * z.grad).detach()
    want = z.detach() * (relevance - s.detach() * relevance.sum(-1, keepdim=True))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(al.softmax_rule(z.detach(), relevance), want, rtol=0, atol=1e-12)
    assert (got.sum(-1) - relevance.sum(-1)).abs().min() > 1e-3


def test_attention_wrapper_is_explicit_lrp():
    """One attention (4 heads, 6 tokens, no mask) through the wrapper, F = ⟨out, w⟩: the relevance q ⊙ ∂F/∂q,
    k ⊙ ∂F/∂k, v ⊙ ∂F/∂v equals the explicit propagation R_out = out ⊙ w → (uniform on A·V) R_A, R_V → (softmax
    rule) R_z → (uniform on q·kᵀ) R_q, R_k; and the absorbed relevance recorded is Σ R_A − Σ R_z."""
    g = torch.Generator().manual_seed(1)
    B, H, n, d = 1, 4, 6, 3
    q, k, v = (torch.randn(B, H, n, d, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    w = torch.randn(B, n, H, d, generator=g, dtype=torch.float64)
    module = torch.nn.Module().eval()
    state = {"layer_of": {id(module): 0}, 0: torch.ones(1, H, dtype=torch.float64), "softmax": [], "unseen": False}
    scale = d**-0.5
    out, _ = al._attention(eager_attention_forward, state, module, q, k, v, None, scaling=scale)
    (out * w).sum().backward()
    got = [(x * x.grad).detach() for x in (q, k, v)]

    q0, k0, v0 = q.detach(), k.detach(), v.detach()
    z = scale * q0 @ k0.transpose(-1, -2)  # [B, H, n, n]
    a = torch.softmax(z, -1)
    o = a @ v0  # [B, H, n, d]
    r_out = o * w.transpose(1, 2)
    share = a[..., :, :, None] * v0[..., None, :, :] / o[..., :, None, :]  # [B, H, i, j, d]: A_ij v_jd / o_id
    r_a = 0.5 * (share * r_out[..., :, None, :]).sum(-1)
    r_v = 0.5 * (share * r_out[..., :, None, :]).sum(-3)
    r_z = al.softmax_rule(z, r_a)
    part = scale * q0[..., :, None, :] * k0[..., None, :, :] / z[..., None]  # [B, H, i, j, d]: s q_id k_jd / z_ij
    r_q = 0.5 * (part * r_z[..., None]).sum(-2)
    r_k = 0.5 * (part * r_z[..., None]).sum(-3)
    for x, want in zip(got, (r_q, r_k, r_v)):
        torch.testing.assert_close(x, want, rtol=0, atol=1e-10)
    assert state["softmax"] == [pytest.approx(float(r_a.sum() - r_z.sum()), abs=1e-10)]
    assert abs(float(r_a.sum() - r_z.sum())) > 1e-3


def test_identity_rule_on_an_activation():
    """y = SiLU(x) through the hook: the same value, and x ⊙ ∂F/∂x = y ⊙ ∂F/∂y (relevance passes unchanged)."""
    act = torch.nn.SiLU()
    seen: set = set()
    handle = act.register_forward_hook(functools.partial(al._identity_rule, seen, 0))
    x = torch.tensor([-2.0, -0.5, 0.0, 0.7, 3.0], dtype=torch.float64, requires_grad=True)
    y = act(x)
    handle.remove()
    upstream = torch.tensor([1.0, -2.0, 3.0, 0.5, -1.0], dtype=torch.float64)
    (y * upstream).sum().backward()
    torch.testing.assert_close(y.detach(), torch.nn.functional.silu(x.detach()))
    torch.testing.assert_close((x * x.grad).detach(), y.detach() * upstream, rtol=0, atol=1e-14)
    assert seen == {0}
