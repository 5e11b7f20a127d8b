"""The feed-forward block split into token contributions (Kobayashi et al. 2024): ff, ff_res, ff_res_ln.

The FF input of token i is the normed attention output, Σ_j ℓ_ij + bias_i (see :mod:`normviz.record.decompose`).
The pre-activation is linear in it, so its parts are ℓ_ij W_in (the bias part takes the biases). The
element-wise activation is split by integrated gradients from a zero baseline along the straight path,
exact in closed form (:mod:`normviz.core.activations`): part c gets p_c·g(p)/p; a SwiGLU unit silu(a)·b with
a = Σ a_c, b = Σ b_c gives part c  a_c·b·∫₀¹t·silu′(ta)dt + b_c·∫₀¹silu(ta)dt. Then W_out.

  ff         ‖FF part of j in i‖                                   [L, n, n]
  ff_res     ‖FF part + the residual's part‖ (pre-LN: the whole layer)
  ff_res_ln  post-LN only: norm_after_ff decomposed like attn_res_ln; the whole layer

O(n²·d·d_ff) per layer by nature (causal models: the n(n+1)/2 pairs i ≥ j): :func:`ff_maps` computes the
norms in chunks of bounded memory, each one GEMM through W_out; :func:`ff_vectors` gives the per-pair
vectors themselves. ``check`` refuses an input whose estimated time exceeds the option ``feedforward_budget_s`` (or
``ff_budget_s``)
(seconds; no limit by default), estimated from :func:`flops` at the FF rate of :data:`normviz.methods.cost.RATES`
(option ``ff_flops_per_second``).
"""

from __future__ import annotations

import torch

from ..core.activations import activation_ratio, gate_factors, half_slope, path_integral
from ..core.errors import NotApplicableError
from . import papers
from .base import Budget, Inputs, KeyInfo, Output, Request, per_layer, refuse_over_budget
from .family import Family

FAMILY = Family(
    name="feedforward",
    order=30,
    keys=(
        KeyInfo(
            "ff",
            "Feed-forward",
            False,
            "The FF output split into token parts: linear before the activation, integrated gradients through it "
            "(2024).",
            short="FF",
        ),
        KeyInfo(
            "ff_res",
            "Feed-forward + residual",
            False,
            "FF parts plus the residual around the FF (pre-LN: the whole layer).",
            short="FF + residual",
        ),
        KeyInfo(
            "ff_res_ln",
            "Feed-forward + residual + norm (whole layer)",
            False,
            "Post-LN only: the norm after FF + residual decomposed: the whole layer.",
            placements=("post",),
            short="whole layer",
        ),
    ),
    group="per layer",
    budget=Budget(
        "feedforward",
        aliases=("ff_budget_s",),
        rates="feedforward",  # option feedforward_budget_s
        setting="NORMVIZ_FF_BUDGET",
    ),
    heavy=True,  # costly: the public app computes it in the worker process (normviz.workers.process)
    per_layer=True,  # compute() serves any subset of layers: Session.map computes one
    computed_together=True,  # the stages share the per-pair vectors: asking for one key computes them all
    references=(papers.KOBAYASHI_2024,),
)


def flops(request: Request) -> float:
    """Multiply-adds ×2 of the FF maps over the n² pairs (n(n+1)/2 causal), per layer and pair: the W_out
    product 2·d_ff·d, the mixing of the pre-activation parts 2·H·d_ff (gated: gate and up, twice) and of the
    residual 2·H·d. (Not counted: the per-layer projections through W_in, O(n·H·d·d_ff), and element-wise work.)"""
    n = request.n_tokens
    pairs = n * (n + 1) / 2 if request.causal else n * n
    d, d_ff, heads = request.d_model, request.d_ff, request.n_heads
    return 2.0 * request.n_layers * pairs * (d_ff * d + heads * d_ff * (2 if request.gated else 1) + heads * d)


def check(request: Request, key: str, options: dict) -> None:
    if request.ff_refusal:  # e.g. a gated ReLU (gated SiLU, GELU, GELU-tanh are split; self-attention models: at load)
        raise NotApplicableError(f"{key!r} needs the feed-forward split, which is not available: {request.ff_refusal}.")
    refuse_over_budget(
        request,
        f"The feed-forward maps ({key})",
        options,
        FAMILY.budget,
        flops,
        note="Or pick maps without the feed-forward block, or raise the budget.",
    )


# ---------------------------------------------------------------- per-pair vectors of one layer
class FFInputs:
    """What every row chunk of one layer reuses: the FF input (the norm's output by the parts' own formula,
    ``ctx.ln_attn_out``) and the head vectors pushed through the FF input projection(s), so that the pre-activation
    parts
    are Σ_h α·q / s."""

    def __init__(self, ctx):
        p = ctx.p
        self.total = ctx.ln_attn_out
        mats = {"in": p.w_in} if p.ff_kind == "mlp" else {"in": p.w_in, "up": p.w_up}
        self.projected = {k: (ctx.head_vectors_ln @ w, ctx.x_ln @ w) for k, w in mats.items()}


def _pre_activation_parts(
    ctx, key: str, w: torch.Tensor, b: torch.Tensor | None, rows: slice, ln_bias: torch.Tensor, fin: FFInputs
):
    q, xq = fin.projected[key]
    ff_input = fin.total
    s = ctx.ln_scale[rows]
    parts = ctx.ff_mix(q, xq, rows) / s[:, None, None]
    bias = ln_bias @ w
    total = ff_input[rows] @ w
    if b is not None:
        bias = bias + b
        total = total + b
    return parts, bias, total


def unit_factors(ctx, total: torch.Tensor, up_total: torch.Tensor | None = None) -> list[torch.Tensor]:
    """The integrated-gradients factors [rows, d_ff] that multiply the pre-activation parts, from the real
    pre-activation(s) of the rows: mlp [g(p)/p]; SwiGLU [b·∫₀¹t·silu′(ta)dt, ∫₀¹silu(ta)dt] for the gate
    parts a_c and the up parts b_c (gate pre-activation a, up pre-activation b)."""
    if up_total is None:
        return [activation_ratio(ctx.p.act, total)]
    if ctx.acc == torch.float64:  # GELU gates: one compiled pass (the formulas below, per value, in float64)
        fused = gate_factors(ctx.p.act, total, up_total)
        if fused is not None:
            return [f.to(ctx.dtype) for f in fused]
    a = total.to(ctx.acc)
    i2 = path_integral(ctx.p.act, a)  # ∫_0^1 g(t a) dt
    a_i1 = ctx.p.act(a) - i2  # a·∫_0^1 t·g′(t a) dt, by parts
    safe = torch.where(a == 0, torch.ones_like(a), a)
    i1 = torch.where(a == 0, torch.full_like(a, half_slope(ctx.p.act)), a_i1 / safe)  # limit g′(0)/2
    b = up_total.to(ctx.acc)
    up_value = getattr(ctx.p.act, "up_value", None)
    if up_value is not None:  # a clamped up (GPT-OSS): value K(b); its parts scaled by K/b at the real b
        k = up_value(b)
        ratio = torch.where(k == b, torch.ones_like(b), k / torch.where(b == 0, torch.ones_like(b), b))
        return [(k * i1).to(ctx.dtype), (i2 * ratio).to(ctx.dtype)]
    return [(b * i1).to(ctx.dtype), i2.to(ctx.dtype)]


def out_rows(ctx, factors: list[torch.Tensor], rows: slice | None = None) -> list[torch.Tensor]:
    """The factors times 1/s_i of a norm P_f on the FF output (Gemma 2/3, OLMo-2; its γ is in W_out), so that
    the FF parts are what reaches the residual stream; unchanged without one."""
    c, gates = ctx.ff_row_scale, ctx.unit_gates  # gates: a mixture of experts' frozen router weights per unit
    if gates is not None:
        gates = gates if rows is None else gates[rows]
        factors = [f * gates.to(f.dtype) for f in factors]
    if c is None:
        return factors
    c = c if rows is None else c[rows]
    return [f * c[:, None].to(f.dtype) for f in factors]


def ff_vectors(ctx, rows: slice, fin: FFInputs | None = None) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Per-pair vectors of ff, ff_res (and ff_res_ln post-LN) for rows, with their bias terms."""
    fin = fin or FFInputs(ctx)
    p = ctx.p
    ln_parts, ln_bias = ctx.attn_res_ln_vectors(rows)
    pa, pb, ptot = _pre_activation_parts(ctx, "in", p.w_in, p.b_in, rows, ln_bias, fin)
    if p.ff_kind == "mlp":
        (r,) = out_rows(ctx, unit_factors(ctx, ptot), rows)
        attr = pa * r[:, None, :]
        attr_b = pb * r
    else:
        ua, ub, utot = _pre_activation_parts(ctx, "up", p.w_up, p.b_up, rows, ln_bias, fin)
        coef_gate, coef_up = out_rows(ctx, unit_factors(ctx, ptot, utot), rows)
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


# ---------------------------------------------------------------- norms only (the maps)
STAGES = ("ff", "ff_res", "ff_res_ln")


def _stages(ctx, keys) -> int:
    """How many of the stages ff → ff_res → ff_res_ln :func:`ff_maps` builds for `keys`."""
    wanted = [STAGES.index(k) for k in keys if k in STAGES and (k != "ff_res_ln" or ctx.p.norm_on_ff_residual)]
    return max(wanted) + 1 if wanted else 0


def _bytes_per_cell(ctx, stages: int = 3) -> int:
    """What one pair (i, j) holds at once in :func:`ff_maps`: the mixed pre-activation part(s) (d_ff each) and
    one d-vector per stage."""
    d_ff, d = ctx.p.w_out.shape
    return ((1 if ctx.p.ff_kind == "mlp" else 2) * d_ff + stages * d) * ctx.rec.x.element_size()


def rows_per_chunk(ctx, keys=STAGES) -> int:
    """Sending tokens per chunk of :func:`ff_maps` (each chunk: one [that·n, d_ff] @ [d_ff, d] GEMM)."""
    return next(iter(ctx.row_chunks(_bytes_per_cell(ctx, _stages(ctx, keys))))).stop


def ff_maps(ctx, keys) -> dict[str, torch.Tensor]:
    """Norms ‖part_ij‖ of the FF stages in `keys`, [n, n] each: the parts of :func:`ff_vectors` without their
    bias terms. The residual is one more head, with attention δ_ij and head vector N(x_j) (x_j pre-LN), so

      m_ij  = Σ_h' α^h'_ij q^h'_j                 q^h' = N(f^h') W_in (per layer: one GEMM)
      ff_ij = (m_ij ⊙ r_i / s_i) W_out            r_i: :func:`unit_factors` (SwiGLU: Σ over the gate's and up's m)
      ff_res_ij = ff_ij + Σ_h' α^h'_ij N(f^h'_j) / s_i  (pre-LN: f^h'_j, no 1/s_i);  ff_res_ln_ij = ‖N2(ff_res_ij)‖/s2_i

    in chunks of sending tokens j, held as [j, i, ·]: each mixing is one bmm over j that reads each q_j once
    per layer, the W_out product one [c·n, d_ff] @ [d_ff, d] GEMM, the stages' vectors side by side in one
    buffer for one norm call. Rows i whose parts from the chunk are exactly zero (no attention to it, not in
    it: causal models' i < j) are skipped; their norms are 0."""
    stages = _stages(ctx, keys)
    if not stages:
        return {}
    p, n, dt = ctx.p, ctx.n, ctx.dtype
    d_ff, d = p.w_out.shape
    eye = torch.eye(n, dtype=dt, device=ctx.device)
    alpha = torch.cat([ctx.mix_alpha, eye[None]]).permute(2, 1, 0).contiguous()  # [j, i, h'], h' = heads + residual
    first_row = (alpha != 0).any(dim=2).to(torch.int8).argmax(dim=1).tolist()  # per j: the first i it reaches
    ff_alpha = alpha
    if p.parallel:  # the FF reads the layer input: each token's own residual only
        ff_alpha = torch.zeros_like(alpha)
        ff_alpha[..., -1] = alpha[..., -1]
    heads_ln = torch.cat([ctx.head_vectors_ln, ctx.x_ln[None]]).transpose(0, 1).contiguous()  # [j, h', d]
    ff_input = ctx.ln_attn_out
    inputs = [(p.w_in, p.b_in)] + ([(p.w_up, p.b_up)] if p.ff_kind != "mlp" else [])
    totals = [ff_input @ w + b if b is not None else ff_input @ w for w, b in inputs]
    factors = [f / ctx.ln_scale[:, None] for f in out_rows(ctx, unit_factors(ctx, *totals))]
    projected = [(heads_ln.view(-1, d) @ w).view(n, -1, d_ff) for w, _ in inputs]  # [j, h', d_ff], one GEMM each
    if stages > 1 and ctx.residual_from_norm:  # ℓ_ij: the attention residual's parts through its norm
        res_alpha, res_heads = alpha / ctx.ln_scale[None, :, None], heads_ln
    elif stages > 1:  # u_ij
        res_alpha = alpha
        res_heads = torch.cat([ctx.head_vectors, ctx.rec.x[None]]).transpose(0, 1).contiguous()
    norm2 = p.norm_on_ff_residual
    norms = torch.zeros(stages, n, n, dtype=dt, device=ctx.device)  # [stage, j, i]
    chunk = rows_per_chunk(ctx, keys) * n
    mixed = [
        ctx.workspace.buffer(f"ff_m{k}", (chunk * d_ff,), dt, ctx.device, pooled=False) for k in range(len(inputs))
    ]
    vectors = ctx.workspace.buffer("ff_vectors", (stages * chunk * d,), dt, ctx.device, pooled=False)
    for cols in ctx.row_chunks(_bytes_per_cell(ctx, stages)):  # the same slices, of sending tokens j
        first = min(first_row[cols])
        c, m = cols.stop - cols.start, n - first
        vec = vectors[: stages * c * m * d].view(stages, c, m, d)
        attr = None
        for q, r, buf in zip(projected, factors, mixed):
            mk = torch.bmm(ff_alpha[cols, first:], q[cols], out=buf[: c * m * d_ff].view(c, m, d_ff))
            mk *= r[first:]
            attr = mk if attr is None else attr.add_(mk)
        torch.mm(attr.view(c * m, d_ff), p.w_out, out=vec[0].view(c * m, d))
        if stages > 1:
            torch.baddbmm(vec[0], res_alpha[cols, first:], res_heads[cols], out=vec[1])
        if stages > 2:  # N2's linear part: γ⊙(u − mean u) (LayerNorm) or γ⊙u; 1/s2_i below
            if norm2.kind == "layernorm":
                torch.sub(vec[1], vec[1].mean(-1, keepdim=True), out=vec[2])
                vec[2] *= norm2.weight
            else:
                torch.mul(vec[1], norm2.weight, out=vec[2])
        norms[:, cols, first:] = torch.linalg.vector_norm(vec, dim=-1)
    out = {k: norms[STAGES.index(k)].T.contiguous() for k in keys if k in STAGES[:stages]}
    if "ff_res_ln" in out:
        out["ff_res_ln"] /= norm2.scale(ctx.rec.z_ff)[:, None]
    return out


def compute(inputs: Inputs, keys, options) -> Output:
    out = per_layer(inputs, FAMILY.name, keys, lambda ctx: ff_maps(ctx, keys))
    inputs.layers[0].workspace.release()  # the chunk buffers go now, not with the session
    return Output(out)
