"""Issue 41: attribution patching (normviz.attribution.atp) equals an autograd computation written here
independently — a factor k on each head's slice of W^O's input set by a forward pre-hook on the output projection,
∂F/∂k by autograd — and AtP*'s QK fix equals recomputing the last layer's softmax from its scores moved by their
first-order change (forward-mode through the same hook), on tiny float64 models."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.autograd import forward_ad

import normviz
from normviz.attribution.knockout import head_means_of
from normviz.core.errors import NormvizError

from ..helpers import tiny
from .test_knockout import LAYERS, W_O, _get

TOL = 1e-6


def _session(lm, enc, options=None):
    return normviz.Session.from_encoded(lm, [enc], options=options)[0]


def _dims(hm):
    H = hm.config.num_attention_heads
    return H, hm.config.hidden_size // H


def _hooked(lm, arch, factors, means=None):
    """Pre-hooks on every W^O: head h's slice times factors[l][h] (plus (1 − factor) · mean); their handles."""
    hm = lm.head_model
    _, dh = _dims(hm)
    handles = []
    for l, layer in enumerate(_get(hm, LAYERS[arch])):

        def pre(module, args, l=l):
            k = factors[l].repeat_interleave(dh).to(args[0].dtype)  # a float32 model stays float32
            x = args[0] * k
            if means is not None:
                x = x + (1 - k) * torch.as_tensor(means[l]).reshape(-1).to(args[0].dtype)
            return (x,) + tuple(args[1:])

        handles.append(_get(layer, W_O[arch]).register_forward_pre_hook(pre))
    return handles


def _score(logits, token, foil):
    return logits[token] - (logits[foil] if foil is not None else 0.0)


def _reference_atp(lm, arch, ids, i, token, foil, means=None):
    """∂F/∂k_lh at k = 1 by autograd through hooks on W^O."""
    hm = lm.head_model
    H, _ = _dims(hm)
    L = len(_get(hm, LAYERS[arch]))
    factors = [torch.ones(H, dtype=torch.float64, requires_grad=True) for _ in range(L)]
    handles = _hooked(lm, arch, factors, means)
    try:
        with torch.enable_grad():
            logits = hm(input_ids=torch.tensor([ids])).logits[0, i].to(torch.float64)
            _score(logits, token, foil).backward()
    finally:
        for h in handles:
            h.remove()
    return torch.stack([f.grad for f in factors]).numpy()


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
@pytest.mark.parametrize("token,foil,position", [(None, None, -1), (7, 13, 4)])
def test_atp_equals_autograd_through_hooks_on_w_o(head_model, arch, token, foil, position):
    lm = head_model(arch)
    enc = tiny.encoded(n=7, seed=3)
    a = _session(lm, enc).atp(token=token, foil=foil, position=position)
    ref = _reference_atp(lm, arch, enc.ids, a.position, a.token, foil)
    assert a.delta.shape == (lm.n_layers, lm.n_heads) and a.passes == 1
    assert np.abs(ref).max() > 1e-2  # the estimate is not trivially 0
    assert np.abs(a.delta - ref).max() <= TOL * max(1.0, np.abs(ref).max()), (a.delta, ref)
    assert a.kind == "AtP (zero ablation)" and a.linear is None


def test_mean_atp_equals_autograd_with_the_corpus_mean(head_model):
    lm = head_model("llama")
    means = head_means_of(lm, [tiny.encoded(n=5, seed=7), tiny.encoded(n=8, seed=8)])
    enc = tiny.encoded(n=6, seed=4)
    a = _session(lm, enc).atp(token=5, foil=9, ablation="mean", means=means)
    ref = _reference_atp(lm, "llama", enc.ids, len(enc.ids) - 1, 5, 9, means=means)
    assert np.abs(a.delta - ref).max() <= TOL * max(1.0, np.abs(ref).max())
    zero = _session(lm, enc).atp(token=5, foil=9).delta
    assert np.abs(zero - a.delta).max() > 1e-3  # the mean changes the estimate
    with pytest.raises(NormvizError, match="mean ablation needs"):
        _session(lm, enc).atp(ablation="mean")
    with pytest.raises(NormvizError, match="means must be"):
        _session(lm, enc).atp(ablation="mean", means=means[:, :1])
    with pytest.raises(NormvizError, match="ablation must be"):
        _session(lm, enc).atp(ablation="resample")


def test_atp_is_first_order_in_the_ablated_amount(head_model):
    """Independent of autograd: the real loss of scaling a head by 1 ∓ ε is ±ε · delta_AtP + O(ε²) (central
    differences; ε = 1e-3 because the model's softmax runs in float32)."""
    lm = head_model("llama")
    enc = tiny.encoded(n=7, seed=3)
    a = _session(lm, enc).atp(token=7, foil=13, position=4)
    hm, eps = lm.head_model, 1e-3
    H, _ = _dims(hm)
    for l, h in [(0, 1), (1, 2)]:
        scores = []
        for sign in (1, -1):
            factors = [torch.ones(H, dtype=torch.float64) for _ in range(lm.n_layers)]
            factors[l][h] = 1 - sign * eps
            handles = _hooked(lm, "llama", factors)
            try:
                with torch.no_grad():
                    scores.append(float(_score(hm(input_ids=torch.tensor([enc.ids])).logits[0, 4].double(), 7, 13)))
            finally:
                for x in handles:
                    x.remove()
        assert (scores[1] - scores[0]) / (2 * eps) == pytest.approx(a.delta[l, h], rel=1e-3, abs=1e-4)


def test_qk_fix_equals_the_last_layers_softmax_recomputed(head_model):
    """Two layers: for a head of layer 0, AtP − AtP* = ⟨∂F/∂A¹, softmax(s¹ + Δs¹) − A¹ − ΔA¹_linear⟩ summed over
    layer 1's heads, Δs¹ the first-order change of layer 1's scores (dA¹/A¹ by forward-mode through a hook on W^O:
    the softmax reads Δs up to a row's constant); layer 1's heads have no later pattern, so there AtP* = AtP."""
    lm = head_model("llama")
    hm = lm.head_model
    H, _ = _dims(hm)
    enc = tiny.encoded(n=7, seed=3)
    i, token, foil = 6, 7, 13
    a = _session(lm, enc).atp(token=token, foil=foil, position=i, qk_fix=True)
    assert a.kind == "AtP* (zero ablation)" and a.linear is not None
    np.testing.assert_allclose(a.delta[1], a.linear[1], atol=1e-12)
    ids = torch.tensor([enc.ids])
    # ∂F/∂A¹ by autograd (a factor on layer 0's W^O input makes layer 1's pattern require a gradient)
    ones = [torch.ones(H, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    handles = _hooked(lm, "llama", ones)
    try:
        with torch.enable_grad():
            out = hm(input_ids=ids, output_attentions=True)
            a1 = out.attentions[1]
            a1.retain_grad()
            _score(out.logits[0, i].double(), token, foil).backward()
    finally:
        for x in handles:
            x.remove()
    g1, a1 = a1.grad[0].double(), a1.detach()[0].double()
    fixed = []
    for h in range(H):
        # the first-order change of A¹ when head (0, h) is ablated: forward-mode through the hook (k: 1 → 0)
        factors = [torch.ones(H, dtype=torch.float64) for _ in range(2)]
        tangent = torch.zeros(H, dtype=torch.float64)
        tangent[h] = -1.0
        with torch.no_grad(), forward_ad.dual_level():
            factors[0] = forward_ad.make_dual(factors[0], tangent)
            handles = _hooked(lm, "llama", factors)
            try:
                da = forward_ad.unpack_dual(hm(input_ids=ids, output_attentions=True).attentions[1]).tangent
            finally:
                for x in handles:
                    x.remove()
        da = da[0].double()
        live = a1 > 0
        ds = torch.where(live, da / torch.where(live, a1, 1.0), 0.0)  # Δs − (each row's constant)
        new = torch.softmax(torch.where(live, torch.log(a1) + ds, float("-inf")), -1) * a1.sum(-1, keepdim=True)
        fixed.append(float((g1 * (new - a1 - da)).sum()))
    gap = a.linear[0] - a.delta[0]
    assert np.abs(gap).max() > 1e-2  # the fix changes something here
    np.testing.assert_allclose(gap, fixed, atol=1e-6 * max(1.0, np.abs(fixed).max()))


def test_qk_fix_is_refused_over_the_head_ablation_budget(head_model):
    lm = head_model("llama")
    s = _session(lm, tiny.encoded(n=7, seed=3), {"head_ablation_budget_s": 1e-12})
    s.atp()  # plain AtP: one pass, no budget
    with pytest.raises(normviz.core.errors.TooCostlyError, match="head_ablation_budget_s"):
        s.atp(qk_fix=True)


def test_atp_needs_an_lm_head():
    lm = tiny.build("llama")
    with pytest.raises(NormvizError, match="no LM head"):
        _session(lm, tiny.encoded(n=5, seed=1)).atp()


def _reference_eap_ig(lm, arch, ids, i, token, foil, steps):
    """The midpoint rule by hand: every head's W^O slice times t (hooks), ∂F/∂factor by autograd, averaged."""
    hm = lm.head_model
    H, _ = _dims(hm)
    L = len(_get(hm, LAYERS[arch]))
    total = np.zeros((L, H))
    for k in range(steps):
        t = (k + 0.5) / steps
        factors = [torch.full((H,), t, dtype=torch.float64, requires_grad=True) for _ in range(L)]
        handles = _hooked(lm, arch, factors)
        try:
            with torch.enable_grad():
                _score(hm(input_ids=torch.tensor([ids])).logits[0, i].double(), token, foil).backward()
        finally:
            for x in handles:
                x.remove()
        total += torch.stack([f.grad for f in factors]).numpy() / steps
    return total


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_eap_ig_equals_the_midpoint_rule_through_hooks_and_its_gap_shrinks(head_model, arch):
    lm = head_model(arch)
    enc = tiny.encoded(n=7, seed=3)
    s = _session(lm, enc, {"intervention_batch_tokens": 3 * len(enc.ids)})  # 8 steps in 3 batched passes
    e = s.eap_ig(token=7, foil=13, position=4, steps=8)
    ref = _reference_eap_ig(lm, arch, enc.ids, 4, 7, 13, 8)
    assert np.abs(e.delta - ref).max() <= TOL * max(1.0, np.abs(ref).max())
    # the gap: F(all kept) − F(all ablated) − Σ delta, F(all ablated) by hooks with every factor 0
    zeros = [torch.zeros(lm.n_heads, dtype=torch.float64) for _ in range(lm.n_layers)]
    handles = _hooked(lm, arch, zeros)
    try:
        with torch.no_grad():
            f0 = float(_score(lm.head_model(input_ids=torch.tensor([enc.ids])).logits[0, 4].double(), 7, 13))
    finally:
        for x in handles:
            x.remove()
    assert e.ablated == pytest.approx(f0, abs=1e-9)
    assert e.gap == pytest.approx(e.total - f0 - ref.sum(), abs=1e-6)
    fine = s.eap_ig(token=7, foil=13, position=4, steps=64)
    assert abs(fine.gap) < abs(e.gap) and abs(fine.gap) <= 0.02 * abs(e.total - f0)
    assert e.passes == 3 + 1 and fine.passes == -(-64 // 3) + 1
