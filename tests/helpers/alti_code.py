"""An independent implementation of the ALTI code's per-layer formula (Ferrando et al. 2022, github
mt-upc/transformer-contributions, ``ModelWrapper.get_contributions`` + ``normalize_contributions(…,
'min_sum', resultant_norm)``), written from its description on the model's own hooked vectors
(:func:`tests.helpers.vectors.model_vectors`), with explicit per-pair tensors:

    T_i(x_j) = Σ_h α^h_ij f^h(x_j) + δ_ij x_j                 (x_j the layer's input; f from the model's value output)
    post-LN: T ← γ⊙(T − mean T) / s_i, y_i = T summed + the same of b^O, + β   (their l_transform; s_i from z_i)
    pre-LN:  nothing normalised (their ``pre_layer_norm`` branch), y_i = Σ_j T_i(x_j) + b^O
    importance_ij = −‖T_i(x_j) − y_i + eps‖₁   (``F.pairwise_distance(T, y, p=1)``; eps = 1e-6 in their code)
    alti_ij = max(0, importance_ij + ‖y_i‖₁), rows divided by their sums.
"""

from __future__ import annotations

import torch

from normviz.models.params import get_path

from .vectors import independent_head_vectors


def alti_code_layer(lm, layer: int, v: dict, eps: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(alti [n, n], y [n, d]) of one layer from its hooked vectors ``v`` (see module docstring)."""
    f = independent_head_vectors(lm, layer, v["value"])  # [H, n, d]
    alpha = v["attn"].to(f.dtype)  # [H, n, n]
    x = v["x"]
    n = x.shape[0]
    parts = torch.einsum("hij,hjd->ijd", alpha, f) + torch.eye(n, dtype=x.dtype)[:, :, None] * x[None, :, :]
    out_mod = get_path(lm.layers[layer], lm.spec.out)
    b_o = out_mod.bias if out_mod.bias is not None else torch.zeros(x.shape[-1], dtype=x.dtype)
    if lm.spec.placement == "post":
        ln = get_path(lm.layers[layer], lm.spec.norm_after_attn)
        z = v["z"]
        s = ((z - z.mean(-1, keepdim=True)) ** 2).mean(-1).add(ln.eps).sqrt()  # LN's own scale of z_i
        centred = parts - parts.mean(-1, keepdim=True)
        parts = ln.weight * centred / s[:, None, None]
        bias = ln.weight * (b_o - b_o.mean()) / s[:, None] + ln.bias
    else:
        bias = b_o.expand(n, -1)
    y = parts.sum(1) + bias
    importance = -(parts - y[:, None, :] + eps).abs().sum(-1)
    c = (importance + y.abs().sum(-1, keepdim=True)).clamp_min(0)
    return c / c.sum(-1, keepdim=True), y
