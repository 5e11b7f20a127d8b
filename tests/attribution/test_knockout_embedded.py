"""Issue 31 on smollm2 (float32): knockout and head ablation equal the brute-force interventions of
tests/attribution/test_knockout.py (one 4D-masked or hooked pass each) to ≤ 1e-3 of their range."""

from __future__ import annotations

import numpy as np
import torch

import normviz

from .test_knockout import _get, _logits, _score

TEXT, TOKEN, FOIL = "The capital of France is", " Paris", " London"


def test_smollm2_knockout_and_head_ablation_equal_brute_force(smollm2):
    s = normviz.Session(smollm2, TEXT)
    ids, hm = s.encoded.ids, smollm2.head_model
    n = len(ids)
    k = s.knockout(TOKEN, FOIL)
    total = _score(_logits(hm, ids, n - 1), k.token, k.foil)
    ref = []
    for j in range(n):
        m = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        m[:, j] = float("-inf")
        m[j, j] = 0.0
        ref.append(total - _score(_logits(hm, ids, n - 1, m[None, None]), k.token, k.foil))
    ref = np.array(ref)
    assert np.abs(k.delta - ref).max() <= 1e-3 * np.ptp(ref), (k.delta, ref)
    assert abs(k.delta[-1]) <= 1e-3 * np.ptp(ref)  # the last token's edges lead nowhere before it

    a = s.ablate_heads(TOKEN, FOIL)
    H, dh = smollm2.n_heads, smollm2.config.hidden_size // smollm2.n_heads
    layers = hm.model.layers
    picked = [(l, h) for l in (0, len(layers) // 2, len(layers) - 1) for h in range(H)]
    ref_heads = []
    for l, h in picked:

        def pre(module, args, h=h):
            x = args[0].clone()
            x[..., h * dh : (h + 1) * dh] = 0.0
            return (x,)

        handle = _get(layers[l], "self_attn.o_proj").register_forward_pre_hook(pre)
        try:
            ref_heads.append(total - _score(_logits(hm, ids, n - 1), a.token, a.foil))
        finally:
            handle.remove()
    ref_heads = np.array(ref_heads)
    ours = np.array([a.delta[l, h] for l, h in picked])
    assert np.abs(ours - ref_heads).max() <= 1e-3 * np.ptp(ref_heads), (ours, ref_heads)
