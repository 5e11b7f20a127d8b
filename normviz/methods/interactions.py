"""ALTI, Aggregation of Layer-wise Token-to-token Interactions (Ferrando et al. 2022).

Per layer, from the exact decomposition of the attention block through its residual and norm (the
``attn_res_ln`` stage: post-LN LN1, pre-LN the norm in front of the FF):

    y_i = Σ_j T_i(x_j) + b_i           T_i(x_j) = ℓ_ij (token parts), b_i the bias term (N(b^O)/s_i + β),
                                        so y_i is the model's own normalised vector
    c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁)        (the Manhattan proximity of the part to the whole)
    alti[i, j] = c_ij / Σ_k c_ik

and across layers ``rollout_alti``: R_0 = C_0, R_l = C_l · R_{l−1} (the residual is already inside C;
``rollout_normalization=receptive_field`` applies to decoders as for the other rollouts).
"""
from __future__ import annotations

import numpy as np
import torch

from .base import Budget, Inputs, KeyInfo, Output, Request, per_layer, refuse_over_budget
from . import papers
from .rollouts import finish, rollout

NAME = "interactions"
BUDGET = Budget(NAME, aliases=("alti_budget_s",))  # option interactions_budget_s
UNIT = "score (rows sum to ~1)"
KEYS = (
    KeyInfo("alti", "ALTI (per layer)", False,
            "c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁), row-normalised, from the attn_res_ln parts "
            "(Ferrando et al. 2022).", short="ALTI"),
    KeyInfo("rollout_alti", "ALTI rollout", False,
            "R_l = alti_l · R_{l−1}, cumulative up to layer l (Ferrando et al. 2022).", short="ALTI", group="across layers"),
)
REQUIRES = {"rollout_alti": ("alti",)}
NEEDS_MODEL = False
OPT_IN = ()
REFERENCES = (papers.FERRANDO_2022,)


def alti_layer(ctx) -> torch.Tensor:
    """The ALTI map of one layer, [n, n], computed in row chunks of the per-pair vectors."""
    out = torch.empty(ctx.n, ctx.n, dtype=ctx.dtype, device=ctx.device)
    for rows in ctx.row_chunks():
        parts, bias = ctx.attn_res_ln_vectors(rows)  # [c, n, d], [c, d]
        parts = parts.to(ctx.acc)
        y = parts.sum(1) + bias.to(ctx.acc)  # [c, d]
        y_l1 = y.abs().sum(-1, keepdim=True)  # [c, 1]
        dist = (y[:, None, :] - parts).abs().sum(-1)  # [c, n]
        c = (y_l1 - dist).clamp_min(0)
        s = c.sum(-1, keepdim=True)
        out[rows] = torch.where(s > 0, c / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(c)).to(ctx.dtype)
    return out


def compute(inputs: Inputs, keys, options) -> Output:
    arrays, notes = {}, {}
    if "alti" in keys:
        arrays.update(per_layer(inputs, NAME, ["alti"], lambda ctx: {"alti": alti_layer(ctx)}))
    if "rollout_alti" in keys:
        a = arrays.get("alti", inputs.arrays.get("alti"))
        r, notes["rollout_alti"] = finish(rollout(a.astype(np.float64)), False, inputs.request.causal, options)
        arrays["rollout_alti"] = r.astype(a.dtype)
    return Output(arrays, notes)


def check(request: Request, key: str, options: dict) -> None:
    """Refuse before anything runs when the n² per-pair vectors of every layer and head (4·L·H·n²·d FLOPs) would take longer than option ``interactions_budget_s`` (or ``alti_budget_s``)
    seconds (:func:`~normviz.methods.base.refuse_over_budget`)."""
    n, d, L = request.n_tokens, request.d_model, request.n_layers
    refuse_over_budget(request, key, options, BUDGET, L * 4.0 * request.n_heads * n * n * d)
