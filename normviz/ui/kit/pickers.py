"""Explore's map picker: the maps shown side by side, in three rows of pills."""

from __future__ import annotations

import streamlit as st

from ...methods import keyspace
from . import data
from .session_view import seed

PILL_KEYS = {"per layer": "w_maps", "across layers": "w_maps_across", "alternatives": "w_maps_alt"}
HELPS = {
    "per layer": "Kobayashi et al.: one layer's attention block, step by step, then the feed-forward block.",
    "across layers": "Maps chained through the layers up to the chosen one: which input tokens a token is made of.",
    "alternatives": "Other methods' per-layer maps, to compare with the norm-based ones.",
}


ALL_HEADS_SAME = "‖Σαf‖ (same as ‖αf‖)"  # the heads-summed pill while all heads are shown (≤ 22 characters)
ALL_HEADS_HELP = (
    " At all heads, ‖α f(x)‖ is the norm of the heads' vectors summed, i.e. ‖Σαf‖ heads summed: the two "
    "pills show the same map (one panel); pick a head to see them differ."
)


def map_picker(
    current: tuple[str, ...], available: list[str], default: list[str], all_heads: bool = False
) -> tuple[str, ...]:
    """The maps shown side by side, picked in three groups (per layer / across layers / alternatives), each
    a row of pills (keys ``w_maps``, ``w_maps_across``, ``w_maps_alt``). Returns them in the order picked.
    ``all_heads``: the layer view is shown, where ``norm`` and ``norm_layer`` are one map — the pill says so."""
    groups = data.grouped(available)
    labels = data.pill_labels(available)
    same = keyspace.same_at_all_heads(available) if all_heads else {}  # per-head key -> its view: one map
    for k, v in same.items():
        labels[v] = ALL_HEADS_SAME if k == "norm" else f"{labels[v]} (same as {labels[k]})"
    chosen = [k for k in current if k in available]
    if not chosen and "w_maps" not in st.session_state:
        chosen = [k for k in default if k in available]
    out: list[str] = []
    for group, options in groups.items():
        if not options:
            continue
        key = PILL_KEYS[group]
        seed(key, [k for k in chosen if k in options])
        st.session_state[key] = list(dict.fromkeys(k for k in st.session_state[key] if k in options))
        picked = st.pills(
            group.capitalize(),
            options,
            selection_mode="multi",
            key=key,
            format_func=labels.get,
            help=HELPS[group] + (ALL_HEADS_HELP if set(same.values()) & set(options) else ""),
        )
        out.extend(picked or [])
    order = {k: i for i, k in enumerate(current)}
    return tuple(sorted(dict.fromkeys(out), key=lambda k: order.get(k, len(order) + out.index(k))))
