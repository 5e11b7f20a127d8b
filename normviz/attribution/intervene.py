"""Interventions on the model's own forward pass, many in one batched pass.

A batch of B copies of the same input runs through the model once; copy b carries its own change, applied by the
model's own attention function (transformers' ``ALL_ATTENTION_FUNCTIONS`` lookup, wrapped once by
:mod:`normviz.record.attention_interface`), in this thread only:

    edge mask   scores_b + M_b before the softmax, M_b[i, j] = −∞ on the blocked edges (0 elsewhere); the model's
                softmax then renormalises each row over the edges left (the mask is added to the model's own)
    head edit   the head's output before W^O (its α·v, [n, d_head]) replaced by keep·out + fill: keep = 0,
                fill = 0 is zero ablation; keep = 0, fill = a mean vector is mean ablation

Everything else (embeddings, norms, FF, readout) is the model's code unchanged; other threads' passes see the
model's functions unchanged. A row whose attention runs inline (``ArchSpec.attention_call == "inline"``: Falcon)
gets the same edits from hooks on its attention module (the edge mask added to its ``attention_mask`` argument)
and on W^O (the heads' outputs are W^O's input), again in this thread only. :func:`run` returns, per copy, the target's
score: the logit (difference) of a
model with an LM head, or the final hidden state at the position for a model without one.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field

import torch

from ..record import attention_interface

_STATE = threading.local()


@dataclass
class Edits:
    """Changes for one batched pass: per layer index, an additive edge mask [B, 1, n, n] and/or a head edit
    (keep [B, H], fill [B, H, d_head] or None). Layers not named run unchanged."""

    masks: dict[int, torch.Tensor] = field(default_factory=dict)
    keep: dict[int, torch.Tensor] = field(default_factory=dict)
    fill: dict[int, torch.Tensor] = field(default_factory=dict)
    layer_of: dict[int, int] = field(default_factory=dict)  # id(attention module) -> layer index
    sums: dict[int, torch.Tensor] | None = None  # when a dict: each layer's head outputs summed over rows, positions


def _edited(fn, edits: Edits, module, query, key, value, attention_mask, *args, **kwargs):
    layer = edits.layer_of.get(id(module))
    if layer is None:
        return fn(module, query, key, value, attention_mask, *args, **kwargs)
    mask = edits.masks.get(layer)
    if mask is not None:
        mask = mask.to(query.dtype)
        attention_mask = mask if attention_mask is None else attention_mask + mask
    out, weights = fn(module, query, key, value, attention_mask, *args, **kwargs)
    if edits.sums is not None:
        total = out.to(torch.float64).sum((0, 1))
        edits.sums[layer] = total if layer not in edits.sums else edits.sums[layer] + total
    keep = edits.keep.get(layer)
    if keep is not None:  # out [B, n, H, d_head]: the heads' parts before W^O
        out = out * keep.to(out.dtype)[:, None, :, None]
        fill = edits.fill.get(layer)
        if fill is not None:
            out = out + fill.to(out.dtype)[:, None, :, :]
    return out, weights


def _choose(fn):
    edits = getattr(_STATE, "edits", None)
    return fn if edits is None else functools.partial(_edited, fn, edits)


def layer_index(lm) -> dict[int, int]:
    """id(module) → layer index for every module inside each layer (the attention module among them)."""
    return {id(m): index for index, layer in enumerate(lm.layers) for m in layer.modules()}


def model_inputs(lm, encoded, batch: int, ids: torch.Tensor | None = None) -> dict:
    """The forward's keyword arguments for ``batch`` copies of ``encoded`` (``ids`` [batch, n]: other token ids
    of the same length, e.g. with tokens replaced), no padding, no KV cache."""
    if ids is None:
        ids = torch.tensor([encoded.ids], dtype=torch.long).expand(batch, -1)
    ids = ids.to(lm.device)
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if encoded.token_type_ids is not None:
        from ..record.recorder import segment_ids

        types = segment_ids(lm, torch.tensor([encoded.token_type_ids], dtype=torch.long))
        if types is not None:
            kwargs["token_type_ids"] = types.expand(ids.shape[0], -1).to(lm.device)
    if getattr(lm.config, "use_cache", False):
        kwargs["use_cache"] = False
    return kwargs


@torch.no_grad()
def final_states(lm, encoded, i: int, edits: Edits | None, batch: int, ids: torch.Tensor | None = None) -> torch.Tensor:
    """[batch, d]: the model's final hidden state at position ``i`` for ``batch`` copies of ``encoded`` (or of
    ``ids`` [batch, n]), copy b changed by ``edits`` (None: unchanged)."""
    if not attention_interface.add(_choose):  # pragma: no cover - transformers < 5
        raise RuntimeError("this transformers has no attention-function interface (needs transformers >= 5)")
    if edits is not None and not edits.layer_of:
        edits.layer_of = layer_index(lm)
    previous = getattr(_STATE, "edits", None)
    _STATE.edits = edits
    handles = _inline_hooks(lm, edits) if edits is not None and lm.spec.attention_call == "inline" else []
    try:
        out = lm.model(**model_inputs(lm, encoded, batch, ids))
    finally:
        _STATE.edits = previous
        if handles:
            from ..record.recorder import remove_hooks

            remove_hooks(lm.model, handles)
    return out.last_hidden_state[:, i]


def _inline_hooks(lm, edits: Edits) -> list:
    """The edits as hooks (this thread only) for a row whose attention runs inline: each layer's edge mask added
    to its attention module's ``attention_mask`` argument, and the head edits (and sums) applied to W^O's input,
    the heads' outputs side by side [B, n, H·d_head]."""
    from ..models.params import get_path
    from ..record.recorder import add_hooks, owner_only

    spec, H = lm.spec, lm.n_heads
    adders = []
    for index, layer in enumerate(lm.layers):
        mask = edits.masks.get(index)
        if mask is not None:

            def add_mask(module, args, kwargs, mask=mask):
                m = kwargs.get("attention_mask")
                m = mask.to(m.dtype if m is not None else mask.dtype) if m is None else m + mask.to(m.dtype)
                return args, {**kwargs, "attention_mask": m}

            attn = get_path(layer, spec.attn or spec.out.rsplit(".", 1)[0])
            adders.append(
                lambda attn=attn, fn=add_mask: attn.register_forward_pre_hook(owner_only(fn), with_kwargs=True)
            )
        if index in edits.keep or edits.sums is not None:

            def edit(module, args, index=index):
                x = args[0]
                out = x.reshape(*x.shape[:-1], H, x.shape[-1] // H)
                if edits.sums is not None:
                    total = out.to(torch.float64).sum((0, 1))
                    edits.sums[index] = total if index not in edits.sums else edits.sums[index] + total
                keep = edits.keep.get(index)
                if keep is None:
                    return None
                out = out * keep.to(out.dtype)[:, None, :, None]
                fill = edits.fill.get(index)
                if fill is not None:
                    out = out + fill.to(out.dtype)[:, None, :, :]
                return (out.reshape(x.shape),) + tuple(args[1:])

            wo = get_path(layer, spec.out)
            adders.append(lambda wo=wo, fn=edit: wo.register_forward_pre_hook(owner_only(fn)))
    return add_hooks(lm.model, adders)


def scores(readout, states: torch.Tensor, token: int | None, foil: int | None) -> torch.Tensor:
    """The target's score per row of ``states`` [B, d]: logit[token] − logit[foil] (foil None: the logit), in
    float64; without a readout (a model without an LM head) the states themselves."""
    if readout is None:
        return states.to(torch.float64)
    logits = readout.logits(states).to(torch.float64)
    out = logits[:, token]
    return out - logits[:, foil] if foil is not None else out


def chunks(count: int, n_tokens: int, batch_tokens: int):
    """Ranges of at most max(1, batch_tokens // n_tokens) interventions each."""
    step = max(1, int(batch_tokens) // max(1, n_tokens))
    for start in range(0, count, step):
        yield start, min(count, start + step)
