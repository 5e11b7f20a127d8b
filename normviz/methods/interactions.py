"""ALTI, Aggregation of Layer-wise Token-to-token Interactions (Ferrando et al. 2022).

Per layer, from an exact decomposition of the attention block with its residual, y_i = Σ_j T_i(x_j) + b_i:

    c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁)        (the Manhattan proximity of the part to the whole)
    alti[i, j] = c_ij / Σ_k c_ik

``alti`` is the authors' code (github mt-upc/transformer-contributions, ``get_contributions``):
  post-LN  T_i(x_j) = ℓ_ij, the ``attn_res_ln`` parts through LN1, b_i = N(b^O)/s_i + β: y_i is LN1's output;
  pre-LN   T_i(x_j) = u_ij = Σ_h α^h_ij f^h(x_j) + δ_ij x_j, the ``attn_res`` parts, b_i = b^O: y_i is the raw
           residual stream x_i + Attn(LN1(x_i)), the input of the norm before the FF (their ``pre_layer_norm``
           branch: nothing normalises the parts).
``alti_ln`` (pre-LN only, our variant): the pre-LN parts taken one norm further, through the norm in front of
the FF (the ``attn_res_ln`` stage, y_i its output), as post-LN ALTI takes them through LN1.

Across layers ``rollout_alti`` / ``rollout_alti_ln``: R_0 = C_0, R_l = C_l · R_{l−1} (the residual is already
inside C; ``rollout_normalization=receptive_field`` applies to decoders as for the other rollouts).

The authors' code measures ‖y_i − T_i(x_j)‖₁ with ``F.pairwise_distance``, whose eps adds 1e-6 to every
coordinate of the difference; the maps here are the paper's formula without it (README: the size of that
difference).
"""

from __future__ import annotations

import numpy as np
import torch

from . import papers
from .base import Budget, Inputs, KeyInfo, Output, Request, per_layer, refuse_over_budget
from .family import Family
from .rollouts import finish, rollout

ROLLOUTS = {"rollout_alti": "alti", "rollout_alti_ln": "alti_ln"}
FAMILY = Family(
    name="interactions",
    order=60,
    keys=(
        KeyInfo(
            "alti",
            "ALTI (per layer)",
            False,
            "c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁), row-normalised, as the authors' code: post-LN from the "
            "attn_res_ln parts (LN1), pre-LN from the raw attn_res parts, y_i the residual stream "
            "(Ferrando et al. 2022).",
            short="ALTI",
        ),
        KeyInfo(
            "rollout_alti",
            "ALTI rollout",
            False,
            "R_l = alti_l · R_{l−1}, cumulative up to layer l (Ferrando et al. 2022).",
            short="ALTI",
            group="across layers",
        ),
        KeyInfo(
            "alti_ln",
            "ALTI through the FF norm (pre-LN variant)",
            False,
            "Pre-LN only, our variant of alti: the attn_res_ln parts, through the norm before the FF, "
            "y_i that norm's output.",
            placements=("pre",),
            short="ALTI, FF norm",
        ),
        KeyInfo(
            "rollout_alti_ln",
            "Rollout of ALTI through the FF norm",
            False,
            "Pre-LN only: R_l = alti_ln_l · R_{l−1}.",
            placements=("pre",),
            short="ALTI, FF norm",
            group="across layers",
        ),
    ),
    unit="score (rows sum to ~1)",
    budget=Budget("interactions", aliases=("alti_budget_s",)),  # option interactions_budget_s
    requires={k: (v,) for k, v in ROLLOUTS.items()},
    heavy=True,  # costly: the public app computes it in the worker process (normviz.workers.process)
    references=(papers.FERRANDO_2022,),
)


def alti_layer(ctx, normed: bool = True) -> torch.Tensor:
    """The ALTI map of one layer, [n, n], computed in row chunks of the per-pair vectors: from the
    ``attn_res_ln`` parts (``normed``) or the raw ``attn_res`` parts."""
    out = torch.empty(ctx.n, ctx.n, dtype=ctx.dtype, device=ctx.device)
    parts_of = ctx.attn_res_ln_vectors if normed else ctx.attn_res_vectors
    for rows in ctx.row_chunks():
        parts, bias = parts_of(rows)  # [c, n, d], [c, d]
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
    pre = inputs.request.placement == "pre"
    per_layer_keys = [k for k in ("alti", "alti_ln") if k in keys]
    if per_layer_keys:
        normed = {"alti": not pre, "alti_ln": True}
        arrays.update(
            per_layer(
                inputs, FAMILY.name, per_layer_keys, lambda ctx: {k: alti_layer(ctx, normed[k]) for k in per_layer_keys}
            )
        )
    for key, src in ROLLOUTS.items():
        if key in keys:
            a = arrays.get(src, inputs.arrays.get(src))
            maps = a.astype(np.float64)
            r, notes[key] = finish(rollout(maps), False, inputs.request.causal, options, maps=maps)
            arrays[key] = r.astype(a.dtype)
    if "alti" in arrays:
        notes["alti"] = (
            "pre-LN: the raw attention + residual parts, y_i the residual stream (the ALTI code's "
            "pre_layer_norm branch); alti_ln takes them through the FF norm"
            if pre
            else "post-LN: the attention + residual parts through LN1 (the ALTI code)"
        )
    return Output(arrays, notes)


def check(request: Request, key: str, options: dict) -> None:
    """Refuse before anything runs when the n² per-pair vectors of every layer and head (4·L·H·n²·d FLOPs) would take
    longer than option ``interactions_budget_s`` (or ``alti_budget_s``)
    seconds (:func:`~normviz.methods.base.refuse_over_budget`)."""
    refuse_over_budget(
        request,
        key,
        options,
        FAMILY.budget,
        lambda r: r.n_layers * 4.0 * r.n_heads * r.n_tokens * r.n_tokens * r.d_model,
    )
