"""The residual stream of a pre-LN stack at one position, split into what each component wrote into it.

    x^L_i = x^0_i + Σ_l ( Σ_h Σ_j α^{l,h}_ij f^{l,h}(x̂^l_j) + b^O_l + FF_l(i) )

with f^{l,h}(x̂) = (x̂ W^V_h + b^V_h) W^O_h (x̂ the layer's input norm output; GQA: the head's shared kv
head), exactly the norm maps' head vectors (:class:`normviz.record.decompose.LayerDecomposition`), and FF_l(i) the whole
FF block's output at i, biases included (x^{l+1}_i − z_i). Decoder layers of a pre-LN encoder–decoder add the
cross block: Σ_h Σ_j β^{l,h}_ij g^{l,h}(e_j) + b^O_cross (e the encoder's output).

:func:`layer_parts` gives these vectors per layer (the interface that routes and pages build on; one layer at
a time, bounded memory); :func:`direct_logits` their projections ⟨N(c), u⟩ = ⟨c, r⟩ on the readout vector r
(:meth:`normviz.attribution.readout.Readout.vector`), without building the [H, n, d] head vectors: per layer
O(H·n·dh) after the head values, far below the forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LayerParts:
    """What layer ``layer`` wrote into the residual stream at the rows ``rows`` (receiving positions), in d-vectors.

    residual [r, d]        x^l_i, the layer's input (the residual stream entering it)
    heads    [r, H, n, d]  α^h_ij f^h(x̂_j): head h through source token j
    attn_bias [d]          b^O (zero when the model has none)
    cross    [r, H, n_src, d] | None   pre-LN encoder–decoder decoders: β^h_ij g^h(e_j)
    cross_bias [d] | None
    ff       [r, d]        the FF block's output (its biases included)
    out      [r, d]        x^{l+1}_i, the layer's output = residual + heads.sum((1, 2)) + attn_bias
                           (+ cross.sum((1, 2)) + cross_bias) + ff, exactly
    """

    layer: int
    rows: torch.Tensor
    residual: torch.Tensor
    heads: torch.Tensor
    attn_bias: torch.Tensor
    ff: torch.Tensor
    out: torch.Tensor
    cross: torch.Tensor | None = None
    cross_bias: torch.Tensor | None = None


def _rows(rows, n: int, device) -> torch.Tensor:
    if rows is None:
        return torch.arange(n, device=device)
    if isinstance(rows, int):
        rows = [rows]
    return torch.as_tensor(rows, device=device).reshape(-1) % n


def layer_parts(ctx, rows=None, cross=None) -> LayerParts:
    """The parts of one pre-LN layer (``ctx`` a :class:`~normviz.record.decompose.LayerDecomposition`) at ``rows``
    (an index, indices, or None: every position). ``cross``: (CrossRecord, CrossParams) of an encoder–decoder
    decoder layer. Memory: len(rows)·H·n·d numbers."""
    if ctx.p.norm_on_input is None:
        raise ValueError("layer_parts: the direct path needs a pre-LN layer")
    r = _rows(rows, ctx.n, ctx.device)
    heads = ctx.mix_alpha[:, r].permute(1, 0, 2)[..., None] * ctx.head_vectors[None]  # [r, H, n, d]
    out = ctx.rec.out[r]
    z_ff = ctx.rec.z_attn[r] if cross is None else cross[0].z[r]
    c = cb = None
    if cross is not None:
        c = _cross_parts(*cross, r)
        cb = _bias(cross[1].b_o, ctx)
    return LayerParts(
        layer=ctx.index,
        rows=r,
        residual=ctx.rec.x[r],
        heads=heads,
        attn_bias=ctx.b_o,
        ff=out - z_ff,
        out=out,
        cross=c,
        cross_bias=cb,
    )


def cross_head_vectors(rec, params) -> torch.Tensor:
    """g^h(e_j) = (e_j W^V_h + b^V_h) W^O_h of a cross block, [H, n_src, d], from the recorded values."""
    H, dh = params.n_heads, params.head_dim
    v = rec.v.reshape(rec.v.shape[0], H, dh).transpose(0, 1)
    return torch.bmm(v.to(params.w_o.dtype), params.head_w_o())


def _cross_parts(rec, params, r) -> torch.Tensor:
    return rec.attn[:, r].permute(1, 0, 2).to(params.w_o.dtype)[..., None] * cross_head_vectors(rec, params)[None]


def _alpha_row(ctx, i: int) -> torch.Tensor:
    """α^h_i· [H, n]: the recorded row, or a long input's row alone recomputed from q, k (never its whole α)."""
    c = ctx.attn_row_scale  # a norm P_a after the attention: its 1/s_i at the receiving row
    if ctx.rec.attn is not None or "alpha" in ctx.__dict__:
        row = ctx.alpha[:, i]
    else:
        row = ctx.rec.attention(slice(i, i + 1))[:, 0].to(ctx.dtype)
    return row if c is None else row * c[i]


def expert_outputs(ctx, i: int) -> torch.Tensor | None:
    """A mixture of experts' FF output at row i split by expert, [E, d] (a shared expert last): each expert's gated
    units at the real FF input, × the router's frozen weight of that expert at i (0 where it was not chosen; GPT-OSS:
    its down bias included, one unit of its own), through W_out (and 1/s_i of a norm after the FF, its γ in W_out).
    The rows sum to the block's output FF(i) up to the model's own rounding. None for a dense FF layer."""
    p = ctx.p
    if p.expert_units is None:
        return None
    h = ctx.ln_attn_out[i]
    a = h @ p.w_in + (p.b_in if p.b_in is not None else 0)
    b = h @ p.w_up + (p.b_up if p.b_up is not None else 0)
    up_value = getattr(p.act, "up_value", None)
    value = p.act(a) * (up_value(b) if up_value is not None else b) * ctx.unit_gates[i]
    if ctx.ff_row_scale is not None:
        value = value * ctx.ff_row_scale[i]
    parts = value[:, None] * p.w_out  # [U, d]
    return torch.stack([chunk.sum(0) for chunk in parts.split(list(p.expert_units))])


def _bias(b, ctx) -> torch.Tensor:
    return b if b is not None else torch.zeros(ctx.rec.x.shape[-1], dtype=ctx.dtype, device=ctx.device)


@dataclass
class DirectLogits:
    """⟨c, r⟩ for the parts of :func:`layer_parts` at one row, every layer, float64 numpy-ready tensors."""

    embedding: float
    heads: torch.Tensor  # [L, H, n]
    attn_bias: torch.Tensor  # [L]
    ff: torch.Tensor  # [L]
    cross_heads: torch.Tensor | None = None  # [L, H, n_src]
    cross_bias: torch.Tensor | None = None  # [L]
    ff_by_expert: torch.Tensor | None = None  # [L, E] mixtures of experts (:func:`expert_outputs`); NaN: dense layers


def direct_logits(views, i: int, r: torch.Tensor, crosses=None) -> DirectLogits:
    """Every component's direct part of the readout at row i, projected on the readout vector r [d]
    (float64): heads α^h_ij ⟨v^h_j, W^O_h r⟩, b^O·r, FF_l(i)·r, x^0_i·r. ``crosses``: per layer
    (CrossRecord, CrossParams) of a pre-LN encoder–decoder decoder."""
    acc = torch.float64
    heads, attn_bias, ff, cross_heads, cross_bias = [], [], [], [], []
    experts: list = []
    for l, ctx in enumerate(views):
        rl = r.to(device=ctx.device, dtype=acc)
        w_or = torch.einsum("hed,d->he", ctx.p.head_w_o().to(acc), rl)  # W^O_h r, [H, dh]
        values = ctx.head_values.to(acc)  # [H, n, dh], the model's own values
        heads.append(_alpha_row(ctx, i).to(acc) * torch.einsum("hjd,hd->hj", values, w_or))
        attn_bias.append(ctx.b_o.to(acc) @ rl)
        z = ctx.rec.z_attn[i] if crosses is None else crosses[l][0].z[i]
        ff.append((ctx.rec.out[i] - z).to(acc) @ rl)
        experts.append(expert_outputs(ctx, i) if crosses is None else None)
        if experts[-1] is not None:
            experts[-1] = (experts[-1].to(acc) @ rl).cpu()
        if crosses is not None:
            rec, params = crosses[l]
            H, dh = params.n_heads, params.head_dim
            v = rec.v.reshape(rec.v.shape[0], H, dh).transpose(0, 1).to(acc)
            c_or = torch.einsum("hed,d->he", params.head_w_o().to(acc), rl)
            cross_heads.append(rec.attn[:, i].to(acc) * torch.einsum("hjd,hd->hj", v, c_or))
            cross_bias.append(_bias(params.b_o, ctx).to(acc) @ rl)
        ctx.clear()
    emb = float(views[0].rec.x[i].to(acc) @ r.to(device=views[0].device, dtype=acc))
    out = DirectLogits(
        embedding=emb,
        heads=torch.stack([h.cpu() for h in heads]),
        attn_bias=torch.stack([a.cpu() for a in attn_bias]),
        ff=torch.stack([f.cpu() for f in ff]),
    )
    if any(e is not None for e in experts):
        width = max(len(e) for e in experts if e is not None)
        out.ff_by_expert = torch.stack(
            [e if e is not None else torch.full((width,), float("nan"), dtype=acc) for e in experts]
        )
    if crosses is not None:
        out.cross_heads = torch.stack([c.cpu() for c in cross_heads])
        out.cross_bias = torch.stack([c.cpu() for c in cross_bias])
    return out
