"""The raw-attention floor: a model transformers runs with eager attention but with no architecture row.

A model type with no :func:`~normviz.models.arch.register_architecture` row (bloom, mpt, next month's family), or
one whose row refuses its config (a gated FF with an activation the FF maps cannot split …), still loads. It
gets what needs no knowledge of where its layers' parts live, read from the model's own pass:

    attention            α^h_ij, the attention weights the model returns (``output_attentions``)
    rollout_attention    their rollout (Abnar & Zuidema 2020), computed from them as for every model
    the logit lens       each layer's output through the final norm and the LM head (where there is a head):
                         ``Session.logit_lens``, and ``Session.predict``

That is bertviz's reach: the floor, never a refusal at load. Every other key, ``explain`` (and its sources),
``attend``, the graph, knockout and head ablation are refused per key with ONE note (:func:`note_of`) that names
what is missing: an architecture row. The row is data (docs/models.md, "A new architecture").

What the floor reads from the model is found, not named: the layers are the model's ``ModuleList`` of
``num_hidden_layers`` blocks; the final norm is the norm module of the base model that comes after them (none:
the lens reads the layer outputs through the head alone); the LM head is ``get_output_embeddings()``. The
recording pass (:mod:`normviz.record.floor`) hooks only each block's input and output.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .arch import ArchSpec, ConfigFields

FLOOR_KEYS = ("attention", "rollout_attention")  # the map keys a model without a row gets
FAMILY = "floor"
# the config fields of the window as well (mpt: max_seq_len); without one the window is 512 or the tokenizer's
WINDOW = ConfigFields(window=("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"))


@dataclass(frozen=True)
class FloorSpec(ArchSpec):
    """The row of a model that has none: where its blocks, final norm and LM head were found; ``note`` says what
    it gets and what needs a real row. Nothing but :mod:`normviz.record.floor` and the logit lens reads its paths."""

    note: str = ""
    reason: str | None = None  # why the model's own row (if it has one) does not apply to this config

    def __post_init__(self):  # no norms to name: the floor decomposes nothing
        pass


def is_floor(spec) -> bool:
    return isinstance(spec, FloorSpec)


def note_of(lm) -> str | None:
    """The floor's note of a loaded model, or None when it has a real architecture row."""
    spec = getattr(lm, "spec", None)
    return spec.note if is_floor(spec) else None


def refusal(lm, key: str) -> str | None:
    """Why map key ``key`` (unprefixed) is refused for ``lm`` on the floor, or None (a real row, or a floor key)."""
    note = note_of(lm)
    if note is None or key in FLOOR_KEYS:
        return None
    return f"{key!r} is not available: {note}"


def require_row(lm, what: str) -> None:
    """Raise :class:`~normviz.core.errors.NotApplicableError` when ``lm`` is on the floor: ``what`` (explain,
    attend, the graph …) needs its architecture row."""
    note = note_of(lm)
    if note is not None:
        from ..core.errors import NotApplicableError

        raise NotApplicableError(f"{what} is not available: {note}")


# ---------------------------------------------------------------- finding the parts
def _is_norm(mod: torch.nn.Module) -> bool:
    return "norm" in type(mod).__name__.lower() and (
        getattr(mod, "eps", None) is not None or getattr(mod, "variance_epsilon", None) is not None
    )


def _n_layers(config) -> int | None:
    for name in ("num_hidden_layers", "n_layer", "n_layers", "num_layers"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def find_layers(base: torch.nn.Module, config) -> str | None:
    """The dotted path of the base model's block list: the first ``ModuleList`` of ``num_hidden_layers`` modules
    (else the longest one), or None."""
    n = _n_layers(config)
    lists = [(name, mod) for name, mod in base.named_modules() if isinstance(mod, torch.nn.ModuleList) and name]
    exact = [name for name, mod in lists if len(mod) == n]
    if exact:
        return exact[0]
    if lists:
        return max(lists, key=lambda item: len(item[1]))[0]
    return None


def find_final_norm(base: torch.nn.Module, layers: str) -> tuple[str | None, str]:
    """(path, kind) of the norm the base model applies after its blocks: the last direct child that is a norm
    module and was registered after the block list's top-level child (bloom ``ln_f``, mpt ``norm_f``, Llama
    ``norm``); (None, "layernorm") when there is none."""
    top = layers.split(".")[0]
    after, found = False, None
    for name, mod in base.named_children():
        if name == top:
            after = True
            continue
        if after and _is_norm(mod):
            found = name
    if found is None:
        return None, "layernorm"
    kind = "rmsnorm" if "rms" in type(getattr(base, found)).__name__.lower() else "layernorm"
    return found, kind


def find_head(head_model: torch.nn.Module | None) -> str | None:
    """The dotted path of the LM head (the output embeddings) inside the model with the head, or None."""
    if head_model is None:
        return None
    out = head_model.get_output_embeddings() if hasattr(head_model, "get_output_embeddings") else None
    if out is None:
        return None
    for name, mod in head_model.named_modules():
        if mod is out and name:
            return name
    return None


def causal_of(model: torch.nn.Module, config) -> bool:
    """Whether the model is a decoder (each token sees its prefix): loaded as a causal LM, configured as a
    decoder, or a type transformers knows only as a causal LM."""
    name = type(model).__name__
    if name.endswith(("ForCausalLM", "LMHeadModel")) or getattr(config, "is_decoder", False):
        return True
    if any(str(a).endswith(("ForCausalLM", "LMHeadModel")) for a in (getattr(config, "architectures", None) or ())):
        return True
    try:
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
            MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        )
    except ImportError:  # pragma: no cover - transformers moved them
        return False
    mt = getattr(config, "model_type", None)
    return mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and mt not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def make_note(name: str, model_type: str | None, reason: str | None, has_head: bool) -> str:
    lens = ", and the logit lens and predictions" if has_head else " (no LM head: no logit lens)"
    why = (
        f"{reason}, so {name!r} has no exact architecture row"
        if reason
        else f"{name!r} is a {model_type!r} model, which has no architecture row in normviz"
    )
    return (
        f"{why}: it gets the raw attention weights (attention), their rollout (rollout_attention){lens} "
        "only. Exact maps, explain and its sources, attend, the graph and the interventions need a "
        f"register_architecture({model_type!r}, ArchSpec(…)) row naming where its layers' parts live "
        "(docs/models.md)."
    )


def floor_spec(
    base: torch.nn.Module, head_model: torch.nn.Module | None, config, name: str, reason: str | None = None
) -> FloorSpec:
    """The floor's row of a loaded model (``base``: the base model its blocks live in; ``head_model``: the same
    model with its LM head, or None). Raises UnsupportedModelError when no block list is found."""
    from ..core.errors import UnsupportedModelError

    layers = find_layers(base, config)
    if layers is None:
        raise UnsupportedModelError(
            f"{name!r} ({getattr(config, 'model_type', None)!r}): no list of transformer blocks was found in the "
            "model, so not even its attention weights can be read per layer."
        )
    final, kind = find_final_norm(base, layers)
    head = find_head(head_model)
    causal = causal_of(head_model if head_model is not None else base, config)
    mt = getattr(config, "model_type", None)
    return FloorSpec(
        family=FAMILY,
        placement="pre" if causal else "post",
        causal=causal,
        layers=layers,
        value="",
        out="",
        norm_kind=kind,
        ff_kind="mlp",
        ff_in="",
        ff_out="",
        act="",
        final_norm=final,
        lm_head=head,
        fields=WINDOW,
        note=make_note(name, mt, reason, head is not None),
        reason=reason,
    )


__all__ = [
    "FLOOR_KEYS",
    "FloorSpec",
    "causal_of",
    "find_final_norm",
    "find_head",
    "find_layers",
    "floor_spec",
    "is_floor",
    "make_note",
    "note_of",
    "refusal",
    "require_row",
]
