"""The corpus mixing ratio is the 2021 paper's (issue 10, item 2): r_i = ‖Σ_{j≠i} v_ij‖ / (‖Σ_{j≠i} v_ij‖ + ‖v_ii‖),
checked against an independent implementation that builds the per-pair vectors [n, n, d] from the model's
weights and its own forward pass, as the authors' code (BertNormOutput) does. Self-contained."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as tf

import normviz
from normviz.core.tokens import Encoded
from normviz.corpus.chunks import batch_maps
from normviz.corpus.results import summary, tables
from normviz.corpus.stats import Accumulator, needed_keys

from ..helpers.tiny import randomize_weights


def _tiny(arch: str):
    common = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64)
    cfg = (
        tf.BertConfig(intermediate_size=64, **common)
        if arch == "bert"
        else tf.LlamaConfig(num_key_value_heads=2, intermediate_size=48, bos_token_id=1, eos_token_id=2, **common)
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = tf.AutoModel.from_config(cfg, attn_implementation="eager").to(torch.float64).eval()
    randomize_weights(model)
    return normviz.from_model(model, None, name=f"tiny-{arch}")


def _enc(ids):
    return Encoded(
        ids=list(ids), tokens=[str(i) for i in ids], labels=[str(i) for i in ids], special=[False] * len(ids), dropped=0
    )


def _ratio(off, own):
    a, b = off.norm(dim=-1), own.norm(dim=-1)
    return (a / (a + b)).numpy()


@torch.no_grad()
def independent(lm, ids) -> dict[str, np.ndarray]:
    """Per-token ratios [L, n] (per head [L, H, n]) from full per-pair tensors built from the weights."""
    model, n = lm.model, len(ids)
    bert = lm.spec.family == "bert"
    layers = model.encoder.layer if bert else model.layers
    pre_norm = {}
    hooks = [
        (l.attention.output.LayerNorm if bert else l.post_attention_layernorm).register_forward_pre_hook(
            lambda m, a, i=i: pre_norm.__setitem__(i, a[0][0])
        )
        for i, l in enumerate(layers)
    ]
    out = model(input_ids=torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for h in hooks:
        h.remove()
    res = {k: [] for k in ("norm", "norm_layer", "attn_res", "attn_res_ln")}
    for i, layer in enumerate(layers):
        x, alpha = out.hidden_states[i][0], out.attentions[i][0]
        H = alpha.shape[0]
        if bert:
            v = layer.attention.self.value(x)
            w_o = layer.attention.output.dense.weight
            ln = layer.attention.output.LayerNorm
        else:
            v = layer.self_attn.v_proj(layer.input_layernorm(x))
            w_o = layer.self_attn.o_proj.weight
            ln = layer.post_attention_layernorm
        d = x.shape[-1]
        dh = d // H
        v = v.reshape(n, -1, dh).transpose(0, 1)
        v = v.repeat_interleave(H // v.shape[0], dim=0)
        f = torch.einsum("hnk,dhk->hnd", v, w_o.reshape(d, H, dh))
        per_head = alpha[..., None] * f[:, None]  # [H, i, j, d]
        eye = torch.eye(n, dtype=torch.bool)

        def split(t):  # (Σ_{j≠i}, self) over axis -2
            return t.sum(-2) - t[..., eye, :].reshape(t.shape[:-3] + (n, d)), t[..., eye, :].reshape(
                t.shape[:-3] + (n, d)
            )

        res["norm"].append(_ratio(*split(per_head)))
        summed = per_head.sum(0)
        res["norm_layer"].append(_ratio(*split(summed)))
        u = summed + torch.diag_embed(torch.ones(n, dtype=x.dtype))[..., None] * x[None]
        res["attn_res"].append(_ratio(*split(u)))
        z = pre_norm[i]
        if bert:
            var = (z - z.mean(-1, keepdim=True)).pow(2).mean(-1)
            ell = (u - u.mean(-1, keepdim=True)) / torch.sqrt(var + ln.eps)[:, None, None] * ln.weight
        else:
            ell = u / torch.sqrt(z.pow(2).mean(-1) + ln.variance_epsilon)[:, None, None] * ln.weight
        res["attn_res_ln"].append(_ratio(*split(ell)))
    return {k: np.stack(v) for k, v in res.items()}


SEQS = [[5, 17, 33, 8, 61, 9, 40], [12, 7, 90, 3, 44], [21, 21, 5, 77, 13, 60, 2, 30, 9]]


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_mixing_ratios_match_independent_per_pair_tensors(arch):
    lm = _tiny(arch)
    keys = needed_keys(["mixing"], lm.spec.placement)
    # one sequence per pass: padded batches of the tiny Llama differ from unpadded passes at float32 level
    # (2e-7 in α, in transformers' own forward), which is not what this test is about
    maps = [batch_maps(lm, [_enc(s)], keys)[0] for s in SEQS]
    acc = Accumulator(lm.n_layers, lm.n_heads, lm.spec.placement, ["mixing"], causal=lm.spec.causal)
    pooled = {k: [] for k in ("norm_layer", "attn_res", "attn_res_ln")}
    pooled_w = []
    worst = 0.0
    for s, m in zip(SEQS, maps):
        ref = independent(lm, s)
        for k, v in ref.items():
            got = m["mixing_ratios"][k]
            cut = (slice(None),) * (got.ndim - 1) + (slice(1 if lm.spec.causal else 0, None),)
            worst = max(worst, float(np.abs(got[cut] - v[cut]).max()))
            np.testing.assert_allclose(got[cut], v[cut], rtol=1e-9, atol=1e-12, err_msg=k)
        first = 1 if lm.spec.causal else 0  # a decoder's first token sees only itself: left out
        for k in pooled:
            pooled[k].append(ref[k][:, first:])
        a = m["attention"].mean(1)
        pooled_w.append((a.sum(-1) - np.diagonal(a, axis1=-2, axis2=-1))[:, first:])
        acc.add(m, s, [str(i) for i in s], [str(i) for i in s], [False] * len(s))
    tabs = tables(acc.state(), lm.n_layers, lm.n_heads)
    ls = tabs["layer_stats"]
    for k, v in pooled.items():  # Table 2's averaging: every (sentence, token) ratio of a layer pooled
        np.testing.assert_allclose(ls[f"mixing_{k}"], np.concatenate(v, -1).mean(-1), rtol=1e-9)
    np.testing.assert_allclose(ls["mixing_attention"], np.concatenate(pooled_w, -1).mean(-1), rtol=1e-9)
    summ = summary(acc.state(), tabs)
    st = summ["statistics"]
    assert {"mixing_attention", "mixing_norm_layer", "mixing_attn_res", "mixing_attn_res_ln"} <= set(st)
    assert not any(k.startswith("mixing_share_") for k in st)  # never next to the paper's numbers
    assert set(summ["other_definitions"]) >= {"mixing_share_attn_res", "mixing_share_attn_res_ln"}
    assert "Σ_{j≠i} v_ij" in summ["definitions"]["mixing_attn_res"]
    assert "not the paper" in summ["definitions"]["mixing_share_attn_res"]
    # the old statistic is a different number (sum of norms ≥ norm of the sum)
    assert (ls["mixing_share_attn_res"] > ls["mixing_attn_res"]).all()
    print(f"{arch}: max |Δ| per-token ratio vs per-pair tensors {worst:.1e}")


def test_minilm_three_sentences_against_per_pair_tensors():
    lm = normviz.load("minilm", dtype="float64")
    texts = ["The cat sat on the mat.", "We hold these truths to be self-evident.", "Attention is not only a weight."]
    encs = [normviz.core.tokens.encode(lm.tokenizer, t) for t in texts]
    maps = batch_maps(lm, encs, needed_keys(["mixing"], "post"))
    acc = Accumulator(lm.n_layers, lm.n_heads, "post", ["mixing"], causal=False)
    for e, m in zip(encs, maps):
        ref = independent(lm, e.ids)
        for k, v in ref.items():
            np.testing.assert_allclose(m["mixing_ratios"][k], v, rtol=1e-9, atol=1e-12, err_msg=k)
        acc.add(m, e.ids, e.tokens, e.labels, e.special)
    tabs = tables(acc.state(), lm.n_layers, lm.n_heads)
    st = summary(acc.state(), tabs)
    print({k: v for k, v in {**st["statistics"], **st["other_definitions"]}.items() if k.startswith("mixing")})
