"""The right-hand side of Explore's side-by-side comparison: a second text, or a second model."""

from __future__ import annotations

import streamlit as st

from normviz.methods import registry

from ..kit import data
from ..kit.fetch import get_maps, session_for
from ..kit.keys import clamp_head
from ..kit.loading import load_model
from ..kit.safe import plain
from ..kit.state import ViewState


def comparison(view: ViewState, lm, keys: list[str]):
    """(what it is, analysis, panels, model, session) with the same maps, layer and head as the left (clamped
    to the second model's size, with a note), or None after a message."""
    if view.compare == "text":
        if not view.text_b.strip():
            st.info("Type the second text in the sidebar to compare.")
            return None
        lm_b, text, pair, name = lm, view.text_b, "", "the second text"
    else:
        lm_b = load_model(view.model_b)
        if lm_b is None:
            return None
        text, pair, name = view.text, view.pair, lm_b.name
    session = session_for(lm_b, text, pair)
    if session is None:
        return None
    placement_ok = [k for k in keys if k in registry.all_keys(lm_b.spec.placement)]
    b = get_maps(session, placement_ok)
    if b is None:
        return None
    layer = min(view.layer, lm_b.n_layers - 1)
    head = clamp_head(view.head, lm_b)
    if (layer, head) != (view.layer, view.head):
        st.caption(
            plain(
                f"{name} has {lm_b.n_layers} layers × {lm_b.n_heads} heads: its side shows layer {layer}"
                + ("" if head is None else f", head {head}")
                + ".",
                None,
            )
        )
    panels = data.build_panels(b, [k for k in placement_ok if k in b], layer, head, view.hide_special, view.values)
    return name, b, panels, lm_b, session
