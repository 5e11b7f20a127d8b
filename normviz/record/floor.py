"""The recording pass of a model on the raw-attention floor (:mod:`normviz.models.floor`): no architecture row, so
nothing inside a block is hooked. One forward pass with ``output_attentions``; each block's input x and output
are hooked (the residual stream the logit lens reads), the stack's final hidden state is the model's own.

Each record has x, attn (α as the model returned it), out, and on the last layer final; z_attn, z_ff, v and
the call are None. The per-layer views (:class:`FloorLayer`) give α to the weights family and refuse, with the
floor's note, anything that needs the layer's parameters.
"""

from __future__ import annotations

from functools import cached_property

import torch

from ..core.errors import NotApplicableError, UnsupportedModelError
from ..models.floor import note_of
from .decompose import CHUNK_BYTES, LayerDecomposition, Workspace
from .recorder import Hooks, LayerRecord


@torch.no_grad()
def record(
    lm, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
) -> list[list[LayerRecord]]:
    """records[b][layer] of one right-padded batch, cut to each sequence's length."""
    store: dict = {}
    hooks = Hooks(store)
    layers = list(lm.layers)
    for i, layer in enumerate(layers):
        hooks.layer_input(layer, i)
        hooks.output(layer, (i, "out"))
    hooks.install(lm.model)
    kwargs = {}
    if token_type_ids is not None:
        kwargs["token_type_ids"] = token_type_ids.to(lm.device)
    if getattr(lm.config, "use_cache", False):
        kwargs["use_cache"] = False
    try:
        out = lm.model(
            input_ids=input_ids.to(lm.device),
            attention_mask=attention_mask.to(lm.device),
            output_attentions=True,
            **kwargs,
        )
    finally:
        hooks.remove()
    attentions = getattr(out, "attentions", None)
    if attentions is None or len(attentions) != len(layers) or any(a is None for a in attentions):
        raise UnsupportedModelError(
            f"{lm.name!r} returned no attention weights for each of its {len(layers)} blocks with "
            "attn_implementation='eager', so not even its raw attention can be shown."
        )
    final = getattr(out, "last_hidden_state", None)
    records = []
    for b, n in enumerate(attention_mask.sum(-1).tolist()):
        n = int(n)
        records.append(
            [
                LayerRecord(
                    x=store[(i, "x")][b, :n],
                    attn=attentions[i][b, :, :n, :n],
                    z_attn=None,
                    z_ff=None,
                    out=store[(i, "out")][b, :n],
                    final=final[b, :n] if final is not None and i == len(layers) - 1 else None,
                )
                for i in range(len(layers))
            ]
        )
    return records


class FloorLayer(LayerDecomposition):
    """One layer's record on the floor: α (and x, out) only; its parameters are refused with the floor's note."""

    def __init__(
        self,
        rec: LayerRecord,
        note: str,
        index: int = 0,
        chunk_bytes: int = CHUNK_BYTES,
        workspace: Workspace | None = None,
    ):
        super().__init__(rec, None, index=index, chunk_bytes=chunk_bytes, workspace=workspace, residual_from_norm=False)
        self.note = note

    @property
    def p(self):
        raise NotApplicableError(f"this needs the layer's parts: {self.note}")

    def clear(self) -> None:
        """Drop the cached derived tensors (α …) of the base class's cached properties."""
        for name in [k for k, v in vars(LayerDecomposition).items() if isinstance(v, cached_property)]:
            self.__dict__.pop(name, None)


def layer_views(lm, records: list, chunk_bytes: int = CHUNK_BYTES) -> list[FloorLayer]:
    note, workspace = note_of(lm), Workspace()
    return [
        FloorLayer(rec, note, index=i, chunk_bytes=chunk_bytes, workspace=workspace) for i, rec in enumerate(records)
    ]


__all__ = ["FloorLayer", "layer_views", "record"]
