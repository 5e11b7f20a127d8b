"""Issue 19 on encoder–decoder decoders: predict / logit_lens / explain on tiny float64 Marian, BART (post-LN),
mBART, M2M100 and T5 (pre-LN): both identities against the model's own logits, cross_heads against the raw
cross-attention modules, sources over source + target tokens; toy-mt in float32."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.core.errors import NotApplicableError

ARCHS = ["marian", "bart", "mbart", "m2m_100", "t5"]
TOL = {"t5": 2e-6}  # T5's RMSNorm rounds through float32


@pytest.mark.parametrize("arch", ARCHS)
def test_decoder_rows_are_explained_exactly(seq2seq_model, arch):
    lm = seq2seq_model(arch)
    s = normviz.Session(lm, "the cat sat on the mat", target="le chat assis sur le tapis")
    r, foil = 3, 5
    src, tgt = torch.tensor([s.part.axes["encoder"].ids]), torch.tensor([s.part.axes["decoder"].ids])
    with torch.no_grad():
        out = lm.model(input_ids=src, decoder_input_ids=tgt, output_attentions=True)
    real = out.logits[0, r].to(torch.float64)
    cands = s.predict(top=3, position=r)
    assert [c.id for c in cands] == torch.topk(real, 3).indices.tolist()
    lens = s.logit_lens(position=r)
    assert lens.shape[0] == len(lm.model.get_decoder().layers if arch != "t5" else lm.model.decoder.block) + 1
    assert np.abs(lens[-1] - torch.log_softmax(real, -1).numpy()).max() < 1e-9
    e = s.explain(foil=foil, position=r)
    total = float(real[e.token] - real[foil])
    tol = TOL.get(arch, 1e-9)
    assert abs(e.total - total) <= 1e-12 * abs(total)
    n_src, m = len(s.src_tokens), len(s.tgt_tokens)
    assert e.sources.shape == (n_src + m,) and e.n_source == n_src
    assert abs(e.sources.sum() + e.bias - total) <= tol * abs(total), (arch, e.sources.sum() + e.bias, total)
    assert np.abs(e.sources[n_src + r + 1 :]).max() == 0  # later target tokens take no part
    assert np.abs(e.sources[:n_src]).max() > 0  # the source does
    if lm.spec.decoder.placement == "post":
        with pytest.raises(NotApplicableError, match="post-LN"):
            e.cross_heads
        return
    parts = (
        e.embedding
        + e.heads.sum()
        + e.attn_bias.sum()
        + e.cross_heads.sum()
        + e.cross_bias.sum()
        + e.ff.sum()
        + e.final_bias
    )
    assert abs(parts - total) <= tol * abs(total), (arch, parts, total)
    L, H = e.cross_heads.shape[:2]
    assert e.cross_heads.shape == (L, H, n_src)
    if arch == "t5":
        return
    # cross_heads[l, h, j] = β_rj ⟨N(g^h(e_j)), u⟩, from the raw modules
    dec = lm.model.get_decoder()
    W = lm.model.get_output_embeddings().weight
    u = W[e.token] - W[foil]
    x_last = []
    hk = dec.layers[-1].register_forward_hook(lambda mod, a, o: x_last.append((o[0] if isinstance(o, tuple) else o)[0]))
    with torch.no_grad():
        lm.model(input_ids=src, decoder_input_ids=tgt)
    hk.remove()
    ln = dec.layer_norm
    xl = x_last[0][r]
    sigma = torch.sqrt(((xl - xl.mean()) ** 2).mean() + ln.eps)
    mem = out.encoder_last_hidden_state[0]
    for l, layer in enumerate(dec.layers):
        a = layer.encoder_attn
        v = a.v_proj(mem)  # [n_src, H·dh]
        dh = v.shape[1] // H
        for h in range(H):
            g = v[:, h * dh : (h + 1) * dh] @ a.out_proj.weight[:, h * dh : (h + 1) * dh].T
            Ng = ln.weight * (g - g.mean(-1, keepdim=True)) / sigma
            want = out.cross_attentions[l][0, h, r] * (Ng @ u)
            assert np.abs(e.cross_heads[l, h] - want.numpy()).max() <= 1e-9 * np.abs(e.cross_heads).max()


def test_toy_mt_float32_is_complete():
    lm = normviz.load("toy-mt", device="cpu")
    s = normviz.Session(lm, "the cat sees the dog")
    r = min(2, len(s.tgt_tokens) - 1)
    e = s.explain(position=r)
    best = s.predict(top=1, position=r)[0]
    assert e.token == best.id and abs(e.total - best.logit) <= 1e-5 * max(1.0, abs(best.logit))
    assert abs(e.sources.sum() + e.bias - e.total) <= 1e-4 * abs(e.total)
    assert s.forward_passes == 1
