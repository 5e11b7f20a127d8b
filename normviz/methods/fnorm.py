"""‖f(x)‖: the length of each head's transformed input vector (Kobayashi et al. 2020, §4.1).

f^h(x_j) = (x̂_j W^V_h + b^V_h) W^O_h (b^O excluded), x̂ = x (post-LN) or LN1(x) (pre-LN).
Key ``fx_norm`` [L, H, n]: ‖f^h(x_j)‖ for every layer, head and token j. Opt-in: it is a per-token
quantity, not a token-to-token map, so it is computed only when asked for (corpus statistics, export).
"""
from __future__ import annotations

from .registry import KeyInfo, Method, register


def _fx_norm(ctx, keys, options):
    return {"fx_norm": ctx.head_vectors.to(ctx.acc).norm(dim=-1).to(ctx.dtype)}


FX_NORM = register(Method(
    name="fx_norm", scope="layer",
    keys=(KeyInfo("fx_norm", "Transformed-vector norm ‖f(x)‖", True,
                  "‖f^h(x_j)‖ per head and token, shape [L, H, n] (Kobayashi et al. 2020, §4.1)."),),
    compute=_fx_norm,
    opt_in=True,
    references=("Kobayashi et al. 2020, Attention is Not Only a Weight",),
))
