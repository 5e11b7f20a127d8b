"""The feed-forward block split into token contributions (Kobayashi et al. 2024): ff, ff_res, ff_res_ln.

The FF input of token i is the normed attention output, Σ_j ℓ_ij + bias_i (see :mod:`normviz.decompose`).
The pre-activation is linear in it, so its parts are ℓ_ij W_in (the bias part takes the biases). The
element-wise activation is split by integrated gradients from a zero baseline along the straight path,
exact in closed form (:mod:`normviz.activations`): part c gets p_c·g(p)/p; a SwiGLU unit silu(a)·b with
a = Σ a_c, b = Σ b_c gives part c  a_c·b·∫₀¹t·silu′(ta)dt + b_c·∫₀¹silu(ta)dt. Then W_out.

  ff         ‖FF part of j in i‖                                   [L, n, n]
  ff_res     ‖FF part + the residual's part‖ (pre-LN: the whole layer)
  ff_res_ln  post-LN only: norm_after_ff decomposed like attn_res_ln; the whole layer

O(n²·d·d_ff) per layer by nature; computed in row chunks of bounded memory. ``check`` refuses an input
whose estimated time exceeds the option ``ff_budget_s`` (seconds; no limit by default), estimated from
the FLOPs 2·L·n²·d·d_ff(·2 for gated units) at ``ff_flops_per_second``.
"""
from __future__ import annotations

import torch

from ..activations import activation_ratio, silu_path_integral
from ..errors import TooCostlyError
from .base import Inputs, KeyInfo, Output, Request, per_layer
from . import papers

NAME = "feedforward"
KEYS = (
    KeyInfo("ff", "Feed-forward", False,
            "The FF output split into token parts: linear before the activation, integrated gradients through it (2024)."),
    KeyInfo("ff_res", "Feed-forward + residual", False, "FF parts plus the residual around the FF (pre-LN: the whole layer)."),
    KeyInfo("ff_res_ln", "Feed-forward + residual + norm (whole layer)", False,
            "Post-LN only: the norm after FF + residual decomposed: the whole layer.", placements=("post",)),
)
REQUIRES: dict = {}
NEEDS_MODEL = False
OPT_IN = ()
COMPUTED_TOGETHER = True  # the stages share the per-pair vectors: asking for one key computes them all
REFERENCES = (papers.KOBAYASHI_2024,)

FLOPS_PER_SECOND = {"cpu": 4e10}  # what the FF maps achieve here (benchmarks/bench_ff.py); other devices: no estimate


def flops(request: Request) -> float:
    """2·L·n²·d·d_ff multiply-adds of the per-pair vectors through W_out (twice the input side for gated units)."""
    n = request.n_tokens
    return 2.0 * request.n_layers * n * n * request.d_model * request.d_ff * (1.5 if request.gated else 1.0)


def estimated_seconds(request: Request, options: dict) -> float | None:
    rate = options.get("ff_flops_per_second") or FLOPS_PER_SECOND.get(request.device)
    return flops(request) / float(rate) if rate else None


def token_limit(request: Request, budget_s: float, rate: float) -> int:
    per_token2 = flops(Request(**{**request.__dict__, "n_tokens": 1})) / rate
    return int((budget_s / per_token2) ** 0.5)


def check(request: Request, key: str, options: dict) -> None:
    budget = options.get("ff_budget_s")
    if budget is None:
        return
    est = estimated_seconds(request, options)
    if est is None or est <= float(budget):
        return
    rate = float(options.get("ff_flops_per_second") or FLOPS_PER_SECOND[request.device])
    raise TooCostlyError(
        f"The feed-forward maps for {request.n_tokens} tokens would take about {est:.0f} s here "
        f"(budget {float(budget):.0f} s). Shorten the text to about {token_limit(request, float(budget), rate)} "
        "tokens, pick maps without the feed-forward block, or raise the budget (option ff_budget_s; in the app "
        "NORMVIZ_FF_BUDGET).")


# ---------------------------------------------------------------- per-pair vectors of one layer
class FFInputs:
    """What every row chunk of one layer reuses: the real FF input (the norm's output through the model's own
    module) and the head vectors pushed through the FF input projection(s), so that the pre-activation parts
    are Σ_h α·q / s."""

    def __init__(self, ctx):
        p = ctx.p
        self.total = ctx.ln_attn.module(ctx.rec.z_attn)
        mats = {"in": p.w_in} if p.ff_kind == "mlp" else {"in": p.w_in, "up": p.w_up}
        self.projected = {k: (ctx.head_vectors_ln @ w, ctx.x_ln @ w) for k, w in mats.items()}


def _pre_activation_parts(ctx, key: str, w: torch.Tensor, b: torch.Tensor | None, rows: slice,
                          ln_bias: torch.Tensor, fin: FFInputs):
    q, xq = fin.projected[key]
    ff_input = fin.total
    s = ctx.ln_scale[rows]
    parts = ctx.mix(q, xq, rows) / s[:, None, None]
    bias = ln_bias @ w
    total = ff_input[rows] @ w
    if b is not None:
        bias = bias + b
        total = total + b
    return parts, bias, total


def ff_vectors(ctx, rows: slice, fin: FFInputs | None = None) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Per-pair vectors of ff, ff_res (and ff_res_ln post-LN) for rows, with their bias terms."""
    fin = fin or FFInputs(ctx)
    p = ctx.p
    ln_parts, ln_bias = ctx.attn_res_ln_vectors(rows)
    pa, pb, ptot = _pre_activation_parts(ctx, "in", p.w_in, p.b_in, rows, ln_bias, fin)
    if p.ff_kind == "mlp":
        r = activation_ratio(p.act, ptot)
        attr = pa * r[:, None, :]
        attr_b = pb * r
    else:
        ua, ub, utot = _pre_activation_parts(ctx, "up", p.w_up, p.b_up, rows, ln_bias, fin)
        a = ptot.to(ctx.acc)
        i2 = silu_path_integral(a)
        a_i1 = a * torch.sigmoid(a) - i2  # a·∫_0^1 t·silu′(t a) dt
        safe = torch.where(a == 0, torch.ones_like(a), a)
        i1 = torch.where(a == 0, torch.full_like(a, 0.25), a_i1 / safe)
        coef_gate = (utot.to(ctx.acc) * i1).to(ctx.dtype)
        coef_up = i2.to(ctx.dtype)
        attr = pa * coef_gate[:, None, :] + ua * coef_up[:, None, :]
        attr_b = pb * coef_gate + ub * coef_up
    ff = attr @ p.w_out
    ff_b = attr_b @ p.w_out
    if p.b_out is not None:
        ff_b = ff_b + p.b_out
    del attr
    if ctx.residual_from_norm:
        res, res_b = ln_parts + ff, ln_bias + ff_b
    else:
        u, u_b = ctx.attn_res_vectors(rows)
        res, res_b = u + ff, u_b + ff_b
    out = {"ff": (ff, ff_b), "ff_res": (res, res_b)}
    norm2 = p.norm_on_ff_residual
    if norm2 is not None:
        s2 = norm2.scale(ctx.rec.z_ff[rows])
        parts2 = norm2.linear_part(res) / s2[:, None, None]
        bias2 = norm2.linear_part(res_b) / s2[:, None]
        if norm2.bias is not None:
            bias2 = bias2 + norm2.bias
        out["ff_res_ln"] = (parts2, bias2)
    return out


def ff_maps(ctx, keys) -> dict[str, torch.Tensor]:
    """Norms ‖part_ij‖ of the FF stages in `keys`, [n, n] each, chunked over rows."""
    keys = [k for k in keys if k in ("ff", "ff_res", "ff_res_ln")]
    out = {k: torch.empty(ctx.n, ctx.n, dtype=ctx.dtype, device=ctx.device) for k in keys}
    d_ff, d = ctx.p.w_out.shape
    fin = FFInputs(ctx)
    for rows in ctx.row_chunks((3 * d_ff + 6 * d) * ctx.rec.x.element_size()):
        vec = ff_vectors(ctx, rows, fin)
        for k in keys:
            out[k][rows] = vec[k][0].norm(dim=-1)
    return out


def compute(inputs: Inputs, keys, options) -> Output:
    return Output(per_layer(inputs, NAME, keys, lambda ctx: ff_maps(ctx, keys)))
