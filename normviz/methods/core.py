"""The per-layer maps of Kobayashi et al.: weights, norms, residual, norm layer and feed-forward."""
from __future__ import annotations

from .registry import KeyInfo, Method, register

ATTENTION = register(Method(
    name="attention", scope="layer",
    keys=(KeyInfo("attention", "Attention weights α", True, "α^h_ij, the softmax weights of head h.",
                  rows_sum_to_one=True),),
    compute=lambda ctx, keys, options: {"attention": ctx.attention()},
    references=("Vaswani et al. 2017",),
))


def _norm_family(ctx, keys, options):
    return ctx.norm_family(keys)


NORM = register(Method(
    name="norm", scope="layer",
    keys=(
        KeyInfo("norm", "Norm ‖α f(x)‖", True, "‖α^h_ij f^h(x_j)‖ per head (Kobayashi et al. 2020)."),
        KeyInfo("norm_layer", "Norm, heads summed ‖Σ_h α f(x)‖", False,
                "‖Σ_h α^h_ij f^h(x_j)‖: head vectors summed, then the norm (2020)."),
        KeyInfo("attn_res", "Attention + residual", False,
                "‖Σ_h α^h_ij f^h(x_j) + δ_ij x_j‖ (Kobayashi et al. 2021, ATB)."),
        KeyInfo("attn_res_ln", "Attention + residual + norm", False,
                "The norm after the residual decomposed: ‖γ⊙(u_ij − mean u_ij)‖/s_i (2021, ATBN)."),
    ),
    compute=_norm_family,
    references=("Kobayashi et al. 2020, Attention is Not Only a Weight", "Kobayashi et al. 2021, Incorporating Residual and Normalization Layers"),
))


FF = register(Method(
    name="ff", scope="layer",
    keys=(
        KeyInfo("ff", "Feed-forward", False,
                "The FF output split into token parts: linear before the activation, integrated gradients through it (2024)."),
        KeyInfo("ff_res", "Feed-forward + residual", False, "FF parts plus the residual around the FF (pre-LN: the whole layer)."),
        KeyInfo("ff_res_ln", "Feed-forward + residual + norm (whole layer)", False,
                "Post-LN only: LN2 decomposed after FF + residual: the whole layer.", placements=("post",)),
    ),
    compute=lambda ctx, keys, options: ctx.ff_maps(keys),
    cost_note="O(n²·d·d_ff) per layer, computed in row chunks",
    references=("Kobayashi et al. 2024, Analyzing Feed-Forward Blocks in Transformers through the Lens of Attention Maps",),
))
