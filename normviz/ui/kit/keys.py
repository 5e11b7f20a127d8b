"""Which map keys a model offers the pages, and their titles (from the families' ``KeyInfo``)."""

from __future__ import annotations

from normviz.core.errors import NormvizError
from normviz.methods import keyspace, registry


def default_keys(lm) -> list[str]:
    """The self-attention keys computed by default for this model's LN placement (a model on the raw-attention
    floor, without an architecture row: its keys, :data:`normviz.models.floor.FLOOR_KEYS`)."""
    if getattr(lm, "note", None):
        from normviz.models.floor import FLOOR_KEYS

        return list(FLOOR_KEYS)
    return registry.all_keys(lm.spec.placement, include_opt_in=False)


def opt_in_keys(lm) -> list[str]:
    """The opt-in (costly) keys for this model's LN placement."""
    if getattr(lm, "note", None):
        return []
    every = registry.all_keys(lm.spec.placement, include_opt_in=True)
    cheap = set(default_keys(lm))
    return [k for k in every if k not in cheap]


def known_keys(lm) -> list[str]:
    """Every map key a session of ``lm`` answers (refused or not): an encoder–decoder's ``encoder_*``,
    ``decoder_*`` and ``cross_*`` keys, or the registry's self-attention keys."""
    if getattr(lm, "is_encoder_decoder", False):
        return keyspace.all_keys(lm)
    return registry.all_keys()


def title(key: str) -> str:
    try:
        return keyspace.key_info(key).title
    except NormvizError:
        return key


def clamp_head(head: int | None, lm) -> int | None:
    """``head`` within ``lm``'s heads (None, all heads, is kept)."""
    return head if head is None or head < lm.n_heads else lm.n_heads - 1


def why_not_offered(key: str) -> str:
    """Why a map key named by a link or a talk's step is not among a self-attention model's offered maps:
    another LN placement's map, an encoder–decoder's map, or no map of that name."""
    if key in registry.all_keys():
        placements = keyspace.key_info(key).placements
        if len(placements) == 1:
            return f"a map of {placements[0]}-LN models only"
        return "not offered for this model"
    if key in registry.all_keys(stack=None) or key.startswith(("encoder_", "decoder_", "cross_")):
        return "an encoder–decoder's map (the Translate page)"
    return "no map has this name"
