"""Issue 31: attention knockout and head ablation (normviz.attribution.knockout, batched through the attention
interface) equal brute-force interventions written here independently — one intervention per pass, knockout by
a 4D additive attention mask given to the model's forward, head ablation by a forward pre-hook on the output
projection W^O — to 1e-10 on tiny float64 models; and their cost checks refuse before anything runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.core.errors import NormvizError, TooCostlyError

from ..helpers import tiny

ARCHS = ["llama", "qwen2", "gpt2", "bert"]
TOL = 1e-10
# where each architecture keeps its layers and its output projection W^O (written here, not read from normviz)
LAYERS = {"llama": "model.layers", "qwen2": "model.layers", "gpt2": "transformer.h", "bert": "bert.encoder.layer"}
W_O = {
    "llama": "self_attn.o_proj",
    "qwen2": "self_attn.o_proj",
    "gpt2": "attn.c_proj",
    "bert": "attention.output.dense",
}


def _get(module, path):
    for part in path.split("."):
        module = getattr(module, part)
    return module


def _session(lm, enc, options=None):
    return normviz.Session.from_encoded(lm, [enc], options=options)[0]


def _score(logits, token, foil):
    return float(logits[token] - (logits[foil] if foil is not None else 0.0))


def _logits(hm, ids, i, mask=None):
    with torch.no_grad():
        kwargs = {} if mask is None else {"attention_mask": mask}
        return hm(input_ids=torch.tensor([ids]), **kwargs).logits[0, i].to(torch.float64)


def _reference_knockout(lm, arch, ids, i, token, foil):
    """One pass per source token j with a 4D mask: causal part (decoders) + −∞ on every edge (r, j), r ≠ j."""
    hm, n = lm.head_model, len(ids)
    base = torch.zeros((n, n), dtype=torch.float64)
    if arch != "bert":
        base = torch.triu(torch.full((n, n), float("-inf"), dtype=torch.float64), diagonal=1)
    total = _score(_logits(hm, ids, i), token, foil)
    out = []
    for j in range(n):
        m = base.clone()
        for r in range(n):
            if r != j:
                m[r, j] = float("-inf")
        out.append(total - _score(_logits(hm, ids, i, m[None, None]), token, foil))
    return np.array(out)


def _reference_heads(lm, arch, ids, i, token, foil, means=None):
    """One pass per head (l, h): a pre-hook on layer l's W^O sets its input's columns of head h to 0 (or the
    mean)."""
    hm = lm.head_model
    layers = _get(hm, LAYERS[arch])
    H = hm.config.num_attention_heads
    dh = hm.config.hidden_size // H
    total = _score(_logits(hm, ids, i), token, foil)
    out = np.empty((len(layers), H))
    for layer_index, layer in enumerate(layers):
        for h in range(H):

            def pre(module, args, h=h, layer_index=layer_index):
                x = args[0].clone()
                x[..., h * dh : (h + 1) * dh] = 0.0 if means is None else torch.as_tensor(means[layer_index, h])
                return (x,) + tuple(args[1:])

            handle = _get(layer, W_O[arch]).register_forward_pre_hook(pre)
            try:
                out[layer_index, h] = total - _score(_logits(hm, ids, i), token, foil)
            finally:
                handle.remove()
    return out


def _reference_means(lm, arch, encs):
    """Each head's W^O input averaged over every position of the texts (a pre-hook that records)."""
    hm = lm.head_model
    layers = _get(hm, LAYERS[arch])
    H = hm.config.num_attention_heads
    sums, count = [0.0] * len(layers), 0

    def recorder(index):
        def pre(module, args):
            sums[index] = sums[index] + args[0][0].to(torch.float64).sum(0)

        return pre

    handles = [_get(layer, W_O[arch]).register_forward_pre_hook(recorder(k)) for k, layer in enumerate(layers)]
    try:
        for enc in encs:
            _logits(hm, enc.ids, 0)
            count += len(enc.ids)
    finally:
        for h in handles:
            h.remove()
    return torch.stack([s.reshape(H, -1) for s in sums]).numpy() / count


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("token,foil,position", [(None, None, -1), (5, 11, 4)])
def test_knockout_equals_one_masked_pass_per_token(head_model, arch, token, foil, position):
    lm = head_model(arch)
    enc = tiny.encoded(n=7, seed=3)
    # a batch of 3 copies per pass: the chunks must not change the numbers
    s = _session(lm, enc, {"intervention_batch_tokens": 3 * len(enc.ids)})
    k = s.knockout(token=token, foil=foil, position=position)
    i = position % len(enc.ids)
    ref = _reference_knockout(lm, arch, enc.ids, i, k.token, foil)
    assert k.delta.shape == (len(enc.ids),)
    assert np.abs(k.delta - ref).max() <= TOL, (k.delta, ref)
    assert k.total == pytest.approx(_score(_logits(lm.head_model, enc.ids, i), k.token, foil), abs=TOL)
    assert k.passes == 1 + 3  # the unchanged pass, then ceil(7 / 3) batched passes
    assert np.abs(ref).max() > 1e-3  # the interventions change something (the test could fail)
    if arch != "bert":  # causal: nothing after the position reads back into it
        assert np.all(np.abs(k.delta[i:]) <= TOL)


@pytest.mark.parametrize("arch", ARCHS)
def test_zero_ablation_equals_one_hooked_pass_per_head(head_model, arch):
    lm = head_model(arch)
    enc = tiny.encoded(n=6, seed=4)
    s = _session(lm, enc, {"intervention_batch_tokens": 3 * len(enc.ids)})
    a = s.ablate_heads(token=7, foil=13, position=3)
    ref = _reference_heads(lm, arch, enc.ids, 3, a.token, 13)
    assert a.delta.shape == (lm.n_layers, lm.n_heads)
    assert np.abs(a.delta - ref).max() <= TOL, (a.delta, ref)
    assert np.abs(ref).max() > 1e-3
    assert a.kind == "head zero ablation"


@pytest.mark.parametrize("arch", ["llama", "bert"])
def test_mean_ablation_equals_hooked_passes_with_the_corpus_mean(head_model, arch):
    lm = head_model(arch)
    corpus = [tiny.encoded(n=5, seed=7), tiny.encoded(n=8, seed=8)]
    means = normviz.attribution.knockout.head_means_of(lm, corpus)
    ref_means = _reference_means(lm, arch, corpus)
    assert np.abs(means - ref_means).max() <= TOL
    enc = tiny.encoded(n=6, seed=4)
    a = _session(lm, enc).ablate_heads(position=-1, means=means)
    ref = _reference_heads(lm, arch, enc.ids, len(enc.ids) - 1, a.token, None, means=ref_means)
    assert np.abs(a.delta - ref).max() <= TOL
    assert a.kind == "head mean ablation"
    with pytest.raises(NormvizError, match="means must be"):
        _session(lm, enc).ablate_heads(means=means[:, :1])


def test_costly_interventions_are_refused_before_any_pass(head_model):
    lm = head_model("llama")
    s = _session(lm, tiny.encoded(n=7, seed=3), {"knockout_budget_s": 1e-12, "head_ablation_budget_s": 1e-12})
    passes = []
    handle = lm.model.register_forward_pre_hook(lambda *a: passes.append(1))
    try:
        with pytest.raises(TooCostlyError, match="knockout_budget_s"):
            s.knockout()
        with pytest.raises(TooCostlyError, match="head_ablation_budget_s"):
            s.ablate_heads()
        assert passes == []
        _session(lm, tiny.encoded(n=7, seed=3), {"knockout_budget_s": 1e6}).knockout()
        assert len(passes) == 2  # within budget: the unchanged pass and one batch of 7 copies
    finally:
        handle.remove()
    # the budgets are registered like every costly family's, so the app's NORMVIZ_COST_BUDGET reaches them
    assert {"knockout_budget_s", "head_ablation_budget_s"} <= set(normviz.methods.budget_options())


def test_a_model_without_a_head_measures_how_far_the_state_moves():
    lm = tiny.build("bert")
    enc = tiny.encoded(n=6, seed=2)
    k = _session(lm, enc).knockout(position=0)
    assert k.measure == "state" and k.token is None
    with torch.no_grad():
        base = lm.model(input_ids=torch.tensor([enc.ids])).last_hidden_state[0, 0]
        m = torch.zeros((1, 1, 6, 6), dtype=torch.float64)
        m[0, 0, 1:, 0] = float("-inf")  # block token 0's edges into positions 1..5
        moved = lm.model(input_ids=torch.tensor([enc.ids]), attention_mask=m).last_hidden_state[0, 0]
    assert k.delta[0] == pytest.approx(float((moved - base).norm()), abs=TOL)
    with pytest.raises(normviz.attribution.NoHeadError):
        _session(lm, enc).knockout(token=5)
