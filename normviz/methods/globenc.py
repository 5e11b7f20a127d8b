"""GlobEnc (Modarressi et al. 2022): the attention block's token parts carried through the second LayerNorm,
rolled out by raw products. Post-LN encoders only.

Exactly as the authors' code computes it (github.com/mohsenfayyaz/GlobEnc, ``src/modeling/modeling_bert.py``:
``BertNormOutput`` for the first norm, ``BertLayer.forward`` for the second, ``BertEncoder`` for the rollout).
For layer l with input x, head vectors f^h(x_j) = (x_j W^V_h + b^V_h) W^O_h (value bias inside, b^O left out):

    u_ij  = Σ_h α^h_ij f^h(x_j) + δ_ij x_j                                  (attention + residual)
    ℓ_ij  = γ₁ ⊙ (u_ij − mean(u_ij)) / √(Var(z_i) + ε₁)                    (LN1's linear part; β₁ left out)
    g_ij  = γ₂ ⊙ (ℓ_ij − mean(ℓ_ij)) / √(Var(z'_i) + ε₂)                   (LN2's linear part; β₂ left out)

    globenc_layer[l, i, j] = ‖g_ij‖                  ("N-Enc", [L, n, n])
    globenc[l] = globenc_layer[l] · globenc[l−1],  globenc[0] = globenc_layer[0]   (cumulative, [L, n, n])

z_i = x_i + Attn(x)_i is the real input of LN1 and z'_i = h_i + FF(h_i) the real input of LN2 (both from the
recorded pass, biases included), so the FF block enters only through LN2's scale √(Var(z'_i) + ε₂): its
output is not split over tokens (that is DecompX). The rollout is the authors' ``compute_joint_attention``
with their identity ``pre_process``: raw products, no identity added, no row normalisation (their demo
normalises only the [CLS] row for display). ℓ_ij are normviz's ``attn_res_ln`` parts
(:meth:`normviz.record.decompose.LayerDecomposition.attn_res_ln_vectors`); the per-pair vectors are formed in row
chunks of bounded memory (O(n²·d) per layer, like ALTI).

Pre-LN models (GPT-2, Llama …) have no LayerNorm after the FF residual, so the second step has no
counterpart; GlobEnc is refused for them rather than given a formula its authors did not define.
"""

from __future__ import annotations

import numpy as np
import torch

from ..core.errors import NotApplicableError
from . import papers
from .base import Budget, Inputs, KeyInfo, Output, Request, per_layer, refuse_over_budget
from .family import Family
from .rollouts import rollout

FAMILY = Family(
    name="globenc",  # the module's name (map keys: globenc_layer, globenc); "global_encoder" is an alias
    order=70,
    keys=(
        KeyInfo(
            "globenc_layer",
            "GlobEnc, per layer (N-Enc)",
            False,
            "‖γ₂⊙(ℓ_ij − mean ℓ_ij)‖/√(Var(z'_i)+ε₂): the attention + residual + LN1 parts ℓ_ij through LN2's "
            "linear part, z'_i = h_i + FF(h_i) the real LN2 input (Modarressi et al. 2022). Post-LN only.",
            placements=("post",),
            short="GlobEnc layer",
            unit="‖vector‖ (hidden-state units)",
        ),
        KeyInfo(
            "globenc",
            "GlobEnc (rollout)",
            False,
            "G_l = globenc_layer_l · G_{l−1}: raw products, no identity, no row normalisation, cumulative up to "
            "layer l, as the GlobEnc code (Modarressi et al. 2022). Post-LN only.",
            placements=("post",),
            short="GlobEnc",
            group="across layers",
            unit="product of the layers' maps",
        ),
    ),
    budget=Budget("globenc"),  # option globenc_budget_s
    requires={"globenc": ("globenc_layer",)},
    heavy=True,  # costly: the public app computes it in the worker process (normviz.workers.process)
    references=(papers.MODARRESSI_2022,),
)


def flops(request: Request) -> float:
    """The n² vectors ℓ_ij of every layer, Σ_h α^h_ij f^h_j + the residual (2·H·d each), then LN2's linear part
    and the norm (≈ 4·d): L·n²·2·d·(H + 2). (The rollout's L products of n × n matrices are not counted.)"""
    n = request.n_tokens
    return request.n_layers * n * n * 2.0 * request.d_model * (request.n_heads + 2)


def check(request: Request, key: str, options: dict) -> None:
    """Post-LN only; refused before anything runs when :func:`flops` would take longer than option
    ``globenc_budget_s`` seconds (:func:`~normviz.methods.base.refuse_over_budget`; the app sets it from
    NORMVIZ_COST_BUDGET)."""
    if request.placement == "post":
        refuse_over_budget(request, key, options, FAMILY.budget, flops)
    if request.placement != "post":
        raise NotApplicableError(
            f"{key!r} (GlobEnc) is defined for post-LN encoders (BERT family), whose second LayerNorm follows the "
            "FF residual; this model is pre-LN and has no such norm. Use rollout_attn_res_ln (the norm rollout of "
            "attention + residual + norm), rollout_ff_res (the whole pre-LN layer) or rollout_alti instead."
        )


def globenc_layer(ctx) -> torch.Tensor:
    """‖g_ij‖ of one layer, [n, n] (rows: receiving token i), in row chunks."""
    norm2 = ctx.p.norm_on_ff_residual
    if norm2 is None or ctx.rec.z_ff is None:
        raise NotApplicableError("GlobEnc needs the LayerNorm after the FF residual (post-LN models).")
    out = torch.empty(ctx.n, ctx.n, dtype=ctx.dtype, device=ctx.device)
    s2 = norm2.scale(ctx.rec.z_ff)  # √(Var(z'_i) + ε₂) from the real LN2 input
    for rows in ctx.row_chunks():
        parts, _ = ctx.attn_res_ln_vectors(rows)  # ℓ_ij [c, n, d]
        out[rows] = (norm2.linear_part(parts) / s2[rows, None, None]).norm(dim=-1)
    return out


def compute(inputs: Inputs, keys, options) -> Output:
    arrays, notes = {}, {}
    if "globenc_layer" in keys:
        arrays.update(
            per_layer(inputs, FAMILY.name, ["globenc_layer"], lambda ctx: {"globenc_layer": globenc_layer(ctx)})
        )
    if "globenc" in keys:
        m = arrays.get("globenc_layer", inputs.arrays.get("globenc_layer"))
        arrays["globenc"] = rollout(m.astype(np.float64)).astype(m.dtype)
        notes["globenc"] = "raw products of globenc_layer (no identity, no row normalisation), as the GlobEnc code"
    return Output(arrays, notes)
