"""Issue 19: predict, logit_lens and the direct parts of explain on tiny float64 models with their LM head,
each formula against an independent computation from the raw modules (tests/attribution/reference.py) and
the completeness identity against the model's own logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.core.errors import NormvizError, NotApplicableError

from ..helpers import tiny
from . import reference as ref

PRE = ["llama", "llama_bias", "qwen2", "gpt2"]
TOL = {"llama": 2e-6, "llama_bias": 2e-6, "qwen2": 2e-6, "gpt2": 1e-9}  # Llama's RMSNorm rounds through float32


def _session(lm, enc):
    return normviz.Session.from_encoded(lm, [enc])[0]


def _rel(a, b) -> float:
    return float(abs(a - b) / max(abs(b), 1e-30))


@pytest.mark.parametrize("arch", PRE)
def test_predict_and_lens_ride_the_one_pass(head_model, arch):
    lm = head_model(arch)
    enc = tiny.encoded(n=8, seed=2)
    s = _session(lm, enc)
    p = ref.run(lm.head_model, enc.ids)
    rows = []  # how many positions the LM head reads per call: only the ones asked for
    hook = lm.head_model.get_output_embeddings().register_forward_hook(lambda m, a, o: rows.append(a[0].shape[0]))
    for pos in (-1, 3):
        rows.clear()
        cands = s.predict(top=5, position=pos)
        lens = s.logit_lens(position=pos)
        assert rows == [1, lm.n_layers, 1]  # predict: 1 row; lens: L states through the norm + the final one
        real = p.logits[pos].to(torch.float64)
        want = torch.topk(real, 5).indices.tolist()
        assert [c.id for c in cands] == want
        probs = torch.softmax(real, -1)
        for c in cands:
            assert abs(c.logit - float(real[c.id])) <= 1e-9 * max(1.0, abs(c.logit))
            assert abs(c.prob - float(probs[c.id])) <= 1e-9
        assert all(a.prob >= b.prob for a, b in zip(cands, cands[1:]))
        L = lm.n_layers
        assert lens.shape == (L + 1, lm.head_model.config.vocab_size)
        fam = ref.family(lm.head_model)
        norm, head = ref._get(lm.head_model, ref.NAMES[fam][3]), ref._get(lm.head_model, ref.NAMES[fam][4])
        states = [p.x_in[0][pos]] + [o[pos] for o in p.out]
        for l, x in enumerate(states[:-1]):
            want_l = torch.log_softmax(head(norm(x[None]))[0], -1).numpy()
            assert np.abs(lens[l] - want_l).max() < 1e-9, (arch, l)
        assert np.abs(lens[L] - torch.log_softmax(real, -1).numpy()).max() < 1e-9
        assert np.allclose(np.exp(lens).sum(-1), 1.0, atol=1e-9)
    hook.remove()
    assert s.forward_passes == 1


@pytest.mark.parametrize("arch", PRE)
@pytest.mark.parametrize("foil", [None, 7])
def test_direct_parts_are_the_formulas_and_complete(head_model, arch, foil):
    lm = head_model(arch)
    enc = tiny.encoded(n=9, seed=4)
    s = _session(lm, enc)
    i = 6
    e = s.explain(token=None, foil=foil, position=i)
    p = ref.run(lm.head_model, enc.ids)
    real = p.logits[i].to(torch.float64)
    w = int(real.argmax())
    assert e.token == w and e.position == i
    total = float(real[w] - (real[foil] if foil is not None else 0.0))
    assert _rel(e.total, total) < 1e-12
    W = lm.head_model.get_output_embeddings().weight
    u = W[w] - (W[foil] if foil is not None else 0)
    L, H, n = lm.n_layers, lm.n_heads, len(enc.ids)
    assert e.heads.shape == (L, H, n) and e.attn_bias.shape == (L,) and e.ff.shape == (L,)
    # the formulas, from the raw modules
    heads = ref.head_terms(lm.head_model, p, i, u)
    assert np.abs(e.heads - heads).max() <= 1e-9 * np.abs(heads).max()
    assert np.abs(e.heads[:, :, i + 1 :]).max() == 0  # causal: no later source token
    N = lambda c: float(ref.final_norm(lm.head_model, p.final_in[i], c[None])[0] @ u)  # noqa: E731
    for l in range(L):
        _, _, _, b_o = ref.value_out(lm.head_model, l)
        assert abs(e.attn_bias[l] - (N(b_o) if b_o is not None else 0.0)) <= 1e-9 * max(1, abs(e.attn_bias[l]))
        assert abs(e.ff[l] - N(p.ff_out[l][i])) <= 1e-9 * max(1, abs(e.ff[l]))
    assert abs(e.embedding - N(p.x_in[0][i])) <= 1e-9 * max(1, abs(e.embedding))
    beta = ref.final_beta(lm.head_model)
    assert abs(e.final_bias - (float(beta @ u) if beta is not None else 0.0)) <= 1e-12 * max(1, abs(e.final_bias))
    if beta is None:
        assert e.final_bias == 0.0
    # completeness against the model's own logit
    parts = e.embedding + e.heads.sum() + e.attn_bias.sum() + e.ff.sum() + e.final_bias
    assert _rel(parts, total) < TOL[arch], (arch, parts, total)
    assert s.forward_passes == 1


def test_tokens_and_positions_are_checked(head_model):
    lm = head_model("gpt2")
    s = _session(lm, tiny.encoded(n=5))
    with pytest.raises(NormvizError, match="outside the text"):
        s.explain(position=5)
    with pytest.raises(NormvizError, match="outside the vocabulary"):
        s.explain(token=10_000)
    with pytest.raises(NormvizError, match="no tokenizer"):
        s.explain(token="hello")
    with pytest.raises(NormvizError, match="same token"):
        s.explain(token=5, foil=5)
    e = s.explain(token=np.int64(5), position=-2)
    assert e.token == 5 and e.position == 3 and e.foil is None
    assert s.predict(top=1)[0].id == s.explain().token


def test_post_ln_refuses_the_direct_parts(head_model):
    lm = head_model("bert")
    s = _session(lm, tiny.encoded(n=7))
    e = s.explain(position=2)
    with pytest.raises(NotApplicableError, match="post-LN"):
        e.heads
    assert not e.has_direct
    assert s.predict(top=3, position=2)[0].id == e.token


def test_a_base_model_has_no_head(tiny_model):
    lm = tiny_model("gpt2")
    s = _session(lm, tiny.encoded(n=5))
    with pytest.raises(NormvizError, match="without a language-model head"):
        s.predict()
    assert s.forward_passes == 0


@pytest.mark.parametrize("arch", ["llama_bias", "gpt2"])
def test_layer_parts_rebuild_each_layer_output(head_model, arch):
    """The interface routes and pages build on: one layer's writes as vectors, summing to its output."""
    from normviz.attribution import layer_parts, readout_of

    lm = head_model(arch)
    enc = tiny.encoded(n=7, seed=6)
    s = _session(lm, enc)
    e = s.explain(position=-1)
    views = s.layers()
    ro = readout_of(lm)
    u, _ = ro.direction(e.token, None)
    r = ro.vector(u, views[-1].rec.out[-1])
    for l, ctx in enumerate(views):
        p = layer_parts(ctx)
        rebuilt = p.residual + p.heads.sum((1, 2)) + p.attn_bias + p.ff
        assert torch.allclose(rebuilt, p.out, rtol=0, atol=1e-10 * float(p.out.abs().max()))
        assert p.heads.shape == (7, lm.n_heads, 7, p.out.shape[-1])
        one = layer_parts(ctx, rows=-1)
        assert np.allclose((one.heads[0] @ r).numpy(), e.heads[l], rtol=0, atol=1e-10 * np.abs(e.heads).max())
