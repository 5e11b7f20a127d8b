"""A naive implementation of the norm-family formulas that materialises per-pair vectors, as the authors'
code does (Kobayashi et al.'s BERT fork builds α^h_ij f^h(x_j) as a [H, n, n, d] tensor per layer).

Used as the memory/time baseline (d) of bench_maps.py and as an independent cross-check of the numbers.
Supports post-LN BERT only (the benchmark model).
"""

from __future__ import annotations

import torch


@torch.no_grad()
def naive_bert_maps(model, input_ids) -> dict[str, list[torch.Tensor]]:
    out = model(input_ids=input_ids, output_attentions=True, output_hidden_states=True)
    maps = {k: [] for k in ("attention", "norm", "norm_layer", "attn_res", "attn_res_ln")}
    for layer_index, layer in enumerate(model.encoder.layer):
        x = out.hidden_states[layer_index][0]  # [n, d]
        alpha = out.attentions[layer_index][0]  # [H, n, n]
        att = layer.attention
        H = (
            att.self.num_attention_heads
            if hasattr(att.self, "num_attention_heads")
            else model.config.num_attention_heads
        )
        n, d = x.shape
        dh = d // H
        value = att.self.value(x).view(n, H, dh).transpose(0, 1)  # [H, n, dh]
        w_o = att.output.dense.weight.T.view(H, dh, d)
        f = torch.matmul(value, w_o)  # [H, n, d]
        weighted = alpha[:, :, :, None] * f[:, None, :, :]  # [H, n, n, d]  (the big tensor)
        maps["attention"].append(alpha)
        maps["norm"].append(weighted.norm(dim=-1))
        summed = weighted.sum(0)  # [n, n, d]
        del weighted
        maps["norm_layer"].append(summed.norm(dim=-1))
        eye = torch.eye(n, dtype=x.dtype)[:, :, None]
        residual = summed + eye * x[None, :, :]
        del summed
        maps["attn_res"].append(residual.norm(dim=-1))
        ln = att.output.LayerNorm
        z = x + att.output.dense(torch.einsum("hij,hjk->ihk", alpha, value).reshape(n, d))
        s = torch.sqrt(z.var(-1, unbiased=False) + ln.eps)
        centred = residual - residual.mean(-1, keepdim=True)
        del residual
        decomposed = ln.weight * centred / s[:, None, None]
        maps["attn_res_ln"].append(decomposed.norm(dim=-1))
        del centred, decomposed
    return maps
