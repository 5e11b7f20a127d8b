"""The cross-attention block of an encoder–decoder (Kobayashi et al. 2020 §5: source–target attention of NMT): a
family like any other, on the ``cross`` stack (one view per decoder layer: :class:`CrossDecomposition`).

Decoder layer l, target position i (a row, fed ``tgt_tokens[i]``), source token j (a column, ``src_tokens[j]``),
e_j the encoder's final output (what the block's keys and values read), head h:

    f^h(e_j) = (e_j W^V_h + b^V_h) W^O_h          the block's value→output map, value bias included, b^O not
    y_i      = Σ_h Σ_j α^h_ij f^h(e_j) + b^O       the block's attention output (the model's own vector)

    cross_attention     [L,H,m,n]  α^h_ij (the model's ``cross_attentions``)
    cross_norm          [L,H,m,n]  ‖α^h_ij f^h(e_j)‖ = α^h_ij ‖f^h(e_j)‖
    cross_norm_layer    [L,m,n]    ‖Σ_h α^h_ij f^h(e_j)‖ (head vectors summed, then the norm)
    cross_source_share  [L,m]      ‖c_i‖ / (‖c_i‖ + ‖r_i‖) with c_i = Σ_j Σ_h α^h_ij f^h(e_j) (what the source
                                   adds to target position i; b^O, which no source token owns, is left out) and
                                   r_i the residual stream entering the block, to which y_i is added (post-LN:
                                   the self-attention block's normed output; pre-LN: its residual sum). 0 when
                                   the block adds nothing, near 1 when it swamps the residual; 0/0 gives 0.
"""

from __future__ import annotations

import torch

from ..record.decompose import CHUNK_BYTES, working_dtype
from ..record.encdec.params import CrossParams
from ..record.encdec.record import CrossRecord
from . import papers
from .base import Inputs, KeyInfo, Output, Request, no_check, per_layer
from .family import Family

FAMILY = Family(
    name="cross",
    order=110,
    keys=(
        KeyInfo(
            "cross_attention",
            "Cross-attention weights α",
            True,
            "α^h_ij of target position i over source token j (the model's cross_attentions).",
            short="cross α",
            unit="weight α",
        ),
        KeyInfo(
            "cross_norm",
            "Cross-attention norm ‖α f(e)‖",
            True,
            "‖α^h_ij f^h(e_j)‖, e_j the encoder's final output (Kobayashi et al. 2020 §5).",
            short="cross ‖αf‖",
        ),
        KeyInfo(
            "cross_norm_layer",
            "Cross-attention norm, heads summed",
            False,
            "‖Σ_h α^h_ij f^h(e_j)‖: head vectors summed, then the norm.",
            short="cross ‖Σαf‖",
        ),
        KeyInfo(
            "cross_source_share",
            "Source share of the cross block",
            False,
            "‖c_i‖/(‖c_i‖+‖r_i‖): the cross block's source vector c_i against the residual stream r_i it joins "
            "([L, m], one value per target position).",
            short="source share",
            unit="share (0…1)",
        ),
    ),
    stacks=("cross",),  # its keys carry their stack's name: cross_attention, not a prefix added to attention
    group="per layer",
    references=(papers.KOBAYASHI_2020,),
)
NAMES = tuple(i.key for i in FAMILY.keys)


class CrossDecomposition:
    """One cross block's record seen through its parameters, in the working dtype (a bfloat16/float16 block
    upcast to float32, as the self-attention layers' maps are)."""

    def __init__(self, rec: CrossRecord, params: CrossParams):
        self.rec, self.p = rec, params
        self.dtype, self.device = working_dtype(rec.y.dtype), params.w_o.device  # the layer's device (device_map)
        self.alpha = rec.attn.to(self.device, self.dtype)  # [H, m, n]
        n = rec.v.shape[0]
        values = rec.v.to(self.device, self.dtype).reshape(n, params.n_heads, params.head_dim).transpose(0, 1)
        self.head_vectors = torch.bmm(values, params.head_w_o().to(self.dtype))  # f^h(e_j): [H, n, d]

    @property
    def b_o(self) -> torch.Tensor:
        d = self.head_vectors.shape[-1]
        return (
            self.p.b_o.to(self.dtype)
            if self.p.b_o is not None
            else torch.zeros(d, dtype=self.dtype, device=self.device)
        )

    def parts(self, rows: slice) -> torch.Tensor:
        """Σ_h α^h_ij f^h(e_j) for i in rows: [c, n, d]."""
        return torch.einsum("hij,hjd->ijd", self.alpha[:, rows], self.head_vectors)

    def source_vectors(self) -> torch.Tensor:
        """c_i = Σ_j Σ_h α^h_ij f^h(e_j): [m, d] (y_i − b^O)."""
        return torch.einsum("hij,hjd->id", self.alpha, self.head_vectors)

    def clear(self) -> None:
        """Nothing derived is kept beyond the layer (the interface of :func:`normviz.methods.base.per_layer`)."""

    def row_chunks(self, chunk_bytes: int):
        m, n = self.alpha.shape[1:]
        per_row = n * self.head_vectors.shape[-1] * self.head_vectors.element_size()
        c = max(1, min(m, chunk_bytes // max(per_row, 1)))
        for start in range(0, m, c):
            yield slice(start, min(m, start + c))


def layer_maps(ctx: CrossDecomposition, keys, chunk_bytes: int) -> dict[str, torch.Tensor]:
    out = {}
    if "cross_attention" in keys:
        out["cross_attention"] = ctx.alpha
    if "cross_norm" in keys:
        out["cross_norm"] = ctx.alpha * ctx.head_vectors.norm(dim=-1)[:, None, :]
    if "cross_norm_layer" in keys:
        out["cross_norm_layer"] = torch.cat([ctx.parts(rows).norm(dim=-1) for rows in ctx.row_chunks(chunk_bytes)])
    if "cross_source_share" in keys:
        c = ctx.source_vectors().norm(dim=-1)
        r = ctx.rec.residual.to(ctx.device, ctx.dtype).norm(dim=-1)
        total = c + r
        out["cross_source_share"] = torch.where(total > 0, c / torch.where(total > 0, total, 1), 0)
    return out


def check(request: Request, key: str, options: dict) -> None:
    no_check(request, key, options)


def compute(inputs: Inputs, keys, options) -> Output:
    """The cross keys asked for, stacked over decoder layers: {key: numpy [L, …]}; ``inputs.layers`` are one
    :class:`CrossDecomposition` per decoder layer."""
    keys = [k for k in NAMES if k in keys]
    chunk = int(options.get("chunk_bytes", CHUNK_BYTES))
    return Output(per_layer(inputs, FAMILY.name, keys, lambda ctx: layer_maps(ctx, keys, chunk)))
